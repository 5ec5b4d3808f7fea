/* SPDX-License-Identifier: MIT */
/*
 * The slots of one client, as the main thread keeps them, and their life.
 * Every transition is one of the functions below; each one changes the
 * table, sends the scanner the command that must follow it (the only place
 * a struct scanner_cmd is filled in) and asserts the state it leaves.
 *
 * A slot:
 *
 *   FREE --slot_open / slot_adopt / slot_import--> LIVE
 *   LIVE --slot_retire--> RETIRING --slot_reclaim--> FREE
 *   LIVE --slot_bind / slot_link_import--> LIVE
 *
 *   transition        from      to        the scanner is sent
 *   slot_open         FREE      LIVE      SCAN_ADD_SLOT (a fresh timeline)
 *   slot_adopt        FREE      LIVE      SCAN_ADD_SLOT (the region's record)
 *   slot_import       FREE      LIVE      SCAN_ADD_IMPORT
 *   slot_retire       LIVE      RETIRING  SCAN_DEL_SLOT
 *   slot_reclaim      RETIRING  FREE      nothing: it takes the DEL_SLOT back
 *   slot_bind         LIVE      LIVE      SCAN_SET_EFD (a slot of its own)
 *   slot_link_import  LIVE      LIVE      SCAN_LINK_IMPORT
 *
 * LIVE: held by the client (ALLOC, ADOPT after a restart, IMPORT); RETIRING:
 * freed by the client, handed back by the scanner once no write of the old
 * timeline can land (then FREE, its next timeline further on).
 *
 * A group: UNMADE --slot_group_make--> MADE --slot_group_unmake--> UNMADE,
 * each sending SCAN_SET_GROUP (the new eventfd, or -1); unmade only once no
 * live slot is in it, and a slot opens only in a made group.
 *
 * The table, the region as the scanner knows it:
 *
 *   HELD --slot_table_start--> SCANNED --slot_table_stop--> GONE
 *   HELD --slot_table_stop--> GONE
 *
 * HELD: made (ATTACH); the scanner is told of slots and groups but does not
 * read the region's queue; a resume stays here while it adopts its slots.
 * slot_table_start sends SCAN_ADD_SESSION (held back since ATTACH, so it
 * cannot fail), slot_table_stop SCAN_DEL_SESSION. Once GONE, nothing more
 * is sent; slot_reclaim still takes back what the scanner hands back.
 *
 * Every other move is illegal: a programming error, since each handler
 * checks what a client names first (slot_table_all_in, slot_table_group_ok,
 * the state arrays and the counts). It fails an assertion where assertions
 * are on; without them the transition returns a negative errno and changes
 * and sends nothing, so that no client request can crash the daemon. The
 * one errno a legal move may return is -ENOMEM (no command to send it with:
 * nothing changed either; slot_table_reserve puts them by).
 *
 * The counts that follow from a transition change here too: the table's own,
 * and the fds its user holds (users.h): a slot of its own eventfd costs one
 * from its opening until slot_reclaim, a grouped slot none (slot_fd_cost), a
 * made group one until it is unmade.
 */
#ifndef CUFLAGD_SLOTS_H
#define CUFLAGD_SLOTS_H

#include <stdint.h>

#include "cuflag-proto.h"
#include "serve/users.h"

struct scanner_cmd;

enum slot_state {
	SLOT_FREE = 0,
	SLOT_LIVE,     /* held by the client */
	SLOT_RETIRING, /* freed; the scanner hands it back once no write can land */
};

enum slot_table_state {
	SLOTS_HELD = 0, /* the scanner does not read the region's queue yet */
	SLOTS_SCANNED,  /* it does (SCAN_ADD_SESSION sent) */
	SLOTS_GONE,     /* it lets go (SCAN_DEL_SESSION sent): nothing more is sent */
};

/* Hands a command to the scanner (scanner_submit; a test keeps them). */
typedef void slot_submit_fn(void *arg, struct scanner_cmd *c);

