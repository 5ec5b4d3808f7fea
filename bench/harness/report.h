/* SPDX-License-Identifier: MIT */
/*
 * A measuring program's report: latency rows (samples in us), throughput
 * rows, ratios, and the objects of the runs that have one (daemon CPU, the
 * arm cost, the scale run, the scanner's cost); printed as tables or as one
 * JSON object, the same for cuflag-bench and every program of tests/perf/.
 */
#ifndef CUFLAG_PERF_REPORT_H
#define CUFLAG_PERF_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bench_opts;

#define BENCH_MAX_LAT 48
#define BENCH_MAX_TPUT 16
#define BENCH_MAX_RATIOS 96

/* One latency row: samples in microseconds. */
struct bench_lat {
	const char *name;
	double *us;
	size_t n;
	int failed;            /* the mechanism could not be measured */
	char why[160];         /* what went wrong, when failed */
};

struct bench_tput {
	const char *name;
	unsigned procs;
	unsigned per_proc;     /* slots or streams per process */
	uint64_t completions;
	double seconds;
	double per_s;
	double daemon_cpu_ms;  /* < 0: not measured for this row */
	int failed;
	char why[160];
};

struct bench_ratio {
	const char *name;
	double value;          /* < 0: not available */
};

/* The scale run (--mode cpu): latency against allocated slots, many armed at once. */
struct bench_scale {
	int ran;
	unsigned clients, slots;  /* the idle fleet used: processes x slots each */
	char note[200];           /* why the fleet is smaller than asked, or "" */
	char row[32];             /* "scale-PxS", the fleet's latency row */
	char ratio[64];           /* "scale-PxS_p50/scale-1x1_p50" */
	unsigned armed_procs, armed_per_proc;
	uint64_t armed;           /* slots armed at once */
	double complete_ms;       /* first store to last completion; < 0: not measured */
	double daemon_cpu_ms;     /* over the armed run; < 0: not measured */
	int exact;                /* every slot signalled exactly once */
	char why[200];            /* what went wrong, when not exact */
};

/* Scanner cost at a paced load (paced.c): one per scanner mode and load:
 * steady at 1k, 10k and 100k/s, bursts, mixed durations, and queued work
 * (one piece at a time on the device) against the same one at a time. */
#define BENCH_PACED_RATES 7
struct bench_paced {
	char name[32];            /* scan-MODE-LOAD, also its latency row */
	const char *mode;         /* "spin" or "adaptive" */
	const char *load;         /* "1k", "10k", "100k", "burst", "mixed",
				   * "queued-ms", "serial-ms" */
	unsigned rate;            /* completions per second asked for (on average) */
	double per_s;             /* achieved; < 0: not measured */
	double pct_core;          /* daemon CPU, % of one core; < 0: not measured */
	double us_per_completion; /* daemon CPU per completion */
	/* Where the scanner's time went, per completion (its STATS, before and
	 * after the run); < 0: not measured. */
	double wakeups, sleeps;   /* wake-ups from a park or a sleep, of which sleeps */
	double spin_us;           /* time passing and spinning between passes */
	double timer_late_us;     /* how late its timed waits ended, at the end */
	struct bench_lat *row;
};

struct bench_report {
	const char *mode;          /* "cpu" or "gpu" */
	const char *title;         /* the text report's first line */
	const struct bench_opts *opts;
	struct bench_lat lat[BENCH_MAX_LAT];
	size_t nlat;
	struct bench_tput tput[BENCH_MAX_TPUT];
	size_t ntput;
	/* Daemon CPU. */
	int cpu_section;           /* the report has a daemon CPU section */
	int have_daemon_cpu;
	pid_t daemon_pid;
	double us_per_completion;  /* daemon CPU per completion, throughput run */
	double idle_pct;           /* % of one core while clients sit idle */
	double idle_seconds;
	unsigned idle_clients;
	/* Arms per second with the scanner awake: one thread, 8 threads on 8 slots. */
	int arm_ran;
	double arm_1, arm_8;       /* < 0: not measured */
	char arm_why[160];
	struct bench_ratio ratios[BENCH_MAX_RATIOS];
	size_t nratios;
	struct bench_scale scale;
	int have_paced;
	struct bench_paced paced[2][BENCH_PACED_RATES];
	/* The first connect (cuflag-bench's connect.c): a daemon it started,
	 * idle with no client, in % of one core (< 0: not measured). */
	int connect_ran;
	double connect_idle_pct, connect_idle_s;
};

/* rows.c (percentiles: percentile.c) */
/* Sort a row's samples and fill p50/p90/p99/max (0 when empty). */
struct bench_pcts {
	double p50, p90, p99, max;
};
struct bench_pcts bench_lat_pcts(struct bench_lat *l);
struct bench_lat *bench_lat_add(struct bench_report *r, const char *name, size_t cap);
void bench_lat_fail(struct bench_lat *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
struct bench_tput *bench_tput_add(struct bench_report *r, const char *name);
const struct bench_lat *bench_lat_find(const struct bench_report *r, const char *name);
const struct bench_tput *bench_tput_find(const struct bench_report *r, const char *name);
void bench_ratio_add(struct bench_report *r, const char *name, double value);
void bench_ratio_lat(struct bench_report *r, const char *name, const char *a, const char *b,
		     int p99);
void bench_ratio_tput(struct bench_report *r, const char *name, const char *a, const char *b);
int bench_dump_samples(struct bench_report *r, const char *dir);

/* json.c */
void bench_print_json(const struct bench_report *r);

/* text.c */
void bench_print_text(const struct bench_report *r);

/* rows.c: the group ratios: latency p50, throughput, daemon CPU per completion. */
void bench_group_ratios(struct bench_report *r);
/* The ratio of row a's daemon CPU per completion to row b's (n/a if missing). */
void bench_ratio_cpu(struct bench_report *r, const char *name, const char *a, const char *b);

/* The end of a program's run: --dump-samples, the report (JSON or tables),
 * the rows freed. The exit status: 1 when nothing ran or failed is set. */
int bench_finish(struct bench_report *r, int failed);

#endif
