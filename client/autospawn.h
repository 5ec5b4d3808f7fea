/* SPDX-License-Identifier: MIT */
/*
 * Starting the user's own cuflagd (cuflagd --user) when none serves: found
 * at $CUFLAGD, beside the library (as a wheel or a build tree has it) or at
 * its install path; one at a time per user (a lock in the user's
 * directory), detached from this process, waited for (bounded) until it
 * serves.
 */
#ifndef CUFLAG_AUTOSPAWN_H
#define CUFLAG_AUTOSPAWN_H

#include <stddef.h>
#include <stdint.h>

#include "slowdown.h"

/* How long a connect that starts the daemon may take, all told (a
 * sanitizer's build starts slower: slowdown.h). */
#define AUTOSPAWN_TIMEOUT_MS (CUFLAG_SLOWDOWN > 1 ? 30000 : 5000)

/* Whether this process may start the daemon ($CUFLAG_AUTOSPAWN not "0"). */
int cuflag__autospawn_allowed(void);

/*
 * Connect to the user's daemon at sock (in the checked directory dir); when
 * none listens there (-ENOENT, -ECONNREFUSED) and spawn is set, start one
 * first, unless another process of the user just did. reason says why the
 * user's daemon is used (written to its log by whoever starts it). The
 * connected socket (blocking, with the reply timeouts, or non-blocking
 * without them when nonblock is set), or a negative errno with why (n bytes)
 * naming what was tried: -ENOENT (no binary found, or none listens and
 * starting is off), -ECONNREFUSED (likewise; or the daemon started and
 * exited: its log says why), -ETIMEDOUT (not serving within
 * AUTOSPAWN_TIMEOUT_MS), or what connect(2), open(2) or posix_spawn(3)
 * failed with.
 */
int cuflag__user_daemon_connect(const char *dir, const char *sock, const char *reason, int spawn,
				int nonblock, char *why, size_t n);

#endif
