/* SPDX-License-Identifier: MIT */
/* The AF_UNIX SOCK_SEQPACKET sockets: a connection to cuflagd's socket, the
 * daemon's own socket, a connected pair between two processes. The one file
 * that makes them. */
#ifndef CUFLAG_UNIX_SOCKET_H
#define CUFLAG_UNIX_SOCKET_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Connect a blocking, close-on-exec SOCK_SEQPACKET socket to the AF_UNIX
 * socket at path. With timeout_s > 0, a send or receive that waits longer
 * than that fails with EAGAIN, so a daemon that stops answering cannot hang
 * the caller. Returns the fd, or a negative errno: -ENAMETOOLONG (path does
 * not fit a sockaddr_un), or what socket(2), setsockopt(2) or connect(2)
 * failed with (-ENOENT, -ECONNREFUSED, -EACCES, ...).
 */
int cuflag_unix_connect(const char *path, unsigned timeout_s);

/* What to do about an error of cuflag_unix_connect() (a negative errno): a
 * sentence for the user, true of this host (systemd or not; the group of the
 * path this thread was last refused, by name), or NULL when there is no
 * advice beyond strerror. The sentence is static: it never changes or goes. */
const char *cuflag_unix_connect_hint(int err);

/* text kept for the life of the process: the same pointer for the same
 * text; NULL once 32 are kept. For hints that must never change or go. */
const char *cuflag_hint_keep(const char *text);

/* The name (or number) of the group of the socket at path or, where this
 * process cannot reach it, of the nearest directory on its way it can see,
 * into name (n bytes): 0, or -ENOENT when neither. */
int cuflag_unix_path_group(const char *path, char *name, size_t n);

/* The same, non-blocking and without timeouts: a listener whose backlog is
 * full fails it with -EAGAIN rather than make it wait. */
int cuflag_unix_connect_nonblock(const char *path);

/* A non-blocking, close-on-exec SOCK_SEQPACKET socket bound to path, made
 * under umask_bits (its mode from the start: no window where it is wider);
 * the caller gives it its group and listens. The fd, or a negative errno:
 * -ENAMETOOLONG, or what socket(2) or bind(2) failed with (-EADDRINUSE,
 * -EACCES, ...). */
int cuflag_unix_bind(const char *path, mode_t umask_bits);

/* A connected pair of blocking, close-on-exec SOCK_SEQPACKET sockets, as
 * socketpair(2) fills fds. 0, or what socketpair(2) failed with (-EMFILE,
 * -ENFILE, ...). */
int cuflag_unix_pair(int fds[2]);

#endif
