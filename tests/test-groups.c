/* SPDX-License-Identifier: MIT */
/*
 * Slot groups: many slots, one eventfd, one completion ring. Every completion
 * is drained exactly once (also when the ring overflows, when several threads
 * drain, and across a daemon killed with SIGKILL); a grouped slot has no
 * eventfd of its own but waits and consumes like any slot; the daemon holds
 * one fd per group, not one per slot.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "test-runner.h"

static struct daemon_proc d;

/* Drain g until total completions were counted (each slot's tally in
 * per_slot, indexed by cuflag_slot_id()), waiting on its fd; aborts after
 * 10 s without progress. */
static uint64_t drain_until(cuflag_group *g, uint64_t total, uint64_t *per_slot)
{
	struct cuflag_completion rec[64];
	struct pollfd p = { .fd = cuflag_group_fd(g), .events = POLLIN };
	uint64_t got = 0;

	while (got < total) {
		CHECK_MSG(poll(&p, 1, 10000) == 1, "no completion for 10 s: %llu of %llu",
			  (unsigned long long)got, (unsigned long long)total);
		int n = cuflag_group_drain(g, rec, 64);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++) {
			CHECK(rec[i].completions > 0);
			if (per_slot)
				per_slot[cuflag_slot_id(rec[i].slot)] += rec[i].completions;
			got += rec[i].completions;
		}
	}
	CHECK(got == total);
	return got;
}

/* Nothing more comes: the fd stays quiet and a drain finds nothing. */
static void expect_quiet(cuflag_group *g)
{
	struct cuflag_completion rec[4];
	struct pollfd p = { .fd = cuflag_group_fd(g), .events = POLLIN };

	if (poll(&p, 1, 50) == 1)
		CHECK(cuflag_group_drain(g, rec, 4) == 0);
	CHECK(cuflag_group_drain(g, rec, 4) == 0);
}

TEST(basics)
{
	enum { N = 256 };
	static cuflag_slot *s[N];
	static uint64_t per[1024];
	cuflag_client *c;
	cuflag_group *g;
	uint32_t t[N];
	uint64_t n;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_group_create(c, &g));
	CHECK(cuflag_group_fd(g) >= 0);
	CHECK_RC(cuflag_group_slots_acquire(g, N, s));
	CHECK(cuflag_slot_fd(s[0]) == -EOPNOTSUPP);
	CHECK(cuflag_slot_bind_eventfd(s[0], cuflag_group_fd(g)) == -EOPNOTSUPP);
	memset(per, 0, sizeof(per));
	for (int i = 0; i < N; i++)
		CHECK_RC(cuflag_slot_arm(s[i], &t[i]));
	for (int i = N - 1; i >= 0; i--)
		sim_store(cuflag_slot_flag(s[i]), t[i]);
	drain_until(g, N, per);
	for (int i = 0; i < N; i++)
		CHECK(per[cuflag_slot_id(s[i])] == 1);
	expect_quiet(g);
	/* A wait sleeps on the group's fd; consume counts as drain does, once. */
	CHECK_RC(cuflag_slot_arm(s[7], &t[7]));
	sim_store(cuflag_slot_flag(s[7]), t[7]);
	CHECK_RC(cuflag_slot_wait(s[7], t[7], 2000));
	{ /* the flag has landed; the scanner's record comes with the ring's bell */
		struct pollfd p = { .fd = cuflag_group_fd(g), .events = POLLIN };
		CHECK(poll(&p, 1, 2000) == 1);
	}
	CHECK_RC(cuflag_slot_consume(s[7], &n));
	CHECK(n == 1);
	CHECK(cuflag_slot_consume(s[7], &n) == -EAGAIN);
	expect_quiet(g);
	/* Two groups do not see each other's slots. */
	cuflag_group *g2;
	cuflag_slot *o;
	CHECK_RC(cuflag_group_create(c, &g2));
	CHECK_RC(cuflag_group_slot_acquire(g2, &o));
	CHECK_RC(cuflag_slot_arm(o, &t[0]));
	sim_store(cuflag_slot_flag(o), t[0]);
	drain_until(g2, 1, NULL);
	expect_quiet(g);
	/* Refused while a slot is held, and the group stays whole. */
	CHECK(cuflag_group_destroy(g2) == -EBUSY);
	CHECK_RC(cuflag_slot_set_data(o, g2));
	CHECK_RC(cuflag_slot_arm(o, &t[0]));
	sim_store(cuflag_slot_flag(o), t[0]);
	{
		struct cuflag_completion rec;
		struct pollfd p = { .fd = cuflag_group_fd(g2), .events = POLLIN };
		CHECK(poll(&p, 1, 2000) == 1);
		CHECK(cuflag_group_drain(g2, &rec, 1) == 1);
		CHECK(rec.slot == o && rec.completions == 1 && cuflag_slot_data(rec.slot) == g2);
	}
	cuflag_slot_release(o);
	CHECK_RC(cuflag_group_destroy(g2));
	for (int i = 0; i < N; i++)
		cuflag_slot_release(s[i]);
	CHECK_RC(cuflag_group_destroy(g));
	/* The id is free again, and the new group starts empty. */
	CHECK_RC(cuflag_group_create(c, &g));
	expect_quiet(g);
	cuflag_group_destroy(g);
	cuflag_disconnect(c);
}

