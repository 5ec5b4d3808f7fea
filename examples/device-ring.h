/* SPDX-License-Identifier: MIT */
/* What device-ring.c and its kernel (device-ring.cu) share. */
#ifndef CUFLAG_EXAMPLE_DEVICE_RING_H
#define CUFLAG_EXAMPLE_DEVICE_RING_H

/* Items the kernel may be ahead of the host by. */
#define RING_SIZE 256u
/* The kernel gives up after this long without room. */
#define RING_STALL_NS 10000000000ull

/* One item, in host memory the device writes. */
struct ring_item {
	unsigned int seq;   /* 0, 1, 2, ... */
	unsigned int check; /* seq * 2654435761 */
	unsigned long long made_ns; /* the device's %globaltimer when written */
};

#endif
