/* SPDX-License-Identifier: MIT */
#include "scanner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "log.h"
#include "cpu-relax.h"
#include "timeline.h"

struct scanner {
	pthread_t thread;
	struct cuflag_daemon_page *dpage;
	struct scanner_config t;

	/* Handoff from the main thread. */
	pthread_mutex_t lock;
	struct scanner_cmd *cmd_head, *cmd_tail; /* submitted, not yet applied */
	struct scanner_cmd *done_head, *done_tail; /* applied, for the main thread */
	_Atomic int cmd_pending;
	int cmd_efd;  /* wakes a parked scanner for commands */
	int done_efd; /* tells the main loop commands came back */
	int park_ep;  /* epoll over cmd_efd and every session's wake eventfd */
	_Atomic int stop;
	_Atomic int stuck; /* test hook */
	/* When a write to a client's eventfd started (0: none in progress): a client
	 * can clear O_NONBLOCK on its side of the eventfd and fill the counter, so
	 * the main thread interrupts a write that takes too long (see server.c). */
	_Atomic uint64_t write_since_ns;
	/* Sends SIGUSR2 to the scanner thread every WRITE_TICK_NS while it is not
	 * parked for good: a write to a non-blocking eventfd never sleeps, so the
	 * only one the signal can cut short (EINTR) is one a client made block.
	 * This bounds such a stall to a tick; the main loop's check is a backstop. */
	timer_t write_tick;
	int have_write_tick;
	int no_pwait2; /* epoll_pwait2 is not available: timed parks use epoll_wait */

	/* Scanner-private: sized once at start, never reallocated. */
	struct scanner_session **sessions;
	uint32_t nsessions, max_sessions;
	struct scanner_slot **pending;
	uint64_t npending, max_pending;
	int yield_after_signal; /* few CPUs: give a woken thread ours at once */
	struct scanner_group **rang; /* groups that got records this pass */
	uint64_t nrang;

	/* The adaptive mode (scanner-private; see nap()). */
	uint64_t now;        /* this pass's clock */
	uint64_t next_due;   /* earliest predicted completion of the pending set */
	int unknown_due;     /* a pending slot has no history yet: no nap */
	uint64_t low_ns;     /* low watermark of completion times lately */
	uint64_t idle_since; /* when the pending set last went empty */
	uint64_t gap_ns;     /* running mean of the gaps from empty to the next arm */
	uint64_t late_ns;    /* running mean of how late a nap's timer woke us */
	uint64_t nap_until;  /* when the nap before this pass was to end, 0: no nap */

	/* Counters (written by the scanner, read by anyone). */
	_Atomic uint64_t passes, wakes, completions, parks, armed, bad_arms;
	_Atomic uint64_t broken; /* clients found broken */
};

#define WRITE_TICK_NS 2000000u

/* The adaptive mode: wake NAP_MARGIN_NS plus how late the timer has been
 * lately before a completion is due; naps shorter than NAP_MIN_NS are not
 * worth a timer, and none is longer than NAP_MAX_NS (an arm with no history,
 * a command or a stop waits at most that). */
#define NAP_MARGIN_NS 5000u
#define NAP_LATE_NS 20000u /* the timer's lateness until measured */
#define NAP_LATE_MAX_NS 50000u /* a later wake (a busy machine) counts as this */
#define NAP_MIN_NS 20000u
#define NAP_MAX_NS 1000000u

static void write_tick_set(struct scanner *sc, int on)
{
	struct itimerspec its = { 0 };

	if (!sc->have_write_tick)
		return;
	if (on) {
		its.it_value.tv_nsec = WRITE_TICK_NS;
		its.it_interval.tv_nsec = WRITE_TICK_NS;
	}
	if (timer_settime(sc->write_tick, 0, &its, NULL) < 0)
		log_err("scanner: write tick: %s", strerror(errno));
}

/* In the scanner thread: a timer that signals this thread only. */
static void write_tick_start(struct scanner *sc)
{
	struct sigevent sev;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGUSR2;
	sev._sigev_un._tid = gettid();
	if (timer_create(CLOCK_MONOTONIC, &sev, &sc->write_tick) < 0) {
		log_warn("scanner: no write tick (%s): a blocked write is cut after 50-300 ms",
			    strerror(errno));
		return;
	}
	sc->have_write_tick = 1;
	write_tick_set(sc, 1);
}

static void set_state(struct scanner *sc, uint32_t st)
{
	atomic_store_explicit((_Atomic uint32_t *)&sc->dpage->scanner_state, st,
			      memory_order_seq_cst);
}

/* ---------------------------------------------------------------- */
/* Pending set: dense array, O(1) insert and remove.                 */
/* ---------------------------------------------------------------- */

static void pending_add(struct scanner *sc, struct scanner_slot *s)
{
	if (s->pend_idx != SCAN_NOT_PENDING)
		return;
	s->since_ns = sc->now;
	if (sc->t.metrics)
		atomic_store_explicit(&s->armed_at_ns, sc->now, memory_order_relaxed);
	if (!sc->npending && sc->idle_since) {
		uint64_t gap = sc->now - sc->idle_since;
		sc->gap_ns = sc->gap_ns ? (3 * sc->gap_ns + gap) / 4 : gap;
	}
	/* max_pending covers every slot that can exist, so this cannot overflow. */
	s->pend_idx = (uint32_t)sc->npending;
	sc->pending[sc->npending++] = s;
	s->sess->pending++;
	atomic_store_explicit(&s->sess->n_pending, s->sess->pending, memory_order_relaxed);
	s->sess->user->pending++;
	atomic_store_explicit(&s->sess->user->n_pending, s->sess->user->pending,
			      memory_order_relaxed);
}

