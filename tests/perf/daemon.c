/* SPDX-License-Identifier: MIT */
/*
 * The daemon under test: spawn cuflagd on a private socket with an explicit
 * --spin-us and wait until it accepts a connection (never a fixed sleep), or
 * use the one at --socket. Its pid comes from SO_PEERCRED either way, so its
 * CPU time can be read from /proc (tests/proc-cpu.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "call.h"
#include "cuflag-proto.h"
#include "perf.h"
#include "proc-cpu.h"
#include "spawn.h"
#include "unix-socket.h"

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

int bench_daemon_start(struct bench_daemon *d, const struct bench_opts *o)
{
	return bench_daemon_start_mode(d, o, o->scanner_mode);
}

int bench_daemon_start_mode(struct bench_daemon *d, const struct bench_opts *o, const char *mode)
{
	return bench_daemon_start_with(d, o, mode, NULL);
}

int bench_daemon_start_with(struct bench_daemon *d, const struct bench_opts *o, const char *mode,
			    const char *extra)
{
	char spin[32], maxc[16];
	pid_t peer = 0;
	int st, rc;

	memset(d, 0, sizeof(*d));
	if (o->socket) {
		snprintf(d->sock, sizeof(d->sock), "%s", o->socket);
		rc = cuflag_daemon_probe(d->sock, &d->pid);
		if (rc) {
			bench_say("cannot connect to %s: %s\n", d->sock,
				strerror(-rc));
			return rc;
		}
		return 0;
	}
	snprintf(d->dir, sizeof(d->dir), "/tmp/cuflag-bench-XXXXXX");
	if (!mkdtemp(d->dir)) {
		bench_say("mkdtemp: %s\n", strerror(errno));
		return -errno;
	}
	snprintf(d->sock, sizeof(d->sock), "%s/cuflagd.sock", d->dir);
	snprintf(spin, sizeof(spin), "%u", o->spin_us);
	snprintf(maxc, sizeof(maxc), "%u", BENCH_MAX_CLIENTS);
	/* --max-clients explicit: the scale run connects up to 240 processes at once. */
	/* The largest write budget: the 10 000-slot rows make costly eventfd
	 * writes (10 processes x 1000 eventfds in epoll sets) on purpose, and on
	 * a busy machine the default budget would drop them as an attack. */
	const char *argv[16] = { o->daemon, "--socket", d->sock, "--spin-us", spin,
				 "--max-clients", maxc, "--log-level", "warning",
				 "--write-budget-us", "10000000" };
	size_t n = 11;

	if (mode) {
		argv[n++] = "--scanner-mode";
		argv[n++] = mode;
	}
	if (extra)
		argv[n++] = extra;
	/* Ready when it accepts a connection; give up if it dies or after 10 s. */
	rc = cuflag_daemon_spawn(argv, d->sock, -1, 10000, &d->pid, &st);
	if (rc == 0) {
		d->spawned = 1;
		if (cuflag_daemon_probe(d->sock, &peer) == 0 && peer && peer != d->pid)
			bench_say("warning: the socket's peer is pid %d, "
					"not the daemon spawned (%d)\n",
				(int)peer, (int)d->pid);
		return 0;
	}
	if (rc == -ETIMEDOUT) {
		d->spawned = 1;
		bench_say("%s did not accept connections within 10 s\n",
			o->daemon);
		bench_daemon_stop(d);
		return rc;
	}
	if (rc == -ECHILD)
		bench_say("%s exited before it was ready (status %d)\n",
			o->daemon, cuflag_exit_code(st));
	else
		bench_say("fork: %s\n", strerror(-rc));
	d->pid = 0;
	rmdir(d->dir);
	return rc;
}

void bench_daemon_stop(struct bench_daemon *d)
{
	if (!d->spawned)
		return;
	/* Bounded: SIGKILL after 5 s. */
	cuflag_daemon_stop(d->pid, 5000);
	unlink(d->sock);
	rmdir(d->dir);
	d->spawned = 0;
}

double bench_daemon_cpu_ms(const struct bench_daemon *d)
{
	int64_t ns = d->pid > 0 ? proc_cpu_ns(d->pid) : -1;

	return ns < 0 ? -1 : (double)ns / 1e6;
}

int bench_daemon_stats(const struct bench_daemon *d, struct cuflag_msg_stats_reply *out)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_call call = { .type = CUFLAG_MSG_STATS, .id = 1, .reply = buf };
	int fd = cuflag_unix_connect(d->sock, CUFLAG_REPLY_TIMEOUT_S), rc;

	if (fd < 0)
		return fd;
	rc = cuflag_call(fd, &call);
	if (!rc)
		memcpy(out, cuflag_call_body(&call), sizeof(*out));
	close(fd);
	return rc;
}
