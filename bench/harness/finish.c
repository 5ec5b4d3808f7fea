/* SPDX-License-Identifier: MIT */
/* The end of a run: the samples dumped if asked, the report in its form
 * (json.c or text.c), the rows let go of. Above the rows, which the forms
 * read. */
#include <stdio.h>
#include <stdlib.h>

#include "perf.h"

int bench_finish(struct bench_report *r, int failed)
{
	if (!r->nlat && !r->ntput && !r->arm_ran)
		return 1; /* nothing ran (the daemon did not start): the error is printed */
	if (r->opts->dump_dir && bench_dump_samples(r, r->opts->dump_dir))
		failed = 1;
	if (r->opts->json)
		bench_print_json(r);
	else
		bench_print_text(r);
	fflush(stdout);
	for (size_t i = 0; i < r->nlat; i++)
		free(r->lat[i].us);
	return failed ? 1 : 0;
}
