/* SPDX-License-Identifier: MIT */
/*
 * --mode gpu, paced: what each mechanism costs the node's CPU per
 * completion at an ordinary rate, beside its wake latency. A period of
 * 1 ms (1 000/s) or 100 us (10 000/s) starts; the waiter enqueues a gate
 * kernel and the mechanism behind it and waits; the gate opens 20 us later
 * (one 20 us piece of work a period, timed as the latency rows are); the
 * waiter wakes, then sleeps until the next period. Per row:
 *   CPU    every thread of this process but the opener (which only stands
 *          in for the GPU's clock: the waiter, the driver's own threads,
 *          the launches, alike for every mechanism), plus the daemon's
 *          (zero where no cuflagd is involved: it is parked);
 *   wake   from the gate opening to the waiter running.
 * Rows paced-RATE-MECH: hostfunc, event-blocking, event-spin, cuflagd (the
 * default scanner, waiter blocked), cuflagd-scanner-spin (--scanner-mode
 * spin, waiter blocked), cuflagd-spin (the waiter spins 20 us, then blocks).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cuflag-proto.h"
#include "gpu-paced.h"
#include "proc-cpu.h"

#define PACED_RUN_NS 500000000ull
#define PACED_WORK_NS 20000u

struct paced_mech {
	const char *name;
	enum gmech kind;
	int scanner_spin; /* on the daemon with --scanner-mode spin */
};

static const struct paced_mech paced_mechs[] = {
	{ "hostfunc", G_HOSTFN, 0 },
	{ "event-blocking", G_EVBLOCK, 0 },
	{ "event-spin", G_EVSPIN, 0 },
	{ "cuflagd", G_CUFLAGD, 0 },
	{ "cuflagd-scanner-spin", G_CUFLAGD, 1 },
	{ "cuflagd-spin", G_CUFLAGD_SPIN, 0 },
};
static const unsigned paced_rates[] = { 1000, 10000 };

/* CPU of this process but the opener's thread so far; of the daemon in *d. */
static uint64_t cpu_now(const struct gpu_lat *L, pid_t daemon, uint64_t *d)
{
	clockid_t opener;
	int64_t dn = daemon > 0 ? proc_cpu_ns(daemon) : 0;
	uint64_t self = cuflag_clock_ns(CLOCK_PROCESS_CPUTIME_ID);

	if (pthread_getcpuclockid(L->op.thread, &opener) == 0)
		self -= cuflag_clock_ns(opener);
	*d = (uint64_t)(dn > 0 ? dn : 0);
	return self;
}

