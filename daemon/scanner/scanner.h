/* SPDX-License-Identifier: MIT */
/*
 * The scanner: one thread for every client. It moves arms from each region's
 * queue into its private pending set, watches the flags of pending slots with
 * plain loads, and writes a slot's eventfd when its flag advances.
 *
 * The main thread never touches scanner state directly: it hands changes over
 * as commands (a list under a mutex, flagged by one atomic the scanner reads
 * once per pass), and the scanner hands each command back once it is applied,
 * through an eventfd the main loop polls. Only then does the main thread close
 * what the scanner could still have written (eventfds) or read (regions).
 */
#ifndef CUFLAGD_SCANNER_H
#define CUFLAGD_SCANNER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cuflag-proto.h"
#include "list.h"
#include "policy/budget.h"
#include "policy/fair-share.h"
#include "policy/idle-policy.h"
#include "policy/latency-hist.h"
#include "policy/predictor.h"
#include "proto.h"
#include "scanner/user.h"
#include "scanner/write-police.h"

struct scanner_slot;

/* One slot as the scanner sees it. Owned by the scanner once handed over. */
struct scanner_slot {
	volatile uint32_t *flag;
	/* The region's copy of armed/signalled, for a daemon that adopts it
	 * after a restart; written here, never read back. */
	volatile struct cuflag_slot_state *persist;
	int efd;
	uint32_t armed;     /* highest target armed */
	uint32_t signalled; /* value up to which completions were written */
	uint32_t pend_idx;  /* index in the pending set's hot or cold array, or
			     * SCAN_NOT_PENDING */
	uint32_t group;     /* 0, or the id + 1 of the group whose ring it signals */
	struct slot_timing timing; /* when its next completion is due (predictor.h) */
	/* Metrics: pending since then (a pass's clock), or since its last
	 * completion if that came later; 0 while not pending. Written by the
	 * scanner, read by the main thread to find stuck work. */
	_Atomic uint64_t armed_at_ns;
	uint8_t owned;      /* allocated to the client: arms are accepted */
	uint8_t retiring;   /* freed, waiting for the flag to reach armed */
	uint8_t waiting;    /* on its user's wait list (not pending yet) */
	uint8_t cold;       /* pending, read by the cold sweep (cold-sweep.h) */
	uint8_t swept;      /* made hot by the sweep for a flag that moved while
			     * cold: its completion's time unknown */
	LIST_FIELDS(struct scanner_slot, wait); /* its user's wait list */
	struct scanner_session *sess;
	struct scanner_cmd *retire_cmd; /* handed back once the flag lands */
	/* Completions across processes (scanner/import.c): an exported slot
	 * heads the list of the slots that import it; an imported one names
	 * the slot it mirrors (NULL: not linked, or gone). */
	struct scanner_slot *imp_first, *imp_src;
	LIST_FIELDS(struct scanner_slot, imp); /* imp_src's importers */
	uint8_t imported;
	/* An importer whose doorbell waits for its user's share (its record
	 * already says what it rings for): owed completions, and its place on
	 * the scanner's list of doorbells owed. */
	uint8_t owed_queued;
	uint64_t owed;
	struct scanner_slot *owed_prev, *owed_next;
	/* The value its timeline had when this daemon handed it out or
	 * adopted it: an importer resuming against it starts no earlier. */
	uint32_t base;
};
#define SCAN_NOT_PENDING UINT32_MAX

/* One group of a client: its ring in the region and its one eventfd. */
struct scanner_group {
	volatile struct cuflag_group_ring *ring;
	int efd;             /* -1: no such group */
	uint32_t tail;       /* the truth of the ring's tail, private */
	uint32_t overflows;  /* the truth of its overflow count, private */
	uint8_t rang;        /* records went in this pass: ring its eventfd once */
	struct scanner_session *sess;
};

/* One client's region as the scanner sees it. */
struct scanner_session {
	struct cuflag_region_layout layout;
	uint8_t *base;              /* daemon's mapping of the region */
	_Atomic uint32_t *head;     /* daemon-written consumer index */
	_Atomic uint32_t *tail;     /* client-written producer index */
	_Atomic uint64_t *arm_time; /* client-written: when it stored the tail (a hint) */
	struct cuflag_arm *queue;
	volatile uint32_t *flags;   /* in the region, or in the CUDA IPC allocation */
	volatile struct cuflag_slot_state *states; /* in the region */
	uint32_t head_local;        /* the truth of head, private (from ADD_SESSION on) */
	uint32_t list_idx;          /* index in the scanner's session list */
	struct scanner_slot *slots;    /* layout.nslots */
	struct scanner_group *groups;  /* layout.ngroups */
	uint32_t pending;           /* slots of this session in the pending set */
	uint32_t nowed;             /* its importers on the doorbells-owed list */
	uint32_t waiting;           /* and on its user's wait list */
	struct slot_timing hint;    /* the last history learned: a new slot's seed */
	struct scanner_user *user;  /* its uid's accounting (set before ADD_SESSION) */
	uint8_t live;               /* in the scanner's list */
	int wake_fd;                /* in the park set while live (scanner's own) */
	uint8_t watched;            /* wake_fd is in the park set */
	/* Counters the main thread reads. */
	_Atomic uint64_t n_armed;
	_Atomic uint64_t n_wakes;
	_Atomic uint64_t n_done;    /* completions signalled (the counts written) */
	_Atomic uint64_t n_bad;     /* arms refused */
	_Atomic uint32_t n_pending;
	_Atomic int broken;         /* enum scanner_broken: the main loop drops it */
	/* For the log line of a BROKEN_COST (written before broken is set):
	 * the costly write that took the user over its budget (cost_ns, one
	 * write), its costly writes in a row and lately (budget.h). Or,
	 * cost_share set: it wanted more than its share for too long
	 * (fair-share.h); cost_ns and cost_writes: its writes meanwhile. */
	uint64_t cost_ns;
	struct write_tally tally; /* its own writes, for the verdict (budget.h) */
	uint32_t cost_writes, cost_streak, cost_lately;
	uint8_t cost_share;
	struct latency_hist done_hist; /* arm -> done of its completions (metrics) */
	uint32_t nlinked;           /* its slots in an import list, on either side */
};

