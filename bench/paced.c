/* SPDX-License-Identifier: MIT */
/*
 * --mode cpu: what the scanner costs the node at a given load, against a
 * daemon of each scanner mode (spawned for the purpose, one after the
 * other). A device thread launches work (it arms slot i % PACED_SLOTS) and
 * completes it a duration later (it stores the flag, reading t0), in order
 * per slot as a stream would; a waiter thread blocked in epoll over the
 * slots' eventfds reads t1 when it wakes. The loads:
 *   1k, 10k, 100k: steady, work in flight half of each period;
 *   burst: 50 launches back to back every 50 ms (1k/s on average), each
 *          done 100 us later, the scanner parked in between;
 *   mixed: 1k/s, durations of 10 us, 100 us, 1 ms and 10 ms in turn;
 *   queued-ms: a device that runs one piece of work at a time, as a GPU
 *          runs kernels that each fill it: all 8 slots armed at once every
 *          8 x 1.4 ms, each piece done 1.4 ms after the one before (FIFO),
 *          the slots in a turning order (a slot's place in the queue, and
 *          its time from its arm, change from one batch to the next);
 *   serial-ms: the same work one piece at a time (its baseline).
 * Rows scan-MODE-LOAD: the latency; per run the daemon's CPU as a share of
 * a core and per completion (schedstat: to the ns).
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
#include "cuflag-proto.h"
#include "cuflag/cuflag.h"

#define PACED_SLOTS 8
#define PACED_RUN_NS 500000000ull  /* per load and mode */
#define PACED_SKIP_NS 50000000ull  /* samples dropped first: the scanner learns */
/* The device sleeps on a timer until a lead before each step, then spins to
 * it: a GPU's work ends when it is done, not when a host timer fires. The
 * lead follows the device thread's own timer (rising at once to a late
 * wake and 5 us more, falling by a 64th a step), so that its stores land
 * when due however late this host's timer wakes; with a fixed lead the
 * stores of a timer later than it scattered by its lateness, and the
 * scanner, learning that spread, spun across it
 * (docs/bench-log/2026-12-01-scanner-cost-default-vs-spin.md, "The
 * simulated device was a late timer"). */
#define PACED_LEAD_MIN_NS 15000u
#define PACED_LEAD_MAX_NS 200000u
#define BURST_LEN 50
#define BURST_EVERY_NS 50000000ull
#define BURST_WORK_NS 100000ull
/* A GPU's work that fills it: the 12-block model of examples/python/
 * http_serve.py takes about this long a request on an H100. */
#define QUEUED_WORK_NS 1400000u

struct paced_load {
	const char *name;
	unsigned rate;  /* per second, on average */
	int burst;      /* launches in bursts */
	int mixed;      /* durations in turn from mixed_ns */
	unsigned queued; /* launches armed at once on a one-at-a-time device (0: none) */
};

static const struct paced_load paced_loads[BENCH_PACED_RATES] = {
	{ "1k", 1000, 0, 0, 0 },    { "10k", 10000, 0, 0, 0 }, { "100k", 100000, 0, 0, 0 },
	{ "burst", 1000, 1, 0, 0 }, { "mixed", 1000, 0, 1, 0 },
	{ "queued-ms", 1000000000u / QUEUED_WORK_NS, 0, 0, PACED_SLOTS },
	{ "serial-ms", 1000000000u / QUEUED_WORK_NS, 0, 0, 1 },
};
static const uint64_t mixed_ns[] = { 10000, 100000, 1000000, 10000000 };
static const char *const paced_modes[2] = { "spin", "adaptive" };

struct paced_run {
	const struct paced_load *load;
	cuflag_slot *s[PACED_SLOTS];
	_Atomic uint64_t t0[PACED_SLOTS];
	uint64_t n, start;
	_Atomic uint64_t done;  /* completions the waiter counted */
	int rc;                 /* the device's arm error */
	struct bench_lat *row;
};

static void sleep_until(uint64_t *lead, uint64_t t)
{
	uint64_t now = cuflag_now_ns();
	struct timespec ts;

	if (t <= now)
		return;
	if (t - now > 2 * *lead) {
		uint64_t at = t - *lead, late;
		ts.tv_sec = (time_t)(at / 1000000000u);
		ts.tv_nsec = (long)(at % 1000000000u);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		now = cuflag_now_ns();
		late = now > at ? now - at : 0;
		if (late + 5000 > *lead)
			*lead = late + 5000;
		else
			*lead -= *lead / 64;
		if (*lead < PACED_LEAD_MIN_NS)
			*lead = PACED_LEAD_MIN_NS;
		if (*lead > PACED_LEAD_MAX_NS)
			*lead = PACED_LEAD_MAX_NS;
	}
	while (cuflag_now_ns() < t)
		cuflag_cpu_relax();
}

