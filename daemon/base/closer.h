/* SPDX-License-Identifier: MIT */
/*
 * Closing what clients handed over, off the main loop and the scanner.
 *
 * The daemon may hold the last reference to any file a client sent it (an fd
 * in any message, the fds still queued on a client socket that goes away, an
 * eventfd a client bound): the release then runs in the closing thread, and
 * some releases block (a TCP socket with SO_LINGER and unsent data waits out
 * its linger time; a FUSE file waits for its server). So every such close
 * goes to a few closer threads: one that blocks holds up only the closes
 * queued behind it on that thread, never a request, a wake or SIGTERM.
 */
#ifndef CUFLAGD_CLOSER_H
#define CUFLAGD_CLOSER_H

#include <stdint.h>

struct closer;

/* Start the closer threads. 0 or a negative errno. */
int closer_start(struct closer **out);

/* Close fd on a closer thread (fd < 0: nothing). Never blocks; if no memory
 * can be found for the queue, the fd is closed here (logged). */
void closer_close(struct closer *cl, int fd);
/* The same for a client's connection: the messages still queued on it are
 * taken off first, so that the fds they carry are closed here too, without
 * lingering. */
void closer_close_connection(struct closer *cl, int fd);
/* The same for n fds; each entry is set to -1. */
void closer_close_fds(struct closer *cl, int *fds, unsigned n);

/* Closes queued and not done yet (for STATS and tests). */
uint64_t closer_backlog(struct closer *cl);

/* Stop the threads; what is still queued is closed by the caller's thread
 * (at exit, when nothing else waits on the daemon). */
void closer_stop(struct closer *cl);

#endif
