/* SPDX-License-Identifier: MIT */
#include "serve/handler.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdpass.h"
#include "proto.h"
#include "serve/server-state.h"
#include "serve/session-state.h"

/* ---------------------------------------------------------------- */
/* Replies                                                           */
/* ---------------------------------------------------------------- */

/* One reply message on fd; never blocks (a full socket: the client does not read). */
static int send_reply(int fd, uint16_t type, uint32_t req_id, int32_t status, const void *body,
		      uint32_t blen, const int *fds, unsigned nfds)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hdr h;

	if (fd < 0)
		return -EPIPE;
	if (blen > sizeof(buf) - sizeof(h))
		return -EMSGSIZE;
	cuflag_hdr_init(&h, type | CUFLAG_MSG_REPLY, (uint32_t)sizeof(h) + blen, req_id, status,
			(uint16_t)nfds);
	memcpy(buf, &h, sizeof(h));
	if (blen)
		memcpy(buf + sizeof(h), body, blen);
	return cuflag_send_msg(fd, buf, sizeof(h) + blen, fds, nfds, MSG_DONTWAIT);
}

int request_reply(struct session *s, uint16_t type, uint32_t req_id, int32_t status,
		  const void *body, uint32_t blen, const int *fds, unsigned nfds)
{
	return send_reply(s->fd, type, req_id, status, body, blen, fds, nfds);
}

int req_reply_ok(struct session *s, struct request *req, const void *body, uint32_t blen,
		 const int *fds, unsigned nfds)
{
	int rc = request_reply(s, req->h.type, req->h.req_id, 0, body, blen, fds, nfds);

	req->work.fds_sent += nfds;
	if (rc)
		req->why = "cannot send a reply";
	return rc;
}

/* An error reply with a reason (status < 0). */
static int send_error(int fd, uint16_t type, uint32_t req_id, int err, const char *reason)
{
	struct cuflag_msg_error e;
	size_t n = strlen(reason);

	if (n >= sizeof(e.reason))
		n = sizeof(e.reason) - 1;
	memcpy(e.reason, reason, n);
	e.reason[n] = 0;
	return send_reply(fd, type, req_id, err, &e, (uint32_t)n + 1, NULL, 0);
}

void request_refuse_connection(int fd, int err, const char *why)
{
	(void)send_error(fd, 0, 0, err, why); /* best effort: it is closed next */
}

int req_reply_error(struct session *s, const struct request *req, int err)
{
	return send_error(s->fd, req->h.type, req->h.req_id, err, req->why);
}

/* ---------------------------------------------------------------- */
/* Helpers the handlers share                                        */
/* ---------------------------------------------------------------- */

uint32_t req_id_batch(const struct request *req, uint32_t ids[CUFLAG_BATCH_MAX],
		      uint32_t *group)
{
	uint32_t count;

	memcpy(&count, req->body + offsetof(struct cuflag_msg_free, count), sizeof(count));
	memcpy(group, req->body + offsetof(struct cuflag_msg_adopt, group), sizeof(*group));
	memcpy(ids, req->body + offsetof(struct cuflag_msg_free, ids), (size_t)count * 4);
	return count;
}

static int is_eventfd(int fd)
{
	char path[64], target[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = 0;
	return !strcmp(target, "anon_inode:[eventfd]");
}

int req_take_eventfd(struct request *req, int fd, const char *not_eventfd)
{
	int fl;

	if (!is_eventfd(fd))
		return req_refuse(req, -EBADF, not_eventfd);
	/* The scanner must never block on it; a client that clears the flag
	 * later is caught by the write tick (write-police.c). */
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return req_refuse(req, -EBADF, "cannot make an eventfd non-blocking");
	return 0;
}

/* n eventfds below the reserve (fds come lowest first: a BIND, an ADOPT or a
 * new connection must still find room), all or none. 0 or a negative errno. */
int req_new_eventfds(struct server *srv, struct request *req, int *fds, uint32_t n)
{
	req->work.efds += n;
	for (uint32_t i = 0; i < n; i++) {
		fds[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (fds[i] >= srv->fd_reserve_from) {
			close(fds[i]);
			fds[i] = -1;
			errno = EMFILE;
		}
		if (fds[i] < 0) {
			int rc = -errno;
			while (i--)
				close(fds[i]);
			return rc;
		}
	}
	return 0;
}
