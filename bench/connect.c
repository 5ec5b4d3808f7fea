/* SPDX-License-Identifier: MIT */
/*
 * --mode cpu, the cost of the first connect: cuflag_connect(NULL) with no
 * node daemon, in a runtime directory of the run's own.
 *   connect-warm       the user's daemon already runs (the baseline)
 *   connect-autospawn  none runs: the connect starts it (then it is stopped,
 *                      for the next round)
 * Each sample is the connect alone (HELLO, the region, ATTACH), in us; then
 * the CPU of a started daemon while it waits for clients that do not come.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cuflag/cuflag.h"
#include "proc-cpu.h"

/* Rounds of each row: a start costs a few ms, a stop as many. */
#define CONNECT_ROUNDS 30
#define WARM_ROUNDS 100

static const char *const env_names[] = { "XDG_RUNTIME_DIR", "CUFLAG_NODE_SOCKET", "CUFLAG_SOCKET",
					 "CUFLAG_AUTOSPAWN", "CUFLAGD" };
#define NENV (sizeof(env_names) / sizeof(env_names[0]))

struct saved_env {
	char *v[NENV];
};

static void env_save(struct saved_env *s)
{
	for (size_t i = 0; i < NENV; i++) {
		const char *v = getenv(env_names[i]);
		s->v[i] = v ? strdup(v) : NULL;
	}
}

static void env_restore(struct saved_env *s)
{
	for (size_t i = 0; i < NENV; i++) {
		if (s->v[i])
			setenv(env_names[i], s->v[i], 1);
		else
			unsetenv(env_names[i]);
		free(s->v[i]);
	}
}

static pid_t daemon_of(cuflag_client *c)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);

	return getsockopt(cuflag_client_fd(c), SOL_SOCKET, SO_PEERCRED, &cr, &l) ? -1 : cr.pid;
}

/* One timed cuflag_connect(NULL); the daemon's pid in *pid. */
static int timed_connect(struct bench_lat *row, pid_t *pid)
{
	cuflag_client *c;
	uint64_t t0 = cuflag_now_ns();
	int rc = cuflag_connect(NULL, &c);
	uint64_t t1 = cuflag_now_ns();

	if (rc) {
		const char *h = cuflag_connect_hint(rc);
		bench_lat_fail(row, "cuflag_connect: %s%s%s", strerror(-rc), h ? ": " : "",
			       h ? h : "");
		return rc;
	}
	row->us[row->n++] = (double)(t1 - t0) / 1000.0;
	*pid = daemon_of(c);
	cuflag_disconnect(c);
	return 0;
}

/* The started daemon detached: this process is its reaper (main()). */
static void stop(pid_t pid)
{
	if (pid > 0 && kill(pid, SIGTERM) == 0)
		waitpid(pid, NULL, 0);
}

/* A started daemon's CPU over the idle time, as % of a core. */
static void idle_cpu(const struct bench_opts *o, struct bench_report *r, pid_t pid)
{
	int64_t c0, c1;
	uint64_t t0, t1;

	bench_sleep_ns(200000000ull); /* past its start */
	c0 = proc_cpu_ns(pid);
	t0 = cuflag_now_ns();
	bench_sleep_ns((uint64_t)o->idle_ms * 1000000ull);
	c1 = proc_cpu_ns(pid);
	t1 = cuflag_now_ns();
	if (c0 >= 0 && c1 >= 0) {
		r->connect_idle_s = (double)(t1 - t0) / 1e9;
		r->connect_idle_pct = (double)(c1 - c0) / 1e7 / r->connect_idle_s;
	}
}

static void rounds(const struct bench_opts *o, struct bench_report *r, struct bench_lat *warm,
		   struct bench_lat *spawned)
{
	pid_t pid = -1, again;

	for (int i = 0; i < CONNECT_ROUNDS && !spawned->failed; i++) {
		stop(pid);
		if (timed_connect(spawned, &pid))
			return;
	}
	for (int i = 0; i < WARM_ROUNDS && !warm->failed; i++)
		if (timed_connect(warm, &again) == 0 && again != pid)
			bench_lat_fail(warm, "a warm connect reached daemon %d, not %d", (int)again,
				       (int)pid);
	idle_cpu(o, r, pid);
	stop(pid);
}

int bench_connect_run(const struct bench_opts *o, struct bench_report *r)
{
	struct bench_lat *warm = bench_lat_add(r, "connect-warm", WARM_ROUNDS);
	struct bench_lat *spawned = bench_lat_add(r, "connect-autospawn", CONNECT_ROUNDS);
	char base[] = "/tmp/cuflag-bench-connect-XXXXXX", run[64], node[64], cmd[96];
	struct saved_env saved;

	r->connect_ran = 1;
	r->connect_idle_pct = -1;
	if (!mkdtemp(base)) {
		bench_lat_fail(spawned, "mkdtemp: %s", strerror(errno));
		bench_lat_fail(warm, "mkdtemp: %s", strerror(errno));
		return -1;
	}
	snprintf(run, sizeof(run), "%s/run", base);
	snprintf(node, sizeof(node), "%s/node.sock", base);
	env_save(&saved);
	if (mkdir(run, 0700) == 0) {
		setenv("XDG_RUNTIME_DIR", run, 1);
		setenv("CUFLAG_NODE_SOCKET", node, 1); /* no node daemon there */
		unsetenv("CUFLAG_SOCKET");
		unsetenv("CUFLAG_AUTOSPAWN");
		if (o->daemon)
			setenv("CUFLAGD", o->daemon, 1);
		/* The daemons the library starts detach: they become ours. */
		prctl(PR_SET_CHILD_SUBREAPER, 1);
		rounds(o, r, warm, spawned);
	} else {
		bench_lat_fail(spawned, "mkdir %s: %s", run, strerror(errno));
	}
	env_restore(&saved);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		fprintf(stderr, "cuflag-bench: cannot remove %s\n", base);
	bench_ratio_lat(r, "connect-autospawn_p50/connect-warm_p50", "connect-autospawn",
			"connect-warm", 0);
	bench_ratio_lat(r, "connect-autospawn_p99/connect-warm_p99", "connect-autospawn",
			"connect-warm", 1);
	return warm->failed || spawned->failed ? -1 : 0;
}
