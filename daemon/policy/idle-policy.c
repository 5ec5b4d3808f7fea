/* SPDX-License-Identifier: MIT */
#include "policy/idle-policy.h"

void idle_note_empty(struct idle_state *st, uint64_t now_ns)
{
	st->idle_since_ns = now_ns;
	st->spin_since_ns = 0; /* a new streak: the empty set's */
}

void idle_note_armed_from_empty(struct idle_state *st, uint64_t now_ns)
{
	if (st->idle_since_ns && now_ns >= st->idle_since_ns) {
		uint64_t gap = now_ns - st->idle_since_ns;
		if (st->gap_ns) {
			uint64_t off = gap > st->gap_ns ? gap - st->gap_ns : st->gap_ns - gap;
			st->gap_dev_ns = (3 * st->gap_dev_ns + off) / 4;
			st->gap_ns = (3 * st->gap_ns + gap) / 4;
		} else {
			st->gap_ns = gap;
			st->gap_dev_ns = gap / 8;
		}
	}
	st->idle_since_ns = 0;
	st->spin_since_ns = 0;
}

void idle_note_done(struct idle_state *st, uint64_t d_ns)
{
	idle_note_done_between(st, d_ns, d_ns);
}

/* The IDLE_LOW_RANK-th smallest of a ring of n (the smallest while it
 * holds fewer). */
static uint64_t ring_low(const uint32_t *ring, uint32_t n)
{
	uint32_t best[IDLE_LOW_RANK], k = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t v = ring[i], j;
		if (k < IDLE_LOW_RANK)
			k++;
		else if (v >= best[k - 1])
			continue;
		for (j = k - 1; j > 0 && best[j - 1] > v; j--)
			best[j] = best[j - 1];
		best[j] = v;
	}
	return k < IDLE_LOW_RANK ? best[0] : best[IDLE_LOW_RANK - 1];
}

/* Put what a span known to lie between lo_ns and hi_ns says of the low
 * quantile cur (0: none yet) into a ring; returns its new low quantile
 * (see idle_note_done_between). */
static uint64_t ring_put(uint32_t *ring, uint32_t *n, uint32_t *pos, uint64_t cur,
			 uint64_t lo_ns, uint64_t hi_ns)
{
	uint64_t v = !cur ? (lo_ns ? lo_ns : 1)
		     : hi_ns < cur ? hi_ns
		     : lo_ns > cur ? lo_ns
				   : cur;

	if (v > UINT32_MAX)
		v = UINT32_MAX;
	ring[*pos] = v ? (uint32_t)v : 1;
	*pos = (*pos + 1) % IDLE_LOW_RING;
	if (*n < IDLE_LOW_RING)
		(*n)++;
	return ring_low(ring, *n);
}

void idle_note_done_between(struct idle_state *st, uint64_t lo_ns, uint64_t hi_ns)
{
	/* A low quantile of the last completions, not their least: one arm
	 * that its client made late has its work land at once (a device
	 * thread or a waiter its timer woke late), and the least of them
	 * would end the naps through every arm that early until it left the
	 * ring; a running low that fell halfway to such a one and rose by a
	 * small fraction a completion (to stay near the quickest where
	 * durations scatter) stayed down for hundreds of completions
	 * (docs/bench-log/2026-12-03-late-wake-timer-error-quantile.md). A
	 * duration known
	 * only within an interval says where the whole interval lies on one
	 * side of the current value: at most its end below it, at least its
	 * start above it; one that straddles it says nothing, and the current
	 * value is kept in its place. Taking the interval's start instead
	 * pulled it down at every timer that woke after the flag: a wait
	 * ends the lead and the spread before the work is due, so the start
	 * is short of the work by that much, and naps through arms ended that
	 * much early and spun. */
	st->low_ns = ring_put(st->low_ring, &st->low_n, &st->low_pos, st->low_ns, lo_ns, hi_ns);
}

