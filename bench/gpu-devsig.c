/* SPDX-License-Identifier: MIT */
/*
 * --mode gpu, signals from inside a running kernel. One persistent kernel
 * per row, one thread, which polls a host-mapped gate word for the sample's
 * value and answers with the documented PTX of cuflag/cuflag_device.h
 * (st.release.sys.u32) into a word the host watches:
 *   pingpong-rtt       the answer goes to a plain host word the opener spins
 *                      on: gate open -> answer seen, a round trip (the floor)
 *   pingpong-1way      half of each round trip: the one-way floor
 *   devsig-spin        the answer is a cuflag slot's flag (armed ahead with
 *                      cuflag_slot_arm_many()), awaited by
 *                      cuflag_slot_wait_spin() in the opening thread
 *   devsig-spin-1way   devsig-spin less half the floor's p50 round trip (the
 *                      gate's way in): the signal's own way out
 *   devsig-blocked     the same signal, the waiter asleep in poll() on the
 *                      slot's eventfd (cuflagd across processes); an opener
 *                      thread opens the gate 50-150 us after the waiter
 *                      announced its wait (as the cuflagd row of gpu.c)
 *   launch+memop-spin  what the kernel's own signal saves: a kernel launch
 *                      and cuStreamWriteValue32 per sample, the host spinning
 *                      on the word (t0 before the launch)
 * and a throughput row, devsig-1M: one kernel thread stores 1 000 000 values
 * into one slot's flag back to back, counted through the eventfd until the
 * count is exact. Targets (docs/device-signals.md): devsig-spin-1way p50 <=
 * 1.3 x pingpong-1way p50; devsig-blocked p50 <= the cuflagd row's p50 (the
 * gate kernel, then a memop, then the same blocked wake); devsig-1M >= 1 M/s.
 * Every kernel gives up by itself after 10 s without its gate.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cpu-relax.h"
#include "cuflag/cuflag.h"
#include "cuflag/cuflag_cuda.h"
#include "gpu-devsig.h"

/*
 * cuflag_devsig_answer(gate, out, base, n, timeout_ns): for i = 1 .. n, spin
 * (relaxed, system scope) until *gate reaches i, then store base + i into
 * *out with release order at system scope; end after timeout_ns without the
 * gate. cuflag_devsig_burst(flag, first, n, times): store first .. first +
 * n - 1, its %globaltimer at the start and at the end in times[0], times[1].
 */
