/* SPDX-License-Identifier: MIT */
/*
 * How a connection comes to hold a region: HELLO agrees on a version and
 * tells the client the layout this daemon takes; the client makes the region
 * (so its memory is charged to the client) and hands it over with ATTACH; a
 * client resuming after a daemon restart then names the slots it held with
 * ADOPT. ATTACH acquires everything into locals (admission, slot table,
 * region, wake eventfd, the scanner's view) and hands it all to the session
 * at the end, or unwinds it in one place.
 */
#include "serve/attach.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/closer.h"
#include "base/config.h"
#include "serve/handler.h"
#include "serve/server-state.h"
#include "serve/session-state.h"
#include "timeline.h"

int req_hello(struct server *srv, struct session *s, struct request *req)
{
	const struct cuflag_region_layout *l = &srv->layout;
	struct cuflag_msg_hello m;
	struct cuflag_msg_hello_reply r;
	int rc;

	memcpy(&m, req->body, sizeof(m));
	if (m.version_min > CUFLAG_PROTO_VERSION || m.version_max < CUFLAG_PROTO_VERSION) {
		req->why = "no protocol version in common";
		return -EPROTONOSUPPORT;
	}
	memset(&r, 0, sizeof(r));
	r.version = CUFLAG_PROTO_VERSION;
	r.slab = (uint32_t)srv->cfg->slab;
	r.epoch = srv->epoch;
	cuflag_region_layout_to_reply(&r, l);
	r.page_size = (uint32_t)srv->dp.size;
	r.client_id = s->id;
	/* What the ATTACH reply's allocation will hold, as the client maps it. */
	r.flags_size = srv->cfg->slab == CUFLAG_SLAB_CUDA_IPC
			       ? slab_cuda_size((uint64_t)l->nslots * sizeof(uint32_t))
			       : 0;
	if ((rc = req_reply_ok(s, req, &r, sizeof(r), &srv->dp.fd, 1)))
		return rc;
	session_move(s, SESSION_HELLO);
	return 0;
}

/* Whether this user may hold one more region now: 0, or REQ_REFUSED if not. */
static int admit_region(struct server *srv, struct session *s, struct request *req)
{
	enum user_refusal r = users_admit(&srv->users, s->user, s->uid, USER_REGIONS, 1);
	uint64_t left;

	if (r)
		return req_refuse(req, -EUSERS, users_refusal_why(USER_REGIONS, r));
	left = penalty_left_ms(&srv->penalties, s->uid, cuflag_now_ms());
	if (left)
		return req_refuse(req, -EBUSY,
				  "this user's clients are refused a while: one misbehaved");
	return 0;
}

/* What ATTACH builds before the session takes it over. */
struct attach {
	struct slot_table slots;
	struct region region;
	struct slab_alloc ipc;
	struct scanner_session *scan;
	volatile uint32_t *flags;
};

static void attach_unwind(struct attach *a)
{
	free(a->scan);
	slab_cuda_free(&a->ipc);
	region_destroy(&a->region);
	slot_table_free(&a->slots);
}

/* Where a session's slot table sends its commands (slots.h). */
static void to_scanner(void *sc, struct scanner_cmd *c)
{
	scanner_submit(sc, c);
}

/* Map and check the client's region, then everything that hangs off it. */
static int attach_build(struct server *srv, struct session *s, struct request *req,
			struct attach *a, int resuming)
{
	const struct cuflagd_config *cfg = srv->cfg;
	int rc;

	rc = region_adopt(&a->region, req->fds[0], &srv->layout, resuming, &req->why);
	if (rc)
		return req_refuse(req, rc, req->why);
	if (registry_find_region(&srv->reg, a->region.dev, a->region.ino))
		return req_refuse(req, -EBUSY,
				  "ATTACH: a client holds that region (or is still being let go)");
	a->flags = (volatile uint32_t *)(a->region.map + srv->layout.flags_off);
	if (cfg->slab == CUFLAG_SLAB_CUDA_IPC) {
		rc = slab_cuda_alloc((uint64_t)srv->layout.nslots * sizeof(uint32_t), &a->ipc);
		if (rc) {
			ulog(LOG_ERR, s, "cannot allocate CUDA flags: %s", strerror(-rc));
			return req_refuse(req, rc, "cannot allocate the flags");
		}
		a->flags = (volatile uint32_t *)(uintptr_t)a->ipc.va;
	}
	a->scan = malloc(scanner_session_size(&srv->layout));
	struct slot_table_cfg slots = {
		.nslots = srv->layout.nslots, .ngroups = srv->layout.ngroups,
		.users = &srv->users, .user = s->user,
		.submit = to_scanner, .submit_arg = srv->sc, .sess = a->scan, .owner = s,
		.flags = a->flags,
	};
	if (!a->scan || slot_table_init(&a->slots, &slots))
		return req_refuse(req, -ENOMEM, "out of memory");
	scanner_session_init(a->scan, &srv->layout, a->region.map, a->flags, req->fds[1],
			     &s->user->scan);
	return 0;
}

