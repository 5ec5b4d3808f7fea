/* SPDX-License-Identifier: MIT */
/*
 * What every request handler shares: the request as received, how it refuses
 * one, the replies it sends and the fds it takes. The handlers (request.c's
 * table: request.c, attach.c, export.c, queries.c) decode their own bodies and
 * return:
 *   0                           it replied (or will, once the scanner has
 *                               acted);
 *   req_refuse(req, err, why)   refused: an error reply of err (a negative
 *                               errno) saying why, the client stays;
 *   a negative errno            the client broke the protocol or cannot be
 *                               answered, req->why says why: an error reply
 *                               where one can go, then the client is dropped.
 * No handler drops a client: request.c turns what it returned into a verdict
 * (struct req_verdict) and the session's owner (session.c) acts on it.
 */
#ifndef CUFLAGD_HANDLER_H
#define CUFLAGD_HANDLER_H

#include <stddef.h>
#include <stdint.h>

#include "cuflag-proto.h"
#include "policy/loop-price.h"

struct server;
struct session;

struct request {
	struct cuflag_msg_hdr h;
	const uint8_t *body;
	uint32_t blen;
	int *fds;        /* a handler that keeps one sets its entry to -1 */
	unsigned nfds;
	const char *why; /* for a refusal or a drop */
	int refused;     /* req_refuse()'s err */
	struct loop_work work; /* the fds it made the daemon handle (loop-price.h), charged
				* to its user once it is served; the request itself is
				* charged by the reader */
};

/* What a handler returns once it refused its request (req_refuse()). */
#define REQ_REFUSED 1

/* Refuse req: an error reply of err (a negative errno) with why as its
 * reason, and the client stays. Returns REQ_REFUSED, for the handler to
 * return. */
static inline int req_refuse(struct request *req, int err, const char *why)
{
	req->refused = err;
	req->why = why;
	return REQ_REFUSED;
}

/* What serving a request (or sending its answer) came to, for the session's
 * owner: the client stays, or it is dropped, err (a negative errno) and why
 * saying why; a drop with err 0 and no why is a hang-up, no misdeed. */
struct req_verdict {
	int drop;
	int err;
	const char *why;
};

#define REQ_KEEP ((struct req_verdict){ 0, 0, NULL })

static inline struct req_verdict req_drop(int err, const char *why)
{
	return (struct req_verdict){ 1, err, why };
}

/* Send a reply; a client whose socket is full is dropped by the caller. */
int request_reply(struct session *s, uint16_t type, uint32_t req_id, int32_t status,
		  const void *body, uint32_t blen, const int *fds, unsigned nfds);
/* The same for a request being served: a reply with status 0. 0, or a
 * negative errno with req->why set. */
int req_reply_ok(struct session *s, struct request *req, const void *body, uint32_t blen,
		 const int *fds, unsigned nfds);
/* An error reply to req: status err (a negative errno), req->why as its
 * reason. 0 or a negative errno. */
int req_reply_error(struct session *s, const struct request *req, int err);

/* An error for a connection refused before its first request (too many
 * connections): sent unasked, with request id 0, before it is closed. */
void request_refuse_connection(int fd, int err, const char *why);

/* Read FREE's and ADOPT's body: count ids (checked by cuflag_request_check)
 * and the group they are adopted into (ADOPT's second word; FREE's is
 * reserved, zero). */
uint32_t req_id_batch(const struct request *req, uint32_t ids[CUFLAG_BATCH_MAX],
		      uint32_t *group);

/* n eventfds below the daemon's fd reserve, all or none, counted in
 * req's work: 0 or a negative errno. */
int req_new_eventfds(struct server *srv, struct request *req, int *fds, uint32_t n);

/* Whether fd is an eventfd (and not, say, a pipe that could block us); made
 * non-blocking on the daemon's side. 0, or REQ_REFUSED (req_refuse()). */
int req_take_eventfd(struct request *req, int fd, const char *not_eventfd);

#endif
