/* SPDX-License-Identifier: MIT */
#include "policy/predictor.h"


void predict_armed(struct slot_timing *t, uint64_t now_ns)
{
	t->since_ns = now_ns;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* A side's spread after a completion that fell off from the mean on that
 * side (clipped), seen as seen says (enum predict_seen). */
static uint64_t next_spread(uint64_t dev, uint64_t off, enum predict_seen seen)
{
	if (seen == PREDICT_SEEN_CROWDED)
		return (3 * dev + off) / 4;
	if (off <= dev)
		return dev - (dev - off) / PREDICT_DEV_FALL;
	return seen == PREDICT_SEEN_ASLEEP ? (dev + off) / 2 : dev + (off - dev) / PREDICT_DEV_FALL;
}

uint64_t predict_completed(struct slot_timing *t, uint64_t planned_ns, uint64_t now_ns,
			   enum predict_seen seen)
{
	uint64_t at = planned_ns > t->since_ns && planned_ns < now_ns ? planned_ns : now_ns;
	uint64_t d = at > t->since_ns ? at - t->since_ns : 0;

	/* The first spread is a guess: corrected at the running mean's pace. */
	if (t->learned < PREDICT_FIRST)
		seen = PREDICT_SEEN_CROWDED;
	if (t->lat_ns) {
		/* One sample moves the mean by at most a quarter of the window
		 * and the spread by at most 2.5 times: a completion a stream or
		 * the machine delayed once does not have the next dozen looked
		 * at early and spun on (a lasting change is followed within a
		 * few samples: the spread and with it the clip grow
		 * geometrically). */
		uint64_t clip = 4 * max_u64(t->dev_ns, t->dev_late_ns) + PREDICT_WINDOW_MIN_NS;
		uint64_t off = d > t->lat_ns ? d - t->lat_ns : t->lat_ns - d;
		uint64_t dc = off <= clip ? d : d > t->lat_ns ? t->lat_ns + clip : t->lat_ns - clip;
		uint64_t o = off < clip ? off : clip;

		/* The side it fell on (both when on the mean, or crowded). */
		if (d <= t->lat_ns || seen == PREDICT_SEEN_CROWDED)
			t->dev_ns = next_spread(t->dev_ns, o, seen);
		if (d >= t->lat_ns || seen == PREDICT_SEEN_CROWDED)
			t->dev_late_ns = next_spread(t->dev_late_ns, o, seen);
		t->lat_ns = (3 * t->lat_ns + dc) / 4;
	} else {
		/* A first guess with a modest spread: a wide one would have the
		 * scanner spin across it for the next several completions. */
		t->lat_ns = d;
		t->dev_ns = t->dev_late_ns = d / 8;
	}
	/* 0 means "nothing learned": a completion seen at once still is. */
	if (!t->lat_ns)
		t->lat_ns = 1;
	if (t->learned < PREDICT_FIRST)
		t->learned++;
	t->since_ns = now_ns;
	return d;
}

uint64_t predict_learn_at(const struct slot_timing *t, uint64_t planned_ns, uint64_t now_ns,
			  uint64_t lead_ns)
{
	uint64_t due;

	if (!planned_ns || planned_ns >= now_ns)
		return now_ns;
	if (now_ns - planned_ns <= lead_ns || !t->lat_ns)
		return planned_ns;
	due = t->since_ns + t->lat_ns;
	return due < planned_ns ? planned_ns : due > now_ns ? now_ns : due;
}

enum predict_seen predict_how_seen(int few_cpus, uint32_t user_hot, uint64_t planned_ns,
				   uint64_t now_ns, uint64_t lead_ns)
{
	if (few_cpus || user_hot > PREDICT_WIDEN_MAX_HOT)
		return PREDICT_SEEN_CROWDED;
	/* After a wake later than the timer's usual lateness the flag may as
	 * well have landed in the lateness: the timer's error, not the
	 * window's. */
	if (planned_ns && now_ns - planned_ns <= lead_ns)
		return PREDICT_SEEN_ASLEEP;
	return PREDICT_SEEN_AWAKE;
}

void predict_completed_unseen(struct slot_timing *t, uint64_t now_ns)
{
	t->since_ns = now_ns;
}

int predict_swept_teaches(const struct slot_timing *t, uint64_t now_ns)
{
	/* Found before the mean: it landed earlier still (the sweep finds a
	 * flag after it lands), so learning it at now moves a mean that is
	 * too long towards the truth and never past it. */
	return !t->lat_ns || now_ns < t->since_ns + t->lat_ns;
}

void predict_seed(struct slot_timing *t, const struct slot_timing *from)
{
	uint64_t least = from->lat_ns / 8;

	t->lat_ns = from->lat_ns;
	t->dev_ns = max_u64(from->dev_ns, least);
	t->dev_late_ns = max_u64(from->dev_late_ns, least);
	t->learned = 0; /* a guess again: its own first completions correct it */
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
	uint64_t early = PREDICT_DUE_DEVS * t->dev_ns, late = PREDICT_END_DEVS * t->dev_late_ns;
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
