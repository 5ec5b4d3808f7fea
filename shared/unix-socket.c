/* SPDX-License-Identifier: MIT */
#include "unix-socket.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include "fd-util.h"

static int unix_connect(const char *path, unsigned timeout_s, int type)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_s };
	size_t len = strlen(path);
	int fd;

	if (len >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, path, len + 1);
	fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (timeout_s && (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
			  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0))
		goto fail;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		struct stat st;
		/* Linux refuses a connect to a directory or a file as to a
		 * socket nobody listens on: say which it is. */
		if (errno == ECONNREFUSED && stat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
			errno = ENOTSOCK;
		goto fail;
	}
	return fd;
fail:
	safe_close(fd); /* keeps errno */
	return -errno;
}

const char *cuflag_unix_connect_hint(int err)
{
	switch (err) {
	case -EACCES:
	case -EPERM:
		/* The group is whatever the daemon's unit or --socket-group says
		 * (a pod's may be any): name the packages' one only as such. */
		return "not allowed to use the socket or to enter its directory: join the "
		       "socket's group (ls -l on the socket or its directory shows it; cuflag, "
		       "as the packages set it up: usermod -a -G cuflag $USER, then log in "
		       "again)";
	case -ENOENT:
		return "no socket there: is cuflagd running (systemctl status cuflagd.socket)? "
		       "Else set CUFLAG_SOCKET to the path it listens on";
	case -ECONNREFUSED:
		return "nobody listens on that socket: start cuflagd (or cuflagd.socket)";
	case -ENOTSOCK:
		return "that is not a socket: name the socket itself, such as "
		       "/run/cuflagd/cuflagd.sock, not its directory";
	case -ENAMETOOLONG:
		return "a socket path must be shorter than 108 bytes";
	default:
		return NULL;
	}
}

int cuflag_unix_connect(const char *path, unsigned timeout_s)
{
	return unix_connect(path, timeout_s, SOCK_SEQPACKET);
}

int cuflag_unix_connect_nonblock(const char *path)
{
	return unix_connect(path, 0, SOCK_SEQPACKET | SOCK_NONBLOCK);
}
