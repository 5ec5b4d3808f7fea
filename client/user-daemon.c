/* SPDX-License-Identifier: MIT */
#include "user-daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autospawn.h"
#include "client-private.h"
#include "unix-socket.h"
#include "user-dir.h"

/* This thread's last failed connect: its error and what to say of it. */
static __thread int hint_err;
static __thread const char *hint_text;

static int failed(int err, const char *text)
{
	hint_err = err;
	hint_text = cuflag_hint_keep(text);
	return err;
}

const char *cuflag__reach_hint(int err)
{
	return err && err == hint_err ? hint_text : NULL;
}

void cuflag__reach_refused(const char *path, int err)
{
	char text[300];

	if (err != -EACCES)
		return;
	snprintf(text, sizeof(text), "the daemon at %s refused this user: it is another user's "
		 "own daemon (cuflagd --user serves its own uid only); use your own, or the node "
		 "daemon", path);
	(void)failed(err, text);
}

/* The user's own daemon, when the node daemon does not serve us (why_node
 * says why, node_err is its connect's error). */
static int reach_user(const char *why_node, int node_err, struct cuflag_reach *r)
{
	const char *node_fix = cuflag_unix_connect_hint(node_err);
	char dir[108], why[1024], text[1600];
	int fd;

	fd = cuflag_user_dir(dir, sizeof(dir));
	if (!fd)
		fd = cuflag_user_path(r->path, sizeof(r->path), dir, CUFLAG_USER_SOCKET_NAME);
	if (fd) {
		snprintf(text, sizeof(text), "%s, and the user's daemon's socket in %s would be "
			 "too long: set XDG_RUNTIME_DIR to a shorter directory", why_node, dir);
		return failed(fd, text);
	}
	fd = cuflag_user_dir_check(dir, 1, why, sizeof(why));
	if (!fd)
		fd = cuflag__user_daemon_connect(dir, r->path, why_node,
						 cuflag__autospawn_allowed(), 0, why, sizeof(why));
	if (fd < 0) {
		/* And what would let the node daemon serve, as true of this host. */
		snprintf(text, sizeof(text), "%s, and no user daemon at %s: %s%s%s", why_node,
			 r->path, why, node_fix ? "; or the node daemon: " : "",
			 node_fix ? node_fix : "");
		return failed(fd, text);
	}
	r->user = 1;
	return fd;
}

int cuflag__reach_connect(const char *socket_path, struct cuflag_reach *r)
{
	const char *node;
	char why[300];
	int fd;

	memset(r, 0, sizeof(*r));
	hint_err = 0;
	if (!socket_path)
		socket_path = getenv(CUFLAG_SOCKET_ENV);
	/* A socket named: that one and no other. */
	if (socket_path && socket_path[0]) {
		if (strlen(socket_path) >= sizeof(r->path))
			return -ENAMETOOLONG;
		strcpy(r->path, socket_path);
		return cuflag_unix_connect(socket_path, CUFLAG_REPLY_TIMEOUT_S);
	}
	node = cuflag_node_socket();
	if (strlen(node) >= sizeof(r->path))
		return -ENAMETOOLONG;
	strcpy(r->path, node);
	fd = cuflag_unix_connect(node, CUFLAG_REPLY_TIMEOUT_S);
	if (fd >= 0 || !cuflag_node_fallback(node, fd, why, sizeof(why)))
		return fd;
	return reach_user(why, fd, r);
}

int cuflag__reach_again(const struct cuflag_client *c, int nonblock)
{
	char dir[sizeof(c->path)], why[1024], *slash;
	int rc;

	if (!c->user_daemon)
		return nonblock ? cuflag_unix_connect_nonblock(c->path)
				: cuflag_unix_connect(c->path, CUFLAG_REPLY_TIMEOUT_S);
	/* The directory it was reached in, checked again: never one that
	 * changed hands since. */
	strcpy(dir, c->path);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	rc = cuflag_user_dir_check(dir, 1, why, sizeof(why));
	return rc ? rc
		  : cuflag__user_daemon_connect(dir, c->path, "a client resumes: its daemon went",
						cuflag__autospawn_allowed(), nonblock, why,
						sizeof(why));
}
