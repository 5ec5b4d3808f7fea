/* SPDX-License-Identifier: MIT */
/*
 * Starting a cuflagd of one's own and waiting until it serves: never a
 * fixed sleep, always a connection that succeeds. The process side of the
 * daemon under test (bench/harness/daemon-proc.c), which the tests and cuflag-bench
 * use. Not linked into the daemon or the client library.
 */
#ifndef CUFLAG_SPAWN_H
#define CUFLAG_SPAWN_H

#include <sys/types.h>
#include <sys/wait.h>

/* A wait status as a shell shows it: the exit code, or 128 + the signal. */
static inline int cuflag_exit_code(int wstatus)
{
	return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}

/*
 * Whether a daemon accepts connections on sock: 0, or the negative errno of
 * the connect. The probe hangs up and waits (up to 5 s) until the daemon has
 * closed its end too, so that a count of the daemon's fds taken next does
 * not see it. *peer (when not NULL) gets the pid at the other end.
 */
int cuflag_daemon_probe(const char *sock, pid_t *peer);

/*
 * Start argv[0] (searched in PATH when it has no '/') with argv, a
 * NULL-terminated list that names the socket sock; its stderr goes to
 * stderr_fd (or stays ours when it is -1), and it gets SIGKILL when this
 * thread's process dies. Then wait until it accepts a connection on sock.
 * 0 with *pid set; -ECHILD when it exited first (*wstatus its status;
 * reaped); -ETIMEDOUT when it did not serve within timeout_ms (*pid set,
 * still running: stop it); or the negative errno of fork(2).
 */
int cuflag_daemon_spawn(const char *const *argv, const char *sock, int stderr_fd,
			int timeout_ms, pid_t *pid, int *wstatus);

/*
 * Open fds of process pid, from /proc/PID/fd; of this process when pid is 0
 * (without the one it reads them through). -1 when /proc does not say.
 */
int cuflag_fd_count(pid_t pid);

/*
 * SIGTERM, then wait; SIGKILL once kill_after_ms have passed (never when
 * negative). The wait status, or the negative errno of waitpid(2).
 */
int cuflag_daemon_stop(pid_t pid, int kill_after_ms);

#endif
