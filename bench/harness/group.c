/* SPDX-License-Identifier: MIT */
/*
 * Groups in the bench: a connection holding one group of BENCH_GROUP_SLOTS
 * slots (the cuflagd-group latency rows wake one of them), and a group's
 * completions counted through its one fd (the 10 000-armed throughput rows).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#include "perf.h"
#include "cuflag/cuflag.h"

struct bench_group_slots {
	cuflag_client *c;
	cuflag_group *g;
	cuflag_slot *s[BENCH_GROUP_SLOTS];
};

int bench_group_open(struct bench_group_slots **out, const char *sock)
{
	struct bench_group_slots *b = calloc(1, sizeof(*b));
	int rc;

	*out = NULL;
	if (!b)
		return -ENOMEM;
	rc = cuflag_connect(sock, &b->c);
	if (!rc)
		rc = cuflag_group_create(b->c, &b->g);
	if (!rc)
		rc = cuflag_group_slots_acquire(b->g, BENCH_GROUP_SLOTS, b->s);
	if (rc) {
		bench_group_close(b);
		return rc;
	}
	*out = b;
	return 0;
}

void bench_group_close(struct bench_group_slots *b)
{
	if (!b)
		return;
	if (b->s[0])
		for (unsigned i = 0; i < BENCH_GROUP_SLOTS; i++)
			cuflag_slot_release(b->s[i]);
	cuflag_group_destroy(b->g);
	cuflag_disconnect(b->c);
	free(b);
}

cuflag_group *bench_group_get(struct bench_group_slots *b)
{
	return b->g;
}

/* The slot the latency rows arm: one in the middle, the rest stay idle. */
cuflag_slot *bench_group_slot(struct bench_group_slots *b)
{
	return b->s[BENCH_GROUP_SLOTS / 2];
}

int bench_group_take(struct bench_group_slots *b, cuflag_slot *s, uint64_t *n)
{
	struct cuflag_completion rec[4];
	int k = cuflag_group_drain(b->g, rec, 4);

	*n = 0;
	if (k < 0)
		return k;
	/* Exactly one record, for the armed slot: anything else is a miscount. */
	if (k != 1 || rec[0].slot != s)
		return -EPROTO;
	*n = rec[0].completions;
	return 0;
}

int bench_group_count(cuflag_group *g, uint64_t want, int timeout_ms,
		      int (*each)(void *arg, cuflag_slot *s, uint64_t n), void *arg)
{
	struct pollfd p = { .fd = cuflag_group_fd(g), .events = POLLIN };
	struct cuflag_completion rec[256];
	uint64_t got = 0;

	while (got < want) {
		int k = poll(&p, 1, timeout_ms);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -ETIMEDOUT;
		k = cuflag_group_drain(g, rec, 256);
		if (k < 0)
			return k;
		for (int i = 0; i < k; i++) {
			int rc = each(arg, rec[i].slot, rec[i].completions);
			if (rc)
				return rc;
			got += rec[i].completions;
		}
	}
	return 0;
}