/* A ring of 16 records and 600 slots completing at once: the ring overflows,
 * and the drain looks at every slot; nothing is lost or counted twice. */
TEST(overflow)
{
	enum { N = 600 };
	static cuflag_slot *s[N];
	static uint64_t per[1024];
	uint32_t t;
	cuflag_client *c;
	cuflag_group *g;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_group_create(c, &g));
	CHECK_RC(cuflag_group_slots_acquire(g, N, s));
	for (int round = 1; round <= 3; round++) {
		for (int i = 0; i < N; i++) {
			CHECK_RC(cuflag_slot_arm(s[i], &t));
			sim_store(cuflag_slot_flag(s[i]), t);
		}
		drain_until(g, N, per);
		for (int i = 0; i < N; i++)
			CHECK(per[cuflag_slot_id(s[i])] == (uint64_t)round);
	}
	expect_quiet(g);
	for (int i = 0; i < N; i++)
		cuflag_slot_release(s[i]);
	cuflag_group_destroy(g);
	cuflag_disconnect(c);
}

struct mt {
	cuflag_group *g;
	cuflag_slot **s;
	unsigned first, n, rounds;
	_Atomic uint64_t drained;
	_Atomic int stop;
};

static void *completer(void *arg)
{
	struct mt *m = ((void **)arg)[0];
	unsigned part = (unsigned)(uintptr_t)((void **)arg)[1];
	uint32_t t;

	for (unsigned r = 0; r < m->rounds; r++)
		for (unsigned i = part; i < m->n; i += 2) {
			CHECK_RC(cuflag_slot_arm(m->s[i], &t));
			sim_store(cuflag_slot_flag(m->s[i]), t);
		}
	return NULL;
}

static void *drainer(void *arg)
{
	struct mt *m = arg;
	struct cuflag_completion rec[16];
	struct pollfd p = { .fd = cuflag_group_fd(m->g), .events = POLLIN };

	while (!atomic_load(&m->stop)) {
		if (poll(&p, 1, 20) != 1)
			continue;
		int n = cuflag_group_drain(m->g, rec, 16);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++)
			atomic_fetch_add(&m->drained, rec[i].completions);
	}
	return NULL;
}

