/* SPDX-License-Identifier: MIT */
/*
 * Per-user (uid) accounting: what each user holds (connections, regions,
 * daemon fds), its request rate, its log lines, and its share of the
 * scanner (scanner/user.h). Every count of what a user holds changes in
 * user_hold(), and every limit on it is decided in users_admit(), so that no
 * single user can take more than its share of the node, however many
 * connections it opens, and a user holding nothing always finds room. Main
 * thread only.
 */
#ifndef CUFLAGD_USERS_H
#define CUFLAGD_USERS_H

#include <stdint.h>
#include <sys/types.h>

#include "base/log.h"
#include "list.h"
#include "policy/loop-price.h"
#include "scanner/user.h"

/* A request rate: a token bucket refilled at rate per second. */
struct rate_bucket {
	double tokens;
	uint64_t at_ms;
};
/* Take one token; 1 when the request may be served. */
int rate_take(struct rate_bucket *b, uint32_t rate, uint64_t now_ms);

/* What a user holds of the node's. */
enum user_res {
	USER_CONNS,   /* open connections, HELLO or not */
	USER_REGIONS, /* sessions holding a region */
	USER_FDS,     /* eventfds the daemon holds for it: slots of their own
		       * (made by ALLOC, handed over by ADOPT, swapped by BIND)
		       * and groups; a grouped slot costs none */
	USER_NRES,
};

struct user {
	uid_t uid;
	uint32_t refs;     /* sessions pointing here */
	uint32_t held[USER_NRES];
	uint64_t idle_since_ms; /* refs fell to 0 then: reaped a while later */
	struct rate_bucket rate; /* requests of all its connections */
	/* Lines its clients can cause, over all its connections (user_log_ok):
	 * notices and below, warnings and above, each its own budget, so that
	 * "connected" lines never hide a drop. */
	struct cuflagd_ratelimit rl[2];
	struct scanner_user scan;
	struct loop_budget loop; /* its share of the main loop (answer.h) */
	LIST_FIELDS(struct user, chain); /* its bucket's */
};

#define USERS_BUCKETS 256

struct users {
	struct user *bucket[USERS_BUCKETS];
	uint32_t count;
	uint32_t total[USER_NRES];    /* summed over every user */
	uint32_t cap[USER_NRES];      /* the node's room */
	uint32_t user_cap[USER_NRES]; /* one user's (root: none) */
	uint32_t rate, max_pending;   /* what a new user starts with */
	struct loop_budget_cfg loop;  /* each user's share of the main loop */
};

/* Why users_admit() refused (0: it did not). */
enum user_refusal {
	USER_OK = 0,
	USER_NODE_FULL,  /* the node has no room left */
	USER_OVER_QUOTA, /* the user holds its user_cap */
	USER_OVER_SHARE, /* the node is nearly full and the user holds more than
			  * it would leave to the others */
};

/*
 * Whether u (NULL: a user holding nothing yet) may take want more of r now.
 * The last eighth of the node's room (none under 8) is kept for the users
 * holding least: in it, a user may take only while what it holds is no more
 * than what stays free after the grant, so a user holding nothing gets in
 * while one unit is free, and no set of users that took their shares can
 * lock out the next one. Root is held only to the node's room.
 */
enum user_refusal users_admit(const struct users *t, const struct user *u, uint32_t uid,
			      enum user_res r, uint32_t want);
/* A refusal for the log and the client ("max-clients-per-uid reached"...). */
const char *users_refusal_why(enum user_res r, enum user_refusal why);

/* The one place a count changes: u now holds delta more (or less) of r. */
void user_hold(struct users *t, struct user *u, enum user_res r, int32_t delta);

/* The user of uid, made on first use (refs counted by the caller with
 * user_get / user_put) with the request rate and share of the pending set
 * in t (root: no share, it may take all). NULL when out of memory. */
struct user *user_get(struct users *t, uid_t uid, uint64_t now_ms);
/* The user of uid if it has an entry, else NULL. */
struct user *user_find(struct users *t, uid_t uid);
/* Drop a reference. The entry stays a while after the last one (its log
 * and request limits must outlive a reconnect: users_reap). Only once the
 * scanner no longer refers to it (its sessions were handed back). */
void user_put(struct users *t, struct user *u);

/* Whether a line of priority prio a client of u caused may be logged: 20
 * warnings (and worse) and 20 other lines a second per user, whatever the
 * connection (root: all). */
int user_log_ok(struct user *u, int prio);

/* Each tick: say how many lines of each user were held back, and free the
 * entries nobody referred to for a while. */
void users_tick(struct users *t, uint64_t now_ms);

/* Free every entry (at exit). */
void users_clear(struct users *t);

#endif
