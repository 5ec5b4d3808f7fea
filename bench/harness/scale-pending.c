/* SPDX-License-Identifier: MIT */
/*
 * Pending work of others (cuflag-bench --mode cpu --scale-pending, or
 * perf-scale-pending alone): U load processes, each with 12 connections of
 * 1024 grouped slots, arm every slot and hold it, its flag not landing,
 * against a daemon of this run's own. Rows:
 *
 * - scale-hot-alone / scale-hot: the cuflagd row's method (wake.h) on a slot
 *   of this process with nothing pending, then with every load slot pending;
 *   ratio scale-hot_p50/max(5xscale-hot-alone_p50,50us) (the target: <= 1);
 * - scale-cold: once the slots have been pending at least a second, each
 *   load process completes random ones, one at a time, and times the notice
 *   (its flag's store to its group's record);
 * - throughput row scale-pending: every load slot then lands, and each must
 *   be counted exactly once (the row fails otherwise); its daemon CPU is the
 *   daemon's while the slots were held and the wakes measured.
 *
 * Every process is of the bench's user (the daemon is given the limits for
 * that: --max-pending-per-uid, --max-clients-per-uid); the attack
 * scale-pending runs the load as 16 users of their own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "pending-load.h"
#include "perf.h"
#include "wake.h"

#define CONNS 12
#define SLOTS 1024
#define PER_PROC (CONNS * SLOTS)
#define OLD_NS 1000000000ull  /* pending this long before the notices are timed */
#define LATE_NS 1000000000ull /* then timed for this long */
#define LATE_MAX 2048         /* notices a load process keeps */
#define WAIT_MS 1000          /* a completion not signalled by then is lost */
#define HOT_FLOOR_US 50.0

struct load_proc {
	_Atomic int ready, err;
	_Atomic int inexact, lost;
	_Atomic unsigned counted, nlate;
	double late_us[LATE_MAX];
};

struct load_shared {
	_Atomic int late, land;
	struct load_proc p[];
};

static void load_late(struct load_proc *p, struct pending_load *l)
{
	uint64_t end = cuflag_now_ns() + LATE_NS;

	while (cuflag_now_ns() < end && !l->step) {
		unsigned n = atomic_load(&p->nlate);
		uint32_t i = pending_load_pick(l);
		uint64_t ns;
		bench_sleep_ns(l->rng % 4000000); /* anywhere in the sweep's period */
		if ((ns = pending_load_time_one(l, i, WAIT_MS)) && n < LATE_MAX) {
			p->late_us[n] = (double)ns / 1e3;
			atomic_store(&p->nlate, n + 1);
		}
	}
}

static void load_main(struct load_shared *sh, struct load_proc *p, const char *sock)
{
	struct pending_load l;
	int rc = pending_load_arm(&l, sock, CONNS, SLOTS);

	atomic_store(&p->err, rc);
	atomic_store(&p->ready, 1);
	while (!rc && !atomic_load(&sh->late))
		bench_sleep_ns(1000000);
	if (!rc)
		load_late(p, &l);
	while (!rc && !atomic_load(&sh->land))
		bench_sleep_ns(1000000);
	if (!rc && !l.step && (rc = pending_load_land_rest(&l, 0, 20000)))
		atomic_store(&p->err, rc);
	atomic_store(&p->counted, l.counted);
	atomic_store(&p->inexact, l.inexact + (l.step && !rc));
	atomic_store(&p->lost, l.lost);
	pending_load_close(&l);
	_exit(0);
}

static int daemon_start(struct daemon_proc *d, const struct bench_opts *o)
{
	char spin[32];
	const char *args[16] = { "--spin-us", spin, "--max-clients", "256",
				 "--max-clients-per-uid", "256", "--max-pending-per-uid", "262144",
				 "--log-level", "warning" };
	size_t n = 10;
	int st = 0, rc;

	snprintf(spin, sizeof(spin), "%u", o->spin_us);
	if (o->scanner_mode) {
		args[n++] = "--scanner-mode";
		args[n++] = o->scanner_mode;
	}
	if ((rc = daemon_proc_dir(d, "cuflag-bench")))
		return rc;
	return daemon_proc_start(d, o->daemon, args, 0, &st);
}

/* Every load process's notices into row; the completions counted (the row
 * failed where one was lost or counted twice). */
static uint64_t collect(struct load_shared *sh, unsigned procs, struct bench_lat *row)
{
	int inexact = 0, lost = 0, err = 0;
	uint64_t counted = 0;

	for (unsigned k = 0; k < procs; k++) {
		struct load_proc *p = &sh->p[k];
		for (unsigned j = 0; j < atomic_load(&p->nlate); j++)
			row->us[row->n++] = p->late_us[j];
		inexact += atomic_load(&p->inexact);
		lost += atomic_load(&p->lost);
		err = err ? err : atomic_load(&p->err);
		counted += atomic_load(&p->counted);
	}
	if (err)
		bench_lat_fail(row, "a load process could not arm its slots: %s", strerror(-err));
	else if (inexact || lost)
		bench_lat_fail(row, "%d completions not signalled, %d not counted exactly once", lost,
			       inexact);
	return counted;
}

