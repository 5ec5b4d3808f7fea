/* SPDX-License-Identifier: MIT */
/*
 * Groups against per-slot eventfds. Latency: the cuflagd row's method on a
 * slot of its own (cuflagd) and on one slot of a group of BENCH_GROUP_SLOTS
 * (cuflagd-group: the waiter polls the group's fd, and after t1 drains the
 * ring, which must hold exactly one record, for that slot), taking turns.
 * Throughput with BENCH_ARMED_PROCS x BENCH_ARMED_SLOTS (10 000)
 * slots armed at once, through per-slot eventfds (cuflagd-10000) and through
 * one group per process (cuflagd-group-10000). Per round, each process arms
 * every one of its slots, stores every target in a new random order (the
 * simulated device), and counts completions until each slot has exactly one:
 * through epoll and a consume per slot, or through the group's fd and its
 * ring. Rounds follow each other as fast as they complete; every count must
 * be exact and nothing may arrive after the last round.
 *
 *   perf-groups [--iterations N] [--completions N] [--json] ...
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "wake.h"

#define COUNT_TIMEOUT_MS 5000

struct armed_tput_args {
	const char *sock;
	int group;
	unsigned rounds;
};

struct armed_state {
	unsigned n;
	cuflag_slot **s;
	uint32_t *target;
	unsigned *order;
	uint32_t *count; /* by cuflag_slot_id() */
	unsigned round;
	uint64_t rng;
};

static int count_one(void *arg, cuflag_slot *s, uint64_t n)
{
	struct armed_state *a = arg;
	int id = cuflag_slot_id(s);

	if (id < 0 || (unsigned)id >= BENCH_ARMED_ID_MAX || n != 1 ||
	    (a->count[id] += 1) != a->round)
		return -EPROTO;
	return 0;
}

/* One round's completions through the slots' own eventfds. */
static int count_slots(struct armed_state *a, int ep)
{
	struct epoll_event ev[64];
	uint64_t got = 0;

	while (got < a->n) {
		int k = epoll_wait(ep, ev, 64, COUNT_TIMEOUT_MS);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -ETIMEDOUT;
		for (int j = 0; j < k; j++) {
			cuflag_slot *s = a->s[ev[j].data.u32];
			uint64_t n;
			int rc = cuflag_slot_consume(s, &n);
			if (rc == -EAGAIN)
				continue;
			if (rc || (rc = count_one(a, s, n)))
				return rc;
			got += n;
		}
	}
	return 0;
}

static void shuffle(struct armed_state *a)
{
	for (unsigned i = a->n; i > 1; i--) {
		unsigned j = (unsigned)(bench_rand(&a->rng) % i), t = a->order[i - 1];
		a->order[i - 1] = a->order[j];
		a->order[j] = t;
	}
}

static int run_rounds(struct armed_state *a, const struct armed_tput_args *args, int ep,
		      cuflag_group *g, struct bench_worker_result *res)
{
	for (a->round = 1; a->round <= args->rounds; a->round++) {
		int rc;
		shuffle(a);
		for (unsigned i = 0; i < a->n; i++) {
			rc = cuflag_slot_arm(a->s[i], &a->target[i]);
			if (rc) {
				bench_worker_fail(res, rc, "arm");
				return -1;
			}
		}
		for (unsigned k = 0; k < a->n; k++) {
			unsigned i = a->order[k];
			__atomic_store_n(cuflag_slot_flag(a->s[i]), a->target[i], __ATOMIC_RELEASE);
		}
		rc = g ? bench_group_count(g, a->n, COUNT_TIMEOUT_MS, count_one, a)
		       : count_slots(a, ep);
		if (rc) {
			bench_worker_fail(res, rc,
					  rc == -EPROTO ? "a slot's count differs from its rounds"
							: "counting completions");
			return -1;
		}
		res->done += a->n;
	}
	return 0;
}

static void armed_tput_child(const struct armed_tput_args *args, unsigned idx, int ready_fd,
			     int go_fd, struct bench_worker_result *res)
{
	struct armed_state a = { .n = BENCH_ARMED_SLOTS };
	cuflag_client *c = NULL;
	cuflag_group *g = NULL;
	char byte = 'r';
	int ep = -1, rc = 0;

	memset(res, 0, sizeof(*res));
	a.rng = (cuflag_now_ns() ^ ((uint64_t)idx * 0x9e3779b97f4a7c15ull)) | 1;
	a.s = calloc(a.n, sizeof(*a.s));
	a.target = calloc(a.n, sizeof(*a.target));
	a.order = calloc(a.n, sizeof(*a.order));
	a.count = calloc(BENCH_ARMED_ID_MAX, sizeof(*a.count));
	if (!a.s || !a.target || !a.order || !a.count) {
		bench_worker_fail(res, -ENOMEM, "allocation");
		goto out;
	}
	for (unsigned i = 0; i < a.n; i++)
		a.order[i] = i;
	if (args->group) {
		rc = cuflag_connect(args->sock, &c);
		if (!rc)
			rc = cuflag_group_create(c, &g);
		if (!rc)
			rc = cuflag_group_slots_acquire(g, a.n, a.s);
		if (rc) {
			bench_worker_fail(res, rc, "connect / group / acquire slots");
			goto out;
		}
	} else {
		ep = bench_worker_slots(args->sock, a.n, &c, a.s, res);
		if (ep < 0)
			goto out;
	}
	if (write(ready_fd, &byte, 1) != 1 || read(go_fd, &byte, 1) != 1) {
		bench_worker_fail(res, -EPIPE, "start handshake");
		goto out;
	}
	res->t_start = cuflag_now_ns();
	if (run_rounds(&a, args, ep, g, res))
		goto out;
	res->t_end = cuflag_now_ns();
	/* Nothing past the last round. */
	if (g) {
		struct pollfd p = { .fd = cuflag_group_fd(g), .events = POLLIN };
		struct cuflag_completion rec[1];
		if (poll(&p, 1, 20) != 0 && cuflag_group_drain(g, rec, 1) != 0)
			bench_worker_fail(res, -EPROTO, "completions past the last one armed");
	} else if (bench_no_more(ep, a.s)) {
		bench_worker_fail(res, -EPROTO, "completions past the last one armed");
	}
out:
	safe_close(ep);
	if (c && a.s[0])
		for (unsigned i = 0; i < a.n && a.s[i]; i++)
			cuflag_slot_release(a.s[i]);
	cuflag_group_destroy(g);
	cuflag_disconnect(c);
	free(a.s);
	free(a.target);
	free(a.order);
	free(a.count);
}

