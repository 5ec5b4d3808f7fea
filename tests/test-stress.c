/* SPDX-License-Identifier: MIT */
/*
 * Load: 8 client processes x 64 slots x 2000 completions, written by a
 * simulated device with random delays while the client keeps arming: every
 * slot's eventfd total equals its completions, none lost, none extra.
 * Also: several threads arming, waiting and consuming on one slot at once,
 * and a full arm queue that loses nothing.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "test-runner.h"

#define PROCS 8
#define SLOTS 64
#define COMPLETIONS 2000

struct child {
	cuflag_slot *s[SLOTS];
	uint32_t start[SLOTS];
	_Atomic uint32_t armed[SLOTS]; /* arms done per slot */
	uint64_t got[SLOTS];
	unsigned seed;
};

/* The simulated device: completes each slot's arms in order, with random delays. */
static void *writer(void *arg)
{
	struct child *ch = arg;
	unsigned seed = ch->seed;

	for (uint32_t r = 1; r <= COMPLETIONS; r++) {
		for (int i = 0; i < SLOTS; i++) {
			while (atomic_load_explicit(&ch->armed[i], memory_order_acquire) < r)
				usleep(50);
			if (rand_r(&seed) % 97 == 0)
				usleep((useconds_t)(rand_r(&seed) % 200));
			sim_store(cuflag_slot_flag(ch->s[i]), ch->start[i] + r);
		}
	}
	return NULL;
}

/* Arms every slot COMPLETIONS times, in random-sized bursts. */
static void *armer(void *arg)
{
	struct child *ch = arg;
	unsigned seed = ch->seed * 7 + 1;
	uint32_t done[SLOTS] = { 0 };
	int left = SLOTS;

	while (left) {
		int i = (int)(rand_r(&seed) % SLOTS);
		uint32_t burst = 1 + rand_r(&seed) % 16;
		for (uint32_t k = 0; k < burst && done[i] < COMPLETIONS; k++) {
			uint32_t t;
			CHECK_RC(cuflag_slot_arm(ch->s[i], &t));
			done[i]++;
			CHECK(t == ch->start[i] + done[i]);
			atomic_store_explicit(&ch->armed[i], done[i], memory_order_release);
			if (done[i] == COMPLETIONS)
				left--;
		}
	}
	return NULL;
}

static int child_main(const char *sock, unsigned seed)
{
	struct child *ch = calloc(1, sizeof(*ch));
	struct epoll_event ev;
	cuflag_client *c;
	pthread_t wt, at;
	uint64_t total = 0;
	int ep;

	ch->seed = seed;
	CHECK_RC(cuflag_connect(sock, &c));
	CHECK_RC(cuflag_slots_acquire(c, SLOTS, ch->s));
	ep = epoll_create1(0);
	for (int i = 0; i < SLOTS; i++) {
		ch->start[i] = *cuflag_slot_flag(ch->s[i]);
		ev.events = EPOLLIN;
		ev.data.u32 = (uint32_t)i;
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, cuflag_slot_fd(ch->s[i]), &ev) == 0);
	}
	CHECK(pthread_create(&wt, NULL, writer, ch) == 0);
	CHECK(pthread_create(&at, NULL, armer, ch) == 0);
	while (total < (uint64_t)SLOTS * COMPLETIONS) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, 20000);
		CHECK(n > 0); /* 20 s without a completion: one was lost */
		for (int k = 0; k < n; k++) {
			uint64_t v;
			int i = (int)evs[k].data.u32;
			if (cuflag_slot_consume(ch->s[i], &v) == 0) {
				ch->got[i] += v;
				total += v;
				CHECK(ch->got[i] <= COMPLETIONS); /* never more than armed */
			}
		}
	}
	pthread_join(at, NULL);
	pthread_join(wt, NULL);
	for (int i = 0; i < SLOTS; i++) {
		uint64_t v;
		CHECK(ch->got[i] == COMPLETIONS);
		CHECK_RC(cuflag_slot_wait(ch->s[i], ch->start[i] + COMPLETIONS, 0));
		/* None extra, even a little later. */
		usleep(i == 0 ? 20000 : 0);
		CHECK(cuflag_slot_consume(ch->s[i], &v) == -EAGAIN);
	}
	close(ep);
	cuflag_disconnect(c);
	free(ch);
	return 0;
}

