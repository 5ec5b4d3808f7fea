/* SPDX-License-Identifier: MIT */
#include "slots.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int slot_table_init(struct slot_table *t, uint32_t n, uint32_t ngroups, struct users *users,
		    struct user *u)
{
	memset(t, 0, sizeof(*t));
	t->state = calloc(n, 1);
	t->efd = malloc(sizeof(int) * n);
	t->group = calloc(n, sizeof(uint32_t));
	t->next_start = calloc(n, sizeof(uint32_t));
	t->free_stack = malloc(sizeof(uint32_t) * n);
	t->free_pos = malloc(sizeof(uint32_t) * n);
	t->group_efd = malloc(sizeof(int) * (ngroups ? ngroups : 1));
	t->group_live = calloc(ngroups ? ngroups : 1, sizeof(uint32_t));
	if (!t->state || !t->efd || !t->group || !t->next_start || !t->free_stack ||
	    !t->free_pos || !t->group_efd || !t->group_live) {
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
	t->users = users;
	t->user = u;
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
	memset(t, 0, sizeof(*t));
}

int slot_fds_may_take(const struct slot_table *t, uint32_t nfds, const char **why)
{
	enum user_refusal r = users_admit(t->users, t->user, t->user->uid, USER_FDS, nfds);

	if (r == USER_OK)
		return 0;
	*why = users_refusal_why(USER_FDS, r);
	return r == USER_NODE_FULL ? -EMFILE : -EDQUOT;
}

/* Take id off the free stack: the last free id fills its place. */
static void take_free(struct slot_table *t, uint32_t id)
{
	uint32_t k = t->free_pos[id], last = t->free_stack[--t->nfree];

	t->free_stack[k] = last;
	t->free_pos[last] = k;
}

uint32_t slot_open(struct slot_table *t, uint32_t id, int efd, uint32_t group)
{
	if (id == SLOT_ANY)
		id = t->free_stack[t->nfree - 1];
	take_free(t, id);
	t->state[id] = SLOT_LIVE;
	t->efd[id] = group ? -1 : efd;
	t->group[id] = group;
	t->nlive++;
	if (group)
		t->group_live[group - 1]++;
	user_hold(t->users, t->user, USER_FDS, (int32_t)slot_fd_cost(group, 1));
	return id;
}

void slot_retire(struct slot_table *t, uint32_t id)
{
	t->state[id] = SLOT_RETIRING;
	t->nlive--;
	t->nretiring++;
	if (t->group[id])
		t->group_live[t->group[id] - 1]--;
}

int slot_reclaim(struct slot_table *t, uint32_t id, uint32_t next_start)
{
	int efd = t->efd[id];

	user_hold(t->users, t->user, USER_FDS, -(int32_t)slot_fd_cost(t->group[id], 1));
	t->efd[id] = -1;
	t->state[id] = SLOT_FREE;
	t->group[id] = 0;
	t->next_start[id] = next_start;
	t->nretiring--;
	t->free_pos[id] = t->nfree;
	t->free_stack[t->nfree++] = id;
	return efd;
}

int slot_bind(struct slot_table *t, uint32_t id, int efd)
{
	if (t->group[id])
		return -EOPNOTSUPP; /* its group's eventfd is what it signals */
	t->efd[id] = efd;
	return 0;
}

void slot_group_set(struct slot_table *t, uint32_t id, int efd)
{
	int32_t was = t->group_efd[id] >= 0, now = efd >= 0;

	t->group_efd[id] = efd;
	user_hold(t->users, t->user, USER_FDS, now - was);
}

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
