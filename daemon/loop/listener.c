/* SPDX-License-Identifier: MIT */
#include "loop/listener.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/closer.h"
#include "base/config.h"
#include "base/notify.h"
#include "fd-util.h"
#include "group-name.h"
#include "loop/socket-perms.h"
#include "loop/user-mode.h"
#include "serve/handler.h"
#include "serve/server-state.h"
#include "serve/session.h"
#include "unix-socket.h"

/* ---------------------------------------------------------------- */
/* The listening socket                                              */
/* ---------------------------------------------------------------- */

/*
 * Whether a daemon answers on path. A socket file nobody listens on is stale
 * (ECONNREFUSED) and may be replaced; a live one is never stolen.
 */
static int socket_is_live(const char *path)
{
	/* Non-blocking: a live daemon whose backlog is full says EAGAIN. */
	int fd = cuflag_unix_connect_nonblock(path);

	if (fd >= 0) {
		close(fd);
		return 1;
	}
	return fd == -EAGAIN ? 1 : fd == -ECONNREFUSED || fd == -ENOENT ? 0 : fd;
}

static int listen_on_path(struct server *srv, const char *path)
{
	struct stat st;
	int fd, rc;

	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	/* --user made and checked its own directory (user-mode.c). */
	if (!srv->cfg->user_mode)
		socket_dir_make(path, srv->cfg);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_err("%s exists and is not a socket; not replacing it", path);
			return -EEXIST;
		}
		rc = socket_is_live(path);
		if (rc > 0) {
			log_err("%s: another daemon is listening there", path);
			return -EADDRINUSE;
		}
		if (rc < 0) {
			log_err("%s: cannot tell whether it is in use: %s", path, strerror(-rc));
			return rc;
		}
		log_notice("%s: replacing a stale socket", path);
		if (unlink(path) < 0 && errno != ENOENT)
			return -errno;
	}
	fd = cuflag_unix_bind(path, socket_umask(srv->cfg));
	if (fd < 0)
		return fd;
	rc = socket_own(path, srv->cfg);
	if (rc < 0) {
		log_err("%s: cannot give it group %lld: %s", path, (long long)srv->cfg->socket_gid,
			strerror(-rc));
		unlink(path);
		close(fd);
		return rc;
	}
	if (listen(fd, 128) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	srv->unlink_path = path;
	return fd;
}

