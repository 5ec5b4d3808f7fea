/* SPDX-License-Identifier: MIT */
/*
 * One connected client: its credentials, its region, the slots it holds and
 * the requests it sends. The daemon's truth about a client lives here, in
 * private memory; nothing in the client's region is trusted.
 */
#ifndef CUFLAGD_SESSION_H
#define CUFLAGD_SESSION_H

#include <stdint.h>
#include <sys/types.h>

#include "log.h"
#include "region.h"
#include "scanner.h"
#include "slab.h"

struct server;

enum slot_state {
	SLOT_FREE = 0,
	SLOT_LIVE,     /* held by the client */
	SLOT_RETIRING, /* freed; the scanner hands it back once no write can land */
};

struct session {
	int ep_kind;   /* first: the epoll tag */
	int fd;        /* the client's socket, -1 once hung up */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	uint32_t id;
	uint64_t connected_ms;
	int hello_done;
	int dead;      /* hung up or dropped; waiting for the scanner to let go */

	/* Region and its scanner view (after HELLO). */
	struct region region;
	struct slab_alloc ipc;      /* --slab cuda-ipc: where the flags are */
	volatile uint32_t *flags;   /* the flags, in the region or in ipc */
	struct scan_session *scan;
	int wake_fd;

	/* Slots: state, eventfd and the start value of the next hand-out. */
	uint32_t nslots;
	uint8_t *slot_state;
	int *slot_efd;
	uint32_t *next_start;
	uint32_t *free_stack;
	uint32_t nfree;
	uint32_t nlive;
	uint32_t nretiring;
	uint32_t adopt_left; /* after RESUME: slots still to come in ADOPTs */
	struct scan_cmd *adopt_cmd; /* the ADD_SESSION held back until then */

	/* An ALLOC waiting for freed slots to come back from the scanner (a
	 * client that frees and allocates at once must not see -ENOSPC). While
	 * one waits, nothing more is read from this client. */
	uint8_t *parked;
	uint64_t parked_ms;

	/* Log lines this client can cause (refusals), limited per client. */
	struct cuflagd_ratelimit rl;

	/* Request rate limit: a token bucket. */
	double tokens;
	uint64_t tokens_ms;

	struct session *prev, *next;
};

/* A new connection on fd (non-blocking); credentials read from SO_PEERCRED. */
struct session *session_new(struct server *srv, int fd);

/* Read and serve what the client sent. Returns 0, or < 0 when it was dropped. */
int session_on_readable(struct server *srv, struct session *s);

/* Hang up: close the socket, hand the region to the scanner to let go of. */
void session_drop(struct server *srv, struct session *s, int err, const char *why);

/* Answer a parked ALLOC that waited too long (-ENOSPC if still short). */
void session_expire_parked(struct server *srv, struct session *s, uint64_t now_ms);

/* Close every fd and unmap everything the session holds (the scanner must
 * not refer to it any more); session_free then frees its memory. */
void session_release(struct session *s);
void session_free(struct session *s);

/* Free the sessions dropped during the event batch just handled. */
void session_free_graveyard(struct server *srv);

/* A command the scanner handed back for this session. */
void session_on_done(struct server *srv, struct session *s, struct scan_cmd *c);

#endif