/* When launch i is made, and how long its work takes. */
static uint64_t launch_at(const struct paced_run *p, uint64_t i)
{
	const struct paced_load *l = p->load;

	if (l->burst)
		return p->start + i / BURST_LEN * BURST_EVERY_NS;
	if (l->queued)
		return p->start + i / l->queued * l->queued * QUEUED_WORK_NS;
	return p->start + i * (1000000000ull / l->rate);
}

static uint64_t work_ns(const struct paced_run *p, uint64_t i)
{
	const struct paced_load *l = p->load;

	if (l->burst)
		return BURST_WORK_NS;
	if (l->mixed)
		return mixed_ns[i % (sizeof(mixed_ns) / sizeof(mixed_ns[0]))];
	if (l->queued)
		return QUEUED_WORK_NS;
	return 1000000000ull / l->rate / 2;
}

/* The slot launch i arms: in turn, or for queued work, a batch's slots in
 * an order that turns by 3 a batch (3 and 8 coprime: every slot takes
 * every place in the queue). */
static unsigned launch_slot(const struct paced_run *p, uint64_t i)
{
	const struct paced_load *l = p->load;

	if (l->queued)
		return (unsigned)((i % l->queued + 3 * (i / l->queued)) % PACED_SLOTS);
	return (unsigned)(i % PACED_SLOTS);
}

/* Work launched and not done yet, per slot in launch order (a stream's
 * writes land in order). */
struct inflight {
	uint64_t due[64];
	uint32_t target[64];
	unsigned head, n;
};

/* The device: launch (arm) each piece of work when due, complete each when
 * its work is done. */
