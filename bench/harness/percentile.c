/* SPDX-License-Identifier: MIT */
#include "percentile.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void samples_sort(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
}

double samples_percentile(const double *sorted, size_t n, double p)
{
	size_t rank;

	if (n == 0)
		return 0;
	rank = (size_t)((p / 100.0) * (double)n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}
