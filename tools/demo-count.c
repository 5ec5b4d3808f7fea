/* SPDX-License-Identifier: MIT */
/*
 * cuflag-demo: counting what a device part completed, through the slots'
 * eventfds as any event loop would (epoll), exactly. Below the devices and
 * the main program, which all call it.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "demo.h"

int demo_count(cuflag_slot **s, unsigned n, uint64_t want)
{
	uint64_t *got = calloc(n, sizeof(*got)), total = 0;
	int ep = epoll_create1(EPOLL_CLOEXEC), rc = 0;

	if (!got || ep < 0) {
		free(got);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, cuflag_slot_fd(s[i]), &ev) < 0)
			rc = -errno;
	}
	while (!rc && total < want * n) {
		struct epoll_event evs[64];
		int k = epoll_wait(ep, evs, 64, 10000);
		if (k <= 0) {
			rc = k == 0 ? -ETIMEDOUT : -errno;
			break;
		}
		for (int j = 0; j < k; j++) {
			uint64_t v;
			unsigned i = evs[j].data.u32;
			if (cuflag_slot_consume(s[i], &v) == 0) {
				got[i] += v;
				total += v;
			}
		}
	}
	for (unsigned i = 0; !rc && i < n; i++)
		if (got[i] != want)
			rc = -EPROTO;
	close(ep);
	free(got);
	return rc;
}
