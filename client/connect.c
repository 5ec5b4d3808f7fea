/* SPDX-License-Identifier: MIT */
/* Connecting to cuflagd, mapping what it shares, requests, disconnecting. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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
	return __atomic_load_n(&c->epoch, __ATOMIC_RELAXED);
}

int cuflag__request_on(struct cuflag_client *c, int sock, uint16_t type, const void *body,
		       uint32_t blen, const int *send_fds, unsigned send_nfds, void *reply,
		       size_t *rlen, int *fds, unsigned max_fds, unsigned *nfds)
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
	id = ++c->next_req;
	cuflag_hdr_init(&h, type, (uint32_t)sizeof(h) + blen, id, 0, (uint16_t)send_nfds);
	memcpy(buf, &h, sizeof(h));
	if (blen)
		memcpy(buf + sizeof(h), body, blen);
	rc = cuflag_send_msg(sock, buf, sizeof(h) + blen, send_fds, send_nfds, 0);
	if (rc)
		return rc == -ECONNRESET ? -EPIPE : rc;
	for (;;) {
		n = cuflag_recv_msg(sock, reply, CUFLAG_MSG_MAX, fds, max_fds, nfds, 0);
		if (n < (ssize_t)sizeof(h))
			break;
		memcpy(&h, reply, sizeof(h));
		/* The daemon refused the connection before any request (request
		 * id 0): its status is the answer. */
		if (h.req_id == 0 && h.status < 0) {
			cuflag_close_fds(fds, *nfds);
			*nfds = 0;
			return h.status;
		}
		/* A late reply to an earlier request that timed out: drop it. */
		if (h.req_id == id || (int32_t)(h.req_id - id) > 0)
			break;
		cuflag_close_fds(fds, *nfds);
		*nfds = 0;
	}
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

int cuflag__request(struct cuflag_client *c, uint16_t type, const void *body, uint32_t blen,
		    const int *send_fds, unsigned send_nfds, void *reply, size_t *rlen, int *fds,
		    unsigned max_fds, unsigned *nfds)
{
	for (int tries = 0;; tries++) {
		unsigned gen = atomic_load(&c->conn_gen);
		int rc;

		pthread_mutex_lock(&c->req_lock);
		rc = cuflag__request_on(c, c->sock, type, body, blen, send_fds, send_nfds, reply,
					rlen, fds, max_fds, nfds);
		pthread_mutex_unlock(&c->req_lock);
		/* The daemon went away: carry on with the one that listens now. */
		if (!cuflag__gone_error(rc) || tries || cuflag__resume(c, gen, 1))
			return rc;
	}
}

