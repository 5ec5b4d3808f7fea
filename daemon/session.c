/* SPDX-License-Identifier: MIT */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdpass.h"
#include "proto.h"
#include "server.h"
#include "timeline.h"

/* A freed slot's next timeline starts this far past its last armed value,
 * so a write from the old timeline that lands late reads as "behind". */
#define RESTART_GAP (1u << 30)

/* Requests served per readiness, so one busy client cannot starve the loop. */
#define MAX_MSGS_PER_WAKE 64

#define slog(prio, s, fmt, ...)                                                            \
	cuflagd_log(prio, "client %u pid=%d uid=%u: " fmt, (s)->id, (int)(s)->pid,            \
		    (unsigned)(s)->uid, ##__VA_ARGS__)

void session_release(struct session *s)
{
	if (s->slot_efd)
		for (uint32_t i = 0; i < s->nslots; i++)
			if (s->slot_efd[i] >= 0) {
				close(s->slot_efd[i]);
				s->slot_efd[i] = -1;
			}
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	s->wake_fd = -1;
	region_destroy(&s->region);
	slab_cuda_free(&s->ipc);
}

void session_free_graveyard(struct server *srv)
{
	while (srv->graveyard) {
		struct session *s = srv->graveyard;
		srv->graveyard = s->next;
		session_free(s);
	}
}

struct session *session_new(struct server *srv, int fd)
{
	struct session *s = calloc(1, sizeof(*s));
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!s)
		return NULL;
	s->ep_kind = EP_CLIENT;
	s->fd = fd;
	s->wake_fd = -1;
	s->region.fd = -1;
	s->ipc.fd = -1;
	s->id = ++srv->next_id;
	s->connected_ms = cuflagd_now_ms();
	s->rl = (struct cuflagd_ratelimit){ .interval_ms = 1000, .burst = 20 };
	s->tokens = srv->cfg->msg_rate;
	s->tokens_ms = s->connected_ms;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		s->pid = cred.pid;
		s->uid = cred.uid;
		s->gid = cred.gid;
	} else {
		s->pid = -1;
		s->uid = s->gid = (uid_t)-1;
	}
	return s;
}

/* Send an error reply (status < 0) with a reason. */
static int reply_error(struct server *srv, struct session *s, uint16_t type, uint32_t req_id,
		       int err, const char *reason)
{
	struct cuflag_msg_error e;
	size_t n = strlen(reason);

	(void)srv;
	if (n >= sizeof(e.reason))
		n = sizeof(e.reason) - 1;
	memcpy(e.reason, reason, n);
	e.reason[n] = 0;
	return server_reply(s, type, req_id, err, &e, (uint32_t)n + 1, NULL, 0);
}

/* A request refused for a limit: error reply, one log line, the client stays. */
static int refuse(struct server *srv, struct session *s, const struct cuflag_msg_hdr *h, int err,
		  const char *why)
{
	if (cuflagd_ratelimit_ok(&s->rl))
		slog(LOG_WARNING, s, "request %u refused: %s (%s)", h->type, why, strerror(-err));
	return reply_error(srv, s, h->type, h->req_id, err, why);
}

static void free_slots(struct session *s)
{
	free(s->slot_state);
	free(s->slot_efd);
	free(s->next_start);
	free(s->free_stack);
	free(s->scan);
	s->slot_state = NULL;
	s->slot_efd = NULL;
	s->next_start = NULL;
	s->free_stack = NULL;
	s->scan = NULL;
	s->nslots = s->nfree = 0;
}

void session_free(struct session *s)
{
	free(s->parked);
	free_slots(s);
	free(s);
}

static void unlink_session(struct server *srv, struct session *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		srv->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
}

