/* SPDX-License-Identifier: MIT */
/*
 * cuflag_slot_arm_many() through the real daemon, with the simulated device
 * playing a kernel that completes the slot from inside: values stored one by
 * one (each counted, the data written before each visible at its wake), only
 * the last, a writer running ahead of the arms (counted once armed, never
 * past), grouped slots, a daemon killed while the writer goes on, and the
 * errors. Every count is exact and nothing more arrives after it.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#ifdef CUFLAG_TEST_CUDA
#include "cuflag/cuflag_cuda.h"
#endif
#include "test-runner.h"

static struct daemon_proc d;

/* Consume s until want completions were counted; aborts on an excess or
 * after 10 s without one. */
static void count_exact(cuflag_slot *s, uint64_t want)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t got = 0, n;

	while (got < want) {
		CHECK_MSG(poll(&p, 1, 10000) == 1, "no completion for 10 s: %llu of %llu",
			  (unsigned long long)got, (unsigned long long)want);
		if (cuflag_slot_consume(s, &n) == 0)
			got += n;
	}
	CHECK_MSG(got == want, "counted %llu, armed %llu", (unsigned long long)got,
		  (unsigned long long)want);
}

/* Nothing more: 50 ms later nothing is counted. The doorbell may still
 * ring once: the scanner records what it signals before it writes the
 * eventfd, so the last count can be read from the record before the write
 * that announces it arrives (cuflag_slot_consume(): a ring counts nothing). */
static void expect_quiet(cuflag_slot *s)
{
	uint64_t n;

	usleep(50000);
	CHECK(cuflag_slot_consume(s, &n) == -EAGAIN);
}

/* The writer: data[k % 64] = k, then flag = k, for each of n values. */
struct writer {
	pthread_t th;
	volatile uint32_t *flag;
	_Atomic uint32_t *data;
	uint32_t first, n;
	unsigned every; /* store only every this many values (and the last) */
	unsigned pace_ns; /* spin this long after each store */
	_Atomic uint32_t limit; /* values stored so far may not pass this many (0: n) */
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	for (uint32_t k = 0; k < w->n; k++) {
		uint32_t v = w->first + k, lim;
		while ((lim = atomic_load(&w->limit)) && k >= lim)
			sched_yield();
		atomic_store_explicit(&w->data[v % 64], v, memory_order_relaxed);
		if (k % w->every == 0 || k == w->n - 1)
			sim_store(w->flag, v);
		for (uint64_t end = cuflag_now_ns() + w->pace_ns; cuflag_now_ns() < end;)
			;
	}
	return NULL;
}

TEST(one_by_one)
{
	enum { N = 200000 };
	static _Atomic uint32_t data[64];
	struct pollfd p;
	cuflag_client *c;
	cuflag_slot *s;
	struct writer w;
	uint32_t first;
	uint64_t got = 0, n;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm_many(s, N, &first));
	w = (struct writer){ .flag = cuflag_slot_flag(s), .data = data, .first = first, .n = N,
			     .every = 1 };
	CHECK(pthread_create(&w.th, NULL, writer_main, &w) == 0);
	/* At each wake: the value reached is at least what was counted, and
	 * what the writer wrote before it is there. */
	p = (struct pollfd){ .fd = cuflag_slot_fd(s), .events = POLLIN };
	while (got < N) {
		CHECK(poll(&p, 1, 10000) == 1);
		if (cuflag_slot_consume(s, &n))
			continue;
		got += n;
		CHECK(got <= N);
		uint32_t last = first + (uint32_t)got - 1;
		uint32_t f = __atomic_load_n(cuflag_slot_flag(s), __ATOMIC_ACQUIRE);
		CHECK((int32_t)(f - last) >= 0);
		uint32_t seen = atomic_load_explicit(&data[last % 64], memory_order_relaxed);
		CHECK_MSG((int32_t)(seen - last) >= 0, "value %u woke with data %u", last, seen);
	}
	pthread_join(w.th, NULL);
	expect_quiet(s);
	CHECK_RC(cuflag_slot_wait(s, first + N - 1, 0));
	CHECK(cuflag_slot_wait(s, first + N, 0) == -EINVAL); /* never reserved */
	cuflag_slot_release(s);
	cuflag_disconnect(c);
}