/* What a table is made with. */
struct slot_table_cfg {
	uint32_t nslots, ngroups;
	struct users *users;         /* whose fds these are */
	struct user *user;
	slot_submit_fn *submit;      /* where its commands go, */
	void *submit_arg;
	struct scanner_session *sess; /* about this region, */
	void *owner;                 /* on behalf of (handed back with each) */
	volatile uint32_t *flags;    /* the slots' flags: a fresh slot's start */
};

struct slot_table {
	uint32_t n;
	uint8_t *state;       /* enum slot_state */
	int *efd;             /* the slot's eventfd, or -1 (none, or grouped) */
	uint32_t *group;      /* 0, or the id + 1 of the slot's group */
	uint32_t *next_start; /* the start value of its next hand-out */
	uint32_t *free_stack; /* free ids, low ids on top */
	uint32_t *free_pos;   /* where each free id sits in free_stack */
	uint32_t nfree, nlive, nretiring;
	/* Groups: each one's eventfd (-1: not made) and live slots. */
	uint32_t ngroups;
	int *group_efd;
	uint32_t *group_live;
	/* Whose fds these are. */
	struct users *users;
	struct user *user;
	/* The scanner's side. */
	enum slot_table_state scanned;
	slot_submit_fn *submit;
	void *submit_arg;
	struct scanner_session *sess;
	void *owner;
	volatile uint32_t *flags;
	struct scanner_cmd *start_cmd; /* SCAN_ADD_SESSION, held while HELD */
	struct scanner_cmd *spare;     /* put by (slot_table_reserve) */
	uint32_t nspare;
};

/* A table of cfg's free slots and unmade groups, HELD. 0 or -ENOMEM (t is
 * then empty). */
int slot_table_init(struct slot_table *t, const struct slot_table_cfg *cfg);
/* Free the table's memory (not its fds: slot_table_release). */
void slot_table_free(struct slot_table *t);

/* HELD -> SCANNED: the scanner reads the region's queue from head on
 * (SCAN_ADD_SESSION). 0, or -EINVAL (illegal). */
int slot_table_start(struct slot_table *t, uint32_t head);
/* HELD or SCANNED -> GONE: the scanner lets go of the region and of every
 * slot (SCAN_DEL_SESSION). 0, -ENOMEM (nothing changed), or -EINVAL
 * (illegal: already GONE). */
int slot_table_stop(struct slot_table *t);

/* Make sure n commands are put by, so that the next n transitions cannot
 * fail for memory (a batch is all or none). 0 or -ENOMEM. */
int slot_table_reserve(struct slot_table *t, uint32_t n);

/* What opening count slots in group (0, or an id + 1) costs in fds. */
static inline uint32_t slot_fd_cost(uint32_t group, uint32_t count)
{
	return group ? 0 : count;
}

/* Whether the table's user may take nfds more fds (slot_fd_cost, or 1 for
 * a group): its quota and share (users_admit). 0, or -EDQUOT / -EMFILE with
 * *why set. */
int slot_fds_may_take(const struct slot_table *t, uint32_t nfds, const char **why);

/* Each opening takes id (FREE), or with id SLOT_ANY the free one on top
 * (the lowest at first, then the last one reclaimed), in constant time, with its eventfd (-1 in a group; group: 0, or a made
 * group's id + 1). It returns the id, or -ENOMEM (nothing reserved, none to
 * be had) or, illegal, -ENOSPC (SLOT_ANY: none free), -EINVAL (id not FREE,
 * group not made) or -EPIPE (GONE). */
#define SLOT_ANY UINT32_MAX
/* FREE -> LIVE on a fresh timeline (ALLOC): its flag is set to its start
 * (next_start[id]) here, never read back from the flag, so that a device
 * write that lands before the scanner looks still counts. */
int slot_open(struct slot_table *t, uint32_t id, int efd, uint32_t group);
/* FREE -> LIVE after a restart (ADOPT): the scanner goes on from rec, the
 * region's record (read once, armed not behind signalled). */
int slot_adopt(struct slot_table *t, uint32_t id, int efd, uint32_t group,
	       const struct cuflag_slot_state *rec);

