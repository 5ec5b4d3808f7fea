/* SPDX-License-Identifier: MIT */
/*
 * What this machine charges for crossing a process boundary: a wake that is
 * a switch between two threads of one process on one CPU (handoff-thread)
 * against the same between two processes (handoff-process), with the relay
 * of handoff.c, and the cuflagd row beside them (unpinned, first, as
 * cuflag-bench measures it). During the handoff rows the waiter and the
 * relay are pinned to one CPU and the storing thread to another. Every waker
 * in another process pays at least handoff-process: cuflagd_p50 /
 * handoff-process_p50 near 1 says the daemon adds nothing of its own. With
 * fewer than two CPUs the handoff rows are reported unmeasured (not a failure).
 *
 *   perf-handoff [--iterations N] [--json] ...
 */
#include <sched.h>
#include <string.h>

#include "cuflag/cuflag.h"
#include "handoff.h"
#include "wake.h"

enum { M_CUFLAGD, M_HO_THREAD, M_HO_PROCESS, M_COUNT };
static const char *const names[M_COUNT] = { "cuflagd", "handoff-thread", "handoff-process" };

/* The waiter's CPU and the storer's; -1 when there are not two. */
static int pick_cpus(const cpu_set_t *all, int cpu[2])
{
	int here = sched_getcpu();

	cpu[0] = here >= 0 && CPU_ISSET(here, all) ? here : -1;
	cpu[1] = -1;
	for (int c = 0; c < CPU_SETSIZE && cpu[1] < 0; c++) {
		if (!CPU_ISSET(c, all))
			continue;
		if (cpu[0] < 0)
			cpu[0] = c;
		else if (c != cpu[0])
			cpu[1] = c;
	}
	return cpu[1] < 0 ? -1 : 0;
}

/* This thread on cpu (or on all, when cpu < 0); 0 or -1. */
static int pin_self(const cpu_set_t *all, int cpu)
{
	cpu_set_t s = *all;

	if (cpu >= 0) {
		CPU_ZERO(&s);
		CPU_SET(cpu, &s);
	}
	return sched_setaffinity(0, sizeof(s), &s);
}

static int relay_arm(struct bench_mech *m, uint32_t *t)
{
	*t = handoff_arm(m->arg);
	return 0;
}

static void fail_both(struct bench_mech *m, const char *why)
{
	for (int k = M_HO_THREAD; k <= M_HO_PROCESS; k++)
		if (!m[k].row->failed)
			bench_lat_fail(m[k].row, "%s", why);
}

/* Both relays, started on the waiter's CPU before any other thread exists
 * (one is a forked process): they inherit the pinning. */
static void relays_start(struct bench_mech *m, const cpu_set_t *all, int cpu)
{
	if (pin_self(all, cpu)) {
		fail_both(m, "cannot pin");
		return;
	}
	for (int k = M_HO_THREAD; k <= M_HO_PROCESS; k++) {
		int rc = handoff_start((struct handoff **)&m[k].arg, k == M_HO_PROCESS);
		if (rc) {
			bench_lat_fail(m[k].row, "relay: %s", strerror(-rc));
			continue;
		}
		m[k].fd = handoff_fd(m[k].arg);
		m[k].flag = handoff_flag(m[k].arg);
		m[k].arm = relay_arm;
	}
	if (pin_self(all, -1))
		fail_both(m, "cannot unpin");
}

int main(int argc, char **argv)
{
	static struct bench_report r;
	struct bench_mech m[M_COUNT];
	struct bench_opts o;
	struct daemon_proc d;
	struct bench_storer st;
	cuflag_client *c = NULL;
	cuflag_slot *s = NULL;
	cpu_set_t all, one;
	int cpu[2] = { -1, -1 }, failed = 0, rc;

	rc = bench_program_start(&r, &o, argc, argv,
				 "The price of a wake across a process boundary on this machine, "
				 "beside cuflagd's.\n",
				 NULL);
	if (rc >= 0)
		return rc;
	memset(m, 0, sizeof(m));
	for (int k = 0; k < M_COUNT; k++)
		m[k].row = bench_lat_add(&r, names[k], o.iterations);
	if (sched_getaffinity(0, sizeof(all), &all) || pick_cpus(&all, cpu))
		fail_both(m, "needs two CPUs to pin to");
	else
		relays_start(m, &all, cpu[0]);
	if (bench_daemon_start(&d, &o))
		return 1;
	r.daemon_pid = d.pid;
	rc = cuflag_connect(d.sock, &c);
	if (!rc)
		rc = cuflag_slot_acquire(c, &s);
	if (rc)
		bench_lat_fail(m[M_CUFLAGD].row, "no slot from %s: %s", d.sock, strerror(-rc));
	else
		bench_mech_slot(&m[M_CUFLAGD], s);
	if (bench_storer_start(&st))
		return 1;
	bench_wake_turns(&st, m, 1, o.warmup, o.iterations);
	if (cpu[1] >= 0) {
		CPU_ZERO(&one);
		CPU_SET(cpu[1], &one);
		if (pin_self(&all, cpu[0]) || pthread_setaffinity_np(st.thread, sizeof(one), &one))
			fail_both(m, "cannot pin");
		bench_wake_turns(&st, m + M_HO_THREAD, 2, o.warmup, o.iterations);
	}
	bench_storer_stop(&st);
	for (int k = M_HO_THREAD; k <= M_HO_PROCESS; k++)
		handoff_stop(m[k].arg);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	bench_daemon_stop(&d);
	/* Without two CPUs there are no handoff rows: not a failure. */
	for (int k = 0; k < M_COUNT; k++)
		failed |= m[k].row->failed && (k == M_CUFLAGD || cpu[1] >= 0);
	bench_ratio_lat(&r, "handoff-process_p50/handoff-thread_p50", "handoff-process",
			"handoff-thread", 0);
	bench_ratio_lat(&r, "cuflagd_p50/handoff-process_p50", "cuflagd", "handoff-process", 0);
	return bench_finish(&r, failed);
}
