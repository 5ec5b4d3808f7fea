/* SPDX-License-Identifier: MIT */
/*
 * The whole path through the real daemon on the simulated device: arm,
 * store, wait, consume; the starting-value and "signal only what was armed"
 * rules; several slots; release and reuse; errors of the API.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "test-runner.h"

static struct daemon_proc d;
static cuflag_client *c; /* connected to d for every test */

/* Nothing more arrives within ms. */
static void expect_quiet(cuflag_slot *s, int ms)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t n;
	CHECK(poll(&p, 1, ms) == 0);
	CHECK(cuflag_slot_consume(s, &n) == -EAGAIN);
}

TEST(one_completion)
{
	cuflag_slot *s;
	uint32_t t;

	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK(cuflag_slot_fd(s) >= 0);
	CHECK(cuflag_slot_flag(s) != NULL);
	CHECK_RC(cuflag_slot_arm(s, &t));
	CHECK(cuflag_slot_wait(s, t, 0) == -ETIMEDOUT);
	sim_store(cuflag_slot_flag(s), t);
	CHECK_RC(cuflag_slot_wait(s, t, 2000));
	CHECK(consume_blocking(s) == 1);
	expect_quiet(s, 20);
	cuflag_slot_release(s);
}

TEST(many_in_flight)
{
	cuflag_slot *s;
	uint32_t t[10];

	CHECK_RC(cuflag_slot_acquire(c, &s));
	for (int i = 0; i < 10; i++) {
		CHECK_RC(cuflag_slot_arm(s, &t[i]));
		if (i)
			CHECK(t[i] == t[i - 1] + 1);
	}
	/* Three finish, then the rest: the counter says how many each time. */
	sim_store(cuflag_slot_flag(s), t[2]);
	CHECK_RC(cuflag_slot_wait(s, t[2], 2000));
	/* One write or several: the scanner may see the store between arms. */
	uint64_t first = 0;
	while (first < 3)
		first += consume_blocking(s);
	CHECK(first == 3);
	sim_store(cuflag_slot_flag(s), t[9]);
	CHECK_RC(cuflag_slot_wait(s, t[9], 2000));
	uint64_t got = 0;
	while (got < 7)
		got += consume_blocking(s);
	CHECK(got == 7);
	expect_quiet(s, 20);
	cuflag_slot_release(s);
}

/* A flag written before the scanner first looks is still counted. */
TEST(early_write)
{
	cuflag_slot *s;
	uint32_t t;

	CHECK_RC(cuflag_slot_acquire(c, &s));
	/* Store the next value before arming: the device can be that fast. */
	uint32_t next = *cuflag_slot_flag(s) + 1;
	sim_store(cuflag_slot_flag(s), next);
	CHECK_RC(cuflag_slot_arm(s, &t));
	CHECK(t == next);
	CHECK_RC(cuflag_slot_wait(s, t, 0)); /* fast path: already there */
	CHECK(consume_blocking(s) == 1);
	cuflag_slot_release(s);
}

/* Past every armed value counts only what was armed; later arms fire at once. */
TEST(flag_past_armed)
{
	cuflag_slot *s;
	uint32_t t1, t2, t3;

	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm(s, &t1));
	sim_store(cuflag_slot_flag(s), t1 + 1000);
	CHECK(consume_blocking(s) == 1);
	expect_quiet(s, 30);
	CHECK_RC(cuflag_slot_arm(s, &t2));
	CHECK(consume_blocking(s) == 1);
	CHECK_RC(cuflag_slot_arm(s, &t3));
	CHECK(consume_blocking(s) == 1);
	CHECK_RC(cuflag_slot_wait(s, t3, 0));
	cuflag_slot_release(s);
}

/* Slots are independent: completing one signals no other. */
TEST(independent_slots)
{
	cuflag_slot *s[100];
	uint32_t t[100];

	CHECK_RC(cuflag_slots_acquire(c, 100, s));
	for (int i = 0; i < 100; i++)
		CHECK_RC(cuflag_slot_arm(s[i], &t[i]));
	for (int i = 0; i < 100; i += 2)
		sim_store(cuflag_slot_flag(s[i]), t[i]);
	for (int i = 0; i < 100; i += 2)
		CHECK(consume_blocking(s[i]) == 1);
	for (int i = 1; i < 100; i += 2) {
		uint64_t n;
		CHECK(cuflag_slot_consume(s[i], &n) == -EAGAIN);
		sim_store(cuflag_slot_flag(s[i]), t[i]);
	}
	for (int i = 1; i < 100; i += 2)
		CHECK(consume_blocking(s[i]) == 1);
	for (int i = 0; i < 100; i++)
		cuflag_slot_release(s[i]);
}

