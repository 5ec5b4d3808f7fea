/* SPDX-License-Identifier: MIT */
/*
 * A client program with no restart code in it, for restart tests: P
 * processes, each with T threads that arm and complete their own slot every
 * 200-600 us (a simulated device store), a burst thread that completes B
 * slots at once every few milliseconds, and one thread that counts through
 * epoll and cuflag_slot_consume(). Whatever happens to the daemon meanwhile,
 * every completion must be counted exactly once: at the end each slot's
 * count equals its completions, or the program fails.
 *
 *   resume-soak SOCKET SECONDS [PROCS [THREADS [BURST]]]
 *
 * Prints one line per process and exits 0 only if every count is exact.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cuflag/cuflag.h"

#define MAX_SLOTS 4096

struct soak {
	cuflag_client *c;
	cuflag_slot *slot[MAX_SLOTS];
	_Atomic uint64_t done[MAX_SLOTS];     /* completions stored */
	_Atomic uint64_t counted[MAX_SLOTS];  /* completions consumed */
	unsigned threads, burst, nslots;
	_Atomic int stop;
	_Atomic int failed;
	uint64_t longest_gap_ms; /* the longest time nothing was counted, while running */
};

static void fail(struct soak *k, const char *what, int rc)
{
	fprintf(stderr, "resume-soak %d: %s: %s\n", (int)getpid(), what, strerror(-rc));
	atomic_store(&k->failed, 1);
	atomic_store(&k->stop, 1);
}

/* Arm, let the "work" run, complete; one slot per thread. */
static void *worker(void *arg)
{
	struct soak *k = ((void **)arg)[0];
	unsigned i = (unsigned)(uintptr_t)((void **)arg)[1];
	unsigned seed = (unsigned)getpid() * 7919u + i;

	while (!atomic_load(&k->stop)) {
		uint32_t t;
		int rc = cuflag_slot_arm(k->slot[i], &t);
		if (rc) {
			fail(k, "arm", rc);
			break;
		}
		struct timespec ts = { 0, (long)(200 + rand_r(&seed) % 400) * 1000 };
		nanosleep(&ts, NULL);
		__atomic_store_n(cuflag_slot_flag(k->slot[i]), t, __ATOMIC_RELEASE);
		atomic_fetch_add(&k->done[i], 1);
	}
	return NULL;
}

/* Many slots completing at once: a daemon killed meanwhile is in the middle
 * of signalling thousands of them. */
static void *burster(void *arg)
{
	struct soak *k = arg;
	uint32_t t[MAX_SLOTS];

	while (!atomic_load(&k->stop)) {
		for (unsigned i = k->threads; i < k->nslots; i++) {
			int rc = cuflag_slot_arm(k->slot[i], &t[i]);
			if (rc) {
				fail(k, "arm (burst)", rc);
				return NULL;
			}
		}
		for (unsigned i = k->threads; i < k->nslots; i++) {
			__atomic_store_n(cuflag_slot_flag(k->slot[i]), t[i], __ATOMIC_RELEASE);
			atomic_fetch_add(&k->done[i], 1);
		}
		struct timespec ts = { 0, 3000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Count through epoll: what an event loop does, the library's dispatch fd
 * among its fds (it resumes with a new daemon even when no call of ours
 * needs one: completions left unsignalled by a killed daemon come then). */
#define DISPATCH_TAG UINT32_MAX
static void *counter(void *arg)
{
	struct soak *k = arg;
	struct epoll_event ev[64];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event de = { .events = EPOLLIN, .data.u32 = DISPATCH_TAG };
	int dfd = cuflag_client_dispatch_fd(k->c);

	if (dfd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, dfd, &de) < 0) {
		fail(k, "dispatch fd", dfd < 0 ? dfd : -errno);
		return NULL;
	}
	for (unsigned i = 0; i < k->nslots; i++) {
		struct epoll_event e = { .events = EPOLLIN, .data.u32 = i };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, cuflag_slot_fd(k->slot[i]), &e) < 0) {
			fail(k, "epoll_ctl", -errno);
			return NULL;
		}
	}
	uint64_t last = cuflag_now_ms();

	while (atomic_load(&k->stop) < 2) {
		int timeout = 20, n;
		uint64_t now;

		if (cuflag_client_dispatch_timeout(k->c, &timeout) == 0 && (timeout < 0 || timeout > 20))
			timeout = 20;
		n = epoll_wait(ep, ev, 64, timeout);
		now = cuflag_now_ms();
		/* Its timeout ran out or its fd is readable: a step of the
		 * library's own (a resume under way answers -EAGAIN). */
		(void)cuflag_client_dispatch(k->c);

		/* What a restart costs the program: the pause in its completions. */
		if (!atomic_load(&k->stop) && now - last > k->longest_gap_ms)
			k->longest_gap_ms = now - last;
		for (int j = 0; j < n; j++) {
			unsigned i = ev[j].data.u32;
			uint64_t got;

			if (i == DISPATCH_TAG)
				continue;
			if (cuflag_slot_consume(k->slot[i], &got) == 0) {
				uint64_t c = atomic_fetch_add(&k->counted[i], got) + got;
				last = now;
				/* More than were stored (a store may be a moment ahead of
				 * its tally, never two): counted twice. */
				if (c > atomic_load(&k->done[i]) + 1)
					fail(k, "a completion counted twice", -EEXIST);
			}
		}
	}
	close(ep);
	return NULL;
}

