/* SPDX-License-Identifier: MIT */
/*
 * --mode cpu: the simulated device (a thread that stores the target into the
 * flag with a release store) against three ways of waking a blocked waiter:
 *   eventfd-direct  the storing thread also writes an eventfd (the floor)
 *   inproc-scanner  a scanner thread in this process (the seed's design)
 *   cuflagd         the real daemon, a separate process, scanning our region
 *   cuflagd-group   the same, one slot of a group of BENCH_GROUP_SLOTS armed, the
 *                   waiter polling the group's fd and draining its ring
 * and, to show what crossing a process boundary costs here, handoff-thread and
 * handoff-process (handoff.c).
 * All use the same two threads of this process and the same clock: the
 * waiter arms, hands the target to the storer and blocks in poll(2) on an
 * eventfd; the storer sleeps a random 20-200 us (so the waiter is asleep),
 * reads t0 and stores; the waiter reads t1 as soon as poll returns.
 * Mechanisms take turns in blocks, so drifting background load hits all alike.
 * Then throughput (P processes x S slots through cuflagd), daemon CPU, and
 * the scale run (scale.c).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bench.h"
#include "cuflag/cuflag.h"

#define WAKE_TIMEOUT_MS 5000
#define BLOCK 50 /* samples per turn */

enum mech_kind { M_DIRECT, M_INPROC, M_CUFLAGD, M_GROUP, M_HO_THREAD, M_HO_PROCESS, M_COUNT };
static const char *const mech_names[M_COUNT] = { "eventfd-direct", "inproc-scanner", "cuflagd",
						 "cuflagd-group", "handoff-thread",
						 "handoff-process" };

struct mech {
	enum mech_kind kind;
	int fd;                  /* what the waiter polls */
	volatile uint32_t *flag; /* what the storer stores to */
	uint32_t local_flag;     /* the flag, for the two in-process mechanisms */
	uint32_t next;           /* next target (in-process mechanisms) */
	cuflag_slot *slot;
	struct bench_group_slots *grp; /* cuflagd-group: the group it belongs to */
	struct inproc_scanner *sc;
	struct handoff *ho;
	struct bench_lat *row;
};

struct storer {
	pthread_t thread;
	int go_efd;
	struct mech *_Atomic m;
	_Atomic uint32_t target;
	_Atomic uint64_t t0;
	_Atomic int quit;
	uint64_t rng;
};

static void *storer_main(void *arg)
{
	struct storer *st = arg;

	for (;;) {
		uint64_t v, one = 1;
		struct mech *m;
		uint32_t t;

		if (read(st->go_efd, &v, sizeof(v)) != sizeof(v)) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "cuflag-bench: storer: read: %s\n", strerror(errno));
			return NULL;
		}
		if (atomic_load(&st->quit))
			return NULL;
		m = atomic_load(&st->m);
		t = atomic_load(&st->target);
		bench_sleep_ns(20000 + bench_rand(&st->rng) % 180000);
		atomic_store(&st->t0, cuflag_now_ns());
		/* The simulated device write. */
		__atomic_store_n(m->flag, t, __ATOMIC_RELEASE);
		if (m->kind == M_DIRECT && write(m->fd, &one, sizeof(one)) != sizeof(one))
			fprintf(stderr, "cuflag-bench: storer: eventfd write: %s\n", strerror(errno));
	}
}

/* The storer thread and its go eventfd; 0 or -1 (said on stderr). */
static int storer_start(struct storer *st)
{
	int rc;

	st->go_efd = eventfd(0, EFD_CLOEXEC);
	if (st->go_efd < 0) {
		fprintf(stderr, "cuflag-bench: eventfd: %s\n", strerror(errno));
		return -1;
	}
	st->rng = cuflag_now_ns() | 1;
	rc = pthread_create(&st->thread, NULL, storer_main, st);
	if (rc) {
		fprintf(stderr, "cuflag-bench: pthread_create: %s\n", strerror(rc));
		close(st->go_efd);
		return -1;
	}
	return 0;
}

