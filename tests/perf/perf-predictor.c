/* SPDX-License-Identifier: MIT */
/*
 * perf-predictor: the predictor (daemon/policy/predictor.c) replayed, no daemon and
 * no clock: made-up durations of a few kinds of work, a slot each of
 * --slots taking turns as the scanner-cost rows' device does, and for each
 * completion where the scanner first looks after the arm (a lead before the
 * window) and whether it is still looking when the flag lands. Per kind,
 * after the first tenth: the spin before the flag (us a completion) and the
 * share of flags that landed while it was not looking (seen a sleep late).
 * Machine noise plays no part, so two trees' predictors compare exactly:
 * docs/bench-log/2026-12-02-first-spread-park-short-work.md.
 *
 * With --late-us M, the timer is late as a host's is: each wait for a look
 * ends M us late on average (exponentially, from 1 us), the lead is the
 * 90th percentile of that, and a flag that landed before the wait ended is
 * seen on its first pass (as the scanner sees it: taken at the wait's
 * deadline, predict_how_seen() deciding how).
 *
 *   perf-predictor [--lead-us N] [--late-us M] [--slots N] [--completions N]
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "policy/predictor.h"
#include "replay-random.h"

#define US 1000ull
#define MS 1000000ull
#define BACKSTOP_NS (10 * MS)

struct work {
	const char *name;
	const char *what;
	uint64_t (*duration)(uint64_t *rng);
};

static uint64_t punctual_500(uint64_t *rng)
{
	return 500 * US + (uint64_t)(replay_uniform(rng) * 500);
}

static uint64_t punctual_50(uint64_t *rng)
{
	return 50 * US + (uint64_t)(replay_uniform(rng) * 500);
}

static uint64_t scatter(uint64_t *rng)
{
	return 50 * US + (uint64_t)(replay_uniform(rng) * 100000);
}

static uint64_t late_tail(uint64_t *rng)
{
	return 500 * US + (uint64_t)(-20000.0 * log(replay_uniform(rng)));
}

static uint64_t outliers(uint64_t *rng)
{
	uint64_t d = punctual_500(rng);

	return replay_uniform(rng) < 0.05 ? d + 5 * US + (uint64_t)(replay_uniform(rng) * 25000) : d;
}

static const struct work works[] = {
	{ "punctual-500us", "500 us within 0.5 us (the 1 000/s row)", punctual_500 },
	{ "punctual-50us", "50 us within 0.5 us (the 10 000/s row)", punctual_50 },
	{ "scatter", "50-150 us at random (the GPU bench's gate)", scatter },
	{ "late-tail", "500 us plus an exponential delay of mean 20 us", late_tail },
	{ "outliers", "500 us, one in 20 held up 5-30 us", outliers },
};

struct result {
	double spun_us;  /* before each flag, on average */
	double outside;  /* share of flags that landed while not looked at */
};

static struct result replay(const struct work *w, uint64_t lead, uint64_t late_ns,
			    unsigned nslots, unsigned n)
{
	struct slot_timing *s = calloc(nslots, sizeof(*s));
	uint64_t t = 1000 * MS, rng = 12345, spun = 0;
	unsigned counted = 0, outside = 0;

	if (!s) {
		perror("perf-predictor");
		exit(1);
	}
	for (unsigned i = 0; i < n; i++) {
		struct slot_timing *x = &s[i % nslots];
		uint64_t d = w->duration(&rng), first, planned = 0, woke, seen_at;
		int out;

		predict_armed(x, t);
		/* Nothing learned yet: the scanner spins from the arm. */
		first = x->lat_ns ? predict_look_at(x, t, lead, BACKSTOP_NS) : t;
		woke = first;
		if (late_ns && first > t) {
			planned = first;
			woke = first + replay_late_by(late_ns, &rng);
		}
		out = woke > t + d ||
		      (x->lat_ns && predict_look_at(x, t + d, lead, BACKSTOP_NS) != t + d);
		if (i >= n / 10) {
			counted++;
			outside += out;
			spun += woke < t + d ? t + d - woke : 0;
		}
		seen_at = woke > t + d ? woke : t + d;
		if (!late_ns)
			predict_completed(x, t + d, t + d,
					  out ? PREDICT_SEEN_ASLEEP : PREDICT_SEEN_AWAKE);
		else if (woke > t + d) /* found by the first pass after the wait */
			predict_completed(x, predict_learn_at(x, planned, seen_at, lead), seen_at,
					  predict_how_seen(0, 1, planned, seen_at, lead));
		else
			predict_completed(x, seen_at, seen_at, PREDICT_SEEN_AWAKE);
		t += d + 1 * MS;
	}
	free(s);
	return (struct result){ .spun_us = (double)spun / 1e3 / counted,
				.outside = (double)outside / counted };
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "lead-us", required_argument, NULL, 'l' },
					      { "late-us", required_argument, NULL, 'L' },
					      { "slots", required_argument, NULL, 's' },
					      { "completions", required_argument, NULL, 'n' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	unsigned long lead_us = 20, late_us = 0, slots = 8, n = 450;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'l')
			lead_us = strtoul(optarg, NULL, 10);
		else if (c == 'L')
			late_us = strtoul(optarg, NULL, 10);
		else if (c == 's')
			slots = strtoul(optarg, NULL, 10);
		else if (c == 'n')
			n = strtoul(optarg, NULL, 10);
		else {
			fprintf(c == 'h' ? stdout : stderr,
				"usage: perf-predictor [--lead-us N] [--late-us M] [--slots N] "
				"[--completions N]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!slots || n < 10 || lead_us > 1000000 || late_us > 1000000) {
		fprintf(stderr, "perf-predictor: --slots at least 1, --completions at least 10\n");
		return 2;
	}
	/* The lead a scanner learns from such a timer: its 90th percentile. */
	if (late_us)
		lead_us = 1 + (unsigned long)((double)late_us * log(10.0) + 0.5);
	printf("perf-predictor: lead %lu us%s, %lu slots in turn, %lu completions (the first "
	       "tenth not counted)\n",
	       lead_us, late_us ? " (the 90th percentile of the waits' lateness)" : "", slots, n);
	printf("  %-16s %12s %9s  %s\n", "work", "spun us/c", "outside", "what");
	for (size_t k = 0; k < sizeof(works) / sizeof(works[0]); k++) {
		struct result r = replay(&works[k], lead_us * US, late_us * US, (unsigned)slots,
					 (unsigned)n);
		printf("  %-16s %12.1f %8.2f%%  %s\n", works[k].name, r.spun_us, r.outside * 100,
		       works[k].what);
	}
	return 0;
}