/* An interval between two completions known to lie between lo_ns and
 * hi_ns; the quickest of them known once IDLE_GAP_LEARN are. */
static void gap_put(struct idle_state *st, uint64_t lo_ns, uint64_t hi_ns)
{
	uint64_t cur = st->gap_n >= IDLE_GAP_LEARN ? st->gap_low_ns : 0;
	uint64_t low = ring_put(st->gap_ring, &st->gap_n, &st->gap_pos, cur, lo_ns, hi_ns);

	st->gap_low_ns = st->gap_n >= IDLE_GAP_LEARN ? low : 0;
}

void idle_note_pass_done(struct idle_state *st, uint64_t prev_ns, uint64_t now_ns, uint64_t n)
{
	/* Found by the first look after a wait for the interval: it landed
	 * during the wait, so sooner than the interval said, or the timer was
	 * late. Twice in turn: the work got quicker, and the intervals seen
	 * since were each stretched to the wait: learn them again. */
	if (st->floor_waited && now_ns <= st->floor_late_ns) {
		st->floor_early = n ? st->floor_early + 1 : 0;
		if (st->floor_early >= IDLE_FLOOR_EARLY_MAX && st->gap_low_ns) {
			/* A quarter shorter at once (IDLE_LOW_RANK entries of
			 * that), again while it stays early; back up as the
			 * intervals seen displace them. */
			uint64_t shorter = st->gap_low_ns - st->gap_low_ns / 4;
			for (uint32_t k = 0; k < IDLE_LOW_RANK; k++)
				gap_put(st, 0, shorter);
			st->floor_early = 0;
		}
	}
	if (!n)
		return;
	/* From the pass that saw the last one to this one: each seen as late
	 * as the scanner looked, which the low quantile takes in (an interval
	 * seen short after one seen late). The others of this pass landed
	 * within its span of the first: side by side, maybe. */
	if (st->done_at_ns && st->done_at_ns <= now_ns)
		gap_put(st, now_ns - st->done_at_ns, now_ns - st->done_at_ns);
	for (uint64_t k = 1; k < n && k <= IDLE_LOW_RING; k++)
		gap_put(st, 0, prev_ns && prev_ns <= now_ns ? now_ns - prev_ns : 0);
	st->done_at_ns = now_ns;
	/* The next is awaited from when the last may have landed: the pass
	 * before (seen late after a wait, the next one is not late by it). */
	st->done_lo_ns = prev_ns && prev_ns <= now_ns ? prev_ns : now_ns;
}

void idle_note_seen(struct idle_state *st, uint64_t since_ns, uint64_t planned_ns,
		    uint64_t now_ns, uint64_t d_ns)
{
	uint64_t lo = planned_ns > since_ns && planned_ns < now_ns ? planned_ns - since_ns : d_ns;

	idle_note_done_between(st, lo, now_ns > since_ns ? now_ns - since_ns : d_ns);
}

void idle_note_park_wake(struct idle_state *st, uint64_t wake_ns)
{
	st->park_wake_ns = wake_ns;
}

void idle_note_long_lateness(struct idle_state *st, uint64_t late_ns)
{
	st->long_lead_ns = late_ns;
}

static struct idle_decision act(enum idle_action a, uint64_t until_ns)
{
	return (struct idle_decision){ .action = a, .until_ns = until_ns };
}

/* How long this streak of passes without progress has lasted (it starts with
 * the first such pass). */
static uint64_t spun_for(struct idle_state *st, uint64_t now_ns, int progress)
{
	if (progress) {
		st->spin_since_ns = 0;
		return 0;
	}
	if (!st->spin_since_ns) {
		st->spin_since_ns = now_ns;
		return 0;
	}
	return now_ns - st->spin_since_ns;
}

