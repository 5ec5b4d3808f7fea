/* SPDX-License-Identifier: MIT */
/* Clocks and the rows of a report (percentiles: percentile.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "perf.h"
#include "percentile.h"

void bench_sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

struct bench_pcts bench_lat_pcts(struct bench_lat *l)
{
	struct bench_pcts p = { 0, 0, 0, 0 };

	if (!l->n)
		return p;
	samples_sort(l->us, l->n);
	p.p50 = samples_percentile(l->us, l->n, 50);
	p.p90 = samples_percentile(l->us, l->n, 90);
	p.p99 = samples_percentile(l->us, l->n, 99);
	p.max = l->us[l->n - 1];
	return p;
}

struct bench_lat *bench_lat_add(struct bench_report *r, const char *name, size_t cap)
{
	struct bench_lat *l;

	if (r->nlat >= BENCH_MAX_LAT) {
		bench_say("too many latency rows\n");
		exit(1);
	}
	l = &r->lat[r->nlat++];
	memset(l, 0, sizeof(*l));
	l->name = name;
	l->us = calloc(cap ? cap : 1, sizeof(double));
	if (!l->us) {
		bench_say("out of memory\n");
		exit(1);
	}
	return l;
}

void bench_lat_fail(struct bench_lat *l, const char *fmt, ...)
{
	va_list ap;

	l->failed = 1;
	va_start(ap, fmt);
	vsnprintf(l->why, sizeof(l->why), fmt, ap);
	va_end(ap);
	bench_say("%s: %s\n", l->name, l->why);
}

struct bench_tput *bench_tput_add(struct bench_report *r, const char *name)
{
	struct bench_tput *t;

	if (r->ntput >= BENCH_MAX_TPUT) {
		bench_say("too many throughput rows\n");
		exit(1);
	}
	t = &r->tput[r->ntput++];
	memset(t, 0, sizeof(*t));
	t->name = name;
	t->daemon_cpu_ms = -1;
	return t;
}

const struct bench_lat *bench_lat_find(const struct bench_report *r, const char *name)
{
	for (size_t i = 0; i < r->nlat; i++)
		if (!strcmp(r->lat[i].name, name) && !r->lat[i].failed && r->lat[i].n)
			return &r->lat[i];
	return NULL;
}

const struct bench_tput *bench_tput_find(const struct bench_report *r, const char *name)
{
	for (size_t i = 0; i < r->ntput; i++)
		if (!strcmp(r->tput[i].name, name) && !r->tput[i].failed && r->tput[i].per_s > 0)
			return &r->tput[i];
	return NULL;
}

void bench_ratio_add(struct bench_report *r, const char *name, double value)
{
	if (r->nratios >= BENCH_MAX_RATIOS)
		return;
	r->ratios[r->nratios].name = name;
	r->ratios[r->nratios].value = value;
	r->nratios++;
}

/* One file per mechanism, one latency in µs a line, ascending. */
int bench_dump_samples(struct bench_report *r, const char *dir)
{
	if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
		bench_say("--dump-samples: cannot create %s: %s\n", dir,
			strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < r->nlat; i++) {
		struct bench_lat *l = &r->lat[i];
		char path[4096];
		FILE *f;

		if (l->failed || !l->n)
			continue;
		snprintf(path, sizeof(path), "%s/%s.txt", dir, l->name);
		samples_sort(l->us, l->n);
		f = fopen(path, "w");
		if (!f) {
			bench_say("cannot write %s: %s\n", path, strerror(errno));
			return -1;
		}
		for (size_t k = 0; k < l->n; k++)
			fprintf(f, "%.3f\n", l->us[k]);
		if (fclose(f) != 0) {
			bench_say("cannot write %s: %s\n", path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* The ratio of a's p50 (or p99) to b's; n/a when either is missing. */
void bench_ratio_lat(struct bench_report *r, const char *name, const char *a, const char *b,
		     int p99)
{
	const struct bench_lat *la = bench_lat_find(r, a), *lb = bench_lat_find(r, b);
	struct bench_pcts pa, pb;

	if (!la || !lb) {
		bench_ratio_add(r, name, -1);
		return;
	}
	pa = bench_lat_pcts((struct bench_lat *)la);
	pb = bench_lat_pcts((struct bench_lat *)lb);
	if (p99)
		bench_ratio_add(r, name, pb.p99 > 0 ? pa.p99 / pb.p99 : -1);
	else
		bench_ratio_add(r, name, pb.p50 > 0 ? pa.p50 / pb.p50 : -1);
}


/* The ratio of a's completions per second to b's; n/a when either is missing. */
void bench_ratio_tput(struct bench_report *r, const char *name, const char *a, const char *b)
{
	const struct bench_tput *ta = bench_tput_find(r, a), *tb = bench_tput_find(r, b);

	bench_ratio_add(r, name, ta && tb ? ta->per_s / tb->per_s : -1);
}

/* Daemon CPU per completion of row a over row b; < 0 when either is missing. */
void bench_ratio_cpu(struct bench_report *r, const char *name, const char *a, const char *b)
{
	const struct bench_tput *ta = bench_tput_find(r, a), *tb = bench_tput_find(r, b);
	double ca, cb;

	if (!ta || !tb || ta->daemon_cpu_ms < 0 || tb->daemon_cpu_ms <= 0) {
		bench_ratio_add(r, name, -1);
		return;
	}
	ca = ta->daemon_cpu_ms / (double)ta->completions;
	cb = tb->daemon_cpu_ms / (double)tb->completions;
	bench_ratio_add(r, name, ca / cb);
}

/* The group rows against the per-slot ones (both modes). */
void bench_group_ratios(struct bench_report *r)
{
	bench_ratio_lat(r, "cuflagd-group_p50/cuflagd_p50", "cuflagd-group", "cuflagd", 0);
	bench_ratio_tput(r, "throughput_cuflagd-group-10000/cuflagd-10000", "cuflagd-group-10000",
			 "cuflagd-10000");
	bench_ratio_cpu(r, "daemon_cpu_cuflagd-group-10000/cuflagd-10000", "cuflagd-group-10000",
			"cuflagd-10000");
}
