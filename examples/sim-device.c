/* SPDX-License-Identifier: MIT */
#include "sim-device.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>

/* Arm every value, as cuflag_cuda_signal() does after queuing the work. */
static int submit(struct sim_device *d, cuflag_slot **slots, unsigned nslots, unsigned rounds)
{
	d->first = NULL;
	if (nslots == 0 || rounds == 0)
		return -EINVAL;
	d->first = calloc(nslots, sizeof(*d->first));
	if (!d->first)
		return -ENOMEM;
	d->slots = slots;
	d->nslots = nslots;
	d->rounds = rounds;
	for (unsigned i = 0; i < nslots; i++)
		for (unsigned r = 0; r < rounds; r++) {
			uint32_t t;
			int rc = cuflag_slot_arm(slots[i], &t);
			if (rc)
				return rc;
			if (r == 0)
				d->first[i] = t;
		}
	return 0;
}

uint32_t sim_device_last(const struct sim_device *d, unsigned i)
{
	return d->first[i] + d->rounds - 1;
}

static void *device_main(void *arg)
{
	struct sim_device *d = arg;
	unsigned *order = malloc(d->nslots * sizeof(*order));
	unsigned seed = d->seed;

	if (!order)
		return (void *)(intptr_t)-ENOMEM;
	for (unsigned i = 0; i < d->nslots; i++)
		order[i] = i;
	for (unsigned r = 0; r < d->rounds; r++) {
		/* Fisher-Yates: a fresh order of the slots every round. */
		for (unsigned i = d->nslots - 1; i > 0; i--) {
			unsigned j = (unsigned)rand_r(&seed) % (i + 1), tmp = order[i];
			order[i] = order[j];
			order[j] = tmp;
		}
		for (unsigned k = 0; k < d->nslots; k++) {
			unsigned i = order[k];
			/* What the GPU's posted write looks like to the CPU: an
			 * aligned 32-bit store with release order. */
			__atomic_store_n(cuflag_slot_flag(d->slots[i]), d->first[i] + r,
					 __ATOMIC_RELEASE);
		}
		/* Now and then let the loop catch up, so that it sees single
		 * completions as well as several counted at once. */
		if (rand_r(&seed) % 4 == 0)
			sched_yield();
	}
	free(order);
	return NULL;
}

int sim_device_start(struct sim_device *d, cuflag_slot **slots, unsigned nslots,
		     unsigned rounds, unsigned seed)
{
	int rc = submit(d, slots, nslots, rounds);

	if (rc == 0) {
		d->seed = seed;
		rc = -pthread_create(&d->thread, NULL, device_main, d);
	}
	if (rc)
		sim_device_free(d);
	return rc;
}

int sim_device_join(struct sim_device *d)
{
	void *ret;
	int rc = pthread_join(d->thread, &ret);

	return rc ? -rc : (int)(intptr_t)ret;
}

void sim_device_free(struct sim_device *d)
{
	free(d->first);
	d->first = NULL;
}