static void storer_stop(struct storer *st)
{
	uint64_t one = 1;

	atomic_store(&st->quit, 1);
	if (write(st->go_efd, &one, sizeof(one)) != sizeof(one))
		fprintf(stderr, "cuflag-bench: eventfd write: %s\n", strerror(errno));
	pthread_join(st->thread, NULL);
	close(st->go_efd);
}

static int mech_arm(struct mech *m, uint32_t *t)
{
	switch (m->kind) {
	case M_CUFLAGD:
	case M_GROUP:
		return cuflag_slot_arm(m->slot, t);
	case M_INPROC:
		*t = ++m->next;
		inproc_scanner_arm(m->sc, 0, *t);
		return 0;
	case M_HO_THREAD:
	case M_HO_PROCESS:
		*t = handoff_arm(m->ho);
		return 0;
	default:
		*t = ++m->next;
		return 0;
	}
}

/* Completions the wake carried (read after t1, so not timed). */
static int mech_consume(struct mech *m, uint64_t *n)
{
	if (m->kind == M_CUFLAGD)
		return cuflag_slot_consume(m->slot, n);
	if (m->kind == M_GROUP)
		return bench_group_take(m->grp, m->slot, n);
	if (read(m->fd, n, sizeof(*n)) != sizeof(*n))
		return -errno;
	return 0;
}

/* One timed wake; 0 and *us, or -1 with the row failed. */
static int one_wake(struct storer *st, struct mech *m, double *us)
{
	struct pollfd p = { .fd = m->fd, .events = POLLIN };
	uint64_t one = 1, t0, t1, n = 0;
	uint32_t t;
	int rc;

	rc = mech_arm(m, &t);
	if (rc) {
		bench_lat_fail(m->row, "arm failed: %s", strerror(-rc));
		return -1;
	}
	atomic_store(&st->m, m);
	atomic_store(&st->target, t);
	atomic_store(&st->t0, 0);
	if (write(st->go_efd, &one, sizeof(one)) != sizeof(one)) {
		bench_lat_fail(m->row, "eventfd write: %s", strerror(errno));
		return -1;
	}
	do
		rc = poll(&p, 1, WAKE_TIMEOUT_MS);
	while (rc < 0 && errno == EINTR);
	t1 = cuflag_now_ns();
	if (rc == 0) {
		bench_lat_fail(m->row, "no wake within %d ms of the store", WAKE_TIMEOUT_MS);
		return -1;
	}
	if (rc < 0) {
		bench_lat_fail(m->row, "poll: %s", strerror(errno));
		return -1;
	}
	t0 = atomic_load(&st->t0);
	if (t0 == 0 || t1 < t0) {
		bench_lat_fail(m->row, "woke before the store");
		return -1;
	}
	rc = mech_consume(m, &n);
	if (rc || n != 1) {
		bench_lat_fail(m->row, "the wake carried %llu completions (rc %d), not 1",
			       (unsigned long long)n, rc);
		return -1;
	}
	*us = (double)(t1 - t0) / 1000.0;
	return 0;
}

/*
 * The handoff rows pin the waiter (this thread) and the relay to one CPU and
 * the storer to another; every other row runs unpinned, as an application
 * would. The relays are pinned once, at start, from the waiter's pinned mask.
 */
struct pins {
	cpu_set_t all; /* this thread's mask at start */
	int waiter_cpu, storer_cpu;
	int pinned;
};

/* 0, or -1 when there are not two CPUs to pin to. */
static int pins_plan(struct pins *p)
{
	int here = sched_getcpu();

	memset(p, 0, sizeof(*p));
	p->waiter_cpu = p->storer_cpu = -1;
	if (sched_getaffinity(0, sizeof(p->all), &p->all))
		return -1;
	if (here >= 0 && CPU_ISSET(here, &p->all))
		p->waiter_cpu = here;
	for (int c = 0; c < CPU_SETSIZE && p->storer_cpu < 0; c++) {
		if (!CPU_ISSET(c, &p->all))
			continue;
		if (p->waiter_cpu < 0)
			p->waiter_cpu = c;
		else if (c != p->waiter_cpu)
			p->storer_cpu = c;
	}
	return p->storer_cpu < 0 ? -1 : 0;
}

