/* SPDX-License-Identifier: MIT */
/*
 * cuflag-bench: cuflag against its baselines, measured in the same run.
 * Shared types of the parts: options, results, and what each part offers.
 */
#ifndef CUFLAG_BENCH_H
#define CUFLAG_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clock.h"
#include "fd-util.h"

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
	int scale;             /* the scale run (cpu mode) */
	unsigned scale_clients; /* idle fleet / armed run: processes */
	int paced;             /* the scanner-cost rows (cpu mode) */
	int metrics_cost;      /* the metrics on/off rows (cpu mode) */
};

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
	const char *mode;
	const struct bench_opts *opts;
	struct bench_lat lat[BENCH_MAX_LAT];
	size_t nlat;
	struct bench_tput tput[BENCH_MAX_TPUT];
	size_t ntput;
	/* Daemon CPU. */
	int have_daemon_cpu;
	pid_t daemon_pid;
	double us_per_completion;  /* daemon CPU per completion, throughput run */
	double idle_pct;           /* % of one core while clients sit idle */
	double idle_seconds;
	unsigned idle_clients;
	/* Arms per second with the scanner awake: one thread, 8 threads on 8 slots. */
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

/* stats.c */
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

/* report.c */
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
/* The cpu mode's throughput run (P processes x S slots) against d into t;
 * the daemon's CPU time over it in ms, < 0 if unreadable. */
double bench_cpu_tput(const struct bench_opts *o, struct bench_tput *t,
		      const struct bench_daemon *d);
/* Metrics on against off (cuflagd --no-metrics), alternating daemons in one
 * run: rows metrics-on and metrics-off, and their ratios (metrics-cost.c).
 * 0, or 1 when a row failed. */
int bench_metrics_cost(const struct bench_opts *o, struct bench_report *r);
void bench_daemon_stop(struct bench_daemon *d);
/* CPU time (user+system) of the daemon so far, in ms; < 0 if unreadable. */
double bench_daemon_cpu_ms(const struct bench_daemon *d);
const char *bench_find_daemon(const char *self);
/* idle.c: fill idle_pct with the daemon's CPU while P clients x S slots sit idle. */
void bench_idle_cpu(const struct bench_opts *o, struct bench_report *r,
		    const struct bench_daemon *d);

/* scale.c: size the fleet to RLIMIT_NOFILE (raised first; before the daemon
 * is spawned, which inherits it), then run it against the daemon; 0 or -1. */
void bench_scale_plan(const struct bench_opts *o, struct bench_scale *s);
int bench_scale_run(const struct bench_opts *o, struct bench_report *r,
		    const struct bench_daemon *d);

/* cpu.c: the cuflagd row's timed wakes on a slot of the caller's; a worker's
 * connection, n slots and an epoll set over their eventfds (-1: res says why). */
struct cuflag_client;
struct cuflag_slot;
int bench_cpu_slot_wakes(struct cuflag_slot *s, struct bench_lat *row, unsigned warmup,
			 unsigned n);
int bench_worker_slots(const char *sock, unsigned n, struct cuflag_client **c,
		       struct cuflag_slot **s, struct bench_worker_result *res);
/* After the last completion: nothing more may arrive on the slots of ep
 * (data.u32 indexes s) within 20 ms. 0, -EPROTO, or epoll's error. */
int bench_no_more(int ep, struct cuflag_slot **s);

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

/* armed.c: the 10 000-armed throughput row through per-slot eventfds
 * (group 0) or one group per process (group 1); the RLIMIT_NOFILE it needs
 * is raised before the daemon is spawned. */
void bench_armed_nofile(void);
void bench_armed_tput(const struct bench_opts *o, struct bench_report *r,
		      const struct bench_daemon *d, int group);
/* The ratio of row a's daemon CPU per completion to row b's (n/a if missing). */
void bench_ratio_cpu(struct bench_report *r, const char *name, const char *a, const char *b);

/* The group ratios: latency p50, throughput, daemon CPU per completion. */
void bench_group_ratios(struct bench_report *r);

/* arm-rate.c: fill arm_1 and arm_8 (or arm_why) against the daemon at sock. */
void bench_arm_cost(struct bench_report *r, const char *sock);

/* paced.c: the scanner-cost rows (cpu mode), against a daemon of each
 * --scanner-mode spawned for them; 0 or -1. */
int bench_paced_run(const struct bench_opts *o, struct bench_report *r);
void bench_paced_ratios(struct bench_report *r);

/* cpu.c, gpu.c: the two modes; return an exit status. */
int bench_cpu_run(const struct bench_opts *o, struct bench_report *r);
int bench_gpu_run(const struct bench_opts *o, struct bench_report *r);
/* gpu.c: the hidden throughput worker (--gpu-worker). */
int bench_gpu_worker(int argc, char **argv);

/* scanner.c: the in-process scanner (the seed's design), one slot per user. */
struct inproc_scanner;
/* Slot i watches flags[i] and signals efds[i] (non-blocking eventfds). */
int inproc_scanner_start(struct inproc_scanner **out, unsigned nslots,
			 volatile uint32_t *const *flags, const int *efds);
void inproc_scanner_stop(struct inproc_scanner *sc);
/* The slot's completion target is now t (and the scanner wakes if parked). */
void inproc_scanner_arm(struct inproc_scanner *sc, unsigned i, uint32_t t);

/* handoff.c: a relay that wakes a waiter's eventfd from a thread of this
 * process or from a child process (process != 0); see handoff.c. */
struct handoff;
int handoff_start(struct handoff **out, int process);
void handoff_stop(struct handoff *h);
/* The next target (the relay wakes if parked). */
uint32_t handoff_arm(struct handoff *h);
int handoff_fd(const struct handoff *h);
volatile uint32_t *handoff_flag(struct handoff *h);

#endif