static struct idle_decision decide_spin(const struct idle_cfg *cfg, uint64_t spun,
					uint64_t now_ns, uint64_t npending)
{
	if (npending) {
		/* Stalled (a long kernel, a stream that will never signal):
		 * stop burning a core, look every pending_poll_ns. */
		if (cfg->pending_spin_ns && spun >= cfg->pending_spin_ns)
			return act(IDLE_SLEEP, now_ns + cfg->pending_poll_ns);
		return act(IDLE_SPIN, 0);
	}
	return spun >= cfg->spin_ns ? act(IDLE_PARK, 0) : act(IDLE_SPIN, 0);
}

/* A wait until at longer than a short one (at most a backstop: one capped
 * by it is a look, not a guess): end it earlier by as much more as long
 * waits end late, or, where that is more than a wake-up is worth, by an
 * approach (a short wait then follows, ended about as late as lead_ns). */
static uint64_t long_wait_end(const struct idle_state *st, uint64_t now_ns, uint64_t at,
			      uint64_t lead_ns)
{
	uint64_t extra = st->long_lead_ns > lead_ns ? st->long_lead_ns - lead_ns : 0, early;

	early = extra > IDLE_APPROACH_GAIN_NS ? st->long_lead_ns + IDLE_APPROACH_NS : extra;
	return at - now_ns > early ? at - early : at;
}

/* How to wait until at: spin if it is too close, nap if no arm made
 * meanwhile can be due before it, else sleep (no longer than the backstop). */
static struct idle_decision plan_wait(const struct idle_cfg *cfg, const struct idle_state *st,
				      uint64_t now_ns, uint64_t at, uint64_t lead_ns)
{
	/* Not worth a wake-up: what of it would be asleep, less the timer's
	 * lateness, is too short (at 100 000 completions/s they come closer
	 * together than a sleep and its lateness;
	 * the lateness counted up to IDLE_SLEEP_LATE_MAX_NS only, so that a
	 * lead grown once does not stop every sleep that would measure it
	 * again). */
	if (at < now_ns + IDLE_SLEEP_MIN_NS +
			 (lead_ns < IDLE_SLEEP_LATE_MAX_NS ? lead_ns : IDLE_SLEEP_LATE_MAX_NS))
		return act(IDLE_SPIN, 0);
	if (at > now_ns + cfg->backstop_ns)
		at = now_ns + cfg->backstop_ns;
	else if (at > now_ns + IDLE_SHORT_WAIT_NS)
		at = long_wait_end(st, now_ns, at, lead_ns);
	if (st->low_ns > lead_ns && at <= now_ns + st->low_ns - lead_ns)
		return act(IDLE_NAP, at);
	return act(IDLE_SLEEP, at);
}

/* Arms regular enough to nap through: the gaps' spread at most
 * 1/IDLE_NAP_THROUGH_SPREAD of them. */
static int arms_regular(const struct idle_state *st)
{
	return st->gap_dev_ns * IDLE_NAP_THROUGH_SPREAD <= st->gap_ns;
}

/* How early a wait for the next arm, or for its work, ends: the timer's
 * lead and twice the gaps' spread. */
static uint64_t arm_margin(const struct idle_state *st, uint64_t lead_ns)
{
	return lead_ns + 2 * st->gap_dev_ns;
}

/* The next arm is expected at expect and its work takes at least low_ns:
 * nap until a lead before that work can be due, when the arms are regular
 * (the gaps' spread at most IDLE_NAP_THROUGH_SPREAD of them) and the arm
 * is not overdue (past expect by window). The arm waits in its queue
 * meanwhile (a nap tells no client): one earlier than expected is seen late
 * by its earliness, which the regularity asked bounds. Only within the
 * backstop, and for a nap of IDLE_NAP_THROUGH_MIN_NS or more. Otherwise
 * IDLE_SPIN: decide another way. */
