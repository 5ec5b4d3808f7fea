/* SPDX-License-Identifier: MIT */
#include "request.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "answer.h"
#include "closer.h"
#include "export.h"
#include "fdpass.h"
#include "proto.h"
#include "server.h"
#include "session.h"
#include "stuck.h"

/* How long an ALLOC may wait for freed slots before it is refused. */
#define PARK_MAX_MS 1000

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

/* ---------------------------------------------------------------- */
/* Helpers the handlers share                                        */
/* ---------------------------------------------------------------- */

uint32_t req_id_batch(const struct request *req, uint32_t ids[CUFLAG_BATCH_MAX],
		      uint32_t *word2)
{
	uint32_t count;

	memcpy(&count, req->body + offsetof(struct cuflag_msg_free, count), sizeof(count));
	memcpy(word2, req->body + offsetof(struct cuflag_msg_adopt, group), sizeof(*word2));
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

	if (!is_eventfd(fd)) {
		req->why = not_eventfd;
		return REQ_REFUSE(-EBADF);
	}
	/* The scanner must never block on it; a client that clears the flag
	 * later is caught by the write tick (scanner.c). */
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		req->why = "cannot make an eventfd non-blocking";
		return REQ_REFUSE(-EBADF);
	}
	return 0;
}

/* ---------------------------------------------------------------- */
/* Slots                                                             */
/* ---------------------------------------------------------------- */

/* n eventfds below the reserve (fds come lowest first: a BIND, an ADOPT or a
 * new connection must still find room), all or none. 0 or a negative errno. */
