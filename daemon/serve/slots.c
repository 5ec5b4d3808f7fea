/* SPDX-License-Identifier: MIT */
/* The slot table and its state machine (slots.h). */
#include "serve/slots.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "scanner/scanner.h"

/* An illegal transition (slots.h): fatal where assertions are on, else its
 * errno, with nothing changed or sent. */
#define ILLEGAL(err) (assert(!"illegal slot transition"), (err))

/* A freed slot's next timeline starts this far past its last armed value,
 * so a write from the old timeline that lands late reads as "behind". */
#define RESTART_GAP (1u << 30)

/* Slot id is in the state a transition left, and the table's counts agree. */
static void assert_left(const struct slot_table *t, uint32_t id, enum slot_state want)
{
	assert(t->state[id] == want);
	assert(t->nfree + t->nlive + t->nretiring == t->n);
	assert(want != SLOT_FREE ||
	       (t->free_pos[id] < t->nfree && t->free_stack[t->free_pos[id]] == id && !t->group[id]));
}

int slot_table_init(struct slot_table *t, const struct slot_table_cfg *cfg)
{
	uint32_t n = cfg->nslots, ngroups = cfg->ngroups;

	memset(t, 0, sizeof(*t));
	t->state = calloc(n, 1);
	t->efd = malloc(sizeof(int) * n);
	t->group = calloc(n, sizeof(uint32_t));
	t->next_start = calloc(n, sizeof(uint32_t));
	t->free_stack = malloc(sizeof(uint32_t) * n);
	t->free_pos = malloc(sizeof(uint32_t) * n);
	t->group_efd = malloc(sizeof(int) * (ngroups ? ngroups : 1));
	t->group_live = calloc(ngroups ? ngroups : 1, sizeof(uint32_t));
	t->start_cmd = calloc(1, sizeof(*t->start_cmd));
	if (!t->state || !t->efd || !t->group || !t->next_start || !t->free_stack ||
	    !t->free_pos || !t->group_efd || !t->group_live || !t->start_cmd) {
		slot_table_free(t);
		return -ENOMEM;
	}
	for (uint32_t g = 0; g < ngroups; g++)
		t->group_efd[g] = -1;
	t->ngroups = ngroups;
	/* Low ids first: popped from the top of the stack. */
	for (uint32_t i = 0; i < n; i++) {
		t->efd[i] = -1;
		t->free_stack[i] = n - 1 - i;
		t->free_pos[n - 1 - i] = i;
	}
	t->n = t->nfree = n;
	t->users = cfg->users;
	t->user = cfg->user;
	t->scanned = SLOTS_HELD;
	t->submit = cfg->submit;
	t->submit_arg = cfg->submit_arg;
	t->sess = cfg->sess;
	t->owner = cfg->owner;
	t->flags = cfg->flags;
	return 0;
}

