/* SPDX-License-Identifier: MIT */
/*
 * The cold sweep under churn (cold-churn). One user holds 12 connections of
 * 1024 grouped slots, each armed far ahead (cuflag_slot_arm_many), and
 * advances every flag every 200 us: past its user's hot share, its slots
 * keep going cold and hot again (the sweep finds each flag moved), so that
 * thousands of entries join the cold set in every pass. Meanwhile another user's
 * slots are pending long, cold, and it completes one at a time, timing how
 * long the daemon takes to record it (spinning on the record, as a client
 * that spins before it blocks does: the notice, no wake-up in it): a sweep
 * bounded to the slots that were cold when it began (daemon/policy/cold-sweep.h)
 * reads each within two periods, so that notice's p99 must be within
 * NOTICE_P99_MS however the other user churns, and every one of its
 * completions counted exactly once.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "attacks.h"
#include "cuflag/cuflag.h"

#define CHURN_CONNS 12
#define CHURN_SLOTS 1024
#define CHURN_AHEAD 1000000u
#define CHURN_GAP_US 200    /* every flag advanced this often */
#define UID_LATE 60031
#define LATE_SLOTS 512      /* the long-pending user's */
#define LATE_HOLD_MS 300    /* pending that long before the first is completed */
#define LATE_RUN_MS 2000
#define LATE_MAX 2048
#define LATE_WAIT_MS 1000
#define NOTICE_P99_MS 4.0
#define NOTICE_MAX_MS 50.0

struct churn {
	_Atomic int ready, go, stop, done, err, err_step;
	_Atomic long advanced;
	_Atomic int late_ready, late_done, late_err, late_step, inexact, lost;
	_Atomic unsigned nlate;
	double late_ms[LATE_MAX];
};

static void churn_failed(struct churn *ch, int step, int rc)
{
	if (!atomic_load(&ch->err)) {
		atomic_store(&ch->err_step, step);
		atomic_store(&ch->err, rc ? rc : -EPROTO);
	}
}

static void churn_main(void *arg)
{
	struct churn *ch = arg;
	static cuflag_slot *s[CHURN_CONNS * CHURN_SLOTS];
	static uint32_t next[CHURN_CONNS * CHURN_SLOTS];
	cuflag_client *c[CHURN_CONNS];
	cuflag_group *g[CHURN_CONNS];
	struct cuflag_completion rec[256];
	int n = 0, rc = 0;

	for (int k = 0; k < CHURN_CONNS && !rc; k++) {
		if ((rc = cuflag_connect(attack_daemon.sock, &c[k])) ||
		    (rc = cuflag_group_create(c[k], &g[k])) ||
		    (rc = cuflag_group_slots_acquire(g[k], CHURN_SLOTS, &s[n]))) {
			churn_failed(ch, 1, rc);
			break;
		}
		n += CHURN_SLOTS;
	}
	for (int i = 0; !rc && i < n; i++)
		if ((rc = cuflag_slot_arm_many(s[i], CHURN_AHEAD, &next[i])))
			churn_failed(ch, 2, rc);
	atomic_store(&ch->ready, 1);
	wait_flag(&ch->go, 1, 60000);
	while (!rc && !atomic_load(&ch->stop)) {
		for (int i = 0; i < n; i++)
			sim_store(cuflag_slot_flag(s[i]), next[i]++);
		atomic_fetch_add(&ch->advanced, n);
		for (int k = 0; k < CHURN_CONNS; k++)
			while (cuflag_group_drain(g[k], rec, 256) > 0)
				;
		usleep(CHURN_GAP_US);
	}
	for (int k = 0; k < CHURN_CONNS && k * CHURN_SLOTS < n; k++)
		cuflag_disconnect(c[k]);
	atomic_store(&ch->done, 1);
}

/* One completion of s (its flag landed just now): ns until the daemon's
 * record of it is in the region, spinning on it (what a client spinning
 * before it blocks sees: the notice, no wake-up in it), or 0 when it did
 * not come within LATE_WAIT_MS or came counted wrong. */
static uint64_t late_time_one(cuflag_slot *s, uint32_t target, int *inexact)
{
	uint64_t t0 = cuflag_now_ns(), n = 0;
	int rc;

	sim_store(cuflag_slot_flag(s), target);
	while ((rc = cuflag_slot_consume(s, &n)) == -EAGAIN) {
		if (cuflag_now_ns() - t0 > LATE_WAIT_MS * 1000000ull)
			return 0;
		sched_yield();
	}
	if (rc || n != 1) {
		++*inexact;
		return 0;
	}
	return cuflag_now_ns() - t0;
}

/* The long-pending user: its slots armed and held, then one at a time
 * completed and timed (anywhere in the sweep's period), then the rest;
 * every one counted exactly once. */