static struct idle_decision nap_through_arm(const struct idle_cfg *cfg,
					    const struct idle_state *st, uint64_t now_ns,
					    uint64_t expect, uint64_t window, uint64_t lead_ns)
{
	uint64_t margin = arm_margin(st, lead_ns);
	struct idle_decision d;

	if (!st->low_ns || !arms_regular(st) ||
	    now_ns > expect + window ||
	    expect + st->low_ns < now_ns + margin + IDLE_NAP_THROUGH_MIN_NS ||
	    /* Naps one after the other to a far arm cost more wake-ups than
	     * the park the arm would end. */
	    expect + st->low_ns - margin > now_ns + cfg->backstop_ns)
		return act(IDLE_SPIN, 0);
	d = plan_wait(cfg, st, now_ns, expect + st->low_ns - margin, lead_ns);
	return d.action == IDLE_SPIN ? d : act(IDLE_NAP, d.until_ns);
}

/* Whether a park costs less than the nap through the next arm that regular
 * arms would get (see IDLE_PARK_GAP_NS): the nap would end its margin before
 * the arm's work can be due, and spin from there; the park spins only across
 * what of the work is left when the arm's wake-up comes (known from an
 * earlier park: the first decisions, with nothing learned, park). Arms that
 * are not regular keep their rules: after an idle spell the gaps' mean and
 * spread are both far above the next gaps (a burst of arms tens of us apart
 * may follow), and the spin for those arms sees their work in time. */
static int park_spins_less(const struct idle_state *st, uint64_t lead_ns)
{
	uint64_t margin = arm_margin(st, lead_ns);

	return st->low_ns && st->gap_ns >= IDLE_PARK_GAP_NS && arms_regular(st) &&
	       margin >= IDLE_PARK_SPIN_MIN_NS && st->low_ns <= margin && st->park_wake_ns &&
	       st->park_wake_ns <= st->low_ns + IDLE_PARK_LATE_MAX_NS;
}

/* Nothing pending: when the next arm is expected, from the gaps lately. */
static struct idle_decision decide_empty(const struct idle_cfg *cfg, struct idle_state *st,
					 uint64_t now_ns, uint64_t spun, uint64_t lead_ns)
{
	uint64_t expect, window;

	/* Never spin longer than spin_ns for an arm (0: park at once). */
	if (!st->gap_ns || !st->idle_since_ns || spun >= cfg->spin_ns)
		return act(IDLE_PARK, 0);
	if (park_spins_less(st, lead_ns))
		return act(IDLE_PARK, 0);
	expect = st->idle_since_ns + st->gap_ns;
	window = 4 * st->gap_dev_ns + lead_ns;
	/* Regular arms: nap through the next one to a lead before its work
	 * can be due (one wake-up a completion, where parking costs two: the
	 * arm's, then one before its work; and no client write). */
	{
		struct idle_decision d = nap_through_arm(cfg, st, now_ns, expect, window, lead_ns);
		if (d.action == IDLE_NAP)
			return d;
	}
	/* The next arm wakes a parked scanner soon enough to sleep again
	 * before its work can be due: park, however regular the arms (no
	 * timer, no spin for the arm; its client pays one write). */
	if (st->park_wake_ns && st->low_ns > st->park_wake_ns + lead_ns + IDLE_SLEEP_MIN_NS)
		return act(IDLE_PARK, 0);
	/* Arms that come back sooner than a park is worth: spin for a few
	 * of their gaps, no longer than spin_ns. */
	if (st->gap_ns < IDLE_GAP_SPIN_NS) {
		uint64_t spin = 4 * st->gap_ns > cfg->spin_ns ? cfg->spin_ns : 4 * st->gap_ns;
		return spun < spin ? act(IDLE_SPIN, 0) : act(IDLE_PARK, 0);
	}
	/* The next arm, early by twice the gaps' spread and the timer's
	 * lateness; past it by that spread and more, it is not coming soon:
	 * park (the arm then wakes the scanner). */
	if (now_ns > expect + window)
		return act(IDLE_PARK, 0);
	if (expect > now_ns + arm_margin(st, lead_ns)) {
		struct idle_decision d =
			plan_wait(cfg, st, now_ns, expect - arm_margin(st, lead_ns), lead_ns);
		/* Only a nap is worth it here: a sleep would cost the arm a
		 * wake anyway, as a park does, and a park costs no timer. */
		return d.action == IDLE_SLEEP ? act(IDLE_PARK, 0) : d;
	}
	return act(IDLE_SPIN, 0);
}

