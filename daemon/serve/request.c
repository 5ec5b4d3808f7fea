/* SPDX-License-Identifier: MIT */
#include "serve/request.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "fdpass.h"
#include "proto.h"
#include "serve/answer.h"
#include "serve/attach.h"
#include "serve/export.h"
#include "serve/queries.h"
#include "serve/server-state.h"
#include "serve/session-state.h"

/* How long an ALLOC may wait for freed slots before it is refused. */
#define PARK_MAX_MS 1000

/* ---------------------------------------------------------------- */
/* Slots                                                             */
/* ---------------------------------------------------------------- */

/* Park the ALLOC until freed slots come back (see struct session): the
 * session reads nothing more from the client meanwhile. */
static int park_alloc(struct session *s, const struct request *req)
{
	s->parked = malloc(sizeof(req->h) + sizeof(struct cuflag_msg_alloc));
	if (!s->parked)
		return -ENOMEM;
	memcpy(s->parked, &req->h, sizeof(req->h));
	memcpy(s->parked + sizeof(req->h), req->body, sizeof(struct cuflag_msg_alloc));
	s->parked_ms = cuflag_now_ms();
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
	if (!slot_table_group_ok(t, m.group))
		return req_refuse(req, -EINVAL, "ALLOC names a group that was not made");
	if ((rc = slot_fds_may_take(t, slot_fd_cost(m.group, m.count), &req->why)))
		return req_refuse(req, rc, req->why);
	if (m.count > t->nfree) {
		if (may_park && m.count <= t->nfree + t->nretiring && !park_alloc(s, req))
			return 0;
		return req_refuse(req, -ENOSPC, "slots-per-client reached");
	}
	for (uint32_t i = 0; i < m.count; i++)
		fds[i] = -1;
	rc = m.group ? 0 : req_new_eventfds(srv, req, fds, m.count);
	if (!rc && (rc = slot_table_reserve(t, m.count)))
		cuflag_close_fds(fds, m.count);
	if (rc) {
		ulog(LOG_ERR, s, "cannot allocate slots: %s", strerror(-rc));
		return req_refuse(req, rc,
				  rc == -EMFILE || rc == -ENFILE ? "daemon out of fds" : "out of memory");
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

static struct req_verdict request_finish(struct server *srv, struct session *s,
					 struct request *req, int rc);

struct req_verdict request_retry_parked(struct server *srv, struct session *s, int may_park)
{
	uint8_t *msg = s->parked;
	struct request req = { .body = msg + sizeof(req.h), .blen = sizeof(struct cuflag_msg_alloc) };
	struct req_verdict v;

	s->parked = NULL;
	memcpy(&req.h, msg, sizeof(req.h));
	v = request_finish(srv, s, &req, alloc_slots(srv, s, &req, may_park));
	free(msg);
	return v;
}

struct req_verdict request_expire_parked(struct server *srv, struct session *s, uint64_t now_ms)
{
	if (now_ms - s->parked_ms >= PARK_MAX_MS)
		return request_retry_parked(srv, s, 0);
	return REQ_KEEP;
}

static int req_free(struct server *srv, struct session *s, struct request *req)
{
	uint32_t ids[CUFLAG_BATCH_MAX], reserved, count = req_id_batch(req, ids, &reserved);

	/* Check every id first: a bad batch frees nothing. */
	if (!slot_table_all_in(&s->slots, ids, count, SLOT_LIVE))
		return req_refuse(req, -EINVAL,
				  "FREE names a slot the client does not hold, or one twice");
	if (slot_table_reserve(&s->slots, count))
		return req_refuse(req, -ENOMEM, "out of memory");
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
	if (m.id >= s->slots.n || s->slots.state[m.id] != SLOT_LIVE)
		return req_refuse(req, -EINVAL, "BIND names a slot the client does not hold");
	if (s->slots.group[m.id])
		return req_refuse(req, -EOPNOTSUPP,
				  "BIND of a grouped slot: it signals its group's eventfd");
	if ((rc = req_take_eventfd(req, req->fds[0], "BIND: the fd is not an eventfd")))
		return rc;
	/* Answered once the scanner has switched: from the reply on, no signal
	 * goes to the old eventfd. */
	if ((rc = slot_bind(&s->slots, m.id, req->fds[0], req->h.req_id))) {
		return req_refuse(req, rc, "out of memory"); /* the rest was checked above */
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
		/* The rest was checked by the caller. */
		return req_refuse(req, rc, "out of memory");
	}
	return req_reply_ok(s, req, NULL, 0, NULL, 0);
}

static int req_group(struct server *srv, struct session *s, struct request *req)
{
	struct cuflag_msg_group m;
	int rc;

	memcpy(&m, req->body, sizeof(m));
	if (m.id >= s->slots.ngroups || s->slots.group_efd[m.id] >= 0)
		return req_refuse(req, -EINVAL,
				  "GROUP names a group out of range or one already made");
	if ((rc = slot_fds_may_take(&s->slots, 1, &req->why)))
		return req_refuse(req, rc, req->why);
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
	if (m.id >= s->slots.ngroups || s->slots.group_efd[m.id] < 0)
		return req_refuse(req, -EINVAL, "UNGROUP names a group that was not made");
	if (s->slots.group_live[m.id])
		return req_refuse(req, -EBUSY, "UNGROUP of a group whose slots are still held");
	return set_group(srv, s, req, m.id, -1);
}

/* ---------------------------------------------------------------- */
/* The table and the dispatcher                                      */
/* ---------------------------------------------------------------- */

/* The session states a method may come in (session-state.h). */
enum req_stage {
	STAGE_FRESH = 1u << SESSION_FRESH,       /* nothing yet: HELLO first */
	STAGE_HELLO = 1u << SESSION_HELLO,       /* after HELLO, before the region (ATTACH) */
	STAGE_ADOPTING = 1u << SESSION_ADOPTING, /* after a resuming ATTACH, slots to come */
	STAGE_REGION = 1u << SESSION_REGION,     /* after ATTACH, every slot adopted */
	STAGE_ANY = STAGE_FRESH | STAGE_HELLO | STAGE_ADOPTING | STAGE_REGION, /* the queries */
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
	return (enum req_stage)(1u << s->state);
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

struct req_verdict request_dispatch(struct server *srv, struct session *s, const uint8_t *buf,
				    size_t len, int *fds, unsigned nfds)
{
	struct request req = { .fds = fds, .nfds = nfds, .work = { .fds_in = nfds } };
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
			rc = req_refuse(&req, -EBUSY, "msg-rate reached");
		} else if (s->uid != 0 && !rate_take(&s->user->rate, srv->cfg->msg_rate_per_uid, now)) {
			rc = req_refuse(&req, -EBUSY, "msg-rate-per-uid reached");
		} else {
			rc = m->fn(srv, s, &req);
		}
	}
	return request_finish(srv, s, &req, rc);
}

/* What a handler returned, answered: the one place error replies are sent
 * for a request, and its verdict given (the session's owner drops). */
static struct req_verdict request_finish(struct server *srv, struct session *s,
					 struct request *req, int rc)
{
	/* What it made the daemon do with fds, on whichever thread. */
	answer_charge(srv, s, &req->work);
	if (rc > 0) {
		assert(rc == REQ_REFUSED);
		ulog(LOG_WARNING, s, "request %u refused: %s (%s)", req->h.type, req->why,
		     strerror(-req->refused));
		if (!req_reply_error(s, req, req->refused))
			return REQ_KEEP;
		req->why = "cannot send a reply";
		rc = -EPIPE;
	}
	if (rc < 0) {
		(void)req_reply_error(s, req, rc);
		return req_drop(rc, req->why);
	}
	return REQ_KEEP;
}
