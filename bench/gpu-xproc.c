/* SPDX-License-Identifier: MIT */
/*
 * Completions across processes, timed by the gate method (gpu-gate.c): this
 * process's stream runs the gate kernel, then the producer's mechanism; a
 * consumer process (this program again, --xproc-consumer) waits for it.
 *
 * Host side, from the gate opening to the blocked consumer running:
 *   xproc-cuflagd     a slot exported to the consumer, cuflag_slot_wait() on its import
 *   xproc-ipc-event   a CUDA IPC event (blocking sync) the consumer synchronizes
 *   xproc-poll-byte   a word of shared memory the stream writes, the consumer spinning on it
 * GPU side, from the gate opening to the consumer's stream running on: its
 * stream waits, then writes a word of shared memory this process spins on:
 *   xproc-gpu-cuflag-wait    cuflag_cuda_wait() on the import
 *   xproc-gpu-ipc-event-wait cuStreamWaitEvent() on the IPC event
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "clock.h"
#include "cpu-relax.h"
#include "cuflag/cuflag_cuda.h"
#include "fdpass.h"
#include "gpu-xproc.h"
#include "unix-socket.h"

enum xmech { X_CUFLAGD, X_IPC_EVENT, X_POLL, X_GPU_CUFLAG, X_GPU_EVENT, X_COUNT };
static const char *const xnames[X_COUNT] = {
	"xproc-cuflagd", "xproc-ipc-event", "xproc-poll-byte", "xproc-gpu-cuflag-wait",
	"xproc-gpu-ipc-event-wait",
};

#define XFD 3            /* the consumer's end of the socket pair */
#define POLL_WORD 0      /* in the shared page: written by the producer's stream */
#define DONE_WORD 16     /* written by the consumer's stream */
#define WAIT_NS 5000000000ull

struct xsetup {
	CUipcEventHandle ev;
};
struct xcmd {
	uint32_t mech, want, g, quit;
};
struct xans {
	int32_t rc;     /* 0 or a negative errno / -CUresult */
	uint32_t ready; /* 1: about to wait; 0: done */
	uint64_t t1;    /* host mechanisms: when the consumer ran again */
};

static int spin_word(volatile uint32_t *w, uint32_t g, uint64_t *t1)
{
	uint64_t end = cuflag_now_ns() + WAIT_NS;

	while (__atomic_load_n(w, __ATOMIC_ACQUIRE) != g) {
		cuflag_cpu_relax();
		if (cuflag_now_ns() > end)
			return -ETIMEDOUT;
	}
	*t1 = cuflag_now_ns();
	return 0;
}

static int answer(int fd, int rc, uint32_t ready, uint64_t t1)
{
	struct xans a = { .rc = rc, .ready = ready, .t1 = t1 };

	return send(fd, &a, sizeof(a), MSG_NOSIGNAL) == (ssize_t)sizeof(a) ? 0 : -1;
}

/* ---- the consumer ---- */

