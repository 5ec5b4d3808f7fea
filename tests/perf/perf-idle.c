/* SPDX-License-Identifier: MIT */
/*
 * perf-idle: the adaptive scanner's waits replayed, no daemon and no clock:
 * idle-policy.c and predictor.c driven as scanner/pass.c and
 * scanner/park.c drive them, one client's 8 slots taking turns, with a
 * timer as late as a host's (each timed wait ends 1 us plus an exponential
 * delay of mean --late-us late, one longer than IDLE_SHORT_WAIT_NS of mean
 * --long-late-us: a CPU idle longer sleeps deeper) and an arm that wakes a
 * parked scanner as late (--wake-us). What it leaves out: the cold set and its sweep, fair
 * shares, the cost of a pass (a spin is counted in passes of PASS_NS).
 * Per load, after the first tenth: wake-ups and spin a completion, and how
 * late the scanner saw each flag (p50, p99). Two trees' policies compare
 * exactly, whatever the machine; the loads:
 *   cpu-1k, cpu-10k: the scanner-cost rows (arms on time, work half the
 *                    period);
 *   gpu-1k, gpu-10k: the paced GPU rows (an arm each period, late by the
 *                    waiter's own timer, 25 us of work).
 *
 * With --late-arm-every K, every Kth arm of the cpu loads is late: made
 * 25 us before its flag lands on time (a device thread that a late timer
 * held up; on a busy host one in a few hundred is).
 *
 *   perf-idle [--late-us M] [--long-late-us M] [--wake-us W] [--completions N]
 *             [--late-arm-every K]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/idle-policy.h"
#include "policy/predictor.h"
#include "replay-random.h"

#define US 1000ull
#define MS 1000000ull
#define SLOTS 8u
#define PASS_NS 200u
/* --late-arm-every K: every Kth arm of the cpu loads comes this long before
 * its flag. */
#define LATE_ARM_AHEAD_NS (25 * US)

struct load {
	const char *name;
	uint64_t period_ns, work_ns;
	int waiter_late; /* the arm is late by the waiter's own timer */
};

