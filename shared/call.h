/* SPDX-License-Identifier: MIT */
/*
 * One request and its reply, from the requester's side (the client library,
 * cuflagctl, the tests): build the header, send the body with its fds, wait
 * for the reply that carries the request's id, check it. What a call needs
 * travels in one struct rather than a dozen positional arguments.
 */
#ifndef CUFLAG_CALL_H
#define CUFLAG_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "slowdown.h"

/* How long a requester waits for a reply (the socket's timeouts). A daemon
 * serving sixteen clients that each ask for 16 384 slots at once answers the
 * last within seconds under a sanitizer (slowdown.h), not within 5 s: such
 * builds wait 30 s, enough for that and still a hang's bound. */
#define CUFLAG_REPLY_TIMEOUT_S (CUFLAG_SLOWDOWN > 1 ? 30 : 5)

struct cuflag_call {
	/* The request: its type and id (chosen by the caller), body and fds. */
	uint16_t type;
	uint32_t id;
	const void *body;
	uint32_t blen;
	const int *fds;
	unsigned nfds;

	/* Where the reply goes: the whole message, header included (reply
	 * holds CUFLAG_MSG_MAX bytes), and up to max_fds fds in reply_fds
	 * (NULL when max_fds is 0). */
	void *reply;
	int *reply_fds;
	unsigned max_fds;

	/* Set by cuflag_call_recv(). */
	size_t reply_len;    /* bytes of the reply; 0 when none was taken */
	unsigned reply_nfds; /* fds it brought (the caller owns them) */
	const char *why;     /* a malformed reply: what was wrong; else NULL */
};

/* The reply's body, after its header. */
const void *cuflag_call_body(const struct cuflag_call *call);

/*
 * Send call's request on sock. 0, -EMSGSIZE (body too long for a message),
 * or the negative errno of cuflag_send_msg() (-EPIPE, -ECONNRESET, -EAGAIN
 * when the socket's send timeout ran out, ...).
 */
int cuflag_call_send(int sock, const struct cuflag_call *call);

/*
 * Receive the reply to call's request. Replies to earlier requests (ids
 * before call->id: requests that timed out) are skipped and their fds
 * closed. An error with request id 0 is the daemon refusing the connection
 * before any request (too many connections): its status is returned, with
 * reply_len 0. Returns the reply's status, 0 or the peer's negative errno with
 * its reason as the body (reply_len > 0 then); or, with reply_len 0:
 * -ENOTCONN (the peer hung up), -ETIMEDOUT (the socket's receive timeout
 * ran out), another negative errno of cuflag_recv_msg(); or an error of
 * cuflag_reply_check() with call->why set. On every error no received fd
 * is kept.
 */
int cuflag_call_recv(int sock, struct cuflag_call *call);

/* cuflag_call_send(), then cuflag_call_recv(): the errors of either. */
int cuflag_call(int sock, struct cuflag_call *call);

#endif
