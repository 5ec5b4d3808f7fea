/* SPDX-License-Identifier: MIT */
/*
 * The CUDA path end to end, on a real GPU through the real cuflagd. One
 * program, one scenario per run (argv[1]); every scenario exits 77 where
 * there is no GPU. CUDA is only ever initialised in forked children, so the
 * parent can start the daemon and judge the results.
 *
 *   fleet      4 processes x 64 streams x 1000 completions after real kernels
 *   hostfn     the same path forced through the host-function fallback
 *   contexts   two contexts (two devices where there are two) signal one client
 *   fault      a kernel that faults: the wait ends with -EIO, not a hang
 *   reuse      a slot released with its write in flight is not handed out
 *              again until the write has landed
 *   host       host stores (the simulated device) through a GPU-era client:
 *              with --slab cuda-ipc, the daemon and the client share the
 *              flags through a CUDA allocation instead of a memfd
 *   graph      a signal captured into a CUDA graph: 1000 launches, each
 *              armed and awaited once, through the kernel and through the
 *              forced host function
 * Options after the scenario are passed to cuflagd (e.g. --slab cuda-ipc).
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cu.h"
#include "cuflag/cuflag.h"
#include "cuflag/cuflag_cuda.h"
#include "harness.h"

static const char *sock;

/* Whether a Driver API call succeeded; says what it returned if not. */
static int cu_ok(const char *what, CUresult e)
{
	return e == CUDA_SUCCESS || gpu_err(what, e) == 0;
}

/* A Driver API call that must succeed: a check like every other. */
#define CU(call) CHECK_MSG(cu_ok(#call, (call)), "%s failed", #call)

static void busy(struct gpu_dev *g, CUstream st, uint64_t ns)
{
	void *params[] = { &ns };
	CHECK(gpu_launch1(g->busy, st, params) == 0);
}

/* Count completions on n slots until each has want; exact, or abort. */
static void count_exact(cuflag_slot **s, int n, uint64_t want)
{
	uint64_t *got = calloc((size_t)n, sizeof(*got)), total = 0;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	for (int i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, cuflag_slot_fd(s[i]), &ev) == 0);
	}
	while (total < want * (uint64_t)n) {
		struct epoll_event evs[64];
		int k = epoll_wait(ep, evs, 64, 20000);
		CHECK(k > 0); /* 20 s without a completion: lost */
		for (int j = 0; j < k; j++) {
			uint64_t v;
			int i = (int)evs[j].data.u32;
			if (cuflag_slot_consume(s[i], &v) == 0) {
				got[i] += v;
				total += v;
				CHECK(got[i] <= want);
			}
		}
	}
	for (int i = 0; i < n; i++)
		CHECK(got[i] == want);
	close(ep);
	free(got);
}

/* ---- fleet: P processes x K streams x N completions ---- */

struct fleet_arg {
	cuflag_slot **s;
	int n;
	uint64_t want;
};

static void *counter(void *arg)
{
	struct fleet_arg *a = arg;
	count_exact(a->s, a->n, a->want);
	return NULL;
}

static int fleet_child(int streams, int rounds)
{
	struct gpu_dev g;
	CUstream st[64];
	cuflag_slot *s[64];
	uint32_t last[64];
	cuflag_client *c;
	pthread_t th;
	struct fleet_arg a = { s, streams, (uint64_t)rounds };
	int rc = gpu_load();

	if (rc)
		return rc;
	CHECK(gpu_dev_open(&g, 0) == 0);
	CHECK_RC(cuflag_connect(sock, &c));
	CHECK_RC(cuflag_slots_acquire(c, (unsigned)streams, s));
	for (int i = 0; i < streams; i++)
		CU(cu.cuStreamCreate(&st[i], CU_STREAM_NON_BLOCKING));
	CHECK(pthread_create(&th, NULL, counter, &a) == 0);
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < streams; i++) {
			busy(&g, st[i], 500);
			CHECK_RC(cuflag_cuda_signal(s[i], st[i], &last[i]));
		}
	pthread_join(th, NULL);
	for (int i = 0; i < streams; i++) {
		CHECK_RC(cuflag_slot_wait(s[i], last[i], 0)); /* the flag is there too */
		CHECK_RC(cuflag_cuda_check(s[i]));
		CU(cu.cuStreamSynchronize(st[i]));
		CU(cu.cuStreamDestroy(st[i]));
	}
	cuflag_disconnect(c);
	gpu_dev_close(&g);
	return 0;
}

