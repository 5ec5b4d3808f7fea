/* SPDX-License-Identifier: MIT */
/*
 * What a daemon that restarted is handed again, on the new connection of a
 * resume (req_lock and slots_lock held): every group (GROUP) and slot
 * (ADOPT), the handles of exported slots (EXPORT with REDECLARE), imported
 * slots taken again (IMPORT with RESUME); then the doorbells of what the old
 * daemon left unrung, and the waits' epolls that watched the old connection.
 * The messages here go out through request.c only: nothing here resumes.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "client-private.h"
#include "fd-util.h"
#include "timeline.h"

int cuflag__group_announce(struct cuflag_client *c, int sock, struct cuflag_group *g)
{
	struct cuflag_msg_group m = { .id = g->id };
	uint8_t reply[CUFLAG_MSG_MAX];
	struct cuflag_call call = { .type = CUFLAG_MSG_GROUP, .body = &m, .blen = sizeof(m),
				    .fds = &g->efd, .nfds = 1, .reply = reply };

	return cuflag__request_on(c, sock, &call);
}

/* ADOPT the slots of group g (NULL: those with their own eventfd), 64 a
 * message: grouped ones bring no fd, the group's rings for them. */
static int adopt_slots(struct cuflag_client *c, int sock, struct cuflag_group *g)
{
	struct cuflag_msg_adopt m;
	int efds[CUFLAG_BATCH_MAX];
	uint8_t reply[CUFLAG_MSG_MAX];
	int rc = 0;

	for (struct cuflag_slot *s = c->slots; s && !rc;) {
		m.count = 0;
		m.group = g ? g->id + 1 : 0;
		for (; s && m.count < CUFLAG_BATCH_MAX; s = s->next_slot) {
			if (s->group != g || s->imported)
				continue; /* imports are taken again by IMPORT (below) */
			if (!g)
				efds[m.count] = cuflag__doorbell(s);
			m.ids[m.count++] = s->id;
		}
		if (!m.count)
			break;
		struct cuflag_call call = {
			.type = CUFLAG_MSG_ADOPT, .body = &m,
			.blen = (uint32_t)cuflag_id_batch_len(m.count),
			.fds = efds, .nfds = g ? 0 : m.count, .reply = reply,
		};
		rc = cuflag__request_on(c, sock, &call);
	}
	return rc;
}

/* Make the groups again, then hand over every slot. */
static int adopt_all(struct cuflag_client *c, int sock)
{
	int rc = adopt_slots(c, sock, NULL);

	for (uint32_t i = 0; !rc && i < c->layout.ngroups; i++)
		if (c->groups[i] && !(rc = cuflag__group_announce(c, sock, c->groups[i])))
			rc = adopt_slots(c, sock, c->groups[i]);
	return rc;
}

/* One IMPORT on sock (req_lock held): new (s NULL), or s taken again after a
 * restart. The grant in *g, the new slot's eventfd (if new, not grouped) in
 * *efd. */
int cuflag__import_on(struct cuflag_client *c, int sock, struct cuflag_group *grp, int handle,
		     struct cuflag_slot *s, struct cuflag_slot_grant *g, int *efd)
{
	struct cuflag_msg_import m = { .group = grp ? grp->id + 1 : 0 };
	uint8_t reply[CUFLAG_MSG_MAX];
	int give[2] = { handle, -1 };
	struct cuflag_call call = { .type = CUFLAG_MSG_IMPORT, .body = &m, .blen = sizeof(m),
				    .fds = give, .nfds = 1, .reply = reply, .reply_fds = efd,
				    .max_fds = 1 };
	int rc;

	*efd = -1;
	if (s) {
		m.flags = CUFLAG_IMPORT_RESUME;
		m.id = s->id;
		if (!grp) {
			give[1] = s->efd;
			call.nfds = 2;
		}
	}
	rc = cuflag__request_on(c, sock, &call);
	if (!rc && call.reply_nfds != (s || grp ? 0u : 1u))
		rc = -EBADMSG;
	if (!rc) {
		memcpy(g, cuflag_call_body(&call), sizeof(*g));
		if (g->id >= c->layout.nslots || (s && g->id != s->id))
			rc = -EBADMSG;
	}
	if (rc) {
		*efd = safe_close(*efd);
		return rc;
	}
	return 0;
}