static void sleep_until(uint64_t at_ns)
{
	struct timespec ts = { .tv_sec = (time_t)(at_ns / 1000000000u),
			       .tv_nsec = (long)(at_ns % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Where a cuflagd row's daemon part went, per completion: the scanner's
 * wake-ups and its spin, as "paced-RATE-MECH wakeups/completion" and
 * "spin_us/completion" (what the scanner-cost rows of --mode cpu give). */
static void paced_scanner_lines(struct bench_report *r, const char *row_name,
				const struct cuflag_msg_stats_reply *a,
				const struct cuflag_msg_stats_reply *b, uint64_t n)
{
	/* The report keeps the names: they live as long as it does. */
	char *wake_name = malloc(96), *spin_name = malloc(96);
	struct bench_paced bp;

	if (!wake_name || !spin_name) {
		free(wake_name);
		free(spin_name);
		return;
	}
	bench_paced_breakdown(&bp, a, b, n);
	snprintf(wake_name, 96, "%s wakeups/completion", row_name);
	bench_ratio_add(r, wake_name, bp.wakeups);
	snprintf(spin_name, 96, "%s spin_us/completion", row_name);
	bench_ratio_add(r, spin_name, bp.spin_us);
}

/* One row: m at rate for PACED_RUN_NS; its CPU per completion as a ratio
 * line "paced-RATE-MECH cpu_us/completion", and the daemon's part of it as
 * "paced-RATE-MECH daemon_us/completion"; for a cuflagd row (dp set), the
 * scanner's part as paced_scanner_lines(). */
static int paced_row(struct bench_report *r, struct gpu_lat *L, struct gmech_state *m,
		     const char *name, unsigned rate, pid_t daemon, const struct daemon_proc *dp)
{
	struct cuflag_msg_stats_reply st0, st1;
	int have_st = 0;
	uint64_t period = 1000000000ull / rate, n = PACED_RUN_NS / period, warm = n / 10;
	struct bench_lat *keep = m->row;
	char *row_name = malloc(64), *cpu_name = malloc(96), *daemon_name = malloc(96);
	uint64_t cpu0, d0, cpu1, d1, next;
	double us;
	int rc = 0;

	if (!row_name || !cpu_name || !daemon_name) {
		free(row_name);
		free(cpu_name);
		free(daemon_name);
		return -1;
	}
	snprintf(row_name, 64, "paced-%uk-%s", rate / 1000, name);
	snprintf(cpu_name, 96, "%s cpu_us/completion", row_name);
	snprintf(daemon_name, 96, "%s daemon_us/completion", row_name);
	m->row = bench_lat_add(r, row_name, n);
	have_st = dp && daemon_proc_stats(dp, &st0) == 0;
	cpu0 = cpu_now(L, daemon, &d0);
	next = cuflag_now_ns() + period;
	for (uint64_t i = 0; i < n && !rc; i++) {
		sleep_until(next);
		/* A period missed (the waiter itself late) is not made up. */
		next = next + period > cuflag_now_ns() ? next + period : cuflag_now_ns() + period;
		rc = gpu_lat_sample(L, m, PACED_WORK_NS, &us);
		if (!rc && i >= warm)
			m->row->us[m->row->n++] = us;
	}
	cpu1 = cpu_now(L, daemon, &d1);
	if (have_st && !rc && daemon_proc_stats(dp, &st1) == 0)
		paced_scanner_lines(r, row_name, &st0, &st1, n);
	bench_ratio_add(r, cpu_name, rc ? -1 : (double)(cpu1 - cpu0 + d1 - d0) / 1e3 / (double)n);
	bench_ratio_add(r, daemon_name, rc ? -1 : (double)(d1 - d0) / 1e3 / (double)n);
	m->row = keep;
	return rc;
}

/* The cuflagd mechanism on a daemon of its own that spins: a slot there. */
static int spin_daemon_mech(const struct bench_opts *o, struct daemon_proc *d2,
			    cuflag_client **c, struct gmech_state *m)
{
	int rc;

	*c = NULL;
	if (bench_daemon_start_mode(d2, o, "spin"))
		return -1;
	rc = cuflag_connect(d2->sock, c);
	if (!rc)
		rc = cuflag_slot_acquire(*c, &m->slot);
	if (rc) {
		fprintf(stderr, "cuflag-bench: paced: no slot from the spinning daemon: %s\n",
			strerror(-rc));
		return -1;
	}
	return 0;
}

int gpu_paced(const struct bench_opts *o, struct bench_report *r, struct gpu_lat *L,
	      const struct daemon_proc *d)
{
	struct gmech_state spin_m = L->m[G_CUFLAGD];
	struct daemon_proc d2;
	cuflag_client *c2 = NULL;
	int failed = 0, have_spin;

	memset(&d2, 0, sizeof(d2));
	spin_m.slot = NULL;
	have_spin = spin_daemon_mech(o, &d2, &c2, &spin_m) == 0;
	for (size_t k = 0; k < sizeof(paced_rates) / sizeof(paced_rates[0]); k++)
		for (size_t i = 0; i < sizeof(paced_mechs) / sizeof(paced_mechs[0]); i++) {
			const struct paced_mech *pm = &paced_mechs[i];
			struct gmech_state *m = pm->scanner_spin ? &spin_m : &L->m[pm->kind];

			if (pm->scanner_spin && !have_spin) {
				failed = 1;
				continue;
			}
			const struct daemon_proc *dp = pm->scanner_spin ? &d2 : d;

			if (paced_row(r, L, m, pm->name, paced_rates[k], dp->pid,
				      pm->kind == G_CUFLAGD || pm->kind == G_CUFLAGD_SPIN ? dp : NULL))
				failed = 1;
		}
	cuflag_slot_release(spin_m.slot);
	cuflag_disconnect(c2);
	if (d2.pid > 0)
		bench_daemon_stop(&d2);
	return failed ? -1 : 0;
}
