/* SPDX-License-Identifier: MIT */
/*
 * Many cheap writes per pass. Users arm every slot they hold far ahead
 * (cuflag_slot_arm_many) and advance every flag by one each millisecond, so
 * that every scanner pass writes every one of their eventfds:
 *
 * - cheap-writes: one user, four connections' slots, all BOUND to one
 *   eventfd in 200 epolls, so each write costs some 10 us: under any
 *   per-write allowance, but a pass of thousands of them is tens of
 *   milliseconds;
 * - cheap-writes-users: three users, each with as many slots as its quota
 *   allows (--max-slots-per-uid), each slot its own eventfd with no watcher
 *   (a write of about 1 us): three floods in every pass, each of which alone
 *   used to come before the next user's writes;
 * - cheap-writes-16k: one user the same way, with the quota an operator may
 *   give it (--max-slots-per-uid 16384, what the unit's LimitNOFILE allows).
 *
 * The pass is shared between users (fair-share.h): the victim's wake must
 * not wait behind the floods, and the attackers, alike in what they do, must
 * get alike shares of the writes (each user's eventfd writes, as CLIENTS
 * counts them, over the same two seconds). The attackers misbehave only in
 * what they cost themselves, so they need not be dropped; the three users'
 * writes are cheap, so none of them may be.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "attacks.h"
#include "cuflag-proto.h"
#include "cuflag/cuflag.h"

#define SLOTS 1024 /* per connection: the daemon's default */
/* Connections enough for --max-slots-per-uid 16384, and one to be refused. */
#define CONNS_MAX 17
/* 200 epolls make a write cost 10-20 us here (600 make it 200 us: not
 * cheap any more, and the write budget drops the writer). */
#define EPOLLS 200
#define AHEAD 100000u
#define RUN_MS 3000
/* The writes counted for the shares: the run less its first and last half
 * second (set-up and hang-up not in it). */
#define SHARE_SKIP_MS 500
#define USERS_MAX 3
/* The least share of the busiest attacker's writes each attacker must get. */
#define FAIR_MIN 0.5

static const uid_t cheap_uids[USERS_MAX] = { UID_ATTACKER, 60011, 60012 };

struct cheap_user {
	_Atomic int slots, epolls, ready, done, err;
	_Atomic long advanced;
};

struct cheap {
	int conns;  /* connections a user opens (it takes slots until refused) */
	int epolls; /* > 0: every slot BOUND to one eventfd in that many epolls */
	_Atomic int stop;
	struct cheap_user u[USERS_MAX];
};

struct cheap_arg {
	struct cheap *ch;
	struct cheap_user *u;
};

/* Slots on c until refused or n in all, each armed AHEAD (and BOUND to efd
 * when it is >= 0). The slots now held in all. */
static int take_slots(cuflag_client *c, int efd, cuflag_slot **s, uint32_t *next, int n,
		      int cap, int *err)
{
	while (n < cap && !(*err = cuflag_slot_acquire(c, &s[n]))) {
		uint32_t first;
		if ((efd >= 0 && (*err = cuflag_slot_bind_eventfd(s[n], efd))) ||
		    (*err = cuflag_slot_arm_many(s[n], AHEAD, &first))) {
			cuflag_slot_release(s[n]);
			break;
		}
		next[n++] = first;
	}
	return n;
}

static void cheap_main(void *arg)
{
	struct cheap_arg *a = arg;
	struct cheap *ch = a->ch;
	static cuflag_slot *s[CONNS_MAX * SLOTS];
	static uint32_t next[CONNS_MAX * SLOTS];
	cuflag_client *c[CONNS_MAX];
	int efd = -1, eps[EPOLLS], n = 0, neps = 0, k = 0, err = 0;

	if (ch->epolls > 0) {
		efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		CHECK(efd >= 0);
	}
	for (; neps < ch->epolls; neps++) {
		struct epoll_event ev = { .events = EPOLLIN };
		eps[neps] = epoll_create1(EPOLL_CLOEXEC);
		if (eps[neps] < 0 || epoll_ctl(eps[neps], EPOLL_CTL_ADD, efd, &ev) < 0)
			break;
	}
	/* Each connection its slots until the daemon says no. */
	for (; k < ch->conns && !err; k++) {
		CHECK_RC(cuflag_connect(attack_daemon.sock, &c[k]));
		n = take_slots(c[k], efd, s, next, n, (k + 1) * SLOTS, &err);
	}
	atomic_store(&a->u->slots, n);
	atomic_store(&a->u->epolls, neps);
	atomic_store(&a->u->err, err);
	attack_mark("uid %d: %d slots, %d epolls, then %d", (int)getuid(), n, neps, err);
	atomic_store(&a->u->ready, 1);
	while (!atomic_load(&ch->stop)) {
		struct timespec ts = { 0, 1000000 };
		for (int i = 0; i < n; i++)
			sim_store(cuflag_slot_flag(s[i]), next[i]++);
		atomic_fetch_add(&a->u->advanced, n);
		nanosleep(&ts, NULL);
	}
	attack_mark("uid %d: advanced %ld flags", (int)getuid(), atomic_load(&a->u->advanced));
	for (int i = 0; i < k; i++)
		cuflag_disconnect(c[i]);
	for (int i = 0; i < neps; i++)
		close(eps[i]);
	if (efd >= 0)
		close(efd);
	atomic_store(&a->u->done, 1);
}

/* Each attacker's eventfd writes so far, as CLIENTS counts them. */
struct tally {
	int users;
	uint64_t *wakes;
};

