/* SPDX-License-Identifier: MIT */
#include "predictor.h"


void predict_armed(struct slot_timing *t, uint64_t now_ns)
{
	t->since_ns = now_ns;
}

uint64_t predict_completed(struct slot_timing *t, uint64_t planned_ns, uint64_t now_ns)
{
	uint64_t seen = planned_ns > t->since_ns && planned_ns < now_ns ? planned_ns : now_ns;
	uint64_t d = seen > t->since_ns ? seen - t->since_ns : 0;

	if (t->lat_ns) {
		/* One sample moves the mean by at most a quarter of the window
		 * and at most doubles the spread: a completion a stream or the
		 * machine delayed once does not have the next dozen looked at
		 * early and spun on (a lasting change is followed within a few
		 * samples: the spread and with it the clip grow geometrically). */
		uint64_t clip = 4 * t->dev_ns + PREDICT_WINDOW_MIN_NS;
		uint64_t off = d > t->lat_ns ? d - t->lat_ns : t->lat_ns - d;
		uint64_t dc = off <= clip ? d : d > t->lat_ns ? t->lat_ns + clip : t->lat_ns - clip;
		t->dev_ns = (3 * t->dev_ns + (off < clip ? off : clip)) / 4;
		t->lat_ns = (3 * t->lat_ns + dc) / 4;
	} else {
		/* A first guess with a modest spread: a wide one would have the
		 * scanner spin across it for the next several completions. */
		t->lat_ns = d;
		t->dev_ns = d / 8;
	}
	/* 0 means "nothing learned": a completion seen at once still is. */
	if (!t->lat_ns)
		t->lat_ns = 1;
	t->since_ns = now_ns;
	return d;
}

void predict_completed_unseen(struct slot_timing *t, uint64_t now_ns)
{
	t->since_ns = now_ns;
}

void predict_seed(struct slot_timing *t, const struct slot_timing *from)
{
	t->lat_ns = from->lat_ns;
	t->dev_ns = from->lat_ns / 8 > from->dev_ns ? from->lat_ns / 8 : from->dev_ns;
}

/* Replace old (or, ring not full, nothing) by late in the sorted copy and
 * return its 90th percentile (32 samples: a shift, once a wake). */
static uint64_t sorted_put(struct timer_lateness *l, uint32_t n, int full, uint32_t old,
			   uint32_t late)
{
	uint32_t *v = l->sorted, i = n;

	if (full) {
		for (i = 0; i + 1 < n && v[i] != old; i++)
			;
		for (; i + 1 < n; i++)
			v[i] = v[i + 1];
		i = n - 1;
	}
	for (; i > 0 && v[i - 1] > late; i--)
		v[i] = v[i - 1];
	v[i] = late;
	n += !full;
	return v[n - 1 - n / 10];
}

uint64_t predict_lead_ns(const struct timer_lateness *l)
{
	uint64_t lead = l->samples ? l->q_ns + PREDICT_LEAD_MIN_NS : PREDICT_LATE_DEFAULT_NS;

	if (lead > PREDICT_LEAD_MAX_NS)
		lead = PREDICT_LEAD_MAX_NS;
	return lead < PREDICT_LEAD_MIN_NS ? PREDICT_LEAD_MIN_NS : lead;
}

void predict_lateness(struct timer_lateness *l, uint64_t planned_ns, uint64_t woke_ns)
{
	uint64_t late = woke_ns > planned_ns ? woke_ns - planned_ns : 0;

	if (late > PREDICT_LATE_MAX_NS)
		late = PREDICT_LATE_MAX_NS;
	if (!l->samples) {
		l->mean_ns = late;
		l->dev_ns = late / 2;
	} else {
		uint64_t off = late > l->mean_ns ? late - l->mean_ns : l->mean_ns - late;
		l->dev_ns = (7 * l->dev_ns + off) / 8;
		l->mean_ns = (7 * l->mean_ns + late) / 8;
	}
	{
		uint32_t pos = l->samples % PREDICT_LATE_RING, full = l->samples >= PREDICT_LATE_RING;
		uint32_t n = full ? PREDICT_LATE_RING : l->samples;
		l->q_ns = sorted_put(l, n, (int)full, l->ring[pos], (uint32_t)late);
		l->ring[pos] = (uint32_t)late;
	}
	if (l->samples < UINT32_MAX)
		l->samples++;
}

uint64_t predict_look_at(const struct slot_timing *t, uint64_t now_ns, uint64_t lead_ns,
			 uint64_t backstop_ns)
{
	/* Looked at across the spread both sides of the mean: spun on from
	 * PREDICT_DUE_DEVS spreads before it (less the timer's lead) to
	 * PREDICT_END_DEVS after it. Capped at twice the mean: a slot whose
	 * durations scatter wider (10 us and 10 ms mixed on one slot) is then
	 * looked at in growing steps, each late by at most a quarter of how
	 * overdue it is, not spun on across its whole spread. */
	uint64_t early = PREDICT_DUE_DEVS * t->dev_ns, late = PREDICT_END_DEVS * t->dev_ns;
	uint64_t due = t->since_ns + (t->lat_ns > early ? t->lat_ns - early : 0);
	uint64_t end = t->since_ns + t->lat_ns + (late < t->lat_ns ? late : t->lat_ns) +
		       PREDICT_LEAD_MIN_NS, overdue, step;

	if (end < due + PREDICT_WINDOW_MIN_NS)
		end = due + PREDICT_WINDOW_MIN_NS;
	if (due > now_ns + lead_ns)
		return due - lead_ns < now_ns + backstop_ns ? due - lead_ns : now_ns + backstop_ns;
	if (now_ns <= end)
		return now_ns;
	overdue = now_ns - due;
	step = overdue / 4;
	if (step < lead_ns)
		step = lead_ns;
	if (step > backstop_ns)
		step = backstop_ns;
	return now_ns + step;
}