/* Four threads drain one group while two arm and complete: exact. */
TEST(threads)
{
	enum { N = 512, ROUNDS = 40 };
	static cuflag_slot *s[N];
	static struct mt m;
	pthread_t comp[2], dr[4];
	void *args[2][2];
	cuflag_client *c;

	CHECK_RC(cuflag_connect(d.sock, &c));
	m = (struct mt){ .s = s, .n = N, .rounds = ROUNDS };
	CHECK_RC(cuflag_group_create(c, &m.g));
	CHECK_RC(cuflag_group_slots_acquire(m.g, N, s));
	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&dr[i], NULL, drainer, &m) == 0);
	for (int i = 0; i < 2; i++) {
		args[i][0] = &m;
		args[i][1] = (void *)(uintptr_t)i;
		CHECK(pthread_create(&comp[i], NULL, completer, args[i]) == 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(comp[i], NULL);
	uint64_t want = (uint64_t)N * ROUNDS, t0 = cuflag_now_ns();
	while (atomic_load(&m.drained) < want && cuflag_now_ns() - t0 < 10000000000ull)
		usleep(1000);
	usleep(50000); /* anything counted twice would show by now */
	atomic_store(&m.stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(dr[i], NULL);
	CHECK_MSG(atomic_load(&m.drained) == want, "%llu drained, %llu completed",
		  (unsigned long long)atomic_load(&m.drained), (unsigned long long)want);
	for (int i = 0; i < N; i++)
		cuflag_slot_release(s[i]);
	cuflag_group_destroy(m.g);
	cuflag_disconnect(c);
}

/* 4096 grouped slots cost the daemon one fd (the group's), not 4096. */
TEST(daemon_fds)
{
	enum { N = 4096 };
	static cuflag_slot *s[N];
	cuflag_client *c;
	cuflag_group *g;
	int before, after;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_group_create(c, &g));
	before = daemon_fd_count_steady(&d);
	CHECK_RC(cuflag_group_slots_acquire(g, N, s));
	after = daemon_fd_count_steady(&d);
	printf("groups: %d grouped slots: daemon fds %d -> %d\n", N, before, after);
	CHECK(after == before);
	for (int i = 0; i < N; i++)
		cuflag_slot_release(s[i]);
	cuflag_group_destroy(g);
	cuflag_disconnect(c);
}

/* SIGKILL with completions in flight: the group and its slots carry on with
 * the next daemon, every completion drained once. */
TEST(restart)
{
	enum { N = 300 };
	static cuflag_slot *s[N];
	static uint64_t per[1024];
	struct daemon_proc b;
	cuflag_client *c;
	cuflag_group *g;
	uint32_t t[N];

	daemon_start(&b, 0, (const char *const[]){ "--slots-per-client", "1024", NULL });
	CHECK_RC(cuflag_connect(b.sock, &c));
	CHECK_RC(cuflag_group_create(c, &g));
	CHECK_RC(cuflag_group_slots_acquire(g, N, s));
	memset(per, 0, sizeof(per));
	for (int i = 0; i < N; i++)
		CHECK_RC(cuflag_slot_arm(s[i], &t[i]));
	for (int i = 0; i < N / 2; i++)
		sim_store(cuflag_slot_flag(s[i]), t[i]);
	kill(b.pid, SIGKILL);
	CHECK(waitpid(b.pid, NULL, 0) == b.pid);
	for (int i = N / 2; i < N; i++)
		sim_store(cuflag_slot_flag(s[i]), t[i]); /* land while no daemon runs */
	struct daemon_proc gone = b;
	daemon_start_at(&b, gone.dir, gone.sock, 0,
			(const char *const[]){ "--slots-per-client", "1024", NULL });
	CHECK_RC(cuflag_reconnect(c));
	drain_until(g, N, per);
	for (int i = 0; i < N; i++)
		CHECK(per[cuflag_slot_id(s[i])] == 1);
	expect_quiet(g);
	/* And on with the new daemon. */
	CHECK_RC(cuflag_slot_arm(s[3], &t[3]));
	sim_store(cuflag_slot_flag(s[3]), t[3]);
	drain_until(g, 1, NULL);
	for (int i = 0; i < N; i++)
		cuflag_slot_release(s[i]);
	cuflag_group_destroy(g);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&b) == 0);
}

int main(int argc, char **argv)
{
	const char *args[] = { "--group-ring", "16", "--slots-per-client", "4096", NULL };
	const struct test_env env = { .daemon = &d };
	int rc;

	setvbuf(stdout, NULL, _IONBF, 0);
	daemon_start(&d, 0, args);
	rc = test_run(&env, argc, argv);
	CHECK(daemon_stop(&d) == 0);
	if (rc == 0)
		printf("groups: ok\n");
	return rc;
}