int req_new_eventfds(struct server *srv, int *fds, uint32_t n)
{
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

/* Park the ALLOC until freed slots come back (see struct session). */
static int park_alloc(struct server *srv, struct session *s, const struct request *req)
{
	s->parked = malloc(sizeof(req->h) + sizeof(struct cuflag_msg_alloc));
	if (!s->parked)
		return -ENOMEM;
	memcpy(s->parked, &req->h, sizeof(req->h));
	memcpy(s->parked + sizeof(req->h), req->body, sizeof(struct cuflag_msg_alloc));
	s->parked_ms = cuflag_now_ms();
	session_set_reading(srv, s, 0);
	return 0;
}

static int alloc_slots(struct server *srv, struct session *s, struct request *req, int may_park)
{
	struct cuflag_msg_alloc m;
	struct cuflag_msg_alloc_reply r;
	int fds[CUFLAG_BATCH_MAX];
	struct slot_table *t = &s->slots;
	int rc;

	memcpy(&m, req->body, sizeof(m));
	if (!slot_table_group_ok(t, m.group)) {
		req->why = "ALLOC names a group that was not made";
		return REQ_REFUSE(-EINVAL);
	}
	if ((rc = slot_fds_may_take(t, slot_fd_cost(m.group, m.count), &req->why)))
		return REQ_REFUSE(rc);
	if (m.count > t->nfree) {
		if (may_park && m.count <= t->nfree + t->nretiring && !park_alloc(srv, s, req))
			return 0;
		req->why = "slots-per-client reached";
		return REQ_REFUSE(-ENOSPC);
	}
	for (uint32_t i = 0; i < m.count; i++)
		fds[i] = -1;
	rc = m.group ? 0 : req_new_eventfds(srv, fds, m.count);
	if (!rc && (rc = slot_table_reserve(t, m.count)))
		cuflag_close_fds(fds, m.count);
	if (rc) {
		ulog(LOG_ERR, s, "cannot allocate slots: %s", strerror(-rc));
		req->why = rc == -EMFILE || rc == -ENFILE ? "daemon out of fds" : "out of memory";
		return REQ_REFUSE(rc);
	}
	memset(&r, 0, sizeof(r));
	for (uint32_t i = 0; i < m.count; i++) {
		int id = slot_open(t, SLOT_ANY, fds[i], m.group);
		if (id < 0) { /* not after the checks and the reserve above */
			cuflag_close_fds(fds + i, m.count - i);
			req->why = "slot table out of step";
			return id;
		}
		r.grants[i].id = (uint32_t)id;
		r.grants[i].start = t->next_start[id];
	}
	r.count = m.count;
	return req_reply_ok(s, req, &r, (uint32_t)cuflag_alloc_reply_len(m.count), fds,
			    m.group ? 0 : m.count);
}

static int req_alloc(struct server *srv, struct session *s, struct request *req)
{
	return alloc_slots(srv, s, req, 1);
}

static int request_finish(struct server *srv, struct session *s, struct request *req, int rc);

void request_retry_parked(struct server *srv, struct session *s, int may_park)
{
	uint8_t *msg = s->parked;
	struct request req = { .body = msg + sizeof(req.h), .blen = sizeof(struct cuflag_msg_alloc) };
	int rc;

	s->parked = NULL;
	memcpy(&req.h, msg, sizeof(req.h));
	rc = request_finish(srv, s, &req, alloc_slots(srv, s, &req, may_park));
	free(msg);
	if (rc < 0)
		return;
	if (!s->parked)
		session_set_reading(srv, s, 1); /* level-triggered: what queued is read next */
}

void request_expire_parked(struct server *srv, struct session *s, uint64_t now_ms)
{
	if (now_ms - s->parked_ms >= PARK_MAX_MS)
		request_retry_parked(srv, s, 0);
}

static int req_free(struct server *srv, struct session *s, struct request *req)
{
	uint32_t ids[CUFLAG_BATCH_MAX], zero, count = req_id_batch(req, ids, &zero);

	/* Check every id first: a bad batch frees nothing. */
	if (!slot_table_all_in(&s->slots, ids, count, SLOT_LIVE)) {
		req->why = "FREE names a slot the client does not hold, or one twice";
		return REQ_REFUSE(-EINVAL);
	}
	if (slot_table_reserve(&s->slots, count)) {
		req->why = "out of memory";
		return REQ_REFUSE(-ENOMEM);
	}
	for (uint32_t i = 0; i < count; i++) {
		(void)slot_retire(&s->slots, ids[i]); /* checked and reserved above */
		export_slot_freed(srv, s, ids[i]);
	}
	return req_reply_ok(s, req, NULL, 0, NULL, 0);
}

static int req_bind(struct server *srv, struct session *s, struct request *req)
{
	struct cuflag_msg_bind m;
	int rc;

	memcpy(&m, req->body, sizeof(m));
	if (m.id >= s->slots.n || s->slots.state[m.id] != SLOT_LIVE) {
		req->why = "BIND names a slot the client does not hold";
		return REQ_REFUSE(-EINVAL);
	}
	if (s->slots.group[m.id]) {
		req->why = "BIND of a grouped slot: it signals its group's eventfd";
		return REQ_REFUSE(-EOPNOTSUPP);
	}
	if ((rc = req_take_eventfd(req, req->fds[0], "BIND: the fd is not an eventfd")))
		return rc;
	/* Answered once the scanner has switched: from the reply on, no signal
	 * goes to the old eventfd. */
	if ((rc = slot_bind(&s->slots, m.id, req->fds[0], req->h.req_id))) {
		req->why = "out of memory"; /* the rest was checked above */
		return REQ_REFUSE(rc);
	}
	req->fds[0] = -1; /* the slot's now; the old one closes when handed back */
	return 0;
}

/* Hand the scanner a group's new eventfd (or -1); the old one comes back. */
static int set_group(struct server *srv, struct session *s, struct request *req, uint32_t id,
		     int efd)
{
	int rc = efd >= 0 ? slot_group_make(&s->slots, id, efd) : slot_group_unmake(&s->slots, id);

	if (rc) {
		req->why = "out of memory"; /* the rest was checked by the caller */
		return REQ_REFUSE(rc);
	}
	return req_reply_ok(s, req, NULL, 0, NULL, 0);
}

static int req_group(struct server *srv, struct session *s, struct request *req)
{
	struct cuflag_msg_group m;
	int rc;

	memcpy(&m, req->body, sizeof(m));
	if (m.id >= s->slots.ngroups || s->slots.group_efd[m.id] >= 0) {
		req->why = "GROUP names a group out of range or one already made";
		return REQ_REFUSE(-EINVAL);
	}
	if ((rc = slot_fds_may_take(&s->slots, 1, &req->why)))
		return REQ_REFUSE(rc);
	if ((rc = req_take_eventfd(req, req->fds[0], "GROUP: the fd is not an eventfd")))
		return rc;
	rc = set_group(srv, s, req, m.id, req->fds[0]);
	if (rc <= 0)
		req->fds[0] = -1; /* the group's now */
	return rc;
}

static int req_ungroup(struct server *srv, struct session *s, struct request *req)
{
	struct cuflag_msg_group m;

	memcpy(&m, req->body, sizeof(m));
	if (m.id >= s->slots.ngroups || s->slots.group_efd[m.id] < 0) {
		req->why = "UNGROUP names a group that was not made";
		return REQ_REFUSE(-EINVAL);
	}
	if (s->slots.group_live[m.id]) {
		req->why = "UNGROUP of a group whose slots are still held";
		return REQ_REFUSE(-EBUSY);
	}
	return set_group(srv, s, req, m.id, -1);
}

/* ---------------------------------------------------------------- */
/* Queries                                                           */
/* ---------------------------------------------------------------- */

static int req_stats(struct server *srv, struct session *s, struct request *req)
{
	struct cuflag_msg_stats_reply r;
	struct scanner_stats st;

	scanner_get_stats(srv->sc, &st);
	memset(&r, 0, sizeof(r));
	r.version = CUFLAG_PROTO_VERSION;
	r.slab = (uint32_t)srv->cfg->slab;
	r.epoch = srv->epoch;
	r.uptime_ms = cuflag_now_ms() - srv->start_ms;
	server_totals(srv, &r.clients, &r.slots, &r.pending);
	r.grouped_slots = server_grouped_slots(srv);
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
	r.scanner_mode = st.mode;
	r.scanner_cpu_ns = st.cpu_ns;
	r.scanner_wakeups = st.wakeups;
	r.scanner_sleeps = st.sleeps;
	r.parked_ns = st.parked_ns;
	r.sleeping_ns = st.sleeping_ns;
	r.spinning_ns = st.spinning_ns;
	r.timer_late_ns = st.timer_late_ns;
	snprintf(r.daemon_version, sizeof(r.daemon_version), "%s", CUFLAG_VERSION);
	/* Its totals walk every client twice. */
	answer_charge(srv, s, &(struct loop_work){ .sessions = 2 * srv->users.total[USER_CONNS] });
	return req_reply_ok(s, req, &r, sizeof(r), NULL, 0);
}

/* Clients listed per step of a CLIENTS answer. */
#define CLIENTS_STEP 16u

/* Where a CLIENTS answer stands: the clients with ids up to after are sent. */
struct clients_answer {
	uint32_t after;
};

static void client_info(struct server *srv, const struct session *o,
			struct cuflag_msg_client_info *ci)
{
	memset(ci, 0, sizeof(*ci));
	ci->client_id = o->id;
	ci->pid = o->pid;
	ci->uid = o->uid;
	ci->gid = o->gid;
	ci->slots = o->slots.nlive;
	ci->armed = atomic_load_explicit(&o->scan->n_armed, memory_order_relaxed);
	ci->wakes = atomic_load_explicit(&o->scan->n_wakes, memory_order_relaxed);
	ci->pending = atomic_load_explicit(&o->scan->n_pending, memory_order_relaxed);
	ci->connected_ms = o->connected_ms - srv->start_ms;
	ci->age_s = (uint32_t)((cuflag_now_ms() - o->connected_ms) / 1000u);
}

/* The next clients after ca->after, or the end: one page a step. */
static int clients_build(struct server *srv, struct session *s, void *state, struct answer *a,
			 struct loop_work *w)
{
	struct clients_answer *ca = state;
	struct session *page[CLIENTS_STEP];
	struct cuflag_msg_client_info ci;
	uint32_t n = answer_page(srv, s, ca->after, UINT32_MAX, page, CLIENTS_STEP, w);
	int rc = 0;

	for (uint32_t i = 0; i < n && !rc; i++) {
		client_info(srv, page[i], &ci);
		rc = answer_emit(a, &ci, sizeof(ci));
		ca->after = page[i]->id;
	}
	if (rc || n == CLIENTS_STEP)
		return rc;
	memset(&ci, 0, sizeof(ci));
	rc = answer_emit(a, &ci, sizeof(ci));
	return rc ? rc : 1;
}

static const struct answer_ops clients_ops = { "CLIENTS", clients_build, free };

/* A user sees its own clients; root and the admin group see everyone's.
 * However many there are, they are sent a page at a time as the asker reads
 * them (answer.h): the wire is what it always was, one reply per client and
 * an empty one to end, so every reader of CLIENTS reads it as before. */
static int req_clients(struct server *srv, struct session *s, struct request *req)
{
	struct clients_answer *ca = calloc(1, sizeof(*ca));

	if (!ca) {
		req->why = "out of memory";
		return REQ_REFUSE(-ENOMEM);
	}
	return answer_start(srv, s, req, &clients_ops, ca);
}

/* ---------------------------------------------------------------- */
/* The table and the dispatcher                                      */
/* ---------------------------------------------------------------- */

/* Where a connection stands; a method lists the stages it may come in. */
enum req_stage {
	STAGE_FRESH = 1,    /* nothing yet: HELLO first */
	STAGE_HELLO = 2,    /* after HELLO, before the region (ATTACH) */
	STAGE_ADOPTING = 4, /* after a resuming ATTACH, while slots are still to come */
	STAGE_REGION = 8,   /* after ATTACH, every slot adopted */
	STAGE_ANY = 15,     /* the queries */
};

static const struct req_method {
	const char *name;
	unsigned stages; /* enum req_stage, or-ed */
	int (*fn)(struct server *srv, struct session *s, struct request *req);
} req_methods[CUFLAG_MSG_TYPE_END] = {
	[CUFLAG_MSG_HELLO] = { "HELLO", STAGE_FRESH, req_hello },
	[CUFLAG_MSG_ALLOC] = { "ALLOC", STAGE_REGION, req_alloc },
	[CUFLAG_MSG_FREE] = { "FREE", STAGE_REGION, req_free },
	[CUFLAG_MSG_BIND] = { "BIND", STAGE_REGION, req_bind },
	[CUFLAG_MSG_STATS] = { "STATS", STAGE_ANY, req_stats },
	[CUFLAG_MSG_CLIENTS] = { "CLIENTS", STAGE_ANY, req_clients },
	[CUFLAG_MSG_ATTACH] = { "ATTACH", STAGE_HELLO, req_attach },
	[CUFLAG_MSG_ADOPT] = { "ADOPT", STAGE_ADOPTING, req_adopt },
	/* A resume makes its groups again before it adopts their slots. */
	[CUFLAG_MSG_GROUP] = { "GROUP", STAGE_ADOPTING | STAGE_REGION, req_group },
	[CUFLAG_MSG_UNGROUP] = { "UNGROUP", STAGE_REGION, req_ungroup },
	[CUFLAG_MSG_METRICS] = { "METRICS", STAGE_ANY, req_metrics },
	[CUFLAG_MSG_STUCK] = { "STUCK", STAGE_ANY, req_stuck },
	[CUFLAG_MSG_EXPORT] = { "EXPORT", STAGE_REGION, req_export },
	[CUFLAG_MSG_IMPORT] = { "IMPORT", STAGE_REGION, req_import },
};

static enum req_stage session_stage(const struct session *s)
{
	if (!s->hello_done)
		return STAGE_FRESH;
	if (!s->scan)
		return STAGE_HELLO;
	return s->adopt_left ? STAGE_ADOPTING : STAGE_REGION;
}

/* What a request out of order is, by where the connection stands. */
static const char *out_of_order(enum req_stage stage)
{
	switch (stage) {
	case STAGE_FRESH:
		return "request before HELLO";
	case STAGE_HELLO:
		return "request before ATTACH, or a second HELLO";
	case STAGE_ADOPTING:
		return "request before every slot is adopted, or a second HELLO or ATTACH";
	default:
		return "HELLO, ATTACH or ADOPT out of order";
	}
}

int request_dispatch(struct server *srv, struct session *s, const uint8_t *buf, size_t len,
		     int *fds, unsigned nfds)
{
	struct request req = { .fds = fds, .nfds = nfds };
	const struct req_method *m;
	uint64_t now = cuflag_now_ms();
	int rc = cuflag_request_check(buf, len, nfds, &req.why);

	/* Echo what we can of the header so the client can match the reply. */
	if (len >= sizeof(req.h))
		memcpy(&req.h, buf, sizeof(req.h));
	req.h.type &= (uint16_t)~CUFLAG_MSG_REPLY;
	if (!rc) {
		req.body = buf + sizeof(req.h);
		req.blen = (uint32_t)(len - sizeof(req.h));
		m = &req_methods[req.h.type];
		if (!(m->stages & session_stage(s))) {
			req.why = out_of_order(session_stage(s));
			rc = -EPROTO;
		} else if (!rate_take(&s->rate, srv->cfg->msg_rate, now)) {
			req.why = "msg-rate reached";
			rc = REQ_REFUSE(-EBUSY);
		} else if (s->uid != 0 && !rate_take(&s->user->rate, srv->cfg->msg_rate_per_uid, now)) {
			req.why = "msg-rate-per-uid reached";
			rc = REQ_REFUSE(-EBUSY);
		} else {
			rc = m->fn(srv, s, &req);
		}
	}
	return request_finish(srv, s, &req, rc);
}

/* What a handler returned, answered: the one place error replies are sent
 * and clients dropped for a request. */
static int request_finish(struct server *srv, struct session *s, struct request *req, int rc)
{
	if (rc > 0) {
		ulog(LOG_WARNING, s, "request %u refused: %s (%s)", req->h.type, req->why,
		     strerror(rc));
		if (!send_error(s->fd, req->h.type, req->h.req_id, -rc, req->why))
			return 0;
		req->why = "cannot send a reply";
		rc = -EPIPE;
	}
	if (rc < 0) {
		(void)send_error(s->fd, req->h.type, req->h.req_id, rc, req->why);
		session_drop(srv, s, rc, req->why);
	}
	return rc;
}
