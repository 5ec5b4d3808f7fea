/* SPDX-License-Identifier: MIT */
/*
 * Serving one request: a table from message type to handler (request.c), in
 * the order of the wire protocol, with what each needs first (a HELLO, a
 * region). What a handler may return is in handler.h. Only request_finish()
 * (request.c) sends error replies for a request and gives its verdict: the
 * dispatcher hands it what a handler returned, and so does the retry of a
 * parked ALLOC. The session's owner (session.c) acts on the verdict.
 */
#ifndef CUFLAGD_REQUEST_H
#define CUFLAGD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "serve/handler.h"

struct server;
struct session;

/* Check, then serve one message as received: whether the client stays. The
 * fds not taken over are the caller's to close. */
struct req_verdict request_dispatch(struct server *srv, struct session *s, const uint8_t *buf,
				    size_t len, int *fds, unsigned nfds);

/* Serve the parked ALLOC again (may_park: it may park once more). */
struct req_verdict request_retry_parked(struct server *srv, struct session *s, int may_park);

/* Answer a parked ALLOC that waited too long (-ENOSPC if still short); one
 * that did not is left parked. */
struct req_verdict request_expire_parked(struct server *srv, struct session *s, uint64_t now_ms);

#endif