/* Pending work: wait for the earliest slot's look time, but no sooner than a
 * lead before the last completion and the quickest interval lately (where
 * known), nor past the sweep's next slice. A slot due and not landed: spin
 * IDLE_STALL_SPIN_NS, then look in steps (see IDLE_GAP_LEARN). */
static struct idle_decision decide_pending(const struct idle_cfg *cfg, struct idle_state *st,
					   const struct idle_view *v)
{
	uint64_t now = v->now_ns, at = v->look_at_ns, lead = v->lead_ns, stalled, step, most;
	struct idle_decision d;

	if (!st->gap_low_ns)
		return plan_wait(cfg, st, now, at, lead);
	if (st->done_lo_ns + st->gap_low_ns > at + lead) {
		uint64_t floor = st->done_lo_ns + st->gap_low_ns - lead;
		if (v->sweep_at_ns && v->sweep_at_ns < floor)
			floor = v->sweep_at_ns > at ? v->sweep_at_ns : at;
		d = plan_wait(cfg, st, now, floor, lead);
		if (d.action != IDLE_SPIN) {
			st->floor_waited = 1;
			/* A wake later than the timer's lead is the timer's or
			 * the machine's: no sign of quicker work. */
			st->floor_late_ns = d.until_ns + lead;
			st->stall_since_ns = 0;
			return d;
		}
	}
	d = plan_wait(cfg, st, now, at, lead);
	if (d.action != IDLE_SPIN) {
		st->stall_since_ns = 0;
		return d;
	}
	if (!st->stall_since_ns)
		st->stall_since_ns = now;
	/* The spin began a lead before the slot was due. */
	stalled = now - st->stall_since_ns;
	if (stalled < IDLE_STALL_SPIN_NS + lead)
		return d;
	most = (st->gap_low_ns > st->low_ns ? st->gap_low_ns : st->low_ns) / IDLE_STALL_STEP_DIV;
	if (most > cfg->backstop_ns)
		most = cfg->backstop_ns;
	/* Steps shorter than two sleeps are worth would be a wake-up every
	 * lead: short work is spun on, as before. */
	if (most < 2 * (lead + IDLE_SLEEP_MIN_NS))
		return d;
	step = stalled / 4 < most ? stalled / 4 : most;
	if (step < lead)
		step = lead;
	if (v->sweep_at_ns && v->sweep_at_ns < now + step)
		step = v->sweep_at_ns > now ? v->sweep_at_ns - now : 0;
	return plan_wait(cfg, st, now, now + step, lead);
}

struct idle_decision idle_decide(const struct idle_cfg *cfg, struct idle_state *st,
				 const struct idle_view *v)
{
	uint64_t spun = spun_for(st, v->now_ns, v->progress);
	struct idle_decision d;

	st->floor_waited = 0;
	if (cfg->mode == SCANNER_SPIN)
		return decide_spin(cfg, spun, v->now_ns, v->npending);
	/* Something moved: look again before deciding to wait. */
	if (v->progress || !v->npending)
		st->stall_since_ns = 0;
	if (v->progress)
		return act(IDLE_SPIN, 0);
	d = !v->npending ? decide_empty(cfg, st, v->now_ns, spun, v->lead_ns)
			 : decide_pending(cfg, st, v);
	/* A wait ends the streak: what spin_ns bounds is spinning. */
	if (d.action != IDLE_SPIN)
		st->spin_since_ns = 0;
	return d;
}
