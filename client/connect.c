/* SPDX-License-Identifier: MIT */
/* Connecting to cuflagd, mapping what it shares, requests, disconnecting. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "client-private.h"
#include "fdpass.h"

/* How long a request may wait for its reply. */
#define REPLY_TIMEOUT_S 5

CUFLAG_EXPORT const char *cuflag_version(void)
{
	return CUFLAG_VERSION;
}

CUFLAG_EXPORT int cuflag_client_fd(const cuflag_client *c)
{
	return c->sock;
}

CUFLAG_EXPORT uint64_t cuflag_client_epoch(const cuflag_client *c)
{
	return c->epoch;
}

int cuflag__request(struct cuflag_client *c, uint16_t type, const void *body, uint32_t blen,
		    const int *send_fds, unsigned send_nfds, void *reply, size_t *rlen, int *fds,
		    unsigned max_fds, unsigned *nfds)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hdr h;
	const char *why;
	uint32_t id;
	ssize_t n;
	int rc;

	*nfds = 0;
	if (blen > sizeof(buf) - sizeof(h))
		return -EMSGSIZE;
	pthread_mutex_lock(&c->req_lock);
	id = ++c->next_req;
	cuflag_hdr_init(&h, type, (uint32_t)sizeof(h) + blen, id, 0, (uint16_t)send_nfds);
	memcpy(buf, &h, sizeof(h));
	if (blen)
		memcpy(buf + sizeof(h), body, blen);
	rc = cuflag_send_msg(c->sock, buf, sizeof(h) + blen, send_fds, send_nfds, 0);
	if (rc) {
		pthread_mutex_unlock(&c->req_lock);
		return rc == -ECONNRESET ? -EPIPE : rc;
	}
	for (;;) {
		n = cuflag_recv_msg(c->sock, reply, CUFLAG_MSG_MAX, fds, max_fds, nfds, 0);
		if (n < (ssize_t)sizeof(h))
			break;
		memcpy(&h, reply, sizeof(h));
		/* A late reply to an earlier request that timed out: drop it. */
		if (h.req_id == id || (int32_t)(h.req_id - id) > 0)
			break;
		cuflag_close_fds(fds, *nfds);
		*nfds = 0;
	}
	pthread_mutex_unlock(&c->req_lock);
	if (n == 0)
		return -ENOTCONN;
	if (n < 0)
		return n == -EAGAIN || n == -EWOULDBLOCK ? -ETIMEDOUT : (int)n;
	*rlen = (size_t)n;
	rc = cuflag_reply_check(reply, (size_t)n, *nfds, type, id, &why);
	if (rc) {
		cuflag_close_fds(fds, *nfds);
		*nfds = 0;
		return rc;
	}
	memcpy(&h, reply, sizeof(h));
	return h.status;
}

