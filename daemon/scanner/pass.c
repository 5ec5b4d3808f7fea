/* SPDX-License-Identifier: MIT */
/*
 * The scanner thread and its pass. Per pass: take the arms from every
 * client's queue into the pending set, apply the main thread's commands,
 * then look at every hot pending slot's flag and write the eventfd (or the
 * group ring) of each that advanced; then ask the idle policy whether to
 * pass again, sleep or park. Which pending slots a pass reads is the cold
 * sweep's to say (scanner/cold.c); starting and stopping the thread is the
 * main thread's side (scanner/setup.c); what the pass shares with the
 * commands and imports is in scanner/drain.c; the rest lives beside it
 * (scanner/private.h).
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

/*
 * When the scanner saw a completion: the clock read once per pass, at its
 * first completion (*cache 0 until then; the scanner zeroes it every pass).
 * Not the pass's start: a flag stored while the pass ran (it may be
 * preempted for milliseconds) would be seen before it was stored.
 */
static uint64_t seen_clock(uint64_t *cache)
{
	if (!*cache)
		*cache = cuflag_now_ns();
	return *cache;
}

/* Ring every group that got records in this pass, once each; those whose
 * user is out of its share stay for the next pass. */
static void ring_groups(struct scanner *sc)
{
	uint64_t kept = 0;

	for (uint64_t i = 0; i < sc->nrang; i++) {
		struct scanner_group *g = sc->rang[i];
		enum scanner_broken why;

		if (g->efd < 0 || atomic_load_explicit(&g->sess->broken, memory_order_relaxed)) {
			g->rang = 0;
			continue;
		}
		if (!scan_may_write(sc, g->sess->user)) {
			scan_drop_if_over_share(sc, g->sess);
			sc->rang[kept++] = g;
			continue;
		}
		g->rang = 0;
		why = efd_write(sc, g->sess, g->efd, 1);
		if (why)
			scanner_set_broken(sc, g->sess, why);
	}
	sc->nrang = kept;
}

/* What the predictor learns from a completion the pass at sc->now saw:
 * nothing where the wait before the pass was ended by an arm or a command
 * and the slot was awaited from before it (it may have landed at any time
 * in it), nor where the cold sweep found its flag moved (any time in the
 * sweep's period), unless that still teaches more than the slot's guess
 * (predict_swept_teaches): work that takes longer than a slot stays hot
 * (COLD_AFTER_NS) would otherwise never be learned, nor short work on a
 * slot seeded with a long guess, every completion of either found by the
 * sweep. The guess is then late by at most a sweep; the passes correct it
 * (PREDICT_FIRST). */
static void learn_completion(struct scanner *sc, struct scanner_slot *s)
{
	if (s->swept) {
		s->swept = 0;
		if (!predict_swept_teaches(&s->timing, sc->now)) {
			predict_completed_unseen(&s->timing, sc->now);
			return;
		}
		predict_completed(&s->timing, sc->now, sc->now, PREDICT_SEEN_CROWDED);
		s->sess->hint = s->timing;
		return;
	}
	if (sc->woke_from && s->timing.since_ns < sc->woke_from) {
		predict_completed_unseen(&s->timing, sc->now);
		return;
	}
	enum predict_seen seen = predict_how_seen(sc->few_cpus, s->sess->user->hot, sc->planned,
						  sc->now, sc->lead);
	uint64_t since = s->timing.since_ns;
	uint64_t d = predict_completed(&s->timing,
				       predict_learn_at(&s->timing, sc->planned, sc->now, sc->lead),
				       sc->now, seen);
	idle_note_seen(&sc->idle, since, sc->planned, sc->now, d);
	s->sess->hint = s->timing;
}

/* Record due completions of a slot, then ring its eventfd (or its group's
 * ring). BROKEN_NONE, or why the client must not be served any more. */
static enum scanner_broken signal_slot(struct scanner *sc, struct scanner_slot *s, uint32_t due)
{
	enum scanner_broken why = BROKEN_NONE;
	/* Seen before the doorbell too: a woken client may run before the
	 * scanner does again, and its arm -> done must not exceed the one the
	 * client saw (the clock is read once a pass). */
	uint64_t seen = sc->cfg.metrics ? seen_clock(&sc->seen_now) : 0;

	/* Before the doorbell: a daemon killed right after it has recorded
	 * what it rang, and its successor counts nothing twice (the client
	 * counts from this record; the eventfd is the doorbell). The record
	 * stays when the write fails: those completions did happen. */
	/* Its importers' records first: a daemon killed in between leaves
	 * none of them behind the exporter's record, which bounds where an
	 * importer may resume from (scanner/import.c). */
	if (s->imp_first)
		import_fanout(sc, s, s->signalled + due);
	s->persist->signalled = s->signalled + due;
	/* Counted before the doorbell as well: a client it wakes may ask for
	 * its metrics before the scanner runs again. */
	lhist_add(&s->sess->n_done, due);
	if (sc->cfg.metrics)
		lhist_slot_done(&s->sess->done_hist, &s->armed_at_ns, seen, due);
	if (s->group)
		ring_push(sc, s);
	else
		why = efd_write(sc, s->sess, s->efd, due);
	if (why == BROKEN_NONE || why == BROKEN_COST) {
		s->signalled += due;
		atomic_fetch_add_explicit(&s->sess->n_wakes, 1, memory_order_relaxed);
		if (sc->cfg.idle.mode == SCANNER_ADAPTIVE)
			learn_completion(sc, s);
		else /* awaited from now: how long, the sweep asks */
			predict_completed_unseen(&s->timing, sc->now);
	}
	return why;
}

