/* SPDX-License-Identifier: MIT */
/*
 * Requests on the daemon's socket: one sent and its reply received (the
 * caller holds req_lock), HELLO in its two halves, the daemon page it hands
 * over, and whether the socket hung up. The bottom of the library: nothing
 * here resumes or knows of slots; what does calls down to it.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "client-private.h"
#include "fd-util.h"

int cuflag__request_on(struct cuflag_client *c, int sock, struct cuflag_call *call)
{
	int rc;

	call->id = ++c->next_req;
	rc = cuflag_call_send(sock, call);
	if (rc)
		return rc == -ECONNRESET ? -EPIPE : rc;
	return cuflag_call_recv(sock, call);
}

int cuflag__daemon_gone(struct cuflag_client *c)
{
	struct pollfd p = { .fd = c->sock, .events = POLLRDHUP };
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

int cuflag__map_daemon_page(int fd, const struct cuflag_daemon_page **out, size_t *size)
{
	const struct cuflag_daemon_page *p;
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < sizeof(struct cuflag_daemon_page))
		return -EBADMSG;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	if (p->magic != CUFLAG_DPAGE_MAGIC || p->version != CUFLAG_PROTO_VERSION) {
		munmap((void *)p, (size_t)st.st_size);
		return -EBADMSG;
	}
	*out = p;
	*size = (size_t)st.st_size;
	return 0;
}

int cuflag__hello_send(struct cuflag_client *c, int sock, uint32_t *id)
{
	struct cuflag_msg_hello hello = { .version_min = CUFLAG_PROTO_VERSION,
					  .version_max = CUFLAG_PROTO_VERSION };
	struct cuflag_call call = { .type = CUFLAG_MSG_HELLO, .body = &hello,
				    .blen = sizeof(hello), .id = ++c->next_req };
	int rc = cuflag_call_send(sock, &call);

	*id = call.id;
	return rc == -ECONNRESET ? -EPIPE : rc;
}

int cuflag__hello_recv(int sock, uint32_t id, struct cuflag_msg_hello_reply *r,
		       const struct cuflag_daemon_page **dp, size_t *dp_size)
{
	uint8_t reply[CUFLAG_MSG_MAX];
	int fd = -1, rc;
	struct cuflag_call call = { .type = CUFLAG_MSG_HELLO, .id = id, .reply = reply,
				    .reply_fds = &fd, .max_fds = 1 };

	rc = cuflag_call_recv(sock, &call);
	if (rc)
		return rc;
	memcpy(r, cuflag_call_body(&call), sizeof(*r));
	if (r->version != CUFLAG_PROTO_VERSION ||
	    (r->slab != CUFLAG_SLAB_MEMFD && r->slab != CUFLAG_SLAB_CUDA_IPC))
		rc = -EPROTONOSUPPORT;
	else
		rc = cuflag__map_daemon_page(fd, dp, dp_size);
	safe_close(fd);
	return rc;
}

int cuflag__hello(struct cuflag_client *c, int sock, struct cuflag_msg_hello_reply *r,
		  const struct cuflag_daemon_page **dp, size_t *dp_size)
{
	uint32_t id;
	int rc = cuflag__hello_send(c, sock, &id), got;

	if (rc && rc != -EPIPE)
		return rc;
	/* A daemon that refused the connection at once (too many, or a
	 * stranger to a user's own daemon) has closed it, maybe before our
	 * HELLO went: its refusal may still wait to be read, and a reset seen
	 * first (our HELLO unread there) does not hide it. */
	got = cuflag__hello_recv(sock, id, r, dp, dp_size);
	if (got == -ECONNRESET)
		got = cuflag__hello_recv(sock, id, r, dp, dp_size);
	if (rc && (got == -ENOTCONN || got == -ECONNRESET || got == 0))
		return rc;
	return got == -ECONNRESET ? -EPIPE : got;
}
