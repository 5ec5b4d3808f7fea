/* SPDX-License-Identifier: MIT */
#include "user-dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cuflag/cuflag.h" /* CUFLAG_DEFAULT_SOCKET */
#include "unix-socket.h"

#define SUN_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

const char *cuflag_node_socket(void)
{
	const char *p = getenv(CUFLAG_NODE_SOCKET_ENV);

	return p && p[0] ? p : CUFLAG_DEFAULT_SOCKET;
}

int cuflag_user_dir(char *dir, size_t n)
{
	const char *run = getenv("XDG_RUNTIME_DIR");
	int len;

	if (run && run[0])
		len = snprintf(dir, n, "%s/cuflag", run);
	else
		len = snprintf(dir, n, "/tmp/cuflag-%u", (unsigned)geteuid());
	/* Room for the longest file name in it, within a socket address. */
	if (len < 0 || (size_t)len >= n ||
	    (size_t)len + 1 + sizeof(CUFLAG_USER_SOCKET_NAME) > SUN_PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

int cuflag_user_path(char *out, size_t n, const char *dir, const char *name)
{
	int len = snprintf(out, n, "%s/%s", dir, name);

	return len < 0 || (size_t)len >= n || (size_t)len >= SUN_PATH_MAX ? -ENAMETOOLONG : 0;
}

int cuflag_node_fallback(const char *node, int err, char *why, size_t n)
{
	char grp[64];

	switch (err) {
	case -ENOENT:
		snprintf(why, n, "no node daemon at %s", node);
		return 1;
	case -ECONNREFUSED:
		snprintf(why, n, "no node daemon listens at %s", node);
		return 1;
	case -EACCES:
	case -EPERM:
		if (cuflag_unix_path_group(node, grp, sizeof(grp)) == 0)
			snprintf(why, n, "not in group %s of the node daemon at %s", grp, node);
		else
			snprintf(why, n, "not allowed to use the node daemon at %s", node);
		return 1;
	default:
		return 0;
	}
}

/* What is wrong with dir as st describes it, or NULL when nothing. */
static const char *not_ours(const struct stat *st)
{
	if (!S_ISDIR(st->st_mode))
		return "not a directory";
	if (st->st_uid != geteuid())
		return "owned by another user";
	if (st->st_mode & 0077)
		return "open to other users (its mode must be 0700)";
	return NULL;
}

int cuflag_user_dir_check(const char *dir, int create, char *why, size_t n)
{
	struct stat st;
	const char *what;
	int fd, rc;

	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(why, n, "cannot make %s: %s", dir, strerror(errno));
		return rc;
	}
	/* Opened without following a link, then judged by what was opened:
	 * a name swapped between a look and a use is never trusted. */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode)) {
			snprintf(why, n, "%s is a symbolic link, not the user's own directory: "
				 "remove it (rm %s) or set XDG_RUNTIME_DIR", dir, dir);
			return -EPERM;
		}
		/* Another's, closed to us: say whose (what lstat says of it is
		 * all that is needed to refuse it). */
		if (rc != -EACCES || lstat(dir, &st) < 0 || !not_ours(&st)) {
			snprintf(why, n, "cannot open %s: %s", dir, strerror(-rc));
			return rc;
		}
	} else {
		rc = fstat(fd, &st) < 0 ? -errno : 0;
		close(fd);
		if (rc) {
			snprintf(why, n, "cannot look at %s: %s", dir, strerror(-rc));
			return rc;
		}
	}
	what = not_ours(&st);
	if (!what)
		return 0;
	snprintf(why, n, "%s is %s (uid %u, mode %04o): not used; %s", dir, what,
		 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
		 st.st_uid != geteuid() ? "set XDG_RUNTIME_DIR to a directory of your own, or "
					  "have its owner remove it"
					: "chmod 0700 it, or set XDG_RUNTIME_DIR");
	return S_ISDIR(st.st_mode) ? -EPERM : -ENOTDIR;
}
