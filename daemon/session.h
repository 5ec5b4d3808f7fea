/* SPDX-License-Identifier: MIT */
/*
 * One connected client: its credentials, its region, the slots it holds and
 * the life of the connection (made, linked into the server's list, served,
 * dropped, handed back by the scanner, freed). The daemon's truth about a
 * client lives here, in private memory; nothing in its region is trusted.
 * What each request does is in request.c.
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
#include "slab.h"
#include "slots.h"
#include "users.h"

struct server;

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

/* A new connection on fd (non-blocking) of the peer cred describes, in the
 * server's registry. NULL when out of memory. */
struct session *session_new(struct server *srv, int fd, pid_t pid, uid_t uid, gid_t gid,
			    int admin);

/* Read and serve what the client sent. Returns 0, or < 0 when it was dropped. */
int session_on_readable(struct server *srv, struct session *s);

/* Hang up: close the socket, hand the region to the scanner to let go of. */
void session_drop(struct server *srv, struct session *s, int err, const char *why);

/* Stop or resume reading requests from the client. */
void session_set_reading(struct server *srv, struct session *s, int on);
/* What epoll reports of the client's socket (EPOLLIN, EPOLLOUT, or 0: only
 * a hang-up). */
void session_set_events(struct server *srv, struct session *s, uint32_t events);

/* Give the session's slot eventfds, wake fd and region back (the scanner no
 * longer refers to them), at a drop or at exit. */
void session_release(struct server *srv, struct session *s);

/* Free the sessions dropped during the event batch just handled. */
void session_free_graveyard(struct server *srv);

/* Free every session (at exit, the scanner stopped). */
void session_free_all(struct server *srv);

/* A command the scanner handed back for this session. */
void session_on_done(struct server *srv, struct session *s, struct scanner_cmd *c);

#endif
