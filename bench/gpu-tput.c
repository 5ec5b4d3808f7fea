/* SPDX-License-Identifier: MIT */
/*
 * GPU throughput: P worker processes x K streams, each stream running small
 * kernels, each kernel followed by the completion mechanism (and then the
 * same with nothing but the completions on the streams, the "-bare" rows:
 * what the mechanism itself sustains when no kernel launch paces it):
 *   flag-ceiling  cuStreamWriteValue32 with nobody scanning (counted at the end)
 *   hostfunc      cuLaunchHostFunc writing the stream's eventfd
 *   cuflagd       cuflag_cuda_signal on the stream's slot
 * A consumer thread per worker counts what the eventfds say until every
 * stream has its exact count. Workers are this program re-executed
 * (--gpu-worker), so each starts with a fresh CUDA state; they get ready,
 * start together, and report their first and last instants.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bench.h"
#include "cu.h"
#include "cuflag/cuflag.h"
#include "cuflag/cuflag_cuda.h"
#include "gpu-tput.h"

#define READY_FD 3
#define GO_FD 4
#define RESULT_FD 5
#define STALL_MS 10000

/* The two armed rows: BENCH_ARMED_PROCS workers x BENCH_ARMED_SLOTS slots,
 * signalled in turn on the worker's K streams with nothing else on them,
 * counted through per-slot eventfds or through one group per worker. */
static const char *const tput_names[] = { "flag-ceiling", "hostfunc", "cuflagd",
					  "cuflagd-10000", "cuflagd-group-10000" };
static const char *const tput_bare_names[] = { "flag-ceiling-bare", "hostfunc-bare",
					       "cuflagd-bare" };
enum { T_CEILING, T_HOSTFN, T_CUFLAGD, T_ARMED, T_ARMED_GROUP, T_COUNT };

/* ---- the worker ---- */

struct consumer {
	pthread_t thread;
	int ep;
	unsigned K;
	int *fds;
	cuflag_slot **slots;    /* cuflagd: consume through the library */
	cuflag_group *group;    /* the group row: drain this instead */
	uint64_t *by_id;        /* the group row: completions by slot id */
	uint64_t per_stream;
	uint64_t done;
	uint64_t t_end;
	int rc;
	char why[160];
};

/* A group's record: at most per_stream completions for each slot. */
static int group_one(void *arg, cuflag_slot *s, uint64_t n)
{
	struct consumer *c = arg;
	int id = cuflag_slot_id(s);

	if (id < 0 || (unsigned)id >= BENCH_ARMED_ID_MAX || (c->by_id[id] += n) > c->per_stream)
		return -EPROTO;
	c->done += n;
	return 0;
}

static void *group_consume(struct consumer *c)
{
	int rc;

	c->by_id = calloc(BENCH_ARMED_ID_MAX, sizeof(*c->by_id));
	if (!c->by_id) {
		c->rc = -ENOMEM;
		snprintf(c->why, sizeof(c->why), "out of memory");
		return NULL;
	}
	rc = bench_group_count(c->group, c->per_stream * c->K, STALL_MS, group_one, c);
	free(c->by_id);
	if (rc) {
		c->rc = rc;
		snprintf(c->why, sizeof(c->why), "group: %s (%llu of %llu counted)", strerror(-rc),
			 (unsigned long long)c->done, (unsigned long long)(c->per_stream * c->K));
		return NULL;
	}
	c->t_end = cuflag_now_ns();
	return NULL;
}

