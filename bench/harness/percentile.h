/* SPDX-License-Identifier: MIT */
/* The one percentile helper that tests and the bench share. */
#ifndef CUFLAG_BENCH_PERCENTILE_H
#define CUFLAG_BENCH_PERCENTILE_H

#include <stddef.h>

/* Sort n samples ascending, in place. */
void samples_sort(double *v, size_t n);

/* Nearest rank: the smallest of n sorted samples with at least p% of them at
 * or below it (p in 0..100); 0 when there are none. */
double samples_percentile(const double *sorted, size_t n, double p);

#endif