static const struct load loads[] = {
	{ "cpu-1k", 1 * MS, 500 * US, 0 },
	{ "cpu-10k", 100 * US, 50 * US, 0 },
	{ "gpu-1k", 1 * MS, 25 * US, 1 },
	{ "gpu-10k", 100 * US, 25 * US, 1 },
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct replay {
	uint64_t late_ns, long_late_ns, rng;
	uint64_t *arm, *flag; /* per completion i: its arm, its flag's landing */
	unsigned n, next_arm, done;
	int pending[SLOTS]; /* the completion a slot awaits, or -1 */
	struct slot_timing timing[SLOTS];
	struct idle_state st;
	struct timer_lateness late, late_long, wake_late;
	uint64_t t, pass_ns, planned, woke_from;
	int wake_sampled;
	uint64_t wakes, spin_ns, *seen_late;
};

static unsigned npending(const struct replay *r)
{
	unsigned k = 0;

	for (unsigned s = 0; s < SLOTS; s++)
		k += r->pending[s] >= 0;
	return k;
}

/* One pass at r->t: take the arms made by now, signal the flags landed by
 * now (scanner/pass.c's learn_completion), find the next look. */
static int pass(struct replay *r, uint64_t *look_at, uint64_t lead)
{
	uint64_t prev = r->pass_ns;
	int progress = 0;

	r->pass_ns = r->t;
	while (r->next_arm < r->n && r->arm[r->next_arm] <= r->t) {
		unsigned i = r->next_arm++, s = i % SLOTS;
		uint64_t at = r->arm[i] < prev ? prev : r->arm[i];

		if (r->woke_from && !r->wake_sampled && at >= r->woke_from) {
			r->wake_sampled = 1;
			predict_lateness(&r->wake_late, at, r->t);
			idle_note_park_wake(&r->st, predict_lead_ns(&r->wake_late));
		}
		if (!npending(r))
			idle_note_armed_from_empty(&r->st, at);
		predict_armed(&r->timing[s], at);
		r->pending[s] = (int)i;
		progress = 1;
	}
	*look_at = UINT64_MAX;
	for (unsigned s = 0; s < SLOTS; s++) {
		struct slot_timing *x = &r->timing[s];
		int i = r->pending[s];

		if (i < 0)
			continue;
		if (r->flag[i] > r->t) {
			uint64_t at = predict_look_at(x, r->t, lead, 1 * MS);
			if (at < *look_at)
				*look_at = at;
			continue;
		}
		if (r->woke_from && x->since_ns < r->woke_from) {
			predict_completed_unseen(x, r->t);
		} else {
			uint64_t since = x->since_ns;
			enum predict_seen seen = predict_how_seen(0, 1, r->planned, r->t, lead);
			uint64_t d = predict_completed(
				x, predict_learn_at(x, r->planned, r->t, lead), r->t, seen);
			idle_note_seen(&r->st, since, r->planned, r->t, d);
		}
		r->seen_late[r->done++] = r->t - r->flag[i];
		r->pending[s] = -1;
		progress = 1;
		if (!npending(r))
			idle_note_empty(&r->st, r->t);
	}
	r->planned = 0;
	r->woke_from = 0;
	return progress;
}

/* A timed wait from r->t to until ended by its timer (scanner_nap, or a
 * block no arm ended): its lateness learned as count_sleep() learns it. */
static void timed_wait(struct replay *r, uint64_t until)
{
	if (until < r->t) /* a deadline already past ends the wait at once */
		until = r->t;
	int long_wait = until - r->t > IDLE_SHORT_WAIT_NS;
	uint64_t woke = until + replay_late_by(long_wait ? r->long_late_ns : r->late_ns, &r->rng);

	if (long_wait) {
		predict_lateness(&r->late_long, until, woke);
		idle_note_long_lateness(&r->st, predict_lead_ns(&r->late_long));
	} else {
		predict_lateness(&r->late, until, woke);
	}
	r->planned = until;
	r->t = woke;
}

static void replay(const struct load *l, uint64_t late_ns, uint64_t long_late_ns,
		   uint64_t wake_ns, unsigned n, unsigned late_arm_every)
{
	static const struct idle_cfg cfg = { .mode = SCANNER_ADAPTIVE,
					     .spin_ns = 50 * US,
					     .pending_spin_ns = 10 * MS,
					     .pending_poll_ns = 250 * US,
					     .backstop_ns = 1 * MS };
	struct replay r;
	uint64_t counted_from, w0 = 0, s0 = 0, q[2];

	memset(&r, 0, sizeof(r));
	r.late_ns = late_ns;
	r.long_late_ns = long_late_ns;
	r.rng = 12345;
	r.n = n;
	r.arm = calloc(n, sizeof(*r.arm));
	r.flag = calloc(n, sizeof(*r.flag));
	r.seen_late = calloc(n, sizeof(*r.seen_late));
	if (!r.arm || !r.flag || !r.seen_late) {
		perror("perf-idle");
		exit(1);
	}
	for (unsigned i = 0; i < n; i++) {
		r.arm[i] = 1000 * MS + i * l->period_ns +
			   (l->waiter_late ? replay_late_by(late_ns, &r.rng) : 0);
		r.flag[i] = r.arm[i] + l->work_ns + (uint64_t)(replay_uniform(&r.rng) * 500);
		/* A device thread that overslept: the arm late, its flag on time. */
		if (late_arm_every && !l->waiter_late && i % late_arm_every == late_arm_every - 1)
			r.arm[i] = r.flag[i] - LATE_ARM_AHEAD_NS;
	}
	for (unsigned s = 0; s < SLOTS; s++)
		r.pending[s] = -1;
	r.t = r.arm[0];
	counted_from = n / 10;
	while (r.done < n) {
		uint64_t look_at, lead = predict_lead_ns(&r.late);
		int progress = pass(&r, &look_at, lead);
		struct idle_decision d;

		if (r.done == counted_from && !w0) {
			w0 = r.wakes + 1;
			s0 = r.spin_ns;
		}
		d = idle_decide(&cfg, &r.st,
				&(struct idle_view){ .now_ns = r.t,
						     .npending = npending(&r),
						     .progress = progress,
						     .look_at_ns = look_at,
						     .lead_ns = lead });
		if (d.action == IDLE_SPIN) {
			r.t += PASS_NS;
			r.spin_ns += PASS_NS;
			continue;
		}
		r.wakes++;
		if (d.action == IDLE_NAP) {
			timed_wait(&r, d.until_ns);
			continue;
		}
		/* The park protocol: an arm already made ends it at once; one
		 * made before the deadline wakes the scanner wake_ns later. */
		if (r.next_arm < r.n && r.arm[r.next_arm] <= r.t) {
			r.wakes--;
			continue;
		}
		if (r.next_arm < r.n &&
		    (d.action == IDLE_PARK || r.arm[r.next_arm] < d.until_ns)) {
			r.woke_from = r.t;
			r.wake_sampled = 0;
			r.t = r.arm[r.next_arm] + replay_late_by(wake_ns, &r.rng);
			continue;
		}
		if (d.action == IDLE_PARK)
			break; /* nothing more will come */
		timed_wait(&r, d.until_ns);
	}
	qsort(r.seen_late + counted_from, n - counted_from, sizeof(uint64_t), cmp_u64);
	q[0] = r.seen_late[counted_from + (n - counted_from) / 2];
	q[1] = r.seen_late[counted_from + (n - counted_from) * 99 / 100];
	printf("  %-8s %10.2f %10.1f %10.1f %10.1f\n", l->name,
	       (double)(r.wakes - (w0 ? w0 - 1 : 0)) / (n - counted_from),
	       (double)(r.spin_ns - s0) / 1e3 / (n - counted_from), (double)q[0] / 1e3,
	       (double)q[1] / 1e3);
	free(r.arm);
	free(r.flag);
	free(r.seen_late);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "late-us", required_argument, NULL, 'l' },
					      { "long-late-us", required_argument, NULL, 'L' },
					      { "wake-us", required_argument, NULL, 'w' },
					      { "completions", required_argument, NULL, 'n' },
					      { "late-arm-every", required_argument, NULL, 'a' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	unsigned long late_us = 5, long_late_us = 0, wake_us = 10, n = 4500, late_arm = 0;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'l')
			late_us = strtoul(optarg, NULL, 10);
		else if (c == 'L')
			long_late_us = strtoul(optarg, NULL, 10);
		else if (c == 'w')
			wake_us = strtoul(optarg, NULL, 10);
		else if (c == 'n')
			n = strtoul(optarg, NULL, 10);
		else if (c == 'a')
			late_arm = strtoul(optarg, NULL, 10);
		else {
			fprintf(c == 'h' ? stdout : stderr,
				"usage: perf-idle [--late-us M] [--long-late-us M] [--wake-us W] "
				"[--completions N] [--late-arm-every K]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!long_late_us)
		long_late_us = late_us;
	if (n < 100 || late_us > 100000 || long_late_us > 100000 || wake_us > 100000 ||
	    late_arm > n) {
		fprintf(stderr, "perf-idle: --completions at least 100, lateness at most 100 ms, "
				"--late-arm-every at most --completions\n");
		return 2;
	}
	printf("perf-idle: waits late by 1 + exp(%lu) us (%lu past %u us), arms wake a parked "
	       "scanner after 1 + exp(%lu) us, %lu completions (the first tenth not counted)\n",
	       late_us, long_late_us, IDLE_SHORT_WAIT_NS / 1000u, wake_us, n);
	printf("  %-8s %10s %10s %10s %10s\n", "load", "wakes/c", "spin us/c", "seen p50",
	       "seen p99");
	for (size_t k = 0; k < sizeof(loads) / sizeof(loads[0]); k++)
		replay(&loads[k], late_us * US, long_late_us * US, wake_us * US, (unsigned)n,
		       (unsigned)late_arm);
	return 0;
}
