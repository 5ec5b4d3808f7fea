/* SPDX-License-Identifier: MIT */
#include "policy/broken.h"

#include <assert.h>

static const struct broken_kind kinds[] = {
	[BROKEN_QUEUE] = { "arm queue corrupted", CUFLAG_DROP_QUEUE, 0 },
	[BROKEN_STALL] = { "eventfd made to block a write", CUFLAG_DROP_STALL, 1 },
	[BROKEN_FULL] = { "eventfd made unwritable (its counter full)", CUFLAG_DROP_FULL, 0 },
	[BROKEN_COST] = { "eventfd writes cost more than write-budget-us (epoll watchers)",
			  CUFLAG_DROP_COST, 1 },
	[BROKEN_WATCH] = { "its wake eventfd cannot be watched", CUFLAG_DROP_WATCH, 0 },
};

const struct broken_kind *broken_kind(enum scanner_broken why)
{
	assert(why > BROKEN_NONE && (size_t)why < sizeof(kinds) / sizeof(kinds[0]));
	return &kinds[why];
}