int req_attach(struct server *srv, struct session *s, struct request *req)
{
	struct cuflag_msg_attach m;
	struct attach a = { .ipc = { .fd = -1 } };
	int rc;

	memcpy(&m, req->body, sizeof(m));
	if ((rc = admit_region(srv, s, req)))
		return rc;
	if (m.slots && srv->cfg->slab != CUFLAG_SLAB_MEMFD)
		return req_refuse(req, -EOPNOTSUPP,
				  "resuming needs --slab memfd: the CUDA flags died with the old daemon");
	if (m.slots > srv->layout.nslots)
		return req_refuse(req, -EINVAL, "ATTACH: more slots than slots-per-client");
	if ((rc = req_take_eventfd(req, req->fds[1], "ATTACH: the wake fd is not an eventfd")))
		return rc;
	/* A resume names the daemon it comes from (a fresh ATTACH says 0). */
	rc = attach_build(srv, s, req, &a, m.epoch != 0 || m.slots != 0);
	if (rc) {
		attach_unwind(&a);
		return rc;
	}
	/* Everything is in hand: the session takes it over. */
	s->slots = a.slots;
	s->region = a.region;
	s->ipc = a.ipc;
	s->flags = a.flags;
	s->scan = a.scan;
	s->wake_fd = req->fds[1];
	req->fds[1] = -1;
	user_hold(&srv->users, s->user, USER_REGIONS, 1);
	/* The scanner learns of the region before the client can arm in it; a
	 * resumed one once its slots are back (req_adopt). */
	s->adopt_left = m.slots;
	s->resumed = (m.epoch != 0 || m.slots != 0) && m.epoch != srv->epoch;
	session_move(s, m.slots ? SESSION_ADOPTING : SESSION_REGION);
	if (!m.slots)
		(void)slot_table_start(&s->slots,
				       atomic_load_explicit(a.scan->head, memory_order_relaxed));
	rc = req_reply_ok(s, req, NULL, 0, &s->ipc.fd, s->ipc.fd >= 0 ? 1 : 0);
	/* The client holds the CUDA allocation now; we keep our mapping. */
	closer_close(srv->closer, s->ipc.fd);
	s->ipc.fd = -1;
	if (rc)
		return rc;
	ulog(LOG_INFO, s, "%s: %u slots, region %llu bytes", m.slots ? "resumed" : "connected",
	     srv->layout.nslots, (unsigned long long)srv->layout.size);
	if (m.slots)
		ulog(LOG_NOTICE, s, "took over its region from daemon epoch %016llx",
		     (unsigned long long)m.epoch);
	return 0;
}

/*
 * After a resuming ATTACH: the client names the slots it held, each with its
 * eventfd. What the old daemon had taken from the queue and signalled is read
 * back from the region (once, and only ever trusted for this client's
 * counts), so completions that landed while no daemon ran are signalled now.
 */
int req_adopt(struct server *srv, struct session *s, struct request *req)
{
	uint32_t ids[CUFLAG_BATCH_MAX], group, count = req_id_batch(req, ids, &group);
	const volatile struct cuflag_slot_state *st = s->scan->states;
	int rc;

	if (!slot_table_group_ok(&s->slots, group))
		return req_refuse(req, -EINVAL, "ADOPT names a group that was not made");
	if (count > s->adopt_left)
		return req_refuse(req, -EINVAL, "ADOPT names more slots than ATTACH announced");
	if (!slot_table_all_in(&s->slots, ids, count, SLOT_FREE))
		return req_refuse(req, -EINVAL, "ADOPT names a slot out of range or twice");
	if ((rc = slot_fds_may_take(&s->slots, slot_fd_cost(group, count), &req->why)))
		return req_refuse(req, rc, req->why);
	for (uint32_t i = 0; i < req->nfds; i++)
		if ((rc = req_take_eventfd(req, req->fds[i], "ADOPT: an fd is not an eventfd")))
			return rc;
	if (slot_table_reserve(&s->slots, count))
		return req_refuse(req, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < count; i++) {
		uint32_t id = ids[i];
		struct cuflag_slot_state rec = { .signalled = st[id].signalled, .armed = st[id].armed };
		/* Read once; an armed value behind the signalled one is noise. */
		if (!cuflag_tl_after(rec.armed, rec.signalled))
			rec.armed = rec.signalled;
		if ((rc = slot_adopt(&s->slots, id, group ? -1 : req->fds[i], group, &rec)) < 0) {
			req->why = "slot table out of step"; /* not after the checks above */
			return rc;
		}
		if (!group)
			req->fds[i] = -1; /* the slot's now */
	}
	s->adopt_left -= count;
	if (!s->adopt_left) {
		session_move(s, SESSION_REGION);
		/* Every slot is back: now the scanner may read the queue, from
		 * where the daemon before us stopped. */
		(void)slot_table_start(&s->slots,
				       atomic_load_explicit(s->scan->head, memory_order_relaxed));
	}
	return req_reply_ok(s, req, NULL, 0, NULL, 0);
}
