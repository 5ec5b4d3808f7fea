/* SPDX-License-Identifier: MIT */
/*
 * --mode cpu: what the scanner costs the node at a given load. Completions
 * are paced at 1k, 10k and 100k per second, against a daemon of each
 * scanner mode (spawned for the purpose, one after the other): a device
 * thread launches work every 1/R (it arms slot i % PACED_SLOTS) and
 * completes it half a period later (it stores the flag, reading t0); a
 * waiter thread blocked in epoll over the slots' eventfds reads t1 when it
 * wakes. Rows scan-MODE-RATE: the latency; and per run the daemon's CPU as a
 * share of a core and per completion.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <time.h>

#include "bench.h"
#include "cpu-relax.h"
#include "cuflag/cuflag.h"

#define PACED_SLOTS 8
#define PACED_RUN_NS 500000000ull  /* per rate and mode */
#define PACED_SKIP_NS 50000000ull  /* samples dropped first: the scanner learns */
#define PACED_SPIN_NS 30000u       /* the device spins for waits shorter than this */

static const unsigned paced_rates[BENCH_PACED_RATES] = { 1000, 10000, 100000 };
static const char *const paced_modes[2] = { "spin", "adaptive" };

struct paced_run {
	cuflag_slot *s[PACED_SLOTS];
	_Atomic uint64_t t0[PACED_SLOTS];
	uint64_t period, n, start;
	_Atomic uint64_t done;  /* completions the waiter counted */
	int rc;                 /* the device's arm error */
	struct bench_lat *row;
};

static void sleep_until(uint64_t t)
{
	uint64_t now = cuflag_now_ns();
	struct timespec ts;

	if (t <= now)
		return;
	if (t - now > PACED_SPIN_NS) {
		ts.tv_sec = (time_t)((t - PACED_SPIN_NS / 2) / 1000000000u);
		ts.tv_nsec = (long)((t - PACED_SPIN_NS / 2) % 1000000000u);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	while (cuflag_now_ns() < t)
		cuflag_cpu_relax();
}

/* The device: launch (arm) every period, complete half a period later. */
static void *paced_device(void *arg)
{
	struct paced_run *p = arg;

	prctl(PR_SET_TIMERSLACK, 1000ul, 0, 0, 0);
	for (uint64_t i = 0; i < p->n; i++) {
		uint64_t at = p->start + i * p->period;
		unsigned k = (unsigned)(i % PACED_SLOTS);
		uint32_t t;

		sleep_until(at);
		p->rc = cuflag_slot_arm(p->s[k], &t);
		if (p->rc)
			return NULL;
		sleep_until(at + p->period / 2);
		atomic_store(&p->t0[k], cuflag_now_ns());
		__atomic_store_n(cuflag_slot_flag(p->s[k]), t, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* The waiter: count every completion, one latency sample per wake. */
static int paced_wait(struct paced_run *p, int ep)
{
	struct epoll_event ev[PACED_SLOTS];

	while (atomic_load(&p->done) < p->n) {
		int k = epoll_wait(ep, ev, PACED_SLOTS, 5000);
		uint64_t t1 = cuflag_now_ns();
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -ETIMEDOUT;
		for (int j = 0; j < k; j++) {
			unsigned i = ev[j].data.u32;
			uint64_t n, t0 = atomic_load(&p->t0[i]);
			int rc = cuflag_slot_consume(p->s[i], &n);
			if (rc == -EAGAIN)
				continue;
			if (rc)
				return rc;
			atomic_fetch_add(&p->done, n);
			if (t0 >= p->start + PACED_SKIP_NS && t1 >= t0 && p->row->n < p->n)
				p->row->us[p->row->n++] = (double)(t1 - t0) / 1000.0;
		}
	}
	return atomic_load(&p->done) == p->n ? 0 : -EPROTO;
}

static void paced_one(const struct bench_daemon *d, unsigned rate, struct bench_lat *row,
		      struct bench_paced *out)
{
	struct paced_run p = { .period = 1000000000ull / rate, .row = row };
	cuflag_client *c = NULL;
	pthread_t dev;
	double cpu0, cpu1;
	uint64_t t_end;
	int ep = -1, rc;
	struct bench_worker_result res = { 0 };

	p.n = PACED_RUN_NS / p.period;
	ep = bench_worker_slots(d->sock, PACED_SLOTS, &c, p.s, &res);
	if (ep < 0) {
		bench_lat_fail(row, "%s", res.why);
		goto out;
	}
	cpu0 = bench_daemon_cpu_ms(d);
	p.start = cuflag_now_ns() + 1000000;
	rc = pthread_create(&dev, NULL, paced_device, &p);
	if (rc) {
		bench_lat_fail(row, "pthread_create: %s", strerror(rc));
		goto out;
	}
	rc = paced_wait(&p, ep);
	t_end = cuflag_now_ns();
	pthread_join(dev, NULL);
	cpu1 = bench_daemon_cpu_ms(d);
	if (p.rc || rc) {
		bench_lat_fail(row, "%s: %s (%llu of %llu counted)", p.rc ? "arm" : "count",
			       strerror(-(p.rc ? p.rc : rc)), (unsigned long long)p.done,
			       (unsigned long long)p.n);
		goto out;
	}
	out->per_s = (double)p.n * 1e9 / (double)(t_end - p.start);
	if (cpu0 >= 0 && cpu1 >= 0) {
		out->pct_core = (cpu1 - cpu0) * 1e8 / (double)(t_end - p.start);
		out->us_per_completion = (cpu1 - cpu0) * 1000.0 / (double)p.n;
	}
out:
	safe_close(ep);
	if (c)
		for (unsigned i = 0; i < PACED_SLOTS; i++)
			cuflag_slot_release(p.s[i]);
	cuflag_disconnect(c);
}

int bench_paced_run(const struct bench_opts *o, struct bench_report *r)
{
	int failed = 0;

	for (int m = 0; m < 2; m++) {
		struct bench_daemon d;
		int up = o->socket ? -1 : bench_daemon_start_mode(&d, o, paced_modes[m]);

		for (int k = 0; k < BENCH_PACED_RATES; k++) {
			struct bench_paced *bp = &r->paced[m][k];
			uint64_t n = PACED_RUN_NS / (1000000000ull / paced_rates[k]);

			snprintf(bp->name, sizeof(bp->name), "scan-%s-%uk", paced_modes[m],
				 paced_rates[k] / 1000);
			bp->mode = paced_modes[m];
			bp->rate = paced_rates[k];
			bp->per_s = bp->pct_core = bp->us_per_completion = -1;
			bp->row = bench_lat_add(r, bp->name, n);
			if (up)
				bench_lat_fail(bp->row, o->socket ? "needs a daemon of its own "
								    "(not with --socket)"
								  : "the daemon did not start");
			else
				paced_one(&d, paced_rates[k], bp->row, bp);
			failed |= bp->row->failed && !o->socket;
		}
		if (!up)
			bench_daemon_stop(&d);
	}
	r->have_paced = 1;
	return failed ? -1 : 0;
}

void bench_paced_ratios(struct bench_report *r)
{
	bench_ratio_lat(r, "scan-adaptive-10k_p50/scan-spin-10k_p50", "scan-adaptive-10k",
			"scan-spin-10k", 0);
	bench_ratio_lat(r, "scan-adaptive-100k_p50/scan-spin-100k_p50", "scan-adaptive-100k",
			"scan-spin-100k", 0);
}
