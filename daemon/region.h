/* SPDX-License-Identifier: MIT */
/* The memfds cuflagd shares: per-client regions and the daemon page. */
#ifndef CUFLAGD_REGION_H
#define CUFLAGD_REGION_H

#include <stddef.h>
#include <stdint.h>

#include "cuflag-proto.h"
#include "proto.h"

struct region {
	int fd;        /* sealed memfd; closed once handed to the client */
	uint8_t *map;  /* the daemon's shared mapping */
	struct cuflag_region_layout layout;
};

/*
 * Create a region for nslots flags: memfd, sized, mapped, header written,
 * flags zeroed, locked in memory (a failed mlock is a warning), then sealed
 * against shrinking, growing and further seals. 0 or a negative errno.
 */
int region_create(struct region *r, uint32_t nslots, uint32_t queue_cap);
void region_destroy(struct region *r);

/*
 * The daemon page: written by the daemon, sealed with F_SEAL_FUTURE_WRITE
 * after the daemon has mapped it, so clients can only map it read-only.
 */
struct daemon_page {
	int fd;
	struct cuflag_daemon_page *page;
	size_t size;
};
int daemon_page_create(struct daemon_page *dp, uint64_t epoch);
void daemon_page_destroy(struct daemon_page *dp);

#endif
