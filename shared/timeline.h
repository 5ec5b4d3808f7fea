/* SPDX-License-Identifier: MIT */
/*
 * Timeline arithmetic. A slot's flag is a 32-bit counter that only moves
 * forward and wraps at 2^32; two values are ordered by their signed distance,
 * so at most 2^31 values may separate any two that are compared.
 */
#ifndef CUFLAG_TIMELINE_H
#define CUFLAG_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>

/* Signed distance from b forward to a: > 0 when a is after b. */
static inline int32_t cuflag_tl_diff(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b);
}

/* a is strictly after b. */
static inline bool cuflag_tl_after(uint32_t a, uint32_t b)
{
	return cuflag_tl_diff(a, b) > 0;
}

/* a has reached b (a == b or a after b). */
static inline bool cuflag_tl_reached(uint32_t a, uint32_t b)
{
	return cuflag_tl_diff(a, b) >= 0;
}

/* The earlier of two values (by timeline order, not by magnitude). */
static inline uint32_t cuflag_tl_min(uint32_t a, uint32_t b)
{
	return cuflag_tl_after(a, b) ? b : a;
}

/*
 * Completions to signal for one slot: how far the flag has moved past what
 * was last signalled, but never past the highest value the client armed, so
 * a garbage flag cannot inflate a count. 0 when nothing new is due.
 */
static inline uint32_t cuflag_tl_due(uint32_t flag, uint32_t armed, uint32_t signalled)
{
	uint32_t upto = cuflag_tl_min(flag, armed);
	return cuflag_tl_after(upto, signalled) ? upto - signalled : 0;
}

#endif
