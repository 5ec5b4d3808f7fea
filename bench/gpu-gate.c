/* SPDX-License-Identifier: MIT */
/*
 * The gate method, by which the GPU mode times a wake. Per sample the
 * stream runs a one-thread kernel that spins on a host-mapped gate word; the
 * mechanism under test is enqueued behind it; the waiter starts waiting; an
 * opener thread reads t0 just before it opens the gate; t1 is read when the
 * waiter runs again. The mechanisms:
 *   spin-floor      the waiter spins on a flag written by cuStreamWriteValue32
 *   hostfunc        cuLaunchHostFunc writes an eventfd the waiter polls
 *   event-blocking  CU_EVENT_BLOCKING_SYNC event, cuEventSynchronize
 *   event-spin      default event, spin on cuEventQuery
 *   inproc-scanner  flag write + a scanner thread in this process
 *   cuflagd         cuflag_cuda_signal + poll on the slot's eventfd
 *   cuflagd-spin    cuflag_cuda_signal + cuflag_slot_wait_spin (20 us)
 *   cuflagd-group   cuflag_cuda_signal on one slot of a group of 1024 + poll on
 *                   the group's fd
 * The latency rows (gpu.c), the paced rows (gpu-paced.c) and the
 * cross-process rows (gpu-xproc.c) all time them this way.
 * Every wait is bounded; the gate kernel gives up by itself after 10 s.
 */
#include "gpu-gate.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "cpu-relax.h"
#include "cuflag/cuflag_cuda.h"
#include "wake.h"

#define WAIT_TIMEOUT_MS 5000
#define SPIN_US 20

static const char *const gmech_names[G_COUNT] = {
	"spin-floor", "hostfunc", "event-blocking", "event-spin",
	"inproc-scanner", "cuflagd", "cuflagd-spin", "cuflagd-group",
};

