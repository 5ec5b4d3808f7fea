/* SPDX-License-Identifier: MIT */
#include "policy/latency-hist.h"

#include <assert.h>

#define US 1000ull
#define MS 1000000ull
#define S 1000000000ull

const uint64_t lhist_bounds_ns[LHIST_NBOUNDS] = {
	10 * US,  20 * US,  50 * US,  100 * US, 200 * US, 500 * US, 1 * MS,
	2 * MS,   5 * MS,   10 * MS,  20 * MS,  50 * MS,  100 * MS, 200 * MS,
	500 * MS, 1 * S,    2 * S,    5 * S,    10 * S,   30 * S,   60 * S,
};

uint64_t lhist_fine_lower(unsigned idx)
{
	unsigned e, sub;

	assert(idx < LHIST_NFINE);
	if (idx < (1u << LHIST_SUB_BITS))
		return (uint64_t)idx << LHIST_LINEAR_SHIFT;
	e = LHIST_FIRST_OCTAVE + (idx >> LHIST_SUB_BITS) - 1;
	sub = idx & ((1u << LHIST_SUB_BITS) - 1);
	return ((uint64_t)(1u << LHIST_SUB_BITS) + sub) << (e - LHIST_SUB_BITS);
}

uint64_t lhist_fine_width(unsigned idx)
{
	assert(idx < LHIST_NFINE);
	if (idx < (1u << LHIST_SUB_BITS))
		return 1ull << LHIST_LINEAR_SHIFT;
	return 1ull << (LHIST_FIRST_OCTAVE + (idx >> LHIST_SUB_BITS) - 1 - LHIST_SUB_BITS);
}

void lhist_snapshot(const struct latency_hist *h, struct lhist_snap *out)
{
	out->count = 0;
	for (unsigned i = 0; i <= LHIST_NBOUNDS; i++) {
		out->fixed[i] = atomic_load_explicit(&h->fixed[i], memory_order_relaxed);
		out->count += out->fixed[i];
	}
	for (unsigned i = 0; i < LHIST_NFINE; i++)
		out->fine[i] = atomic_load_explicit(&h->fine[i], memory_order_relaxed);
	out->sum_ns = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
}

void lhist_merge(struct lhist_snap *into, const struct lhist_snap *from)
{
	for (unsigned i = 0; i <= LHIST_NBOUNDS; i++)
		into->fixed[i] += from->fixed[i];
	for (unsigned i = 0; i < LHIST_NFINE; i++)
		into->fine[i] += from->fine[i];
	into->count += from->count;
	into->sum_ns += from->sum_ns;
}

uint64_t lhist_quantile(const struct lhist_snap *s, double q)
{
	uint64_t total = 0, rank, seen = 0;

	/* The fine buckets' own total: the fixed ones may be a record apart. */
	for (unsigned i = 0; i < LHIST_NFINE; i++)
		total += s->fine[i];
	if (!total || !(q > 0))
		return 0;
	if (q > 1)
		q = 1;
	rank = (uint64_t)(q * (double)total);
	if ((double)rank < q * (double)total || rank < 1)
		rank++;
	for (unsigned i = 0; i < LHIST_NFINE; i++) {
		seen += s->fine[i];
		if (seen >= rank)
			return lhist_fine_lower(i) + lhist_fine_width(i) / 2;
	}
	return lhist_fine_lower(LHIST_NFINE - 1);
}
