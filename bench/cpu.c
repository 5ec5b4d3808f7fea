/* SPDX-License-Identifier: MIT */
/*
 * --mode cpu: the simulated device (a thread that stores the target into the
 * flag with a release store) against three ways of waking a blocked waiter,
 * by the timed-wake method of bench/harness/wake.h:
 *   eventfd-direct  the storing thread also writes an eventfd (the floor)
 *   inproc-scanner  a scanner thread in this process (the seed's design)
 *   cuflagd         the real daemon, a separate process, scanning our region
 * Mechanisms take turns in blocks, so drifting background load hits all alike.
 * Then throughput (P processes x S slots through cuflagd), daemon CPU, and the
 * scanner's cost at paced loads (paced.c). The experiments behind the studies
 * of docs/bench-log/ are programs of tests/perf/; two of them, the
 * scale run and the metrics' cost, can join this run (--scale, --metrics-cost).
 * Last, the first connect's cost with the user's own daemon (connect.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bench.h"
#include "cuflag/cuflag.h"
#include "wake.h"

enum { M_DIRECT, M_INPROC, M_CUFLAGD, M_COUNT };
static const char *const mech_names[M_COUNT] = { "eventfd-direct", "inproc-scanner", "cuflagd" };

static int inproc_arm(struct bench_mech *m, uint32_t *t)
{
	*t = ++m->next;
	inproc_scanner_arm(m->arg, 0, *t);
	return 0;
}

static int latency(const struct bench_opts *o, struct bench_report *r, const char *sock)
{
	struct bench_mech m[M_COUNT];
	struct inproc_scanner *sc = NULL;
	struct bench_storer st;
	cuflag_client *c = NULL;
	cuflag_slot *s = NULL;
	int rc, failed = 0;

	memset(m, 0, sizeof(m));
	for (int k = 0; k < M_COUNT; k++)
		m[k].row = bench_lat_add(r, mech_names[k], o->iterations);
	for (int k = M_DIRECT; k <= M_INPROC; k++) {
		m[k].flag = &m[k].local_flag;
		m[k].fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (m[k].fd < 0) {
			fprintf(stderr, "cuflag-bench: eventfd: %s\n", strerror(errno));
			return -1;
		}
	}
	m[M_DIRECT].write_fd = 1;
	{
		volatile uint32_t *flags[1] = { m[M_INPROC].flag };
		rc = inproc_scanner_start(&sc, 1, flags, &m[M_INPROC].fd);
		if (rc)
			bench_lat_fail(m[M_INPROC].row, "scanner thread: %s", strerror(-rc));
		m[M_INPROC].arg = sc;
		m[M_INPROC].arm = inproc_arm;
	}
	rc = cuflag_connect(sock, &c);
	if (!rc)
		rc = cuflag_slot_acquire(c, &s);
	if (rc)
		bench_lat_fail(m[M_CUFLAGD].row, "cannot get a slot from %s: %s", sock,
			       strerror(-rc));
	else
		bench_mech_slot(&m[M_CUFLAGD], s);
	if (bench_storer_start(&st))
		return -1;
	bench_wake_turns(&st, m, M_COUNT, o->warmup, o->iterations);
	bench_storer_stop(&st);
	inproc_scanner_stop(sc);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	close(m[M_DIRECT].fd);
	close(m[M_INPROC].fd);
	for (int k = 0; k < M_COUNT; k++)
		failed |= m[k].row->failed;
	return failed ? -1 : 0;
}

static void throughput(const struct bench_opts *o, struct bench_report *r,
		       const struct daemon_proc *d)
{
	struct bench_tput *t = bench_tput_add(r, "cuflagd");
	double cpu_ms = bench_cpu_tput(o, t, d);

	if (!t->failed && cpu_ms >= 0) {
		t->daemon_cpu_ms = cpu_ms;
		r->have_daemon_cpu = 1;
		r->us_per_completion = cpu_ms * 1000.0 / (double)t->completions;
	}
}

int bench_cpu_run(const struct bench_opts *o, struct bench_report *r)
{
	struct daemon_proc d;
	int failed = 0;

	/* Before the daemon exists: it inherits the raised RLIMIT_NOFILE. */
	if (o->scale)
		bench_scale_plan(o, &r->scale);
	if (bench_daemon_start(&d, o))
		return 1;
	r->daemon_pid = d.pid;
	r->cpu_section = 1;
	if (!o->json)
		fprintf(stderr, "cuflag-bench: cuflagd pid %d on %s%s\n", (int)d.pid, d.sock,
			d.dir[0] ? "" : " (not ours)");
	if (latency(o, r, d.sock))
		failed = 1;
	throughput(o, r, &d);
	for (size_t i = 0; i < r->ntput; i++)
		failed |= r->tput[i].failed;
	if (r->have_daemon_cpu)
		bench_idle_cpu(o, r, &d);
	if (o->scale && bench_scale_run(o, r, &d))
		failed = 1;
	bench_daemon_stop(&d);
	if (o->paced && bench_paced_run(o, r))
		failed = 1;
	if (o->metrics_cost && bench_metrics_cost(o, r))
		failed = 1;
	if (o->scale_pending && bench_scale_pending(o, r, BENCH_SCALE_PENDING_PROCS))
		failed = 1;
	if (!o->socket && bench_connect_run(o, r))
		failed = 1;

	bench_ratio_lat(r, "cuflagd_p50/eventfd-direct_p50", "cuflagd", "eventfd-direct", 0);
	bench_ratio_lat(r, "cuflagd_p50/inproc-scanner_p50", "cuflagd", "inproc-scanner", 0);
	bench_ratio_lat(r, "cuflagd_p99/eventfd-direct_p99", "cuflagd", "eventfd-direct", 1);
	bench_ratio_lat(r, "cuflagd_p99/inproc-scanner_p99", "cuflagd", "inproc-scanner", 1);
	if (r->scale.ran)
		bench_ratio_lat(r, r->scale.ratio, r->scale.row, "scale-1x1", 0);
	if (r->have_paced)
		bench_paced_ratios(r);
	return failed;
}
