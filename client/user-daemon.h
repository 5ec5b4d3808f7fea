/* SPDX-License-Identifier: MIT */
/*
 * Which daemon a client is served by: the socket it was given, else the
 * node daemon's, else (none there, or not allowed to use it) the user's own
 * daemon, started when none runs; and, when a connect fails, the one line
 * that says what was tried and what fixes it (cuflag_connect_hint()).
 */
#ifndef CUFLAG_USER_DAEMON_H
#define CUFLAG_USER_DAEMON_H

#include <stdint.h>

struct cuflag_client;

/* How a client reached its daemon, kept for its resumes. */
struct cuflag_reach {
	char path[108];  /* the socket */
	uint8_t user;    /* the user's own daemon: started again when gone */
};

/*
 * Connect to the daemon for cuflag_connect(socket_path): the blocking
 * socket (reply timeouts set) and, in *r, where it leads. Errors as
 * cuflag_connect() documents; the thread's hint then says why.
 */
int cuflag__reach_connect(const char *socket_path, struct cuflag_reach *r);

/* The hint for err when it is this thread's last failed connect's, else
 * NULL. */
const char *cuflag__reach_hint(int err);

/* The daemon at path refused this process at HELLO with err: when that is
 * -EACCES, the thread's hint says it serves another user only. */
void cuflag__reach_refused(const char *path, int err);

/*
 * Connect again for a resume, to the same socket (non-blocking without
 * reply timeouts when nonblock is set); a user's own daemon gone is
 * started again first (unless $CUFLAG_AUTOSPAWN is 0). The socket, or a
 * negative errno.
 */
int cuflag__reach_again(const struct cuflag_client *c, int nonblock);

#endif
