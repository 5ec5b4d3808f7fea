/* SPDX-License-Identifier: MIT */
/*
 * Many cheap writes per pass. One user arms every slot its connections hold
 * far ahead (cuflag_slot_arm_many) and advances every flag by one each
 * millisecond, so that every scanner pass writes every one of its eventfds;
 * they are all BOUND to one eventfd in 200 epolls, so each write costs some
 * 10 us: under any per-write allowance, but a pass of thousands of them is
 * tens of milliseconds. The pass is shared between users (fair-share.h): the
 * victim's wake must not wait behind the flood. The attacker misbehaves only
 * in what it costs itself, so it need not be dropped.
 */
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "attacks.h"
#include "cuflag/cuflag.h"

#define CONNS 4
#define SLOTS 1024 /* per connection: the daemon's default */
/* 200 epolls make a write cost 10-20 us here (600 make it 200 us: not
 * cheap any more, and the write budget drops the writer). */
#define EPOLLS 200
#define AHEAD 100000u
#define RUN_MS 3000

struct cheap {
	_Atomic int slots, done, epolls;
	_Atomic long advanced;
};

static void cheap_main(void *arg)
{
	struct cheap *ch = arg;
	static cuflag_slot *s[CONNS * SLOTS];
	static uint32_t next[CONNS * SLOTS];
	cuflag_client *c[CONNS];
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), eps[EPOLLS], n = 0, neps = 0;
	uint64_t end;

	CHECK(efd >= 0);
	for (; neps < EPOLLS; neps++) {
		struct epoll_event ev = { .events = EPOLLIN };
		eps[neps] = epoll_create1(EPOLL_CLOEXEC);
		if (eps[neps] < 0 || epoll_ctl(eps[neps], EPOLL_CTL_ADD, efd, &ev) < 0)
			break;
	}
	for (int k = 0; k < CONNS; k++) {
		CHECK_RC(cuflag_connect(attack_daemon.sock, &c[k]));
		while (n < (k + 1) * SLOTS && cuflag_slot_acquire(c[k], &s[n]) == 0) {
			uint32_t first;
			if (cuflag_slot_bind_eventfd(s[n], efd) ||
			    cuflag_slot_arm_many(s[n], AHEAD, &first)) {
				cuflag_slot_release(s[n]);
				break;
			}
			next[n++] = first;
		}
	}
	atomic_store(&ch->slots, n);
	atomic_store(&ch->epolls, neps);
	attack_mark("%d slots armed %u ahead, bound to one eventfd in %d epolls", n, AHEAD, neps);
	end = cuflag_now_ns() + RUN_MS * 1000000ull;
	while (cuflag_now_ns() < end) {
		struct timespec ts = { 0, 1000000 };
		for (int i = 0; i < n; i++)
			sim_store(cuflag_slot_flag(s[i]), next[i]++);
		atomic_fetch_add(&ch->advanced, n);
		nanosleep(&ts, NULL);
	}
	attack_mark("advanced %ld flags", atomic_load(&ch->advanced));
	for (int k = 0; k < CONNS; k++)
		cuflag_disconnect(c[k]);
	for (int i = 0; i < neps; i++)
		close(eps[i]);
	close(efd);
	atomic_store(&ch->done, 1);
}

void attack_cheap_writes(void)
{
	struct cheap *ch = shm_alloc(sizeof(*ch));
	struct window w;

	window_open(&w, "many cheap writes a pass: 4096 slots BOUND, 200 epolls, +1 each ms");
	attacker_run(w.name, 0, cheap_main, ch, RUN_MS + 20000);
	snprintf(w.outcome, sizeof(w.outcome), "%d slots in %d epolls, %ld flags advanced, %s",
		 atomic_load(&ch->slots), atomic_load(&ch->epolls), atomic_load(&ch->advanced),
		 atomic_load(&ch->done) ? "ran to its end" : "cut short");
	if (atomic_load(&ch->slots) < SLOTS)
		fail("%s: the attacker got only %d slots", w.name, atomic_load(&ch->slots));
	window_close(&w);
}
