/* SPDX-License-Identifier: MIT */
/*
 * What the main thread reads of the scanner, for STATS, the metrics and the
 * watchdog: its counters (each written by the scanner alone, read relaxed),
 * the time it spent parked, sleeping and spinning, and its thread's CPU.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "scanner/private.h"

static uint64_t load(_Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

void scanner_get_stats(struct scanner *sc, struct scanner_stats *st)
{
	uint64_t now = cuflag_now_ns(), up = now - sc->start_ns, blocked, since;
	clockid_t cid;

	memset(st, 0, sizeof(*st));
	st->passes = load(&sc->passes);
	st->wakes = load(&sc->police.writes);
	st->completions = load(&sc->completions);
	st->parks = load(&sc->parks);
	st->armed = load(&sc->armed);
	st->bad_arms = load(&sc->bad_arms);
	st->state = atomic_load_explicit((_Atomic uint32_t *)&sc->dpage->scanner_state,
					 memory_order_relaxed);
	st->mode = (uint32_t)sc->cfg.idle.mode;
	st->wakeups = load(&sc->wakeups);
	st->sleeps = load(&sc->sleeps);
	st->parked_ns = load(&sc->parked_ns);
	st->sleeping_ns = load(&sc->sleeping_ns);
	st->timer_late_ns = load(&sc->late_ns);
	/* Blocked right now: the time so far counts too (it is added to the
	 * totals only at the wake). */
	since = atomic_load_explicit(&sc->block_since_ns, memory_order_acquire);
	if (since && now > since) {
		if (atomic_load_explicit(&sc->block_timed, memory_order_relaxed))
			st->sleeping_ns += now - since;
		else
			st->parked_ns += now - since;
	}
	blocked = st->parked_ns + st->sleeping_ns;
	st->spinning_ns = up > blocked ? up - blocked : 0;
	if (pthread_getcpuclockid(sc->thread, &cid) == 0)
		st->cpu_ns = cuflag_clock_ns(cid);
}

uint64_t scanner_broken_count(struct scanner *sc)
{
	return atomic_load_explicit(&sc->broken, memory_order_relaxed);
}

uint64_t scanner_heartbeat(struct scanner *sc)
{
	return atomic_load_explicit(&sc->passes, memory_order_relaxed);
}
