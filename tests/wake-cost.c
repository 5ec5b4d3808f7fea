/* SPDX-License-Identifier: MIT */
/* What one eventfd write costs the writer's thread CPU when it wakes a
 * thread blocked in poll() on another CPU: the honest cost the write
 * budget's allowance (daemon/policy/budget.h, 250 us) must stay far above. Not a
 * test (its figures are the machine's); docs/RELIABILITY.md says how it is
 * used.  build/tests/wake-cost */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static int efd;

static int cmp(const void *a, const void *b)
{
	return *(const uint64_t *)a < *(const uint64_t *)b ? -1 : *(const uint64_t *)a > *(const uint64_t *)b;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void *waiter(void *arg)
{
	struct pollfd p = { .fd = efd, .events = POLLIN };
	uint64_t v;

	(void)arg;
	pin(1);
	for (;;) {
		poll(&p, 1, -1);
		if (read(efd, &v, sizeof(v)) == sizeof(v) && v > 1)
			return NULL;
	}
}

int main(void)
{
	enum { N = 20000 };
	static uint64_t c[N];
	uint64_t sum = 0, max = 0, v = 1, over = 0;
	pthread_t t;

	efd = eventfd(0, EFD_NONBLOCK);
	pthread_create(&t, NULL, waiter, NULL);
	pin(0);
	for (int i = 0; i < N; i++) {
		usleep(200); /* the waiter back in poll() */
		uint64_t c0 = cpu_ns();
		if (write(efd, &v, sizeof(v)) != sizeof(v))
			return 1;
		c[i] = cpu_ns() - c0;
		sum += c[i];
		max = c[i] > max ? c[i] : max;
		over += c[i] > 250000;
	}
	v = 2;
	if (write(efd, &v, sizeof(v)) != sizeof(v))
		return 1;
	pthread_join(t, NULL);
	qsort(c, N, sizeof(c[0]), cmp);
	printf("%d writes waking a poll() on the other CPU, writer's CPU time: mean %.1f us, "
	       "p50 %.1f, p99 %.1f, max %.1f us; %llu over 250 us\n",
	       N, sum / 1e3 / N, c[N / 2] / 1e3, c[N / 100 * 99] / 1e3, max / 1e3,
	       (unsigned long long)over);
	return 0;
}
