/* SPDX-License-Identifier: MIT */
/*
 * Where the daemons listen: the node daemon's socket, and the directory of
 * the user's own daemon (cuflagd --user) with its socket, lock and log.
 * The one file that says these paths and whether the user's directory is
 * safely the user's, for the library, the daemon and cuflagctl alike.
 */
#ifndef CUFLAG_USER_DIR_H
#define CUFLAG_USER_DIR_H

#include <stddef.h>

/* For tests only: the node daemon's socket in place of
 * CUFLAG_DEFAULT_SOCKET, so that a test never meets the host's daemon. */
#define CUFLAG_NODE_SOCKET_ENV "CUFLAG_NODE_SOCKET"

/* The files of the user's directory. */
#define CUFLAG_USER_SOCKET_NAME "cuflagd.sock"
#define CUFLAG_USER_LOCK_NAME "cuflagd.lock"  /* held by the daemon while it runs */
#define CUFLAG_USER_SPAWN_NAME "spawn.lock"   /* held by whoever starts one */
#define CUFLAG_USER_LOG_NAME "cuflagd.log"    /* a started daemon's stderr */

/* The node daemon's socket: $CUFLAG_NODE_SOCKET (tests), else
 * CUFLAG_DEFAULT_SOCKET. */
const char *cuflag_node_socket(void);

/*
 * The user's directory, $XDG_RUNTIME_DIR/cuflag, or /tmp/cuflag-UID when
 * the variable is unset or empty (UID: the effective one), into dir (n
 * bytes). 0, or -ENAMETOOLONG when it, with a file name in it, would not
 * fit a socket address.
 */
int cuflag_user_dir(char *dir, size_t n);

/* dir/name into out (n bytes, at most a socket address): 0 or -ENAMETOOLONG. */
int cuflag_user_path(char *out, size_t n, const char *dir, const char *name);

/*
 * Whether err, from connecting to the node daemon's socket node, means the
 * user's own daemon is to be used instead: 1 for no daemon there (-ENOENT,
 * -ECONNREFUSED) or not allowed to use it (-EACCES, -EPERM: not in its
 * group), with why (n bytes) saying so in a few words; else 0.
 */
int cuflag_node_fallback(const char *node, int err, char *why, size_t n);

/*
 * Whether dir is safely this user's: a directory itself (not a symlink),
 * owned by the effective uid, with no access for group or others (0700).
 * With create, a dir that does not exist is made 0700 first (its parent
 * must exist). 0, or a negative errno with why (n bytes) saying what is
 * wrong and what to do: -EPERM (someone else's, a symlink, or open to
 * others: never used, never changed), -ENOTDIR, -ENOENT, or what mkdir(2)
 * or open(2) failed with.
 */
int cuflag_user_dir_check(const char *dir, int create, char *why, size_t n);

#endif