/* A pending slot goes cold where the sweep is to read it instead of every
 * pass (cold-sweep.h); f: its flag as this pass read it, which the sweep
 * compares with. Returns whether it went. */
static int go_cold(struct scanner *sc, struct scanner_slot *s, uint32_t f)
{
	const struct slot_timing *t = &s->timing;
	uint64_t due = t->lat_ns ? t->since_ns + t->lat_ns : 0;
	uint64_t spread = 4 * t->dev_late_ns + PREDICT_WINDOW_MIN_NS;
	enum cold_reason why = cold_should_go(sc->now, t->since_ns, due, spread,
					      s->sess->user->hot, sc->busy_users);

	if (why == COLD_STAY_HOT)
		return 0;
	pending_go_cold(sc, s, f, cold_wake_at(why, due));
	return 1;
}

/* Look at pending slot s. Returns 1 when it left the hot set (another
 * entry now holds its index), 0 when it stays; adds completions to *total. */
static int scan_slot(struct scanner *sc, struct scanner_slot *s, uint64_t lead,
		     uint64_t *total)
{
	/* A client found broken gets no more writes: each could block. */
	if (atomic_load_explicit(&s->sess->broken, memory_order_relaxed) && !s->retiring) {
		s->signalled = s->armed;
		pending_del(sc, s);
		return 1;
	}
	uint32_t f = __atomic_load_n(s->flag, __ATOMIC_ACQUIRE);

	if (s->retiring) {
		if (!cuflag_tl_reached(f, s->armed))
			return go_cold(sc, s, f);
		struct scanner_cmd *c = s->retire_cmd;
		s->retire_cmd = NULL;
		s->retiring = 0;
		pending_del(sc, s);
		mailbox_done(sc, c);
		return 1;
	}
	uint32_t due = cuflag_tl_due(f, s->armed, s->signalled);
	if (due) {
		if (!s->group && !scan_may_write(sc, s->sess->user)) {
			scan_drop_if_over_share(sc, s->sess);
			return 0; /* next pass, which comes at once */
		}
		enum scanner_broken why = signal_slot(sc, s, due);
		if (why) {
			scanner_set_broken(sc, s->sess, why);
			s->signalled = s->armed;
		} else {
			*total += due;
		}
	}
	if (s->signalled == s->armed) {
		pending_del(sc, s);
		return 1;
	}
	if (go_cold(sc, s, f))
		return 1;
	if (sc->cfg.idle.mode == SCANNER_ADAPTIVE) {
		uint64_t at = predict_look_at(&s->timing, sc->now, lead, sc->cfg.idle.backstop_ns);
		if (at < sc->look_at)
			sc->look_at = at;
	}
	return 0;
}

/* Look at pending slots [from, to) (to: at most the set's size as it
 * shrinks). The index of the first whose write was carried, or UINT64_MAX. */
static uint64_t scan_range(struct scanner *sc, uint64_t from, uint64_t to, uint64_t lead,
			   uint64_t *total)
{
	uint64_t first_deferred = UINT64_MAX;

	for (uint64_t i = from; i < to && i < sc->npending;) {
		int was = sc->deferred;
		if (scan_slot(sc, sc->pending[i], lead, total))
			continue; /* slot i now holds another entry */
		if (!was && sc->deferred && first_deferred == UINT64_MAX)
			first_deferred = i;
		i++;
	}
	return first_deferred;
}

/* Signal every pending slot whose flag advanced. Returns completions written.
 * After a pass that carried some user's writes, the next one starts where
 * they were carried from, so that a user's slots take turns. */
static uint64_t scan_pending(struct scanner *sc)
{
	uint64_t total = 0, from = sc->scan_from < sc->npending ? sc->scan_from : 0;
	uint64_t lead = sc->lead = predict_lead_ns(&sc->late), at;

	sc->look_at = UINT64_MAX;
	sc->deferred = 0;
	at = scan_range(sc, from, UINT64_MAX, lead, &total);
	if (from) {
		uint64_t at2 = scan_range(sc, 0, from, lead, &total);
		if (at == UINT64_MAX)
			at = at2;
	}
	sc->scan_from = at == UINT64_MAX ? 0 : (uint32_t)at;
	if (sc->owed_head)
		import_ring_owed(sc);
	if (sc->nrang)
		ring_groups(sc);
	if (total)
		atomic_fetch_add_explicit(&sc->completions, total, memory_order_relaxed);
	return total;
}

