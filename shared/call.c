/* SPDX-License-Identifier: MIT */
#include "call.h"

#include <errno.h>
#include <string.h>

#include "cuflag-proto.h"
#include "fdpass.h"
#include "proto.h"

const void *cuflag_call_body(const struct cuflag_call *call)
{
	return (const uint8_t *)call->reply + sizeof(struct cuflag_msg_hdr);
}

int cuflag_call_send(int sock, const struct cuflag_call *call)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hdr h;

	if (call->blen > sizeof(buf) - sizeof(h))
		return -EMSGSIZE;
	cuflag_hdr_init(&h, call->type, (uint32_t)sizeof(h) + call->blen, call->id, 0,
			(uint16_t)call->nfds);
	memcpy(buf, &h, sizeof(h));
	if (call->blen)
		memcpy(buf + sizeof(h), call->body, call->blen);
	return cuflag_send_msg(sock, buf, sizeof(h) + call->blen, call->fds, call->nfds, 0);
}

/* One message for this call, skipping replies to requests before it. */
static ssize_t recv_own(int sock, struct cuflag_call *call)
{
	struct cuflag_msg_hdr h;
	ssize_t n;

	for (;;) {
		n = cuflag_recv_msg(sock, call->reply, CUFLAG_MSG_MAX, call->reply_fds,
				    call->max_fds, &call->reply_nfds, 0);
		if (n < (ssize_t)sizeof(h))
			return n;
		memcpy(&h, call->reply, sizeof(h));
		/* A late reply to an earlier request that timed out: drop it. A
		 * refusal of the connection itself (id 0) answers any request. */
		if (h.req_id == call->id || (int32_t)(h.req_id - call->id) > 0 ||
		    (h.req_id == 0 && h.status < 0))
			return n;
		cuflag_close_fds(call->reply_fds, call->reply_nfds);
	}
}

int cuflag_call_recv(int sock, struct cuflag_call *call)
{
	struct cuflag_msg_hdr h;
	ssize_t n;
	int rc;

	call->reply_len = 0;
	call->reply_nfds = 0;
	call->why = NULL;
	n = recv_own(sock, call);
	if (n == 0)
		return -ENOTCONN;
	if (n < 0)
		return n == -EAGAIN || n == -EWOULDBLOCK ? -ETIMEDOUT : (int)n;
	memcpy(&h, call->reply, sizeof(h));
	if (h.req_id == 0 && h.status < 0 && call->id != 0) {
		/* The daemon refused the connection before any request (too many
		 * connections): its status is the answer. */
		cuflag_close_fds(call->reply_fds, call->reply_nfds);
		call->reply_nfds = 0;
		call->why = "connection refused by the daemon";
		return h.status;
	}
	rc = cuflag_reply_check(call->reply, (size_t)n, call->reply_nfds, call->type, call->id,
				&call->why);
	if (rc) {
		cuflag_close_fds(call->reply_fds, call->reply_nfds);
		call->reply_nfds = 0;
		return rc;
	}
	call->reply_len = (size_t)n;
	memcpy(&h, call->reply, sizeof(h));
	return h.status;
}

int cuflag_call(int sock, struct cuflag_call *call)
{
	int rc = cuflag_call_send(sock, call);

	return rc ? rc : cuflag_call_recv(sock, call);
}
