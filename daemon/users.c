/* SPDX-License-Identifier: MIT */
#include "users.h"

#include <stdlib.h>

static unsigned bucket_of(uid_t uid)
{
	return ((uint32_t)uid * 2654435761u) >> 24; /* USERS_BUCKETS = 256 */
}

struct user *user_find(struct users *t, uid_t uid)
{
	for (struct user *u = t->bucket[bucket_of(uid)]; u; u = u->next)
		if (u->uid == uid)
			return u;
	return NULL;
}

struct user *user_get(struct users *t, uid_t uid, uint32_t rate, uint32_t max_pending,
		      uint64_t now_ms)
{
	struct user **b = &t->bucket[bucket_of(uid)];
	struct user *u = user_find(t, uid);

	if (u) {
		u->refs++;
		return u;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->uid = uid;
	u->refs = 1;
	u->rate = (struct rate_bucket){ .tokens = rate, .at_ms = now_ms };
	u->scan.max_pending = uid == 0 ? UINT32_MAX : max_pending;
	u->next = *b;
	*b = u;
	t->count++;
	return u;
}

void user_put(struct users *t, struct user *u)
{
	if (!u || --u->refs)
		return;
	for (struct user **p = &t->bucket[bucket_of(u->uid)]; *p; p = &(*p)->next)
		if (*p == u) {
			*p = u->next;
			break;
		}
	t->count--;
	free(u);
}

int rate_take(struct rate_bucket *b, uint32_t rate, uint64_t now_ms)
{
	b->tokens += (double)(now_ms - b->at_ms) * rate / 1000.0;
	b->at_ms = now_ms;
	if (b->tokens > rate)
		b->tokens = rate;
	if (b->tokens < 1.0)
		return 0;
	b->tokens -= 1.0;
	return 1;
}

void users_clear(struct users *t)
{
	for (unsigned i = 0; i < USERS_BUCKETS; i++)
		while (t->bucket[i]) {
			struct user *u = t->bucket[i];
			t->bucket[i] = u->next;
			free(u);
		}
	t->count = 0;
}
