/* SPDX-License-Identifier: MIT */
/*
 * Pending work of many other users (scale-pending). 16 users, each with 12
 * connections of 1024 grouped slots (196 608 slots, within the daemon's
 * defaults), arm every slot and hold it, its flag never landing, while the
 * victim completes its own slot once a millisecond: a pass must cost what
 * is due, not what is pending on the node (daemon/policy/cold-sweep.h), so the
 * victim's wakes must not grow with those slots.
 *
 * Once the slots have been pending over a second, each user completes a
 * random one at a time and times how long the daemon takes to signal it
 * (the cold sweep's notice: p99 printed, the max held to NOTICE_MAX_MS);
 * then every flag lands (2048 a millisecond over the users, about 100 ms),
 * and every completion must have been counted exactly once (one record of
 * one completion in its group's ring, nothing more after). Printed besides:
 * the scanner's CPU while the slots are held, and its longest stretch
 * without a pass while their arms were taken in (before the window).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "attack-raw.h"
#include "attacks.h"
#include "cuflag/cuflag.h"
#include "pending-load.h"

#define USERS 16
#define CONNS 12
#define SLOTS 1024 /* per connection: the daemon's default */
#define PER_USER (CONNS * SLOTS)
#define UID_FIRST 60100
#define HOLD_MS 1500   /* held, nothing landing (more than a second pending) */
#define LATE_MS 1500   /* then one at a time completed and timed */
#define LATE_MAX 1024  /* timed completions a user keeps */
#define WAIT_MS 1000   /* a completion not signalled by then is a failure */
#define NOTICE_MAX_MS 50.0
#define NOTICE_P99_MS 5.0
#define LAND_PER_MS 128 /* the rest land at this pace, each user (2048 a ms in all) */

struct scale_user {
	_Atomic int ready, done, err, err_step, slots, inexact, lost;
	_Atomic unsigned nlate;
	double late_ms[LATE_MAX];
};

struct scale {
	_Atomic int late, land;
	struct scale_user u[USERS];
};

struct user_arg {
	struct scale *sc;
	struct scale_user *u;
};

static void failed(struct scale_user *u, int step, int rc)
{
	if (!atomic_load(&u->err)) {
		atomic_store(&u->err_step, step);
		atomic_store(&u->err, rc ? rc : -EPROTO);
	}
}

/* One random slot not landed yet at a time, a few ms apart, for LATE_MS. */
static void user_late(struct scale_user *u, struct pending_load *l)
{
	uint64_t end = cuflag_now_ns() + LATE_MS * 1000000ull;

	while (cuflag_now_ns() < end && !l->step) {
		unsigned n = atomic_load(&u->nlate);
		uint32_t i = pending_load_pick(l);
		uint64_t ns;
		usleep((useconds_t)(l->rng % 4000)); /* anywhere in the sweep's period */
		if ((ns = pending_load_time_one(l, i, WAIT_MS)) && n < LATE_MAX) {
			u->late_ms[n] = (double)ns / 1e6;
			atomic_store(&u->nlate, n + 1);
		}
	}
}

static void user_main(void *arg)
{
	struct user_arg *a = arg;
	struct scale_user *u = a->u;
	struct pending_load l;
	int rc = pending_load_arm(&l, attack_daemon.sock, CONNS, SLOTS);

	atomic_store(&u->slots, rc ? 0 : (int)l.n);
	attack_mark("uid %d: %d slots armed", (int)getuid(), atomic_load(&u->slots));
	atomic_store(&u->ready, 1);
	wait_flag(&a->sc->late, 1, 120000);
	if (!rc)
		user_late(u, &l);
	wait_flag(&a->sc->land, 1, 120000);
	if (!rc && !l.step)
		rc = pending_load_land_rest(&l, LAND_PER_MS, 20000);
	if (rc || l.step)
		failed(u, l.step, rc);
	atomic_store(&u->inexact, l.inexact);
	atomic_store(&u->lost, l.lost);
	pending_load_close(&l);
	atomic_store(&u->done, 1);
}

/*
 * Until every user has armed its slots (before the window: what is measured
 * is the victim while they are pending). Returns how long that took, in ms;
 * *stall_ms gets the longest stretch known to hold no scanner pass: from the
 * answer of a STATS (every few ms) that showed a new pass to the asking of
 * one that showed none since (a slow answer from a busy main thread does
 * not count as the scanner's).
 */
static double arming(struct scale *sc, double *stall_ms)
{
	uint64_t t0 = cuflag_now_ns(), last = t0, passes = 0, p, worst = 0;
	int ready = 0;

	while (ready < USERS && cuflag_now_ns() - t0 < 120000000000ull) {
		uint64_t asked;
		usleep(2000);
		asked = cuflag_now_ns();
		if (!scanner_cpu_ns(&p))
			continue;
		if (p != passes) {
			passes = p;
			last = cuflag_now_ns();
		} else if (asked > last && asked - last > worst) {
			worst = asked - last;
		}
		ready = 0;
		for (int k = 0; k < USERS; k++)
			ready += atomic_load(&sc->u[k].ready);
	}
	if (ready < USERS)
		fail("scale-pending: %d of %d users armed their slots within 120 s", ready, USERS);
	attack_mark("every slot armed");
	*stall_ms = (double)worst / 1e6;
	return (double)(cuflag_now_ns() - t0) / 1e6;
}

