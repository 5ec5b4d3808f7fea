/* SPDX-License-Identifier: MIT */
/*
 * The park protocol, the only way the scanner blocks: publish PARKED, a full
 * fence, look at every queue again, then wait on the park set (the daemon's
 * command eventfd and every client's wake eventfd) until woken or until a
 * deadline. A client arms by storing its tail, a full fence, then reading
 * the state: one of the two sides always sees the other, so either the
 * scanner sees the arm here or the client sees PARKED and writes its wake
 * eventfd (tests/model/park.pml checks this). A timed block (a sleep until a
 * completion is due) is the same protocol with a deadline: an arm made
 * meanwhile wakes the scanner at once.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "clock.h"
#include "scanner/private.h"

void scanner_set_state(struct scanner *sc, uint32_t st)
{
	atomic_store_explicit((_Atomic uint32_t *)&sc->dpage->scanner_state, st,
			      memory_order_seq_cst);
}

/* Anything the scanner must look at: commands or an arm in any queue it
 * may take. The arms of a user whose share of the pending set is full wait
 * for room, which only a pass (one of its slots completing: it has slots
 * pending, so the scanner never blocks without a deadline) or a command
 * makes: they are no reason not to block, or it would spin on them. */
static int work_waiting(struct scanner *sc)
{
	if (atomic_load_explicit(&sc->cmd_pending, memory_order_acquire))
		return 1;
	for (uint32_t i = 0; i < sc->nsessions; i++) {
		struct scanner_session *ss = sc->sessions[i];
		if (pending_user_full(ss->user))
			continue;
		if (atomic_load_explicit(ss->tail, memory_order_acquire) != ss->head_local)
			return 1;
	}
	return 0;
}

/* Wait in the park set, at most timeout_ns (0: for ever). */
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

/* Wait until woken or until deadline_ns (0: none); the write tick's
 * signal only interrupts the wait, which resumes. Returns events. */
static int epoll_until(struct scanner *sc, struct epoll_event *ev, int max, uint64_t deadline_ns)
{
	for (;;) {
		uint64_t now = deadline_ns ? cuflag_now_ns() : 0;
		int n;

		if (deadline_ns && now >= deadline_ns)
			return 0;
		n = park_wait(sc, ev, max, deadline_ns ? deadline_ns - now : 0);
		if (n >= 0 || errno != EINTR)
			return n;
	}
}

/* A timed wait ended at woke_ns: counted as sleeping, its lateness learned
 * when the timer ended it (a long wait's apart: a CPU idle longer may wake
 * later, idle-policy.h). */
static void count_sleep(struct scanner *sc, uint64_t t0, uint64_t deadline_ns, uint64_t woke_ns,
			int by_timer)
{
	atomic_fetch_add_explicit(&sc->sleeps, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sc->sleeping_ns, woke_ns - t0, memory_order_relaxed);
	if (!by_timer)
		return;
	if (deadline_ns - t0 > IDLE_SHORT_WAIT_NS) {
		predict_lateness(&sc->late_long, deadline_ns, woke_ns);
		idle_note_long_lateness(&sc->idle, predict_lead_ns(&sc->late_long));
	} else {
		predict_lateness(&sc->late, deadline_ns, woke_ns);
		atomic_store_explicit(&sc->late_ns, sc->late.mean_ns, memory_order_relaxed);
	}
	sc->planned = deadline_ns;
}

void scanner_nap(struct scanner *sc, uint64_t until_ns)
{
	struct timespec ts = { .tv_sec = (time_t)(until_ns / 1000000000u),
			       .tv_nsec = (long)(until_ns % 1000000000u) };
	uint64_t t0 = cuflag_now_ns(), t1;

	atomic_store_explicit(&sc->block_timed, 1, memory_order_relaxed);
	atomic_store_explicit(&sc->block_since_ns, t0, memory_order_release);
	/* The write tick interrupts it: the deadline is absolute. */
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	t1 = cuflag_now_ns();
	atomic_store_explicit(&sc->block_since_ns, 0, memory_order_release);
	atomic_fetch_add_explicit(&sc->wakeups, 1, memory_order_relaxed);
	count_sleep(sc, t0, until_ns, t1, 1);
}

void scanner_block(struct scanner *sc, uint64_t deadline_ns)
{
	struct epoll_event ev[16];
	uint64_t t0, t1;
	int n;

	scanner_set_state(sc, CUFLAG_SCANNER_PARKED);
	atomic_thread_fence(memory_order_seq_cst);
	if (work_waiting(sc) || atomic_load(&sc->stop)) {
		scanner_set_state(sc, CUFLAG_SCANNER_SPINNING);
		return;
	}
	t0 = cuflag_now_ns();
	atomic_store_explicit(&sc->block_timed, deadline_ns != 0, memory_order_relaxed);
	atomic_store_explicit(&sc->block_since_ns, t0, memory_order_release);
	/* No write can start while blocked: no tick, unless the wait is
	 * shorter than a tick (two timer calls would cost more than the one
	 * signal it may take). */
	if (!deadline_ns || deadline_ns - t0 > WRITE_TICK_NS)
		police_tick(&sc->police, 0);
	n = epoll_until(sc, ev, 16, deadline_ns);
	police_tick(&sc->police, 1);
	scanner_set_state(sc, CUFLAG_SCANNER_SPINNING);
	t1 = cuflag_now_ns();
	atomic_store_explicit(&sc->block_since_ns, 0, memory_order_release);
	atomic_fetch_add_explicit(&sc->wakeups, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sc->parks, 1, memory_order_relaxed);
	/* An arm or a command ended it (not its timer): what the next pass
	 * sees may have happened at any time since t0. */
	sc->woke_from = n > 0 ? t0 : 0;
	sc->wake_sampled = 0;
	if (deadline_ns) {
		count_sleep(sc, t0, deadline_ns, t1, n == 0);
	} else {
		atomic_fetch_add_explicit(&sc->parked_ns, t1 - t0, memory_order_relaxed);
	}
	for (int i = 0; i < n; i++) {
		uint64_t v;
		/* Only the daemon's own command eventfd is read (level-triggered);
		 * the clients' wake fds are edge-triggered and left alone. */
		if (ev[i].data.fd == sc->cmd_efd &&
		    read(sc->cmd_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			log_err("scanner: command eventfd: %s", strerror(errno));
	}
}
