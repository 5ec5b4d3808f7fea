/* SPDX-License-Identifier: MIT */
#include "unix-socket.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include "fd-util.h"

int cuflag_unix_connect(const char *path, unsigned timeout_s)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_s };
	size_t len = strlen(path);
	int fd;

	if (len >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, path, len + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (timeout_s && (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
			  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0))
		goto fail;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		goto fail;
	return fd;
fail:
	safe_close(fd); /* keeps errno */
	return -errno;
}