/* Pin (or unpin) this thread and, if it runs, the storer; 0 or -1. */
static int pins_set(struct pins *p, const struct storer *st, int pinned)
{
	cpu_set_t w = p->all, s = p->all;

	if (p->pinned == pinned)
		return 0;
	if (pinned) {
		CPU_ZERO(&w);
		CPU_SET(p->waiter_cpu, &w);
		CPU_ZERO(&s);
		CPU_SET(p->storer_cpu, &s);
	}
	if (sched_setaffinity(0, sizeof(w), &w))
		return -1;
	if (st && pthread_setaffinity_np(st->thread, sizeof(s), &s))
		return -1;
	p->pinned = pinned;
	return 0;
}

/* Both handoff rows not measured, for one reason (and errno err, if not 0). */
static void handoff_fail(struct mech *m, const char *why, int err)
{
	for (int k = M_HO_THREAD; k <= M_HO_PROCESS; k++)
		bench_lat_fail(m[k].row, "%s%s%s", why, err ? ": " : "", err ? strerror(err) : "");
}

/* Start both relays on the waiter's CPU (before any other thread exists: one
 * of them is a forked process). */
static void handoff_setup(struct mech *m, struct pins *p)
{
	if (pins_plan(p)) {
		handoff_fail(m, "needs two CPUs to pin to", 0);
		return;
	}
	if (pins_set(p, NULL, 1)) {
		handoff_fail(m, "cannot pin", errno);
		return;
	}
	for (int k = M_HO_THREAD; k <= M_HO_PROCESS; k++) {
		int rc = handoff_start(&m[k].ho, k == M_HO_PROCESS);
		if (rc) {
			bench_lat_fail(m[k].row, "relay: %s", strerror(-rc));
			m[k].ho = NULL;
			continue;
		}
		m[k].fd = handoff_fd(m[k].ho);
		m[k].flag = handoff_flag(m[k].ho);
	}
	if (pins_set(p, NULL, 0))
		handoff_fail(m, "cannot unpin", errno);
}

