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
#include <unistd.h>

#include "client-private.h"
#include "fd-util.h"
#include "fdpass.h"
#include "unix-socket.h"

/* How long a request may wait for its reply: a daemon that stops answering
 * turns into -ETIMEDOUT, not a hang. */
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

/* One request and its reply on sock; the caller holds c->req_lock. */
static int request_locked(struct cuflag_client *c, int sock, struct cuflag_call *call)
{
	int rc;

	call->id = ++c->next_req;
	rc = cuflag_call_send(sock, call);
	if (rc)
		return rc == -ECONNRESET ? -EPIPE : rc;
	return cuflag_call_recv(sock, call);
}

int cuflag__request(struct cuflag_client *c, struct cuflag_call *call)
{
	int rc;

	pthread_mutex_lock(&c->req_lock);
	rc = request_locked(c, c->sock, call);
	pthread_mutex_unlock(&c->req_lock);
	return rc;
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
		.tail_off = r->tail_off, .queue_off = r->queue_off, .state_off = r->state_off,
		.flags_off = r->flags_off,
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

static int map_daemon_page(int fd, const struct cuflag_daemon_page **out, size_t *size)
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
	c->wake_fd = safe_close(c->wake_fd);
	c->region_fd = safe_close(c->region_fd);
	c->sock = safe_close(c->sock);
	pthread_mutex_destroy(&c->req_lock);
	pthread_mutex_destroy(&c->arm_lock);
	pthread_mutex_destroy(&c->slots_lock);
	free(c);
}

CUFLAG_EXPORT int cuflag_connect(const char *socket_path, cuflag_client **out)
{
	struct cuflag_msg_hello hello = { .version_min = 1, .version_max = CUFLAG_PROTO_VERSION };
	struct cuflag_msg_hello_reply r;
	uint8_t reply[CUFLAG_MSG_MAX];
	struct cuflag_client *c;
	int fds[4] = { -1, -1, -1, -1 };
	struct cuflag_call call = { .type = CUFLAG_MSG_HELLO, .body = &hello, .blen = sizeof(hello),
				    .reply = reply, .reply_fds = fds, .max_fds = 4 };
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
	strcpy(c->path, socket_path);
	pthread_mutex_init(&c->req_lock, NULL);
	pthread_mutex_init(&c->arm_lock, NULL);
	pthread_mutex_init(&c->slots_lock, NULL);
	c->sock = cuflag_unix_connect(socket_path, REPLY_TIMEOUT_S);
	if (c->sock < 0) {
		rc = c->sock;
		goto fail;
	}
	rc = cuflag__request(c, &call);
	if (rc)
		goto fail;
	memcpy(&r, cuflag_call_body(&call), sizeof(r));
	if (r.version != CUFLAG_PROTO_VERSION ||
	    (r.slab != CUFLAG_SLAB_MEMFD && r.slab != CUFLAG_SLAB_CUDA_IPC)) {
		rc = -EPROTONOSUPPORT;
		goto fail;
	}
	c->epoch = r.epoch;
	c->slab = (int)r.slab;
	rc = map_region(c, fds[0], &r);
	if (!rc)
		rc = map_daemon_page(fds[1], &c->dpage, &c->dpage_size);
	/* cuda-ipc: the flags live in a CUDA allocation, not in the region. */
	if (!rc && c->slab == CUFLAG_SLAB_CUDA_IPC)
		rc = cuflag__ipc_map(c, fds[3], r.flags_size);
	if (rc)
		goto fail;
	c->wake_fd = fds[2];
	c->region_fd = fds[0];
	fds[0] = fds[2] = -1;
	cuflag_close_fds(fds, call.reply_nfds); /* the mappings keep the memory */
	*out = c;
	return 0;
fail:
	cuflag_close_fds(fds, call.reply_nfds);
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
	if (c->cuda_fini && !cuflag__forked(c))
		c->cuda_fini(c);
	client_free(c);
}