static void armed_tput_worker(unsigned i, int ready_fd, int go_fd, int result_fd, void *arg)
{
	struct bench_worker_result res;

	armed_tput_child(arg, i, ready_fd, go_fd, &res);
	_exit(write(result_fd, &res, sizeof(res)) == sizeof(res) ? 0 : 1);
}

static void armed_tput(const struct bench_opts *o, struct bench_report *r,
		       const struct daemon_proc *d, int group)
{
	struct bench_tput *t = bench_tput_add(r, group ? "cuflagd-group-10000" : "cuflagd-10000");
	/* As many completions per process as the other throughput row, in rounds. */
	unsigned rounds = (unsigned)((o->completions + BENCH_ARMED_SLOTS - 1) / BENCH_ARMED_SLOTS);
	struct armed_tput_args a = { d->sock, group, rounds ? rounds : 1 };
	uint64_t expect = (uint64_t)BENCH_ARMED_PROCS * BENCH_ARMED_SLOTS * a.rounds;
	double cpu_ms;

	t->per_proc = BENCH_ARMED_SLOTS;
	cpu_ms = bench_fleet_run(t, d, BENCH_ARMED_PROCS, armed_tput_worker, &a, expect, 60,
				 60 + (unsigned)(expect / 50000));
	if (!t->failed && cpu_ms >= 0)
		t->daemon_cpu_ms = cpu_ms;
}

static int group_arm(struct bench_mech *m, uint32_t *t)
{
	return cuflag_slot_arm(bench_group_slot(m->arg), t);
}

static int group_consume(struct bench_mech *m, uint64_t *n)
{
	return bench_group_take(m->arg, bench_group_slot(m->arg), n);
}

/* The latency rows cuflagd and cuflagd-group, taking turns; 0 or -1. */
static int latency(const struct bench_opts *o, struct bench_report *r, const char *sock)
{
	struct bench_mech m[2] = { { .row = bench_lat_add(r, "cuflagd", o->iterations) },
				   { .row = bench_lat_add(r, "cuflagd-group", o->iterations) } };
	struct bench_group_slots *g = NULL;
	struct bench_storer st;
	cuflag_client *c = NULL;
	cuflag_slot *s = NULL;
	int rc = cuflag_connect(sock, &c);

	if (!rc)
		rc = cuflag_slot_acquire(c, &s);
	if (rc)
		bench_lat_fail(m[0].row, "no slot from %s: %s", sock, strerror(-rc));
	else
		bench_mech_slot(&m[0], s);
	rc = bench_group_open(&g, sock);
	if (rc) {
		bench_lat_fail(m[1].row, "no group of %d slots from %s: %s", BENCH_GROUP_SLOTS,
			       sock, strerror(-rc));
	} else {
		m[1] = (struct bench_mech){ .row = m[1].row, .arg = g, .arm = group_arm,
					    .consume = group_consume,
					    .fd = cuflag_group_fd(bench_group_get(g)),
					    .flag = cuflag_slot_flag(bench_group_slot(g)) };
	}
	if (!bench_storer_start(&st)) {
		bench_wake_turns(&st, m, 2, o->warmup, o->iterations);
		bench_storer_stop(&st);
	}
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	bench_group_close(g);
	return m[0].row->failed || m[1].row->failed ? -1 : 0;
}

int main(int argc, char **argv)
{
	static struct bench_report r;
	struct bench_opts o;
	struct daemon_proc d;
	int failed, rc;

	rc = bench_program_start(&r, &o, argc, argv,
				 "Groups against per-slot eventfds: wake latency, and throughput with\n"
				 "10 000 slots in play, with the daemon's CPU per completion.\n",
				 NULL);
	if (rc >= 0)
		return rc;
	bench_armed_nofile(); /* before the daemon: it inherits the limit */
	if (bench_daemon_start(&d, &o))
		return 1;
	r.daemon_pid = d.pid;
	failed = latency(&o, &r, d.sock) != 0;
	armed_tput(&o, &r, &d, 0);
	armed_tput(&o, &r, &d, 1);
	bench_daemon_stop(&d);
	for (size_t i = 0; i < r.ntput; i++)
		failed |= r.tput[i].failed;
	bench_group_ratios(&r);
	return bench_finish(&r, failed);
}