static int latency(const struct bench_opts *o, struct bench_report *r, const char *sock)
{
	struct mech m[M_COUNT];
	struct storer st;
	struct pins pins;
	cuflag_client *c = NULL;
	int rc, failed = 0, direct_efd, inproc_efd;
	unsigned total = o->warmup + o->iterations, done[M_COUNT] = { 0 };

	memset(m, 0, sizeof(m));
	memset(&st, 0, sizeof(st));
	for (int k = 0; k < M_COUNT; k++) {
		m[k].kind = (enum mech_kind)k;
		m[k].row = bench_lat_add(r, mech_names[k], o->iterations);
		m[k].flag = &m[k].local_flag;
	}
	handoff_setup(m, &pins);
	direct_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	inproc_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (direct_efd < 0 || inproc_efd < 0) {
		fprintf(stderr, "cuflag-bench: eventfd: %s\n", strerror(errno));
		return -1;
	}
	m[M_DIRECT].fd = direct_efd;
	m[M_INPROC].fd = inproc_efd;
	{
		volatile uint32_t *flags[1] = { m[M_INPROC].flag };
		rc = inproc_scanner_start(&m[M_INPROC].sc, 1, flags, &inproc_efd);
		if (rc) {
			bench_lat_fail(m[M_INPROC].row, "scanner thread: %s", strerror(-rc));
			m[M_INPROC].sc = NULL;
		}
	}
	rc = cuflag_connect(sock, &c);
	if (!rc)
		rc = cuflag_slot_acquire(c, &m[M_CUFLAGD].slot);
	if (rc) {
		bench_lat_fail(m[M_CUFLAGD].row, "cannot get a slot from %s: %s", sock,
			       strerror(-rc));
	} else {
		m[M_CUFLAGD].fd = cuflag_slot_fd(m[M_CUFLAGD].slot);
		m[M_CUFLAGD].flag = cuflag_slot_flag(m[M_CUFLAGD].slot);
	}
	rc = bench_group_open(&m[M_GROUP].grp, sock);
	if (rc) {
		bench_lat_fail(m[M_GROUP].row, "cannot get a group of %d slots from %s: %s",
			       BENCH_GROUP_SLOTS, sock, strerror(-rc));
	} else {
		m[M_GROUP].slot = bench_group_slot(m[M_GROUP].grp);
		m[M_GROUP].fd = cuflag_group_fd(bench_group_get(m[M_GROUP].grp));
		m[M_GROUP].flag = cuflag_slot_flag(m[M_GROUP].slot);
	}
	if (storer_start(&st))
		return -1;
	/*
	 * Turns of BLOCK wakes each, until every mechanism has its samples: first
	 * the three unpinned rows, then the two pinned handoff rows (after them,
	 * so that pinning never moves the threads of the unpinned rows).
	 */
	for (int phase = 0; phase < 2; phase++) {
		int lo = phase ? M_HO_THREAD : 0, hi = phase ? M_COUNT : M_HO_THREAD;
		/* No plan (one CPU): the rows failed already; nothing to pin. */
		if (phase && pins.storer_cpu >= 0 && pins_set(&pins, &st, 1))
			handoff_fail(m, "cannot pin", errno);
		for (int more = 1; more;) {
			more = 0;
			for (int k = lo; k < hi; k++) {
				for (int b = 0; b < BLOCK && done[k] < total && !m[k].row->failed;
				     b++) {
					double us;
					if (one_wake(&st, &m[k], &us))
						break;
					if (done[k]++ >= o->warmup)
						m[k].row->us[m[k].row->n++] = us;
				}
				if (done[k] < total && !m[k].row->failed)
					more = 1;
			}
		}
	}
	if (pins_set(&pins, &st, 0))
		fprintf(stderr, "cuflag-bench: cannot unpin: %s\n", strerror(errno));
	storer_stop(&st);
	inproc_scanner_stop(m[M_INPROC].sc);
	handoff_stop(m[M_HO_THREAD].ho);
	handoff_stop(m[M_HO_PROCESS].ho);
	cuflag_slot_release(m[M_CUFLAGD].slot);
	cuflag_disconnect(c);
	bench_group_close(m[M_GROUP].grp);
	close(direct_efd);
	close(inproc_efd);
	/* A machine without two CPUs to pin to has no handoff rows; not a failure. */
	for (int k = 0; k < M_COUNT; k++)
		failed |= m[k].row->failed && (k < M_HO_THREAD || pins.storer_cpu >= 0);
	return failed ? -1 : 0;
}

/*
 * The cuflagd row's method on a slot of the caller's: warmup + n timed wakes,
 * the last n appended to row (which has room for them), with a storer thread
 * of its own that is joined before it returns, so that the process is single
 * threaded again between calls (the scale run forks then). 0, or -1 with the
 * row failed.
 */
int bench_cpu_slot_wakes(struct cuflag_slot *s, struct bench_lat *row, unsigned warmup,
			 unsigned n)
{
	struct mech m;
	struct storer st;

	memset(&m, 0, sizeof(m));
	memset(&st, 0, sizeof(st));
	m.kind = M_CUFLAGD;
	m.slot = s;
	m.fd = cuflag_slot_fd(s);
	m.flag = cuflag_slot_flag(s);
	m.row = row;
	if (storer_start(&st)) {
		bench_lat_fail(row, "cannot start the storing thread");
		return -1;
	}
	for (unsigned i = 0; i < warmup + n && !row->failed; i++) {
		double us;
		if (one_wake(&st, &m, &us))
			break;
		if (i >= warmup)
			row->us[row->n++] = us;
	}
	storer_stop(&st);
	return row->failed ? -1 : 0;
}

/* ---- throughput: P processes x S slots through cuflagd ---- */

#define TPUT_WINDOW 8 /* armed and not yet signalled, per slot */

struct tput_args {
	const char *sock;
	unsigned slots;
	uint64_t completions;
};

/*
 * A worker's setup: connect, acquire n slots into s, and an epoll set that
 * reports slot i's eventfd as data.u32 i. The epoll fd, or -1 with res
 * filled (*c is set even then, for the caller to disconnect).
 */
int bench_worker_slots(const char *sock, unsigned n, struct cuflag_client **c,
		       struct cuflag_slot **s, struct bench_worker_result *res)
{
	int ep, rc = cuflag_connect(sock, c);