/* One pass; whether it made progress (arms, commands, completions). */
static int pass(struct scanner *sc)
{
	uint64_t before = pending_count(sc), done;
	int progress = 0;

	sc->prev_pass_ns = sc->pass_ns;
	sc->now = sc->pass_ns = cuflag_now_ns();
	sc->seen_now = 0;
	sc->pass_no++;
	/* Tails before commands: see scanner_drain_queue. */
	for (uint32_t i = 0; i < sc->nsessions; i++)
		progress |= scanner_drain_queue(sc, sc->sessions[i], 0);
	if (atomic_load_explicit(&sc->cmd_pending, memory_order_acquire)) {
		scanner_apply_cmds(sc);
		progress = 1;
	}
	cold_sweep_slice(sc);
	done = scan_pending(sc);
	/* Completions one after another: the interval between them
	 * (idle-policy.h, IDLE_GAP_LEARN). */
	if (sc->cfg.idle.mode == SCANNER_ADAPTIVE)
		idle_note_pass_done(&sc->idle, sc->prev_pass_ns, sc->now, done);
	if (done) {
		/* Whoever was just woken may have been put on this CPU: let
		 * it run now instead of after our spin (see
		 * docs/bench-log/2026-12-01-scanner-cost-default-vs-spin.md).
		 * Only where CPUs are few: with many, the scheduler puts it
		 * on an idle one, and the system call per pass only costs
		 * throughput (docs/bench-log/2026-11-30-gpu-mode-h200.md). */
		if (sc->few_cpus)
			sched_yield();
		progress = 1;
	} else if (pending_count(sc) != before) {
		progress = 1;
	}
	/* Slots that went cold in this pass, into an empty cold set: swept
	 * from now (cold_plan), read within a sweep. */
	if (sc->ncold && sc->cold_next_ns == UINT64_MAX)
		sc->cold_next_ns = sc->now + COLD_SWEEP_NS;
	if (sc->cold_next_ns < sc->look_at)
		sc->look_at = sc->cold_next_ns;
	atomic_fetch_add_explicit(&sc->passes, 1, memory_order_relaxed);
	sc->planned = 0; /* a wait after this pass sets them for the next */
	sc->woke_from = 0;
	/* Writes carried to the next pass: it comes at once. */
	return progress || sc->deferred;
}

/* Between two passes of a spin. The adaptive scanner spins only across a
 * guess of when a flag lands; where CPUs are few, that spin must not hold a
 * CPU that a woken thread was put on: the work being waited for may need
 * it: a thread woken onto the spinning scanner's CPU would wait a
 * scheduler slice, its work would land that late, and the scanner would
 * learn that spread and spin across it
 * (docs/bench-log/2026-12-01-scanner-cost-default-vs-spin.md). The spinning scanner keeps its CPU: that is what it is for. */
static void spin_once(struct scanner *sc)
{
	if (sc->few_cpus && sc->cfg.idle.mode == SCANNER_ADAPTIVE)
		sched_yield();
	else
		cuflag_cpu_relax();
}

void *scanner_main(void *arg)
{
	struct scanner *sc = arg;

	police_start(&sc->police, &sc->cfg.budget);
	/* Timers to the microsecond: a sleep that ends 50 us late (the
	 * default slack) would be a late wake. */
	if (sc->cfg.idle.mode == SCANNER_ADAPTIVE && prctl(PR_SET_TIMERSLACK, 1000ul, 0, 0, 0) < 0)
		log_warn("scanner: cannot set the timer slack: %s", strerror(errno));
	sc->now = cuflag_now_ns();
	while (!atomic_load_explicit(&sc->stop, memory_order_relaxed)) {
		struct idle_decision d;
		int progress;

		if (atomic_load_explicit(&sc->stuck, memory_order_relaxed)) {
			cuflag_cpu_relax();
			continue;
		}
		progress = pass(sc);
		d = idle_decide(&sc->cfg.idle, &sc->idle,
				&(struct idle_view){ .now_ns = sc->now,
						     .npending = pending_count(sc),
						     .progress = progress,
						     .look_at_ns = sc->look_at,
						     .lead_ns = sc->lead,
						     .sweep_at_ns = sc->cold_next_ns != UINT64_MAX
								      ? sc->cold_next_ns : 0 });
		if (d.action == IDLE_SPIN)
			spin_once(sc);
		/* A wait for the sweep's next slice is no completion's due
		 * time: an arm made meanwhile may be due before it ends. */
		else if (d.action == IDLE_NAP && d.until_ns < sc->cold_next_ns)
			scanner_nap(sc, d.until_ns);
		else if (d.action == IDLE_NAP)
			scanner_block(sc, d.until_ns);
		else
			scanner_block(sc, d.action == IDLE_SLEEP ? d.until_ns : 0);
	}
	police_stop(&sc->police);
	return NULL;
}
