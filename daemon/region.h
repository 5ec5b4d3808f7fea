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
	int adopted; /* 1: taken over from a client after a daemon restart */
};

/*
 * Create a region for nslots flags: memfd, sized, mapped, header written,
 * flags zeroed, locked in memory (a failed mlock is a warning), then sealed
 * against shrinking, growing and further seals. 0 or a negative errno.
 */
int region_create(struct region *r, uint32_t nslots, uint32_t queue_cap);
void region_destroy(struct region *r);

/*
 * Take over a region a client kept from a daemon that went away: fd must be
 * a memfd sealed against shrink, grow and further seals, of exactly the size
 * the layout for nslots and queue_cap has, with a matching header. fd stays
 * the caller's. 0 or a negative errno with *why for the client.
 */
int region_adopt(struct region *r, int fd, uint32_t nslots, uint32_t queue_cap,
		 const char **why);

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