/* Until every load process has armed its slots (at most 120 s); 0 or -1. */
static int wait_ready(struct load_shared *sh, unsigned procs)
{
	uint64_t t0 = cuflag_now_ns();

	for (unsigned k = 0; k < procs; k++)
		while (!atomic_load(&sh->p[k].ready)) {
			if (cuflag_now_ns() - t0 > 120000000000ull)
				return -1;
			bench_sleep_ns(2000000);
		}
	return 0;
}

/* The wake row's measurement: a connection and slot of this process. */
static int wakes(const struct daemon_proc *d, struct bench_lat *row, const struct bench_opts *o)
{
	cuflag_client *c = NULL;
	cuflag_slot *s = NULL;
	int rc = cuflag_connect(d->sock, &c);

	if (!rc && !(rc = cuflag_slot_acquire(c, &s)))
		rc = bench_cpu_slot_wakes(s, row, o->warmup, o->iterations);
	else
		bench_lat_fail(row, "cannot get a slot: %s", strerror(-rc));
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	return rc;
}

int bench_scale_pending(const struct bench_opts *o, struct bench_report *r, unsigned procs)
{
	struct bench_lat *alone = bench_lat_add(r, "scale-hot-alone", o->iterations);
	struct bench_lat *hot = bench_lat_add(r, "scale-hot", o->iterations);
	struct bench_lat *cold = bench_lat_add(r, "scale-cold", (size_t)procs * LATE_MAX);
	size_t size = sizeof(struct load_shared) + procs * sizeof(struct load_proc);
	struct load_shared *sh;
	struct daemon_proc d;
	struct rlimit rl;
	rlim_t want = (rlim_t)procs * CONNS * 8 + 256;
	pid_t *pid = calloc(procs, sizeof(*pid));
	uint64_t armed_at, counted = 0;
	double cpu0, cpu1, t0, t1;
	int failed = 0;

	/* The daemon's fds: a handful a connection; it inherits the limit. */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			bench_say("scale-pending: RLIMIT_NOFILE: %s\n", strerror(errno));
	}
	sh = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!pid || sh == MAP_FAILED || o->socket || daemon_start(&d, o)) {
		bench_lat_fail(alone, "%s", o->socket ? "needs a daemon of its own (no --socket)"
						      : "cannot start a daemon of its own");
		if (sh != MAP_FAILED)
			munmap(sh, size);
		free(pid);
		return -1;
	}
	r->daemon_pid = d.pid;
	failed |= wakes(&d, alone, o) != 0;
	for (unsigned k = 0; k < procs; k++) {
		pid[k] = fork();
		if (pid[k] == 0)
			load_main(sh, &sh->p[k], d.sock);
		if (pid[k] < 0) { /* counted as a load process that could not arm */
			atomic_store(&sh->p[k].err, -errno);
			atomic_store(&sh->p[k].ready, 1);
		}
	}
	if (wait_ready(sh, procs)) {
		bench_lat_fail(hot, "the load did not arm its slots within 120 s");
		failed = 1;
	}
	armed_at = cuflag_now_ns();
	bench_sleep_ns(200000000); /* every arm taken in, every slot cold */
	cpu0 = bench_daemon_cpu_ms(&d);
	t0 = (double)cuflag_now_ns() / 1e6;
	failed |= wakes(&d, hot, o) != 0;
	while (cuflag_now_ns() - armed_at < OLD_NS)
		bench_sleep_ns(10000000);
	cpu1 = bench_daemon_cpu_ms(&d);
	t1 = (double)cuflag_now_ns() / 1e6;
	atomic_store(&sh->late, 1);
	bench_sleep_ns(LATE_NS);
	atomic_store(&sh->land, 1);
	for (unsigned k = 0; k < procs; k++)
		if (pid[k] > 0)
			bench_reap(pid[k], 0);
	counted = collect(sh, procs, cold);
	failed |= cold->failed;
	bench_daemon_stop(&d);

	bench_ratio_lat(r, "scale-hot_p50/scale-hot-alone_p50", "scale-hot", "scale-hot-alone", 0);
	if (!alone->failed && !hot->failed) {
		double a = bench_lat_pcts(alone).p50 * 5, h = bench_lat_pcts(hot).p50;
		bench_ratio_add(r, "scale-hot_p50/max(5xscale-hot-alone_p50,50us)",
				h / (a > HOT_FLOOR_US ? a : HOT_FLOOR_US));
	}
	bench_ratio_add(r, "scale-pending_daemon_cpu/wall",
			cpu0 >= 0 && cpu1 >= 0 && t1 > t0 ? (cpu1 - cpu0) / (t1 - t0) : -1);
	bench_ratio_add(r, "scale-pending_counted/armed",
			(double)counted / ((double)procs * PER_PROC));
	munmap(sh, size);
	free(pid);
	return failed ? -1 : 0;
}
