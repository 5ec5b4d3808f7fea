/* SPDX-License-Identifier: MIT */
#include "serve/users.h"

#include <stdlib.h>

/* A user's lines: this many a second, over all its connections. */
#define USER_LOG_BURST 20
#define USER_LOG_INTERVAL_MS 1000
/* An entry nobody refers to is kept this long: a user that reconnects
 * finds its log and request limits as it left them. */
#define USER_KEEP_MS 10000

static unsigned bucket_of(uid_t uid)
{
	return ((uint32_t)uid * 2654435761u) >> 24; /* USERS_BUCKETS = 256 */
}

struct user *user_find(struct users *t, uid_t uid)
{
	for (struct user *u = t->bucket[bucket_of(uid)]; u; u = u->chain_next)
		if (u->uid == uid)
			return u;
	return NULL;
}

struct user *user_get(struct users *t, uid_t uid, uint64_t now_ms)
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
	u->rate = (struct rate_bucket){ .tokens = t->rate, .at_ms = now_ms };
	for (int k = 0; k < 2; k++)
		u->rl[k] = (struct cuflagd_ratelimit){ .interval_ms = USER_LOG_INTERVAL_MS,
						       .burst = USER_LOG_BURST };
	u->scan.max_pending = uid == 0 ? UINT32_MAX : t->max_pending;
	loop_budget_init(&u->loop, &t->loop, now_ms * 1000000u);
	LIST_PREPEND(chain, *b, u);
	t->count++;
	return u;
}

void user_put(struct users *t, struct user *u)
{
	(void)t;
	if (u && !--u->refs)
		u->idle_since_ms = cuflag_now_ms();
}

void user_hold(struct users *t, struct user *u, enum user_res r, int32_t delta)
{
	u->held[r] += (uint32_t)delta;
	t->total[r] += (uint32_t)delta;
}

enum user_refusal users_admit(const struct users *t, const struct user *u, uint32_t uid,
			      enum user_res r, uint32_t want)
{
	uint64_t cap = t->cap[r], total = t->total[r], held = u ? u->held[r] : 0;
	uint64_t left;

	if (total + want > cap)
		return USER_NODE_FULL;
	if (uid == 0)
		return USER_OK;
	if (held + want > t->user_cap[r])
		return USER_OVER_QUOTA;
	left = cap - total - want;
	if (left < cap / 8 && held > left)
		return USER_OVER_SHARE;
	return USER_OK;
}

const char *users_refusal_why(enum user_res r, enum user_refusal why)
{
	static const char *const whys[USER_NRES][4] = {
		[USER_CONNS] = { NULL, "too many connections", "max-connections-per-uid reached",
				 "connections nearly all taken, this user holds its share" },
		[USER_REGIONS] = { NULL, "max-clients reached", "max-clients-per-uid reached",
				   "clients nearly all taken, this user holds its share" },
		[USER_FDS] = { NULL, "daemon out of fds", "max-slots-per-uid reached",
			       "daemon fds nearly all taken, this user holds its share" },
	};
	return whys[r][why];
}

/* The line that says what was held back, once its window is over. */
static void log_suppressed(struct user *u, struct cuflagd_ratelimit *rl, uint64_t now)
{
	if (now - rl->window_start_ms < rl->interval_ms)
		return;
	if (rl->suppressed)
		cuflagd_log(LOG_WARNING, "%u lines suppressed for uid %u (%s lines)", rl->suppressed,
			    (unsigned)u->uid, rl == &u->rl[1] ? "warning" : "notice");
	rl->window_start_ms = now;
	rl->used = 0;
	rl->suppressed = 0;
}

int user_log_ok(struct user *u, int prio)
{
	struct cuflagd_ratelimit *rl = &u->rl[prio <= LOG_WARNING];

	if (u->uid == 0)
		return 1; /* trusted, as everywhere: its lines are the operator's */
	log_suppressed(u, rl, cuflag_now_ms());
	if (rl->used < rl->burst) {
		rl->used++;
		return 1;
	}
	rl->suppressed++;
	return 0;
}

void users_tick(struct users *t, uint64_t now_ms)
{
	for (unsigned i = 0; i < USERS_BUCKETS; i++)
		for (struct user *u = t->bucket[i], *n; u; u = n) {
			n = u->chain_next;
			log_suppressed(u, &u->rl[0], now_ms);
			log_suppressed(u, &u->rl[1], now_ms);
			if (u->refs || now_ms - u->idle_since_ms < USER_KEEP_MS || u->rl[0].suppressed ||
			    u->rl[1].suppressed)
				continue;
			LIST_REMOVE(chain, t->bucket[i], u);
			t->count--;
			free(u);
		}
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
			LIST_REMOVE(chain, t->bucket[i], u);
			free(u);
		}
	t->count = 0;
}
