/* SPDX-License-Identifier: MIT */
/*
 * The measuring harness that cuflag-bench and the experiments of tests/perf/
 * share: options, a daemon of one's own, worker processes, rows of samples
 * and their report (tables or one JSON object). Nothing here calls back into
 * a program that uses it.
 */
#ifndef CUFLAG_PERF_H
#define CUFLAG_PERF_H

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "clock.h"
#include "fd-util.h"

/* A line on stderr, after the program's name. */
#define bench_say(...) (fprintf(stderr, "%s: ", program_invocation_short_name), \
			fprintf(stderr, __VA_ARGS__))

/* Exit status meaning "cannot run here" (meson reads it as a skip). */
#define BENCH_EXIT_SKIP 77

struct bench_opts {
	const char *mode;      /* "cpu" or "gpu" */
	int json;
	unsigned iterations;   /* latency samples per mechanism */
	unsigned warmup;       /* samples dropped before those */
	unsigned clients;      /* P: processes in the throughput runs */
	unsigned slots;        /* S: slots per process (cpu throughput) */
	unsigned streams;      /* K: streams per process (gpu throughput) */
	uint64_t completions;  /* throughput completions per process */
	unsigned spin_us;      /* the daemon's --spin-us */
	const char *scanner_mode; /* the daemon's --scanner-mode, NULL: its default */
	unsigned idle_ms;      /* how long the idle CPU is measured */
	const char *daemon;    /* cuflagd to spawn */
	const char *socket;    /* an already-running daemon, or NULL */
	const char *dump_dir;  /* --dump-samples DIR, or NULL */
	const char *self;      /* argv[0] resolved: workers exec it */
	int scale;             /* the scale run (scale.c) */
	unsigned scale_clients; /* idle fleet / armed run: processes */
	int paced;             /* the scanner-cost rows (cpu mode) */
	int metrics_cost;      /* the metrics on/off rows (metrics-cost.c) */
};

/*
 * Options every measuring program takes (--json, --iterations, --warmup,
 * --clients, --slots, --completions, --spin-us, --scanner-mode, --daemon,
 * --socket, --dump-samples, --help) and, in extra (may be NULL), its own:
 * parse gets getopt's code and argument and returns 0, or 2 for bad usage.
 * Fills the defaults first and what follows from them last. -1 to go on,
 * or the exit status (0 after --help, 2 for bad usage).
 */
struct bench_extra_opts {
	const struct option *opts; /* ended by a zero entry; codes >= 512 */
	int (*parse)(struct bench_opts *o, int c, const char *arg);
	const char *usage;         /* their lines of --help */
};
int bench_opts_parse(struct bench_opts *o, int argc, char **argv, const char *what,
		     const struct bench_extra_opts *extra);
/* The same for a program of tests/perf/: r gets its name as title. */
struct bench_report;
int bench_program_start(struct bench_report *r, struct bench_opts *o, int argc, char **argv,
			const char *what, const struct bench_extra_opts *extra);
/* An unsigned number option in min..max; 0, or 2 (said on stderr). */
int bench_parse_uint(const char *opt, const char *s, unsigned long long min,
		     unsigned long long max, unsigned long long *out);

/* The scale run's idle fleet: processes x slots each, the daemon's default
 * --slots-per-client; and how many slots the armed run arms at once. */
#define BENCH_SCALE_SLOTS 1024
#define BENCH_SCALE_ARMED 10000
/* The cuflagd-group latency rows: one slot of a group this large is armed. */
#define BENCH_GROUP_SLOTS 1024
/* The 10 000-armed throughput rows: processes x slots each (the default
 * --slots-per-client is 1024), and a bound on the slot ids they count by. */
#define BENCH_ARMED_PROCS 10
#define BENCH_ARMED_SLOTS 1000
#define BENCH_ARMED_ID_MAX (1u << 20)
/* The spawned daemon's --max-clients: room for the fleet and the bench. */
#define BENCH_MAX_CLIENTS 256
#define BENCH_SCALE_MAX_CLIENTS (BENCH_MAX_CLIENTS - 16)

#define BENCH_MAX_LAT 24
#define BENCH_MAX_TPUT 16
#define BENCH_MAX_RATIOS 64

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
 * steady at 1k, 10k and 100k/s, bursts, and mixed durations. */
#define BENCH_PACED_RATES 5
struct bench_paced {
	char name[32];            /* scan-MODE-LOAD, also its latency row */
	const char *mode;         /* "spin" or "adaptive" */
	const char *load;         /* "1k", "10k", "100k", "burst", "mixed" */
	unsigned rate;            /* completions per second asked for (on average) */
	double per_s;             /* achieved; < 0: not measured */
	double pct_core;          /* daemon CPU, % of one core; < 0: not measured */
	double us_per_completion; /* daemon CPU per completion */
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
};

struct bench_daemon;

/* What a throughput worker process reports. */
struct bench_worker_result {
	int rc;
	uint64_t done;
	uint64_t t_start, t_end;
	char why[160];
};

/*
 * fleet.c: run P worker processes. In each child fn(i, ready_fd, go_fd,
 * result_fd, arg) writes one byte to ready_fd when set up, reads one byte
 * from go_fd, runs, writes its struct bench_worker_result to result_fd, and
 * exits (or execs something that does). Fills t; returns the daemon's CPU
 * time over the run in ms, or < 0 (not readable, or the run failed).
 */
