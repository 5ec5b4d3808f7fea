/* SPDX-License-Identifier: MIT */
/*
 * What the scanner's pass (scanner/pass.c), its commands (scanner/cmds.c)
 * and its imports (scanner/import.c) all do to a client: take the arms in a
 * session's queue into the pending set, write an eventfd (timed and charged,
 * write-police.h), push a grouped slot onto its group's ring, hold a user
 * to its share of the pass (fair-share.h) and mark a client broken. Below
 * all three: it calls none of them.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>

#include "base/log.h"
#include "clock.h"
#include "cpu-relax.h"
#include "scanner/private.h"
#include "timeline.h"

/* Mark a client broken: no more writes to it; the main loop drops it. */
void scanner_set_broken(struct scanner *sc, struct scanner_session *ss, enum scanner_broken why)
{
	int none = BROKEN_NONE;

	if (atomic_compare_exchange_strong_explicit(&ss->broken, &none, (int)why,
						    memory_order_acq_rel, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&sc->broken, 1, memory_order_relaxed);
		mailbox_tell_main(sc);
	}
}

/* Whether u may write an eventfd in this pass (fair-share.h); else its
 * writes wait for the next pass, which comes at once. */
int scan_may_write(struct scanner *sc, struct scanner_user *u)
{
	if (share_may_write(&u->share, sc->pass_no, (int64_t)sc->cfg.share_quantum_ns))
		return 1;
	sc->deferred = 1;
	return 0;
}

/* A write of ss's was carried: drop it where its user has wanted more than
 * its share, with costly writes, for too long (fair-share.h). */
void scan_drop_if_over_share(struct scanner *sc, struct scanner_session *ss)
{
	struct fair_share *f = &ss->user->share;

	if (!share_carried_too_long(f, sc->now) || !budget_own_costly(&ss->tally, 0))
		return;
	ss->cost_ns = f->carried_cost_ns;
	ss->cost_writes = f->carried_writes > UINT32_MAX ? UINT32_MAX
							       : (uint32_t)f->carried_writes;
	ss->cost_share = 1;
	scanner_set_broken(sc, ss, BROKEN_COST);
}

/* Whether no device write can still land in s: the flag reached all armed. */
int scanner_slot_settled(const struct scanner_slot *s)
{
	uint32_t f = __atomic_load_n(s->flag, __ATOMIC_ACQUIRE);
	return cuflag_tl_reached(f, s->armed);
}

static void count_bad_arm(struct scanner *sc, struct scanner_session *ss)
{
	atomic_fetch_add_explicit(&ss->n_bad, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sc->bad_arms, 1, memory_order_relaxed);
}

/*
 * When the arms now in ss's queue were made: the client's word for its last
 * one (cuflag-proto.h), read once, kept within what the daemon saw: not
 * after now, and not before the start of the pass before, which looked at
 * every queue and found none of them (a client preempted between reading
 * its clock and storing its tail dates its arm earlier than that: the arm
 * became visible after it, and taking now instead, after a nap through the
 * arm, lost all of the nap). The
 * first arm after a park also says how long an arm takes to wake the
 * scanner: the idle policy parks rather than waits for arms when that is
 * shorter than the work that follows them.
 */
static uint64_t arm_time(struct scanner *sc, const struct scanner_session *ss)
{
	uint64_t at = atomic_load_explicit(ss->arm_time, memory_order_relaxed);

	if (at > sc->now)
		return sc->now;
	if (at < sc->prev_pass_ns)
		at = sc->prev_pass_ns;
	if (sc->woke_from && !sc->wake_sampled && at >= sc->woke_from) {
		sc->wake_sampled = 1;
		predict_lateness(&sc->wake_late, at, sc->now);
		idle_note_park_wake(&sc->idle, predict_lead_ns(&sc->wake_late));
	}
	return at;
}

/*
 * Move arms from a session's queue into the pending set. Every value read
 * from the region is read once into a local and checked before use.
 * An arm naming a slot the scanner does not own yet may be racing its ADD_SLOT
 * command (the client can arm as soon as it has the reply): then stop here and
 * retry after the commands; the tail was read before cmd_pending, so any
 * command that preceded the arm is visible by then.
 * Returns whether it took any entry.
 */
