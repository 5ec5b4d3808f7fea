/* SPDX-License-Identifier: MIT */
#include "slots.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int slot_table_init(struct slot_table *t, uint32_t n)
{
	memset(t, 0, sizeof(*t));
	t->state = calloc(n, 1);
	t->efd = malloc(sizeof(int) * n);
	t->next_start = calloc(n, sizeof(uint32_t));
	t->free_stack = malloc(sizeof(uint32_t) * n);
	if (!t->state || !t->efd || !t->next_start || !t->free_stack) {
		slot_table_free(t);
		return -ENOMEM;
	}
	/* Low ids first: popped from the top of the stack. */
	for (uint32_t i = 0; i < n; i++) {
		t->efd[i] = -1;
		t->free_stack[i] = n - 1 - i;
	}
	t->n = t->nfree = n;
	return 0;
}

void slot_table_free(struct slot_table *t)
{
	free(t->state);
	free(t->efd);
	free(t->next_start);
	free(t->free_stack);
	memset(t, 0, sizeof(*t));
}

uint32_t slot_table_take(struct slot_table *t)
{
	return t->free_stack[--t->nfree];
}

void slot_table_take_id(struct slot_table *t, uint32_t id)
{
	for (uint32_t k = 0; k < t->nfree; k++)
		if (t->free_stack[k] == id) {
			t->free_stack[k] = t->free_stack[--t->nfree];
			return;
		}
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
