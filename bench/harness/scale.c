/* SPDX-License-Identifier: MIT */
/*
 * The scale run:
 *
 * 1. Detection latency does not grow with allocated slots. The cuflagd row's
 *    method (wake.h) on one slot of a measuring client, in two configurations:
 *    scale-1x1, nobody else connected, and scale-PxS, P other processes
 *    connected holding S slots each, all idle (idle-fleet.c). They take
 *    turns in blocks (SCALE_BLOCKS below), so drift over the run falls on
 *    both sides. The scanner's
 *    work follows pending slots, not allocated ones: the ratio of the p50s
 *    should stay near 1.
 * 2. Many armed at once: P processes acquire about 10 000 slots in all, arm
 *    every one, start together, and a storer thread in each stores every
 *    slot's target in random order; each slot's eventfd must deliver exactly
 *    one completion, counted through epoll.
 *
 * The fleet costs the daemon one eventfd per slot: RLIMIT_NOFILE is raised
 * before the daemon is spawned (it inherits it) up to the hard limit, and the
 * fleet shrinks, saying so, when even that is too low.
 *
 * perf-scale runs it alone; cuflag-bench --scale in its CPU run.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "idle-fleet.h"
#include "spawn.h"
#include "wake.h"

/* Descriptors the daemon needs besides one per slot: its own, and a few per client. */
#define FD_BASE 128
#define FD_PER_CLIENT 8
#define READY_S 120 /* the armed run gets ready within this */

static unsigned long fds_needed(unsigned procs, unsigned slots)
{
	return (unsigned long)procs * (slots + FD_PER_CLIENT) + FD_BASE;
}

/* Slots per process that fit in limit, at most want. */
static unsigned slots_that_fit(unsigned procs, unsigned want, unsigned long limit)
{
	unsigned long fit;

	if (fds_needed(procs, want) <= limit)
		return want;
	if (limit < fds_needed(procs, 0))
		return 0;
	fit = (limit - fds_needed(procs, 0)) / procs;
	return fit < want ? (unsigned)fit : want;
}

void bench_scale_plan(const struct bench_opts *o, struct bench_scale *s)
{
	unsigned P = o->scale_clients;
	unsigned armed = (BENCH_SCALE_ARMED + P - 1) / P;
	unsigned long want, limit;
	struct rlimit rl;

	memset(s, 0, sizeof(*s));
	s->complete_ms = -1;
	s->daemon_cpu_ms = -1;
	s->clients = s->armed_procs = P;
	if (armed > BENCH_SCALE_SLOTS)
		armed = BENCH_SCALE_SLOTS;
	want = fds_needed(P, BENCH_SCALE_SLOTS > armed ? BENCH_SCALE_SLOTS : armed);
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		rl.rlim_cur = 1024;
		rl.rlim_max = 1024;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		struct rlimit up = rl;
		up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl.rlim_cur = up.rlim_cur;
	}
	limit = rl.rlim_cur == RLIM_INFINITY ? want : (unsigned long)rl.rlim_cur;
	s->slots = slots_that_fit(P, BENCH_SCALE_SLOTS, limit);
	s->armed_per_proc = slots_that_fit(P, armed, limit);
	s->armed = (uint64_t)P * s->armed_per_proc;
	if (s->slots < BENCH_SCALE_SLOTS || s->armed_per_proc < armed)
		snprintf(s->note, sizeof(s->note),
			 "RLIMIT_NOFILE is %lu (hard limit), %lu needed for %u x %u slots: "
			 "fleet shrunk to %u x %u, armed run to %u x %u",
			 limit, fds_needed(P, BENCH_SCALE_SLOTS), P, BENCH_SCALE_SLOTS, P, s->slots,
			 P, s->armed_per_proc);
	snprintf(s->row, sizeof(s->row), "scale-%ux%u", P, s->slots);
	snprintf(s->ratio, sizeof(s->ratio), "%s_p50/scale-1x1_p50", s->row);
}

/* How many descriptors the daemon holds; < 0 when /proc does not say. */
static long daemon_fds(const struct daemon_proc *d)
{
	return d->pid > 0 ? cuflag_fd_count(d->pid) : -1;
}

/* Wait (at most 10 s) until the daemon has closed what the fleet held: the
 * measuring after the fleet must not overlap the daemon's teardown. */
static void wait_daemon_fds(const struct daemon_proc *d, long base)
{
	uint64_t end = cuflag_now_ns() + 10000000000ull;
	long n = -1;

	if (base < 0)
		return;
	while (cuflag_now_ns() < end) {
		n = daemon_fds(d);
		if (n < 0 || n <= base + FD_PER_CLIENT)
			return;
		bench_sleep_ns(5000000);
	}
	bench_say(
		"scale: the daemon still holds %ld descriptors 10 s after the "
		"fleet left (%ld before it came)\n",
		n, base);
}