/* The layout a daemon offers is the one this client's region has. */
static int same_layout(const struct cuflag_region_layout *l, const struct cuflag_msg_hello_reply *r)
{
	return l->nslots == r->nslots && l->queue_cap == r->queue_cap &&
	       l->head_off == r->head_off && l->tail_off == r->tail_off &&
	       l->queue_off == r->queue_off && l->state_off == r->state_off &&
	       l->flags_off == r->flags_off && l->size == r->region_size;
}

/* Hand every slot's id and eventfd to the new daemon, 64 a message. */
static int adopt_slots(struct cuflag_client *c, int sock)
{
	struct cuflag_msg_adopt m;
	int efds[CUFLAG_BATCH_MAX];
	uint8_t reply[CUFLAG_MSG_MAX];
	struct cuflag_call call = { .type = CUFLAG_MSG_ADOPT, .body = &m, .fds = efds,
				    .reply = reply };
	int rc = 0;

	pthread_mutex_lock(&c->slots_lock);
	for (struct cuflag_slot *s = c->slots; s && !rc;) {
		m.count = 0;
		m.reserved = 0;
		for (; s && m.count < CUFLAG_BATCH_MAX; s = s->next_slot) {
			m.ids[m.count] = s->id;
			efds[m.count++] = s->efd;
		}
		call.blen = (uint32_t)cuflag_id_batch_len(m.count);
		call.nfds = m.count;
		rc = request_locked(c, sock, &call);
	}
	pthread_mutex_unlock(&c->slots_lock);
	return rc;
}

CUFLAG_EXPORT int cuflag_reconnect(cuflag_client *c)
{
	struct cuflag_msg_resume m = { .version_min = 1, .version_max = CUFLAG_PROTO_VERSION };
	struct cuflag_msg_hello_reply r;
	const struct cuflag_daemon_page *dp = NULL;
	uint8_t reply[CUFLAG_MSG_MAX];
	int give[2], fd = -1, sock, rc;
	size_t dp_size = 0;
	struct cuflag_call call = { .type = CUFLAG_MSG_RESUME, .body = &m, .blen = sizeof(m),
				    .fds = give, .nfds = 2, .reply = reply, .reply_fds = &fd,
				    .max_fds = 1 };

	if (!c)
		return -EINVAL;
	if (cuflag__forked(c))
		return -ECHILD;
	if (c->slab != CUFLAG_SLAB_MEMFD || c->region_fd < 0)
		return -EOPNOTSUPP;
	sock = cuflag_unix_connect(c->path, REPLY_TIMEOUT_S);
	if (sock < 0)
		return sock;
	m.epoch = c->epoch;
	pthread_mutex_lock(&c->slots_lock);
	for (struct cuflag_slot *s = c->slots; s; s = s->next_slot)
		m.slots++;
	pthread_mutex_unlock(&c->slots_lock);
	give[0] = c->region_fd;
	give[1] = c->wake_fd;
	pthread_mutex_lock(&c->req_lock);
	rc = request_locked(c, sock, &call);
	if (rc)
		goto out;
	memcpy(&r, cuflag_call_body(&call), sizeof(r));
	if (!same_layout(&c->layout, &r) || r.slab != CUFLAG_SLAB_MEMFD) {
		rc = -EPROTO;
		goto out;
	}
	rc = map_daemon_page(fd, &dp, &dp_size);
	if (!rc)
		rc = adopt_slots(c, sock);
	if (rc)
		goto out;
	/* From here on the new daemon serves us. */
	close(c->sock);
	c->sock = sock;
	sock = -1;
	munmap((void *)c->dpage, c->dpage_size);
	c->dpage = dp;
	c->dpage_size = dp_size;
	dp = NULL;
	c->epoch = r.epoch;
out:
	pthread_mutex_unlock(&c->req_lock);
	if (dp)
		munmap((void *)dp, dp_size);
	safe_close(fd);
	safe_close(sock);
	if (!rc)
		cuflag__forget_waits(c); /* their epolls watch the old connection */
	return rc;
}