static void late_main(void *arg)
{
	struct churn *ch = arg;
	static cuflag_slot *s[LATE_SLOTS];
	static uint32_t target[LATE_SLOTS];
	static uint8_t landed[LATE_SLOTS];
	uint64_t rng = cuflag_now_ns() | 1, end, n = 0;
	cuflag_client *c;
	cuflag_group *g;
	int rc, inexact = 0, lost = 0, left = LATE_SLOTS;

	if ((rc = cuflag_connect(attack_daemon.sock, &c)) || (rc = cuflag_group_create(c, &g)) ||
	    (rc = cuflag_group_slots_acquire(g, LATE_SLOTS, s)))
		atomic_store(&ch->late_step, 1);
	for (int i = 0; !rc && i < LATE_SLOTS; i++)
		if ((rc = cuflag_slot_arm(s[i], &target[i])))
			atomic_store(&ch->late_step, 2);
	atomic_store(&ch->late_ready, 1);
	wait_flag(&ch->go, 1, 60000);
	usleep(LATE_HOLD_MS * 1000);
	end = cuflag_now_ns() + LATE_RUN_MS * 1000000ull;
	while (!rc && cuflag_now_ns() < end && left > 1) {
		unsigned k = atomic_load(&ch->nlate);
		uint32_t i;
		uint64_t ns;
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		for (i = (uint32_t)(rng >> 33) % LATE_SLOTS; landed[i]; i = (i + 1) % LATE_SLOTS)
			;
		usleep((useconds_t)((rng >> 20) % 4000)); /* anywhere in the sweep's period */
		landed[i] = 1;
		left--;
		ns = late_time_one(s[i], target[i], &inexact);
		lost += !ns;
		if (ns && k < LATE_MAX) {
			ch->late_ms[k] = (double)ns / 1e6;
			atomic_store(&ch->nlate, k + 1);
		}
	}
	/* The rest at once: each counted once, nothing more after. */
	for (int i = 0; !rc && i < LATE_SLOTS; i++)
		if (!landed[i])
			sim_store(cuflag_slot_flag(s[i]), target[i]);
	usleep(50000);
	for (int i = 0; !rc && i < LATE_SLOTS; i++) {
		uint64_t got = 0;
		if (landed[i])
			continue;
		for (int tries = 0; cuflag_slot_consume(s[i], &n) == -EAGAIN && tries < 1000; tries++)
			usleep(1000);
		got = n;
		while (cuflag_slot_consume(s[i], &n) == 0)
			got += n;
		inexact += got != 1;
	}
	if (rc)
		atomic_store(&ch->late_err, rc);
	atomic_store(&ch->inexact, inexact);
	atomic_store(&ch->lost, lost);
	if (atomic_load(&ch->late_step) != 1)
		cuflag_disconnect(c);
	atomic_store(&ch->late_done, 1);
}

void attack_cold_churn(void)
{
	struct churn *ch = shm_alloc(sizeof(*ch));
	struct samples *all = shm_alloc(sizeof(*all));
	struct figures nf;
	struct window w;
	pid_t att, late;

	att = spawn_user(UID_ATTACKER, 19, churn_main, ch);
	late = spawn_user(UID_LATE, 0, late_main, ch);
	wait_flag(&ch->ready, 1, 60000);
	wait_flag(&ch->late_ready, 1, 60000);
	window_open(&w, "12288 slots churning through the cold set, another user's pending long");
	atomic_store(&ch->go, 1);
	wait_flag(&ch->late_done, 1, LATE_HOLD_MS + LATE_RUN_MS + 30000);
	atomic_store(&ch->stop, 1);
	if (child_wait(late, 10000) != 0 || !atomic_load(&ch->late_done))
		fail("%s: the long-pending user did not get to its end", w.name);
	if (child_wait(att, 10000) != 0 || !atomic_load(&ch->done))
		fail("%s: the churning user did not get to its end", w.name);
	if (atomic_load(&ch->err))
		fail("%s: the churning user's step %d failed: %s", w.name,
		     atomic_load(&ch->err_step), strerror(-atomic_load(&ch->err)));
	if (atomic_load(&ch->late_err))
		fail("%s: the long-pending user's step %d failed: %s", w.name,
		     atomic_load(&ch->late_step), strerror(-atomic_load(&ch->late_err)));
	for (unsigned j = 0; j < atomic_load(&ch->nlate); j++)
		samples_add(all, 1, (uint64_t)(ch->late_ms[j] * 1e6), 0);
	samples_figures(all, 0, UINT64_MAX, &nf);
	CHECK(munmap(all, sizeof(*all)) == 0);
	snprintf(w.outcome, sizeof(w.outcome),
		 "%ld flags advanced; long-pending slots completed: %u, notice p50/p99/max "
		 "%.2f/%.2f/%.1f ms; lost %d, inexact %d",
		 atomic_load(&ch->advanced), nf.n, nf.p50_ms, nf.p99_ms, nf.max_ms,
		 atomic_load(&ch->lost), atomic_load(&ch->inexact));
	if (nf.n < 100)
		fail("%s: only %u long-pending completions timed", w.name, nf.n);
	if (nf.p99_ms > NOTICE_P99_MS)
		fail("%s: a long-pending slot's notice p99 %.2f ms (target %.0f ms)", w.name,
		     nf.p99_ms, NOTICE_P99_MS);
	if (nf.max_ms > NOTICE_MAX_MS)
		fail("%s: a long-pending slot signalled after %.1f ms (max %.0f ms)", w.name,
		     nf.max_ms, NOTICE_MAX_MS);
	if (atomic_load(&ch->lost) || atomic_load(&ch->inexact))
		fail("%s: %d completions never signalled, %d not counted exactly once", w.name,
		     atomic_load(&ch->lost), atomic_load(&ch->inexact));
	window_close(&w);
}
