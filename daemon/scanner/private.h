/* SPDX-License-Identifier: MIT */
/*
 * The scanner's own state, shared by the files that make up the thread:
 * scanner/pass.c (the thread and the pass), scanner/drain.c (what the pass, the
 * commands and the imports do to a client), scanner/setup.c (its start and stop),
 * scanner/cold.c (the cold sweep), scanner/mailbox.c (commands to and
 * from the main thread, both sides), scanner/cmds.c (applying them),
 * scanner/pending.c (the pending set and the users' wait lists),
 * scanner/park.c (parking and sleeping), with the policies in idle-policy.c,
 * predictor.c, fair-share.h and write-police.c. Nothing outside these files
 * includes it.
 */
#ifndef CUFLAGD_SCANNER_PRIVATE_H
#define CUFLAGD_SCANNER_PRIVATE_H

#include "policy/cold-sweep.h"
#include "scanner/scanner.h"

/* A cold pending slot as the sweep reads it: compact, so that reading one
 * costs its flag and this entry, not the slot's state (cold-sweep.h). */
struct cold_entry {
	volatile uint32_t *flag;
	struct scanner_slot *slot;
	uint64_t wake_at; /* made hot by a sweep from then (cold_wake_at) */
	uint32_t seen;    /* the flag when it went cold: a sweep that finds
			   * another value makes it hot */
	uint32_t pad;
};

struct scanner {
	pthread_t thread;
	struct cuflag_daemon_page *dpage;
	struct scanner_config cfg;

	/* The mailbox (scanner/mailbox.c). */
	pthread_mutex_t lock;
	struct scanner_cmd *cmd_head, *cmd_tail;   /* submitted, not yet applied */
	struct scanner_cmd *done_head, *done_tail; /* applied, for the main thread */
	_Atomic int cmd_pending;
	int cmd_efd;  /* wakes a parked scanner for commands */
	int done_efd; /* tells the main loop commands came back */

	int park_ep;  /* epoll over cmd_efd and every session's wake eventfd */
	int no_pwait2; /* epoll_pwait2 is not available: timed waits use epoll_wait */
	_Atomic int stop;
	_Atomic int stuck; /* test hook */
	struct write_police police;

	/* Scanner-private: sized once at start, never reallocated. */
	struct scanner_session **sessions;
	uint32_t nsessions, max_sessions;
	/* The pending set: hot slots, read by every pass, and cold ones,
	 * read by the sweep (scanner/pending.c, scanner/cold.c). */
	struct scanner_slot **pending;
	uint64_t npending, max_pending;
	struct cold_entry *cold;
	uint64_t ncold;
	struct cold_sweep sweep; /* cold[0, sweep.pos) were read by this sweep */
	uint64_t cold_next_ns;   /* the sweep's next slice is due then */
	uint32_t busy_users;     /* users with slots pending */
	int few_cpus; /* give a woken thread our CPU at once (see pass()) */
	struct scanner_group **rang; /* groups that got records this pass */
	uint64_t nrang;
	/* Importers' doorbells owed, oldest first (scanner/import.c). */
	struct scanner_slot *owed_head, *owed_tail;

	/* The pass and the idle policy. */
	uint64_t now;            /* this pass's clock (read again where arms are taken) */
	uint64_t pass_ns;        /* when this pass began, */
	uint64_t prev_pass_ns;   /* and the one before: every queue was looked at since */
	uint64_t planned;        /* when the wait before this pass was to end, where
				  * its timer ended it late (0: it was not) */
	uint64_t woke_from;      /* the wait before this pass began then and an arm or a
				  * command ended it (0: it did not; its timer, or no wait):
				  * a flag seen now may have landed at any time since */
	int wake_sampled;        /* that wake's delay after its arm is learned */
	struct timer_lateness wake_late; /* how long after an arm a parked scanner takes it */
	uint64_t seen_now;       /* metrics: when this pass saw its first completion, 0: not yet */
	uint64_t look_at;        /* earliest time a pending slot is to be looked at */
	uint64_t lead;           /* this pass's lead before a due time (predictor.h) */
	uint64_t pass_no;        /* this pass's number, from 1 */
	uint32_t scan_from;      /* where the pass starts in the pending set */
	int deferred;            /* a user's writes were carried to the next pass */
	struct idle_state idle;
	struct timer_lateness late;      /* how late waits up to IDLE_SHORT_WAIT_NS end, */
	struct timer_lateness late_long; /* and longer ones (idle-policy.h) */
	uint64_t start_ns;

