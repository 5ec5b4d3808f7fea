/* SPDX-License-Identifier: MIT */
/*
 * Wait for GPU completions in a plain epoll loop.
 *
 * Every slot's eventfd goes into one epoll set. When one is readable, its
 * counter says how many of that slot's armed values have landed since it
 * was last read. Here a thread plays the GPU and completes ROUNDS values on
 * each of NSLOTS slots in random order; the loop must count each slot's
 * completions exactly.
 *
 * Usage: epoll-wait [SOCKET]   (default: $CUFLAG_SOCKET, else cuflagd's own)
 * Exit status: 0 when every completion was counted exactly once.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "connect.h"
#include "cuflag/cuflag.h"
#include "sim-device.h"

#define NSLOTS 16
#define ROUNDS 200
/* A completion that has not arrived by then never will. */
#define TIMEOUT_MS 10000
/* How long the loop listens for completions nobody armed. */
#define QUIET_MS 50

static int fail(const char *what, int err)
{
	fprintf(stderr, "epoll-wait: %s: %s\n", what, strerror(err));
	return 1;
}

/*
 * Wait up to timeout_ms, then read every readable slot's counter into
 * counted[] and their sum into *added. Return: how many slots were readable
 * (0: none within the timeout), or a negative errno.
 */
static int count_ready(int ep, cuflag_slot **slots, uint64_t *counted, int timeout_ms,
		       uint64_t *added)
{
	struct epoll_event ev[NSLOTS];
	int n = epoll_wait(ep, ev, NSLOTS, timeout_ms);

	*added = 0;
	if (n < 0)
		return -errno;
	for (int k = 0; k < n; k++) {
		unsigned i = ev[k].data.u32;
		uint64_t done;
		int rc = cuflag_slot_consume(slots[i], &done);

		if (rc == -EAGAIN)
			continue; /* someone else read it first: nothing lost */
		if (rc)
			return rc;
		counted[i] += done;
		*added += done;
	}
	return n;
}

int main(int argc, char **argv)
{
	cuflag_client *c;
	cuflag_slot *slots[NSLOTS];
	uint64_t counted[NSLOTS] = { 0 }, added, remaining = (uint64_t)NSLOTS * ROUNDS;
	struct sim_device dev;
	int rc, ep, status = 0;

	rc = example_connect("epoll-wait", argc > 1 ? argv[1] : NULL, &c);
	if (rc)
		return 1;
	rc = cuflag_slots_acquire(c, NSLOTS, slots);
	if (rc)
		return fail("acquire", -rc);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return fail("epoll_create1", errno);
	for (unsigned i = 0; i < NSLOTS; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, cuflag_slot_fd(slots[i]), &ev) < 0)
			return fail("epoll_ctl", errno);
	}

	/* Queue the work and let the device run it. */
	rc = sim_device_start(&dev, slots, NSLOTS, ROUNDS, 1);
	if (rc)
		return fail("device", -rc);

	while (remaining > 0) {
		rc = count_ready(ep, slots, counted, TIMEOUT_MS, &added);
		if (rc == 0) {
			fprintf(stderr, "epoll-wait: %llu completions never arrived\n",
				(unsigned long long)remaining);
			return 1;
		}
		if (rc < 0)
			return fail("wait", -rc);
		if (added > remaining)
			break; /* more than was armed: reported below */
		remaining -= added;
	}
	rc = sim_device_join(&dev);
	if (rc)
		return fail("device thread", -rc);
	/* Everything armed has landed: nothing more may be signalled. */
	do {
		rc = count_ready(ep, slots, counted, QUIET_MS, &added);
		if (rc < 0)
			return fail("wait", -rc);
	} while (rc > 0);

	for (unsigned i = 0; i < NSLOTS; i++) {
		if (counted[i] != ROUNDS) {
			fprintf(stderr, "epoll-wait: slot %d counted %llu, expected %d\n",
				cuflag_slot_id(slots[i]), (unsigned long long)counted[i], ROUNDS);
			status = 1;
		}
		/* The flag holds the last value: wait returns at once. */
		if (cuflag_slot_wait(slots[i], sim_device_last(&dev, i), 0) != 0) {
			fprintf(stderr, "epoll-wait: slot %d flag short\n", cuflag_slot_id(slots[i]));
			status = 1;
		}
		cuflag_slot_release(slots[i]);
	}
	sim_device_free(&dev);
	close(ep);
	cuflag_disconnect(c);
	if (status == 0)
		printf("epoll-wait: %d slots x %d completions, each counted once\n", NSLOTS,
		       ROUNDS);
	return status;
}