void slot_table_free(struct slot_table *t)
{
	free(t->state);
	free(t->efd);
	free(t->group);
	free(t->group_efd);
	free(t->group_live);
	free(t->next_start);
	free(t->free_stack);
	free(t->free_pos);
	free(t->start_cmd); /* never sent: a resume dropped while adopting */
	for (struct scanner_cmd *c = t->spare, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	memset(t, 0, sizeof(*t));
}

/* ---------------------------------------------------------------- */
/* Commands                                                          */
/* ---------------------------------------------------------------- */

int slot_table_reserve(struct slot_table *t, uint32_t n)
{
	while (t->nspare < n) {
		struct scanner_cmd *c = malloc(sizeof(*c));
		if (!c)
			return -ENOMEM;
		c->next = t->spare;
		t->spare = c;
		t->nspare++;
	}
	return 0;
}

/* A command for the next transition: one put by, or a new one (NULL: out
 * of memory, and the transition changes nothing). */
static struct scanner_cmd *cmd_take(struct slot_table *t)
{
	struct scanner_cmd *c = t->spare;

	if (!c)
		return malloc(sizeof(*c));
	t->spare = c->next;
	t->nspare--;
	return c;
}

/* c, filled in as cmd says, about this table's region, to the scanner. */
static void cmd_send(struct slot_table *t, struct scanner_cmd *c, struct scanner_cmd cmd)
{
	*c = cmd;
	c->sess = t->sess;
	c->owner = t->owner;
	t->submit(t->submit_arg, c);
}

/* How every transition that sends starts: illegal (an errno, asserted) or
 * not, then a command in hand (else -ENOMEM). 0, or what it returns. */
static int begin(struct slot_table *t, int illegal, struct scanner_cmd **c)
{
	if (illegal)
		return ILLEGAL(illegal);
	return (*c = cmd_take(t)) ? 0 : -ENOMEM;
}

/* ---------------------------------------------------------------- */
/* The table                                                         */
/* ---------------------------------------------------------------- */

int slot_table_start(struct slot_table *t, uint32_t head)
{
	struct scanner_cmd *c = t->start_cmd;

	if (t->scanned != SLOTS_HELD)
		return ILLEGAL(-EINVAL);
	t->start_cmd = NULL;
	t->scanned = SLOTS_SCANNED;
	cmd_send(t, c, (struct scanner_cmd){ .op = SCAN_ADD_SESSION, .start = head });
	return 0;
}

int slot_table_stop(struct slot_table *t)
{
	struct scanner_cmd *c;
	int rc = begin(t, t->scanned == SLOTS_GONE ? -EINVAL : 0, &c);

	if (rc)
		return rc;
	/* A resume dropped while adopting keeps its ADD_SESSION (freed with
	 * the table): see session_drop. */
	t->scanned = SLOTS_GONE;
	cmd_send(t, c, (struct scanner_cmd){ .op = SCAN_DEL_SESSION });
	return 0;
}

int slot_fds_may_take(const struct slot_table *t, uint32_t nfds, const char **why)
{
	enum user_refusal r = users_admit(t->users, t->user, t->user->uid, USER_FDS, nfds);

	if (r == USER_OK)
		return 0;
	*why = users_refusal_why(USER_FDS, r);
	return r == USER_NODE_FULL ? -EMFILE : -EDQUOT;
}

/* ---------------------------------------------------------------- */
/* Slots                                                             */
/* ---------------------------------------------------------------- */

/* Whether a transition of slot id from state from may be made: 0 or its
 * errno (illegal). */
static int may_move(const struct slot_table *t, uint32_t id, enum slot_state from)
{
	if (t->scanned == SLOTS_GONE)
		return -EPIPE;
	if (id >= t->n || t->state[id] != from)
		return -EINVAL;
	return 0;
}

/* The same for an opening (SLOT_ANY: *id becomes the free one on top). */
static int may_open(const struct slot_table *t, uint32_t *id, uint32_t group)
{
	if (t->scanned == SLOTS_GONE)
		return -EPIPE;
	if (*id == SLOT_ANY) {
		if (!t->nfree)
			return -ENOSPC;
		*id = t->free_stack[t->nfree - 1];
	}
	if (!slot_table_group_ok(t, group))
		return -EINVAL;
	return may_move(t, *id, SLOT_FREE);
}

/* Take id off the free stack: the last free id fills its place. */
static void take_free(struct slot_table *t, uint32_t id)
{
	uint32_t k = t->free_pos[id], last = t->free_stack[--t->nfree];

	t->free_stack[k] = last;
	t->free_pos[last] = k;
}

/* The opening every way shares: FREE -> LIVE, counted, and the command to
 * send it with taken. The id, or a negative errno with nothing changed. */
static int open_slot(struct slot_table *t, uint32_t id, int efd, uint32_t group,
		     struct scanner_cmd **c)
{
	int rc = begin(t, may_open(t, &id, group), c);

	if (rc)
		return rc;
	take_free(t, id);
	t->state[id] = SLOT_LIVE;
	t->efd[id] = group ? -1 : efd;
	t->group[id] = group;
	t->nlive++;
	if (group)
		t->group_live[group - 1]++;
	user_hold(t->users, t->user, USER_FDS, (int32_t)slot_fd_cost(group, 1));
	assert_left(t, id, SLOT_LIVE);
	return (int)id;
}

int slot_open(struct slot_table *t, uint32_t id, int efd, uint32_t group)
{
	struct scanner_cmd *c = NULL;
	int rc = open_slot(t, id, efd, group, &c);
	uint32_t start;

	if (rc < 0)
		return rc;
	start = t->next_start[rc];
	/* Written here and recorded by the scanner: never read back from the
	 * flag, so an early device write counts. */
	atomic_store_explicit((_Atomic uint32_t *)&t->flags[rc], start, memory_order_release);
	cmd_send(t, c, (struct scanner_cmd){ .op = SCAN_ADD_SLOT, .slot = (uint32_t)rc,
					     .start = start, .armed = start, .efd = t->efd[rc],
					     .group = group });
	return rc;
}

int slot_adopt(struct slot_table *t, uint32_t id, int efd, uint32_t group,
	       const struct cuflag_slot_state *rec)
{
	struct scanner_cmd *c = NULL;
	int rc = id == SLOT_ANY ? ILLEGAL(-EINVAL) : open_slot(t, id, efd, group, &c);

	if (rc < 0)
		return rc;
	cmd_send(t, c, (struct scanner_cmd){ .op = SCAN_ADD_SLOT, .slot = id,
					     .start = rec->signalled, .armed = rec->armed,
					     .efd = t->efd[id], .group = group });
	return rc;
}

int slot_import(struct slot_table *t, const struct slot_import *im)
{
	struct scanner_cmd *c = NULL;
	int rc = open_slot(t, im->id, im->efd, im->group, &c);

	if (rc < 0)
		return rc;
	cmd_send(t, c, (struct scanner_cmd){ .op = SCAN_ADD_IMPORT, .slot = (uint32_t)rc,
					     .efd = t->efd[rc], .group = im->group,
					     .start = im->start, .src_sess = im->src,
					     .src_slot = im->src_slot, .resume = im->resume,
					     .req_id = im->req_id });
	return rc;
}

int slot_retire(struct slot_table *t, uint32_t id)
{
	struct scanner_cmd *c;
	int rc = begin(t, may_move(t, id, SLOT_LIVE), &c);

	if (rc)
		return rc;
	t->state[id] = SLOT_RETIRING;
	t->nlive--;
	t->nretiring++;
	if (t->group[id])
		t->group_live[t->group[id] - 1]--;
	assert_left(t, id, SLOT_RETIRING);
	cmd_send(t, c, (struct scanner_cmd){ .op = SCAN_DEL_SLOT, .slot = id });
	return 0;
}

int slot_reclaim(struct slot_table *t, uint32_t id, uint32_t next_start)
{
	int efd;

	/* The answer to a DEL_SLOT: legal while GONE too (the scanner hands a
	 * retiring slot's back with its session's). */
	if (id >= t->n || t->state[id] != SLOT_RETIRING)
		return ILLEGAL(-1);
	efd = t->efd[id];
	user_hold(t->users, t->user, USER_FDS, -(int32_t)slot_fd_cost(t->group[id], 1));
	t->efd[id] = -1;
	t->state[id] = SLOT_FREE;
	t->group[id] = 0;
	t->next_start[id] = next_start;
	t->nretiring--;
	t->free_pos[id] = t->nfree;
	t->free_stack[t->nfree++] = id;
	assert_left(t, id, SLOT_FREE);
	return efd;
}

struct slot_done slot_table_done(struct slot_table *t, const struct scanner_cmd *c)
{
	switch (c->op) {
	case SCAN_SET_EFD:
		return (struct slot_done){ .close_fd = c->efd, .then = SLOT_DONE_BIND };
	case SCAN_SET_GROUP:
		return (struct slot_done){ .close_fd = c->efd, .then = SLOT_DONE_NOTHING };
	case SCAN_DEL_SLOT:
		/* No device write can land any more: the slot may be handed out
		 * again, its next timeline past the old one. */
		return (struct slot_done){
			.close_fd = slot_reclaim(t, c->slot, c->final_armed + RESTART_GAP),
			.then = SLOT_DONE_FREED };
	case SCAN_ADD_IMPORT:
		return (struct slot_done){ .close_fd = -1, .then = SLOT_DONE_IMPORT };
	case SCAN_DEL_SESSION:
		return (struct slot_done){ .close_fd = -1, .then = SLOT_DONE_GONE };
	case SCAN_ADD_SESSION:
	case SCAN_ADD_SLOT:
	case SCAN_LINK_IMPORT:
		break;
	}
	return (struct slot_done){ .close_fd = -1, .then = SLOT_DONE_NOTHING };
}

int slot_bind(struct slot_table *t, uint32_t id, int efd, uint32_t req_id)
{
	struct scanner_cmd *c;
	int rc = may_move(t, id, SLOT_LIVE);

	if (!rc && t->group[id])
		rc = -EOPNOTSUPP; /* its group's eventfd is what it signals */
	if ((rc = begin(t, rc, &c)))
		return rc;
	t->efd[id] = efd;
	assert_left(t, id, SLOT_LIVE);
	cmd_send(t, c, (struct scanner_cmd){ .op = SCAN_SET_EFD, .slot = id, .efd = efd,
					     .req_id = req_id });
	return 0;
}

int slot_link_import(struct slot_table *t, uint32_t id, struct scanner_session *src,
		     uint32_t src_slot)
{
	struct scanner_cmd *c;
	int rc = begin(t, may_move(t, id, SLOT_LIVE), &c);

	if (rc)
		return rc;
	assert_left(t, id, SLOT_LIVE);
	cmd_send(t, c, (struct scanner_cmd){ .op = SCAN_LINK_IMPORT, .slot = id, .src_sess = src,
					     .src_slot = src_slot });
	return 0;
}

/* ---------------------------------------------------------------- */
/* Groups                                                            */
/* ---------------------------------------------------------------- */

/* Whether group id may be made (want_made) or unmade: 0 or its errno. */
static int may_group(const struct slot_table *t, uint32_t id, int want_made)
{
	if (t->scanned == SLOTS_GONE)
		return -EPIPE;
	if (id >= t->ngroups || (t->group_efd[id] >= 0) == want_made)
		return -EINVAL;
	return !want_made && t->group_live[id] ? -EBUSY : 0;
}

/* Group id made (efd >= 0) or unmade (-1), and SCAN_SET_GROUP sent; the
 * old eventfd comes back from the scanner. */
static int group_set(struct slot_table *t, uint32_t id, int efd, int illegal)
{
	struct scanner_cmd *c;
	int rc = begin(t, illegal, &c);

	if (rc)
		return rc;
	user_hold(t->users, t->user, USER_FDS, efd >= 0 ? 1 : -1);
	t->group_efd[id] = efd;
	assert(slot_table_group_ok(t, id + 1) == (efd >= 0) && (efd >= 0 || !t->group_live[id]));
	cmd_send(t, c, (struct scanner_cmd){ .op = SCAN_SET_GROUP, .slot = id, .efd = efd });
	return 0;
}

int slot_group_make(struct slot_table *t, uint32_t id, int efd)
{
	int rc = may_group(t, id, 1);

	return group_set(t, id, efd, rc ? rc : efd < 0 ? -EINVAL : 0);
}

int slot_group_unmake(struct slot_table *t, uint32_t id)
{
	return group_set(t, id, -1, may_group(t, id, 0));
}

/* ---------------------------------------------------------------- */
/* Queries, and the end                                              */
/* ---------------------------------------------------------------- */

void slot_table_release(struct slot_table *t, void (*close_fd)(void *arg, int fd), void *arg)
{
	int32_t held = 0;

	for (uint32_t i = 0; i < t->n; i++) {
		if (t->state[i] != SLOT_FREE)
			held += (int32_t)slot_fd_cost(t->group[i], 1);
		close_fd(arg, t->efd[i]);
		t->efd[i] = -1;
	}
	for (uint32_t g = 0; g < t->ngroups; g++) {
		held += t->group_efd[g] >= 0;
		close_fd(arg, t->group_efd[g]);
		t->group_efd[g] = -1;
	}
	if (t->user)
		user_hold(t->users, t->user, USER_FDS, -held);
}

int slot_table_group_ok(const struct slot_table *t, uint32_t group)
{
	return !group || (group <= t->ngroups && t->group_efd[group - 1] >= 0);
}

int slot_table_all_in(const struct slot_table *t, const uint32_t *ids, uint32_t count,
		      enum slot_state want)
{
	for (uint32_t i = 0; i < count; i++) {
		if (ids[i] >= t->n || t->state[ids[i]] != want)
			return 0;
		for (uint32_t j = 0; j < i; j++)
			if (ids[j] == ids[i])
				return 0;
	}
	return 1;
}