	/* Counters (written by the scanner, read by anyone). */
	_Atomic uint64_t passes, completions, parks, armed, bad_arms;
	_Atomic uint64_t wakeups, sleeps, parked_ns, sleeping_ns;
	_Atomic uint64_t late_ns; /* late.mean_ns, for the main thread */
	/* The block in progress: since then (0: none), and whether timed. */
	_Atomic uint64_t block_since_ns;
	_Atomic int block_timed;
	_Atomic uint64_t broken; /* clients found broken */
};

/* scanner/mailbox.c: mailbox_take takes the oldest commands, at most
 * MAILBOX_BATCH (a pass's worth). */
#define MAILBOX_BATCH 512u
struct scanner_cmd *mailbox_take(struct scanner *sc);
void mailbox_done(struct scanner *sc, struct scanner_cmd *c);
void mailbox_tell_main(struct scanner *sc);
void mailbox_kick(struct scanner *sc);
void mailbox_free_all(struct scanner *sc);

/* scanner/cmds.c */
void scanner_apply_cmds(struct scanner *sc);

/* scanner/pending.c: pending_add puts s in the pending set (the caller has
 * checked the user's share: pending_user_full); pending_add_or_wait puts it
 * on its user's wait list instead when the share is full. */
void pending_add(struct scanner *sc, struct scanner_slot *s);
/* The same for an arm made at arm_ns (its client's word for it, checked:
 * scanner_drain_queue): its wait is learned from then. */
void pending_add_at(struct scanner *sc, struct scanner_slot *s, uint64_t arm_ns);
void pending_add_or_wait(struct scanner *sc, struct scanner_slot *s);
void pending_del(struct scanner *sc, struct scanner_slot *s);
int pending_user_full(const struct scanner_user *u);
/* Move a hot slot to the cold array, its flag seen at seen, to be made hot
 * again from wake_at (cold-sweep.h); and a cold one back, flag_moved where
 * its flag advanced while it was cold (when, the sweep cannot tell: its
 * completion is not learned), else made hot ahead of its flag, whose
 * landing the passes then see as any hot slot's. */
void pending_go_cold(struct scanner *sc, struct scanner_slot *s, uint32_t seen, uint64_t wake_at);
void pending_go_hot(struct scanner *sc, struct scanner_slot *s, int flag_moved);
/* Slots pending, hot and cold. */
static inline uint64_t pending_count(const struct scanner *sc)
{
	return sc->npending + sc->ncold;
}

/* scanner/cold.c: the pass's slice of the sweep; cold slots whose flag
 * moved (or whose time came) are made hot, for this pass to read. */
void cold_sweep_slice(struct scanner *sc);

/* scanner/park.c */
void scanner_set_state(struct scanner *sc, uint32_t st);
/* Block until woken (deadline 0) or until deadline_ns (CLOCK_MONOTONIC). */
void scanner_block(struct scanner *sc, uint64_t deadline_ns);
/* Sleep until until_ns, clients not told (idle-policy.h: a nap). */
void scanner_nap(struct scanner *sc, uint64_t until_ns);

/* scanner/pass.c: the thread (scanner_start in scanner/setup.c runs it) */
void *scanner_main(void *arg);
/* scanner/drain.c */
int scanner_drain_queue(struct scanner *sc, struct scanner_session *ss, int in_cmd);
void scanner_set_broken(struct scanner *sc, struct scanner_session *ss, enum scanner_broken why);
int scanner_slot_settled(const struct scanner_slot *s);
/* A grouped slot's record into its group's ring; an eventfd write charged
 * to ss's user (BROKEN_NONE, or why ss must not be served any more). */
void ring_push(struct scanner *sc, struct scanner_slot *s);
enum scanner_broken efd_write(struct scanner *sc, struct scanner_session *ss, int efd, uint64_t v);

/* scanner/import.c: completions across processes. import_fanout after an
 * exported slot's signalled value advances to value (before its own record); import_add and import_link
 * apply SCAN_ADD_IMPORT and SCAN_LINK_IMPORT; import_slot_gone when a slot
 * is freed (an importer leaves its list, an exporter's importers are gone),
 * import_session_gone when a client goes. */
void import_fanout(struct scanner *sc, struct scanner_slot *src, uint32_t value);
/* Ring the importers' doorbells owed, each under its user's share (the
 * pass, after its own writes); those over it wait for the next pass. */
void import_ring_owed(struct scanner *sc);
/* scanner/drain.c: whether u may write in this pass, and the drop of a
 * user over its share too long (fair-share.h). */
int scan_may_write(struct scanner *sc, struct scanner_user *u);
void scan_drop_if_over_share(struct scanner *sc, struct scanner_session *ss);
void import_add(struct scanner *sc, struct scanner_cmd *c);
void import_link(struct scanner *sc, struct scanner_cmd *c);
void import_slot_gone(struct scanner *sc, struct scanner_slot *s);
void import_session_gone(struct scanner *sc, struct scanner_session *ss);

#endif