static void *paced_device(void *arg)
{
	struct paced_run *p = arg;
	struct inflight f[PACED_SLOTS];
	uint64_t next = 0, last_due[PACED_SLOTS] = { 0 }, lead = PACED_LEAD_MIN_NS;
	uint64_t device_free = 0; /* queued work: the device's last piece ends then */
	unsigned busy = 0;

	memset(f, 0, sizeof(f));
	prctl(PR_SET_TIMERSLACK, 1000ul, 0, 0, 0);
	while (next < p->n || busy) {
		uint64_t at = next < p->n ? launch_at(p, next) : UINT64_MAX;
		unsigned k = PACED_SLOTS;

		/* The earliest completion due, against the next launch. */
		for (unsigned j = 0; j < PACED_SLOTS; j++)
			if (f[j].n && (k == PACED_SLOTS ||
				       f[j].due[f[j].head] < f[k].due[f[k].head]))
				k = j;
		if (k < PACED_SLOTS && f[k].due[f[k].head] <= at) {
			struct inflight *q = &f[k];
			sleep_until(&lead, q->due[q->head]);
			atomic_store(&p->t0[k], cuflag_now_ns());
			__atomic_store_n(cuflag_slot_flag(p->s[k]), q->target[q->head],
					 __ATOMIC_RELEASE);
			q->head = (q->head + 1) % 64;
			q->n--;
			busy--;
			continue;
		}
		unsigned s = launch_slot(p, next);
		struct inflight *q = &f[s];
		uint32_t t;
		if (q->n == 64) { /* the slot's stream is full: finish first */
			sleep_until(&lead, q->due[q->head]);
			continue;
		}
		sleep_until(&lead, at);
		p->rc = cuflag_slot_arm(p->s[s], &t);
		if (p->rc)
			return NULL;
		uint64_t due = at + work_ns(p, next);
		if (p->load->queued) { /* after the device's last piece */
			due = (at > device_free ? at : device_free) + work_ns(p, next);
			device_free = due;
		}
		if (due < last_due[s])
			due = last_due[s];
		last_due[s] = due;
		q->due[(q->head + q->n) % 64] = due;
		q->target[(q->head + q->n) % 64] = t;
		q->n++;
		busy++;
		next++;
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

void bench_paced_breakdown(struct bench_paced *out, const struct cuflag_msg_stats_reply *a,
			   const struct cuflag_msg_stats_reply *b, uint64_t n)
{
	out->wakeups = (double)(b->scanner_wakeups - a->scanner_wakeups) / (double)n;
	out->sleeps = (double)(b->scanner_sleeps - a->scanner_sleeps) / (double)n;
	out->spin_us = (double)(b->spinning_ns - a->spinning_ns) / 1e3 / (double)n;
	out->timer_late_us = (double)b->timer_late_ns / 1e3;
}

static void paced_one(const struct daemon_proc *d, const struct paced_load *l,
		      struct bench_lat *row, struct bench_paced *out)
{
	struct paced_run p = { .load = l, .row = row, .n = PACED_RUN_NS / (1000000000ull / l->rate) };
	cuflag_client *c = NULL;
	pthread_t dev;
	double cpu0, cpu1;
	uint64_t t_end;
	int ep = -1, rc;
	struct bench_worker_result res = { 0 };
	struct cuflag_msg_stats_reply st0, st1;
	int have_st;

	ep = bench_worker_slots(d->sock, PACED_SLOTS, &c, p.s, &res);
	if (ep < 0) {
		bench_lat_fail(row, "%s", res.why);
		goto out;
	}
	have_st = daemon_proc_stats(d, &st0) == 0;
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
	if (have_st && daemon_proc_stats(d, &st1) == 0 && p.n)
		bench_paced_breakdown(out, &st0, &st1, p.n);
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
		struct daemon_proc d;
		int up = o->socket ? -1 : bench_daemon_start_mode(&d, o, paced_modes[m]);

		for (int k = 0; k < BENCH_PACED_RATES; k++) {
			const struct paced_load *l = &paced_loads[k];
			struct bench_paced *bp = &r->paced[m][k];
			uint64_t n = PACED_RUN_NS / (1000000000ull / l->rate);

			snprintf(bp->name, sizeof(bp->name), "scan-%s-%s", paced_modes[m], l->name);
			bp->mode = paced_modes[m];
			bp->load = l->name;
			bp->rate = l->rate;
			bp->per_s = bp->pct_core = bp->us_per_completion = -1;
			bp->wakeups = bp->sleeps = bp->spin_us = bp->timer_late_us = -1;
			bp->row = bench_lat_add(r, bp->name, n);
			if (up)
				bench_lat_fail(bp->row, o->socket ? "needs a daemon of its own "
								    "(not with --socket)"
								  : "the daemon did not start");
			else
				paced_one(&d, l, bp->row, bp);
			failed |= bp->row->failed && !o->socket;
		}
		if (!up)
			bench_daemon_stop(&d);
	}
	r->have_paced = 1;
	return failed ? -1 : 0;
}

/* Per load: the adaptive (default) daemon's p50, p99 and CPU against the
 * spinning one's, measured in the same run. */
void bench_paced_ratios(struct bench_report *r)
{
	/* The report keeps the names: they live as long as the program. */
	static char names[BENCH_PACED_RATES][3][80];

	for (int k = 0; k < BENCH_PACED_RATES; k++) {
		const struct bench_paced *a = &r->paced[1][k], *s = &r->paced[0][k];

		snprintf(names[k][0], sizeof(names[k][0]), "%s_p50/%s_p50", a->name, s->name);
		bench_ratio_lat(r, names[k][0], a->name, s->name, 0);
		snprintf(names[k][1], sizeof(names[k][1]), "%s_p99/%s_p99", a->name, s->name);
		bench_ratio_lat(r, names[k][1], a->name, s->name, 1);
		snprintf(names[k][2], sizeof(names[k][2]), "%s_cpu/%s_cpu", a->name, s->name);
		bench_ratio_add(r, names[k][2],
				a->pct_core >= 0 && s->pct_core > 0 ? a->pct_core / s->pct_core
								    : -1);
	}
	/* Queued work against the same work one piece at a time: what the
	 * queue adds to the adaptive scanner's CPU per completion. */
	for (int k = 0; k < BENCH_PACED_RATES; k++) {
		const struct bench_paced *q = &r->paced[1][k], *one = &r->paced[1][k + 1];
		if (!paced_loads[k].queued || paced_loads[k].queued == 1 ||
		    k + 1 >= BENCH_PACED_RATES)
			continue;
		bench_ratio_add(r, "scan-adaptive-queued-ms_us/scan-adaptive-serial-ms_us",
				q->us_per_completion >= 0 && one->us_per_completion > 0
					? q->us_per_completion / one->us_per_completion
					: -1);
	}
}