int cuflag__daemon_gone(struct cuflag_client *c)
{
	struct pollfd p = { .fd = c->sock, .events = POLLRDHUP };
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* Check and map the region the daemon sent: its seals, size and layout. */
static int map_region(struct cuflag_client *c, int fd, const struct cuflag_msg_hello_reply *r)
{
	long page = sysconf(_SC_PAGESIZE);
	struct cuflag_region_hdr hdr;
	const char *why;
	struct stat st;
	int seals, rc;

	c->layout = (struct cuflag_region_layout){
		.nslots = r->nslots, .queue_cap = r->queue_cap, .head_off = r->head_off,
		.tail_off = r->tail_off, .queue_off = r->queue_off, .flags_off = r->flags_off,
		.size = r->region_size,
	};
	/* Without the shrink seal a truncate could SIGBUS us; refuse it. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return -EBADMSG;
	if (fstat(fd, &st) < 0)
		return -errno;
	rc = cuflag_region_layout_check(&c->layout, (uint64_t)st.st_size, (uint32_t)page, &why);
	if (rc)
		return -EBADMSG;
	c->region = mmap(NULL, c->layout.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (c->region == MAP_FAILED) {
		c->region = NULL;
		return -errno;
	}
	memcpy(&hdr, c->region, sizeof(hdr));
	if (hdr.magic != CUFLAG_REGION_MAGIC || hdr.version != r->version ||
	    hdr.nslots != r->nslots || hdr.flags_off != r->flags_off ||
	    hdr.queue_off != r->queue_off || hdr.region_size != r->region_size)
		return -EBADMSG;
	c->head = (_Atomic uint32_t *)(c->region + c->layout.head_off);
	c->tail = (_Atomic uint32_t *)(c->region + c->layout.tail_off);
	c->queue = (struct cuflag_arm *)(c->region + c->layout.queue_off);
	c->flags = (volatile uint32_t *)(c->region + c->layout.flags_off);
	c->tail_local = atomic_load_explicit(c->tail, memory_order_relaxed);
	return 0;
}

static int map_daemon_page(struct cuflag_client *c, int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < sizeof(struct cuflag_daemon_page))
		return -EBADMSG;
	c->dpage_size = (size_t)st.st_size;
	c->dpage = mmap(NULL, c->dpage_size, PROT_READ, MAP_SHARED, fd, 0);
	if (c->dpage == MAP_FAILED) {
		c->dpage = NULL;
		return -errno;
	}
	if (c->dpage->magic != CUFLAG_DPAGE_MAGIC || c->dpage->version != CUFLAG_PROTO_VERSION)
		return -EBADMSG;
	return 0;
}

static void client_free(struct cuflag_client *c)
{
	cuflag__ipc_unmap(c);
	if (c->region)
		munmap(c->region, c->layout.size);
	if (c->dpage)
		munmap((void *)c->dpage, c->dpage_size);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	if (c->sock >= 0)
		close(c->sock);
	pthread_mutex_destroy(&c->req_lock);
	pthread_mutex_destroy(&c->arm_lock);
	pthread_mutex_destroy(&c->slots_lock);
	free(c);
}

CUFLAG_EXPORT int cuflag_connect(const char *socket_path, cuflag_client **out)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = REPLY_TIMEOUT_S };
	struct cuflag_msg_hello hello = { .version_min = 1, .version_max = CUFLAG_PROTO_VERSION };
	struct cuflag_msg_hello_reply r;
	uint8_t reply[CUFLAG_MSG_MAX];
	struct cuflag_client *c;
	int fds[4] = { -1, -1, -1, -1 };
	unsigned nfds = 0;
	size_t rlen = 0;
	int rc;

	if (!out)
		return -EINVAL;
	if (!socket_path)
		socket_path = getenv(CUFLAG_SOCKET_ENV);
	if (!socket_path || !socket_path[0])
		socket_path = CUFLAG_DEFAULT_SOCKET;
	if (strlen(socket_path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, socket_path);

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->wake_fd = -1;
	pthread_mutex_init(&c->req_lock, NULL);
	pthread_mutex_init(&c->arm_lock, NULL);
	pthread_mutex_init(&c->slots_lock, NULL);
	c->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->sock < 0) {
		rc = -errno;
		goto fail;
	}
	/* A daemon that stops answering turns into -ETIMEDOUT, not a hang. */
	setsockopt(c->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(c->sock, (struct sockaddr *)&a, sizeof(a)) < 0) {
		rc = -errno;
		goto fail;
	}
	rc = cuflag__request(c, CUFLAG_MSG_HELLO, &hello, sizeof(hello), NULL, 0, reply, &rlen,
			     fds, 4, &nfds);
	if (rc)
		goto fail;
	memcpy(&r, reply + sizeof(struct cuflag_msg_hdr), sizeof(r));
	if (r.version != CUFLAG_PROTO_VERSION ||
	    (r.slab != CUFLAG_SLAB_MEMFD && r.slab != CUFLAG_SLAB_CUDA_IPC)) {
		rc = -EPROTONOSUPPORT;
		goto fail;
	}
	c->epoch = r.epoch;
	c->slab = (int)r.slab;
	rc = map_region(c, fds[0], &r);
	if (!rc)
		rc = map_daemon_page(c, fds[1]);
	/* cuda-ipc: the flags live in a CUDA allocation, not in the region. */
	if (!rc && c->slab == CUFLAG_SLAB_CUDA_IPC)
		rc = cuflag__ipc_map(c, fds[3], r.flags_size);
	if (rc)
		goto fail;
	c->wake_fd = fds[2];
	fds[2] = -1;
	cuflag_close_fds(fds, nfds); /* the mappings keep the memory */
	*out = c;
	return 0;
fail:
	cuflag_close_fds(fds, nfds);
	client_free(c);
	return rc;
}

CUFLAG_EXPORT void cuflag_disconnect(cuflag_client *c)
{
	if (!c)
		return;
	/* Hanging up frees every slot in the daemon: no request per slot. */
	while (c->slots) {
		struct cuflag_slot *s = c->slots;
		c->slots = s->next_slot;
		cuflag__slot_free(s);
	}
	if (c->cuda_fini)
		c->cuda_fini(c);
	client_free(c);
}