int cuflag__daemon_gone(struct cuflag_client *c)
{
	struct pollfd p = { .fd = c->sock, .events = POLLRDHUP };
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/*
 * Make the region the daemon's HELLO reply describes: a memfd with every
 * page allocated by us (so its memory is charged to this process, not to the
 * daemon), the header written, sealed against shrink, grow and further
 * seals, and mapped.
 */
static int make_region(struct cuflag_client *c, const struct cuflag_msg_hello_reply *r)
{
	long page = sysconf(_SC_PAGESIZE);
	struct cuflag_region_hdr hdr;
	const char *why;
	int fd, rc;

	c->layout = (struct cuflag_region_layout){
		.nslots = r->nslots, .queue_cap = r->queue_cap, .head_off = r->head_off,
		.tail_off = r->tail_off, .queue_off = r->queue_off, .state_off = r->state_off,
		.flags_off = r->flags_off, .size = r->region_size,
	};
	if (cuflag_region_layout_check(&c->layout, r->region_size, (uint32_t)page, &why))
		return -EBADMSG;
	fd = memfd_create("cuflag-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	c->region_fd = fd;
	if (ftruncate(fd, (off_t)c->layout.size) < 0 ||
	    fallocate(fd, 0, 0, (off_t)c->layout.size) < 0)
		return -errno;
	c->region = mmap(NULL, c->layout.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (c->region == MAP_FAILED) {
		c->region = NULL;
		return -errno;
	}
	cuflag_region_hdr_make(&hdr, &c->layout);
	memcpy(c->region, &hdr, sizeof(hdr));
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = -errno;
		return rc;
	}
	c->head = (_Atomic uint32_t *)(c->region + c->layout.head_off);
	c->tail = (_Atomic uint32_t *)(c->region + c->layout.tail_off);
	c->queue = (struct cuflag_arm *)(c->region + c->layout.queue_off);
	c->flags = (volatile uint32_t *)(c->region + c->layout.flags_off);
	c->states = (volatile struct cuflag_slot_state *)(c->region + c->layout.state_off);
	c->tail_local = 0;
	return 0;
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

int cuflag__hello(struct cuflag_client *c, int sock, struct cuflag_msg_hello_reply *r,
		  const struct cuflag_daemon_page **dp, size_t *dp_size)
{
	struct cuflag_msg_hello hello = { .version_min = CUFLAG_PROTO_VERSION,
					  .version_max = CUFLAG_PROTO_VERSION };
	uint8_t reply[CUFLAG_MSG_MAX];
	size_t rlen = 0;
	unsigned nfds = 0;
	int fd = -1, rc;

	rc = cuflag__request_on(c, sock, CUFLAG_MSG_HELLO, &hello, sizeof(hello), NULL, 0, reply,
				&rlen, &fd, 1, &nfds);
	if (rc)
		return rc;
	memcpy(r, reply + sizeof(struct cuflag_msg_hdr), sizeof(*r));
	if (r->version != CUFLAG_PROTO_VERSION ||
	    (r->slab != CUFLAG_SLAB_MEMFD && r->slab != CUFLAG_SLAB_CUDA_IPC))
		rc = -EPROTONOSUPPORT;
	else
		rc = cuflag__map_daemon_page(fd, dp, dp_size);
	close(fd);
	return rc;
}

int cuflag__open_socket(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = REPLY_TIMEOUT_S };
	int fd, rc;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A daemon that stops answering turns into -ETIMEDOUT, not a hang. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

/* Counts the forks this process descends from (see cuflag__forked). */
static _Atomic unsigned fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
	atomic_fetch_add_explicit(&fork_gen, 1, memory_order_relaxed);
}

static void watch_forks(void)
{
	/* Cannot fail for want of memory in glibc; if it did, forks go unseen. */
	(void)pthread_atfork(NULL, NULL, on_fork_child);
}

unsigned cuflag__fork_gen(void)
{
	return atomic_load_explicit(&fork_gen, memory_order_relaxed);
}

static void client_free(struct cuflag_client *c)
{
	/* A child of fork has no CUDA state of its own to undo. */
	if (!cuflag__forked(c))
		cuflag__ipc_unmap(c);
	if (c->region)
		munmap(c->region, c->layout.size);
	if (c->dpage)
		munmap((void *)c->dpage, c->dpage_size);
	while (c->retired) {
		struct retired_page *r = c->retired;
		c->retired = r->next;
		munmap((void *)r->page, r->size);
		free(r);
	}
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	if (c->region_fd >= 0)
		close(c->region_fd);
	if (c->sock >= 0)
		close(c->sock);
	pthread_mutex_destroy(&c->req_lock);
	pthread_mutex_destroy(&c->arm_lock);
	pthread_mutex_destroy(&c->slots_lock);
	pthread_mutex_destroy(&c->resume_lock);
	free(c);
}

/* ATTACH a new region: hand the daemon our region and wake eventfd. */
static int attach_new(struct cuflag_client *c, uint64_t flags_size)
{
	struct cuflag_msg_attach m = { 0 };
	uint8_t reply[CUFLAG_MSG_MAX];
	int give[2] = { c->region_fd, c->wake_fd }, fd = -1, rc;
	unsigned nfds = 0;
	size_t rlen = 0;

	rc = cuflag__request_on(c, c->sock, CUFLAG_MSG_ATTACH, &m, sizeof(m), give, 2, reply,
				&rlen, &fd, 1, &nfds);
	if (rc)
		return rc;
	/* cuda-ipc: the flags live in a CUDA allocation, not in the region. */
	if (c->slab == CUFLAG_SLAB_CUDA_IPC)
		rc = nfds == 1 ? cuflag__ipc_map(c, fd, flags_size) : -EBADMSG;
	if (nfds)
		close(fd);
	return rc;
}

CUFLAG_EXPORT int cuflag_connect(const char *socket_path, cuflag_client **out)
{
	struct cuflag_msg_hello_reply r;
	struct cuflag_client *c;
	int rc;

	if (!out)
		return -EINVAL;
	if (!socket_path)
		socket_path = getenv(CUFLAG_SOCKET_ENV);
	if (!socket_path || !socket_path[0])
		socket_path = CUFLAG_DEFAULT_SOCKET;
	if (strlen(socket_path) >= sizeof(c->path))
		return -ENAMETOOLONG;

	pthread_once(&fork_once, watch_forks);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fork_gen = cuflag__fork_gen();
	c->wake_fd = c->region_fd = -1;
	c->resume_timeout_ms = CUFLAG_RESUME_TIMEOUT_MS;
	strcpy(c->path, socket_path);
	pthread_mutex_init(&c->req_lock, NULL);
	pthread_mutex_init(&c->arm_lock, NULL);
	pthread_mutex_init(&c->slots_lock, NULL);
	pthread_mutex_init(&c->resume_lock, NULL);
	c->sock = cuflag__open_socket(socket_path);
	if (c->sock < 0) {
		rc = c->sock;
		goto fail;
	}
	rc = cuflag__hello(c, c->sock, &r, &c->dpage, &c->dpage_size);
	if (rc)
		goto fail;
	c->epoch = r.epoch;
	c->slab = (int)r.slab;
	rc = make_region(c, &r);
	if (rc)
		goto fail;
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake_fd < 0) {
		rc = -errno;
		goto fail;
	}
	rc = attach_new(c, r.flags_size);
	if (rc)
		goto fail;
	*out = c;
	return 0;
fail:
	client_free(c);
	return rc;
}

CUFLAG_EXPORT int cuflag_client_set_resume_timeout(cuflag_client *c, int timeout_ms)
{
	if (!c || timeout_ms < -1)
		return -EINVAL;
	atomic_store(&c->resume_timeout_ms, timeout_ms);
	return 0;
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
	if (c->cuda_fini && !cuflag__forked(c))
		c->cuda_fini(c);
	client_free(c);
}