int bench_xproc_consumer(int argc, char **argv)
{
	struct gpu_dev dev;
	struct xsetup su;
	struct xcmd cmd;
	cuflag_client *c = NULL;
	cuflag_slot *imp = NULL;
	CUevent ev = NULL;
	CUstream cs = NULL;
	CUdeviceptr page_d = 0;
	volatile uint32_t *page = NULL;
	int fds[2] = { -1, -1 }, rc;
	unsigned nfds = 0;

	(void)argc;
	if ((rc = gpu_load()) || gpu_dev_open(&dev, 0))
		return rc ? rc : 1;
	if (cuflag_recv_msg(XFD, &su, sizeof(su), fds, 2, &nfds, 0) != (ssize_t)sizeof(su) ||
	    nfds != 2)
		return 1;
	rc = cuflag_connect(argv[2], &c);
	if (!rc)
		rc = cuflag_slot_import(c, fds[0], &imp);
	if (rc) {
		fprintf(stderr, "cuflag-bench consumer: import: %s\n", strerror(-rc));
		return 1;
	}
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
	if (page == MAP_FAILED)
		return 1;
	CU_TRY(cu.cuIpcOpenEventHandle(&ev, su.ev));
	CU_TRY(cu.cuMemHostRegister((void *)page, 4096,
				    CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE));
	CU_TRY(cu.cuMemHostGetDevicePointer(&page_d, (void *)page, 0));
	CU_TRY(cu.cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
	if (answer(XFD, 0, 1, 0))
		return 1;
	while (recv(XFD, &cmd, sizeof(cmd), 0) == (ssize_t)sizeof(cmd) && !cmd.quit) {
		uint64_t t1 = 0, n;
		CUresult e = CUDA_SUCCESS;
		rc = 0;
		switch (cmd.mech) {
		case X_CUFLAGD:
			answer(XFD, 0, 1, 0);
			rc = cuflag_slot_wait(imp, cmd.want, 5000);
			t1 = cuflag_now_ns();
			while (cuflag_slot_consume(imp, &n) == 0)
				;
			break;
		case X_IPC_EVENT:
			answer(XFD, 0, 1, 0);
			e = cu.cuEventSynchronize(ev);
			t1 = cuflag_now_ns();
			break;
		case X_POLL:
			answer(XFD, 0, 1, 0);
			rc = spin_word(&page[POLL_WORD], cmd.g, &t1);
			break;
		default:
			if (cmd.mech == X_GPU_CUFLAG)
				rc = cuflag_cuda_wait(imp, cs, cmd.want);
			else
				e = cu.cuStreamWaitEvent(cs, ev, 0);
			if (!rc && e == CUDA_SUCCESS)
				e = cu.cuStreamWriteValue32(cs, page_d + DONE_WORD * 4, cmd.g, 0);
			answer(XFD, rc ? rc : -(int)e, 1, 0);
			if (e == CUDA_SUCCESS)
				e = cu.cuStreamSynchronize(cs);
			while (cuflag_slot_consume(imp, &n) == 0)
				;
			break;
		}
		if (answer(XFD, rc ? rc : -(int)e, 0, t1))
			break;
	}
	cu.cuStreamSynchronize(cs);
	cuflag_slot_release(imp);
	cuflag_disconnect(c);
	return 0;
fail:
	return 1;
}

/* ---- the producer ---- */

struct xproc {
	struct gpu_lat *L;
	struct bench_lat *row[X_COUNT];
	int sock;
	pid_t pid;
	volatile uint32_t *page;
	CUdeviceptr page_d;
	CUevent ev;
	cuflag_slot *slot;
};

static int recv_ans(struct xproc *x, struct xans *a)
{
	return recv(x->sock, a, sizeof(*a), 0) == (ssize_t)sizeof(*a) ? 0 : -1;
}

/* One sample of mechanism k; 0 or -1 (its row failed). */
static int xsample(struct xproc *x, int k, uint64_t delay_ns, double *us)
{
	struct gpu_lat *L = x->L;
	struct bench_lat *row = x->row[k];
	uint32_t g, want = 0;
	uint64_t t0, t1 = 0, n;
	struct xans a;
	int rc = 0;

	if (gpu_gate_launch(L, &g) != CUDA_SUCCESS) {
		bench_lat_fail(row, "gate kernel launch failed");
		return -1;
	}
	if (k == X_CUFLAGD || k == X_GPU_CUFLAG)
		rc = cuflag_cuda_signal(x->slot, L->stream, &want);
	else if (k == X_POLL)
		rc = cu.cuStreamWriteValue32(L->stream, x->page_d + POLL_WORD * 4, g, 0) ? -EIO : 0;
	else
		rc = cu.cuEventRecord(x->ev, L->stream) ? -EIO : 0;
	struct xcmd cmd = { .mech = (uint32_t)k, .want = want, .g = g };
	if (rc || send(x->sock, &cmd, sizeof(cmd), MSG_NOSIGNAL) != (ssize_t)sizeof(cmd) ||
	    recv_ans(x, &a) || !a.ready || a.rc) {
		bench_lat_fail(row, "producer or consumer failed to enqueue (%d, %d)", rc, a.rc);
		gpu_gate_abandon(L, g);
		return -1;
	}
	gpu_gate_open_after(L, g, delay_ns);
	if (k >= X_GPU_CUFLAG)
		rc = spin_word(&x->page[DONE_WORD], g, &t1);
	if (recv_ans(x, &a) || a.ready || a.rc || rc) {
		bench_lat_fail(row, "the consumer's wait failed (%d, %d)", rc, a.rc);
		return -1;
	}
	if (k < X_GPU_CUFLAG)
		t1 = a.t1;
	t0 = atomic_load(&L->op.t0);
	if (cu.cuStreamSynchronize(L->stream)) {
		bench_lat_fail(row, "stream failed");
		return -1;
	}
	while (cuflag_slot_consume(x->slot, &n) == 0)
		;
	if (t0 == 0 || t1 < t0) {
		bench_lat_fail(row, "the consumer ran before the gate opened");
		return -1;
	}
	*us = (double)(t1 - t0) / 1000.0;
	return 0;
}

static int xsetup(struct xproc *x, const struct bench_opts *o, const struct daemon_proc *d)
{
	struct xsetup su;
	struct xans a;
	int sp[2], memfd, fd = -1, fds[2];
	void *page;

	memfd = memfd_create("cuflag-bench-xproc", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, 4096) < 0)
		return -1;
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (page == MAP_FAILED)
		return -1;
	x->page = page;
	CU_TRY(cu.cuMemHostRegister(page, 4096,
				    CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE));
	CU_TRY(cu.cuMemHostGetDevicePointer(&x->page_d, page, 0));
	CU_TRY(cu.cuEventCreate(&x->ev, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
						CU_EVENT_INTERPROCESS));
	CU_TRY(cu.cuIpcGetEventHandle(&su.ev, x->ev));
	if (cuflag_slot_acquire(x->L->client, &x->slot) || cuflag_slot_export(x->slot, &fd))
		return -1;
	if (cuflag_unix_pair(sp))
		return -1;
	x->pid = fork();
	if (x->pid == 0) {
		const char *argv[] = { o->self, "--xproc-consumer", d->sock, NULL };
		if (dup2(sp[1], XFD) < 0) /* clears close-on-exec on the copy */
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(sp[1]);
	x->sock = sp[0];
	fds[0] = fd;
	fds[1] = memfd;
	if (x->pid < 0 || cuflag_send_msg(x->sock, &su, sizeof(su), fds, 2, 0) ||
	    recv_ans(x, &a) || !a.ready) {
		close(fd);
		close(memfd);
		return -1;
	}
	close(fd);
	close(memfd);
	return 0;
fail:
	return -1;
}

int gpu_xproc(const struct bench_opts *o, struct bench_report *r, struct gpu_lat *L,
	      const struct daemon_proc *d)
{
	static struct xproc x;
	unsigned total = o->warmup + o->iterations, done[X_COUNT] = { 0 };
	int failed = 0;

	x = (struct xproc){ .L = L, .sock = -1, .pid = -1 };
	for (int k = 0; k < X_COUNT; k++)
		x.row[k] = bench_lat_add(r, xnames[k], o->iterations);
	if (xsetup(&x, o, d)) {
		for (int k = 0; k < X_COUNT; k++)
			bench_lat_fail(x.row[k], "no consumer process");
		failed = 1;
	}
	for (int more = !failed; more;) {
		more = 0;
		for (int k = 0; k < X_COUNT; k++) {
			for (int b = 0; b < 50 && done[k] < total && !x.row[k]->failed; b++) {
				double us;
				if (xsample(&x, k, 50000 + bench_rand(&L->op.rng) % 100000, &us))
					break;
				if (done[k]++ >= o->warmup)
					x.row[k]->us[x.row[k]->n++] = us;
			}
			if (done[k] < total && !x.row[k]->failed)
				more = 1;
		}
	}
	if (x.sock >= 0) {
		struct xcmd q = { .quit = 1 };
		(void)send(x.sock, &q, sizeof(q), MSG_NOSIGNAL);
		close(x.sock);
	}
	if (x.pid > 0)
		waitpid(x.pid, NULL, 0);
	cuflag_slot_release(x.slot);
	if (x.ev)
		cu.cuEventDestroy(x.ev);
	if (x.page) {
		cu.cuMemHostUnregister((void *)x.page);
		munmap((void *)x.page, 4096);
	}
	for (int k = 0; k < X_COUNT; k++)
		failed |= x.row[k]->failed;
	bench_ratio_lat(r, "xproc-cuflagd_p50/cuflagd_p50", "xproc-cuflagd", "cuflagd", 0);
	bench_ratio_lat(r, "xproc-cuflagd_p99/xproc-ipc-event_p99", "xproc-cuflagd",
			"xproc-ipc-event", 1);
	bench_ratio_lat(r, "xproc-gpu-cuflag-wait_p50/xproc-gpu-ipc-event-wait_p50",
			"xproc-gpu-cuflag-wait", "xproc-gpu-ipc-event-wait", 0);
	return failed ? -1 : 0;
}
