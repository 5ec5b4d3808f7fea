/* SPDX-License-Identifier: MIT */
/*
 * Integration test harness: the daemon under test (daemon-proc.h: the real
 * cuflagd, path from $CUFLAGD, set by meson) started, stopped and asked for
 * STATS the tests' way, aborting with a message on any error; and what the
 * tests ask of it besides (its fds, its maps, its CPU, its log).
 */
#ifndef CUFLAG_TEST_HARNESS_H
#define CUFLAG_TEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "clock.h"
#include "daemon-proc.h"
#include "spawn.h"
#include "test-check.h"

/* Become uid (all three ids) in a child of a root test, keeping gid 0 and
 * only it as a group, so that the daemon's 0660 socket (group root) stays
 * reachable: another user to the daemon. 0, or -1 with errno set. */
int become_user(uid_t uid);

/*
 * Start cuflagd with extra arguments (NULL-terminated list) in a private
 * directory of its own and wait for it. Its stderr goes to a pipe if
 * capture_log, else to ours. Aborts on failure.
 */
void daemon_start(struct daemon_proc *d, int capture_log, const char *const *extra_args);
/* The same on d->sock as the caller prepared it (daemon_proc_dir(), then
 * whatever the test needs in the directory before the daemon runs). */
void daemon_start_in(struct daemon_proc *d, int capture_log, const char *const *extra_args);
/* SIGTERM, wait; returns the exit status (or 128+signal). */
int daemon_stop(struct daemon_proc *d);
/* Open fds of the daemon process (from /proc/PID/fd). */
int daemon_fd_count(const struct daemon_proc *d);
/* Read what the daemon logged so far (capture_log only), NUL-terminated. */
size_t daemon_read_log(struct daemon_proc *d, char *buf, size_t cap);

/* Open fds of this process. */
int self_fd_count(void);

/* A whole completion through the daemon at sock (connect, acquire, arm,
 * store, wait, disconnect); aborts if any step fails. */
void check_serves(const char *sock);

/* Wait (polling, up to timeout_ms) until pred(arg) is true; 1 if it became true. */
int wait_until(int (*pred)(void *), void *arg, int timeout_ms);

struct cuflag_slot;
/* Completions in a slot's eventfd once it becomes readable (waits up to 2 s;
 * aborts if nothing arrives). */
uint64_t consume_blocking(struct cuflag_slot *s);

/* A simulated device write: an aligned 32-bit store with release order. */
static inline void sim_store(volatile uint32_t *flag, uint32_t v)
{
	__atomic_store_n(flag, v, __ATOMIC_RELEASE);
}

/* What the daemon at sock says of uid (METRICS, asked as whoever runs
 * this): its user record's pending and slots, its clients' in_flight summed
 * (0 where it has none). 0 or -errno. */
int daemon_user_metrics(const char *sock, uid_t uid, uint32_t *pending, uint32_t *in_flight,
			uint32_t *slots);

struct cuflag_msg_stats_reply;
/* Ask the daemon for its counters (daemon_proc_stats()); aborts if it does not answer. */
void daemon_stats(const struct daemon_proc *d, struct cuflag_msg_stats_reply *out);
/* Mappings of client regions the daemon holds (lines in /proc/PID/maps). */
int daemon_region_maps(const struct daemon_proc *d);
/* CPU time of every daemon thread so far, in ns (from schedstat: fine-grained). */
uint64_t daemon_cpu_ns(const struct daemon_proc *d);
/* The daemon's CPU over the next ms milliseconds, as a share of one core. */
double daemon_cpu_share(const struct daemon_proc *d, int ms);
/* Stop the daemon (SIGTERM) but keep its directory, for a successor. */
int daemon_stop_keep_dir(struct daemon_proc *d);
/* Start a daemon on a given socket path inside an existing directory. */
void daemon_start_at(struct daemon_proc *d, const char *dir, const char *sock, int capture_log,
		     const char *const *extra_args);

/* The daemon's fd count once it has held still for 100 ms (at most 5 s): the
 * daemon closes what clients handed over on threads of their own, so a count
 * taken right after a client came or went may still include it. */
int daemon_fd_count_steady(const struct daemon_proc *d);

struct cuflag_msg_hello_reply;
/* A region as a client makes it for the layout a HELLO reply gives: a memfd,
 * every page allocated, the header written, sealed. */
int make_client_region(const struct cuflag_msg_hello_reply *hr);

#endif