/* A released slot comes back on a fresh timeline. */
TEST(reuse)
{
	for (int round = 0; round < 50; round++) {
		cuflag_slot *s;
		uint32_t t;
		CHECK_RC(cuflag_slot_acquire(c, &s));
		CHECK_RC(cuflag_slot_arm(s, &t));
		sim_store(cuflag_slot_flag(s), t);
		CHECK(consume_blocking(s) == 1);
		cuflag_slot_release(s);
	}
}

struct bind_wait {
	cuflag_slot *s;
	uint32_t t;
	int rc;
	uint64_t done_ns;
};

static void *wait_thread(void *arg)
{
	struct bind_wait *w = arg;
	w->rc = cuflag_slot_wait(w->s, w->t, 30000);
	w->done_ns = cuflag_now_ns();
	return NULL;
}

/* The daemon signals an eventfd of the caller's; a waiter asleep across the
 * swap still wakes. */
TEST(bind)
{
	struct bind_wait w = { .rc = -1 };
	int user = eventfd(0, EFD_CLOEXEC), p[2], old;
	pthread_t th;
	uint64_t n = 0;

	CHECK_RC(cuflag_slot_acquire(c, &w.s));
	old = cuflag_slot_fd(w.s);
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	CHECK(cuflag_slot_bind_eventfd(w.s, p[0]) == -EBADF);
	CHECK_RC(cuflag_slot_arm(w.s, &w.t));
	CHECK(pthread_create(&th, NULL, wait_thread, &w) == 0);
	usleep(20000); /* let the waiter fall asleep on the old eventfd */
	CHECK_RC(cuflag_slot_bind_eventfd(w.s, user));
	CHECK(cuflag_slot_fd(w.s) >= 0);
	(void)old;
	uint64_t stored = cuflag_now_ns();
	sim_store(cuflag_slot_flag(w.s), w.t);
	pthread_join(th, NULL);
	if (w.rc != 0)
		fprintf(stderr, "wait across the bind returned %d\n", w.rc);
	CHECK(w.rc == 0);
	/* Woken by the signal, not found at the end of its timeout. */
	CHECK(w.done_ns - stored < 2000000000ull);
	{
		struct pollfd pf = { .fd = user, .events = POLLIN };
		CHECK(poll(&pf, 1, 2000) == 1);
		CHECK(read(user, &n, sizeof(n)) == sizeof(n) && n == 1);
	}
	/* And the next one, through the slot's own view of it: consume counts
	 * from the daemon's record, so the one read above by hand counts too. */
	CHECK_RC(cuflag_slot_arm(w.s, &w.t));
	sim_store(cuflag_slot_flag(w.s), w.t);
	CHECK_RC(cuflag_slot_wait(w.s, w.t, 2000));
	CHECK(consume_blocking(w.s) == 2);
	close(p[0]);
	close(p[1]);
	close(user);
	cuflag_slot_release(w.s);
}

TEST(api_errors)
{
	cuflag_client *bad;
	cuflag_slot *s;
	uint32_t t;

	CHECK(cuflag_connect("/nonexistent/cuflag.sock", &bad) == -ENOENT);
	CHECK(cuflag_connect_hint(-ENOENT) != NULL);
	/* The socket's directory, or a file, is named as such. */
	CHECK(cuflag_connect(d.dir, &bad) == -ENOTSOCK);
	CHECK(strstr(cuflag_connect_hint(-ENOTSOCK), "not a socket") != NULL);
	CHECK(strstr(cuflag_connect_hint(-EACCES), "group") != NULL);
	CHECK(cuflag_connect_hint(-EINTR) == NULL);
	CHECK(cuflag_slots_acquire(c, 0, &s) == -EINVAL);
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm(s, &t));
	/* Waiting for a value never armed would never end. */
	CHECK(cuflag_slot_wait(s, t + 5, 10) == -EINVAL);
	CHECK(cuflag_slot_wait(s, t, 30) == -ETIMEDOUT);
	sim_store(cuflag_slot_flag(s), t);
	CHECK_RC(cuflag_slot_wait(s, t, 1000));
	cuflag_slot_release(s);
}

/* NULL handles are refused by every getter, never a crash. */
TEST(null_handles)
{
	CHECK(cuflag_slot_fd(NULL) == -EINVAL);
	CHECK(cuflag_slot_flag(NULL) == NULL);
	CHECK(cuflag_slot_id(NULL) == -EINVAL);
	CHECK(cuflag_slot_data(NULL) == NULL);
	CHECK(cuflag_slot_set_data(NULL, c) == -EINVAL);
	CHECK(cuflag_slot_complete(NULL, 1) == -EINVAL);
	CHECK(cuflag_client_fd(NULL) == -EINVAL);
	CHECK(cuflag_client_epoch(NULL) == 0);
	CHECK(cuflag_group_fd(NULL) == -EINVAL);
	CHECK(cuflag_group_destroy(NULL) == 0);
	CHECK(cuflag_slot_wait(NULL, 1, 0) == -EINVAL);
}