void session_drop(struct server *srv, struct session *s, int err, const char *why)
{
	if (s->dead)
		return;
	if (why) {
		srv->dropped++;
		if (cuflagd_ratelimit_ok(&srv->rl))
			slog(LOG_WARNING, s, "dropped: %s%s%s", why, err ? ": " : "",
			     err ? strerror(-err) : "");
	} else {
		slog(LOG_DEBUG, s, "hung up");
	}
	s->dead = 1;
	if (s->fd >= 0) {
		epoll_ctl(srv->ep, EPOLL_CTL_DEL, s->fd, NULL);
		close(s->fd);
		s->fd = -1;
		srv->nconn--;
	}
	if (!s->scan) {
		unlink_session(srv, s);
		s->next = srv->graveyard;
		srv->graveyard = s;
		return;
	}
	/* Adopted slots went to the scanner before the held-back ADD_SESSION:
	 * send that first, so the DEL_SESSION below finds the usual state. */
	if (s->adopt_cmd) {
		s->scan->head_local = atomic_load_explicit(s->scan->head, memory_order_relaxed);
		scanner_submit(srv->sc, s->adopt_cmd);
		s->adopt_cmd = NULL;
	}
	/* The scanner may be reading the region right now: it lets go first. */
	struct scan_cmd *c = calloc(1, sizeof(*c));
	if (!c) {
		/* Without a command the region must stay; it is reclaimed at exit. */
		slog(LOG_ERR, s, "out of memory while dropping; region kept until exit");
		return;
	}
	c->op = SCAN_DEL_SESSION;
	c->sess = s->scan;
	c->owner = s;
	scanner_submit(srv->sc, c);
}

/* ---------------------------------------------------------------- */
/* Requests                                                          */
/* ---------------------------------------------------------------- */

static int on_adopt(struct server *srv, struct session *s, const struct cuflag_msg_hdr *h,
		    const uint32_t *ids, uint32_t count, int *fds);

/* Whether fd is an eventfd (and not, say, a pipe that could block us). */
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

/*
 * HELLO (adopt == NULL): a new region and wake eventfd for the client.
 * RESUME (adopt = { region memfd, wake eventfd } the client kept from a
 * daemon that went away): check them and take them over; the client then
 * names its slots with ADOPT.
 */
