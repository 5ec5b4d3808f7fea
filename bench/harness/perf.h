/* SPDX-License-Identifier: MIT */
/*
 * The measuring harness that cuflag-bench and the experiments of tests/perf/
 * share: options, a daemon of one's own, worker processes, the runs they
 * share; the rows of samples and their report are report.h's. Nothing here
 * calls back into a program that uses it.
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
#include "daemon-proc.h"
#include "fd-util.h"
#include "report.h"

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
	int scale_pending;     /* the pending-load rows (scale-pending.c); -1 until
				* the program decides */
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
double bench_fleet_run(struct bench_tput *t, const struct daemon_proc *d, unsigned P,
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

/* rows.c: sleep ns, resumed after signals. */
void bench_sleep_ns(uint64_t ns);

/* daemon.c: a cuflagd of our own (d->dir set), or the one at --socket (d->dir
 * "", d->pid the peer's from SO_PEERCRED, 0 if unknown). */
int bench_daemon_start(struct daemon_proc *d, const struct bench_opts *o);
/* The same with --scanner-mode mode (NULL: none given). */
int bench_daemon_start_mode(struct daemon_proc *d, const struct bench_opts *o, const char *mode);
/* The same with one more argument (NULL: none). */
int bench_daemon_start_with(struct daemon_proc *d, const struct bench_opts *o, const char *mode,
			    const char *extra);
void bench_daemon_stop(struct daemon_proc *d);
/* CPU time of the daemon so far (proc-cpu.c), in ms; < 0 if unreadable. */
double bench_daemon_cpu_ms(const struct daemon_proc *d);
/* $CUFLAGD, else cuflagd next to self (or in the build tree), else on PATH. */
const char *bench_find_daemon(const char *self);

/* tput.c: the throughput run, P processes x S slots through cuflagd: each
 * arms and stores at once, at most 8 in flight a slot, every count exact.
 * Into t; the daemon's CPU time over it in ms, < 0 if unreadable. */
double bench_cpu_tput(const struct bench_opts *o, struct bench_tput *t,
		      const struct daemon_proc *d);
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
		    const struct daemon_proc *d);
/* --scale-clients P into o; 0, or 2 for bad usage. */
int bench_scale_clients_opt(struct bench_opts *o, const char *arg);
/* scale-pending.c: procs load processes, each 12 connections x 1024 grouped
 * slots armed and pending, against a daemon of its own: rows
 * scale-hot-alone, scale-hot, scale-cold and their ratios; 0 or -1. */
#define BENCH_SCALE_PENDING_PROCS 16
int bench_scale_pending(const struct bench_opts *o, struct bench_report *r, unsigned procs);
/* metrics-cost.c: metrics on against off (cuflagd --no-metrics), daemons of
 * its own taking turns: rows metrics-on and metrics-off, their ratios; 0, or
 * 1 when a row failed. */
int bench_metrics_cost(const struct bench_opts *o, struct bench_report *r);

#endif
