/* SPDX-License-Identifier: MIT */
#include "loop/user-mode.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"
#include "fd-util.h"
#include "serve/server-state.h"
#include "user-dir.h"

/* The lock, waiting a while for a daemon that is on its way out. */
static int take_lock(const char *lock_path)
{
	uint64_t end = cuflag_now_ms() + USER_LOCK_WAIT_MS;
	int fd = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0) {
		log_err("cannot open %s: %s", lock_path, strerror(errno));
		return -errno;
	}
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			int rc = -errno;
			log_err("cannot lock %s: %s", lock_path, strerror(-rc));
			safe_close(fd);
			return rc;
		}
		if (cuflag_now_ms() >= end) {
			log_err("another cuflagd --user of this user runs (it holds %s): "
				"not starting a second one", lock_path);
			safe_close(fd);
			return -EADDRINUSE;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 2000000 }, NULL);
	}
	return fd;
}

/* The directory of path (n bytes), or -ENAMETOOLONG. */
static int dir_of(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 1;

	if (len >= n)
		return -ENAMETOOLONG;
	if (!slash)
		memcpy(dir, ".", 2);
	else if (len == 0)
		memcpy(dir, "/", 2);
	else {
		memcpy(dir, path, len);
		dir[len] = 0;
	}
	return 0;
}

int user_mode_prepare(struct server *srv, const char **path)
{
	char dir[sizeof(srv->user_path)], lock[sizeof(srv->user_path)], why[512];
	int rc;

	if (srv->cfg->socket_path) {
		snprintf(srv->user_path, sizeof(srv->user_path), "%s", srv->cfg->socket_path);
		rc = dir_of(srv->user_path, dir, sizeof(dir));
	} else {
		rc = cuflag_user_dir(dir, sizeof(dir));
		if (!rc)
			rc = cuflag_user_path(srv->user_path, sizeof(srv->user_path), dir,
					      CUFLAG_USER_SOCKET_NAME);
	}
	if (!rc)
		rc = cuflag_user_path(lock, sizeof(lock), dir, CUFLAG_USER_LOCK_NAME);
	if (rc) {
		log_err("--user: the socket's directory makes a path too long for a socket");
		return rc;
	}
	/* Only the user's own directory: nobody else may reach the socket,
	 * replace it or hold its lock. */
	rc = cuflag_user_dir_check(dir, 1, why, sizeof(why));
	if (rc) {
		log_err("--user: %s", why);
		return rc;
	}
	rc = take_lock(lock);
	if (rc < 0)
		return rc;
	srv->user_lock_fd = rc;
	srv->own_uid = geteuid();
	*path = srv->user_path;
	log_info("serving uid %u only (--user), exit after %u s with no connection%s",
		 (unsigned)srv->own_uid, srv->cfg->exit_idle_s,
		 srv->cfg->exit_idle_s ? "" : " (never: --exit-idle 0)");
	return 0;
}

int user_mode_admits(const struct server *srv, const struct ucred *c)
{
	return !srv->cfg->user_mode || c->uid == srv->own_uid;
}

int idle_exit_due(uint32_t exit_idle_s, uint32_t connections, uint64_t now_ms,
		  uint64_t *idle_since_ms)
{
	if (!exit_idle_s || connections) {
		*idle_since_ms = 0;
		return 0;
	}
	if (!*idle_since_ms)
		*idle_since_ms = now_ms;
	return now_ms - *idle_since_ms >= (uint64_t)exit_idle_s * 1000u;
}

void user_mode_fini(struct server *srv)
{
	srv->user_lock_fd = safe_close(srv->user_lock_fd);
}
