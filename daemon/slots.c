/* SPDX-License-Identifier: MIT */
#include "slots.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int slot_table_init(struct slot_table *t, uint32_t n, uint32_t ngroups)
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

uint32_t slot_table_take(struct slot_table *t)
{
	return t->free_stack[--t->nfree];
}

void slot_table_take_id(struct slot_table *t, uint32_t id)
{
	uint32_t k = t->free_pos[id], last = t->free_stack[--t->nfree];

	/* The last free id fills the hole (a resume names ids in any order). */
	t->free_stack[k] = last;
	t->free_pos[last] = k;
}

void slot_table_give(struct slot_table *t, uint32_t id)
{
	t->free_pos[id] = t->nfree;
	t->free_stack[t->nfree++] = id;
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