static void *consumer_main(void *arg)
{
	struct consumer *c = arg;
	uint64_t *got, want = c->per_stream * c->K;
	struct epoll_event ev[64];

	if (c->group)
		return group_consume(c);
	got = calloc(c->K, sizeof(*got));
	if (!got) {
		c->rc = -ENOMEM;
		snprintf(c->why, sizeof(c->why), "out of memory");
		return NULL;
	}
	while (c->done < want) {
		int n = epoll_wait(c->ep, ev, 64, STALL_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			c->rc = -ETIMEDOUT;
			snprintf(c->why, sizeof(c->why),
				 "no completion for %d ms (%llu of %llu counted)", STALL_MS,
				 (unsigned long long)c->done, (unsigned long long)want);
			break;
		}
		for (int k = 0; k < n; k++) {
			unsigned i = ev[k].data.u32;
			uint64_t v = 0;
			int rc;
			if (c->slots) {
				rc = cuflag_slot_consume(c->slots[i], &v);
			} else {
				rc = read(c->fds[i], &v, sizeof(v)) == sizeof(v) ? 0 : -errno;
			}
			if (rc == -EAGAIN)
				continue;
			if (rc) {
				c->rc = rc;
				snprintf(c->why, sizeof(c->why), "eventfd read: %s", strerror(-rc));
				goto out;
			}
			got[i] += v;
			c->done += v;
			if (got[i] > c->per_stream) {
				c->rc = -EPROTO;
				snprintf(c->why, sizeof(c->why), "stream %u: %llu completions, %llu sent",
					 i, (unsigned long long)got[i],
					 (unsigned long long)c->per_stream);
				goto out;
			}
		}
	}
	c->t_end = cuflag_now_ns();
out:
	free(got);
	return NULL;
}

static void hostfn_count(void *arg)
{
	uint64_t one = 1;
	if (write(*(int *)arg, &one, sizeof(one)) != sizeof(one))
		fprintf(stderr, "cuflag-bench: hostfunc: eventfd write failed\n");
}

static void wfail(struct bench_worker_result *res, const char *what, const char *detail)
{
	res->rc = -EIO;
	snprintf(res->why, sizeof(res->why), "%s%s%s", what, detail ? ": " : "",
		 detail ? detail : "");
}