/* Every user's timed completions, together. */
static void notice_figures(struct scale *sc, struct figures *f)
{
	struct samples *all = shm_alloc(sizeof(*all));

	for (int k = 0; k < USERS; k++)
		for (unsigned j = 0; j < atomic_load(&sc->u[k].nlate); j++)
			samples_add(all, 1, (uint64_t)(sc->u[k].late_ms[j] * 1e6), 0);
	samples_figures(all, 0, UINT64_MAX, f);
	CHECK(munmap(all, sizeof(*all)) == 0);
}

void attack_scale_pending(void)
{
	struct scale *sc = shm_alloc(sizeof(*sc));
	struct user_arg *a = shm_alloc(sizeof(*a) * USERS);
	struct figures nf;
	struct window w;
	pid_t pid[USERS];
	uint64_t p0 = 0, p1 = 0, c0, c1, t0, t1;
	double cpu_pct = 0, pass_us = 0, passes_s = 0;
	double arm_ms, stall_ms;
	int slots = 0, inexact = 0, lost = 0;

	for (int k = 0; k < USERS; k++) {
		a[k] = (struct user_arg){ sc, &sc->u[k] };
		pid[k] = spawn_user(UID_FIRST + (uid_t)k, 0, user_main, &a[k]);
	}
	arm_ms = arming(sc, &stall_ms);
	window_open(&w, "16 users x 12 connections x 1024 grouped slots armed and pending");
	usleep(200000); /* every arm taken in, every slot cold */
	c0 = scanner_cpu_ns(&p0);
	t0 = cuflag_now_ns();
	usleep((HOLD_MS - 200) * 1000);
	c1 = scanner_cpu_ns(&p1);
	t1 = cuflag_now_ns();
	if (c0 && c1 && p1 > p0) {
		cpu_pct = 100.0 * (double)(c1 - c0) / (double)(t1 - t0);
		pass_us = (double)(c1 - c0) / 1e3 / (double)(p1 - p0);
		passes_s = (double)(p1 - p0) * 1e9 / (double)(t1 - t0);
	}
	attack_mark("late completions");
	atomic_store(&sc->late, 1);
	usleep(LATE_MS * 1000);
	attack_mark("every flag lands");
	atomic_store(&sc->land, 1);
	for (int k = 0; k < USERS; k++) {
		if (child_wait(pid[k], 60000) != 0 || !atomic_load(&sc->u[k].done))
			fail("%s: user %d did not get to its end", w.name, k);
		if (atomic_load(&sc->u[k].err))
			fail("%s: user %d's step %d failed: %s", w.name, k,
			     atomic_load(&sc->u[k].err_step), strerror(-atomic_load(&sc->u[k].err)));
		slots += atomic_load(&sc->u[k].slots);
		inexact += atomic_load(&sc->u[k].inexact);
		lost += atomic_load(&sc->u[k].lost);
	}
	notice_figures(sc, &nf);
	if (snprintf(w.outcome, sizeof(w.outcome),
		     "%d slots armed in %.0f ms (no scanner pass for up to %.0f ms); held: scanner "
		     "%.0f%%, %.0f passes/s, %.1f us/pass; pending > 1 s then completed: %u, notice "
		     "p50/p99/max %.2f/%.2f/%.1f ms; lost %d, inexact %d",
		     slots, arm_ms, stall_ms, cpu_pct, passes_s, pass_us, nf.n, nf.p50_ms, nf.p99_ms,
		     nf.max_ms, lost, inexact) >= (int)sizeof(w.outcome))
		printf("  (the row's last column is cut short)\n");
	if (slots != USERS * PER_USER)
		fail("%s: %d slots armed, %d wanted", w.name, slots, USERS * PER_USER);
	if (nf.n < USERS * 10)
		fail("%s: only %u late completions timed", w.name, nf.n);
	if (nf.max_ms > NOTICE_MAX_MS)
		fail("%s: a completion pending > 1 s signalled after %.1f ms (max %.0f ms)", w.name,
		     nf.max_ms, NOTICE_MAX_MS);
	if (nf.p99_ms > NOTICE_P99_MS)
		printf("  notice p99 %.3f ms is over its target, %.0f ms\n", nf.p99_ms,
		       NOTICE_P99_MS);
	if (lost || inexact)
		fail("%s: %d completions never signalled, %d not counted exactly once", w.name,
		     lost, inexact);
	window_close(&w);
}
