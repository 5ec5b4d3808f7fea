/* SPDX-License-Identifier: MIT */
/*
 * cuflag_region_layout_check() over arbitrary layouts, sizes and page sizes,
 * and cuflag_region_layout_make() against it. A layout the check accepts is
 * checked again here, independently: the region's size is the mapping's,
 * every part lies inside it, no two parts share a byte. The parts are the
 * region header (written by the daemon, read by the client), the head and
 * tail words, the arm queue and the flags.
 *
 * Input (little-endian, zero-padded when short): nslots, queue_cap,
 * head_off, tail_off, queue_off, flags_off (u32 each), size (u64), then a
 * byte choosing the page size (bit 7 set: 2^(low bits % 24); else the next
 * four bytes) and a byte choosing the mapped size (0: equal to size; else
 * the next eight bytes).
 */
#include <string.h>

#include "cuflag-proto.h"
#include "fuzz.h"
#include "proto.h"

struct part {
	uint64_t off, len;
};

static int is_pow2_64(uint64_t v)
{
	return v && !(v & (v - 1));
}

static void accepted(const struct cuflag_region_layout *l, uint64_t mapped, uint32_t page)
{
	struct part p[7] = {
		{ l->head_off, 4 },
		{ l->tail_off, 4 },
		{ l->queue_off, (uint64_t)l->queue_cap * sizeof(struct cuflag_arm) },
		{ l->flags_off, (uint64_t)l->nslots * sizeof(uint32_t) },
		{ 0, sizeof(struct cuflag_region_hdr) },
		{ l->state_off, (uint64_t)l->nslots * sizeof(struct cuflag_slot_state) },
		{ l->groups_off, (uint64_t)l->ngroups * l->ring_size },
	};
	unsigned n = l->ngroups ? 7 : 6;

	CHECK(l->size == mapped);
	CHECK(is_pow2_64(page) && l->size % page == 0);
	CHECK(l->nslots > 0 && is_pow2_64(l->queue_cap));
	CHECK(l->flags_off % page == 0);
	for (unsigned i = 0; i < n; i++) {
		/* Offsets are 32-bit and lengths at most 2^35: no sum wraps. */
		CHECK(p[i].len > 0);
		CHECK(p[i].off + p[i].len <= l->size);
		for (unsigned j = 0; j < i; j++)
			CHECK(p[i].off + p[i].len <= p[j].off ||
				   p[j].off + p[j].len <= p[i].off);
	}
}

static uint64_t rd(const uint8_t *d, size_t size, size_t *at, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++, (*at)++)
		if (*at < size)
			v |= (uint64_t)d[*at] << (8 * i);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cuflag_region_layout l, made;
	const char *reason = NULL;
	uint64_t mapped;
	uint32_t page;
	size_t at = 0;
	uint8_t b;
	int rc;

	l.nslots = (uint32_t)rd(data, size, &at, 4);
	l.queue_cap = (uint32_t)rd(data, size, &at, 4);
	l.head_off = (uint32_t)rd(data, size, &at, 4);
	l.tail_off = (uint32_t)rd(data, size, &at, 4);
	l.queue_off = (uint32_t)rd(data, size, &at, 4);
	l.flags_off = (uint32_t)rd(data, size, &at, 4);
	l.size = rd(data, size, &at, 8);
	b = (uint8_t)rd(data, size, &at, 1);
	page = b & 0x80 ? 1u << ((b & 0x7f) % 24) : (uint32_t)rd(data, size, &at, 4);
	b = (uint8_t)rd(data, size, &at, 1);
	mapped = b ? rd(data, size, &at, 8) : l.size;
	/* Groups last, so that inputs without them describe none. */
	l.ngroups = (uint32_t)rd(data, size, &at, 2);
	l.groups_off = (uint32_t)rd(data, size, &at, 4);
	l.ring_cap = 1u << (rd(data, size, &at, 1) % 20);
	l.ring_size = (uint32_t)rd(data, size, &at, 4);

	rc = cuflag_region_layout_check(&l, mapped, page, &reason);
	if (rc == 0)
		accepted(&l, mapped, page);
	else
		CHECK(reason != NULL && reason[0] != 0);

	/* What make builds, check accepts, for the size make chose. */
	if (cuflag_region_layout_make(&made, l.nslots, l.queue_cap, l.ngroups % 64, l.ring_cap,
				      page) == 0) {
		reason = NULL;
		rc = cuflag_region_layout_check(&made, made.size, page, &reason);
		CHECK_MSG(rc == 0, "layout_make's layout refused: %s", reason);
		accepted(&made, made.size, page);
		CHECK(made.nslots == l.nslots && made.queue_cap == l.queue_cap);
	}
	return 0;
}
