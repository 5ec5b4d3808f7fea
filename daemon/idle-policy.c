/* SPDX-License-Identifier: MIT */
#include "idle-policy.h"

void idle_note_empty(struct idle_state *st, uint64_t now_ns)
{
	st->idle_since_ns = now_ns;
	st->spin_since_ns = 0; /* a new streak: the empty set's */
}

void idle_note_armed_from_empty(struct idle_state *st, uint64_t now_ns)
{
	if (st->idle_since_ns && now_ns >= st->idle_since_ns) {
		uint64_t gap = now_ns - st->idle_since_ns;
		st->gap_ns = st->gap_ns ? (3 * st->gap_ns + gap) / 4 : gap;
	}
	st->idle_since_ns = 0;
	st->spin_since_ns = 0;
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

struct idle_decision idle_decide(const struct idle_cfg *cfg, struct idle_state *st,
				 uint64_t now_ns, uint64_t npending, int progress,
				 uint64_t look_at_ns)
{
	uint64_t spun = spun_for(st, now_ns, progress);

	if (cfg->mode == SCANNER_SPIN)
		return decide_spin(cfg, spun, now_ns, npending);
	/* Something moved: look again before deciding to sleep. */
	if (progress)
		return act(IDLE_SPIN, 0);
	if (!npending) {
		/* Arms that come back sooner than a park is worth: spin for
		 * a few of their gaps, no longer than spin_ns. */
		uint64_t spin = 4 * st->gap_ns;
		if (spin > cfg->spin_ns)
			spin = cfg->spin_ns;
		if (st->gap_ns && st->gap_ns < IDLE_GAP_SPIN_NS && spun < spin)
			return act(IDLE_SPIN, 0);
		return act(IDLE_PARK, 0);
	}
	if (look_at_ns < now_ns + IDLE_SLEEP_MIN_NS)
		return act(IDLE_SPIN, 0);
	if (look_at_ns > now_ns + cfg->pending_poll_ns)
		look_at_ns = now_ns + cfg->pending_poll_ns;
	return act(IDLE_SLEEP, look_at_ns);
}