	if (!rc)
		rc = cuflag_slots_acquire(*c, n, s);
	if (rc) {
		bench_worker_fail(res, rc, "connect / acquire slots");
		return -1;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		bench_worker_fail(res, -errno, "epoll_create1");
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		struct epoll_event e = { .events = EPOLLIN, .data.u32 = i };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, cuflag_slot_fd(s[i]), &e) < 0) {
			bench_worker_fail(res, -errno, "epoll_ctl");
			close(ep);
			return -1;
		}
	}
	return ep;
}

int bench_no_more(int ep, struct cuflag_slot **s)
{
	uint64_t end = cuflag_now_ns() + 20000000u, now;
	struct epoll_event ev[64];

	while ((now = cuflag_now_ns()) < end) {
		int k = epoll_wait(ep, ev, 64, (int)((end - now) / 1000000u) + 1);
		if (k < 0 && errno != EINTR)
			return -errno;
		for (int j = 0; j < k; j++) {
			uint64_t n;
			/* A doorbell that rang after its completion was counted
			 * from the record reads -EAGAIN here: not one more. */
			if (cuflag_slot_consume(s[ev[j].data.u32], &n) == 0)
				return -EPROTO;
		}
	}
	return 0;
}

/* One process: arm, store at once (the device is as fast as can be), count
 * what the eventfds say until every slot has its exact quota. */
static void tput_child(const struct tput_args *a, int ready_fd, int go_fd,
		       struct bench_worker_result *res)
{
	unsigned S = a->slots;
	uint64_t C = a->completions;
	cuflag_client *c = NULL;
	cuflag_slot **s = calloc(S, sizeof(*s));
	uint64_t *quota = calloc(S, sizeof(*quota)), *issued = calloc(S, sizeof(*issued));
	uint64_t *done = calloc(S, sizeof(*done));
	struct epoll_event ev[64];
	char byte = 'r';
	int ep = -1, rc;

	memset(res, 0, sizeof(*res));
	if (!s || !quota || !issued || !done) {
		bench_worker_fail(res, -ENOMEM, "allocation");
		goto out;
	}
	ep = bench_worker_slots(a->sock, S, &c, s, res);
	if (ep < 0)
		goto out;
	for (unsigned i = 0; i < S; i++)
		quota[i] = C / S + (i < C % S);
	if (write(ready_fd, &byte, 1) != 1 || read(go_fd, &byte, 1) != 1) {
		bench_worker_fail(res, -EPIPE, "start handshake");
		goto out;
	}
	res->t_start = cuflag_now_ns();
	while (res->done < C) {
		int n;
		for (unsigned i = 0; i < S; i++) {
			while (issued[i] < quota[i] && issued[i] - done[i] < TPUT_WINDOW) {
				uint32_t t;
				rc = cuflag_slot_arm(s[i], &t);
				if (rc) {
					bench_worker_fail(res, rc, "arm");
					goto out;
				}
				__atomic_store_n(cuflag_slot_flag(s[i]), t, __ATOMIC_RELEASE);
				issued[i]++;
			}
		}
		n = epoll_wait(ep, ev, 64, WAKE_TIMEOUT_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			bench_worker_fail(res, n < 0 ? -errno : 0,
				  n < 0 ? "epoll_wait" : "no completion signalled for 5 s");
			goto out;
		}
		for (int k = 0; k < n; k++) {
			unsigned i = ev[k].data.u32;
			uint64_t got;
			rc = cuflag_slot_consume(s[i], &got);
			if (rc == -EAGAIN)
				continue;
			if (rc) {
				bench_worker_fail(res, rc, "consume");
				goto out;
			}
			done[i] += got;
			res->done += got;
			if (done[i] > issued[i]) {
				bench_worker_fail(res, -EPROTO, "more completions signalled than armed");
				goto out;
			}
		}
	}
	res->t_end = cuflag_now_ns();
	/* Exact counts: every slot its quota, and nothing more arrives. */
	for (unsigned i = 0; i < S; i++)
		if (done[i] != quota[i]) {
			bench_worker_fail(res, -EPROTO, "a slot's count differs from its quota");
			goto out;
		}
	if (bench_no_more(ep, s))
		bench_worker_fail(res, -EPROTO, "completions signalled past the last one armed");
out:
	safe_close(ep);
	if (s && c)
		for (unsigned i = 0; i < S; i++)
			cuflag_slot_release(s[i]);
	cuflag_disconnect(c);
	free(s);
	free(quota);
	free(issued);
	free(done);
}

