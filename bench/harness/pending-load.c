/* SPDX-License-Identifier: MIT */
/* One process's share of a pending load (pending-load.h). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "pending-load.h"

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void land(struct pending_load *l, uint32_t i)
{
	l->landed[i] = 1;
	__atomic_store_n(cuflag_slot_flag(l->s[i]), l->target[i], __ATOMIC_RELEASE);
}

/* Connection k's group drained: the records, or -errno. */
static int drain(struct pending_load *l, unsigned k)
{
	struct cuflag_completion rec[64];
	int n, got = 0;

	while ((n = cuflag_group_drain(l->g[k], rec, 64)) > 0)
		for (int r = 0; r < n; r++, got++) {
			uintptr_t i = (uintptr_t)cuflag_slot_data(rec[r].slot);
			if (i >= l->n || rec[r].completions != 1 || !l->landed[i] || l->count[i]++)
				l->inexact++;
			l->counted += (unsigned)rec[r].completions;
		}
	if (n < 0)
		l->step = 3;
	return n < 0 ? n : got;
}

int pending_load_arm(struct pending_load *l, const char *sock, unsigned conns, unsigned slots)
{
	int rc = 0;

	memset(l, 0, sizeof(*l));
	l->conns = conns;
	l->slots = slots;
	l->n = conns * slots;
	l->rng = cuflag_now_ns() | 1;
	l->c = calloc(conns, sizeof(*l->c));
	l->g = calloc(conns, sizeof(*l->g));
	l->s = calloc(l->n, sizeof(*l->s));
	l->target = calloc(l->n, sizeof(*l->target));
	l->count = calloc(l->n, 1);
	l->landed = calloc(l->n, 1);
	if (!l->c || !l->g || !l->s || !l->target || !l->count || !l->landed) {
		l->step = 1;
		return -ENOMEM;
	}
	for (unsigned k = 0; k < conns && !rc; k++) {
		if ((rc = cuflag_connect(sock, &l->c[k])) ||
		    (rc = cuflag_group_create(l->c[k], &l->g[k])) ||
		    (rc = cuflag_group_slots_acquire(l->g[k], slots, &l->s[k * slots]))) {
			l->step = 1;
			break;
		}
		for (uint32_t i = k * slots; i < (k + 1) * slots && !rc; i++)
			if ((rc = cuflag_slot_set_data(l->s[i], (void *)(uintptr_t)i)) ||
			    (rc = cuflag_slot_arm(l->s[i], &l->target[i])))
				l->step = 2;
	}
	return rc;
}

uint32_t pending_load_pick(struct pending_load *l)
{
	uint32_t i;

	do {
		l->rng ^= l->rng << 13;
		l->rng ^= l->rng >> 7;
		l->rng ^= l->rng << 17;
		i = (uint32_t)((l->rng >> 11) % l->n);
	} while (l->landed[i]);
	return i;
}

uint64_t pending_load_time_one(struct pending_load *l, uint32_t i, int wait_ms)
{
	unsigned k = i / l->slots;
	struct pollfd p = { .fd = cuflag_group_fd(l->g[k]), .events = POLLIN };
	uint64_t t0 = cuflag_now_ns();

	land(l, i);
	while (!l->count[i]) {
		int left = wait_ms - (int)((cuflag_now_ns() - t0) / 1000000);
		if (left <= 0 || poll(&p, 1, left) < 0) {
			l->lost++;
			return 0;
		}
		if (drain(l, k) < 0)
			return 0;
	}
	return cuflag_now_ns() - t0;
}

int pending_load_land_rest(struct pending_load *l, unsigned per_ms, int timeout_ms)
{
	struct pollfd *p = calloc(l->conns, sizeof(*p));
	uint64_t t0 = cuflag_now_ns();
	unsigned left = 0, done = 0;
	int rc = 0;

	if (!p)
		return -ENOMEM;
	for (uint32_t i = 0; i < l->n; i++) {
		if (!l->landed[i])
			land(l, i);
		if (per_ms && i % per_ms == per_ms - 1)
			sleep_ns(1000000);
	}
	for (uint32_t i = 0; i < l->n; i++)
		left += !l->count[i];
	while (done < left && cuflag_now_ns() - t0 < (uint64_t)timeout_ms * 1000000) {
		for (unsigned k = 0; k < l->conns; k++)
			p[k] = (struct pollfd){ .fd = cuflag_group_fd(l->g[k]), .events = POLLIN };
		if (poll(p, l->conns, 1000) < 0) {
			rc = -errno;
			break;
		}
		for (unsigned k = 0; k < l->conns && !rc; k++) {
			int got = drain(l, k);
			if (got < 0)
				rc = got;
			else
				done += (unsigned)got;
		}
	}
	sleep_ns(50000000); /* nothing more may come */
	for (unsigned k = 0; k < l->conns && !rc; k++) {
		int more = drain(l, k);
		if (more < 0)
			rc = more;
		else if (more)
			l->inexact++;
	}
	for (uint32_t i = 0; i < l->n; i++)
		if (l->count[i] != 1) {
			if (l->count[i])
				l->inexact++;
			else
				l->lost++;
		}
	free(p);
	return rc;
}

void pending_load_close(struct pending_load *l)
{
	for (unsigned k = 0; l->c && k < l->conns; k++)
		cuflag_disconnect(l->c[k]);
	free(l->c);
	free(l->g);
	free(l->s);
	free(l->target);
	free(l->count);
	free(l->landed);
	memset(l, 0, sizeof(*l));
}
