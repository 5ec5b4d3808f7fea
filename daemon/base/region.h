/* SPDX-License-Identifier: MIT */
/* The memfds cuflagd shares: per-client regions and the daemon page. */
#ifndef CUFLAGD_REGION_H
#define CUFLAGD_REGION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cuflag-proto.h"
#include "proto.h"

struct region {
	uint8_t *map;  /* the daemon's shared mapping of the client's memfd */
	uint64_t size;
	dev_t dev;     /* which file it is: a live session's region is refused */
	ino_t ino;
	int guard;     /* its index in region-guard.h, or -1 */
};

/*
 * Take over the region a client made (see the HELLO reply): fd must be a
 * memfd sealed against shrink, grow and further seals, of exactly the layout
 * l's size, every page allocated (so that its memory is the client's, not
 * charged to the daemon when it touches it), starting with the header for l.
 * It is mapped, guarded against holes (region-guard.h: a page missing now
 * refuses it, one punched later drops its session without a page of the
 * daemon's going into it) and locked; fd stays the caller's. 0 or a negative errno with
 * *why for the client: -ESTALE for a resume (resuming) of a region whose
 * pages an unguarded daemon removed (region_discard), -EINVAL for the rest.
 */
int region_adopt(struct region *r, int fd, const struct cuflag_region_layout *l, int resuming,
		 const char **why);
/* The session of r ended while the daemon runs on (not at its exit: a
 * successor adopts the regions then): with the guard off, its pages are
 * removed, so that none faulted in by the daemon stays charged to it. */
void region_discard(struct region *r);
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