static void processes_on(const struct daemon_proc *d)
{
	pid_t pids[PROCS];
	uint64_t t0 = cuflag_now_ns();

	for (int p = 0; p < PROCS; p++) {
		pids[p] = fork();
		CHECK(pids[p] >= 0);
		if (pids[p] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
			_exit(child_main(d->sock, (unsigned)p + 1));
		}
	}
	for (int p = 0; p < PROCS; p++) {
		int st;
		CHECK(waitpid(pids[p], &st, 0) == pids[p]);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	printf("stress: %d processes x %d slots x %d completions in %.2f s\n", PROCS, SLOTS,
	       COMPLETIONS, (double)(cuflag_now_ns() - t0) / 1e9);
}

/* ---- several threads on one slot ---- */

#define THREADS 4
#define PER_THREAD 1000

static cuflag_slot *shared_slot;
static _Atomic uint32_t reserved_count;
static _Atomic int armers_done;
static uint32_t shared_start;

static void *arm_and_wait(void *arg)
{
	(void)arg;
	for (int k = 0; k < PER_THREAD; k++) {
		uint32_t t;
		CHECK_RC(cuflag_slot_arm(shared_slot, &t));
		atomic_fetch_add(&reserved_count, 1);
		CHECK_RC(cuflag_slot_wait(shared_slot, t, 10000));
	}
	atomic_fetch_add(&armers_done, 1);
	return NULL;
}

/* Moves the flag forward to every value reserved so far, a few at a time. */
static void *device(void *arg)
{
	uint32_t v = 0;
	(void)arg;
	while (v < THREADS * PER_THREAD) {
		uint32_t r = atomic_load(&reserved_count);
		if (r > v) {
			v += 1 + (r - v) / 2;
			sim_store(cuflag_slot_flag(shared_slot), shared_start + v);
		} else {
			usleep(20);
		}
	}
	return NULL;
}

static void threads_one_slot_on(cuflag_client *c)
{
	pthread_t th[THREADS], dev;
	uint64_t total = 0;

	CHECK_RC(cuflag_slot_acquire(c, &shared_slot));
	shared_start = *cuflag_slot_flag(shared_slot);
	CHECK(pthread_create(&dev, NULL, device, NULL) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&th[i], NULL, arm_and_wait, NULL) == 0);
	/* This thread consumes while the others arm and wait. */
	while (total < THREADS * PER_THREAD) {
		struct pollfd p = { .fd = cuflag_slot_fd(shared_slot), .events = POLLIN };
		uint64_t v;
		int rc;
		CHECK_MSG(poll(&p, 1, 10000) == 1, "no signal: total %llu flag %u start %u reserved %u",
			  (unsigned long long)total, *cuflag_slot_flag(shared_slot), shared_start,
			  atomic_load(&reserved_count));
		rc = cuflag_slot_consume(shared_slot, &v);
		if (rc == 0)
			total += v;
		else
			CHECK(rc == -EAGAIN);
		CHECK(total <= THREADS * PER_THREAD);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_join(dev, NULL);
	CHECK(total == THREADS * PER_THREAD);
	cuflag_slot_release(shared_slot);
}

/* ---- full arm queue ---- */

static _Atomic int queue_arms;
static cuflag_slot *queue_slot;

static void *arm_many(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100; i++) {
		uint32_t t;
		CHECK_RC(cuflag_slot_arm(queue_slot, &t));
		atomic_fetch_add(&queue_arms, 1);
	}
	return NULL;
}

static int four_arms(void *arg)
{
	(void)arg;
	return atomic_load(&queue_arms) >= 4;
}

TEST(full_queue)
{
	const char *args[] = { "--queue-size", "4", "--test-hooks", NULL };
	struct daemon_proc d;
	cuflag_client *c;
	pthread_t th;
	uint64_t got = 0;
	uint32_t start;

	daemon_start(&d, 0, args);
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &queue_slot));
	start = *cuflag_slot_flag(queue_slot);
	/* Freeze the scanner: the queue of 4 fills and the fifth arm must wait. */
	kill(d.pid, SIGUSR1);
	usleep(20000); /* let the scanner take the freeze before arming */
	CHECK(pthread_create(&th, NULL, arm_many, NULL) == 0);
	CHECK(wait_until(four_arms, NULL, 5000));
	usleep(50000);
	CHECK(atomic_load(&queue_arms) < 100); /* blocked on the full queue, not lost */
	kill(d.pid, SIGUSR1); /* thaw */
	pthread_join(th, NULL);
	CHECK(atomic_load(&queue_arms) == 100);
	sim_store(cuflag_slot_flag(queue_slot), start + 100);
	while (got < 100) {
		uint64_t v;
		CHECK_RC(cuflag_slot_wait(queue_slot, start + 100, 5000));
		if (cuflag_slot_consume(queue_slot, &v) == 0)
			got += v;
	}
	CHECK(got == 100);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
}

/* The daemon and the client the first two tests share. */
static struct daemon_proc main_daemon;
static cuflag_client *main_client;

TEST(processes)
{
	processes_on(&main_daemon);
}

TEST(threads_one_slot)
{
	threads_one_slot_on(main_client);
}

int main(int argc, char **argv)
{
	const struct test_env env = { .daemon = &main_daemon };
	int rc;

	daemon_start(&main_daemon, 0, NULL);
	CHECK_RC(cuflag_connect(main_daemon.sock, &main_client));
	rc = test_run(&env, argc, argv);
	cuflag_disconnect(main_client);
	CHECK(daemon_stop(&main_daemon) == 0);
	if (rc == 0)
		printf("stress: ok\n");
	return rc;
}
