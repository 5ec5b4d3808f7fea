/* SPDX-License-Identifier: MIT */
/*
 * A client's memory is never the daemon's. A region is a memfd the client
 * made and filled; sealing keeps it from shrinking, but the client can still
 * punch holes in it (fallocate PUNCH_HOLE), and a page the daemon then
 * touches would be faulted in fresh, charged to the daemon's cgroup, and
 * stay there for as long as the client keeps the memfd, long after its
 * session ended. mlock does not prevent it: a punch unmaps locked pages too,
 * and the next touch allocates anew.
 *
 * So every region mapping is registered with a userfaultfd in missing-page
 * mode with SIGBUS delivery: a daemon touch of a page that is not in the
 * memfd never allocates one. The SIGBUS handler puts a private zero page of
 * the daemon's in its place (freed with the mapping), notes the region as
 * punched and wakes the main loop through guard_fd(), which drops the
 * session. At ATTACH the region is populated through the same guard, so a
 * region with a hole is refused without a page of it being the daemon's.
 * Without the privilege for kernel-mode faults only the daemon's own loads
 * and stores are guarded (the population then touches each page itself);
 * without userfaultfd at all the region's block count is the only check.
 */
#ifndef CUFLAGD_REGION_GUARD_H
#define CUFLAGD_REGION_GUARD_H

#include <stddef.h>
#include <stdint.h>

enum guard_mode {
	GUARD_OFF = 0,   /* no userfaultfd: holes are only refused at ATTACH */
	GUARD_USER,      /* the daemon's own loads and stores */
	GUARD_FULL,      /* those and the kernel's faults for it (populate, mlock) */
};

/* Set up for up to max regions at once, in mode most or the most the
 * daemon may below it. Returns the mode it got; a line in the log says what
 * is not guarded. */
enum guard_mode guard_start(uint32_t max, enum guard_mode most);
/* The mode guard_start got. */
enum guard_mode guard_mode(void);
void guard_stop(void);

/* Readable when a guarded region was found punched (the main loop polls it). */
int guard_fd(void);

/*
 * Guard [map, map + size) and populate it (every page present, written
 * once, so that no later touch faults): 0 and the guard's index in *idx
 * (-1 when guarding is off), or -EFAULT when a page is missing (a hole; the
 * mapping then holds private pages of the daemon's where it had none: unmap
 * it) or another negative errno.
 */
int guard_add(uint8_t *map, size_t size, int *idx);
/* Before the mapping goes (idx from guard_add, or -1). */
void guard_del(int idx);

/* The start of a mapping found punched since the last call, or NULL; call
 * until NULL once guard_fd() is readable. */
uint8_t *guard_take_punched(void);

#endif
