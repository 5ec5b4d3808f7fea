/* SPDX-License-Identifier: MIT */
/*
 * A daemon restart loses no completion: a client whose cuflagd stops (cleanly
 * or killed) keeps its region and eventfds, reconnects to the new daemon with
 * cuflag_reconnect(), and every completion is counted exactly once: those
 * signalled before, those that landed while no daemon ran, and those armed
 * while no daemon ran. The new daemon refuses what it must not adopt.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "fdpass.h"
#include "harness.h"
#include "proto.h"

/* Completions in the eventfd, waiting up to ms for the first. */
static uint64_t drain(cuflag_slot *s, int ms)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t total = 0, n;

	if (poll(&p, 1, ms) != 1)
		return 0;
	while (cuflag_slot_consume(s, &n) == 0) {
		total += n;
		if (poll(&p, 1, 20) != 1)
			break;
	}
	return total;
}

/* The scanner has finished both signals (it counts them after it has
 * recorded them in the region). */
static int two_recorded(void *arg)
{
	struct cuflag_msg_stats_reply st;
	daemon_stats(arg, &st);
	return st.completions >= 2;
}

static void scenario(int kill_it)
{
	struct daemon_proc a, b;
	cuflag_client *c;
	cuflag_slot *s[6];
	uint32_t t[6], t3b;
	uint64_t epoch_a;
	int fds_before = self_fd_count();

	daemon_start(&a, 0, NULL);
	CHECK_RC(cuflag_connect(a.sock, &c));
	CHECK_RC(cuflag_slots_acquire(c, 6, s));
	epoch_a = cuflag_client_epoch(c);
	/* 0: completed and consumed before; 1: completed, not consumed;
	 * 2: armed, completes while no daemon runs; 3: armed while no daemon
	 * runs, completes then; 4: armed, completes after the new daemon took
	 * over; 5: idle. */
	for (int i = 0; i < 5; i++)
		if (i != 3)
			CHECK_RC(cuflag_slot_arm(s[i], &t[i]));
	sim_store(cuflag_slot_flag(s[0]), t[0]);
	CHECK(drain(s[0], 2000) == 1);
	sim_store(cuflag_slot_flag(s[1]), t[1]);
	CHECK_RC(cuflag_slot_wait(s[1], t[1], 2000));
	{ /* the old daemon has signalled slot 1 (its counter is readable) */
		struct pollfd p = { .fd = cuflag_slot_fd(s[1]), .events = POLLIN };
		CHECK(poll(&p, 1, 2000) == 1);
	}

	/* The daemon goes away. Killed, it must be between two signals: one
	 * killed inside an eventfd write may repeat that count after the
	 * restart (the documented at-least-once edge of a crash). */
	if (kill_it) {
		CHECK(wait_until(two_recorded, &a, 5000));
		kill(a.pid, SIGKILL);
		CHECK(waitpid(a.pid, NULL, 0) == a.pid);
	} else {
		CHECK(daemon_stop_keep_dir(&a) == 0);
	}
	struct pollfd hup = { .fd = cuflag_client_fd(c), .events = POLLRDHUP };
	CHECK(poll(&hup, 1, 2000) == 1);
	sim_store(cuflag_slot_flag(s[2]), t[2]);
	CHECK_RC(cuflag_slot_arm(s[3], &t[3])); /* queued, nobody reads it yet */
	sim_store(cuflag_slot_flag(s[3]), t[3]);
	CHECK(cuflag_reconnect(c) == -ECONNREFUSED || cuflag_reconnect(c) == -ENOENT);

	/* A new daemon on the same path; the client carries on. */
	daemon_start_at(&b, a.dir, a.sock, 0, NULL);
	CHECK_RC(cuflag_reconnect(c));
	CHECK(cuflag_client_epoch(c) != epoch_a);
	CHECK(drain(s[1], 2000) == 1); /* signalled by the old daemon, still there */
	CHECK(drain(s[2], 2000) == 1); /* landed while no daemon ran */
	CHECK(drain(s[3], 2000) == 1); /* armed while no daemon ran */
	CHECK(drain(s[0], 50) == 0);   /* nothing twice */
	sim_store(cuflag_slot_flag(s[4]), t[4]);
	CHECK(drain(s[4], 2000) == 1); /* armed before, completed after */
	/* Every slot works on: same ids, same eventfds, next values in order. */
	for (int i = 0; i < 6; i++) {
		uint32_t u;
		CHECK_RC(cuflag_slot_arm(s[i], &u));
		sim_store(cuflag_slot_flag(s[i]), u);
		CHECK(drain(s[i], 2000) == 1);
	}
	CHECK_RC(cuflag_slot_arm(s[3], &t3b));
	CHECK(t3b == t[3] + 2);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&b) == 0);
	CHECK(self_fd_count() == fds_before);
	printf("restart (%s): every completion counted once across the restart\n",
	       kill_it ? "SIGKILL" : "SIGTERM");
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	scenario(0);
	scenario(1);
	printf("restart: ok\n");
	return 0;
}
