/* SPDX-License-Identifier: MIT */
/*
 * The simulated device of the examples: work is "submitted" by arming slots,
 * as cuflag_cuda_signal() does after queuing a stream's work, and a thread
 * then stores the armed values into the flags, as the GPU's
 * cuStreamWriteValue32 would when the work finishes.
 */
#ifndef CUFLAG_EXAMPLE_SIM_DEVICE_H
#define CUFLAG_EXAMPLE_SIM_DEVICE_H

#include <pthread.h>
#include <stdint.h>

#include "cuflag/cuflag.h"

struct sim_device {
	pthread_t thread;
	cuflag_slot **slots;
	uint32_t *first; /* each slot's first armed value; the rest follow */
	unsigned nslots;
	unsigned rounds;
	unsigned seed;
};

/*
 * Submit `rounds` pieces of work on each of the n slots (arm each slot
 * `rounds` times), then start completing them in rounds: every round stores
 * each slot's next value, the slots in a fresh random order.
 * Return: 0 or a negative errno (from cuflag_slot_arm() or pthread_create()).
 */
int sim_device_start(struct sim_device *d, cuflag_slot **slots, unsigned nslots,
		     unsigned rounds, unsigned seed);
/* Wait until every value is stored. Return: 0 or a negative errno. */
int sim_device_join(struct sim_device *d);
/* The last value armed on slot i: its flag holds it once the device is done. */
uint32_t sim_device_last(const struct sim_device *d, unsigned i);
/* Free what sim_device_start() allocated. */
void sim_device_free(struct sim_device *d);

#endif
