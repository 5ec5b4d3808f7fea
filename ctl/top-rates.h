/* SPDX-License-Identifier: MIT */
/*
 * cuflagctl top's rates: what moved between two METRICS daemon records,
 * over the time between them as the daemon itself took them (its uptime in
 * the same records), never over when the answers happened to arrive; and
 * which frame a new one is measured against, so that a frame drawn early
 * (a key pressed) is not a rate over a few milliseconds.
 */
#ifndef CUFLAGCTL_TOP_RATES_H
#define CUFLAGCTL_TOP_RATES_H

#include <stdint.h>

#include "cuflag-proto.h"

/* A baseline younger than this is kept for the next frame. */
#define TOP_MIN_INTERVAL_MS 500

struct top_rates {
	int valid;         /* 0: no rate (no interval, or the daemon restarted) */
	double seconds;    /* the interval, by the daemon's clock */
	double arms, done, wakes; /* per second */
	double cpu_pct;    /* the scanner's, of one core */
};

/* The rates from record p to record d (taken later), each counter and the
 * interval from those two records alone. */
struct top_rates top_rates(const struct cuflag_metrics_daemon *p,
			   const struct cuflag_metrics_daemon *d);

/* A counter's rate from p to d over seconds (0 when it went back). */
double top_rate(uint64_t p, uint64_t d, double seconds);

/* Whether the frame d may replace p as the baseline of the next: at least
 * TOP_MIN_INTERVAL_MS younger by the daemon's clock, or from a daemon that
 * started again. */
int top_next_baseline(const struct cuflag_metrics_daemon *p, const struct cuflag_metrics_daemon *d);

#endif
