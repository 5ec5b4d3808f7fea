/* SPDX-License-Identifier: MIT */
#include "unix-socket.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include "fd-util.h"
#include "group-name.h"

/* Why this thread's last connect was refused, said of that path on this
 * host. The sentences are kept for the life of the process (a few: one per
 * group a refusal named), so a hint handed out never changes or goes. */
static __thread const char *denied;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static char *kept[32];

static void explain_denied(const char *path);

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
	if (errno == EACCES || errno == EPERM)
		explain_denied(path); /* keeps errno */
	return -errno;
}

/* The group of the socket at path or, where this process cannot reach it,
 * of the nearest directory on its way it can see: -1 when neither. */
static int path_group(const char *path, gid_t *gid)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct stat st;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	while (stat(dir, &st) < 0) {
		slash = strrchr(dir, '/');
		if (!slash || slash == dir)
			return -1;
		*slash = 0;
	}
	*gid = st.st_gid;
	return 0;
}

const char *cuflag_hint_keep(const char *text)
{
	const char *found = NULL;
	size_t i;

	pthread_mutex_lock(&kept_lock);
	for (i = 0; i < sizeof(kept) / sizeof(kept[0]) && kept[i] && !found; i++)
		if (!strcmp(kept[i], text))
			found = kept[i];
	if (!found && i < sizeof(kept) / sizeof(kept[0]))
		found = kept[i] = strdup(text);
	pthread_mutex_unlock(&kept_lock);
	return found;
}

int cuflag_unix_path_group(const char *path, char *name, size_t n)
{
	gid_t gid;

	if (path_group(path, &gid) < 0)
		return -ENOENT;
	cuflag_group_name(gid, name, n, NULL);
	return 0;
}

static void explain_denied(const char *path)
{
	int saved = errno, named;
	char name[64], text[512];
	gid_t gid;

	denied = NULL;
	if (path_group(path, &gid) < 0)
		return;
	cuflag_group_name(gid, name, sizeof(name), &named);
	if (gid == 0)
		snprintf(text, sizeof(text),
			 "not allowed to use the socket or to enter its directory: its group is "
			 "root, so only root may (cuflagd --socket-group GROUP lets that group's "
			 "members in)");
	else if (named)
		snprintf(text, sizeof(text),
			 "not allowed to use the socket or to enter its directory: join its group "
			 "%s (as root: usermod -a -G %s USER; the user's next login has it, or "
			 "newgrp %s in a shell)", name, name, name);
	else
		snprintf(text, sizeof(text),
			 "not allowed to use the socket or to enter its directory: its group is "
			 "gid %s, which has no name on this host: run with gid %s among the "
			 "process's groups (in a pod: securityContext.supplementalGroups)",
			 name, name);
	denied = cuflag_hint_keep(text);
	errno = saved;
}

/* systemd is this host's service manager (sd_booted()'s test). */
static int systemd_booted(void)
{
	struct stat st;
	return lstat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

const char *cuflag_unix_connect_hint(int err)
{
	switch (err) {
	case -EACCES:
	case -EPERM:
		if (denied)
			return denied;
		return "not allowed to use the socket or to enter its directory: join the "
		       "socket's group (ls -l on the socket or its directory shows it; cuflag, "
		       "as the packages set it up: usermod -a -G cuflag $USER, then log in "
		       "again)";
	case -ENOENT:
		return systemd_booted()
			       ? "no socket there: is cuflagd running (systemctl status "
				 "cuflagd.socket)? Else set CUFLAG_SOCKET to the path it listens on"
			       : "no socket there: is cuflagd running (as root: cuflagd "
				 "--socket-group GROUP)? Else set CUFLAG_SOCKET to the path it "
				 "listens on";
	case -ECONNREFUSED:
		return systemd_booted() ? "nobody listens on that socket: start cuflagd "
					  "(systemctl start cuflagd.socket)"
					: "nobody listens on that socket: start cuflagd (as root: "
					  "cuflagd --socket-group GROUP)";
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

int cuflag_unix_bind(const char *path, mode_t umask_bits)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t len = strlen(path);
	mode_t old;
	int fd, rc;

	if (len >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, path, len + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Created with its mode from the start: no window where it is wider. */
	old = umask(umask_bits);
	rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
	umask(old);
	if (rc < 0) {
		safe_close(fd); /* keeps errno */
		return -errno;
	}
	return fd;
}

int cuflag_unix_pair(int fds[2])
{
	return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) < 0 ? -errno : 0;
}
