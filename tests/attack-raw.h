/* SPDX-License-Identifier: MIT */
/*
 * A session spoken on the wire, for attacks the library would not make: a
 * region of the attacker's own, mapped, so that it can say what it likes in
 * the slot states a resuming ATTACH hands over, write arms into the queue
 * and wind flags back; and a watch, from root, on what the daemon says a
 * user has pending.
 */
#ifndef CUFLAG_TEST_ATTACK_RAW_H
#define CUFLAG_TEST_ATTACK_RAW_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "cuflag-proto.h"
#include "proto.h"

#define RAW_GROUPS_MAX 64

struct raw_sess {
	int sock, region, wake;
	int group_efd[RAW_GROUPS_MAX];
	uint32_t req_id;
	uint8_t *map;
	struct cuflag_region_layout l;
	volatile uint32_t *flags;
	volatile struct cuflag_slot_state *states;
};

/* Connect, HELLO, make and map a region for the layout offered (not yet
 * attached: its slot states may be written first). 0 or -errno. */
int raw_open(struct raw_sess *r);
/* One request of type with body and fds, its reply: the status (-EPIPE when
 * none came); up to cap bytes of the reply's body into out, its fds closed. */
int raw_call(struct raw_sess *r, uint16_t type, const void *body, uint32_t blen, const int *fds,
	     unsigned nfds, void *out, size_t cap);
/* ATTACH the region: slots > 0 resumes (that many ADOPTs to follow). The
 * reply's status. */
int raw_attach(struct raw_sess *r, uint32_t slots, uint64_t epoch);
/* GROUP g with an eventfd of ours. The reply's status. */
int raw_group(struct raw_sess *r, uint32_t g);
/* ADOPT n (<= CUFLAG_BATCH_MAX) slots of group g (g + 1 on the wire). */
int raw_adopt_grouped(struct raw_sess *r, uint32_t g, const uint32_t *ids, uint32_t n);
/* ALLOC n slots of group g; the grants into out. The reply's status. */
int raw_alloc_grouped(struct raw_sess *r, uint32_t g, uint32_t n, struct cuflag_slot_grant *out);
/* FREE n ids. The reply's status. */
int raw_free(struct raw_sess *r, const uint32_t *ids, uint32_t n);
/* Queue an arm (the caller keeps within the queue's room); raw_kick after. */
void raw_arm(struct raw_sess *r, uint32_t slot, uint32_t target);
/* Wake the scanner for the arms queued (a write of the wake eventfd). */
void raw_kick(struct raw_sess *r);
/* Arms still in the queue, not taken by the daemon. */
uint32_t raw_queued(const struct raw_sess *r);
/* Group g's completion ring. */
volatile struct cuflag_group_ring *raw_ring(const struct raw_sess *r, uint32_t g);
/* Hang up: the socket, the region (unmapped, its memfd closed), the fds. */
void raw_close(struct raw_sess *r);

/*
 * What the daemon says uid has (METRICS, as root): its user record's
 * pending, and its clients' in_flight summed (slots with arms in flight,
 * waiting for room in the user's share or not). 0 or -errno.
 */
int user_pending(uid_t uid, uint32_t *pending, uint32_t *in_flight, uint32_t *slots);

/* A thread asking user_pending() every 20 ms, keeping the highest. */
struct pending_watch {
	pthread_t th;
	uid_t uid;
	_Atomic int stop;
	_Atomic uint32_t max_pending, max_in_flight, last_pending, last_in_flight, last_slots;
	_Atomic unsigned samples, errors;
};
void pending_watch_start(struct pending_watch *w, uid_t uid);
void pending_watch_stop(struct pending_watch *w);

/* The daemon scanner's CPU time so far (STATS), ns, and its passes; 0 when
 * not answered. */
uint64_t scanner_cpu_ns(uint64_t *passes);

#endif