TEST(only_last)
{
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t first, t;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	/* Values follow those reserved one at a time, either way round. */
	CHECK_RC(cuflag_slot_arm(s, &t));
	CHECK_RC(cuflag_slot_arm_many(s, 1000, &first));
	CHECK(first == t + 1);
	sim_store(cuflag_slot_flag(s), first + 999);
	count_exact(s, 1001);
	expect_quiet(s);
	CHECK_RC(cuflag_slot_arm_many(s, 1, &first));
	CHECK_RC(cuflag_slot_arm(s, &t));
	CHECK(t == first + 1);
	sim_store(cuflag_slot_flag(s), t);
	count_exact(s, 2);
	expect_quiet(s);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
}

/* A writer ahead of the arms is counted once they come, and never past them. */
TEST(ahead_of_arms)
{
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t first, more;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm_many(s, 10, &first));
	sim_store(cuflag_slot_flag(s), first + 99); /* 100 completed, 10 armed */
	count_exact(s, 10);
	expect_quiet(s);
	CHECK_RC(cuflag_slot_arm_many(s, 60, &more));
	CHECK(more == first + 10);
	count_exact(s, 60); /* already landed: counted at the arm */
	expect_quiet(s);
	CHECK_RC(cuflag_slot_arm_many(s, 40, &more)); /* 30 landed, 10 to come */
	count_exact(s, 30);
	expect_quiet(s);
	sim_store(cuflag_slot_flag(s), first + 109);
	count_exact(s, 10);
	expect_quiet(s);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
}

TEST(errors)
{
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t first, t;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK(cuflag_slot_arm_many(s, 0, &first) == -EINVAL);
	CHECK(cuflag_slot_arm_many(s, (1u << 30) + 1, &first) == -EINVAL);
	CHECK(cuflag_slot_arm_many(s, 1, NULL) == -EINVAL);
	CHECK(cuflag_slot_arm_many(NULL, 1, &first) == -EINVAL);
	/* 2^30 armed at once is allowed; 2^31 outstanding is not, and then
	 * nothing is reserved. */
	CHECK_RC(cuflag_slot_arm_many(s, 1u << 30, &first));
	CHECK_RC(cuflag_slot_arm_many(s, (1u << 30) - 1, &t));
	CHECK(t == first + (1u << 30));
	CHECK(cuflag_slot_arm_many(s, 1, &t) == -EOVERFLOW);
	/* The writer catches up: all of it in one count, then room again, from
	 * the value after the last reserved (the refused call took none). */
	t = first + 0x7ffffffeu;
	sim_store(cuflag_slot_flag(s), t);
	count_exact(s, 0x7fffffffu);
	expect_quiet(s);
	CHECK_RC(cuflag_slot_arm_many(s, 1u << 30, &first));
	CHECK(first == t + 1);
	sim_store(cuflag_slot_flag(s), first + (1u << 30) - 1);
	count_exact(s, 1u << 30);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
}

/* What the child of a fork gets from the parent's slot: -ECHILD from arm_many
 * and, where the CUDA binding is built, from slot_devptr (which says so before
 * it touches the driver, so no GPU is needed), out left as it was. */
static int child_of_fork(cuflag_slot *s)
{
	uint32_t t;
#ifdef CUFLAG_TEST_CUDA
	CUdeviceptr p = 7;
#endif

	if (cuflag_slot_arm_many(s, 5, &t) != -ECHILD)
		return 1;
#ifdef CUFLAG_TEST_CUDA
	if (cuflag_cuda_slot_devptr(s, &p) != -ECHILD || p != 7)
		return 2;
#endif
	return 0;
}

/* In a child of fork() the parent's slot is neither armed nor mapped for a
 * kernel: -ECHILD, nothing reserved. */
TEST(forked)
{
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t first, t;
	pid_t pid;
	int st;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm_many(s, 3, &first));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(child_of_fork(s));
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
	CHECK_MSG(WEXITSTATUS(st) == 0, "child: %s did not give -ECHILD",
		  WEXITSTATUS(st) == 1 ? "cuflag_slot_arm_many" : "cuflag_cuda_slot_devptr");
	CHECK_RC(cuflag_slot_arm(s, &t));
	CHECK(t == first + 3);
	sim_store(cuflag_slot_flag(s), t);
	count_exact(s, 4);
	expect_quiet(s);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
}

