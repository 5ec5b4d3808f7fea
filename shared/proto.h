/* SPDX-License-Identifier: MIT */
/* Checking and building wire messages; computing and checking region layouts. */
#ifndef CUFLAG_PROTO_CHECK_H
#define CUFLAG_PROTO_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "cuflag-proto.h"

/*
 * Check a request as received (len bytes, nfds fds arrived with it).
 * 0 when well formed; else a negative errno (-EPROTO for a bad header or
 * unknown type, -EBADMSG for a bad length or fd count, -EINVAL for a bad
 * field) with *reason set to a static text for the error reply and the log.
 */
int cuflag_request_check(const void *buf, size_t len, unsigned nfds, const char **reason);

/* The same for a reply; expect_type is the request's type. */
int cuflag_reply_check(const void *buf, size_t len, unsigned nfds, uint16_t expect_type,
		       uint32_t expect_id, const char **reason);

/* Fill a header. */
void cuflag_hdr_init(struct cuflag_msg_hdr *h, uint16_t type, uint32_t len, uint32_t req_id,
		     int32_t status, uint16_t nfds);

/* Where everything sits in a region of nslots flags and queue_cap arms. */
struct cuflag_region_layout {
	uint32_t nslots;
	uint32_t queue_cap;
	uint32_t head_off;
	uint32_t tail_off;
	uint32_t queue_off;
	uint32_t state_off; /* struct cuflag_slot_state[nslots], daemon-written */
	uint32_t flags_off;
	uint32_t groups_off; /* struct cuflag_group_ring, ngroups of ring_size bytes */
	uint32_t ngroups;
	uint32_t ring_cap;
	uint32_t ring_size;
	uint64_t size;
};

/* The header a region of layout l starts with (the client writes it; the
 * daemon compares it byte for byte). */
void cuflag_region_hdr_make(struct cuflag_region_hdr *h, const struct cuflag_region_layout *l);

/* The layout for nslots, queue_cap arms (a power of two), ngroups groups of
 * ring_cap records (a power of two); 0 or -EINVAL. */
int cuflag_region_layout_make(struct cuflag_region_layout *l, uint32_t nslots,
			      uint32_t queue_cap, uint32_t ngroups, uint32_t ring_cap,
			      uint32_t page_size);

/* A layout into a HELLO reply (the daemon's side), and back (the client's). */
void cuflag_region_layout_to_reply(struct cuflag_msg_hello_reply *r,
				   const struct cuflag_region_layout *l);
void cuflag_region_layout_from_reply(struct cuflag_region_layout *l,
				     const struct cuflag_msg_hello_reply *r);

/* Whether two layouts are the same in every field: a region made for one
 * can be handed to a daemon that offers the other. */
int cuflag_region_layout_equal(const struct cuflag_region_layout *a,
			       const struct cuflag_region_layout *b);

/*
 * Check a layout offered by a peer against the size of the memory behind it:
 * every part inside, aligned, not overlapping, the queue a power of two.
 * 0 or -EINVAL with *reason.
 */
int cuflag_region_layout_check(const struct cuflag_region_layout *l, uint64_t mapped_size,
			       uint32_t page_size, const char **reason);

#endif
