/* SPDX-License-Identifier: MIT */
/* The timed wake of the CPU latency rows (wake.h says how). */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "wake.h"

#define WAKE_TIMEOUT_MS 5000
#define BLOCK 50 /* samples per turn */

static int slot_arm(struct bench_mech *m, uint32_t *t)
{
	return cuflag_slot_arm(m->arg, t);
}

static int slot_consume(struct bench_mech *m, uint64_t *n)
{
	return cuflag_slot_consume(m->arg, n);
}

void bench_mech_slot(struct bench_mech *m, cuflag_slot *s)
{
	m->arg = s;
	m->fd = cuflag_slot_fd(s);
	m->flag = cuflag_slot_flag(s);
	m->arm = slot_arm;
	m->consume = slot_consume;
}

static void *storer_main(void *arg)
{
	struct bench_storer *st = arg;

	for (;;) {
		uint64_t v, one = 1;
		struct bench_mech *m;
		uint32_t t;

		if (read(st->go_efd, &v, sizeof(v)) != sizeof(v)) {
			if (errno == EINTR)
				continue;
			bench_say("storer: read: %s\n", strerror(errno));
			return NULL;
		}
		if (atomic_load(&st->quit))
			return NULL;
		m = atomic_load(&st->m);
		t = atomic_load(&st->target);
		bench_sleep_ns(20000 + bench_rand(&st->rng) % 180000);
		atomic_store(&st->t0, cuflag_now_ns());
		/* The simulated device write. */
		__atomic_store_n(m->flag, t, __ATOMIC_RELEASE);
		if (m->write_fd && write(m->fd, &one, sizeof(one)) != sizeof(one))
			bench_say("storer: eventfd write: %s\n", strerror(errno));
	}
}

int bench_storer_start(struct bench_storer *st)
{
	int rc;

	memset(st, 0, sizeof(*st));
	st->go_efd = eventfd(0, EFD_CLOEXEC);
	if (st->go_efd < 0) {
		bench_say("eventfd: %s\n", strerror(errno));
		return -1;
	}
	st->rng = cuflag_now_ns() | 1;
	rc = pthread_create(&st->thread, NULL, storer_main, st);
	if (rc) {
		bench_say("pthread_create: %s\n", strerror(rc));
		close(st->go_efd);
		return -1;
	}
	return 0;
}

void bench_storer_stop(struct bench_storer *st)
{
	uint64_t one = 1;

	atomic_store(&st->quit, 1);
	if (write(st->go_efd, &one, sizeof(one)) != sizeof(one))
		bench_say("eventfd write: %s\n", strerror(errno));
	pthread_join(st->thread, NULL);
	close(st->go_efd);
}

static int mech_arm(struct bench_mech *m, uint32_t *t)
{
	if (m->arm)
		return m->arm(m, t);
	*t = ++m->next;
	return 0;
}

static int mech_consume(struct bench_mech *m, uint64_t *n)
{
	if (m->consume)
		return m->consume(m, n);
	if (read(m->fd, n, sizeof(*n)) != sizeof(*n))
		return -errno;
	return 0;
}

int bench_wake_one(struct bench_storer *st, struct bench_mech *m, double *us)
{
	struct pollfd p = { .fd = m->fd, .events = POLLIN };
	uint64_t one = 1, t0, t1, n = 0;
	uint32_t t;
	int rc;

	rc = mech_arm(m, &t);
	if (rc) {
		bench_lat_fail(m->row, "arm failed: %s", strerror(-rc));
		return -1;
	}
	atomic_store(&st->m, m);
	atomic_store(&st->target, t);
	atomic_store(&st->t0, 0);
	if (write(st->go_efd, &one, sizeof(one)) != sizeof(one)) {
		bench_lat_fail(m->row, "eventfd write: %s", strerror(errno));
		return -1;
	}
	do
		rc = poll(&p, 1, WAKE_TIMEOUT_MS);
	while (rc < 0 && errno == EINTR);
	t1 = cuflag_now_ns();
	if (rc == 0) {
		bench_lat_fail(m->row, "no wake within %d ms of the store", WAKE_TIMEOUT_MS);
		return -1;
	}
	if (rc < 0) {
		bench_lat_fail(m->row, "poll: %s", strerror(errno));
		return -1;
	}
	t0 = atomic_load(&st->t0);
	if (t0 == 0 || t1 < t0) {
		bench_lat_fail(m->row, "woke before the store");
		return -1;
	}
	rc = mech_consume(m, &n);
	if (rc || n != 1) {
		bench_lat_fail(m->row, "the wake carried %llu completions (rc %d), not 1",
			       (unsigned long long)n, rc);
		return -1;
	}
	*us = (double)(t1 - t0) / 1000.0;
	return 0;
}

void bench_wake_turns(struct bench_storer *st, struct bench_mech *m, size_t n, unsigned warmup,
		      unsigned iterations)
{
	unsigned total = warmup + iterations, done[BENCH_MAX_LAT] = { 0 };

	assert(n <= BENCH_MAX_LAT); /* a report holds no more rows */
	for (int more = 1; more;) {
		more = 0;
		for (size_t k = 0; k < n; k++) {
			struct bench_lat *row = m[k].row;
			for (int b = 0; b < BLOCK && done[k] < total && !row->failed; b++) {
				double us;
				if (bench_wake_one(st, &m[k], &us))
					break;
				if (done[k]++ >= warmup)
					row->us[row->n++] = us;
			}
			if (done[k] < total && !row->failed)
				more = 1;
		}
	}
}

int bench_cpu_slot_wakes(cuflag_slot *s, struct bench_lat *row, unsigned warmup, unsigned n)
{
	struct bench_mech m = { .row = row };
	struct bench_storer st;

	bench_mech_slot(&m, s);
	if (bench_storer_start(&st)) {
		bench_lat_fail(row, "cannot start the storing thread");
		return -1;
	}
	bench_wake_turns(&st, &m, 1, warmup, n);
	bench_storer_stop(&st);
	return row->failed ? -1 : 0;
}
