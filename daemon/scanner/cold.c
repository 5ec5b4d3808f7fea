/* SPDX-License-Identifier: MIT */
/*
 * The cold sweep: each pass reads the slice of the cold set that the plan
 * says is due (cold-sweep.h) and makes hot every slot in it whose flag moved
 * since it went cold, whose predicted completion comes within a sweep, or
 * whose user has hot room again (when it went cold for want of it), within
 * that user's share of the pass. The pass then reads those with the hot ones: signalling stays in one place
 * (scanner/drain.c), the sweep only decides who is read.
 */
#include "scanner/private.h"

/* Whether the time to make e hot again has come. */
static int cold_woken(const struct scanner *sc, const struct cold_entry *e)
{
	if (e->wake_at > sc->now)
		return 0;
	/* wake_at 0: cold for want of hot room; hot once its user has some,
	 * or is alone with work pending again. */
	return e->wake_at || e->slot->sess->user->hot < COLD_HOT_PER_USER || sc->busy_users < 2;
}

void cold_sweep_slice(struct scanner *sc)
{
	struct cold_slice sl = cold_plan(&sc->sweep, sc->ncold, sc->now);

	sc->cold_next_ns = sl.next_ns;
	/* The slice is cold[from, sweep.pos): a slot made hot takes an entry
	 * of the slice not read yet in its place and shortens it by one
	 * (pending_go_hot keeps the sweep's order). */
	for (uint64_t i = sl.from; i < sc->sweep.pos && i < sc->ncold;) {
		const struct cold_entry *e = &sc->cold[i];
		uint32_t f = __atomic_load_n(e->flag, __ATOMIC_RELAXED);

		int moved = f != e->seen;

		struct scanner_user *u = e->slot->sess->user;

		/* Slots whose flags moved: a bounded number of a user's a pass
		 * (cold-sweep.h); those for their time or hot room: a sweep
		 * each, COLD_HOT_PER_USER a user. */
		if (moved ? cold_moved_may_wake(&u->swept_pass, &u->swept_moved, sc->pass_no,
						sc->busy_users)
			  : cold_woken(sc, e))
			pending_go_hot(sc, e->slot, moved);
		else
			i++;
	}
}
