/* SPDX-License-Identifier: MIT */
/*
 * One connected client as the main thread keeps it: its credentials, its
 * region, the slots it holds, where its connection stands. The daemon's truth
 * about a client lives here, in private memory; nothing in its region is
 * trusted. Every main-thread file that serves a client reads it; session.c
 * owns it (only there is a session made, dropped or freed, session.h). What
 * any other file may do to a session: write a line about it, and choose which
 * of its socket's events the loop hears (below).
 */
#ifndef CUFLAGD_SESSION_STATE_H
#define CUFLAGD_SESSION_STATE_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/types.h>

#include "base/client-info.h"
#include "base/eptag.h"
#include "base/log.h"
#include "base/region.h"
#include "base/slab.h"
#include "list.h"
#include "scanner/scanner.h"
#include "serve/slots.h"
#include "serve/users.h"

/*
 * Where a connection stands, stored and moved only by session_move()
 * (session.c), which asserts each move is one of these:
 *
 *   FRESH --HELLO--> HELLO --ATTACH--> REGION
 *   HELLO --ATTACH of a resume--> ADOPTING --its last ADOPT--> REGION
 *   any of those --dropped or hung up--> DYING
 *   DYING --no region, or its DEL_SESSION handed back--> BURIED
 *   any but BURIED --the daemon exits--> BURIED
 *
 * The requests each state takes are request.c's table; nothing is read from
 * a connection once it is DYING.
 */
enum session_state {
	SESSION_FRESH,    /* nothing yet: HELLO first */
	SESSION_HELLO,    /* a protocol version agreed; no region yet */
	SESSION_ADOPTING, /* a resume's region: slots still to come in ADOPTs */
	SESSION_REGION,   /* holding a region, every slot in */
	SESSION_DYING,    /* hung up or dropped; the scanner lets go of its region */
	SESSION_BURIED,   /* in the registry's graveyard, freed after the event batch */
	SESSION_NSTATES,
};

/* What the daemon tells an operator of one client (metrics.h). */
struct session_metrics {
	struct client_ident ident;
	uint32_t stuck;          /* stuck slots at the last look */
	uint64_t *stuck_logged;  /* per slot: the wait logged as stuck (its start), or 0;
				  * made at the first stuck slot */
	struct cuflagd_ratelimit rl; /* its stuck lines */
	int folded;              /* its counts are in its user's totals */
};

struct session {
	struct ep_tag tag; /* first: the epoll tag (EP_CLIENT) */
	int fd;            /* the client's socket, -1 once hung up */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int admin;         /* root or in --admin-group: never refused a connection */
	struct user *user; /* the uid's accounting (users.h) */
	uint32_t id;
	uint64_t connected_ms;
	enum session_state state;

	/* Region and its scanner view (after ATTACH). */
	struct region region;
	struct slab_alloc ipc;      /* --slab cuda-ipc: where the flags are */
	volatile uint32_t *flags;   /* the flags, in the region or in ipc */
	struct scanner_session *scan;
	int wake_fd;
	struct slot_table slots;
	uint32_t adopt_left; /* after a resuming ATTACH: slots still to come in ADOPTs */
	int resumed;         /* its ATTACH took over a region from another daemon: it may
			      * REDECLARE handles and IMPORT RESUME (export.c) */

	/* An ALLOC waiting for freed slots to come back from the scanner (a
	 * client that frees and allocates at once must not see -ENOSPC). While
	 * one waits, nothing more is read from this client. */
	uint8_t *parked;
	uint64_t parked_ms;

	/* A long answer being sent (answer.h); while one is, or while the
	 * connection is held for its user's budget, nothing is read from it. */
	struct answer *answer;
	int held;
	int answering;                 /* on the server's answer list */
	LIST_FIELDS(struct session, answers); /* that list's */

	struct rate_bucket rate; /* its requests (the user's: in user) */
	struct session_metrics met; /* who it is, its stuck slots (metrics.h) */

	LIST_FIELDS(struct session, reg); /* the registry's or its graveyard's (registry.h) */
	struct session_exports *xp;  /* its handles and imports (export.c), or NULL */
};

/* The one place a session's state moves (session.c). */
void session_move(struct session *s, enum session_state to);

/* Whether s was dropped (or hung up): it serves nothing more. */
static inline int session_dead(const struct session *s)
{
	return s->state >= SESSION_DYING;
}

#define slog(prio, s, fmt, ...)                                                            \
	cuflagd_log(prio, "client %u pid=%d uid=%u: " fmt, (s)->id, (int)(s)->pid,            \
		    (unsigned)(s)->uid, ##__VA_ARGS__)
/* A line the client can cause: limited per user, whatever the connection
 * (users.h), so that no user can flood the journal. */
#define ulog(prio, s, fmt, ...)                                                            \
	do {                                                                               \
		if ((prio) <= cuflagd_log_level && user_log_ok((s)->user, prio))                \
			slog(prio, s, fmt, ##__VA_ARGS__);                                 \
	} while (0)

/* What the loop's epoll ep reports of s's socket from now on: EPOLLIN,
 * EPOLLOUT, or 0 (only a hang-up). Nothing once it hung up. */
#define session_watch(ep, s, mask)                                                         \
	do {                                                                               \
		struct epoll_event ev_ = { .events = (mask), .data.ptr = (s) };            \
		if ((s)->fd >= 0 && epoll_ctl(ep, EPOLL_CTL_MOD, (s)->fd, &ev_) < 0)       \
			ulog(LOG_ERR, s, "epoll_ctl: %s", strerror(errno));               \
	} while (0)

#endif
