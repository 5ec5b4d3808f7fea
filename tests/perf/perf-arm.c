/* SPDX-License-Identifier: MIT */
/*
 * What an arm costs: cuflag_slot_arm() in a loop for ARM_NS, on one thread,
 * then on 8 threads with a slot each, against the daemon under test. A slot
 * armed first and left pending keeps the scanner awake, so an arm is a queue
 * entry and no system call; the arms themselves keep it from stalling. At the
 * end every flag is stored to its last value and the completions are counted:
 * each slot must deliver exactly what it armed.
 *
 *   perf-arm [--json] [--daemon PATH | --socket PATH] ...
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "cuflag/cuflag.h"
#include "perf.h"

#define ARM_NS 200000000ull  /* each measurement */
#define ARM_THREADS 8

struct arm_thread {
	pthread_t thread;
	cuflag_slot *s;
	_Atomic int *go;          /* 1: start, -1: give up */
	uint64_t arms, t0, t1;
	uint32_t last;
	int rc;
};

static void *arm_loop(void *arg)
{
	struct arm_thread *a = arg;
	uint64_t end;
	int go;

	while (!(go = atomic_load(a->go)))
		sched_yield();
	if (go < 0)
		return NULL;
	a->t0 = cuflag_now_ns();
	end = a->t0 + ARM_NS;
	for (;;) {
		/* The clock every 256 arms, so that it costs nothing per arm. */
		for (int k = 0; k < 256; k++) {
			a->rc = cuflag_slot_arm(a->s, &a->last);
			if (a->rc)
				return NULL;
		}
		a->arms += 256;
		a->t1 = cuflag_now_ns();
		if (a->t1 >= end)
			return NULL;
	}
}

/* Store the slot's last armed value and count its completions: exactly arms. */
static int settle(cuflag_slot *s, uint32_t last, uint64_t arms)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t got = 0, n;

	__atomic_store_n(cuflag_slot_flag(s), last, __ATOMIC_RELEASE);
	while (got < arms) {
		int rc = poll(&p, 1, 5000);
		if (rc <= 0)
			return rc ? -errno : -ETIMEDOUT;
		rc = cuflag_slot_consume(s, &n);
		if (rc && rc != -EAGAIN)
			return rc;
		if (!rc)
			got += n;
	}
	return got == arms ? 0 : -EPROTO;
}

/* n threads, slot i each; arms per second in all, or < 0 with why filled. */
static double arm_rate(cuflag_slot **s, unsigned n, char *why, size_t len)
{
	struct arm_thread t[ARM_THREADS];
	_Atomic int go = 0;
	uint64_t arms = 0, t0 = UINT64_MAX, t1 = 0;
	unsigned started = 0;
	int rc = 0;

	memset(t, 0, sizeof(t));
	for (; started < n; started++) {
		t[started].s = s[started];
		t[started].go = &go;
		rc = pthread_create(&t[started].thread, NULL, arm_loop, &t[started]);
		if (rc)
			break;
	}
	if (rc)
		snprintf(why, len, "pthread_create: %s", strerror(rc));
	atomic_store(&go, rc ? -1 : 1);
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i].thread, NULL);
	if (rc)
		return -1;
	for (unsigned i = 0; i < n; i++) {
		if (!rc && t[i].rc)
			snprintf(why, len, "arm: %s", strerror(-(rc = t[i].rc)));
		if (!rc && (rc = settle(s[i], t[i].last, t[i].arms)))
			snprintf(why, len, "completions after the arms: %s", strerror(-rc));
		arms += t[i].arms;
		t0 = t[i].t0 < t0 ? t[i].t0 : t0;
		t1 = t[i].t1 > t1 ? t[i].t1 : t1;
	}
	return rc || t1 <= t0 ? -1 : (double)arms * 1e9 / (double)(t1 - t0);
}

static void arm_cost(struct bench_report *r, const char *sock)
{
	cuflag_slot *s[ARM_THREADS + 1];
	cuflag_client *c = NULL;
	uint32_t keep;
	int rc;

	r->arm_1 = r->arm_8 = -1;
	rc = cuflag_connect(sock, &c);
	if (!rc)
		rc = cuflag_slots_acquire(c, ARM_THREADS + 1, s);
	if (rc) {
		snprintf(r->arm_why, sizeof(r->arm_why), "connect / acquire: %s", strerror(-rc));
		cuflag_disconnect(c);
		return;
	}
	/* Pending until the end: the scanner stays awake throughout. */
	rc = cuflag_slot_arm(s[ARM_THREADS], &keep);
	if (rc) {
		snprintf(r->arm_why, sizeof(r->arm_why), "arm: %s", strerror(-rc));
	} else {
		r->arm_1 = arm_rate(s, 1, r->arm_why, sizeof(r->arm_why));
		if (r->arm_1 >= 0)
			r->arm_8 = arm_rate(s, ARM_THREADS, r->arm_why, sizeof(r->arm_why));
		if (settle(s[ARM_THREADS], keep, 1) && r->arm_8 >= 0) {
			snprintf(r->arm_why, sizeof(r->arm_why), "the keep-awake slot miscounted");
			r->arm_8 = -1;
		}
	}
	if (r->arm_8 < 0)
		bench_say("arm cost: %s\n", r->arm_why);
	cuflag_disconnect(c);
}

int main(int argc, char **argv)
{
	static struct bench_report r;
	struct bench_opts o;
	struct daemon_proc d;
	int rc = bench_program_start(&r, &o, argc, argv,
				     "What cuflag_slot_arm() costs with the scanner awake: arms per "
				     "second on\none thread and on 8 threads with a slot each.\n",
				     NULL);

	if (rc >= 0)
		return rc;
	if (bench_daemon_start(&d, &o))
		return 1;
	r.daemon_pid = d.pid;
	r.arm_ran = 1;
	arm_cost(&r, d.sock);
	bench_daemon_stop(&d);
	return bench_finish(&r, r.arm_8 < 0);
}
