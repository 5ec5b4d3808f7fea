/* SPDX-License-Identifier: MIT */
/* A relay that wakes a waiter's eventfd from a thread of this process or
 * from a child process (process != 0); see handoff.c. */
#ifndef CUFLAG_PERF_HANDOFF_H
#define CUFLAG_PERF_HANDOFF_H

#include <stdint.h>

struct handoff;
int handoff_start(struct handoff **out, int process);
void handoff_stop(struct handoff *h);
/* The next target (the relay wakes if parked). */
uint32_t handoff_arm(struct handoff *h);
int handoff_fd(const struct handoff *h);
volatile uint32_t *handoff_flag(struct handoff *h);

#endif