enum scanner_op {
	SCAN_ADD_SESSION, /* start: where to read its arm queue from */
	SCAN_DEL_SESSION,
	SCAN_ADD_SLOT,   /* slot, start (signalled), armed, efd */
	SCAN_DEL_SLOT,   /* slot; handed back once no write can still land */
	SCAN_SET_EFD,    /* slot, efd; the old one comes back in efd */
	SCAN_SET_GROUP,  /* slot: the group id, efd (-1: no more); the old one comes back */
	SCAN_ADD_IMPORT, /* slot, efd, group; src: what it mirrors (NULL: linked later);
			  * start: its record (resume), and back: its starting value */
	SCAN_LINK_IMPORT, /* slot to src (NULL: the exporter never came back: gone) */
};

struct scanner_cmd {
	enum scanner_op op;
	struct scanner_session *sess;
	uint32_t slot;
	uint32_t start;
	uint32_t armed;       /* ADD_SLOT: start, or more for a slot adopted after a restart */
	uint32_t group;       /* ADD_SLOT: 0, or the id + 1 of the slot's group */
	int efd;
	uint32_t final_armed; /* DEL_SLOT: the slot's last armed value */
	void *owner;          /* the main thread's context for the reply */
	uint32_t req_id;      /* SET_EFD: the BIND answered once it is applied */
	struct scanner_cmd *next;
	struct scanner_session *src_sess; /* ADD_IMPORT, LINK_IMPORT: the exporter's */
	uint32_t src_slot;
	uint32_t resume;      /* ADD_IMPORT: start is the importer's record */
};

struct scanner_stats {
	uint64_t passes, wakes, completions, parks, armed, bad_arms;
	uint32_t state;
	uint32_t mode;        /* enum scanner_mode */
	/* What the scanner costs: its thread's CPU time, how often it woke
	 * from a park or a sleep, and how its time since the start was spent:
	 * parked (until woken), sleeping (until a completion is due, or woken),
	 * the rest spinning or working. */
	uint64_t cpu_ns, wakeups, sleeps, parked_ns, sleeping_ns, spinning_ns;
	uint64_t timer_late_ns; /* how late its timed waits end (running mean) */
};

struct scanner;

/* How the scanner spends its time when nothing happens (idle-policy.h),
 * and what one user may cost it (budget.h, fair-share.h). */
struct scanner_config {
	/* What its private arrays are sized for, once, at the start: the
	 * loop never allocates. */
	uint32_t max_sessions;
	uint64_t max_slots, max_groups;
	struct idle_cfg idle;
	struct write_budget_cfg budget;
	uint64_t share_quantum_ns; /* a user's writes per pass (fair-share.h) */
	int metrics;               /* record arm -> done and stamp pending slots */
};

/*
 * Start the scanner thread. dpage: the daemon page it publishes its state in.
 * 0 or a negative errno.
 */
int scanner_start(struct scanner **out, struct cuflag_daemon_page *dpage,
		  const struct scanner_config *cfg);

/* Stop and join the thread; every command not handed back is dropped. */
void scanner_stop(struct scanner *sc);

/* Queue a command; the scanner is woken if parked. */
void scanner_submit(struct scanner *sc, struct scanner_cmd *cmd);

/* The eventfd the main loop polls: readable when commands were handed back. */
int scanner_done_fd(const struct scanner *sc);

/* Take the list of commands handed back (oldest first); drains done_fd. */
struct scanner_cmd *scanner_take_done(struct scanner *sc);

void scanner_get_stats(struct scanner *sc, struct scanner_stats *st);

/* Passes so far: the watchdog pings only while this moves or the scanner is parked. */
uint64_t scanner_heartbeat(struct scanner *sc);

/* Fill in the scanner's view of a region mapped at base with layout l and
 * flags at flags (in the region, or a CUDA IPC allocation). Its slots and
 * groups follow it in the same allocation (see scanner_session_size). */
void scanner_session_init(struct scanner_session *ss, const struct cuflag_region_layout *l,
			  uint8_t *base, volatile uint32_t *flags, int wake_fd,
			  struct scanner_user *user);
size_t scanner_session_size(const struct cuflag_region_layout *l);

/* Clients found broken so far: the main loop looks for them when this moves. */
uint64_t scanner_broken_count(struct scanner *sc);

/* Main thread, every tick: interrupt an eventfd write that a client made
 * block and that the scanner's own tick did not cut (write-police.h). */
void scanner_cut_stalled_write(struct scanner *sc);

/* Test hook: make the scanner stop making passes (it spins without scanning). */
void scanner_set_stuck(struct scanner *sc, int stuck);

#endif