static int on_hello(struct server *srv, struct session *s, const struct cuflag_msg_hdr *h,
		    uint32_t version_min, uint32_t version_max, const int *adopt,
		    uint32_t adopt_slots)
{
	const struct cuflagd_config *cfg = srv->cfg;
	struct cuflag_msg_hello_reply r;
	uint32_t same_uid = 0;
	int fds[4], rc;

	if (s->hello_done)
		return -EPROTO;
	if (version_min > CUFLAG_PROTO_VERSION || version_max < CUFLAG_PROTO_VERSION) {
		reply_error(srv, s, h->type, h->req_id, -EPROTONOSUPPORT,
			    "no protocol version in common");
		return -EPROTONOSUPPORT;
	}
	if (srv->nregions >= cfg->max_clients)
		return refuse(srv, s, h, -EUSERS, "max-clients reached");
	for (struct session *o = srv->sessions; o; o = o->next)
		if (o->scan && !o->dead && o->uid == s->uid)
			same_uid++;
	if (same_uid >= cfg->max_clients_per_uid)
		return refuse(srv, s, h, -EUSERS, "max-clients-per-uid reached");
	if (penalty_left_ms(&srv->penalties, s->uid, cuflagd_now_ms()))
		return refuse(srv, s, h, -EBUSY,
			      "this user's clients are refused a while: one made a write block");
	if (adopt && cfg->slab != CUFLAG_SLAB_MEMFD)
		return refuse(srv, s, h, -EOPNOTSUPP, "RESUME needs --slab memfd");
	if (adopt && !is_eventfd(adopt[1]))
		return refuse(srv, s, h, -EBADF, "RESUME: the wake fd is not an eventfd");
	if (adopt && adopt_slots > cfg->slots_per_client)
		return refuse(srv, s, h, -EINVAL, "RESUME: more slots than slots-per-client");

	s->nslots = cfg->slots_per_client;
	s->slot_state = calloc(s->nslots, 1);
	s->slot_efd = malloc(sizeof(int) * s->nslots);
	s->next_start = calloc(s->nslots, sizeof(uint32_t));
	s->free_stack = malloc(sizeof(uint32_t) * s->nslots);
	s->scan = calloc(1, sizeof(*s->scan) + sizeof(struct scan_slot) * s->nslots);
	if (!s->slot_state || !s->slot_efd || !s->next_start || !s->free_stack || !s->scan)
		goto nomem;
	/* Low ids first: popped from the top of the stack. */
	for (uint32_t i = 0; i < s->nslots; i++) {
		s->slot_efd[i] = -1;
		s->free_stack[i] = s->nslots - 1 - i;
	}
	s->nfree = s->nslots;
	if (adopt) {
		const char *why = "cannot adopt the region";
		rc = region_adopt(&s->region, adopt[0], s->nslots, cfg->queue_size, &why);
		if (rc) {
			free_slots(s);
			return refuse(srv, s, h, rc, why);
		}
	} else {
		rc = region_create(&s->region, s->nslots, cfg->queue_size);
		if (rc) {
			slog(LOG_ERR, s, "cannot create a region: %s", strerror(-rc));
			free_slots(s);
			return reply_error(srv, s, h->type, h->req_id, rc, "cannot create a region");
		}
	}
	s->flags = (volatile uint32_t *)(s->region.map + s->region.layout.flags_off);
	if (cfg->slab == CUFLAG_SLAB_CUDA_IPC) {
		rc = slab_cuda_alloc((uint64_t)s->nslots * sizeof(uint32_t), &s->ipc);
		if (rc)
			goto undo;
		s->flags = (volatile uint32_t *)(uintptr_t)s->ipc.va;
	}
	if (adopt) {
		/* The scanner reads it when it wakes: never let it block. */
		int fl = fcntl(adopt[1], F_GETFL);
		s->wake_fd = fcntl(adopt[1], F_DUPFD_CLOEXEC, 0);
		if (s->wake_fd < 0 || fl < 0 || fcntl(s->wake_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			rc = -errno;
			goto undo;
		}
	} else {
		s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	}
	if (s->wake_fd < 0) {
		rc = -errno;
		goto undo;
	}

	struct scan_session *ss = s->scan;
	ss->layout = s->region.layout;
	ss->base = s->region.map;
	ss->head = (_Atomic uint32_t *)(ss->base + ss->layout.head_off);
	ss->tail = (_Atomic uint32_t *)(ss->base + ss->layout.tail_off);
	ss->queue = (struct cuflag_arm *)(ss->base + ss->layout.queue_off);
	ss->flags = s->flags;
	ss->states = (volatile struct cuflag_slot_state *)(s->region.map +
							   s->region.layout.state_off);
	ss->wake_fd = s->wake_fd;
	ss->slots = (struct scan_slot *)(ss + 1);
	for (uint32_t i = 0; i < s->nslots; i++) {
		ss->slots[i].pend_idx = SCAN_NOT_PENDING;
		ss->slots[i].efd = -1;
		ss->slots[i].sess = ss;
	}

	memset(&r, 0, sizeof(r));
	r.version = CUFLAG_PROTO_VERSION;
	r.slab = (uint32_t)cfg->slab;
	r.flags_size = s->ipc.size;
	r.epoch = srv->epoch;
	r.region_size = s->region.layout.size;
	r.nslots = s->region.layout.nslots;
	r.queue_cap = s->region.layout.queue_cap;
	r.head_off = s->region.layout.head_off;
	r.tail_off = s->region.layout.tail_off;
	r.queue_off = s->region.layout.queue_off;
	r.state_off = s->region.layout.state_off;
	r.flags_off = s->region.layout.flags_off;
	r.page_size = (uint32_t)srv->dp.size;
	r.client_id = s->id;
	fds[0] = s->region.fd;
	fds[1] = srv->dp.fd;
	fds[2] = s->wake_fd;
	fds[3] = s->ipc.fd;

	/* The scanner learns of the region before the client can arm in it;
	 * an adopted one, once its slots are back (see on_adopt). */
	struct scan_cmd *c = calloc(1, sizeof(*c));
	if (!c)
		goto nomem_undo;
	c->op = SCAN_ADD_SESSION;
	c->sess = ss;
	c->owner = s;
	s->adopt_left = adopt ? adopt_slots : 0;
	if (adopt)
		ss->head_local = atomic_load_explicit(ss->head, memory_order_relaxed);
	if (s->adopt_left)
		s->adopt_cmd = c;
	else
		scanner_submit(srv->sc, c);
	s->hello_done = 1;
	srv->nregions++;
	if (adopt)
		rc = server_reply(s, h->type, h->req_id, 0, &r, sizeof(r), &srv->dp.fd, 1);
	else
		rc = server_reply(s, h->type, h->req_id, 0, &r, sizeof(r), fds,
				  cfg->slab == CUFLAG_SLAB_CUDA_IPC ? 4 : 3);
	/* The client holds the region now; the daemon keeps only its mapping. */
	close(s->region.fd);
	s->region.fd = -1;
	if (s->ipc.fd >= 0) {
		close(s->ipc.fd);
		s->ipc.fd = -1;
	}
	if (rc)
		return rc;
	slog(LOG_INFO, s, "%s: %u slots, region %llu bytes", adopt ? "resumed" : "connected",
	     s->nslots, (unsigned long long)s->region.layout.size);
	return 0;

nomem_undo:
	rc = -ENOMEM;
undo:
	if (s->wake_fd >= 0) {
		close(s->wake_fd);
		s->wake_fd = -1;
	}
	region_destroy(&s->region);
	slab_cuda_free(&s->ipc);
	free_slots(s);
	slog(LOG_ERR, s, "cannot set up the client: %s", strerror(-rc));
	return reply_error(srv, s, h->type, h->req_id, rc, "cannot set up the client");
nomem:
	free_slots(s);
	return refuse(srv, s, h, -ENOMEM, "out of memory");
}

/* How long an ALLOC may wait for freed slots before it is refused. */
#define PARK_MAX_MS 1000

/* Stop or resume reading requests from the client. */
static void set_reading(struct server *srv, struct session *s, int on)
{
	struct epoll_event ev = { .events = on ? EPOLLIN : 0, .data.ptr = s };
	if (s->fd >= 0 && epoll_ctl(srv->ep, EPOLL_CTL_MOD, s->fd, &ev) < 0)
		slog(LOG_ERR, s, "epoll_ctl: %s", strerror(errno));
}

static int on_alloc(struct server *srv, struct session *s, const struct cuflag_msg_hdr *h,
		    const struct cuflag_msg_alloc *m, int may_park)
{
	struct cuflag_msg_alloc_reply r;
	int fds[CUFLAG_BATCH_MAX];
	struct scan_cmd *cmds[CUFLAG_BATCH_MAX];
	uint32_t n = m->count, i;
	int rc;

	if (m->count > s->nfree) {
		if (may_park && m->count <= s->nfree + s->nretiring) {
			struct cuflag_msg_hdr ph = *h;
			s->parked = malloc(sizeof(ph) + sizeof(*m));
			if (s->parked) {
				memcpy(s->parked, &ph, sizeof(ph));
				memcpy(s->parked + sizeof(ph), m, sizeof(*m));
				s->parked_ms = cuflagd_now_ms();
				set_reading(srv, s, 0);
				return 0;
			}
		}
		return refuse(srv, s, h, -ENOSPC, "slots-per-client reached");
	}
	memset(&r, 0, sizeof(r));
	for (i = 0; i < n; i++) {
		fds[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		/* Keep a reserve below the limit (fds come lowest first): a BIND,
		 * an ADOPT or a new connection must still find room. */
		if (fds[i] >= srv->fd_reserve_from) {
			close(fds[i]);
			fds[i] = -1;
			errno = EMFILE;
		}
		cmds[i] = calloc(1, sizeof(*cmds[i]));
		if (fds[i] < 0 || !cmds[i]) {
			rc = fds[i] < 0 ? -errno : -ENOMEM;
			if (fds[i] >= 0)
				close(fds[i]);
			free(cmds[i]);
			while (i--) {
				close(fds[i]);
				free(cmds[i]);
			}
			slog(LOG_ERR, s, "cannot allocate slots: %s", strerror(-rc));
			return reply_error(srv, s, h->type, h->req_id, rc,
					   rc == -EMFILE || rc == -ENFILE ? "daemon out of fds"
									  : "out of memory");
		}
	}
	for (i = 0; i < n; i++) {
		uint32_t id = s->free_stack[--s->nfree];
		uint32_t start = s->next_start[id];
		s->slot_state[id] = SLOT_LIVE;
		s->slot_efd[id] = fds[i];
		s->nlive++;
		/* The starting value is written here and recorded by the scanner:
		 * never read back from the flag, so an early device write counts. */
		atomic_store_explicit((_Atomic uint32_t *)&s->flags[id], start,
				      memory_order_release);
		cmds[i]->op = SCAN_ADD_SLOT;
		cmds[i]->sess = s->scan;
		cmds[i]->slot = id;
		cmds[i]->start = start;
		cmds[i]->armed = start;
		cmds[i]->efd = fds[i];
		cmds[i]->owner = s;
		scanner_submit(srv->sc, cmds[i]);
		r.grants[i].id = id;
		r.grants[i].start = start;
	}
	r.count = n;
	return server_reply(s, h->type, h->req_id, 0, &r,
			    (uint32_t)(8 + n * sizeof(struct cuflag_slot_grant)), fds, n);
}

/* n zeroed commands, all or none: 0 or -ENOMEM. */
static int alloc_cmds(struct scan_cmd **cmds, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		cmds[i] = calloc(1, sizeof(*cmds[i]));
		if (!cmds[i]) {
			while (i--)
				free(cmds[i]);
			return -ENOMEM;
		}
	}
	return 0;
}

/* Take id out of the free stack (ADOPT names ids in no particular order). */
static void unfree(struct session *s, uint32_t id)
{
	for (uint32_t k = 0; k < s->nfree; k++)
		if (s->free_stack[k] == id) {
			s->free_stack[k] = s->free_stack[--s->nfree];
			return;
		}
}

/*
 * After RESUME: the client names the slots it held, each with its eventfd.
 * What the old daemon had taken from the queue and signalled is read back
 * from the region (once, and only ever trusted for this client's counts), so
 * completions that landed while no daemon ran are signalled now.
 */
static int on_adopt(struct server *srv, struct session *s, const struct cuflag_msg_hdr *h,
		    const uint32_t *ids, uint32_t count, int *fds)
{
	struct scan_cmd *cmds[CUFLAG_BATCH_MAX];

	if (!s->region.adopted || count > s->adopt_left)
		return refuse(srv, s, h, -EINVAL, "ADOPT without RESUME, or more than it announced");
	for (uint32_t i = 0; i < count; i++) {
		int fl;
		if (ids[i] >= s->nslots || s->slot_state[ids[i]] != SLOT_FREE)
			return refuse(srv, s, h, -EINVAL, "ADOPT names a slot out of range or twice");
		for (uint32_t j = 0; j < i; j++)
			if (ids[j] == ids[i])
				return refuse(srv, s, h, -EINVAL, "ADOPT names a slot twice");
		if (!is_eventfd(fds[i]))
			return refuse(srv, s, h, -EBADF, "ADOPT: an fd is not an eventfd");
		fl = fcntl(fds[i], F_GETFL);
		if (fl < 0 || fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) < 0)
			return refuse(srv, s, h, -EBADF, "ADOPT: cannot make an eventfd non-blocking");
	}
	if (alloc_cmds(cmds, count))
		return refuse(srv, s, h, -ENOMEM, "out of memory");
	const volatile struct cuflag_slot_state *st =
		(const volatile struct cuflag_slot_state *)(s->region.map +
							    s->region.layout.state_off);
	for (uint32_t i = 0; i < count; i++) {
		uint32_t id = ids[i];
		uint32_t sig = st[id].signalled, armed = st[id].armed;
		/* Read once; an armed value behind the signalled one is noise. */
		if (!cuflag_tl_after(armed, sig))
			armed = sig;
		unfree(s, id);
		s->slot_state[id] = SLOT_LIVE;
		s->slot_efd[id] = fds[i];
		fds[i] = -1; /* the slot's now */
		s->nlive++;
		cmds[i]->op = SCAN_ADD_SLOT;
		cmds[i]->sess = s->scan;
		cmds[i]->slot = id;
		cmds[i]->start = sig;
		cmds[i]->armed = armed;
		cmds[i]->efd = s->slot_efd[id];
		cmds[i]->owner = s;
		scanner_submit(srv->sc, cmds[i]);
	}
	s->adopt_left -= count;
	if (!s->adopt_left) {
		/* Every slot is back: now the scanner may read the queue, from
		 * where the daemon before us stopped (read once; checked against
		 * the tail like any value the client could have written). */
		s->scan->head_local = atomic_load_explicit(s->scan->head, memory_order_relaxed);
		scanner_submit(srv->sc, s->adopt_cmd);
		s->adopt_cmd = NULL;
	}
	return server_reply(s, h->type, h->req_id, 0, NULL, 0, NULL, 0);
}