typedef void (*bench_worker_fn)(unsigned i, int ready_fd, int go_fd, int result_fd, void *arg);
double bench_fleet_run(struct bench_tput *t, const struct bench_daemon *d, unsigned P,
		       bench_worker_fn fn, void *arg, uint64_t expect, unsigned ready_s,
		       unsigned run_s);

/* Fill res with rc (a negative errno; 0 reads as -EIO) and what failed. */
void bench_worker_fail(struct bench_worker_result *res, int rc, const char *what);
/* Read exactly len bytes before the deadline (cuflag_now_ns); 0 or -1. */
int bench_read_full(int fd, void *buf, size_t len, uint64_t deadline);
/* Reap a child, killing it if it has not ended within 10 s (at once if kill_now). */
void bench_reap(pid_t pid, int kill_now);

static inline uint64_t bench_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* rows.c (percentiles: tests/percentile.c) */
void bench_sleep_ns(uint64_t ns);
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

/* daemon.c: a cuflagd of our own, or the one at --socket. */
struct bench_daemon {
	pid_t pid;        /* ours, or the peer's from SO_PEERCRED; 0 if unknown */
	int spawned;
	char dir[64];
	char sock[108];
};
int bench_daemon_start(struct bench_daemon *d, const struct bench_opts *o);
/* The same with --scanner-mode mode (NULL: none given). */
int bench_daemon_start_mode(struct bench_daemon *d, const struct bench_opts *o, const char *mode);
/* The same with one more argument (NULL: none). */
int bench_daemon_start_with(struct bench_daemon *d, const struct bench_opts *o, const char *mode,
			    const char *extra);
void bench_daemon_stop(struct bench_daemon *d);
/* CPU time of the daemon so far (tests/proc-cpu.c), in ms; < 0 if unreadable. */
double bench_daemon_cpu_ms(const struct bench_daemon *d);
/* $CUFLAGD, else cuflagd next to self (or in the build tree), else on PATH. */
const char *bench_find_daemon(const char *self);

/* rows.c: the group ratios: latency p50, throughput, daemon CPU per completion. */
void bench_group_ratios(struct bench_report *r);
/* The ratio of row a's daemon CPU per completion to row b's (n/a if missing). */
void bench_ratio_cpu(struct bench_report *r, const char *name, const char *a, const char *b);

/* tput.c: the throughput run, P processes x S slots through cuflagd: each
 * arms and stores at once, at most 8 in flight a slot, every count exact.
 * Into t; the daemon's CPU time over it in ms, < 0 if unreadable. */
double bench_cpu_tput(const struct bench_opts *o, struct bench_tput *t,
		      const struct bench_daemon *d);
/* A worker's connection, n slots and an epoll set over their eventfds
 * (data.u32 indexes s); the epoll fd, or -1 with res filled (*c is set even
 * then, for the caller to disconnect). */
struct cuflag_client;
struct cuflag_slot;
int bench_worker_slots(const char *sock, unsigned n, struct cuflag_client **c,
		       struct cuflag_slot **s, struct bench_worker_result *res);
/* After the last completion: nothing more may arrive on the slots of ep
 * (data.u32 indexes s) within 20 ms. 0, -EPROTO, or epoll's error. */
int bench_no_more(int ep, struct cuflag_slot **s);
/* Raise RLIMIT_NOFILE (before the daemon is spawned: it inherits it) for
 * the 10 000-slot rows: an eventfd per armed slot. */
void bench_armed_nofile(void);

/* group.c: a connection with one group of BENCH_GROUP_SLOTS slots. */
struct cuflag_group;
struct bench_group_slots;
int bench_group_open(struct bench_group_slots **out, const char *sock);
void bench_group_close(struct bench_group_slots *b); /* NULL: nothing */
struct cuflag_group *bench_group_get(struct bench_group_slots *b);
/* The one slot of the group that the latency rows arm. */
struct cuflag_slot *bench_group_slot(struct bench_group_slots *b);
/* Drain the group after a wake: exactly one record, for s; its count in *n.
 * 0, -EPROTO (another record or none), or the drain's error. */
int bench_group_take(struct bench_group_slots *b, struct cuflag_slot *s, uint64_t *n);
/* Poll and drain g until want completions were counted, calling each(arg,
 * slot, completions) for every record; 0, each's error, -ETIMEDOUT (nothing
 * for timeout_ms) or another negative errno. */
int bench_group_count(struct cuflag_group *g, uint64_t want, int timeout_ms,
		      int (*each)(void *arg, struct cuflag_slot *s, uint64_t n), void *arg);

/* scale.c: the scale run. Plan the fleet from RLIMIT_NOFILE, raised first
 * (before the daemon is spawned: it inherits it); then run it against d:
 * rows scale-1x1 and s->row, and the armed run; 0 or -1. The ratio is
 * s->ratio of s->row to scale-1x1, for the caller to add. */
void bench_scale_plan(const struct bench_opts *o, struct bench_scale *s);
int bench_scale_run(const struct bench_opts *o, struct bench_report *r,
		    const struct bench_daemon *d);
/* --scale-clients P into o; 0, or 2 for bad usage. */
int bench_scale_clients_opt(struct bench_opts *o, const char *arg);
/* metrics-cost.c: metrics on against off (cuflagd --no-metrics), daemons of
 * its own taking turns: rows metrics-on and metrics-off, their ratios; 0, or
 * 1 when a row failed. */
int bench_metrics_cost(const struct bench_opts *o, struct bench_report *r);

/* The end of a program's run: --dump-samples, the report (JSON or tables),
 * the rows freed. The exit status: 1 when nothing ran or failed is set. */
int bench_finish(struct bench_report *r, int failed);

#endif
