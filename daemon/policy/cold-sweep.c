/* SPDX-License-Identifier: MIT */
#include "policy/cold-sweep.h"

/* When a sweep begun at start_ns is due to have read n of ncold slots. */
static uint64_t due_at(uint64_t start_ns, uint64_t n, uint64_t ncold)
{
	unsigned __int128 t = (unsigned __int128)COLD_SWEEP_NS * n + ncold - 1;
	return start_ns + (uint64_t)(t / ncold);
}

/* How many of ncold slots a sweep begun at start_ns is due to have read. */
static uint64_t due_by(uint64_t start_ns, uint64_t ncold, uint64_t now_ns)
{
	uint64_t elapsed = now_ns - start_ns;

	if (elapsed >= COLD_SWEEP_NS)
		return ncold;
	return (uint64_t)((unsigned __int128)ncold * elapsed / COLD_SWEEP_NS);
}

/* A slice is worth a pass once this many of ncold slots are due (all that
 * are left of the sweep, where fewer are): COLD_SLICE_MIN, and no fewer
 * than make slices COLD_SLICE_GAP_NS apart (a large cold set read in a few
 * large slices, not a wake-up every few microseconds). */
static uint64_t worth(uint64_t left, uint64_t ncold)
{
	uint64_t w = (uint64_t)((unsigned __int128)ncold * COLD_SLICE_GAP_NS / COLD_SWEEP_NS);

	if (w < COLD_SLICE_MIN)
		w = COLD_SLICE_MIN;
	if (w > COLD_SLICE_MAX)
		w = COLD_SLICE_MAX;
	return left < w ? left : w;
}

struct cold_slice cold_plan(struct cold_sweep *sw, uint64_t ncold, uint64_t now_ns)
{
	struct cold_slice sl = { .from = sw->pos, .count = 0, .next_ns = UINT64_MAX };
	uint64_t due, n;

	if (!ncold) {
		/* Slots that go cold later are swept from when they come. */
		sw->start_ns = now_ns;
		sw->pos = sw->end = sl.from = 0;
		return sl;
	}
	/* Removals shrink the sweep's part with the set (scanner/pending.c);
	 * until its first slice, a sweep takes in what comes. */
	if (sw->end > ncold || !sw->pos)
		sw->end = ncold;
	if (sw->pos >= sw->end) {
		if (now_ns - sw->start_ns < COLD_SWEEP_NS) {
			sl.next_ns = sw->start_ns + COLD_SWEEP_NS;
			return sl;
		}
		sw->start_ns = now_ns;
		sw->pos = sl.from = 0;
		sw->end = ncold;
	}
	n = sw->end;
	due = due_by(sw->start_ns, n, now_ns);
	if (due >= sw->pos + worth(n - sw->pos, n)) {
		sl.count = due - sw->pos > COLD_SLICE_MAX ? COLD_SLICE_MAX : due - sw->pos;
		sw->pos += sl.count;
	}
	if (sw->pos >= n)
		sl.next_ns = sw->start_ns + COLD_SWEEP_NS;
	else if (due >= sw->pos + worth(n - sw->pos, n))
		sl.next_ns = now_ns; /* behind by a slice or more: at once */
	else
		sl.next_ns = due_at(sw->start_ns, sw->pos + worth(n - sw->pos, n), n);
	if (sl.next_ns < now_ns)
		sl.next_ns = now_ns;
	return sl;
}

uint64_t cold_wake_at(enum cold_reason why, uint64_t due_ns)
{
	switch (why) {
	case COLD_AHEAD:
		/* A sweep reads each cold slot within two periods, wherever it
		 * stands in the set: hot by then, the predictor's look follows. */
		return due_ns - 2 * COLD_SWEEP_NS;
	case COLD_CROWDED:
		return 0;
	default:
		return UINT64_MAX;
	}
}