static void tput_worker(unsigned i, int ready_fd, int go_fd, int result_fd, void *arg)
{
	struct bench_worker_result res;

	(void)i;
	tput_child(arg, ready_fd, go_fd, &res);
	_exit(write(result_fd, &res, sizeof(res)) == sizeof(res) ? 0 : 1);
}

double bench_cpu_tput(const struct bench_opts *o, struct bench_tput *t,
		      const struct bench_daemon *d)
{
	struct tput_args a = { d->sock, o->slots, o->completions };
	uint64_t expect = o->completions * o->clients;
	/* Bounded: 10 us a completion is far slower than anything seen, plus 30 s. */
	unsigned run_s = 30 + (unsigned)(expect / 100000);

	t->per_proc = o->slots;
	return bench_fleet_run(t, d, o->clients, tput_worker, &a, expect, 30, run_s);
}

static void throughput(const struct bench_opts *o, struct bench_report *r,
		       const struct bench_daemon *d)
{
	struct bench_tput *t = bench_tput_add(r, "cuflagd");
	double cpu_ms = bench_cpu_tput(o, t, d);

	if (!t->failed && cpu_ms >= 0) {
		t->daemon_cpu_ms = cpu_ms;
		r->have_daemon_cpu = 1;
		r->us_per_completion = cpu_ms * 1000.0 / (double)t->completions;
	}
}

int bench_cpu_run(const struct bench_opts *o, struct bench_report *r)
{
	struct bench_daemon d;
	int failed = 0;

	/* Before the daemon exists: it inherits the raised RLIMIT_NOFILE. */
	bench_armed_nofile();
	if (o->scale)
		bench_scale_plan(o, &r->scale);
	if (bench_daemon_start(&d, o))
		return 1;
	r->daemon_pid = d.pid;
	if (!o->json)
		fprintf(stderr, "cuflag-bench: cuflagd pid %d on %s%s\n", (int)d.pid, d.sock,
			d.spawned ? "" : " (not ours)");
	if (latency(o, r, d.sock))
		failed = 1;
	bench_arm_cost(r, d.sock);
	failed |= r->arm_8 < 0;
	throughput(o, r, &d);
	bench_armed_tput(o, r, &d, 0);
	bench_armed_tput(o, r, &d, 1);
	for (size_t i = 0; i < r->ntput; i++)
		failed |= r->tput[i].failed;
	if (r->have_daemon_cpu)
		bench_idle_cpu(o, r, &d);
	if (o->scale && bench_scale_run(o, r, &d))
		failed = 1;
	bench_daemon_stop(&d);
	if (o->paced && bench_paced_run(o, r))
		failed = 1;
	if (o->metrics_cost && bench_metrics_cost(o, r))
		failed = 1;

	bench_ratio_lat(r, "cuflagd_p50/eventfd-direct_p50", "cuflagd", "eventfd-direct", 0);
	bench_ratio_lat(r, "cuflagd_p50/inproc-scanner_p50", "cuflagd", "inproc-scanner", 0);
	bench_ratio_lat(r, "cuflagd_p99/eventfd-direct_p99", "cuflagd", "eventfd-direct", 1);
	bench_ratio_lat(r, "cuflagd_p99/inproc-scanner_p99", "cuflagd", "inproc-scanner", 1);
	bench_ratio_lat(r, "handoff-process_p50/handoff-thread_p50", "handoff-process",
			"handoff-thread", 0);
	bench_ratio_lat(r, "cuflagd_p50/handoff-process_p50", "cuflagd", "handoff-process", 0);
	bench_group_ratios(r);
	if (r->scale.ran)
		bench_ratio_lat(r, r->scale.ratio, r->scale.row, "scale-1x1", 0);
	if (r->have_paced)
		bench_paced_ratios(r);
	return failed;
}