static int run_children(int procs, int (*fn)(int, int), int a, int b)
{
	pid_t pid[16];
	int skip = 0, fail = 0;

	for (int p = 0; p < procs; p++) {
		pid[p] = fork();
		CHECK(pid[p] >= 0);
		if (pid[p] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
			_exit(fn(a, b));
		}
	}
	for (int p = 0; p < procs; p++) {
		int st;
		CHECK(waitpid(pid[p], &st, 0) == pid[p]);
		if (WIFEXITED(st) && WEXITSTATUS(st) == GPU_EXIT_SKIP)
			skip++;
		else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail++;
	}
	if (fail)
		return 1;
	return skip ? GPU_EXIT_SKIP : 0;
}

static int test_fleet(void)
{
	uint64_t t0 = cuflag_now_ns();
	int rc = run_children(4, fleet_child, 64, 1000);
	if (rc == 0)
		printf("fleet: 4 processes x 64 streams x 1000 completions exact, %.2f s\n",
		       (double)(cuflag_now_ns() - t0) / 1e9);
	return rc;
}

static int test_hostfn(void)
{
	uint64_t t0 = cuflag_now_ns();
	int rc;

	setenv(CUFLAG_CUDA_FORCE_HOSTFN_ENV, "1", 1);
	rc = run_children(4, fleet_child, 16, 250);
	if (rc == 0)
		printf("hostfn: 4 processes x 16 streams x 250 completions exact through the "
		       "host-function fallback, %.2f s\n",
		       (double)(cuflag_now_ns() - t0) / 1e9);
	return rc;
}

/* ---- contexts: two contexts, one client ---- */

static int contexts_child(int rounds, int unused)
{
	CUcontext ctx[2];
	CUdevice dev[2];
	CUstream st[2][8];
	struct gpu_dev g;
	cuflag_slot *s[16];
	cuflag_client *c;
	int ndev = 0, rc = gpu_load();
	(void)unused;

	if (rc)
		return rc;
	CU(cu.cuDeviceGetCount(&ndev));
	/* Two devices where there are two; else two contexts on one device. */
	for (int k = 0; k < 2; k++) {
		CU(cu.cuDeviceGet(&dev[k], ndev > 1 ? k : 0));
		CU(cu.cuCtxCreate(&ctx[k], NULL, 0, dev[k]));
		CU(cu.cuCtxPopCurrent(NULL));
	}
	CHECK_RC(cuflag_connect(sock, &c));
	CHECK_RC(cuflag_slots_acquire(c, 16, s));
	for (int k = 0; k < 2; k++) {
		CU(cu.cuCtxPushCurrent(ctx[k]));
		for (int i = 0; i < 8; i++)
			CU(cu.cuStreamCreate(&st[k][i], CU_STREAM_NON_BLOCKING));
		CU(cu.cuCtxPopCurrent(NULL));
	}
	/* No context is current here: the binding finds each stream's own. */
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < 2; k++)
			for (int i = 0; i < 8; i++) {
				uint32_t t;
				CHECK_RC(cuflag_cuda_signal(s[k * 8 + i], st[k][i], &t));
			}
	count_exact(s, 16, (uint64_t)rounds);
	cuflag_disconnect(c); /* undoes the registration in each context */
	for (int k = 0; k < 2; k++) {
		CU(cu.cuCtxPushCurrent(ctx[k]));
		for (int i = 0; i < 8; i++)
			CU(cu.cuStreamDestroy(st[k][i]));
		CU(cu.cuCtxPopCurrent(NULL));
		CU(cu.cuCtxDestroy(ctx[k]));
	}
	printf("contexts: 2 contexts on %d device(s), 16 streams x %d completions exact\n",
	       ndev > 1 ? 2 : 1, rounds);
	(void)g;
	return 0;
}

