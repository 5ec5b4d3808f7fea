/* SPDX-License-Identifier: MIT */
/* cuflag-demo on the simulated device: threads storing the armed values. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"

struct sim {
	cuflag_slot **s;
	unsigned n, per_slot;
	uint32_t *start;
	_Atomic uint32_t *armed;
	int failed;
};

/* The device: completes each slot's arms in order, as they come. */
static void *device(void *arg)
{
	struct sim *sm = arg;

	for (uint32_t r = 1; r <= sm->per_slot; r++)
		for (unsigned i = 0; i < sm->n; i++) {
			while (atomic_load_explicit(&sm->armed[i], memory_order_acquire) < r)
				usleep(10);
			__atomic_store_n(cuflag_slot_flag(sm->s[i]), sm->start[i] + r,
					 __ATOMIC_RELEASE);
		}
	return NULL;
}

static void *counter(void *arg)
{
	struct sim *sm = arg;
	sm->failed = demo_count(sm->s, sm->n, sm->per_slot);
	return NULL;
}

/* One waiter, one storing thread: the store's time to the waiter's wake. */
struct lat {
	cuflag_slot *s;
	_Atomic uint32_t go;     /* target to store, once the waiter sleeps */
	_Atomic uint64_t t0;
	unsigned samples;
};

static void *store_late(void *arg)
{
	struct lat *l = arg;

	for (unsigned i = 0; i < l->samples; i++) {
		uint32_t t;
		while (!(t = atomic_exchange(&l->go, 0)))
			usleep(5);
		usleep(50); /* the waiter is asleep in poll by now */
		atomic_store(&l->t0, cuflag_now_ns());
		__atomic_store_n(cuflag_slot_flag(l->s), t, __ATOMIC_RELEASE);
	}
	return NULL;
}

int demo_sim(cuflag_client *c, const struct demo_opts *o, struct demo_result *r)
{
	struct sim sm = { .n = o->slots, .per_slot = o->completions };
	struct lat l = { .samples = o->samples };
	pthread_t dev, cnt, st;
	uint64_t t0;
	int rc;

	snprintf(r->device, sizeof(r->device), "simulated (host threads storing the flags)");
	sm.s = calloc(sm.n, sizeof(*sm.s));
	sm.start = calloc(sm.n, sizeof(*sm.start));
	sm.armed = calloc(sm.n, sizeof(*sm.armed));
	r->lat_us = calloc(o->samples, sizeof(double));
	if (!sm.s || !sm.start || !sm.armed || !r->lat_us)
		return -ENOMEM;
	rc = cuflag_slots_acquire(c, sm.n, sm.s);
	if (rc)
		goto out;
	for (unsigned i = 0; i < sm.n; i++)
		sm.start[i] = *cuflag_slot_flag(sm.s[i]);

	/* Throughput: arm everything while the device completes behind us. */
	t0 = cuflag_now_ns();
	pthread_create(&cnt, NULL, counter, &sm);
	pthread_create(&dev, NULL, device, &sm);
	for (uint32_t k = 1; k <= sm.per_slot && !rc; k++)
		for (unsigned i = 0; i < sm.n && !rc; i++) {
			uint32_t t;
			rc = cuflag_slot_arm(sm.s[i], &t);
			atomic_store_explicit(&sm.armed[i], k, memory_order_release);
		}
	pthread_join(dev, NULL);
	pthread_join(cnt, NULL);
	r->seconds = (double)(cuflag_now_ns() - t0) / 1e9;
	r->completions = (uint64_t)sm.n * sm.per_slot;
	if (rc || (rc = sm.failed))
		goto out;

	/* Latency. */
	l.s = sm.s[0];
	pthread_create(&st, NULL, store_late, &l);
	for (unsigned i = 0; i < l.samples && !rc; i++) {
		struct pollfd p = { .fd = cuflag_slot_fd(l.s), .events = POLLIN };
		uint64_t n;
		uint32_t t;
		rc = cuflag_slot_arm(l.s, &t);
		if (rc)
			break;
		atomic_store(&l.go, t);
		if (poll(&p, 1, 5000) != 1) {
			rc = -ETIMEDOUT;
			break;
		}
		r->lat_us[r->nlat++] = (double)(cuflag_now_ns() - atomic_load(&l.t0)) / 1e3;
		rc = cuflag_slot_consume(l.s, &n);
	}
	if (rc) /* let the storing thread finish its loop */
		for (unsigned i = r->nlat; i < l.samples; i++)
			atomic_store(&l.go, 1);
	pthread_join(st, NULL);
	for (unsigned i = 0; i < sm.n; i++)
		cuflag_slot_release(sm.s[i]);
out:
	free(sm.s);
	free(sm.start);
	free(sm.armed);
	return rc;
}