static const char devsig_ptx[] =
	".version 6.0\n"
	".target sm_70\n"
	".address_size 64\n"
	"\n"
	".visible .entry cuflag_devsig_answer(\n"
	"	.param .u64 gate, .param .u64 out, .param .u32 base, .param .u32 n,\n"
	"	.param .u64 timeout_ns)\n"
	"{\n"
	"	.reg .pred %p<4>;\n"
	"	.reg .b32 %r<8>;\n"
	"	.reg .b64 %rd<8>;\n"
	"	ld.param.u64 %rd1, [gate];\n"
	"	ld.param.u64 %rd2, [out];\n"
	"	ld.param.u32 %r1, [base];\n"
	"	ld.param.u32 %r2, [n];\n"
	"	ld.param.u64 %rd3, [timeout_ns];\n"
	"	mov.u32 %r3, 1;\n"
	"$L_next:\n"
	"	setp.gt.u32 %p1, %r3, %r2;\n"
	"	@%p1 bra $L_done;\n"
	"	mov.u64 %rd4, %globaltimer;\n"
	"	add.u64 %rd5, %rd4, %rd3;\n"
	"$L_spin:\n"
	"	ld.relaxed.sys.u32 %r4, [%rd1];\n"
	"	sub.s32 %r5, %r4, %r3;\n"
	"	setp.ge.s32 %p2, %r5, 0;\n"
	"	@%p2 bra $L_answer;\n"
	"	mov.u64 %rd6, %globaltimer;\n"
	"	setp.lt.u64 %p3, %rd6, %rd5;\n"
	"	@%p3 bra $L_spin;\n"
	"	bra $L_done;\n"
	"$L_answer:\n"
	"	add.u32 %r6, %r1, %r3;\n"
	"	st.release.sys.u32 [%rd2], %r6;\n"
	"	add.u32 %r3, %r3, 1;\n"
	"	bra $L_next;\n"
	"$L_done:\n"
	"	ret;\n"
	"}\n"
	"\n"
	".visible .entry cuflag_devsig_burst(\n"
	"	.param .u64 flag, .param .u32 first, .param .u32 n, .param .u64 times)\n"
	"{\n"
	"	.reg .pred %p<2>;\n"
	"	.reg .b32 %r<5>;\n"
	"	.reg .b64 %rd<4>;\n"
	"	ld.param.u64 %rd1, [flag];\n"
	"	ld.param.u32 %r1, [first];\n"
	"	ld.param.u32 %r2, [n];\n"
	"	ld.param.u64 %rd2, [times];\n"
	"	mov.u64 %rd3, %globaltimer;\n"
	"	st.volatile.u64 [%rd2], %rd3;\n"
	"	mov.u32 %r3, 0;\n"
	"$L_loop:\n"
	"	setp.ge.u32 %p1, %r3, %r2;\n"
	"	@%p1 bra $L_end;\n"
	"	add.u32 %r4, %r1, %r3;\n"
	"	st.release.sys.u32 [%rd1], %r4;\n"
	"	add.u32 %r3, %r3, 1;\n"
	"	bra $L_loop;\n"
	"$L_end:\n"
	"	mov.u64 %rd3, %globaltimer;\n"
	"	st.volatile.u64 [%rd2+8], %rd3;\n"
	"	ret;\n"
	"}\n";

#define WAIT_MS 5000
#define BURST 1000000u

enum { R_RTT, R_1WAY, R_SPIN, R_SPIN_1WAY, R_BLOCKED, R_MEMOP, R_COUNT };
static const char *const row_names[R_COUNT] = {
	"pingpong-rtt", "pingpong-1way", "devsig-spin", "devsig-spin-1way", "devsig-blocked",
	"launch+memop-spin",
};

struct devsig {
	struct gpu_dev *dev;
	CUmodule mod;
	CUfunction answer, burst;
	CUstream st;
	volatile uint32_t *host; /* [0] gate, [16] answer word, [32] memop word,
				  * [64] the burst kernel's two u64 times */
	CUdeviceptr dptr;
	unsigned total, warmup;
	uint64_t rng;
	struct bench_lat *row[R_COUNT];
	/* The opener of the blocked row. */
	pthread_t opener;
	_Atomic uint32_t go; /* the gate value to open (0: none) */
	_Atomic uint64_t delay_ns, t0;
	_Atomic int quit;
};

static void pause_ns(uint64_t ns)
{
	for (uint64_t end = cuflag_now_ns() + ns; cuflag_now_ns() < end;)
		cuflag_cpu_relax();
}