static int on_free(struct server *srv, struct session *s, const struct cuflag_msg_hdr *h,
		   const uint32_t *ids, uint32_t count)
{
	/* Check every id first: a bad batch frees nothing. */
	for (uint32_t i = 0; i < count; i++) {
		if (ids[i] >= s->nslots || s->slot_state[ids[i]] != SLOT_LIVE)
			return refuse(srv, s, h, -EINVAL, "FREE names a slot the client does not hold");
		for (uint32_t j = 0; j < i; j++)
			if (ids[j] == ids[i])
				return refuse(srv, s, h, -EINVAL, "FREE names a slot twice");
	}
	struct scan_cmd *cmds[CUFLAG_BATCH_MAX];
	if (alloc_cmds(cmds, count))
		return refuse(srv, s, h, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < count; i++) {
		struct scan_cmd *c = cmds[i];
		s->slot_state[ids[i]] = SLOT_RETIRING;
		s->nlive--;
		s->nretiring++;
		c->op = SCAN_DEL_SLOT;
		c->sess = s->scan;
		c->slot = ids[i];
		c->owner = s;
		scanner_submit(srv->sc, c);
	}
	return server_reply(s, h->type, h->req_id, 0, NULL, 0, NULL, 0);
}

static int on_bind(struct server *srv, struct session *s, const struct cuflag_msg_hdr *h,
		   const struct cuflag_msg_bind *m, int *fd)
{
	int fl;
	struct scan_cmd *c;

	if (m->id >= s->nslots || s->slot_state[m->id] != SLOT_LIVE)
		return refuse(srv, s, h, -EINVAL, "BIND names a slot the client does not hold");
	if (!is_eventfd(*fd))
		return refuse(srv, s, h, -EBADF, "BIND: the fd is not an eventfd");
	/* The scanner must never block on it; a client that clears the flag
	 * later is caught by the write watchdog (server.c). */
	fl = fcntl(*fd, F_GETFL);
	if (fl < 0 || fcntl(*fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return refuse(srv, s, h, -EBADF, "BIND: cannot make the eventfd non-blocking");
	c = calloc(1, sizeof(*c));
	if (!c)
		return refuse(srv, s, h, -ENOMEM, "out of memory");
	c->op = SCAN_SET_EFD;
	c->sess = s->scan;
	c->slot = m->id;
	c->efd = *fd;
	c->owner = s;
	c->req_id = h->req_id;
	s->slot_efd[m->id] = *fd;
	*fd = -1; /* owned by the slot now; the old one closes when handed back */
	/* Answered once the scanner has switched: from the reply on, no signal
	 * goes to the old eventfd. */
	scanner_submit(srv->sc, c);
	return 0;
}

static int on_stats(struct server *srv, struct session *s, const struct cuflag_msg_hdr *h)
{
	struct cuflag_msg_stats_reply r;
	struct scanner_stats st;

	scanner_get_stats(srv->sc, &st);
	memset(&r, 0, sizeof(r));
	r.version = CUFLAG_PROTO_VERSION;
	r.slab = (uint32_t)srv->cfg->slab;
	r.epoch = srv->epoch;
	r.uptime_ms = cuflagd_now_ms() - srv->start_ms;
	server_totals(srv, &r.clients, &r.slots, &r.pending);
	r.armed = st.armed;
	r.wakes = st.wakes;
	r.completions = st.completions;
	r.parks = st.parks;
	r.passes = st.passes;
	r.bad_arms = st.bad_arms;
	r.dropped = srv->dropped;
	r.scanner_state = st.state;
	r.max_clients = srv->cfg->max_clients;
	r.slots_per_client = srv->cfg->slots_per_client;
	r.spin_us = (uint32_t)srv->cfg->spin_us;
	snprintf(r.daemon_version, sizeof(r.daemon_version), "%s", CUFLAG_VERSION);
	return server_reply(s, h->type, h->req_id, 0, &r, sizeof(r), NULL, 0);
}

static int on_clients(struct server *srv, struct session *s, const struct cuflag_msg_hdr *h)
{
	struct cuflag_msg_client_info ci;
	int rc;

	for (struct session *o = srv->sessions; o; o = o->next) {
		if (!o->scan || o->dead)
			continue;
		memset(&ci, 0, sizeof(ci));
		ci.client_id = o->id;
		ci.pid = o->pid;
		ci.uid = o->uid;
		ci.gid = o->gid;
		ci.slots = o->nlive;
		ci.armed = atomic_load_explicit(&o->scan->n_armed, memory_order_relaxed);
		ci.wakes = atomic_load_explicit(&o->scan->n_wakes, memory_order_relaxed);
		ci.pending = atomic_load_explicit(&o->scan->n_pending, memory_order_relaxed);
		ci.connected_ms = o->connected_ms - srv->start_ms;
		rc = server_reply(s, h->type, h->req_id, 0, &ci, sizeof(ci), NULL, 0);
		if (rc)
			return rc;
	}
	memset(&ci, 0, sizeof(ci));
	return server_reply(s, h->type, h->req_id, 0, &ci, sizeof(ci), NULL, 0);
}

/* Refill the bucket; 1 when this request may be served. */
static int rate_ok(struct server *srv, struct session *s)
{
	uint64_t now = cuflagd_now_ms();
	double cap = srv->cfg->msg_rate;

	s->tokens += (double)(now - s->tokens_ms) * cap / 1000.0;
	s->tokens_ms = now;
	if (s->tokens > cap)
		s->tokens = cap;
	if (s->tokens < 1.0)
		return 0;
	s->tokens -= 1.0;
	return 1;
}

/*
 * Serve one request. Returns 0 to go on, or a negative errno when the
 * client must be dropped (after the error reply was sent).
 */
static int serve(struct server *srv, struct session *s, const uint8_t *buf, size_t len,
		 int *fds, unsigned nfds)
{
	const char *why = NULL;
	struct cuflag_msg_hdr h;
	const uint8_t *body = buf + sizeof(h);
	int rc = cuflag_request_check(buf, len, nfds, &why);

	if (rc) {
		/* Echo what we can of the header so the client can match the reply. */
		memset(&h, 0, sizeof(h));
		if (len >= sizeof(h))
			memcpy(&h, buf, sizeof(h));
		reply_error(srv, s, h.type & 0x7fff, h.req_id, rc, why);
		session_drop(srv, s, rc, why);
		return rc;
	}
	memcpy(&h, buf, sizeof(h));
	if (!rate_ok(srv, s)) {
		rc = refuse(srv, s, &h, -EBUSY, "msg-rate reached");
	} else if (!s->hello_done && h.type != CUFLAG_MSG_HELLO && h.type != CUFLAG_MSG_RESUME &&
		   h.type != CUFLAG_MSG_STATS && h.type != CUFLAG_MSG_CLIENTS) {
		why = "request before HELLO";
		rc = -EPROTO;
	} else {
		switch (h.type) {
		case CUFLAG_MSG_HELLO: {
			struct cuflag_msg_hello m;
			memcpy(&m, body, sizeof(m));
			rc = on_hello(srv, s, &h, m.version_min, m.version_max, NULL, 0);
			if (rc == -EPROTO)
				why = "second HELLO";
			else if (rc == -EPROTONOSUPPORT)
				why = "no protocol version in common";
			break;
		}
		case CUFLAG_MSG_RESUME: {
			struct cuflag_msg_resume m;
			memcpy(&m, body, sizeof(m));
			rc = on_hello(srv, s, &h, m.version_min, m.version_max, fds, m.slots);
			if (rc == -EPROTO)
				why = "RESUME after HELLO";
			else if (rc == -EPROTONOSUPPORT)
				why = "no protocol version in common";
			else if (!rc && s->hello_done)
				slog(LOG_NOTICE, s, "took over its region from daemon epoch %016llx",
				     (unsigned long long)m.epoch);
			break;
		}
		case CUFLAG_MSG_ADOPT: {
			uint32_t ids[CUFLAG_BATCH_MAX], count;
			memcpy(&count, body, 4);
			memcpy(ids, body + 8, (size_t)count * 4);
			rc = on_adopt(srv, s, &h, ids, count, fds);
			break;
		}
		case CUFLAG_MSG_ALLOC: {
			struct cuflag_msg_alloc m;
			memcpy(&m, body, sizeof(m));
			rc = on_alloc(srv, s, &h, &m, 1);
			break;
		}
		case CUFLAG_MSG_FREE: {
			uint32_t ids[CUFLAG_BATCH_MAX], count;
			memcpy(&count, body, 4);
			memcpy(ids, body + 8, (size_t)count * 4);
			rc = on_free(srv, s, &h, ids, count);
			break;
		}
		case CUFLAG_MSG_BIND: {
			struct cuflag_msg_bind m;
			memcpy(&m, body, sizeof(m));
			rc = on_bind(srv, s, &h, &m, &fds[0]);
			break;
		}
		case CUFLAG_MSG_STATS:
			rc = on_stats(srv, s, &h);
			break;
		case CUFLAG_MSG_CLIENTS:
			rc = on_clients(srv, s, &h);
			break;
		}
	}
	if (rc && why) {
		if (rc != -EPROTONOSUPPORT)
			reply_error(srv, s, h.type, h.req_id, rc, why);
		session_drop(srv, s, rc, why);
		return rc;
	}
	if (rc) {
		/* The reply could not be sent: a client that does not read is dropped. */
		session_drop(srv, s, rc, "cannot send a reply");
		return rc;
	}
	return 0;
}

int session_on_readable(struct server *srv, struct session *s)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	int fds[CUFLAG_MSG_MAX_FDS];

	for (int k = 0; k < MAX_MSGS_PER_WAKE && !s->dead && !s->parked; k++) {
		unsigned nfds = 0;
		/* ADOPT carries the most fds; more than that is MSG_CTRUNC. */
		ssize_t n = cuflag_recv_msg(s->fd, buf, sizeof(buf), fds, CUFLAG_BATCH_MAX, &nfds,
					    MSG_DONTWAIT);

		if (n == -EAGAIN)
			return 0;
		if (n == 0) {
			/* SOCK_SEQPACKET: 0 is a hang-up, or a message of no bytes. */
			struct pollfd p = { .fd = s->fd, .events = POLLRDHUP };
			if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP))) {
				session_drop(srv, s, 0, NULL);
				return -ECONNRESET;
			}
			cuflag_close_fds(fds, nfds);
			reply_error(srv, s, 0, 0, -EBADMSG, "empty message");
			session_drop(srv, s, -EBADMSG, "empty message");
			return -EBADMSG;
		}
		if (n < 0) {
			const char *why = n == -EMSGSIZE ? "message too long"
					  : n == -EBADMSG ? "too many fds or truncated control data"
					  : n == -EMFILE  ? "daemon out of fds for the fds sent"
							  : "receive failed";
			if (n == -EMSGSIZE || n == -EBADMSG)
				reply_error(srv, s, 0, 0, (int)n, why);
			session_drop(srv, s, (int)n, why);
			return (int)n;
		}
		int rc = serve(srv, s, buf, (size_t)n, fds, nfds);
		cuflag_close_fds(fds, nfds); /* any fd not taken over */
		if (rc)
			return rc;
	}
	return 0;
}