/* cuflag_slot_complete() is the release store a device makes: the daemon
 * counts it; it refuses a value the slot never reserved. The caller's
 * pointer stays with the slot. */
TEST(complete_and_data)
{
	cuflag_slot *s;
	uint32_t t;
	int mine;

	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK(cuflag_slot_data(s) == NULL);
	CHECK_RC(cuflag_slot_set_data(s, &mine));
	CHECK(cuflag_slot_data(s) == &mine);
	CHECK_RC(cuflag_slot_arm(s, &t));
	CHECK(cuflag_slot_complete(s, t + 1) == -EINVAL);
	CHECK(*cuflag_slot_flag(s) == t - 1);
	CHECK_RC(cuflag_slot_complete(s, t));
	CHECK(*cuflag_slot_flag(s) == t);
	CHECK_RC(cuflag_slot_wait(s, t, 2000));
	CHECK(consume_blocking(s) == 1);
	CHECK(cuflag_slot_data(s) == &mine);
	cuflag_slot_release(s);
}

/*
 * Which values a wait may name: the slot's starting value up to the last
 * reserved. A fresh slot starts at 0, a slot handed out again 2^30 past
 * the last value armed on it; any value outside is refused at once, ahead
 * (it would never come) or behind the start (no timeline of this slot).
 * python/tests/test_errors.py asks the binding the same.
 */
TEST(never_armed)
{
	const char *args[] = { "--slots-per-client", "8", NULL };
	struct daemon_proc d2;
	cuflag_client *c2;
	cuflag_slot *s[8], *again;
	uint32_t t, start, last[8];

	daemon_start(&d2, 0, args);
	CHECK_RC(cuflag_connect(d2.sock, &c2));
	CHECK_RC(cuflag_slots_acquire(c2, 8, s));
	start = *cuflag_slot_flag(s[0]);
	CHECK(start == 0);
	CHECK_RC(cuflag_slot_wait(s[0], start, 0));       /* the start: reached */
	CHECK(cuflag_slot_wait(s[0], start + 1, 0) == -EINVAL);
	CHECK(cuflag_slot_wait(s[0], start - 1, 0) == -EINVAL);
	CHECK(cuflag_slot_wait_spin(s[0], 5, 10, 0) == -EINVAL);
	for (int i = 0; i < 8; i++) {
		for (int k = 0; k <= i; k++)
			CHECK_RC(cuflag_slot_arm(s[i], &last[i]));
		CHECK_RC(cuflag_slot_complete(s[i], last[i]));
		CHECK_RC(cuflag_slot_wait(s[i], last[i], 2000));
	}
	CHECK_RC(cuflag_slot_wait(s[0], last[0] - 1, 0)); /* armed, passed */
	for (int i = 0; i < 8; i++)
		cuflag_slot_release(s[i]);
	/* Every slot was used: the next one is handed out again. */
	CHECK_RC(cuflag_slot_acquire(c2, &again));
	start = *cuflag_slot_flag(again);
	CHECK(start == last[cuflag_slot_id(again)] + (1u << 30));
	CHECK_RC(cuflag_slot_wait(again, start, 0));
	CHECK(cuflag_slot_wait(again, 7, 0) == -EINVAL);
	CHECK(cuflag_slot_wait(again, start - 1, 0) == -EINVAL);
	CHECK(cuflag_slot_complete(again, start + 1) == -EINVAL);
	CHECK_RC(cuflag_slot_arm(again, &t));
	CHECK(t == start + 1);
	CHECK(cuflag_slot_wait(again, t, 0) == -ETIMEDOUT);
	cuflag_disconnect(c2);
	CHECK(daemon_stop(&d2) == 0);
}

/* The slots-per-client limit is an error reply, and the client carries on. */
TEST(slot_limit)
{
	const char *args[] = { "--slots-per-client", "8", NULL };
	struct daemon_proc d2;
	cuflag_client *c2;
	cuflag_slot *s[9];

	daemon_start(&d2, 0, args);
	CHECK_RC(cuflag_connect(d2.sock, &c2));
	CHECK_RC(cuflag_slots_acquire(c2, 8, s));
	CHECK(cuflag_slot_acquire(c2, &s[8]) == -ENOSPC);
	cuflag_slot_release(s[0]);
	CHECK_RC(cuflag_slot_acquire(c2, &s[0]));
	cuflag_disconnect(c2);
	CHECK(daemon_stop(&d2) == 0);
}

int main(int argc, char **argv)
{
	const struct test_env env = { .daemon = &d };
	int fds_before, rc;

	fds_before = self_fd_count();
	daemon_start(&d, 0, NULL);
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK(cuflag_client_epoch(c) != 0);
	rc = test_run(&env, argc, argv);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
	/* Every fd the library opened is closed again. */
	CHECK(self_fd_count() == fds_before);
	if (rc == 0)
		printf("basic: ok\n");
	return rc;
}
