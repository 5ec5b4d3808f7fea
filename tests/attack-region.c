/* SPDX-License-Identifier: MIT */
/*
 * A region a live session holds, handed over again: the client makes its
 * region memfd and keeps it, so it can ATTACH the same memfd on a second
 * connection, as a new region and as a resumed one. Two sessions on one
 * region would signal the same slots; the daemon must refuse the second and
 * keep serving the first (and take the region once the first has ended).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "attacks.h"
#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "proto.h"

struct region_ctl {
	_Atomic int tries, refused, status[2], served, after;
};

/* This process's copy of the region memfd the library made. */
static int find_region(void)
{
	for (int fd = 0; fd < 1024; fd++)
		if (is_memfd_named(fd, "cuflag-region"))
			return fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return -ENOENT;
}

/* HELLO, then ATTACH of region on a fresh connection: the ATTACH reply's
 * status (1 when the daemon gave none). */
static int attach_again(int region, uint32_t slots, uint64_t epoch)
{
	struct {
		struct cuflag_msg_hdr h;
		struct cuflag_msg_attach b;
	} attach = { .b = { .slots = slots, .epoch = epoch } };
	int sock = daemon_connect_raw(), fds[2] = { region, eventfd(0, EFD_CLOEXEC) };
	int st = 1;

	CHECK(sock >= 0 && fds[1] >= 0);
	cuflag_hdr_init(&attach.h, CUFLAG_MSG_ATTACH, sizeof(attach), 2, 0, 2);
	if (hello_raw(sock, NULL) == 0 && send_with_fds(sock, &attach, sizeof(attach), fds, 2) == 0 &&
	    recv_reply(sock, &st, 5000) <= 0)
		st = 1;
	close(fds[1]);
	close(sock);
	return st;
}

static void attacker_main(void *arg)
{
	struct region_ctl *rc = arg;
	cuflag_client *c;
	cuflag_slot *s;
	uint64_t n = 0;
	uint32_t t;
	int region;

	CHECK_RC(cuflag_connect(attack_daemon.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	region = find_region();
	CHECK(region >= 0);
	/* As a new region, then as one resumed from this daemon; every 20 ms
	 * for a while (as fast as it can, it would measure how a request flood
	 * shares the CPU, which is not what this attack is about). */
	uint64_t end = cuflag_now_ns() + SUSTAIN_MS * 1000000ull;
	do {
		usleep(20000);
		for (int i = 0; i < 2; i++) {
			int st = attach_again(region, (uint32_t)i, i ? cuflag_client_epoch(c) : 0);
			atomic_store(&rc->status[i], st);
			atomic_fetch_add(&rc->tries, 1);
			if (st == -EBUSY)
				atomic_fetch_add(&rc->refused, 1);
		}
	} while (cuflag_now_ns() < end);
	/* The session that holds it is served as before. */
	CHECK_RC(cuflag_slot_arm(s, &t));
	sim_store(cuflag_slot_flag(s), t);
	/* Signalled on its eventfd (the flag alone says nothing of the daemon). */
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	if (poll(&p, 1, 2000) == 1 && cuflag_slot_consume(s, &n) == 0 && n == 1)
		atomic_store(&rc->served, 1);
	/* Once that session is gone, the same ATTACH is taken: it was refused
	 * for being held, not for its form. */
	cuflag_disconnect(c);
	for (int i = 0; i < 100; i++) {
		int st = attach_again(region, 0, 0);
		atomic_store(&rc->after, st);
		if (st != -EBUSY)
			break;
		usleep(10000);
	}
	close(region);
}

void attack_region_twice(void)
{
	struct region_ctl *rc = shm_alloc(sizeof(*rc));
	struct window w;

	window_open(&w, "a live session's region memfd attached again (new, resumed), for 1 s");
	attacker_run(w.name, 19, attacker_main, rc, 20000);
	snprintf(w.outcome, sizeof(w.outcome),
		 "%d of %d refused -EBUSY (last %d, %d); the live session %s; once it "
		 "ended, the same ATTACH got %d",
		 atomic_load(&rc->refused), atomic_load(&rc->tries), atomic_load(&rc->status[0]),
		 atomic_load(&rc->status[1]),
		 atomic_load(&rc->served) ? "served as before" : "NOT SERVED",
		 atomic_load(&rc->after));
	if (atomic_load(&rc->refused) != atomic_load(&rc->tries))
		fail("%s: a region that a live session holds was not refused with -EBUSY",
		     w.name);
	if (atomic_load(&rc->after) != 0)
		fail("%s: the region was not taken once its session had ended", w.name);
	if (!atomic_load(&rc->served))
		fail("%s: the session that holds the region was not served after", w.name);
	window_close(&w);
}
