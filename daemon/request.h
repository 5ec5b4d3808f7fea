/* SPDX-License-Identifier: MIT */
/*
 * Serving one request: a table from message type to handler (request.c), in
 * the order of the wire protocol, with what each needs first (a HELLO, a
 * region). A handler decodes its own body and returns:
 *   0                it replied (or will, once the scanner has acted);
 *   REQ_REFUSE(err)  refused, req->why says why: an error reply, the client
 *                    stays;
 *   a negative errno the client broke the protocol or cannot be answered,
 *                    req->why says why: an error reply where one can go,
 *                    then the client is dropped.
 * Only request_finish() (request.c) sends error replies and drops sessions:
 * the dispatcher hands it what a handler returned, and so does the retry of
 * a parked ALLOC.
 */
#ifndef CUFLAGD_REQUEST_H
#define CUFLAGD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "cuflag-proto.h"

struct server;
struct session;

struct request {
	struct cuflag_msg_hdr h;
	const uint8_t *body;
	uint32_t blen;
	int *fds;        /* a handler that keeps one sets its entry to -1 */
	unsigned nfds;
	const char *why; /* for a refusal or a drop */
};

/* A refusal (the client stays): a positive value that carries the errno. */
#define REQ_REFUSE(err) (-(err))

/* Check, then serve one message as received. 0, or a negative errno when the
 * client was dropped. The fds not taken over are the caller's to close. */
int request_dispatch(struct server *srv, struct session *s, const uint8_t *buf, size_t len,
		     int *fds, unsigned nfds);

/* Send a reply; a client whose socket is full is dropped by the caller. */
int request_reply(struct session *s, uint16_t type, uint32_t req_id, int32_t status,
		  const void *body, uint32_t blen, const int *fds, unsigned nfds);
/* The same for a request being served: a reply with status 0. 0, or a
 * negative errno with req->why set. */
int req_reply_ok(struct session *s, struct request *req, const void *body, uint32_t blen,
		 const int *fds, unsigned nfds);

/* An error for a connection refused before its first request (too many
 * connections): sent unasked, with request id 0, before it is closed. */
void request_refuse_connection(int fd, int err, const char *why);

/* Serve the parked ALLOC again (may_park: it may park once more). */
void request_retry_parked(struct server *srv, struct session *s, int may_park);

/* Answer a parked ALLOC that waited too long (-ENOSPC if still short). */
void request_expire_parked(struct server *srv, struct session *s, uint64_t now_ms);

/* Handlers in attach.c: a connection's HELLO, ATTACH and ADOPTs. */
int req_hello(struct server *srv, struct session *s, struct request *req);
int req_attach(struct server *srv, struct session *s, struct request *req);
int req_adopt(struct server *srv, struct session *s, struct request *req);

/* Read FREE's and ADOPT's body: count ids (checked by cuflag_request_check)
 * and the word after the count (ADOPT: the group; FREE: zero). */
uint32_t req_id_batch(const struct request *req, uint32_t ids[CUFLAG_BATCH_MAX],
		      uint32_t *word2);

/* n eventfds below the daemon's fd reserve, all or none: 0 or a negative
 * errno. */
int req_new_eventfds(struct server *srv, int *fds, uint32_t n);

/* Whether fd is an eventfd (and not, say, a pipe that could block us); made
 * non-blocking on the daemon's side. 0, or REQ_REFUSE with req->why. */
int req_take_eventfd(struct request *req, int fd, const char *not_eventfd);

#endif