/* The socket systemd passed, else one of our own on the configured path. */
int listener_open(struct server *srv)
{
	const struct cuflagd_config *cfg = srv->cfg;

	srv->listen_fd = cfg->socket_path ? -1 : notify_listen_fd();
	if (srv->listen_fd >= 0) {
		/* Passed blocking by default; accept() must never block the loop. */
		int fl = fcntl(srv->listen_fd, F_GETFL);
		if (fl < 0 || fcntl(srv->listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			log_err("cannot make the passed socket non-blocking: %s", strerror(errno));
			return -errno;
		}
		/* --user on a socket its user manager passed (systemd/user/):
		 * this uid only, as on a socket of its own. */
		if (cfg->user_mode)
			srv->own_uid = geteuid();
		log_info("using the socket passed by the service manager%s",
			 cfg->socket_gid >= 0 ? " (its unit sets the group and mode: "
						"--socket-group ignored)" : "");
		return 0;
	}
	const char *path = cfg->socket_path ? cfg->socket_path : CUFLAG_DEFAULT_SOCKET;
	char grp[64];
	int rc;
	if (cfg->user_mode && (rc = user_mode_prepare(srv, &path)))
		return rc;
	srv->listen_fd = listen_on_path(srv, path);
	if (srv->listen_fd < 0) {
		log_err("cannot listen on %s: %s", path, strerror(-srv->listen_fd));
		return srv->listen_fd;
	}
	if (cfg->socket_gid >= 0)
		log_info("listening on %s (mode %04o, group %s)", path, (unsigned)cfg->socket_mode,
			 cuflag_group_name((gid_t)cfg->socket_gid, grp, sizeof(grp), NULL));
	else
		log_info("listening on %s (mode %04o)", path, (unsigned)cfg->socket_mode);
	return 0;
}

void listener_close(struct server *srv)
{
	srv->listen_fd = safe_close(srv->listen_fd);
	if (srv->unlink_path)
		unlink(srv->unlink_path);
	srv->unlink_path = NULL; /* once: the path may be another daemon's next */
}

/* ---------------------------------------------------------------- */
/* Accepting connections                                             */
/* ---------------------------------------------------------------- */

/* Root, or a member of --admin-group (its primary or a supplementary group). */
static int peer_is_admin(const struct server *srv, int fd, const struct ucred *c)
{
	gid_t groups[256];
	socklen_t len = sizeof(groups);
	int64_t admin = srv->cfg->admin_gid;

	if (c->uid == 0)
		return 1;
	if (admin < 0)
		return 0;
	if ((int64_t)c->gid == admin)
		return 1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
		return 0;
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if ((int64_t)groups[i] == admin)
			return 1;
	return 0;
}

/* Whether a new connection of this peer may stay; why not, if not. Root and
 * the admin group are held only to the node's cap, with room of their own
 * beyond it. */
static const char *connection_refusal(struct server *srv, const struct ucred *c, int admin)
{
	struct users *t = &srv->users;
	enum user_refusal r;

	if (admin)
		return t->total[USER_CONNS] >= t->cap[USER_CONNS] + ADMIN_CONNECTIONS
			       ? users_refusal_why(USER_CONNS, USER_NODE_FULL)
			       : NULL;
	r = users_admit(t, user_find(t, c->uid), c->uid, USER_CONNS, 1);
	return r ? users_refusal_why(USER_CONNS, r) : NULL;
}

/* A connection refused before it is a session: the line is its user's. */
static void refuse_connection(struct server *srv, int fd, const struct ucred *c, const char *why)
{
	struct user *u = user_get(&srv->users, c->uid, cuflag_now_ms());

	if (!u || user_log_ok(u, LOG_WARNING))
		log_warn("connection from pid=%d uid=%u refused: %s (%u open)", (int)c->pid,
			 (unsigned)c->uid, why, srv->users.total[USER_CONNS]);
	user_put(&srv->users, u);
	request_refuse_connection(fd, -EUSERS, why);
	closer_close_connection(srv->closer, fd);
}

/* --user: another uid is told so and closed; one line per second or so
 * (another user could connect in a loop). */
static void refuse_stranger(struct server *srv, int fd, const struct ucred *c)
{
	char why[128];

	snprintf(why, sizeof(why), "this cuflagd (--user) serves uid %u only",
		 (unsigned)srv->own_uid);
	if (cuflagd_ratelimit_ok(&srv->rl))
		log_warn("connection from pid=%d uid=%u refused: %s", (int)c->pid,
			 (unsigned)c->uid, why);
	request_refuse_connection(fd, -EACCES, why);
	closer_close_connection(srv->closer, fd);
}

void listener_on_accept(struct server *srv)
{
	for (;;) {
		int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred c = { .pid = -1, .uid = (uid_t)-1, .gid = (gid_t)-1 };
		socklen_t l = sizeof(c);
		const char *why;
		int admin;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && cuflagd_ratelimit_ok(&srv->rl))
				log_err("accept: %s", strerror(errno));
			if (errno == EMFILE || errno == ENFILE) {
				/* Out of fds: the socket stays readable, so stop looking
				 * at it until the next tick instead of spinning on it. */
				struct epoll_event ev = { .events = 0, .data.ptr = &srv->tag_listen };
				epoll_ctl(srv->ep, EPOLL_CTL_MOD, srv->listen_fd, &ev);
				srv->listen_paused = 1;
			}
			return;
		}
		getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &l);
		if (!user_mode_admits(srv, &c)) {
			refuse_stranger(srv, fd, &c);
			continue;
		}
		admin = peer_is_admin(srv, fd, &c);
		why = connection_refusal(srv, &c, admin);
		if (why)
			refuse_connection(srv, fd, &c, why);
		else
			session_accept(srv, fd, &c, admin);
	}
}

void listener_tick(struct server *srv)
{
	if (srv->listen_paused) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &srv->tag_listen };
		if (epoll_ctl(srv->ep, EPOLL_CTL_MOD, srv->listen_fd, &ev) == 0)
			srv->listen_paused = 0;
	}
}
