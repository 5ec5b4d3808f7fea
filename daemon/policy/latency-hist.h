/* SPDX-License-Identifier: MIT */
/*
 * How long a client's completions took, from the arm to the scanner seeing
 * the flag: a histogram with one writer (the scanner thread) and any number
 * of readers (the main thread, for cuflagctl).
 *
 * Two sets of buckets are kept. Fine, log-linear ones, for quantiles: 64 ns
 * wide below 1024 ns, then 16 per power of two, so a bucket is at most 1/16
 * of its value wide and its midpoint within 3.2 % of any value in it (up to
 * 2^41 ns, 36 minutes; longer ones share the last bucket). And the fixed
 * bounds Prometheus is given (LHIST_BOUNDS), counted exactly, each value in
 * the first bucket whose bound is not below it, so that "le" means what it
 * says. The count is the sum of the fixed buckets, so a reader never sees a
 * count that disagrees with them; the sum may run a record ahead of them.
 *
 * Every word is written by the scanner alone with a relaxed load and store
 * (no locked instruction on the hot path) and read with relaxed loads.
 */
#ifndef CUFLAGD_LATENCY_HIST_H
#define CUFLAGD_LATENCY_HIST_H

#include <stdatomic.h>
#include <stdint.h>


#define LHIST_LINEAR_SHIFT 6  /* below 1024 ns: buckets of 64 ns */
#define LHIST_FIRST_OCTAVE 10 /* 1024 ns */
#define LHIST_SUB_BITS 4      /* 16 buckets per power of two above */
#define LHIST_OCTAVES 31      /* up to 2^41 ns */
#define LHIST_NFINE ((1u << LHIST_SUB_BITS) * (LHIST_OCTAVES + 1))

/* The fixed bounds, in ns: 1-2-5 steps from 10 us to 10 s, then 30 s and 60 s
 * (1 ms and 2 ms, 10 ms and 20 ms fall in different buckets). Each bound is
 * at least twice the one before: at most one falls in a fine bucket. */
#define LHIST_NBOUNDS 21
extern const uint64_t lhist_bounds_ns[LHIST_NBOUNDS];

struct latency_hist {
	_Atomic uint64_t fine[LHIST_NFINE];
	_Atomic uint64_t fixed[LHIST_NBOUNDS + 1]; /* not cumulative; the last: +Inf */
	_Atomic uint64_t sum_ns;
};

/* A copy a reader made, to compute from. */
struct lhist_snap {
	uint64_t fine[LHIST_NFINE];
	uint64_t fixed[LHIST_NBOUNDS + 1];
	uint64_t count, sum_ns;
};

/* The fine bucket of a value. */
static inline unsigned lhist_fine_index(uint64_t ns)
{
	unsigned e, sub;

	if (ns < (1u << LHIST_FIRST_OCTAVE))
		return (unsigned)(ns >> LHIST_LINEAR_SHIFT);
	e = 63u - (unsigned)__builtin_clzll(ns);
	if (e >= LHIST_FIRST_OCTAVE + LHIST_OCTAVES)
		return LHIST_NFINE - 1;
	sub = (unsigned)(ns >> (e - LHIST_SUB_BITS)) & ((1u << LHIST_SUB_BITS) - 1);
	return ((e - LHIST_FIRST_OCTAVE + 1) << LHIST_SUB_BITS) + sub;
}

/* The fixed bucket of a value: the first bound not below it (a binary search
 * over LHIST_NBOUNDS), LHIST_NBOUNDS for +Inf. */
static inline unsigned lhist_fixed_index(uint64_t ns)
{
	unsigned lo = 0, hi = LHIST_NBOUNDS;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (ns <= lhist_bounds_ns[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static inline void lhist_add(_Atomic uint64_t *w, uint64_t n)
{
	atomic_store_explicit(w, atomic_load_explicit(w, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* Record n completions that took ns each. The scanner thread only. */
static inline void lhist_record(struct latency_hist *h, uint64_t ns, uint64_t n)
{
	lhist_add(&h->fine[lhist_fine_index(ns)], n);
	lhist_add(&h->sum_ns, ns * n);
	lhist_add(&h->fixed[lhist_fixed_index(ns)], n);
}

/*
 * The scanner's per-slot hook. *since: when the slot started waiting (it
 * became pending, or it last completed; 0: not pending). Its due completions
 * are seen now: record them as taking now - *since (the later of their arm and
 * the slot's previous completion, as far as the daemon can tell them apart)
 * and start the next wait now.
 */
static inline void lhist_slot_done(struct latency_hist *h, _Atomic uint64_t *since,
				   uint64_t now, uint32_t due)
{
	uint64_t t = atomic_load_explicit(since, memory_order_relaxed);

	if (t && now >= t)
		lhist_record(h, now - t, due);
	atomic_store_explicit(since, now, memory_order_relaxed);
}

/* Lower edge and width of a fine bucket, in ns. */
uint64_t lhist_fine_lower(unsigned idx);
uint64_t lhist_fine_width(unsigned idx);

/* Copy h (while the scanner may be writing it). */
void lhist_snapshot(const struct latency_hist *h, struct lhist_snap *out);

/* Add one snapshot into another (a user's or the daemon's total). */
void lhist_merge(struct lhist_snap *into, const struct lhist_snap *from);

/* The q-quantile (0 < q <= 1) of a snapshot's fine buckets, in ns: the
 * midpoint of the bucket holding the ceil(q * count)-th value. 0 when empty. */
uint64_t lhist_quantile(const struct lhist_snap *s, double q);

#endif