#define W_TRY(call)                                                                        \
	do {                                                                               \
		CUresult e_ = (call);                                                      \
		if (e_ != CUDA_SUCCESS) {                                                  \
			const char *n_ = NULL;                                             \
			cu.cuGetErrorName(e_, &n_);                                        \
			res->rc = -EIO;                                                    \
			snprintf(res->why, sizeof(res->why), "%s: %s", #call, n_ ? n_ : "?"); \
			goto out;                                                          \
		}                                                                          \
	} while (0)

/* The cuflagd rows' slots: ns of them, in a group for the group row, and
 * what the consumer counts them through. 0, or -1 with res filled. */
static int worker_slots(int mech, const char *sock, unsigned ns, cuflag_client **client,
			cuflag_group **g, cuflag_slot **slots, struct consumer *con,
			struct bench_worker_result *res)
{
	int rc = cuflag_connect(sock, client);

	if (!rc && mech == T_ARMED_GROUP)
		rc = cuflag_group_create(*client, g);
	if (!rc)
		rc = *g ? cuflag_group_slots_acquire(*g, ns, slots)
			: cuflag_slots_acquire(*client, ns, slots);
	if (rc) {
		wfail(res, "connect / acquire slots", strerror(-rc));
		return -1;
	}
	con->slots = slots;
	con->group = *g;
	for (unsigned k = 0; !*g && k < ns; k++) {
		struct epoll_event e = { .events = EPOLLIN, .data.u32 = k };
		if (epoll_ctl(con->ep, EPOLL_CTL_ADD, cuflag_slot_fd(slots[k]), &e) < 0) {
			wfail(res, "epoll_ctl", strerror(errno));
			return -1;
		}
	}
	return 0;
}

static void worker(int mech, int kernels, unsigned K, uint64_t per_stream, const char *sock,
		   struct bench_worker_result *res)
{
	/* Completions go to ns slots (or eventfds, or flags) in turn, slot k on stream k % K. */
	unsigned ns = mech >= T_ARMED ? BENCH_ARMED_SLOTS : K;
	struct gpu_dev dev = { 0 };
	CUstream *st = calloc(K, sizeof(*st));
	int *fds = calloc(K, sizeof(*fds));
	cuflag_slot **slots = calloc(ns, sizeof(*slots));
	cuflag_client *client = NULL;
	cuflag_group *group = NULL;
	volatile uint32_t *flags = NULL;
	CUdeviceptr flags_dptr = 0;
	struct consumer con = { .ep = -1, .K = ns, .per_stream = per_stream };
	int con_started = 0, rc;
	char byte = 'r';

	memset(res, 0, sizeof(*res));
	for (unsigned k = 0; fds && k < K; k++)
		fds[k] = -1;
	if (!st || !fds || !slots) {
		wfail(res, "out of memory", NULL);
		goto out;
	}
	if (gpu_load() || gpu_dev_open(&dev, 0)) {
		wfail(res, "CUDA setup failed (see above)", NULL);
		goto out;
	}
	for (unsigned k = 0; k < K; k++)
		W_TRY(cu.cuStreamCreate(&st[k], CU_STREAM_NON_BLOCKING));
	con.ep = epoll_create1(EPOLL_CLOEXEC);
	con.fds = fds;
	if (mech == T_CEILING) {
		void *h = NULL;
		W_TRY(cu.cuMemHostAlloc(&h, 4096 > K * 64 ? 4096 : K * 64,
					CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
		memset(h, 0, 4096 > K * 64 ? 4096 : K * 64);
		flags = h;
		W_TRY(cu.cuMemHostGetDevicePointer(&flags_dptr, h, 0));
	} else if (mech == T_HOSTFN) {
		for (unsigned k = 0; k < K; k++) {
			struct epoll_event e = { .events = EPOLLIN, .data.u32 = k };
			fds[k] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			if (fds[k] < 0 || epoll_ctl(con.ep, EPOLL_CTL_ADD, fds[k], &e) < 0) {
				wfail(res, "eventfd / epoll", strerror(errno));
				goto out;
			}
		}
	} else if (worker_slots(mech, sock, ns, &client, &group, slots, &con, res)) {
		goto out;
	}
	/* Warm up: one kernel on every stream, so the first launch is not timed. */
	for (unsigned k = 0; k < K; k++)
		W_TRY(cu.cuLaunchKernel(dev.noop, 1, 1, 1, 1, 1, 1, 0, st[k], NULL, NULL));
	W_TRY(cu.cuCtxSynchronize());

	if (write(READY_FD, &byte, 1) != 1 || read(GO_FD, &byte, 1) != 1) {
		wfail(res, "start handshake", NULL);
		goto out;
	}
	res->t_start = cuflag_now_ns();
	if (mech != T_CEILING) {
		rc = pthread_create(&con.thread, NULL, consumer_main, &con);
		if (rc) {
			wfail(res, "pthread_create", strerror(rc));
			goto out;
		}
		con_started = 1;
	}
	for (uint64_t i = 1; i <= per_stream; i++) {
		for (unsigned k = 0; k < ns; k++) {
			uint32_t t;
			if (kernels)
				W_TRY(cu.cuLaunchKernel(dev.noop, 1, 1, 1, 1, 1, 1, 0, st[k], NULL,
							NULL));
			if (mech == T_CEILING) {
				W_TRY(cu.cuStreamWriteValue32(st[k], flags_dptr + k * 64, (uint32_t)i, 0));
			} else if (mech == T_HOSTFN) {
				W_TRY(cu.cuLaunchHostFunc(st[k], hostfn_count, &fds[k]));
			} else {
				rc = cuflag_cuda_signal(slots[k], st[k % K], &t);
				if (rc) {
					wfail(res, "cuflag_cuda_signal", strerror(-rc));
					goto out;
				}
			}
		}
	}
	if (mech == T_CEILING) {
		W_TRY(cu.cuCtxSynchronize());
		res->t_end = cuflag_now_ns();
		for (unsigned k = 0; k < K; k++) {
			uint32_t v = __atomic_load_n(&flags[k * 16], __ATOMIC_ACQUIRE);
			if (v != (uint32_t)per_stream) {
				res->rc = -EPROTO;
				snprintf(res->why, sizeof(res->why), "stream %u's flag is %u, not %llu",
					 k, v, (unsigned long long)per_stream);
				goto out;
			}
		}
		res->done = per_stream * K;
	} else {
		pthread_join(con.thread, NULL);
		con_started = 0;
		if (con.rc) {
			res->rc = con.rc;
			snprintf(res->why, sizeof(res->why), "%s", con.why);
			goto out;
		}
		res->t_end = con.t_end;
		res->done = con.done;
	}
out:
	if (con_started) {
		/* Failed while the consumer runs: it ends at its stall timeout. */
		pthread_join(con.thread, NULL);
	}
	if (dev.ctx)
		cu.cuCtxSynchronize();
	for (unsigned k = 0; st && k < K; k++)
		if (st[k])
			cu.cuStreamDestroy(st[k]);
	for (unsigned k = 0; slots && k < ns; k++)
		cuflag_slot_release(slots[k]);
	cuflag_group_destroy(group);
	cuflag_disconnect(client);
	for (unsigned k = 0; fds && k < K; k++)
		safe_close(fds[k]);
	safe_close(con.ep);
	if (flags)
		cu.cuMemFreeHost((void *)flags);
	if (dev.ctx)
		gpu_dev_close(&dev);
	free(st);
	free(fds);
	free(slots);
}

/* argv: --gpu-worker MECH KERNELS K PER_STREAM SOCKET; fds 3 ready, 4 go, 5 result. */
int bench_gpu_worker(int argc, char **argv)
{
	struct bench_worker_result res;
	int mech;

	if (argc != 7)
		return 2;
	mech = atoi(argv[2]);
	if (mech < 0 || mech >= T_COUNT)
		return 2;
	worker(mech, atoi(argv[3]) != 0, (unsigned)atoi(argv[4]), strtoull(argv[5], NULL, 10),
	       argv[6], &res);
	return write(RESULT_FD, &res, sizeof(res)) == sizeof(res) ? 0 : 1;
}

/* ---- the parent ---- */

struct spawn_args {
	const char *const *argv;
};

/* In the child: the pipes on fds 3, 4, 5, then this program as a worker. */
static void spawn_worker(unsigned i, int ready_fd, int go_fd, int result_fd, void *arg)
{
	const struct spawn_args *a = arg;

	(void)i;
	/* dup2 clears close-on-exec on the copies. */
	if (dup2(ready_fd, READY_FD) < 0 || dup2(go_fd, GO_FD) < 0 ||
	    dup2(result_fd, RESULT_FD) < 0)
		_exit(126);
	execv(a->argv[0], (char *const *)a->argv);
	_exit(127);
}

static void run_mech(const struct bench_opts *o, struct bench_report *r,
		     const struct daemon_proc *d, int mech, int kernels)
{
	int armed = mech >= T_ARMED;
	struct bench_tput *t =
		bench_tput_add(r, (kernels || armed ? tput_names : tput_bare_names)[mech]);
	unsigned K = o->streams, P = armed ? BENCH_ARMED_PROCS : o->clients;
	unsigned ns = armed ? BENCH_ARMED_SLOTS : K;
	/* Per slot (or stream): about --completions per process in all. */
	uint64_t per_stream = (o->completions + ns - 1) / ns;
	char mech_s[16], k_s[16], n_s[32];
	const char *argv[] = { o->self, "--gpu-worker", mech_s, kernels ? "1" : "0", k_s, n_s,
			       d->sock, NULL };
	struct spawn_args a = { argv };
	double cpu_ms;

	t->per_proc = ns;
	snprintf(mech_s, sizeof(mech_s), "%d", mech);
	snprintf(k_s, sizeof(k_s), "%u", K);
	snprintf(n_s, sizeof(n_s), "%llu", (unsigned long long)per_stream);
	/* CUDA start-up takes a while: a minute to get ready, two to run. */
	cpu_ms = bench_fleet_run(t, d, P, spawn_worker, &a, per_stream * ns * P, 60, 120);
	if (armed && !t->failed && cpu_ms >= 0)
		t->daemon_cpu_ms = cpu_ms;
	/* The daemon's CPU per completion is read from the run with kernels. */
	if (mech == T_CUFLAGD && kernels && !t->failed && cpu_ms >= 0) {
		t->daemon_cpu_ms = cpu_ms;
		r->have_daemon_cpu = 1;
		r->us_per_completion = cpu_ms * 1000.0 / (double)t->completions;
	}
}

void gpu_throughput(const struct bench_opts *o, struct bench_report *r,
		    const struct daemon_proc *d)
{
	for (int kernels = 1; kernels >= 0; kernels--)
		for (int m = 0; m < T_ARMED; m++)
			run_mech(o, r, d, m, kernels);
	/* Nothing but completions on the streams: the scanner's share shows. */
	run_mech(o, r, d, T_ARMED, 0);
	run_mech(o, r, d, T_ARMED_GROUP, 0);
}
