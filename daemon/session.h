/* SPDX-License-Identifier: MIT */
/*
 * One connected client: its credentials, its region, the slots it holds and
 * the life of the connection (made, linked into the server's list, served,
 * dropped, handed back by the scanner, freed). The daemon's truth about a
 * client lives here, in private memory; nothing in its region is trusted.
 * What each request does is in request.c; what other files may do to a
 * session they do not own, in session-io.h. Only session.c ends a session's
 * life: the loop, the handlers and the answers report, and it drops.
 */
#ifndef CUFLAGD_SESSION_H
#define CUFLAGD_SESSION_H

#include <stdint.h>
#include <sys/types.h>

#include "eptag.h"
#include "log.h"
#include "metrics.h"
#include "region.h"
#include "registry.h"
#include "scanner.h"
#include "session-io.h"
#include "slab.h"
#include "slots.h"
#include "users.h"

struct server;
struct ucred;

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
	int hello_done;    /* a protocol version was agreed */
	int dead;          /* hung up or dropped; waiting for the scanner to let go */

	/* Region and its scanner view (after ATTACH). */
	struct region region;
	struct slab_alloc ipc;      /* --slab cuda-ipc: where the flags are */
	volatile uint32_t *flags;   /* the flags, in the region or in ipc */
	struct scanner_session *scan;
	int wake_fd;
	struct slot_table slots;
	uint32_t adopt_left; /* after a resuming ATTACH: slots still to come in ADOPTs */

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
	struct session *aprev, *anext; /* that list's */

	struct rate_bucket rate; /* its requests (the user's: in user) */
	struct session_metrics met; /* who it is, its stuck slots (metrics.h) */

	struct session *prev, *next; /* the registry's (registry.h) */
	struct session_exports *xp;  /* its handles and imports (export.c), or NULL */
};

/* A new connection on fd (non-blocking) of the peer c describes: a session
 * in the server's registry, its socket watched by the loop. NULL when out of
 * memory (fd is then closed). */
struct session *session_accept(struct server *srv, int fd, const struct ucred *c, int admin);

/* What epoll reported of s's socket: read and serve what the client sent,
 * step its answer, or hear it hang up. */
void session_on_event(struct server *srv, struct session *s, uint32_t events);

/* A command the scanner handed back for this session. */
void session_on_done(struct server *srv, struct session *s, struct scanner_cmd *c);

/* The loop's turn at long answers (answer.h): a client whose answer failed
 * is dropped. */
void sessions_run_answers(struct server *srv);

/* Drop the clients the scanner stopped serving (it marks them broken),
 * cooling their user down where the reason says so (broken.h). */
void sessions_drop_broken(struct server *srv);
/* Drop the connections that did not take a region within hello-timeout-ms
 * (root and the admin group may sit on one as long as they like: cuflagctl). */
void sessions_drop_late(struct server *srv);
/* Answer the ALLOCs parked too long. */
void sessions_expire_parked(struct server *srv);
/* A region lost a page under the daemon (region-guard.h): the daemon saw a
 * private page of its own at map, never one of the client's memfd. Its
 * client is dropped. */
void session_on_punched(struct server *srv, uint8_t *map);

/* Free the sessions dropped during the event batch just handled. */
void session_free_graveyard(struct server *srv);

/* Free every session (at exit, the scanner stopped). */
void session_free_all(struct server *srv);

#endif
