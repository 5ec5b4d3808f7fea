/* SPDX-License-Identifier: MIT */
/*
 * What cuflagd --user adds to the node daemon's code: the user's own
 * directory for its socket (checked, never followed through a link), one
 * daemon per user (a lock held while it runs), only its own uid served,
 * and the exit after --exit-idle seconds with no connection. Main thread.
 */
#ifndef CUFLAGD_USER_MODE_H
#define CUFLAGD_USER_MODE_H

#include <stdint.h>
#include <sys/socket.h>

#include "slowdown.h"

struct server;
struct cuflagd_config;

/* How long a daemon starting waits for one that is exiting to let go of
 * the lock before it gives up. */
#define USER_LOCK_WAIT_MS (CUFLAG_SLOWDOWN > 1 ? 20000 : 3000)

/*
 * Before listening, with --user: the socket's path (the configured one, or
 * the user's directory's; *path then points into srv), its directory made
 * 0700 if missing and checked to be the user's, and the lock taken. 0, or
 * a negative errno after one log line: -EPERM (the directory is not the
 * user's), -EADDRINUSE (another daemon of this user holds the lock), ...
 */
int user_mode_prepare(struct server *srv, const char **path);

/* Whether a connection's peer may be served: always without --user; with
 * it, only the daemon's own uid. */
int user_mode_admits(const struct server *srv, const struct ucred *c);

/*
 * Whether the daemon should exit now, as --exit-idle says: it has had no
 * connection for exit_idle_s seconds (0: never). idle_since_ms is the
 * caller's, 0 while a connection is open; pure, for the tick.
 */
int idle_exit_due(uint32_t exit_idle_s, uint32_t connections, uint64_t now_ms,
		  uint64_t *idle_since_ms);

/* At exit: the lock let go (after the socket file is gone). */
void user_mode_fini(struct server *srv);

#endif