/* ---- many armed at once ---- */

struct armed_args {
	const char *sock;
	unsigned n; /* slots per process */
};

struct armed_storer {
	pthread_t thread;
	int go_efd;
	unsigned n;
	cuflag_slot **s;
	const uint32_t *target;
	const unsigned *order;
};

/* The simulated device: every slot's target, in the order given. */
static void *armed_storer_main(void *arg)
{
	struct armed_storer *st = arg;
	uint64_t v;

	while (read(st->go_efd, &v, sizeof(v)) != sizeof(v))
		if (errno != EINTR)
			return NULL;
	for (unsigned k = 0; k < st->n; k++) {
		unsigned i = st->order[k];
		__atomic_store_n(cuflag_slot_flag(st->s[i]), st->target[i], __ATOMIC_RELEASE);
	}
	return NULL;
}

/* Count completions through epoll until every slot has one; then nothing more may come. */
static void armed_count(int ep, unsigned n, cuflag_slot **s, uint64_t *done,
			struct bench_worker_result *res)
{
	struct epoll_event ev[64];

	while (res->done < n) {
		int k = epoll_wait(ep, ev, 64, 5000);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			bench_worker_fail(res, k < 0 ? -errno : 0,
					  k < 0 ? "epoll_wait" : "no completion signalled for 5 s");
			return;
		}
		for (int j = 0; j < k; j++) {
			unsigned i = ev[j].data.u32;
			uint64_t got;
			int rc = cuflag_slot_consume(s[i], &got);
			if (rc == -EAGAIN)
				continue;
			if (rc) {
				bench_worker_fail(res, rc, "consume");
				return;
			}
			done[i] += got;
			res->done += got;
			if (done[i] > 1) {
				bench_worker_fail(res, -EPROTO, "a slot signalled more than once");
				return;
			}
		}
	}
	res->t_end = cuflag_now_ns();
	if (bench_no_more(ep, s))
		bench_worker_fail(res, -EPROTO, "completions signalled past the last one armed");
}

static void armed_child(const struct armed_args *a, unsigned idx, int ready_fd, int go_fd,
			struct bench_worker_result *res)
{
	unsigned n = a->n;
	cuflag_client *c = NULL;
	cuflag_slot **s = calloc(n, sizeof(*s));
	uint32_t *target = calloc(n, sizeof(*target));
	unsigned *order = calloc(n, sizeof(*order));
	uint64_t *done = calloc(n, sizeof(*done)), one = 1;
	uint64_t rng = (cuflag_now_ns() ^ ((uint64_t)idx * 0x9e3779b97f4a7c15ull)) | 1;
	struct armed_storer st = { .go_efd = -1, .n = n, .s = s, .target = target, .order = order };
	int ep = -1, rc, started = 0;
	char byte = 'r';