static void pending_del(struct scanner *sc, struct scanner_slot *s)
{
	uint32_t i = s->pend_idx;

	if (i == SCAN_NOT_PENDING)
		return;
	struct scanner_slot *last = sc->pending[--sc->npending];
	sc->pending[i] = last;
	last->pend_idx = i;
	s->pend_idx = SCAN_NOT_PENDING;
	atomic_store_explicit(&s->armed_at_ns, 0, memory_order_relaxed);
	if (!sc->npending)
		sc->idle_since = sc->now;
	s->sess->pending--;
	atomic_store_explicit(&s->sess->n_pending, s->sess->pending, memory_order_relaxed);
	s->sess->user->pending--;
	atomic_store_explicit(&s->sess->user->n_pending, s->sess->user->pending,
			      memory_order_relaxed);
}

/* ---------------------------------------------------------------- */
/* Commands                                                          */
/* ---------------------------------------------------------------- */

/* Hand a command back to the main thread (called with sc->lock held). */
static void done_push_locked(struct scanner *sc, struct scanner_cmd *c)
{
	c->next = NULL;
	if (sc->done_tail)
		sc->done_tail->next = c;
	else
		sc->done_head = c;
	sc->done_tail = c;
}

/* Ring the main loop: commands came back, or a client was found broken. */
static void tell_main(struct scanner *sc)
{
	uint64_t one = 1;

	/* Control path only; a full counter still leaves the fd readable. */
	if (write(sc->done_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_err("scanner: cannot signal the main loop: %s", strerror(errno));
}

/* Mark a client broken: no more writes to it; the main loop drops it. */
static void set_broken(struct scanner *sc, struct scanner_session *ss, enum scanner_broken why)
{
	int none = BROKEN_NONE;

	if (atomic_compare_exchange_strong_explicit(&ss->broken, &none, (int)why,
						    memory_order_acq_rel, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&sc->broken, 1, memory_order_relaxed);
		tell_main(sc);
	}
}

static void done_push(struct scanner *sc, struct scanner_cmd *c)
{
	pthread_mutex_lock(&sc->lock);
	done_push_locked(sc, c);
	pthread_mutex_unlock(&sc->lock);
	tell_main(sc);
}

static int drain_queue(struct scanner *sc, struct scanner_session *ss, int in_cmd);

/* Whether no device write can still land in s: the flag reached all armed. */
static int slot_settled(const struct scanner_slot *s)
{
	uint32_t f = __atomic_load_n(s->flag, __ATOMIC_ACQUIRE);
	return cuflag_tl_reached(f, s->armed);
}

static void add_session(struct scanner *sc, struct scanner_session *ss, uint32_t head)
{
	/* The park set is the scanner's alone: it adds and removes the
	 * session's wake fd itself, so it never polls one that the main thread
	 * has closed (and whose number may already be reused). Edge-triggered,
	 * and never read: the client shares the file description, so it can
	 * clear O_NONBLOCK and drain the counter between our epoll_wait and a
	 * read, which would then block the scanner for ever. Every write of the
	 * client is a new edge. */
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.fd = ss->wake_fd };
	if (epoll_ctl(sc->park_ep, EPOLL_CTL_ADD, ss->wake_fd, &ev) < 0) {
		/* Its wakes would be lost: the main thread drops it. */
		log_err("scanner: cannot watch a wake eventfd: %s", strerror(errno));
		set_broken(sc, ss, BROKEN_WATCH);
	} else {
		ss->watched = 1;
	}
	ss->list_idx = sc->nsessions;
	/* Where the daemon before us stopped reading (0 for a new region), read
	 * once by the main thread; checked against the tail like any value the
	 * client could have written. */
	ss->head_local = head;
	ss->live = 1;
	sc->sessions[sc->nsessions++] = ss;
}

static void del_session(struct scanner *sc, struct scanner_session *ss)
{
	if (ss->watched && epoll_ctl(sc->park_ep, EPOLL_CTL_DEL, ss->wake_fd, NULL) < 0)
		log_err("scanner: cannot unwatch a wake eventfd: %s", strerror(errno));
	/* Retiring slots are pending too: with none pending there is nothing
	 * to let go of (a client that comes and goes costs no pass over its
	 * slots here, where every other client waits). */
	for (uint32_t i = 0; ss->pending && i < ss->layout.nslots; i++) {
		pending_del(sc, &ss->slots[i]);
		/* A retiring slot's command goes back with the session's. */
		if (ss->slots[i].retire_cmd) {
			done_push(sc, ss->slots[i].retire_cmd);
			ss->slots[i].retire_cmd = NULL;
		}
		ss->slots[i].owned = 0;
	}
	if (ss->live) {
		struct scanner_session *last = sc->sessions[--sc->nsessions];
		sc->sessions[ss->list_idx] = last;
		last->list_idx = ss->list_idx;
		ss->live = 0;
	}
}

static void add_slot(struct scanner *sc, struct scanner_session *ss, const struct scanner_cmd *c)
{
	struct scanner_slot *s = &ss->slots[c->slot];

	s->flag = ss->flags + c->slot;
	s->persist = ss->states + c->slot;
	s->efd = c->efd;
	s->group = c->group;
	s->signalled = c->start;
	s->armed = c->armed;
	s->pend_idx = SCAN_NOT_PENDING;
	s->lat_ns = s->dev_ns = 0; /* the adaptive mode learns it afresh */
	s->owned = 1;
	s->retiring = 0;
	s->sess = ss;
	s->persist->signalled = s->signalled;
	s->persist->armed = s->armed;
	if (s->armed != s->signalled)
		pending_add(sc, s); /* adopted with arms in flight */
}

/* Returns 1 when the command goes back now, 0 when it waits for the flag. */
static int del_slot(struct scanner *sc, struct scanner_session *ss, struct scanner_cmd *c)
{
	struct scanner_slot *s = &ss->slots[c->slot];

	/* Arms the client queued before it freed the slot still count (a session
	 * not added yet, still adopting its slots, has none read). */
	if (ss->live)
		drain_queue(sc, ss, 1);
	s->owned = 0;
	c->final_armed = s->armed;
	if (slot_settled(s)) {
		pending_del(sc, s);
		return 1;
	}
	/* A device write may still land: watch it, hand back when it has. */
	s->retiring = 1;
	s->retire_cmd = c;
	pending_add(sc, s);
	return 0;
}

/* Apply one command; 1 when it goes back to the main thread now. */
static int apply_cmd(struct scanner *sc, struct scanner_cmd *c)
{
	struct scanner_session *ss = c->sess;

	switch (c->op) {
	case SCAN_ADD_SESSION:
		add_session(sc, ss, c->start);
		return 1;
	case SCAN_DEL_SESSION:
		del_session(sc, ss);
		return 1;
	case SCAN_ADD_SLOT:
		add_slot(sc, ss, c);
		return 1;
	case SCAN_DEL_SLOT:
		return del_slot(sc, ss, c);
	case SCAN_SET_EFD: {
		int old = ss->slots[c->slot].efd;
		ss->slots[c->slot].efd = c->efd;
		c->efd = old;
		return 1;
	}
	case SCAN_SET_GROUP: {
		struct scanner_group *g = &ss->groups[c->slot];
		int old = g->efd;
		/* Go on from the ring as it is (a resumed one from where the
		 * daemon before us stopped; read once, the client's head is
		 * checked against it at every record). */
		g->tail = g->ring->tail;
		g->overflows = g->ring->overflows;
		g->efd = c->efd;
		c->efd = old;
		return 1;
	}
	}
	return 1;
}

static void process_cmds(struct scanner *sc)
{
	struct scanner_cmd *list;

	pthread_mutex_lock(&sc->lock);
	list = sc->cmd_head;
	sc->cmd_head = sc->cmd_tail = NULL;
	atomic_store_explicit(&sc->cmd_pending, 0, memory_order_release);
	pthread_mutex_unlock(&sc->lock);

	while (list) {
		struct scanner_cmd *c = list;
		list = list->next;
		if (apply_cmd(sc, c))
			done_push(sc, c);
	}
}

/* ---------------------------------------------------------------- */
/* The hot path                                                      */
/* ---------------------------------------------------------------- */

/*
 * Move arms from a session's queue into the pending set. Every value read
 * from the region is read once into a local and checked before use.
 * An arm naming a slot the scanner does not own yet may be racing its ADD_SLOT
 * command (the client can arm as soon as it has the reply): then stop here and
 * retry after the commands; the tail was read before cmd_pending, so any
 * command that preceded the arm is visible by then.
 * Returns whether it took any entry.
 */
static int drain_queue(struct scanner *sc, struct scanner_session *ss, int in_cmd)
{
	uint32_t tail = atomic_load_explicit(ss->tail, memory_order_acquire);
	uint32_t head = ss->head_local;
	uint32_t avail = tail - head;
	uint32_t mask = ss->layout.queue_cap - 1;

	if (!avail || atomic_load_explicit(&ss->broken, memory_order_relaxed))
		return 0;
	if (avail > ss->layout.queue_cap) {
		/* The client wrote an impossible tail: stop reading its queue
		 * (not broken yet: that returned above). */
		atomic_fetch_add_explicit(&ss->n_bad, 1, memory_order_relaxed);
		set_broken(sc, ss, BROKEN_QUEUE);
		ss->head_local = tail;
		return 0;
	}
	for (; head != tail; head++) {
		struct cuflag_arm a;
		const volatile struct cuflag_arm *e = &ss->queue[head & mask];
		a.slot = e->slot;
		a.target = e->target;
		if (a.slot >= ss->layout.nslots || !ss->slots[a.slot].owned) {
			if (a.slot < ss->layout.nslots &&
			    (in_cmd || atomic_load_explicit(&sc->cmd_pending, memory_order_acquire)))
				break; /* retry once the commands are applied */
			atomic_fetch_add_explicit(&ss->n_bad, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&sc->bad_arms, 1, memory_order_relaxed);
			continue;
		}
		struct scanner_slot *s = &ss->slots[a.slot];
		/* An arm behind what was signalled, or 2^31 ahead of it, is refused. */
		if (!cuflag_tl_after(a.target, s->signalled)) {
			if (a.target != s->signalled) {
				atomic_fetch_add_explicit(&ss->n_bad, 1, memory_order_relaxed);
				atomic_fetch_add_explicit(&sc->bad_arms, 1, memory_order_relaxed);
			}
			continue;
		}
		/* The user's share of the pending set is full: the rest of the
		 * queue waits (the client's arms wait for room, none is lost). */
		if (s->pend_idx == SCAN_NOT_PENDING &&
		    ss->user->pending >= ss->user->max_pending)
			break;
		if (cuflag_tl_after(a.target, s->armed)) {
			s->armed = a.target;
			s->persist->armed = a.target;
		}
		pending_add(sc, s);
		atomic_fetch_add_explicit(&ss->n_armed, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&sc->armed, 1, memory_order_relaxed);
	}
	int took = head != ss->head_local;
	ss->head_local = head;
	atomic_store_explicit(ss->head, head, memory_order_release);
	return took;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A write of this user's was cut short lately: its other eventfds may be set
 * up to block too, so each is checked for room first (a system call, only
 * for such users): one cut per user, not one per connection. */
#define CUT_WATCH_NS (10ull * 1000000000u)

/*
 * Write v to a client's eventfd, timed and charged to its user. Returns
 * BROKEN_NONE; BROKEN_COST when the write was made but took its user over
 * the budget; or, when it was not made, why the client must not be served
 * any more: a counter near 2^64, a write cut short or one that would block
 * can only be the client's doing.
 */
static enum scanner_broken efd_write(struct scanner *sc, struct scanner_user *u, int efd,
				     uint64_t v)
{
	uint64_t t0 = cuflag_now_ns(), t1, c0 = 0, cost;
	int cpu = budget_suspect(&u->budget, t0);
	ssize_t w;

	if (u->cut_at_ns && t0 - u->cut_at_ns < CUT_WATCH_NS) {
		/* The same attack again, caught before it costs anyone a tick
		 * (a full counter on a non-blocking fd only fails the write). */
		struct pollfd p = { .fd = efd, .events = POLLOUT };
		if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
			return fcntl(efd, F_GETFL) & O_NONBLOCK ? BROKEN_FULL : BROKEN_STALL;
	}
	if (cpu)
		c0 = thread_cpu_ns();
	atomic_store_explicit(&sc->write_since_ns, t0, memory_order_relaxed);
	w = write(efd, &v, sizeof(v));
	atomic_store_explicit(&sc->write_since_ns, 0, memory_order_relaxed);
	t1 = cuflag_now_ns();
	if (w != (ssize_t)sizeof(v)) {
		if (w < 0 && errno == EINTR) {
			u->cut_at_ns = t1;
			return BROKEN_STALL;
		}
		return BROKEN_FULL;
	}
	atomic_fetch_add_explicit(&sc->wakes, 1, memory_order_relaxed);
	cost = t1 - t0;
	if (cpu) {
		/* A write cannot have run longer than it took; where the CPU clock
		 * says so (seen under nested virtualisation: 325 us of CPU in 4 us),
		 * it is the clock's error, not the write's cost. */
		uint64_t c = thread_cpu_ns() - c0;
		cost = c < cost ? c : cost;
	}
	return budget_charge(&u->budget, &sc->t.budget, cost, cpu, t1,
			     atomic_load_explicit(&sc->passes, memory_order_relaxed))
		       ? BROKEN_COST
		       : BROKEN_NONE;
}

/* Append a grouped slot's id to its group's ring (or count an overflow when
 * the client has not made room), to ring the group's eventfd once after the
 * pass. */
static void ring_push(struct scanner *sc, struct scanner_slot *s)
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

/* Ring every group that got records in this pass, once each. */
static void ring_groups(struct scanner *sc)
{
	for (uint64_t i = 0; i < sc->nrang; i++) {
		struct scanner_group *g = sc->rang[i];
		enum scanner_broken why;

		g->rang = 0;
		if (g->efd < 0 || atomic_load_explicit(&g->sess->broken, memory_order_relaxed))
			continue;
		why = efd_write(sc, g->sess->user, g->efd, 1);
		if (why)
			set_broken(sc, g->sess, why);
	}
	sc->nrang = 0;
}

/* When a slot's next completion may come: its mean less twice its spread
 * (as TCP's retransmission timer, the other way round), so that a slot
 * whose completions jitter is looked at early enough. */
static uint64_t slot_due(const struct scanner_slot *s)
{
	uint64_t early = 2 * s->dev_ns;

	return s->since_ns + (s->lat_ns > early ? s->lat_ns - early : 0);
}

/* The adaptive mode learns how long a slot's completions take: from the arm
 * (or its previous completion) to the pass that sees the flag. */
static void learn(struct scanner *sc, struct scanner_slot *s)
{
	/* Seen right after a nap, it may have landed any time during it: learn
	 * the nap's planned end, so that a guess that woke us late shrinks, by
	 * the lead each time, until a wake comes before the flag. */
	uint64_t seen = sc->nap_until > s->since_ns ? sc->nap_until : sc->now;
	uint64_t d = seen - s->since_ns;

	if (s->lat_ns) {
		uint64_t off = d > s->lat_ns ? d - s->lat_ns : s->lat_ns - d;
		s->dev_ns = (3 * s->dev_ns + off) / 4;
		s->lat_ns = (3 * s->lat_ns + d) / 4;
	} else {
		s->lat_ns = d;
	}
	/* Falls fast, rises slowly: a nap ends before the short ones lately
	 * (halving, not falling at once: one arm taken late, which looks
	 * instant, must not stop the naps). */
	if (!sc->low_ns)
		sc->low_ns = d;
	else if (d < sc->low_ns)
		sc->low_ns = (sc->low_ns + d) / 2;
	else
		sc->low_ns += (d - sc->low_ns) / 16;
	s->since_ns = sc->now;
}

/* Record due completions of a slot, then ring its eventfd (or its group's
 * ring). BROKEN_NONE, or why the client must not be served any more. */
static enum scanner_broken signal_slot(struct scanner *sc, struct scanner_slot *s, uint32_t due)
{
	enum scanner_broken why = BROKEN_NONE;

	/* Before the doorbell: a daemon killed right after it has recorded
	 * what it rang, and its successor counts nothing twice (the client
	 * counts from this record; the eventfd is the doorbell). The record
	 * stays when the write fails: those completions did happen. */
	s->persist->signalled = s->signalled + due;
	if (s->group)
		ring_push(sc, s);
	else
		why = efd_write(sc, s->sess->user, s->efd, due);
	if (why == BROKEN_NONE || why == BROKEN_COST) {
		s->signalled += due;
		atomic_fetch_add_explicit(&s->sess->n_wakes, 1, memory_order_relaxed);
		lhist_add(&s->sess->n_done, due);
		if (sc->t.metrics)
			lhist_slot_done(&s->sess->done_hist, &s->armed_at_ns, sc->now, due);
		if (sc->t.mode == SCANNER_ADAPTIVE)
			learn(sc, s);
	}
	return why;
}

/* Signal every pending slot whose flag advanced. Returns completions written. */
static uint64_t scan_pending(struct scanner *sc)
{
	uint64_t total = 0;

	sc->next_due = UINT64_MAX;
	sc->unknown_due = 0;
	for (uint64_t i = 0; i < sc->npending;) {
		struct scanner_slot *s = sc->pending[i];
		/* A client found broken gets no more writes: each could block. */
		if (atomic_load_explicit(&s->sess->broken, memory_order_relaxed) && !s->retiring) {
			s->signalled = s->armed;
			pending_del(sc, s);
			continue;
		}
		uint32_t f = __atomic_load_n(s->flag, __ATOMIC_ACQUIRE);

		if (s->retiring) {
			if (cuflag_tl_reached(f, s->armed)) {
				struct scanner_cmd *c = s->retire_cmd;
				s->retire_cmd = NULL;
				s->retiring = 0;
				pending_del(sc, s);
				done_push(sc, c);
				continue; /* slot i now holds another entry */
			}
			i++;
			continue;
		}
		uint32_t due = cuflag_tl_due(f, s->armed, s->signalled);
		if (due) {
			enum scanner_broken why = signal_slot(sc, s, due);
			if (why) {
				set_broken(sc, s->sess, why);
				s->signalled = s->armed;
			} else {
				total += due;
			}
		}
		if (s->signalled == s->armed) {
			pending_del(sc, s);
			continue;
		}
		if (!s->lat_ns)
			sc->unknown_due = 1;
		else if (slot_due(s) < sc->next_due)
			sc->next_due = slot_due(s);
		i++;
	}
	if (sc->nrang)
		ring_groups(sc);
	if (total)
		atomic_fetch_add_explicit(&sc->completions, total, memory_order_relaxed);
	return total;
}

/* Anything the scanner must look at: commands or an arm in any queue. */
static int work_waiting(struct scanner *sc)
{
	if (atomic_load_explicit(&sc->cmd_pending, memory_order_acquire))
		return 1;
	for (uint32_t i = 0; i < sc->nsessions; i++) {
		struct scanner_session *ss = sc->sessions[i];
		if (atomic_load_explicit(ss->tail, memory_order_acquire) != ss->head_local)
			return 1;
	}
	return 0;
}

/* Block in the park set, at most timeout_ns (0: for ever). */
static int park_wait(struct scanner *sc, struct epoll_event *ev, int max, uint64_t timeout_ns)
{
	struct timespec ts = { .tv_sec = (time_t)(timeout_ns / 1000000000u),
			       .tv_nsec = (long)(timeout_ns % 1000000000u) };
	int n;

	if (!timeout_ns)
		return epoll_wait(sc->park_ep, ev, max, -1);
	if (!sc->no_pwait2) {
		n = epoll_pwait2(sc->park_ep, ev, max, &ts, NULL);
		/* Before Linux 5.11, or refused by a seccomp filter: from then on
		 * epoll_wait, in whole milliseconds. */
		if (n >= 0 || (errno != ENOSYS && errno != EPERM))
			return n;
		sc->no_pwait2 = 1;
	}
	return epoll_wait(sc->park_ep, ev, max, (int)((timeout_ns + 999999) / 1000000));
}

/*
 * Park: publish PARKED, full fence, look again, then block (at most
 * timeout_ns; 0: until woken). A client arms by storing its tail, a full
 * fence, then reading the state: one of the two sides always sees the other,
 * so either we see the arm here or the client sees PARKED and writes its wake
 * eventfd.
 */
static void park(struct scanner *sc, uint64_t timeout_ns)
{
	struct epoll_event ev[16];
	int n;

	set_state(sc, CUFLAG_SCANNER_PARKED);
	atomic_thread_fence(memory_order_seq_cst);
	if (work_waiting(sc) || atomic_load(&sc->stop)) {
		set_state(sc, CUFLAG_SCANNER_SPINNING);
		return;
	}
	atomic_fetch_add_explicit(&sc->parks, 1, memory_order_relaxed);
	/* Parked for good: no tick, so an idle daemon is not woken 500 times a
	 * second. A timed park keeps it (the wait just resumes on EINTR). */
	if (!timeout_ns) {
		write_tick_set(sc, 0);
		do
			n = park_wait(sc, ev, 16, 0);
		while (n < 0 && errno == EINTR);
		write_tick_set(sc, 1);
	} else {
		/* The tick interrupts a long wait every 2 ms: wait out the rest. */
		uint64_t deadline = cuflag_now_ns() + timeout_ns, now;
		for (;;) {
			n = park_wait(sc, ev, 16, timeout_ns);
			if (n >= 0 || errno != EINTR)
				break;
			now = cuflag_now_ns();
			if (now >= deadline) {
				n = 0;
				break;
			}
			timeout_ns = deadline - now;
		}
	}
	set_state(sc, CUFLAG_SCANNER_SPINNING);
	for (int i = 0; i < n; i++) {
		uint64_t v;
		/* Only the daemon's own command eventfd is read (level-triggered);
		 * the clients' wake fds are edge-triggered and left alone. */
		if (ev[i].data.fd == sc->cmd_efd &&
		    read(sc->cmd_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			log_err("scanner: command eventfd: %s", strerror(errno));
	}
}

/*
 * Spinning within a time budget. The first pass stamps the clock; later ones
 * read it only every 64 passes (every pass with a budget of 0). Once spent it
 * stays spent until reset.
 */
struct spin_budget {
	uint64_t since;
	unsigned passes;
	int spent;
};

static int budget_spent(struct spin_budget *b, uint64_t budget_ns)
{
	if (b->spent)
		return 1;
	if (b->passes++ == 0) {
		b->since = cuflag_now_ns();
		return 0;
	}
	if ((b->passes & 63) && budget_ns)
		return 0;
	b->spent = cuflag_now_ns() - b->since >= budget_ns;
	return b->spent;
}

static void budget_reset(struct spin_budget *b)
{
	b->passes = 0;
	b->spent = 0;
}

/*
 * The adaptive mode, slots pending and none of them due soon: sleep until a
 * lead (the timer's lateness lately, plus NAP_MARGIN_NS) before the earliest
 * is due, then spin as usual. The state stays
 * SPINNING, so clients do not wake the scanner for their arms: those wait in
 * the queues until the nap ends, which is never later than the shortest
 * completion seen lately would take from now (nor NAP_MAX_NS): an arm made
 * meanwhile is not due before the scanner looks again, unless its work is
 * faster than anything seen lately. A pending slot with no history yet
 * keeps the scanner spinning. The park protocol is not involved: nothing
 * blocks until woken here.
 */
static void nap(struct scanner *sc)
{
	uint64_t lead = (sc->late_ns ? sc->late_ns : NAP_LATE_NS) + NAP_MARGIN_NS, until, cap;
	uint64_t late;
	struct timespec ts;

	if (sc->unknown_due || sc->next_due == UINT64_MAX ||
	    sc->next_due < sc->now + lead + NAP_MIN_NS)
		return;
	until = sc->next_due - lead;
	cap = sc->now + (sc->low_ns > lead ? sc->low_ns - lead : 0);
	if (cap > sc->now + NAP_MAX_NS)
		cap = sc->now + NAP_MAX_NS;
	if (until > cap)
		until = cap;
	if (until < sc->now + NAP_MIN_NS)
		return;
	ts.tv_sec = (time_t)(until / 1000000000u);
	ts.tv_nsec = (long)(until % 1000000000u);
	/* The write tick interrupts it: the deadline is absolute. */
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	sc->nap_until = until;
	late = cuflag_now_ns() - until;
	if (late > NAP_LATE_MAX_NS)
		late = NAP_LATE_MAX_NS;
	sc->late_ns = sc->late_ns ? (7 * sc->late_ns + late) / 8 : late;
}

/* Nothing pending: how long to spin before parking. The adaptive mode parks
 * at once when the pending set stays empty longer than a nap is worth. */
static uint64_t idle_spin_ns(const struct scanner *sc)
{
	if (sc->t.mode == SCANNER_ADAPTIVE && sc->gap_ns > NAP_MIN_NS)
		return 0;
	return sc->t.spin_ns;
}

static void *scanner_main(void *arg)
{
	struct scanner *sc = arg;
	/* idle: nothing pending; stall: slots pending, none progressing (a long
	 * kernel, a stream that will never signal). */
	struct spin_budget idle = { 0 }, stall = { 0 };

	write_tick_start(sc);
	/* Timers to the microsecond: a nap that ends 50 us late (the default
	 * slack) would be a late wake. */
	if (sc->t.mode == SCANNER_ADAPTIVE && prctl(PR_SET_TIMERSLACK, 1000ul, 0, 0, 0) < 0)
		log_warn("scanner: cannot set the timer slack: %s", strerror(errno));

	while (!atomic_load_explicit(&sc->stop, memory_order_relaxed)) {
		uint64_t before = sc->npending;
		int progress = 0;

		if (atomic_load_explicit(&sc->stuck, memory_order_relaxed)) {
			cuflag_cpu_relax();
			continue;
		}
		if (sc->t.mode == SCANNER_ADAPTIVE || sc->t.metrics)
			sc->now = cuflag_now_ns();
		/* Tails before commands: see drain_queue. */
		for (uint32_t i = 0; i < sc->nsessions; i++)
			progress |= drain_queue(sc, sc->sessions[i], 0);
		if (atomic_load_explicit(&sc->cmd_pending, memory_order_acquire)) {
			process_cmds(sc);
			progress = 1;
		}
		if (scan_pending(sc)) {
			/* Whoever was just woken may have been put on this CPU: let
			 * it run now instead of after our spin (see BENCHMARKS.md).
			 * Only where CPUs are few: with many, the scheduler puts it
			 * on an idle one, and the system call per pass only costs
			 * throughput (cuflagd/ceiling 0.80-0.96 with it on an H200
			 * host's 16 CPUs, 0.95-1.20 without). */
			if (sc->yield_after_signal)
				sched_yield();
			progress = 1;
		} else if (sc->npending != before) {
			progress = 1;
		}
		atomic_fetch_add_explicit(&sc->passes, 1, memory_order_relaxed);
		sc->nap_until = 0; /* nap() sets it for the next pass */

		if (sc->npending) {
			budget_reset(&idle);
			/* Stalled past pending_spin_ns: stop burning a core, look every
			 * pending_poll_ns, parked in between so that an arm or a command
			 * still wakes the scanner at once. Progress: spin again. */
			if (progress || !sc->t.pending_spin_ns) {
				budget_reset(&stall);
			} else if (budget_spent(&stall, sc->t.pending_spin_ns)) {
				park(sc, sc->t.pending_poll_ns);
				continue;
			}
			if (sc->t.mode == SCANNER_ADAPTIVE && !progress)
				nap(sc);
			else
				cuflag_cpu_relax();
			continue;
		}
		budget_reset(&stall);
		/* Nothing pending: spin for the budget, then park until woken. */
		if (budget_spent(&idle, idle_spin_ns(sc))) {
			park(sc, 0);
			budget_reset(&idle);
			continue;
		}
		cuflag_cpu_relax();
	}
	if (sc->have_write_tick)
		timer_delete(sc->write_tick);
	return NULL;
}

/* ---------------------------------------------------------------- */
/* Main-thread side                                                  */
/* ---------------------------------------------------------------- */

size_t scanner_session_size(const struct cuflag_region_layout *l)
{
	return sizeof(struct scanner_session) + sizeof(struct scanner_slot) * (size_t)l->nslots +
	       sizeof(struct scanner_group) * (size_t)l->ngroups;
}

void scanner_session_init(struct scanner_session *ss, const struct cuflag_region_layout *l,
			  uint8_t *base, volatile uint32_t *flags, int wake_fd,
			  struct scanner_user *user)
{
	memset(ss, 0, scanner_session_size(l));
	ss->layout = *l;
	ss->base = base;
	ss->head = (_Atomic uint32_t *)(base + l->head_off);
	ss->tail = (_Atomic uint32_t *)(base + l->tail_off);
	ss->queue = (struct cuflag_arm *)(base + l->queue_off);
	ss->flags = flags;
	ss->states = (volatile struct cuflag_slot_state *)(base + l->state_off);
	ss->wake_fd = wake_fd;
	ss->user = user;
	ss->slots = (struct scanner_slot *)(ss + 1);
	for (uint32_t i = 0; i < l->nslots; i++) {
		ss->slots[i].pend_idx = SCAN_NOT_PENDING;
		ss->slots[i].efd = -1;
		ss->slots[i].sess = ss;
	}
	ss->groups = (struct scanner_group *)(ss->slots + l->nslots);
	for (uint32_t g = 0; g < l->ngroups; g++) {
		ss->groups[g].ring = (volatile struct cuflag_group_ring *)(base + l->groups_off +
									   (size_t)g * l->ring_size);
		ss->groups[g].efd = -1;
		ss->groups[g].sess = ss;
	}
}

int scanner_start(struct scanner **out, struct cuflag_daemon_page *dpage, uint32_t max_sessions,
		  uint64_t max_slots, uint64_t max_groups, const struct scanner_config *cfg)
{
	struct scanner *sc = calloc(1, sizeof(*sc));
	struct epoll_event ev = { .events = EPOLLIN };
	int r;

	if (!sc)
		return -ENOMEM;
	sc->dpage = dpage;
	sc->t = *cfg;
	sc->yield_after_signal = sysconf(_SC_NPROCESSORS_ONLN) <= 4;
	sc->max_sessions = max_sessions;
	sc->max_pending = max_slots;
	sc->cmd_efd = sc->done_efd = sc->park_ep = -1;
	pthread_mutex_init(&sc->lock, NULL);
	sc->sessions = calloc(max_sessions ? max_sessions : 1, sizeof(*sc->sessions));
	sc->pending = calloc(max_slots ? max_slots : 1, sizeof(*sc->pending));
	sc->rang = calloc(max_groups ? max_groups : 1, sizeof(*sc->rang));
	if (!sc->sessions || !sc->pending || !sc->rang) {
		r = -ENOMEM;
		goto fail;
	}
	sc->cmd_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sc->done_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sc->park_ep = epoll_create1(EPOLL_CLOEXEC);
	if (sc->cmd_efd < 0 || sc->done_efd < 0 || sc->park_ep < 0) {
		r = -errno;
		goto fail;
	}
	ev.data.fd = sc->cmd_efd;
	if (epoll_ctl(sc->park_ep, EPOLL_CTL_ADD, sc->cmd_efd, &ev) < 0) {
		r = -errno;
		goto fail;
	}
	set_state(sc, CUFLAG_SCANNER_SPINNING);
	r = -pthread_create(&sc->thread, NULL, scanner_main, sc);
	if (r)
		goto fail;
	pthread_setname_np(sc->thread, "cuflagd-scan");
	*out = sc;
	return 0;
fail:
	safe_close(sc->cmd_efd);
	safe_close(sc->done_efd);
	safe_close(sc->park_ep);
	free(sc->sessions);
	free(sc->pending);
	free(sc->rang);
	pthread_mutex_destroy(&sc->lock);
	free(sc);
	return r;
}

static void kick(struct scanner *sc)
{
	uint64_t one = 1;
	if (write(sc->cmd_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_err("cannot wake the scanner: %s", strerror(errno));
}

void scanner_stop(struct scanner *sc)
{
	if (!sc)
		return;
	atomic_store(&sc->stop, 1);
	kick(sc);
	pthread_join(sc->thread, NULL);
	for (struct scanner_cmd *c = sc->cmd_head, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	for (struct scanner_cmd *c = sc->done_head, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	close(sc->cmd_efd);
	close(sc->done_efd);
	close(sc->park_ep);
	free(sc->sessions);
	free(sc->pending);
	free(sc->rang);
	pthread_mutex_destroy(&sc->lock);
	free(sc);
}

void scanner_submit(struct scanner *sc, struct scanner_cmd *cmd)
{
	cmd->next = NULL;
	pthread_mutex_lock(&sc->lock);
	if (sc->cmd_tail)
		sc->cmd_tail->next = cmd;
	else
		sc->cmd_head = cmd;
	sc->cmd_tail = cmd;
	atomic_store_explicit(&sc->cmd_pending, 1, memory_order_release);
	pthread_mutex_unlock(&sc->lock);
	/* Same Dekker pairing as a client's arm: wake only a parked scanner. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit((_Atomic uint32_t *)&sc->dpage->scanner_state,
				 memory_order_relaxed) == CUFLAG_SCANNER_PARKED)
		kick(sc);
}

int scanner_done_fd(const struct scanner *sc)
{
	return sc->done_efd;
}

struct scanner_cmd *scanner_take_done(struct scanner *sc)
{
	struct scanner_cmd *list;
	uint64_t v;

	if (read(sc->done_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_err("scanner done fd: %s", strerror(errno));
	pthread_mutex_lock(&sc->lock);
	list = sc->done_head;
	sc->done_head = sc->done_tail = NULL;
	pthread_mutex_unlock(&sc->lock);
	return list;
}

void scanner_get_stats(struct scanner *sc, struct scanner_stats *st)
{
	st->passes = atomic_load_explicit(&sc->passes, memory_order_relaxed);
	st->wakes = atomic_load_explicit(&sc->wakes, memory_order_relaxed);
	st->completions = atomic_load_explicit(&sc->completions, memory_order_relaxed);
	st->parks = atomic_load_explicit(&sc->parks, memory_order_relaxed);
	st->armed = atomic_load_explicit(&sc->armed, memory_order_relaxed);
	st->bad_arms = atomic_load_explicit(&sc->bad_arms, memory_order_relaxed);
	st->state = atomic_load_explicit((_Atomic uint32_t *)&sc->dpage->scanner_state,
					 memory_order_relaxed);
}

uint64_t scanner_broken_count(struct scanner *sc)
{
	return atomic_load_explicit(&sc->broken, memory_order_relaxed);
}

uint64_t scanner_write_since_ns(struct scanner *sc)
{
	return atomic_load_explicit(&sc->write_since_ns, memory_order_relaxed);
}

pthread_t scanner_thread(const struct scanner *sc)
{
	return sc->thread;
}

uint64_t scanner_heartbeat(struct scanner *sc)
{
	return atomic_load_explicit(&sc->passes, memory_order_relaxed);
}

void scanner_set_stuck(struct scanner *sc, int stuck)
{
	atomic_store(&sc->stuck, stuck);
	kick(sc);
}
