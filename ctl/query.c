/* SPDX-License-Identifier: MIT */
#include "query.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "fd-util.h"
#include "unix-socket.h"

/* More than a daemon can hold (max-clients is at most 65536): a runaway list. */
#define CLIENTS_MAX (1u << 17)

static int fail(struct ctl_conn *c, int err, const char *what)
{
	snprintf(c->why, sizeof(c->why), "%s: %s", what, strerror(-err));
	return err;
}

int ctl_open(struct ctl_conn *c, const char *path)
{
	/* Blocking with a timeout: a stuck daemon is reported, not waited for. */
	int fd = cuflag_unix_connect(path, CUFLAG_REPLY_TIMEOUT_S);

	c->next_id = 0;
	c->why[0] = 0;
	c->fd = fd < 0 ? -1 : fd;
	if (fd < 0) {
		const char *hint = cuflag_unix_connect_hint(fd);
		snprintf(c->why, sizeof(c->why), "%s: %s%s%s", path, strerror(-fd),
			 hint ? ": " : "", hint ? hint : "");
		return fd;
	}
	return 0;
}

void ctl_close(struct ctl_conn *c)
{
	c->fd = safe_close(c->fd);
}

/* Send a query (no body, no fds) on a call of type, with a fresh id. */
static int send_query(struct ctl_conn *c, struct cuflag_call *call, uint16_t type, void *buf)
{
	int rc;

	*call = (struct cuflag_call){ .type = type, .id = ++c->next_id, .reply = buf };
	rc = cuflag_call_send(c->fd, call);
	if (rc == -EAGAIN)
		rc = -ETIMEDOUT;
	return rc ? fail(c, rc, "sending the request") : 0;
}

/*
 * Receive one reply to call and copy its body (exactly blen bytes, the reply
 * check made sure) to body. A daemon's error reply is returned as its status
 * with its reason in c->why.
 */
static int recv_reply(struct ctl_conn *c, struct cuflag_call *call, void *body, size_t blen)
{
	int rc = cuflag_call_recv(c->fd, call);

	if (call->why) {
		snprintf(c->why, sizeof(c->why), "malformed reply: %s", call->why);
		return rc;
	}
	if (rc < 0 && call->reply_len) {
		size_t rlen = call->reply_len - sizeof(struct cuflag_msg_hdr);
		/* The reason is the daemon's text: keep it inside its bytes. */
		snprintf(c->why, sizeof(c->why), "the daemon refused: %.*s", (int)rlen,
			 (const char *)cuflag_call_body(call));
		return rc;
	}
	if (rc == -ENOTCONN)
		return fail(c, -ECONNRESET, "the daemon hung up");
	if (rc == -ETIMEDOUT)
		return fail(c, rc, "waiting for the reply");
	if (rc < 0)
		return fail(c, rc, "receiving the reply");
	memcpy(body, cuflag_call_body(call), blen);
	return 0;
}

int ctl_stats(struct ctl_conn *c, struct cuflag_msg_stats_reply *out)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_call call;
	int rc = send_query(c, &call, CUFLAG_MSG_STATS, buf);

	return rc ? rc : recv_reply(c, &call, out, sizeof(*out));
}

int ctl_clients(struct ctl_conn *c, struct cuflag_msg_client_info **list, size_t *n)
{
	struct cuflag_msg_client_info ci, *v = NULL;
	size_t cap = 0, len = 0;
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_call call;
	int rc = send_query(c, &call, CUFLAG_MSG_CLIENTS, buf);

	while (rc == 0) {
		rc = recv_reply(c, &call, &ci, sizeof(ci));
		if (rc)
			break;
		if (ci.client_id == 0) {
			*list = v;
			*n = len;
			return 0;
		}
		if (len == CLIENTS_MAX) {
			rc = fail(c, -EBADMSG, "client list without an end");
			break;
		}
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			void *nv = realloc(v, ncap * sizeof(*v));
			if (!nv) {
				rc = fail(c, -ENOMEM, "client list");
				break;
			}
			v = nv;
			cap = ncap;
		}
		v[len++] = ci;
	}
	free(v);
	return rc;
}
