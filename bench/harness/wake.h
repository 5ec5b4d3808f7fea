/* SPDX-License-Identifier: MIT */
/*
 * The timed wake of the CPU latency rows, one method for every mechanism:
 * the waiter (the caller's thread) arms, hands the target to a storer thread
 * and blocks in poll(2) on the mechanism's fd; the storer sleeps a random
 * 20-200 us (so the waiter is asleep for real), reads t0 and stores the
 * target with a release store (a GPU's posted write, as the CPU sees it);
 * the waiter reads t1 as soon as poll returns, then checks that the wake
 * carried exactly one completion. Also the in-process scanner, the baseline
 * of the inproc-scanner rows.
 */
#ifndef CUFLAG_PERF_WAKE_H
#define CUFLAG_PERF_WAKE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "perf.h"

struct bench_mech {
	struct bench_lat *row;
	int fd;                   /* what the waiter polls */
	volatile uint32_t *flag;  /* what the storer stores to */
	int write_fd;             /* the storer also writes fd after the store */
	/* The next target (NULL: one more than the last); 0 or a negative errno. */
	int (*arm)(struct bench_mech *m, uint32_t *t);
	/* What the wake carried, after t1 (NULL: read fd); 0 or a negative errno. */
	int (*consume)(struct bench_mech *m, uint64_t *n);
	void *arg;                /* the mechanism's own */
	uint32_t next;
	uint32_t local_flag;      /* flag's default target */
};

/* A mechanism through a cuflagd slot: its eventfd, its flag. */
struct cuflag_slot;
void bench_mech_slot(struct bench_mech *m, struct cuflag_slot *s);

struct bench_storer {
	pthread_t thread;
	int go_efd;
	struct bench_mech *_Atomic m;
	_Atomic uint32_t target;
	_Atomic uint64_t t0;
	_Atomic int quit;
	uint64_t rng;
};
/* 0 or -1 (said on stderr). */
int bench_storer_start(struct bench_storer *st);
void bench_storer_stop(struct bench_storer *st);

/* One timed wake; 0 and *us, or -1 with the row failed. */
int bench_wake_one(struct bench_storer *st, struct bench_mech *m, double *us);
/* Turns of 50 wakes each over the n mechanisms, so that drifting background
 * load falls on all alike, until each has warmup + iterations (the warmup
 * dropped) or has failed. */
void bench_wake_turns(struct bench_storer *st, struct bench_mech *m, size_t n, unsigned warmup,
		      unsigned iterations);
/* The cuflagd row's method on a slot of the caller's: warmup + n wakes, the
 * last n appended to row, with a storer of its own joined before it returns
 * (the process is single threaded again between calls: the scale run forks
 * then). 0, or -1 with the row failed. */
int bench_cpu_slot_wakes(struct cuflag_slot *s, struct bench_lat *row, unsigned warmup,
			 unsigned n);

/* inproc-scanner.c: the in-process scanner (the seed's design), one slot per
 * user. Slot i watches flags[i] and signals efds[i] (non-blocking eventfds). */
struct inproc_scanner;
int inproc_scanner_start(struct inproc_scanner **out, unsigned nslots,
			 volatile uint32_t *const *flags, const int *efds);
void inproc_scanner_stop(struct inproc_scanner *sc);
/* The slot's completion target is now t (and the scanner wakes if parked). */
void inproc_scanner_arm(struct inproc_scanner *sc, unsigned i, uint32_t t);

#endif
