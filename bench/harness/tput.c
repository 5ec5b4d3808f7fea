/* SPDX-License-Identifier: MIT */
/*
 * Throughput through cuflagd: P worker processes x S slots, each arming and
 * storing at once (the device is as fast as can be), at most TPUT_WINDOW in
 * flight per slot, counting what the eventfds say until every slot has its
 * exact quota and nothing more arrives. And what the workers of other runs
 * share: their slots in an epoll set, the check that nothing comes after the
 * last completion, the descriptor limit of the 10 000-slot rows.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "perf.h"

#define WAKE_TIMEOUT_MS 5000
#define TPUT_WINDOW 8 /* armed and not yet signalled, per slot */

struct tput_args {
	const char *sock;
	unsigned slots;
	uint64_t completions;
};

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
		      const struct daemon_proc *d)
{
	struct tput_args a = { d->sock, o->slots, o->completions };
	uint64_t expect = o->completions * o->clients;
	/* Bounded: 10 us a completion is far slower than anything seen, plus 30 s. */
	unsigned run_s = 30 + (unsigned)(expect / 100000);

	t->per_proc = o->slots;
	return bench_fleet_run(t, d, o->clients, tput_worker, &a, expect, 30, run_s);
}

void bench_armed_nofile(void)
{
	/* The daemon holds an eventfd per armed slot (inherited limit). */
	rlim_t want = (rlim_t)BENCH_ARMED_PROCS * (BENCH_ARMED_SLOTS + 16) + 256;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		bench_say("cannot raise RLIMIT_NOFILE: %s\n", strerror(errno));
}