/* An IMPORT: the slot, and what it watches. */
struct slot_import {
	uint32_t id;     /* SLOT_ANY, or the one a resume names */
	int efd;         /* -1 in a group */
	uint32_t group;
	uint32_t start;  /* resume: the importer's record of the exporter's value */
	uint32_t resume;
	struct scanner_session *src; /* the exporter's (NULL: linked later) */
	uint32_t src_slot;
	uint32_t req_id; /* the IMPORT answered once the scanner has linked it */
};
/* FREE -> LIVE watching another client's slot (IMPORT). */
int slot_import(struct slot_table *t, const struct slot_import *im);

/* LIVE -> RETIRING (FREE). 0, -ENOMEM, or illegal -EINVAL / -EPIPE. */
int slot_retire(struct slot_table *t, uint32_t id);
/* RETIRING -> FREE, once the scanner handed back its DEL_SLOT; its next
 * hand-out starts at next_start. Returns its eventfd (or -1), now the
 * caller's to close; -1 and no change when illegal (not RETIRING). */
int slot_reclaim(struct slot_table *t, uint32_t id, uint32_t next_start);
/* A LIVE slot of its own signals efd from now on (BIND); the old eventfd
 * comes back from the scanner, and the BIND (req_id) is answered then. 0,
 * -ENOMEM, or illegal -EOPNOTSUPP (grouped: its group's eventfd is what it
 * signals), -EINVAL or -EPIPE. */
int slot_bind(struct slot_table *t, uint32_t id, int efd, uint32_t req_id);
/* An imported LIVE slot watches src's slot src_slot (NULL: its exporter
 * never came back, it is gone). 0, -ENOMEM, or illegal -EINVAL / -EPIPE. */
int slot_link_import(struct slot_table *t, uint32_t id, struct scanner_session *src,
		     uint32_t src_slot);

/* UNMADE -> MADE with efd. 0, -ENOMEM, or illegal -EINVAL / -EPIPE. */
int slot_group_make(struct slot_table *t, uint32_t id, int efd);
/* MADE -> UNMADE; its eventfd comes back from the scanner. 0, -ENOMEM, or
 * illegal -EBUSY (live slots in it), -EINVAL / -EPIPE. */
int slot_group_unmake(struct slot_table *t, uint32_t id);

/* What a command the scanner handed back leaves its session to do, once
 * slot_table_done took it back: close close_fd (-1: none), the eventfd the
 * scanner let go of, then what then says.
 *
 *   handed back       the table                 then
 *   SCAN_SET_EFD      nothing                   SLOT_DONE_BIND: BIND's reply
 *   SCAN_SET_GROUP    nothing                   nothing
 *   SCAN_DEL_SLOT     slot_reclaim: FREE again  SLOT_DONE_FREED: a parked
 *                                               ALLOC may be served
 *   SCAN_ADD_IMPORT   nothing                   SLOT_DONE_IMPORT: IMPORT's
 *                                               answer (export.h)
 *   SCAN_DEL_SESSION  nothing                   SLOT_DONE_GONE: the scanner
 *                                               refers to nothing of it
 *   the others        nothing                   nothing
 */
enum slot_done_then {
	SLOT_DONE_NOTHING,
	SLOT_DONE_BIND,
	SLOT_DONE_FREED,
	SLOT_DONE_IMPORT,
	SLOT_DONE_GONE,
};

struct slot_done {
	int close_fd;
	enum slot_done_then then;
};

/* Take back c, a command of this table's the scanner handed back (the
 * caller frees it). */
struct slot_done slot_table_done(struct slot_table *t, const struct scanner_cmd *c);

/* Every eventfd of the table to close(arg, fd), and its user's count of
 * them down by as many (at a drop or at exit). */
void slot_table_release(struct slot_table *t, void (*close_fd)(void *arg, int fd), void *arg);

/* Whether group (0, or an id + 1) names no group or one that was made. */
int slot_table_group_ok(const struct slot_table *t, uint32_t group);

/* Whether ids[0..count) name slots in state want, each once. */
int slot_table_all_in(const struct slot_table *t, const uint32_t *ids, uint32_t count,
		      enum slot_state want);

#endif
