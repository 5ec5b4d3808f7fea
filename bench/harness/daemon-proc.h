/* SPDX-License-Identifier: MIT */
/*
 * The daemon under test, one piece for the integration tests, the attack
 * suite, cuflag-bench and the experiments of tests/perf/: cuflagd started on
 * a private socket and taken as ready once it accepts a connection (never a
 * fixed sleep), its pid, its stop by SIGTERM with the exit status collected,
 * and its counters asked for over the wire protocol (STATS).
 *
 * Every call returns 0 or a negative errno and prints nothing: a test aborts
 * on an error, the bench says it and goes on, so the words are the caller's.
 * Built on shared/spawn.c (fork, exec, probe, SIGTERM-then-wait).
 */
#ifndef CUFLAG_BENCH_DAEMON_PROC_H
#define CUFLAG_BENCH_DAEMON_PROC_H

#include <sys/types.h>

/* How long a daemon may take to accept its first connection. A start on a
 * loaded 2-CPU machine takes well under a second; this only bounds a hang. */
#define DAEMON_PROC_READY_MS 10000

struct daemon_proc {
	pid_t pid;      /* the daemon's; 0 when none is known */
	char dir[64];   /* the private directory its socket is in; "" if none */
	char sock[108]; /* its socket (sun_path's size) */
	int log_fd;     /* the read end of its stderr (capture_log), else -1 */
};

/*
 * A fresh private directory /tmp/PREFIX-XXXXXX (mode 0700: no other user
 * reaches the socket unless the caller opens it up) and the socket path
 * DIR/cuflagd.sock in it; d is reset first (no pid, log_fd -1). 0, or the
 * negative errno of mkdtemp(3).
 */
int daemon_proc_dir(struct daemon_proc *d, const char *prefix);

/*
 * Start bin (NULL: $CUFLAGD, else cuflagd on PATH) as "bin --socket
 * d->sock args..." (args NULL-terminated, may be NULL) and wait until it
 * accepts a connection on d->sock, up to DAEMON_PROC_READY_MS. Its stderr
 * goes to a pipe whose read end (non-blocking) becomes d->log_fd when
 * capture_log, else stays ours. The daemon gets SIGKILL if this process
 * dies. 0 with d->pid set; -ECHILD when it exited first (*wstatus its wait
 * status, reaped); -ETIMEDOUT when it did not serve in time (then stopped
 * and reaped); -E2BIG for more than 60 args; or the negative errno of
 * pipe2(2) or fork(2).
 */
int daemon_proc_start(struct daemon_proc *d, const char *bin, const char *const *args,
		      int capture_log, int *wstatus);

/*
 * SIGTERM, then wait for it; SIGKILL once kill_after_ms have passed (never
 * when negative). The wait status (cuflag_exit_code() turns it into an exit
 * code), -ESRCH when d has no pid, or the negative errno of waitpid(2).
 * d->pid stays as it was, for the caller's messages; log_fd stays open so
 * that what the daemon said last can still be read.
 */
int daemon_proc_stop(struct daemon_proc *d, int kill_after_ms);

/* Close log_fd and remove the socket and the private directory (which must
 * be empty by now); d->dir becomes "". */
void daemon_proc_remove(struct daemon_proc *d);

/*
 * STATS on a fresh connection to d->sock (no HELLO needed), with the
 * requester's timeouts (CUFLAG_REPLY_TIMEOUT_S): 0 with out filled, or the
 * negative errno of the connect or of the call (-ETIMEDOUT: not answered in
 * time; a malformed reply: cuflag_reply_check()'s error).
 */
struct cuflag_msg_stats_reply;
int daemon_proc_stats(const struct daemon_proc *d, struct cuflag_msg_stats_reply *out);

#endif
