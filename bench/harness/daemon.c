/* SPDX-License-Identifier: MIT */
/*
 * The bench's daemon: the daemon under test (daemon-proc.c) started
 * with the bench's options (an explicit --spin-us, room for the fleet, the
 * largest write budget), or the one already running at --socket, whose pid
 * comes from SO_PEERCRED, so that its CPU time can be read from /proc
 * (proc-cpu.c) either way. Failures are said on stderr.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"
#include "proc-cpu.h"
#include "spawn.h"

static int executable(const char *path)
{
	return access(path, X_OK) == 0;
}

/* $CUFLAGD, else cuflagd next to this binary (or in the build tree's daemon/), else PATH. */
const char *bench_find_daemon(const char *self)
{
	static char buf[PATH_MAX];
	const char *env = getenv("CUFLAGD");
	const char *path;
	char *slash;

	if (env && *env)
		return env;
	if (self && (slash = strrchr(self, '/'))) {
		int dl = (int)(slash - self);
		snprintf(buf, sizeof(buf), "%.*s/cuflagd", dl, self);
		if (executable(buf))
			return buf;
		snprintf(buf, sizeof(buf), "%.*s/../daemon/cuflagd", dl, self);
		if (executable(buf))
			return buf;
	}
	path = getenv("PATH");
	while (path && *path) {
		const char *end = strchr(path, ':');
		int len = end ? (int)(end - path) : (int)strlen(path);
		snprintf(buf, sizeof(buf), "%.*s/cuflagd", len, len ? path : ".");
		if (executable(buf))
			return buf;
		path = end ? end + 1 : NULL;
	}
	return "cuflagd";
}

int bench_daemon_start(struct daemon_proc *d, const struct bench_opts *o)
{
	return bench_daemon_start_mode(d, o, o->scanner_mode);
}

int bench_daemon_start_mode(struct daemon_proc *d, const struct bench_opts *o, const char *mode)
{
	return bench_daemon_start_with(d, o, mode, NULL);
}

int bench_daemon_start_with(struct daemon_proc *d, const struct bench_opts *o, const char *mode,
			    const char *extra)
{
	char spin[32], maxc[16];
	pid_t peer = 0;
	int st = 0, rc;

	if (o->socket) {
		*d = (struct daemon_proc){ .log_fd = -1 };
		snprintf(d->sock, sizeof(d->sock), "%s", o->socket);
		rc = cuflag_daemon_probe(d->sock, &d->pid);
		if (rc)
			bench_say("cannot connect to %s: %s\n", d->sock, strerror(-rc));
		return rc;
	}
	rc = daemon_proc_dir(d, "cuflag-bench");
	if (rc) {
		bench_say("mkdtemp: %s\n", strerror(-rc));
		return rc;
	}
	snprintf(spin, sizeof(spin), "%u", o->spin_us);
	snprintf(maxc, sizeof(maxc), "%u", BENCH_MAX_CLIENTS);
	/* --max-clients explicit: the scale run connects up to 240 processes at once. */
	/* The largest write budget: the 10 000-slot rows make costly eventfd
	 * writes (10 processes x 1000 eventfds in epoll sets) on purpose, and on
	 * a busy machine the default budget would drop them as an attack. */
	const char *args[16] = { "--spin-us", spin, "--max-clients", maxc, "--log-level", "warning",
				 "--write-budget-us", "10000000" };
	size_t n = 8;

	if (mode) {
		args[n++] = "--scanner-mode";
		args[n++] = mode;
	}
	if (extra)
		args[n++] = extra;
	rc = daemon_proc_start(d, o->daemon, args, 0, &st);
	if (rc == 0) {
		if (cuflag_daemon_probe(d->sock, &peer) == 0 && peer && peer != d->pid)
			bench_say("warning: the socket's peer is pid %d, "
				  "not the daemon spawned (%d)\n",
				  (int)peer, (int)d->pid);
		return 0;
	}
	if (rc == -ETIMEDOUT)
		bench_say("%s did not accept connections within %d s\n", o->daemon,
			  DAEMON_PROC_READY_MS / 1000);
	else if (rc == -ECHILD)
		bench_say("%s exited before it was ready (status %d)\n", o->daemon,
			  cuflag_exit_code(st));
	else
		bench_say("fork: %s\n", strerror(-rc));
	daemon_proc_remove(d);
	return rc;
}

void bench_daemon_stop(struct daemon_proc *d)
{
	/* A daemon at --socket is not ours to stop (no directory made for it). */
	if (!d->dir[0])
		return;
	/* Bounded: SIGKILL after 5 s. */
	daemon_proc_stop(d, 5000);
	daemon_proc_remove(d);
}

double bench_daemon_cpu_ms(const struct daemon_proc *d)
{
	int64_t ns = d->pid > 0 ? proc_cpu_ns(d->pid) : -1;

	return ns < 0 ? -1 : (double)ns / 1e6;
}
