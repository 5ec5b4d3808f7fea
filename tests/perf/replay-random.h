/* SPDX-License-Identifier: MIT */
/*
 * The made-up randomness of the replays (perf-predictor, perf-idle): a
 * seeded generator, so that two trees replay the same draws.
 */
#ifndef CUFLAG_REPLAY_RANDOM_H
#define CUFLAG_REPLAY_RANDOM_H

#include <math.h>
#include <stdint.h>

/* Uniform in (0, 1], from the state *rng. */
static inline double replay_uniform(uint64_t *rng)
{
	*rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
	return (double)((*rng >> 11) + 1) / 9007199254740993.0;
}

/* How late a timer (or a wake-up) ends: 1 us plus an exponential delay of
 * mean mean_ns. */
static inline uint64_t replay_late_by(uint64_t mean_ns, uint64_t *rng)
{
	return 1000u + (uint64_t)(-(double)mean_ns * log(replay_uniform(rng)));
}

#endif