/* It spins (a core of its own) so that it reacts in well under a microsecond. */
static void *opener_main(void *arg)
{
	struct opener *op = arg;

	while (!atomic_load_explicit(&op->quit, memory_order_relaxed)) {
		uint32_t g = atomic_load_explicit(&op->go, memory_order_acquire);
		uint64_t until;

		if (!g) {
			cuflag_cpu_relax();
			continue;
		}
		until = cuflag_now_ns() + atomic_load(&op->delay_ns);
		while (cuflag_now_ns() < until)
			cuflag_cpu_relax();
		atomic_store(&op->go, 0);
		atomic_store(&op->t0, cuflag_now_ns());
		__atomic_store_n(op->gate, g, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void hostfn_signal(void *arg)
{
	uint64_t one = 1;
	if (write(*(int *)arg, &one, sizeof(one)) != sizeof(one))
		fprintf(stderr, "cuflag-bench: hostfunc: eventfd write failed\n");
}

static int poll_fd(struct gmech_state *m, int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int rc;

	do
		rc = poll(&p, 1, WAIT_TIMEOUT_MS);
	while (rc < 0 && errno == EINTR);
	if (rc == 1)
		return 0;
	bench_lat_fail(m->row, rc == 0 ? "no wake within %d ms" : "poll failed (%d ms)",
		       WAIT_TIMEOUT_MS);
	return -1;
}

static int spin_until(struct gmech_state *m, volatile uint32_t *flag, uint32_t want)
{
	uint64_t end = cuflag_now_ns() + (uint64_t)WAIT_TIMEOUT_MS * 1000000u;
	unsigned k = 0;

	while ((int32_t)(__atomic_load_n(flag, __ATOMIC_ACQUIRE) - want) < 0) {
		cuflag_cpu_relax();
		if ((++k & 1023) == 0 && cuflag_now_ns() > end) {
			bench_lat_fail(m->row, "flag not written within %d ms", WAIT_TIMEOUT_MS);
			return -1;
		}
	}
	return 0;
}

/* 0, or -1 with m's row failed for what the driver said of what. */
static int gm_result(struct gmech_state *m, const char *what, CUresult e)
{
	const char *name = NULL;

	if (e == CUDA_SUCCESS)
		return 0;
	cu.cuGetErrorName(e, &name);
	bench_lat_fail(m->row, "%s failed: %s (%d)", what, name ? name : "?", (int)e);
	return -1;
}

/* Enqueue the mechanism behind the gate kernel; *want is what to wait for. */
static int gm_enqueue(struct gmech_state *m, CUstream s, uint32_t *want)
{
	CUresult e = CUDA_SUCCESS;
	int rc;

	switch (m->kind) {
	case G_SPIN:
	case G_INPROC:
		*want = ++m->next;
		e = cu.cuStreamWriteValue32(s, m->flag_dptr, *want, 0);
		if (e == CUDA_SUCCESS && m->kind == G_INPROC)
			inproc_scanner_arm(m->sc, 0, *want);
		break;
	case G_HOSTFN:
		e = cu.cuLaunchHostFunc(s, hostfn_signal, &m->efd);
		break;
	case G_EVBLOCK:
	case G_EVSPIN:
		e = cu.cuEventRecord(m->ev, s);
		break;
	case G_CUFLAGD:
	case G_CUFLAGD_SPIN:
	case G_GROUP:
		rc = cuflag_cuda_signal(m->slot, s, want);
		if (rc) {
			bench_lat_fail(m->row, "cuflag_cuda_signal: %s%s", strerror(-rc),
				       rc == -ENOSYS ? " (libcuflag-client built without CUDA)" : "");
			return -1;
		}
		break;
	default:
		break;
	}
	return gm_result(m, "enqueue", e);
}

static int gm_wait(struct gmech_state *m, uint32_t want)
{
	uint64_t end;
	CUresult e;
	int rc;

	switch (m->kind) {
	case G_SPIN:
		return spin_until(m, m->flag, want);
	case G_HOSTFN:
	case G_INPROC:
		return poll_fd(m, m->efd);
	case G_EVBLOCK:
		/* Bounded: the gate kernel ends by itself after GATE_TIMEOUT_NS. */
		e = cu.cuEventSynchronize(m->ev);
		break;
	case G_EVSPIN:
		end = cuflag_now_ns() + (uint64_t)WAIT_TIMEOUT_MS * 1000000u;
		while ((e = cu.cuEventQuery(m->ev)) == CUDA_ERROR_NOT_READY) {
			cuflag_cpu_relax();
			if (cuflag_now_ns() > end) {
				bench_lat_fail(m->row, "event not reached within %d ms",
					       WAIT_TIMEOUT_MS);
				return -1;
			}
		}
		break;
	case G_CUFLAGD:
		return poll_fd(m, cuflag_slot_fd(m->slot));
	case G_GROUP:
		return poll_fd(m, cuflag_group_fd(bench_group_get(m->grp)));
	case G_CUFLAGD_SPIN:
		rc = cuflag_slot_wait_spin(m->slot, want, SPIN_US, WAIT_TIMEOUT_MS);
		if (rc) {
			bench_lat_fail(m->row, "cuflag_slot_wait_spin: %s", strerror(-rc));
			return -1;
		}
		return 0;
	default:
		return -1;
	}
	return gm_result(m, "wait", e);
}

/* After t1 (not timed): take what the wake left in the eventfd. */
static int gm_after(struct gmech_state *m)
{
	uint64_t n = 0;
	int rc;

	switch (m->kind) {
	case G_HOSTFN:
	case G_INPROC:
		if (read(m->efd, &n, sizeof(n)) != sizeof(n) || n != 1) {
			bench_lat_fail(m->row, "the wake carried %llu completions, not 1",
				       (unsigned long long)n);
			return -1;
		}
		return 0;
	case G_CUFLAGD:
	case G_GROUP:
		rc = m->kind == G_GROUP ? bench_group_take(m->grp, m->slot, &n)
					: cuflag_slot_consume(m->slot, &n);
		if (rc || n != 1) {
			bench_lat_fail(m->row, "the wake carried %llu completions (rc %d), not 1",
				       (unsigned long long)n, rc);
			return -1;
		}
		return 0;
	case G_CUFLAGD_SPIN:
		/* The wait may return before the daemon signals: drain whatever is there. */
		rc = cuflag_slot_consume(m->slot, &n);
		return rc == 0 || rc == -EAGAIN ? 0 : -1;
	default:
		return 0;
	}
}

/* Give up a sample: open the gate its kernel waits on and drain the stream. */
void gpu_gate_abandon(struct gpu_lat *L, uint32_t g)
{
	__atomic_store_n(&L->host[0], g, __ATOMIC_RELEASE);
	cu.cuStreamSynchronize(L->stream);
}

/* Have the opener open gate g delay_ns from now, reading t0 just before. */
void gpu_gate_open_after(struct gpu_lat *L, uint32_t g, uint64_t delay_ns)
{
	atomic_store(&L->op.t0, 0);
	atomic_store(&L->op.delay_ns, delay_ns);
	atomic_store_explicit(&L->op.go, g, memory_order_release);
}

CUresult gpu_gate_launch(struct gpu_lat *L, uint32_t *g)
{
	CUdeviceptr gate_dptr = L->dptr;
	uint64_t timeout = GATE_TIMEOUT_NS;
	void *args[] = { &gate_dptr, g, &timeout };

	*g = ++L->gate_seq;
	if (*g == 0) /* after a wrap: never the value the page starts with */
		*g = ++L->gate_seq;
	return cu.cuLaunchKernel(L->dev.gate, 1, 1, 1, 1, 1, 1, 0, L->stream, args, NULL);
}

int gpu_lat_sample(struct gpu_lat *L, struct gmech_state *m, uint64_t delay_ns, double *us)
{
	uint32_t g, want = 0;
	uint64_t t0, t1;
	CUresult e;

	e = gpu_gate_launch(L, &g);
	if (e != CUDA_SUCCESS) {
		gpu_err("cuLaunchKernel (gate)", e);
		bench_lat_fail(m->row, "gate kernel launch failed");
		return -1;
	}
	if (gm_enqueue(m, L->stream, &want)) {
		gpu_gate_abandon(L, g);
		return -1;
	}
	gpu_gate_open_after(L, g, delay_ns);
	if (gm_wait(m, want)) {
		gpu_gate_abandon(L, g);
		return -1;
	}
	t1 = cuflag_now_ns();
	t0 = atomic_load(&L->op.t0);
	if (L->host[1] == g) {
		bench_lat_fail(m->row, "the gate kernel never saw the gate open (10 s)");
		return -1;
	}
	if (t0 == 0 || t1 < t0) {
		bench_lat_fail(m->row, "the waiter ran before the gate opened");
		cu.cuStreamSynchronize(L->stream);
		return -1;
	}
	/* Not timed: the stream drained, the wake accounted for. */
	e = cu.cuStreamSynchronize(L->stream);
	if (e != CUDA_SUCCESS) {
		gpu_err("cuStreamSynchronize", e);
		bench_lat_fail(m->row, "stream failed");
		return -1;
	}
	if (gm_after(m))
		return -1;
	*us = (double)(t1 - t0) / 1000.0;
	return 0;
}

int gpu_lat_open(struct gpu_lat *L, const struct bench_opts *o, struct bench_report *r,
		 const char *sock)
{
	void *host = NULL;
	int rc;

	for (int k = 0; k < G_COUNT; k++) {
		L->m[k].kind = (enum gmech)k;
		L->m[k].row = bench_lat_add(r, gmech_names[k], o->iterations);
		L->m[k].efd = -1;
	}
	CU_TRY(cu.cuStreamCreate(&L->stream, CU_STREAM_NON_BLOCKING));
	CU_TRY(cu.cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
	memset(host, 0, 4096);
	L->host = host;
	CU_TRY(cu.cuMemHostGetDevicePointer(&L->dptr, host, 0));
	L->m[G_SPIN].flag = &L->host[16];
	L->m[G_SPIN].flag_dptr = L->dptr + 16 * 4;
	L->m[G_INPROC].flag = &L->host[32];
	L->m[G_INPROC].flag_dptr = L->dptr + 32 * 4;
	CU_TRY(cu.cuEventCreate(&L->m[G_EVBLOCK].ev, CU_EVENT_BLOCKING_SYNC));
	CU_TRY(cu.cuEventCreate(&L->m[G_EVSPIN].ev, CU_EVENT_DEFAULT));
	L->m[G_HOSTFN].efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	L->m[G_INPROC].efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (L->m[G_HOSTFN].efd < 0 || L->m[G_INPROC].efd < 0) {
		fprintf(stderr, "cuflag-bench: eventfd: %s\n", strerror(errno));
		return -1;
	}
	{
		volatile uint32_t *flags[1] = { L->m[G_INPROC].flag };
		rc = inproc_scanner_start(&L->m[G_INPROC].sc, 1, flags, &L->m[G_INPROC].efd);
		if (rc)
			bench_lat_fail(L->m[G_INPROC].row, "scanner thread: %s", strerror(-rc));
	}
	rc = cuflag_connect(sock, &L->client);
	if (!rc)
		rc = cuflag_slot_acquire(L->client, &L->m[G_CUFLAGD].slot);
	if (!rc)
		rc = cuflag_slot_acquire(L->client, &L->m[G_CUFLAGD_SPIN].slot);
	if (rc) {
		bench_lat_fail(L->m[G_CUFLAGD].row, "no slot from %s: %s", sock, strerror(-rc));
		bench_lat_fail(L->m[G_CUFLAGD_SPIN].row, "no slot from %s: %s", sock,
			       strerror(-rc));
	}
	rc = bench_group_open(&L->m[G_GROUP].grp, sock);
	if (rc)
		bench_lat_fail(L->m[G_GROUP].row, "no group of %d slots from %s: %s",
			       BENCH_GROUP_SLOTS, sock, strerror(-rc));
	else
		L->m[G_GROUP].slot = bench_group_slot(L->m[G_GROUP].grp);
	L->op.gate = &L->host[0];
	L->op.rng = cuflag_now_ns() | 1;
	rc = pthread_create(&L->op.thread, NULL, opener_main, &L->op);
	if (rc) {
		fprintf(stderr, "cuflag-bench: pthread_create: %s\n", strerror(rc));
		return -1;
	}
	return 0;
fail:
	return -1;
}

void gpu_lat_close(struct gpu_lat *L)
{
	if (L->op.thread) {
		atomic_store(&L->op.quit, 1);
		pthread_join(L->op.thread, NULL);
	}
	if (L->host) {
		/* Whatever gate kernel is left ends once it sees this. */
		__atomic_store_n(&L->host[0], L->gate_seq + 0x40000000u, __ATOMIC_RELEASE);
	}
	if (L->stream) {
		cu.cuStreamSynchronize(L->stream);
		cu.cuStreamDestroy(L->stream);
	}
	inproc_scanner_stop(L->m[G_INPROC].sc);
	for (int k = 0; k < G_COUNT; k++) {
		if (L->m[k].ev)
			cu.cuEventDestroy(L->m[k].ev);
		safe_close(L->m[k].efd);
		if (k != G_GROUP) /* the group's slots go with it */
			cuflag_slot_release(L->m[k].slot);
	}
	bench_group_close(L->m[G_GROUP].grp);
	cuflag_disconnect(L->client);
	if (L->host)
		cu.cuMemFreeHost((void *)L->host);
}