static int all_counted(struct soak *k)
{
	for (unsigned i = 0; i < k->nslots; i++)
		if (atomic_load(&k->counted[i]) != atomic_load(&k->done[i]))
			return 0;
	return 1;
}

static int run_one(const char *sock, unsigned seconds, unsigned threads, unsigned burst)
{
	static struct soak k;
	pthread_t th[64], bt, ct;
	void *args[64][2];
	uint64_t done = 0, counted = 0;
	int rc;

	k.threads = threads;
	k.burst = burst;
	k.nslots = threads + burst;
	rc = cuflag_connect(sock, &k.c);
	if (rc) {
		fprintf(stderr, "resume-soak: connect: %s\n", strerror(-rc));
		return 1;
	}
	rc = cuflag_slots_acquire(k.c, k.nslots, k.slot);
	if (rc) {
		fprintf(stderr, "resume-soak: acquire: %s\n", strerror(-rc));
		return 1;
	}
	pthread_create(&ct, NULL, counter, &k);
	for (unsigned i = 0; i < threads; i++) {
		args[i][0] = &k;
		args[i][1] = (void *)(uintptr_t)i;
		pthread_create(&th[i], NULL, worker, args[i]);
	}
	if (burst)
		pthread_create(&bt, NULL, burster, &k);
	for (uint64_t end = cuflag_now_ms() + seconds * 1000u;
	     cuflag_now_ms() < end && !atomic_load(&k.failed);)
		usleep(10000);
	atomic_store(&k.stop, 1);
	for (unsigned i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	if (burst)
		pthread_join(bt, NULL);
	/* Everything stored must be counted, once; allow a late restart. */
	for (uint64_t end = cuflag_now_ms() + 15000; cuflag_now_ms() < end && !all_counted(&k) &&
					      !atomic_load(&k.failed);)
		usleep(10000);
	atomic_store(&k.stop, 2);
	pthread_join(ct, NULL);
	for (unsigned i = 0; i < k.nslots; i++) {
		done += k.done[i];
		counted += k.counted[i];
	}
	printf("resume-soak %d: %llu completions, %llu counted, longest pause %llu ms, "
	       "epoch %016llx%s\n",
	       (int)getpid(), (unsigned long long)done, (unsigned long long)counted,
	       (unsigned long long)k.longest_gap_ms, (unsigned long long)cuflag_client_epoch(k.c),
	       all_counted(&k) && !k.failed ? "" : "  NOT EXACT");
	rc = all_counted(&k) && !k.failed ? 0 : 1;
	cuflag_disconnect(k.c);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned procs, threads, burst, seconds;
	int bad = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: resume-soak SOCKET SECONDS [PROCS [THREADS [BURST]]]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	seconds = (unsigned)atoi(argv[2]);
	procs = argc > 3 ? (unsigned)atoi(argv[3]) : 4;
	threads = argc > 4 ? (unsigned)atoi(argv[4]) : 8;
	burst = argc > 5 ? (unsigned)atoi(argv[5]) : 0;
	if (!procs || !threads || threads > 64 || threads + burst > MAX_SLOTS) {
		fprintf(stderr, "resume-soak: 1..64 threads, at most %d slots\n", MAX_SLOTS);
		return 2;
	}
	for (unsigned p = 0; p < procs; p++)
		if (fork() == 0)
			_exit(run_one(argv[1], seconds, threads, burst));
	for (unsigned p = 0; p < procs; p++) {
		int st;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			bad++;
	}
	printf("resume-soak: %u of %u processes exact\n", procs - bad, procs);
	return bad ? 1 : 0;
}