static void tally_one(const struct cuflag_msg_client_info *ci, void *arg)
{
	struct tally *t = arg;

	for (int k = 0; k < t->users; k++)
		if (ci->uid == cheap_uids[k])
			t->wakes[k] += ci->wakes;
}

static void writes_now(int users, uint64_t *wakes)
{
	struct tally t = { users, wakes };
	int rc;

	memset(wakes, 0, sizeof(*wakes) * (size_t)users);
	if ((rc = clients_each(tally_one, &t)))
		fail("CLIENTS: %s", strerror(-rc));
}

/* users attackers, all set up before any flag moves; each one's writes
 * counted over the same stretch. */
static void run(struct window *w, struct cheap *ch, int users, uint64_t *writes)
{
	struct cheap_arg *a = shm_alloc(sizeof(*a) * USERS_MAX);
	uint64_t w0[USERS_MAX], w1[USERS_MAX];
	pid_t pid[USERS_MAX];
	int k;

	for (k = 0; k < users; k++) {
		a[k] = (struct cheap_arg){ ch, &ch->u[k] };
		pid[k] = spawn_user(cheap_uids[k], 0, cheap_main, &a[k]);
	}
	for (k = 0; k < users; k++)
		if (!wait_flag(&ch->u[k].ready, 1, 60000))
			fail("%s: attacker %d did not set up", w->name, k);
	usleep(SHARE_SKIP_MS * 1000);
	writes_now(users, w0);
	usleep((RUN_MS - 2 * SHARE_SKIP_MS) * 1000);
	writes_now(users, w1);
	usleep(SHARE_SKIP_MS * 1000);
	atomic_store(&ch->stop, 1);
	for (k = 0; k < users; k++) {
		writes[k] = w1[k] - w0[k];
		if (child_wait(pid[k], 20000) != 0)
			fail("%s: attacker %d did not finish", w->name, k);
	}
}

void attack_cheap_writes(void)
{
	struct cheap *ch = shm_alloc(sizeof(*ch));
	struct window w;
	uint64_t writes[USERS_MAX];

	ch->conns = 4;
	ch->epolls = EPOLLS;
	window_open(&w, "many cheap writes a pass: 4096 slots BOUND, 200 epolls, +1 each ms");
	run(&w, ch, 1, writes);
	snprintf(w.outcome, sizeof(w.outcome), "%d slots in %d epolls, %ld flags advanced, %s",
		 atomic_load(&ch->u[0].slots), atomic_load(&ch->u[0].epolls),
		 atomic_load(&ch->u[0].advanced),
		 atomic_load(&ch->u[0].done) ? "ran to its end" : "cut short");
	if (atomic_load(&ch->u[0].slots) < SLOTS)
		fail("%s: the attacker got only %d slots", w.name, atomic_load(&ch->u[0].slots));
	window_close(&w);
}

/* users users, each with its quota of slots, one eventfd a slot, unwatched. */
static void cheap_quota(int users, const char *name)
{
	struct cheap *ch = shm_alloc(sizeof(*ch));
	struct window w;
	uint64_t writes[USERS_MAX], most = 0, least = UINT64_MAX, dropped;
	size_t len;

	ch->conns = CONNS_MAX;
	window_open(&w, name);
	run(&w, ch, users, writes);
	dropped = daemon_dropped() - w.dropped0;
	snprintf(w.outcome, sizeof(w.outcome), "slots");
	for (int k = 0; k < users; k++) {
		len = strlen(w.outcome);
		snprintf(w.outcome + len, sizeof(w.outcome) - len, "%s%d", k ? ", " : " ",
			 atomic_load(&ch->u[k].slots));
		most = writes[k] > most ? writes[k] : most;
		least = writes[k] < least ? writes[k] : least;
	}
	len = strlen(w.outcome);
	snprintf(w.outcome + len, sizeof(w.outcome) - len, " (then %s); writes in %.1f s",
		 strerror(-atomic_load(&ch->u[0].err)), (RUN_MS - 2 * SHARE_SKIP_MS) / 1e3);
	for (int k = 0; k < users; k++) {
		len = strlen(w.outcome);
		snprintf(w.outcome + len, sizeof(w.outcome) - len, "%s%llu", k ? ", " : " ",
			 (unsigned long long)writes[k]);
	}
	len = strlen(w.outcome);
	snprintf(w.outcome + len, sizeof(w.outcome) - len, " (least/most %.2f); dropped %llu",
		 most ? (double)least / (double)most : 0.0, (unsigned long long)dropped);
	for (int k = 0; k < users; k++) {
		if (atomic_load(&ch->u[k].err) != -EDQUOT)
			fail("%s: attacker %d stopped taking slots at %d, not at its quota (-EDQUOT)",
			     w.name, k, atomic_load(&ch->u[k].err));
		if (!atomic_load(&ch->u[k].done))
			fail("%s: attacker %d did not get to its end", w.name, k);
	}
	if (!most || (double)least < FAIR_MIN * (double)most)
		fail("%s: the attackers' writes were not shared fairly: least %llu, most %llu",
		     w.name, (unsigned long long)least, (unsigned long long)most);
	if (dropped)
		fail("%s: %llu clients of cheap writers were dropped", w.name,
		     (unsigned long long)dropped);
	window_close(&w);
}

void attack_cheap_writes_users(void)
{
	cheap_quota(USERS_MAX, "many cheap writes a pass from 3 users, each its quota of slots, +1 "
			       "each ms");
}

void attack_cheap_writes_16k(void)
{
	cheap_quota(1, "many cheap writes a pass: one user's 16384 slots (its quota), +1 each ms");
}