static void *opener_main(void *arg)
{
	struct devsig *x = arg;

	while (!atomic_load_explicit(&x->quit, memory_order_relaxed)) {
		uint32_t g = atomic_load_explicit(&x->go, memory_order_acquire);
		if (!g) {
			cuflag_cpu_relax();
			continue;
		}
		pause_ns(atomic_load(&x->delay_ns));
		atomic_store(&x->go, 0);
		atomic_store(&x->t0, cuflag_now_ns());
		__atomic_store_n(&x->host[0], g, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* Start the answering kernel: n samples, answers base + i into out. */
static int start_answer(struct devsig *x, struct bench_lat *row, CUdeviceptr out, uint32_t base)
{
	CUdeviceptr gate = x->dptr;
	uint32_t n = x->total;
	uint64_t timeout = GATE_TIMEOUT_NS;
	void *args[] = { &gate, &out, &base, &n, &timeout };
	CUresult e;

	__atomic_store_n(&x->host[0], 0, __ATOMIC_RELEASE);
	e = cu.cuLaunchKernel(x->answer, 1, 1, 1, 1, 1, 1, 0, x->st, args, NULL);
	if (e != CUDA_SUCCESS) {
		gpu_err("cuLaunchKernel (answer)", e);
		bench_lat_fail(row, "the answering kernel did not launch");
		return -1;
	}
	return 0;
}

/* End the row's kernel (it sees every gate open) and wait for it. */
static void end_answer(struct devsig *x)
{
	__atomic_store_n(&x->host[0], x->total, __ATOMIC_RELEASE);
	cu.cuStreamSynchronize(x->st);
}

static int spin_for(struct bench_lat *row, volatile uint32_t *w, uint32_t want)
{
	uint64_t end = cuflag_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	unsigned k = 0;

	while ((int32_t)(__atomic_load_n(w, __ATOMIC_ACQUIRE) - want) < 0)
		if ((++k & 1023) == 0 && cuflag_now_ns() > end) {
			bench_lat_fail(row, "no answer within %d ms", WAIT_MS);
			return -1;
		}
	return 0;
}

static void keep(struct devsig *x, struct bench_lat *row, unsigned i, double us)
{
	if (i > x->warmup)
		row->us[row->n++] = us;
}

/* The floor: the opener itself spins on the kernel's answer. */
static void run_pingpong(struct devsig *x)
{
	struct bench_lat *rtt = x->row[R_RTT], *one = x->row[R_1WAY];

	x->host[16] = 0;
	if (start_answer(x, rtt, x->dptr + 16 * 4, 0))
		return;
	for (uint32_t i = 1; i <= x->total; i++) {
		pause_ns(5000 + bench_rand(&x->rng) % 10000);
		uint64_t t0 = cuflag_now_ns();
		__atomic_store_n(&x->host[0], i, __ATOMIC_RELEASE);
		if (spin_for(rtt, &x->host[16], i))
			break;
		double us = (double)(cuflag_now_ns() - t0) / 1000.0;
		keep(x, rtt, i, us);
		keep(x, one, i, us / 2);
	}
	end_answer(x);
	if (rtt->failed)
		bench_lat_fail(one, "%s", rtt->why);
}

/* Drain a slot until want completions were counted in all: exact or not. */
static int count_to(cuflag_slot *s, uint64_t *got, uint64_t want, int ms)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t n;

	while (*got < want) {
		if (poll(&p, 1, ms) != 1)
			return -ETIMEDOUT;
		if (cuflag_slot_consume(s, &n) == 0)
			*got += n;
	}
	/* Nothing beyond: the count is exact. */
	if (poll(&p, 1, 20) == 1 && cuflag_slot_consume(s, &n) == 0)
		*got += n;
	return *got == want ? 0 : -EPROTO;
}

/* One slot armed for every sample, the kernel's answers into its flag. */
static int slot_for(struct devsig *x, struct bench_lat *row, cuflag_client *c, cuflag_slot **s,
		    uint32_t *first)
{
	CUdeviceptr flag;
	int rc = cuflag_slot_acquire(c, s);

	if (!rc)
		rc = cuflag_cuda_slot_devptr(*s, &flag);
	if (!rc)
		rc = cuflag_slot_arm_many(*s, x->total, first);
	if (rc) {
		bench_lat_fail(row, "slot, device address or arm: %s", strerror(-rc));
		return -1;
	}
	return start_answer(x, row, flag, *first - 1);
}

static void run_spin(struct devsig *x, cuflag_client *c)
{
	struct bench_lat *row = x->row[R_SPIN];
	cuflag_slot *s = NULL;
	uint64_t got = 0, n;
	uint32_t first;
	int rc = 0;

	if (slot_for(x, row, c, &s, &first))
		goto out;
	for (uint32_t i = 1; i <= x->total; i++) {
		pause_ns(5000 + bench_rand(&x->rng) % 10000);
		uint64_t t0 = cuflag_now_ns();
		__atomic_store_n(&x->host[0], i, __ATOMIC_RELEASE);
		rc = cuflag_slot_wait_spin(s, first + i - 1, 1000000, WAIT_MS);
		if (rc) {
			bench_lat_fail(row, "cuflag_slot_wait_spin: %s", strerror(-rc));
			break;
		}
		keep(x, row, i, (double)(cuflag_now_ns() - t0) / 1000.0);
		if (cuflag_slot_consume(s, &n) == 0) /* not timed */
			got += n;
	}
	end_answer(x);
	if (!rc && count_to(s, &got, x->total, 1000))
		bench_lat_fail(row, "the daemon counted %llu of %u signals",
			       (unsigned long long)got, x->total);
out:
	cuflag_slot_release(s);
}

static void run_blocked(struct devsig *x, cuflag_client *c)
{
	struct bench_lat *row = x->row[R_BLOCKED];
	cuflag_slot *s = NULL;
	uint32_t first;
	uint64_t n;
	int rc;

	if (slot_for(x, row, c, &s, &first))
		goto out;
	rc = pthread_create(&x->opener, NULL, opener_main, x);
	if (rc) {
		bench_lat_fail(row, "pthread_create: %s", strerror(rc));
		x->opener = 0;
		end_answer(x);
		goto out;
	}
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	for (uint32_t i = 1; i <= x->total; i++) {
		atomic_store(&x->t0, 0);
		atomic_store(&x->delay_ns, 50000 + bench_rand(&x->rng) % 100000);
		atomic_store_explicit(&x->go, i, memory_order_release);
		if (poll(&p, 1, WAIT_MS) != 1) {
			bench_lat_fail(row, "no wake within %d ms", WAIT_MS);
			break;
		}
		uint64_t t1 = cuflag_now_ns(), t0 = atomic_load(&x->t0);
		if (!t0 || t1 < t0) {
			bench_lat_fail(row, "the waiter woke before the gate opened");
			break;
		}
		keep(x, row, i, (double)(t1 - t0) / 1000.0);
		n = 0;
		if (cuflag_slot_consume(s, &n) || n != 1) {
			bench_lat_fail(row, "the wake carried %llu signals, not 1",
				       (unsigned long long)n);
			break;
		}
	}
	atomic_store(&x->quit, 1);
	pthread_join(x->opener, NULL);
	end_answer(x);
out:
	cuflag_slot_release(s);
}

/* What the in-kernel signal saves: a launch and a memop per completion. */
static void run_memop(struct devsig *x)
{
	struct bench_lat *row = x->row[R_MEMOP];
	CUdeviceptr w = x->dptr + 32 * 4;

	x->host[32] = 0;
	for (uint32_t i = 1; i <= x->total; i++) {
		pause_ns(5000 + bench_rand(&x->rng) % 10000);
		uint64_t t0 = cuflag_now_ns();
		CUresult e = cu.cuLaunchKernel(x->dev->noop, 1, 1, 1, 1, 1, 1, 0, x->st, NULL, NULL);
		if (e == CUDA_SUCCESS)
			e = cu.cuStreamWriteValue32(x->st, w, i, 0);
		if (e != CUDA_SUCCESS) {
			gpu_err("launch + cuStreamWriteValue32", e);
			bench_lat_fail(row, "launch or memop failed");
			break;
		}
		if (spin_for(row, &x->host[32], i))
			break;
		keep(x, row, i, (double)(cuflag_now_ns() - t0) / 1000.0);
	}
	cu.cuStreamSynchronize(x->st);
}

/* 1 M values from one kernel thread, counted exactly through the eventfd. */
static void run_burst(struct devsig *x, struct bench_report *r, cuflag_client *c,
		      const struct daemon_proc *d)
{
	struct bench_tput *t = bench_tput_add(r, "devsig-1M");
	cuflag_slot *s = NULL;
	CUdeviceptr flag;
	uint32_t first, n = BURST;
	uint64_t got = 0, t0, t1;
	double cpu0;
	int rc;

	t->procs = t->per_proc = 1;
	rc = cuflag_slot_acquire(c, &s);
	if (!rc)
		rc = cuflag_cuda_slot_devptr(s, &flag);
	if (!rc)
		rc = cuflag_slot_arm_many(s, BURST, &first);
	if (rc) {
		t->failed = 1;
		snprintf(t->why, sizeof(t->why), "slot, device address or arm: %s", strerror(-rc));
		goto out;
	}
	CUdeviceptr times = x->dptr + 64 * 4;
	volatile uint64_t *kt = (volatile uint64_t *)&x->host[64];
	kt[0] = kt[1] = 0;
	void *args[] = { &flag, &first, &n, &times };
	cpu0 = bench_daemon_cpu_ms(d);
	t0 = cuflag_now_ns();
	if (cu.cuLaunchKernel(x->burst, 1, 1, 1, 1, 1, 1, 0, x->st, args, NULL) != CUDA_SUCCESS) {
		t->failed = 1;
		snprintf(t->why, sizeof(t->why), "the burst kernel did not launch");
		goto out;
	}
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t v;
	while (got < BURST && poll(&p, 1, WAIT_MS) == 1)
		if (cuflag_slot_consume(s, &v) == 0)
			got += v;
	t1 = cuflag_now_ns();
	cu.cuStreamSynchronize(x->st);
	rc = count_to(s, &got, BURST, 20);
	if (rc) {
		t->failed = 1;
		snprintf(t->why, sizeof(t->why), "counted %llu of %u signals",
			 (unsigned long long)got, BURST);
		goto out;
	}
	t->completions = got;
	t->seconds = (double)(t1 - t0) / 1e9;
	t->per_s = (double)got / t->seconds;
	if (cpu0 >= 0)
		t->daemon_cpu_ms = bench_daemon_cpu_ms(d) - cpu0;
	/* What the kernel itself sustained: the ceiling of the row. */
	if (kt[1] > kt[0])
		fprintf(stderr,
			"cuflag-bench: devsig-1M: the kernel stored %u values in %.3f s (%.2f M/s), "
			"counted exactly in %.3f s (%.2f M/s)\n",
			BURST, (double)(kt[1] - kt[0]) / 1e9,
			BURST / ((double)(kt[1] - kt[0]) / 1e3), t->seconds, t->per_s / 1e6);
out:
	if (t->failed)
		fprintf(stderr, "cuflag-bench: devsig-1M: %s\n", t->why);
	cuflag_slot_release(s);
}

/* Each row's p50, or -1; the one-way estimate row from devsig-spin. */
static double p50_of(struct bench_lat *l)
{
	return l->failed || !l->n ? -1 : bench_lat_pcts(l).p50;
}

static void targets(struct devsig *x, struct bench_report *r, int quiet)
{
	struct bench_lat *spin = x->row[R_SPIN], *est = x->row[R_SPIN_1WAY];
	const struct bench_lat *memop_blocked = bench_lat_find(r, "cuflagd");
	const struct bench_tput *burst = bench_tput_find(r, "devsig-1M");
	double floor_1way = p50_of(x->row[R_1WAY]), rtt = p50_of(x->row[R_RTT]);
	double spin_1way = -1, blocked = p50_of(x->row[R_BLOCKED]), ref = -1;

	if (rtt > 0 && spin->n) {
		for (size_t i = 0; i < spin->n; i++)
			est->us[est->n++] = spin->us[i] - rtt / 2;
		spin_1way = p50_of(est);
	} else {
		bench_lat_fail(est, "needs pingpong-rtt and devsig-spin");
	}
	if (memop_blocked)
		ref = p50_of((struct bench_lat *)memop_blocked);
	bench_ratio_add(r, "devsig-spin-1way_p50/pingpong-1way_p50",
			spin_1way > 0 && floor_1way > 0 ? spin_1way / floor_1way : -1);
	bench_ratio_add(r, "devsig-blocked_p50/cuflagd_p50",
			blocked > 0 && ref > 0 ? blocked / ref : -1);
	bench_ratio_lat(r, "launch+memop-spin_p50/pingpong-rtt_p50", "launch+memop-spin",
			"pingpong-rtt", 0);
	if (quiet)
		return;
	/* The targets, said in words: MET, MISSED or not measured. */
#define VERDICT(ok, have) ((have) ? ((ok) ? "MET" : "MISSED") : "not measured")
	fprintf(stderr,
		"cuflag-bench: target devsig-spin-1way p50 %.2f us <= 1.3 x pingpong-1way p50 "
		"%.2f us: %s (%.2fx)\n",
		spin_1way, floor_1way, VERDICT(spin_1way <= 1.3 * floor_1way,
					      spin_1way > 0 && floor_1way > 0),
		floor_1way > 0 ? spin_1way / floor_1way : -1);
	fprintf(stderr,
		"cuflag-bench: target devsig-blocked p50 %.2f us <= cuflagd (memop) p50 %.2f us: "
		"%s\n",
		blocked, ref, VERDICT(blocked <= ref, blocked > 0 && ref > 0));
	fprintf(stderr,
		"cuflag-bench: target devsig-1M >= 1000000 signals/s counted exactly: %.0f/s: %s\n",
		burst && !burst->failed ? burst->per_s : -1,
		VERDICT(burst && burst->per_s >= 1e6, burst && !burst->failed));
#undef VERDICT
}

int gpu_devsig(const struct bench_opts *o, struct bench_report *r, struct gpu_dev *dev,
	       const struct daemon_proc *d)
{
	static struct devsig x;
	char log[4096] = "";
	CUjit_option jo[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void *jv[] = { log, (void *)(uintptr_t)sizeof(log) };
	cuflag_client *c = NULL;
	void *host = NULL;
	int failed = 0, rc;

	x.dev = dev;
	x.total = o->warmup + o->iterations;
	x.warmup = o->warmup;
	x.rng = cuflag_now_ns() | 1;
	for (int k = 0; k < R_COUNT; k++)
		x.row[k] = bench_lat_add(r, row_names[k], o->iterations);
	if (cu.cuModuleLoadDataEx(&x.mod, devsig_ptx, 2, jo, jv) != CUDA_SUCCESS ||
	    cu.cuModuleGetFunction(&x.answer, x.mod, "cuflag_devsig_answer") != CUDA_SUCCESS ||
	    cu.cuModuleGetFunction(&x.burst, x.mod, "cuflag_devsig_burst") != CUDA_SUCCESS ||
	    cu.cuStreamCreate(&x.st, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    cu.cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) !=
		    CUDA_SUCCESS ||
	    cu.cuMemHostGetDevicePointer(&x.dptr, host, 0) != CUDA_SUCCESS) {
		fprintf(stderr, "cuflag-bench: devsig: set-up failed%s%s\n", log[0] ? ": " : "",
			log);
		for (int k = 0; k < R_COUNT; k++)
			bench_lat_fail(x.row[k], "the device-signal kernels could not be set up");
		failed = 1;
		goto out;
	}
	memset(host, 0, 4096);
	x.host = host;
	run_pingpong(&x);
	run_memop(&x);
	rc = cuflag_connect(d->sock, &c);
	if (rc) {
		bench_lat_fail(x.row[R_SPIN], "no client of %s: %s", d->sock, strerror(-rc));
		bench_lat_fail(x.row[R_BLOCKED], "no client of %s: %s", d->sock, strerror(-rc));
	} else {
		run_spin(&x, c);
		run_blocked(&x, c);
		run_burst(&x, r, c, d);
		cuflag_disconnect(c);
	}
	targets(&x, r, o->json);
	for (int k = 0; k < R_COUNT; k++)
		failed |= x.row[k]->failed;
	failed |= !bench_tput_find(r, "devsig-1M") || bench_tput_find(r, "devsig-1M")->failed;
out:
	if (x.st) {
		cu.cuStreamSynchronize(x.st);
		cu.cuStreamDestroy(x.st);
	}
	if (x.mod)
		cu.cuModuleUnload(x.mod);
	if (host)
		cu.cuMemFreeHost(host);
	return failed;
}
