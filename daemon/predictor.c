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
		uint64_t off = d > t->lat_ns ? d - t->lat_ns : t->lat_ns - d;
		t->dev_ns = (3 * t->dev_ns + off) / 4;
		t->lat_ns = (3 * t->lat_ns + d) / 4;
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

void predict_seed(struct slot_timing *t, const struct slot_timing *from)
{
	t->lat_ns = from->lat_ns;
	t->dev_ns = from->lat_ns / 8 > from->dev_ns ? from->lat_ns / 8 : from->dev_ns;
}

uint64_t predict_lead_ns(const struct timer_lateness *l)
{
	uint64_t lead = l->samples ? l->mean_ns + 2 * l->dev_ns : PREDICT_LATE_DEFAULT_NS;

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
	if (l->samples < UINT32_MAX)
		l->samples++;
}

uint64_t predict_look_at(const struct slot_timing *t, uint64_t now_ns, uint64_t lead_ns,
			 uint64_t backstop_ns)
{
	/* Due: the mean less twice the spread, so that a slot whose
	 * completions jitter is looked at early enough. */
	uint64_t early = 2 * t->dev_ns;
	uint64_t due = t->since_ns + (t->lat_ns > early ? t->lat_ns - early : 0);
	/* The spin past due covers the spread the other side too. */
	uint64_t window = 4 * t->dev_ns + PREDICT_LEAD_MIN_NS, overdue, step;

	if (window < PREDICT_WINDOW_MIN_NS)
		window = PREDICT_WINDOW_MIN_NS;
	if (due > now_ns + lead_ns)
		return due - lead_ns < now_ns + backstop_ns ? due - lead_ns : now_ns + backstop_ns;
	if (now_ns <= due)
		return now_ns;
	overdue = now_ns - due;
	if (overdue < window)
		return now_ns;
	step = overdue / 4;
	if (step < lead_ns)
		step = lead_ns;
	if (step > backstop_ns)
		step = backstop_ns;
	return now_ns + step;
}