/* A refusal that only says this handle or slot is no more (the exporter
 * went while no daemon ran): the slot ends, the resume goes on. */
static int handle_refused(int rc)
{
	return rc == -EINVAL || rc == -ENOSPC || rc == -EDQUOT || rc == -EMFILE;
}

static int resume_exports(struct cuflag_client *c, int sock)
{
	uint8_t reply[CUFLAG_MSG_MAX];
	int rc;

	for (struct cuflag_slot *s = c->slots; s; s = s->next_slot) {
		struct cuflag_msg_export m = { .id = s->id, .flags = CUFLAG_EXPORT_REDECLARE };
		struct cuflag_call call = { .type = CUFLAG_MSG_EXPORT, .body = &m,
					    .blen = sizeof(m), .fds = &s->handle_fd, .nfds = 1,
					    .reply = reply };
		if (s->imported || s->handle_fd < 0)
			continue;
		rc = cuflag__request_on(c, sock, &call);
		if (rc && !handle_refused(rc))
			return rc;
	}
	for (struct cuflag_slot *s = c->slots; s; s = s->next_slot) {
		struct cuflag_slot_grant g;
		int efd;

		if (!s->imported || s->detached)
			continue;
		rc = cuflag__import_on(c, sock, s->group, s->handle_fd, s, &g, &efd);
		if (rc && !handle_refused(rc))
			return rc;
		if (rc) {
			uint64_t one = 1;
			s->detached = 1; /* its waits and consumes say -EPIPE */
			/* Its own doorbell; a group's looks at every slot after a
			 * resume. */
			if (!s->group && write(s->efd, &one, sizeof(one)) < 0)
				(void)0; /* a full counter is readable anyway */
		}
	}
	return 0;
}

int cuflag__handover(struct cuflag_client *c, int sock)
{
	int rc = adopt_all(c, sock);

	return rc ? rc : resume_exports(c, sock);
}

/* Ring a group's eventfd (so that a drain comes), remembering to look at
 * every slot. */
static void group_rescan(struct cuflag_group *g)
{
	uint64_t one = 1;

	atomic_store(&g->rescan, 1);
	if (write(g->efd, &one, sizeof(one)) < 0)
		(void)0; /* a full counter is readable anyway */
}

/* Ring the doorbell of every slot whose record moved past what was counted:
 * a daemon killed between recording a signal and writing the eventfd left it
 * unrung, and an event loop must still wake to consume it. A group's ring
 * may have lost records the same way: each group looks at all its slots. */
void cuflag__ring_unread(struct cuflag_client *c)
{
	uint64_t one = 1;

	for (struct cuflag_slot *s = c->slots; s; s = s->next_slot) {
		uint32_t rec = __atomic_load_n(&c->states[s->id].signalled, __ATOMIC_ACQUIRE);
		if (!s->group && cuflag_tl_after(rec, atomic_load(&s->consumed)) &&
		    write(cuflag__doorbell(s), &one, sizeof(one)) < 0)
			(void)0; /* a full counter is readable anyway */
	}
	for (uint32_t i = 0; i < c->layout.ngroups; i++)
		if (c->groups[i])
			group_rescan(c->groups[i]);
}

void cuflag__forget_waits(struct cuflag_client *c)
{
	pthread_mutex_lock(&c->slots_lock);
	for (struct cuflag_slot *s = c->slots; s; s = s->next_slot) {
		if (atomic_exchange(&s->wait_ep_busy, 1))
			continue; /* a waiter holds it; it makes a fresh one next time */
		if (s->wait_ep >= 0)
			close(s->wait_ep);
		s->wait_ep = -1;
		atomic_store(&s->wait_ep_busy, 0);
	}
	pthread_mutex_unlock(&c->slots_lock);
}
