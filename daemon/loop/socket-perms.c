/* SPDX-License-Identifier: MIT */
#include "loop/socket-perms.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"

/* The directory's mode: enterable by the classes the socket lets in. */
static mode_t dir_mode(const struct cuflagd_config *cfg)
{
	if (cfg->socket_gid < 0)
		return 0755; /* the socket's own mode and group decide */
	return 0750 | (cfg->socket_mode & 0007 ? 0005 : 0);
}

void socket_dir_make(const char *path, const struct cuflagd_config *cfg)
{
	char dir[108]; /* a socket path is shorter (sun_path) */
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!slash || slash == path || (size_t)(slash - path) >= sizeof(dir))
		return; /* in the working directory or / */
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	if (mkdir(dir, 0700) == 0) {
		/* Made narrow, then opened to the group: never wider than asked. */
		if ((cfg->socket_gid >= 0 && chown(dir, (uid_t)-1, (gid_t)cfg->socket_gid) < 0) ||
		    chmod(dir, dir_mode(cfg)) < 0)
			log_warn("%s: cannot set its group or mode: %s", dir, strerror(errno));
		return;
	}
	if (errno != EEXIST) {
		log_warn("cannot create %s: %s", dir, strerror(errno));
		return;
	}
	if (cfg->socket_gid >= 0 && stat(dir, &st) == 0 && !(st.st_mode & S_IXOTH) &&
	    !((int64_t)st.st_gid == cfg->socket_gid && (st.st_mode & S_IXGRP)))
		log_warn("%s: the socket's group %lld cannot enter it (mode %04o, group %u)", dir,
			 (long long)cfg->socket_gid, (unsigned)(st.st_mode & 07777),
			 (unsigned)st.st_gid);
}

unsigned socket_umask(const struct cuflagd_config *cfg)
{
	return ~cfg->socket_mode & 0777;
}

int socket_own(const char *path, const struct cuflagd_config *cfg)
{
	if (cfg->socket_gid < 0)
		return 0;
	return chown(path, (uid_t)-1, (gid_t)cfg->socket_gid) < 0 ? -errno : 0;
}