static int test_contexts(void)
{
	return run_children(1, contexts_child, 500, 0);
}

/* ---- fault ---- */

static int fault_child(int unused_a, int unused_b)
{
	struct gpu_dev g;
	CUstream st;
	cuflag_client *c;
	cuflag_slot *s;
	uint64_t bad = 0x10, t0;
	void *params[] = { &bad };
	uint32_t t;
	int rc = gpu_load();
	(void)unused_a;
	(void)unused_b;

	if (rc)
		return rc;
	CHECK(gpu_dev_open(&g, 0) == 0);
	CU(cu.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
	CHECK_RC(cuflag_connect(sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	busy(&g, st, 50 * 1000 * 1000); /* the signal is enqueued before the fault happens */
	CHECK(gpu_launch1(g.fault, st, params) == 0);
	rc = cuflag_cuda_signal(s, st, &t);
	CHECK_RC(rc);
	t0 = cuflag_now_ns();
	rc = cuflag_slot_wait(s, t, 10000);
	printf("fault: wait returned %d (%s) after %.0f ms\n", rc, strerror(-rc),
	       (double)(cuflag_now_ns() - t0) / 1e6);
	CHECK(rc == -EIO);
	CHECK(cuflag_cuda_check(s) == -EIO);
	cuflag_disconnect(c);
	return 0;
}

static int test_fault(void)
{
	int rc = run_children(1, fault_child, 0, 0);

	if (rc)
		return rc;
	/* The daemon and other clients carry on. */
	check_serves(sock);
	return 0;
}

/* ---- reuse: no hand-out while a write is in flight ---- */

static int reuse_child(int rounds, int unused)
{
	struct gpu_dev g;
	CUstream st;
	cuflag_client *c;
	cuflag_slot *s[4];
	int rc = gpu_load();
	(void)unused;

	if (rc)
		return rc;
	CHECK(gpu_dev_open(&g, 0) == 0);
	CU(cu.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
	CHECK_RC(cuflag_connect(sock, &c)); /* the daemon gives 4 slots per client */
	for (int r = 0; r < rounds; r++) {
		uint32_t t, start[4];
		int old;
		CHECK_RC(cuflag_slots_acquire(c, 4, s));
		old = cuflag_slot_id(s[r % 4]);
		/* The write lands 1..300 ms from now; release the slot before it. */
		busy(&g, st, (uint64_t)(1 + (r * 37) % 300) * 1000000u);
		CHECK_RC(cuflag_cuda_signal(s[r % 4], st, &t));
		cuflag_slot_release(s[r % 4]);
		/* Every slot is wanted: the freed one only comes back once written. */
		CHECK_RC(cuflag_slot_acquire(c, &s[r % 4]));
		CHECK(cuflag_slot_id(s[r % 4]) == old);
		CHECK(cu.cuStreamQuery(st) == CUDA_SUCCESS);
		for (int i = 0; i < 4; i++)
			start[i] = *cuflag_slot_flag(s[i]);
		/* Nothing late lands on the new owner's timeline. */
		CU(cu.cuStreamSynchronize(st));
		for (int i = 0; i < 4; i++) {
			uint64_t v;
			CHECK(*cuflag_slot_flag(s[i]) == start[i]);
			CHECK(cuflag_slot_consume(s[i], &v) == -EAGAIN || i != r % 4);
		}
		for (int i = 0; i < 4; i++)
			cuflag_slot_release(s[i]);
	}
	cuflag_disconnect(c);
	printf("reuse: %d rounds, a released slot came back only after its write landed\n",
	       rounds);
	return 0;
}

static int test_reuse(void)
{
	return run_children(1, reuse_child, 20, 0);
}

/* ---- host: CPU stores through whatever slab the daemon uses ---- */

static int host_child(int rounds, int unused)
{
	cuflag_client *c;
	cuflag_slot *s[8];
	int rc = gpu_load();
	(void)unused;

	if (rc)
		return rc;
	CHECK_RC(cuflag_connect(sock, &c));
	CHECK_RC(cuflag_slots_acquire(c, 8, s));
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < 8; i++) {
			uint32_t t;
			CHECK_RC(cuflag_slot_arm(s[i], &t));
			sim_store(cuflag_slot_flag(s[i]), t);
			CHECK_RC(cuflag_slot_wait(s[i], t, 5000));
		}
	count_exact(s, 8, (uint64_t)rounds);
	cuflag_disconnect(c);
	printf("host: 8 slots x %d host stores exact\n", rounds);
	return 0;
}

static int test_host(void)
{
	return run_children(1, host_child, 1000, 0);
}

/* ---- graph: a captured signal completes once per launch ---- */

/* The graph entry points, beside gpu/cu.h's (libcuda is loaded RTLD_GLOBAL). */
static struct {
	__typeof__(cuStreamBeginCapture) *begin;
	__typeof__(cuStreamEndCapture) *end;
	__typeof__(cuGraphInstantiate) *instantiate;
	__typeof__(cuGraphLaunch) *launch;
	__typeof__(cuGraphExecDestroy) *exec_destroy;
	__typeof__(cuGraphDestroy) *destroy;
} gr;

#define XSTR_(x) #x
#define STR_(x) XSTR_(x)
static void graph_api_load(void)
{
	CHECK(*(void **)&gr.begin = dlsym(RTLD_DEFAULT, STR_(cuStreamBeginCapture)));
	CHECK(*(void **)&gr.end = dlsym(RTLD_DEFAULT, STR_(cuStreamEndCapture)));
	CHECK(*(void **)&gr.instantiate = dlsym(RTLD_DEFAULT, STR_(cuGraphInstantiate)));
	CHECK(*(void **)&gr.launch = dlsym(RTLD_DEFAULT, STR_(cuGraphLaunch)));
	CHECK(*(void **)&gr.exec_destroy = dlsym(RTLD_DEFAULT, STR_(cuGraphExecDestroy)));
	CHECK(*(void **)&gr.destroy = dlsym(RTLD_DEFAULT, STR_(cuGraphDestroy)));
}

static int graph_child(int launches, int unused)
{
	struct gpu_dev g;
	CUstream cap, run;
	CUgraph graph;
	CUgraphExec exec;
	CUevent done;
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t t, prev, first;
	uint64_t n = 0, v;
	int rc = gpu_load();
	(void)unused;

	if (rc)
		return rc;
	graph_api_load();
	CHECK(gpu_dev_open(&g, 0) == 0);
	CU(cu.cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
	CU(cu.cuStreamCreate(&run, CU_STREAM_NON_BLOCKING));
	CU(cu.cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
	CHECK_RC(cuflag_connect(sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	first = *cuflag_slot_flag(s);
	CHECK(cuflag_cuda_capturing(cap) == 0);
	/* Global mode, as frameworks capture: the binding's first-use set-up
	 * (registration, module) must not invalidate it. */
	CU(gr.begin(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
	busy(&g, cap, 20000);
	CHECK(cuflag_cuda_capturing(cap) == 1);
	t = 1;
	CHECK_RC(cuflag_cuda_signal(s, cap, &t));
	CHECK(t == 0); /* nothing armed at capture */
	CU(gr.end(cap, &graph));
	CHECK(cuflag_cuda_capturing(cap) == 0);
	CU(gr.instantiate(&exec, graph, 0));
	CHECK(*cuflag_slot_flag(s) == first); /* capturing ran nothing */
	prev = first;
	for (int i = 0; i < launches; i++) {
		CU(gr.launch(exec, run));
		CU(cu.cuEventRecord(done, run));
		CHECK_RC(cuflag_cuda_launched(s, run, &t));
		CHECK(t == prev + 1);
		CHECK_RC(cuflag_slot_wait(s, t, 5000));
		/* The launch's own work ran first: the 20 us kernel is over and
		 * the flag moved by exactly one. */
		CHECK(*cuflag_slot_flag(s) == t);
		CU(cu.cuEventSynchronize(done));
		if (cuflag_slot_consume(s, &v) == 0)
			n += v;
		prev = t;
	}
	/* Plain signals after launches on the same stream carry on the timeline. */
	CHECK_RC(cuflag_cuda_signal(s, run, &t));
	CHECK(t == prev + 1);
	CHECK_RC(cuflag_slot_wait(s, t, 5000));
	for (int k = 0; k < 200 && n < (uint64_t)launches + 1; k++) {
		struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
		(void)poll(&p, 1, 10);
		if (cuflag_slot_consume(s, &v) == 0)
			n += v;
	}
	CHECK(n == (uint64_t)launches + 1);
	CHECK(*cuflag_slot_flag(s) == first + (uint32_t)launches + 1);
	CHECK_RC(cuflag_cuda_check(s));
	CU(gr.exec_destroy(exec));
	CU(gr.destroy(graph));
	cuflag_disconnect(c);
	CU(cu.cuEventDestroy(done));
	CU(cu.cuStreamDestroy(cap));
	CU(cu.cuStreamDestroy(run));
	gpu_dev_close(&g);
	printf("graph%s: %d launches of a captured signal, each armed, awaited and counted "
	       "once\n",
	       getenv(CUFLAG_CUDA_FORCE_HOSTFN_ENV) ? " (host function)" : "", launches);
	return 0;
}

static int test_graph(void)
{
	int rc = run_children(1, graph_child, 1000, 0);

	if (rc)
		return rc;
	setenv(CUFLAG_CUDA_FORCE_HOSTFN_ENV, "1", 1);
	return run_children(1, graph_child, 1000, 0);
}

static int probe_child(int unused_a, int unused_b)
{
	(void)unused_a;
	(void)unused_b;
	return gpu_load();
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
		const char *args[4];
	} tests[] = {
		{ "fleet", test_fleet, { NULL } },
		{ "hostfn", test_hostfn, { NULL } },
		{ "contexts", test_contexts, { NULL } },
		{ "fault", test_fault, { NULL } },
		{ "reuse", test_reuse, { "--slots-per-client", "4", NULL } },
		{ "host", test_host, { NULL } },
		{ "graph", test_graph, { NULL } },
	};
	const char *extra[16];
	struct daemon_proc d;
	int n = 0, rc;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: test-gpu SCENARIO [cuflagd options]\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (strcmp(argv[1], tests[i].name))
			continue;
		for (int k = 0; tests[i].args[k]; k++)
			extra[n++] = tests[i].args[k];
		for (int k = 2; k < argc && n < 15; k++)
			extra[n++] = argv[k];
		extra[n] = NULL;
		/* Without a GPU, say so before starting anything. */
		rc = run_children(1, probe_child, 0, 0);
		if (rc == GPU_EXIT_SKIP) {
			printf("%s: no GPU here, skipped\n", argv[1]);
			return GPU_EXIT_SKIP;
		}
		daemon_start(&d, 0, extra);
		sock = d.sock;
		rc = tests[i].fn();
		CHECK(daemon_stop(&d) == 0);
		return rc;
	}
	fprintf(stderr, "unknown scenario %s\n", argv[1]);
	return 2;
}