	memset(res, 0, sizeof(*res));
	if (!s || !target || !order || !done) {
		bench_worker_fail(res, -ENOMEM, "allocation");
		goto out;
	}
	ep = bench_worker_slots(a->sock, n, &c, s, res);
	if (ep < 0)
		goto out;
	for (unsigned i = 0; i < n; i++) {
		rc = cuflag_slot_arm(s[i], &target[i]);
		if (rc) {
			bench_worker_fail(res, rc, "arm");
			goto out;
		}
		order[i] = i;
	}
	for (unsigned i = n; i > 1; i--) {
		unsigned j = (unsigned)(bench_rand(&rng) % i), t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	st.go_efd = eventfd(0, EFD_CLOEXEC);
	if (st.go_efd < 0) {
		bench_worker_fail(res, -errno, "eventfd");
		goto out;
	}
	rc = pthread_create(&st.thread, NULL, armed_storer_main, &st);
	if (rc) {
		bench_worker_fail(res, -rc, "pthread_create");
		goto out;
	}
	started = 1;
	/* Everything armed: ready; the stores start when every process is. */
	if (write(ready_fd, &byte, 1) != 1 || read(go_fd, &byte, 1) != 1) {
		bench_worker_fail(res, -EPIPE, "start handshake");
		goto out;
	}
	res->t_start = cuflag_now_ns();
	if (write(st.go_efd, &one, sizeof(one)) != sizeof(one)) {
		bench_worker_fail(res, -errno, "eventfd write");
		goto out;
	}
	started = 2;
	armed_count(ep, n, s, done, res);
out:
	if (started) {
		if (started == 1 && write(st.go_efd, &one, sizeof(one)) != sizeof(one))
			pthread_cancel(st.thread);
		pthread_join(st.thread, NULL);
	}
	safe_close(st.go_efd);
	safe_close(ep);
	cuflag_disconnect(c);
	free(s);
	free(target);
	free(order);
	free(done);
}

static void armed_worker(unsigned i, int ready_fd, int go_fd, int result_fd, void *arg)
{
	struct bench_worker_result res;

	armed_child(arg, i, ready_fd, go_fd, &res);
	_exit(write(result_fd, &res, sizeof(res)) == sizeof(res) ? 0 : 1);
}

static int armed_run(struct bench_scale *s, const struct daemon_proc *d)
{
	struct bench_tput t = { .name = "armed" };
	struct armed_args a = { d->sock, s->armed_per_proc };
	double cpu_ms;

	t.per_proc = s->armed_per_proc;
	if (!s->armed) {
		snprintf(s->why, sizeof(s->why), "no room for slots (see the note)");
		return -1;
	}
	cpu_ms = bench_fleet_run(&t, d, s->armed_procs, armed_worker, &a, s->armed, READY_S, 60);
	if (t.failed) {
		snprintf(s->why, sizeof(s->why), "%s", t.why);
		return -1;
	}
	s->exact = 1;
	s->complete_ms = t.seconds * 1000.0;
	s->daemon_cpu_ms = cpu_ms;
	return 0;
}

/* ---- the run ---- */

/*
 * Blocks per configuration. They run in the order 1x1, PxS, PxS, 1x1, 1x1,
 * PxS, ... (the fleet connects before each pair of PxS blocks and leaves
 * after it), so that drift of any shape over the run, and what stays behind
 * a fleet, fall on both sides alike.
 */
#define SCALE_BLOCKS 8

int bench_scale_run(const struct bench_opts *o, struct bench_report *r,
		    const struct daemon_proc *d)
{
	struct bench_scale *s = &r->scale;
	struct bench_lat *row[2] = { bench_lat_add(r, "scale-1x1", o->iterations),
				     bench_lat_add(r, s->row, o->iterations) };
	unsigned blocks = o->iterations < SCALE_BLOCKS ? o->iterations : SCALE_BLOCKS;
	cuflag_client *c = NULL;
	cuflag_slot *slot = NULL;
	struct fleet f = { .ready = -1 };
	int rc, connected = 0;
	long base = -1;

	s->ran = 1;
	if (!row[0] || !row[1])
		return -1;
	/* The fleet's processes first, while this one has no other thread; they
	 * wait, unconnected, until the fleet's turn. */
	rc = s->slots ? fleet_spawn(&f, s->clients, s->slots, d->sock) : -EMFILE;
	if (rc) {
		bench_lat_fail(row[1], "cannot start the fleet: %s%s%s", strerror(-rc),
			       s->note[0] ? "; " : "", s->note);
		fleet_stop(&f);
	}
	rc = cuflag_connect(d->sock, &c);
	if (!rc)
		rc = cuflag_slot_acquire(c, &slot);
	if (rc) {
		for (int k = 0; k < 2; k++)
			if (!row[k]->failed)
				bench_lat_fail(row[k], "cannot get a slot from %s: %s", d->sock,
					       strerror(-rc));
		goto out;
	}
	base = daemon_fds(d);
	for (unsigned b = 0; b < 2 * blocks; b++) {
		int k = (int)((b + 1) / 2 % 2); /* 0 1 1 0 0 1 1 0 ... */
		unsigned j = b / 2, n = o->iterations * (j + 1) / blocks - o->iterations * j / blocks;

		if (k != connected && f.n) {
			rc = fleet_tell(&f, k ? 'c' : 'd');
			if (rc) {
				bench_lat_fail(row[1], "the fleet (%u x %u slots) did not %s: %s",
					       s->clients, s->slots, k ? "connect" : "disconnect",
					       strerror(-rc));
				fleet_stop(&f); /* what did connect must not weigh on 1x1 */
			}
			if (!k || rc)
				wait_daemon_fds(d, base);
			connected = k && !rc;
		}
		if (!row[k]->failed)
			bench_cpu_slot_wakes(slot, row[k], o->warmup, n);
	}
out:
	fleet_stop(&f);
	if (connected)
		wait_daemon_fds(d, base);
	cuflag_slot_release(slot);
	cuflag_disconnect(c);
	rc = armed_run(s, d);
	return rc || row[0]->failed || row[1]->failed ? -1 : 0;
}

int bench_scale_clients_opt(struct bench_opts *o, const char *arg)
{
	unsigned long long v;

	if (bench_parse_uint("--scale-clients", arg, 1, BENCH_SCALE_MAX_CLIENTS, &v))
		return 2;
	o->scale_clients = (unsigned)v;
	return 0;
}