/* Serve the parked ALLOC again: it may park once more while slots retire. */
static void retry_parked(struct server *srv, struct session *s, int may_park)
{
	uint8_t *msg = s->parked;
	struct cuflag_msg_hdr h;
	struct cuflag_msg_alloc m;
	int rc;

	s->parked = NULL;
	memcpy(&h, msg, sizeof(h));
	memcpy(&m, msg + sizeof(h), sizeof(m));
	free(msg);
	rc = on_alloc(srv, s, &h, &m, may_park);
	if (rc) {
		session_drop(srv, s, rc, "cannot send a reply");
		return;
	}
	if (!s->parked)
		set_reading(srv, s, 1); /* level-triggered: what queued meanwhile is read next */
}

void session_expire_parked(struct server *srv, struct session *s, uint64_t now_ms)
{
	if (s->parked && !s->dead && now_ms - s->parked_ms >= PARK_MAX_MS)
		retry_parked(srv, s, 0);
}

void session_on_done(struct server *srv, struct session *s, struct scan_cmd *c)
{
	switch (c->op) {
	case SCAN_ADD_SESSION:
	case SCAN_ADD_SLOT:
		break;
	case SCAN_SET_EFD:
		/* The scanner has let go of the old eventfd. */
		if (c->efd >= 0)
			close(c->efd);
		if (!s->dead &&
		    server_reply(s, CUFLAG_MSG_BIND, c->req_id, 0, NULL, 0, NULL, 0) < 0)
			session_drop(srv, s, -EPIPE, "cannot send a reply");
		break;
	case SCAN_DEL_SLOT:
		/* No device write can land any more: the slot may be handed out again. */
		if (s->slot_efd[c->slot] >= 0)
			close(s->slot_efd[c->slot]);
		s->slot_efd[c->slot] = -1;
		s->slot_state[c->slot] = SLOT_FREE;
		s->next_start[c->slot] = c->final_armed + RESTART_GAP;
		s->free_stack[s->nfree++] = c->slot;
		s->nretiring--;
		if (s->parked && !s->dead)
			retry_parked(srv, s, 1);
		break;
	case SCAN_DEL_SESSION:
		/* Last command of a dead session: nothing in the scanner refers to
		 * it (it left the park set already). */
		session_release(s);
		srv->nregions--;
		unlink_session(srv, s);
		/* An event for it may still wait in the loop's current batch. */
		s->next = srv->graveyard;
		srv->graveyard = s;
		break;
	}
	free(c);
}