int scanner_drain_queue(struct scanner *sc, struct scanner_session *ss, int in_cmd)
{
	uint32_t tail = atomic_load_explicit(ss->tail, memory_order_acquire);
	uint32_t head = ss->head_local;
	uint32_t avail = tail - head;
	uint32_t mask = ss->layout.queue_cap - 1;
	uint64_t arm_ns;

	if (!avail || atomic_load_explicit(&ss->broken, memory_order_relaxed))
		return 0;
	if (avail > ss->layout.queue_cap) {
		/* The client wrote an impossible tail: stop reading its queue
		 * (not broken yet: that returned above). */
		atomic_fetch_add_explicit(&ss->n_bad, 1, memory_order_relaxed);
		scanner_set_broken(sc, ss, BROKEN_QUEUE);
		ss->head_local = tail;
		return 0;
	}
	/* The arms are stamped with the clock as they are taken, not as the
	 * pass began: a scanner preempted in between would date them before
	 * they were made (one read per queue with arms in it). */
	sc->now = cuflag_now_ns();
	arm_ns = arm_time(sc, ss);
	for (; head != tail; head++) {
		struct cuflag_arm a;
		const volatile struct cuflag_arm *e = &ss->queue[head & mask];
		a.slot = e->slot;
		a.target = e->target;
		if (a.slot >= ss->layout.nslots || !ss->slots[a.slot].owned) {
			if (a.slot < ss->layout.nslots &&
			    (in_cmd || atomic_load_explicit(&sc->cmd_pending, memory_order_acquire)))
				break; /* retry once the commands are applied */
			count_bad_arm(sc, ss);
			continue;
		}
		struct scanner_slot *s = &ss->slots[a.slot];
		/* An arm behind what was signalled, or 2^31 ahead of it, is refused. */
		if (!cuflag_tl_after(a.target, s->signalled)) {
			if (a.target != s->signalled)
				count_bad_arm(sc, ss);
			continue;
		}
		/* The user's share of the pending set is full: the rest of the
		 * queue waits (the client's arms wait for room, none is lost). */
		if (s->pend_idx == SCAN_NOT_PENDING && !s->waiting && pending_user_full(ss->user))
			break;
		if (cuflag_tl_after(a.target, s->armed)) {
			s->armed = a.target;
			s->persist->armed = a.target;
		}
		pending_add_at(sc, s, arm_ns);
		atomic_fetch_add_explicit(&ss->n_armed, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&sc->armed, 1, memory_order_relaxed);
	}
	int took = head != ss->head_local;
	ss->head_local = head;
	atomic_store_explicit(ss->head, head, memory_order_release);
	return took;
}

/* Append a grouped slot's id to its group's ring (or count an overflow when
 * the client has not made room), to ring the group's eventfd after the pass. */
void ring_push(struct scanner *sc, struct scanner_slot *s)
{
	struct scanner_group *g = &s->sess->groups[s->group - 1];
	uint32_t cap = s->sess->layout.ring_cap;
	/* Read once; a head the client scribbled only makes its ring look full. */
	uint32_t head = __atomic_load_n(&g->ring->head, __ATOMIC_ACQUIRE);

	if (g->tail - head < cap) {
		g->ring->slot[g->tail & (cap - 1)] = (uint32_t)(s - s->sess->slots);
		__atomic_store_n(&g->ring->tail, ++g->tail, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&g->ring->overflows, ++g->overflows, __ATOMIC_RELEASE);
	}
	if (!g->rang) {
		g->rang = 1;
		sc->rang[sc->nrang++] = g;
	}
}

enum scanner_broken efd_write(struct scanner *sc, struct scanner_session *ss, int efd, uint64_t v)
{
	struct scanner_user *u = ss->user;
	uint64_t cost;
	enum scanner_broken why = police_write(&sc->police, u, efd, v, &cost);

	share_charge(&u->share, cost);
	budget_tally(&ss->tally, cost, sc->cfg.budget.allowance_ns);
	/* Its user over the budget, but its own writes cheap: it stays. */
	if (why == BROKEN_COST && !budget_own_costly(&ss->tally, u->budget.repeat))
		why = BROKEN_NONE;
	if (why == BROKEN_COST) {
		/* The write that took its user over the budget (budget.h). */
		ss->cost_ns = u->budget.last_costly_ns;
		ss->cost_writes = 1;
		ss->cost_streak = u->budget.streak;
		ss->cost_lately = budget_costly_lately(&u->budget, u->budget.at_ns);
	}
	return why;
}
