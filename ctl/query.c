/* SPDX-License-Identifier: MIT */
#include "query.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdpass.h"
#include "proto.h"

/* A daemon that does not answer within this is reported, not waited for. */
#define REPLY_TIMEOUT_S 5
/* More than a daemon can hold (max-clients is at most 65536): a runaway list. */
#define CLIENTS_MAX (1u << 17)

static int fail(struct ctl_conn *c, int err, const char *what)
{
	snprintf(c->why, sizeof(c->why), "%s: %s", what, strerror(-err));
	return err;
}

int ctl_open(struct ctl_conn *c, const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = REPLY_TIMEOUT_S };

	c->fd = -1;
	c->next_id = 0;
	c->why[0] = 0;
	if (strlen(path) >= sizeof(a.sun_path))
		return fail(c, -ENAMETOOLONG, path);
	memcpy(a.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return fail(c, -errno, "socket");
	/* Blocking with a timeout: a stuck daemon makes us fail, not hang. */
	if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int err = -errno;
		ctl_close(c);
		return fail(c, err, path);
	}
	return 0;
}

void ctl_close(struct ctl_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* Send a query (no body, no fds); *id receives its request id. */
static int send_query(struct ctl_conn *c, uint16_t type, uint32_t *id)
{
	struct cuflag_msg_hdr h;
	int rc;

	*id = ++c->next_id;
	cuflag_hdr_init(&h, type, sizeof(h), *id, 0, 0);
	rc = cuflag_send_msg(c->fd, &h, sizeof(h), NULL, 0, 0);
	if (rc == -EAGAIN)
		rc = -ETIMEDOUT;
	return rc ? fail(c, rc, "sending the request") : 0;
}

/*
 * Receive one reply to (type, id) and copy its body (exactly blen bytes, the
 * reply check made sure) to body. A daemon's error reply is returned as its
 * status with its reason in c->why.
 */
static int recv_reply(struct ctl_conn *c, uint16_t type, uint32_t id, void *body, size_t blen)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hdr h;
	const char *why;
	unsigned nfds;
	ssize_t n;
	int rc;

	n = cuflag_recv_msg(c->fd, buf, sizeof(buf), NULL, 0, &nfds, 0);
	if (n == 0)
		return fail(c, -ECONNRESET, "the daemon hung up");
	if (n == -EAGAIN)
		return fail(c, -ETIMEDOUT, "waiting for the reply");
	if (n < 0)
		return fail(c, (int)n, "receiving the reply");
	rc = cuflag_reply_check(buf, (size_t)n, nfds, type, id, &why);
	if (rc) {
		snprintf(c->why, sizeof(c->why), "malformed reply: %s", why);
		return rc;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.status < 0) {
		size_t rlen = (size_t)n - sizeof(h);
		/* The reason is the daemon's text: keep it inside its bytes. */
		snprintf(c->why, sizeof(c->why), "the daemon refused: %.*s", (int)rlen,
			 (const char *)buf + sizeof(h));
		return h.status;
	}
	memcpy(body, buf + sizeof(h), blen);
	return 0;
}

int ctl_stats(struct ctl_conn *c, struct cuflag_msg_stats_reply *out)
{
	uint32_t id;
	int rc = send_query(c, CUFLAG_MSG_STATS, &id);

	return rc ? rc : recv_reply(c, CUFLAG_MSG_STATS, id, out, sizeof(*out));
}

int ctl_clients(struct ctl_conn *c, struct cuflag_msg_client_info **list, size_t *n)
{
	struct cuflag_msg_client_info ci, *v = NULL;
	size_t cap = 0, len = 0;
	uint32_t id;
	int rc = send_query(c, CUFLAG_MSG_CLIENTS, &id);

	while (rc == 0) {
		rc = recv_reply(c, CUFLAG_MSG_CLIENTS, id, &ci, sizeof(ci));
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
