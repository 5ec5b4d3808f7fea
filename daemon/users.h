/* SPDX-License-Identifier: MIT */
/*
 * Per-user (uid) accounting: what each user holds (connections, regions,
 * slots), its request rate, and its share of the scanner (scanner.h). The
 * limits that hold per uid are checked against these, so that no single user
 * can take more than its share of the node, however many connections it
 * opens. Main thread only.
 */
#ifndef CUFLAGD_USERS_H
#define CUFLAGD_USERS_H

#include <stdint.h>
#include <sys/types.h>

#include "scanner.h"

/* A request rate: a token bucket refilled at rate per second. */
struct rate_bucket {
	double tokens;
	uint64_t at_ms;
};
/* Take one token; 1 when the request may be served. */
int rate_take(struct rate_bucket *b, uint32_t rate, uint64_t now_ms);

struct user {
	uid_t uid;
	uint32_t refs;     /* sessions pointing here */
	uint32_t conns;    /* open connections */
	uint32_t regions;  /* sessions holding a region */
	uint32_t slots;    /* slots held or retiring */
	struct rate_bucket rate; /* requests of all its connections */
	struct scanner_user scan;
	struct user *next; /* hash chain */
};

#define USERS_BUCKETS 256

struct users {
	struct user *bucket[USERS_BUCKETS];
	uint32_t count;
};

/* The user of uid, made on first use (refs counted by the caller with
 * user_get / user_put) with a request rate and a share of the pending set
 * (root: no share, it may take all). NULL when out of memory. */
struct user *user_get(struct users *t, uid_t uid, uint32_t rate, uint32_t max_pending,
		      uint64_t now_ms);
/* The user of uid if it has any session, else NULL. */
struct user *user_find(struct users *t, uid_t uid);
/* Drop a reference; the entry goes with the last one. Only once the scanner
 * no longer refers to it (its sessions were handed back). */
void user_put(struct users *t, struct user *u);

/* Free every entry (at exit). */
void users_clear(struct users *t);

#endif