/* 64 slots of one group, each armed for many values stored one by one by its
 * own writer: exact per slot through the group's fd. */
TEST(group)
{
	enum { S = 64, N = 5000 };
	static _Atomic uint32_t data[S][64];
	static struct writer w[S];
	static uint64_t per[S];
	struct completion_rec {
		struct cuflag_completion r[128];
	} rec;
	cuflag_slot *s[S];
	cuflag_client *c;
	cuflag_group *g;
	uint64_t got = 0;
	uint32_t first;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_group_create(c, &g));
	CHECK_RC(cuflag_group_slots_acquire(g, S, s));
	memset(per, 0, sizeof(per));
	for (int i = 0; i < S; i++) {
		CHECK_RC(cuflag_slot_arm_many(s[i], N, &first));
		w[i] = (struct writer){ .flag = cuflag_slot_flag(s[i]), .data = data[i],
					.first = first, .n = N, .every = 1 + (unsigned)i % 7 };
	}
	for (int i = 0; i < S; i++)
		CHECK(pthread_create(&w[i].th, NULL, writer_main, &w[i]) == 0);
	struct pollfd p = { .fd = cuflag_group_fd(g), .events = POLLIN };
	while (got < (uint64_t)S * N) {
		CHECK_MSG(poll(&p, 1, 10000) == 1, "no record for 10 s: %llu",
			  (unsigned long long)got);
		int n = cuflag_group_drain(g, rec.r, 128);
		CHECK(n >= 0);
		for (int k = 0; k < n; k++) {
			int i;
			for (i = 0; i < S && s[i] != rec.r[k].slot; i++)
				;
			CHECK(i < S);
			per[i] += rec.r[k].completions;
			CHECK(per[i] <= N);
			got += rec.r[k].completions;
		}
	}
	for (int i = 0; i < S; i++) {
		pthread_join(w[i].th, NULL);
		CHECK(per[i] == N);
	}
	CHECK(cuflag_group_drain(g, rec.r, 128) == 0);
	for (int i = 0; i < S; i++)
		cuflag_slot_release(s[i]);
	cuflag_group_destroy(g);
	cuflag_disconnect(c);
}

/* The daemon killed while the writer stores: a third of the values land
 * before, a third while no daemon runs, a third after the restart; exact. */
TEST(restart)
{
	enum { N = 30000 };
	static _Atomic uint32_t data[64];
	struct daemon_proc b, gone;
	cuflag_client *c;
	cuflag_slot *s;
	struct writer w;
	uint32_t first;

	daemon_start(&b, 0, NULL);
	CHECK_RC(cuflag_connect(b.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm_many(s, N, &first));
	w = (struct writer){ .flag = cuflag_slot_flag(s), .data = data, .first = first, .n = N,
			     .every = 1, .pace_ns = 1000, .limit = N / 3 };
	CHECK(pthread_create(&w.th, NULL, writer_main, &w) == 0);
	count_exact(s, N / 3);
	kill(b.pid, SIGKILL);
	CHECK(waitpid(b.pid, NULL, 0) == b.pid);
	atomic_store(&w.limit, 2 * N / 3);
	while ((int32_t)(__atomic_load_n(cuflag_slot_flag(s), __ATOMIC_ACQUIRE) -
			 (first + 2 * N / 3 - 1)) < 0)
		sched_yield();
	gone = b;
	daemon_start_at(&b, gone.dir, gone.sock, 0, NULL);
	atomic_store(&w.limit, 0); /* the rest while the new daemon takes over */
	CHECK_RC(cuflag_reconnect(c));
	count_exact(s, N - N / 3);
	pthread_join(w.th, NULL);
	expect_quiet(s);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&b) == 0);
}

int main(int argc, char **argv)
{
	const struct test_env env = { .daemon = &d };
	int rc;

	setvbuf(stdout, NULL, _IONBF, 0);
	daemon_start(&d, 0, NULL);
	rc = test_run(&env, argc, argv);
	CHECK(daemon_stop(&d) == 0);
	if (rc == 0)
		printf("arm-many: ok\n");
	return rc;
}
