/* SPDX-License-Identifier: MIT */
/*
 * Signals from inside a running kernel, on a real GPU through the real
 * cuflagd: the kernels (devsig-kernels.cu) use cuflag/cuflag_device.h on the
 * address cuflag_cuda_slot_devptr() gives, the host arms with
 * cuflag_slot_arm_many(). One scenario per run (argv[1]); each prints one
 * PASS line with its figures, or a FAIL line (and the check that failed), and
 * exits 77 where there is no GPU. CUDA is only ever initialised in forked
 * children, so the parent can start, kill and restart the daemon.
 *
 *   stream    one thread of a persistent kernel signals 1 000 000 values on
 *             one slot, arms coming in chunks while it runs (it runs ahead
 *             of them): counted exactly, the data written before each value
 *             there at every wake
 *   payload   a block writes 64 words, syncs, signals, waits for the host's
 *             ack: at each eventfd wake the whole payload is visible (20 000
 *             round trips)
 *   advance   128 blocks x 256 threads each advance once, 10 rounds: exact
 *             (and no device address without a current context: -EINVAL)
 *   group     64 slots of one group, one block each, 20 000 values each:
 *             exact per slot through the group's fd
 *   restart   the daemon is SIGKILLed and restarted while a kernel signals
 *             2 000 000 values: exact, the device address unchanged
 * Options after the scenario are passed to cuflagd (e.g. --slab cuda-ipc).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cu.h"
#include "cuflag/cuflag.h"
#include "cuflag/cuflag_cuda.h"
#include "harness.h"

/* devsig-kernels.c, made by gpu/nvcc-embed.py. */
extern const unsigned char devsig_fatbin[];

#define WAKE_MS 20000 /* no completion for this long: lost */

static struct daemon_proc d;
static const char *scenario;

static int cu_ok(const char *what, CUresult e)
{
	return e == CUDA_SUCCESS || gpu_err(what, e) == 0;
}
#define CU(call) CHECK_MSG(cu_ok(#call, (call)), "%s failed", #call)

struct dev {
	struct gpu_dev g;
	CUmodule mod;
	CUfunction stream, payload, advance, group;
	CUstream st;
};

/* The device, the kernels, a stream; 0 or GPU_EXIT_SKIP. */
static int dev_open(struct dev *x)
{
	int rc = gpu_load();

	if (rc)
		return rc;
	CHECK(gpu_dev_open(&x->g, 0) == 0);
	CU(cu.cuModuleLoadDataEx(&x->mod, devsig_fatbin, 0, NULL, NULL));
	CU(cu.cuModuleGetFunction(&x->stream, x->mod, "devsig_stream"));
	CU(cu.cuModuleGetFunction(&x->payload, x->mod, "devsig_payload"));
	CU(cu.cuModuleGetFunction(&x->advance, x->mod, "devsig_advance"));
	CU(cu.cuModuleGetFunction(&x->group, x->mod, "devsig_group"));
	CU(cu.cuStreamCreate(&x->st, CU_STREAM_NON_BLOCKING));
	return 0;
}

static void dev_close(struct dev *x)
{
	CU(cu.cuStreamSynchronize(x->st));
	CU(cu.cuStreamDestroy(x->st));
	CU(cu.cuModuleUnload(x->mod));
	gpu_dev_close(&x->g);
}

/* Zeroed host memory the device reads and writes. */
static void *hostmem(size_t len, CUdeviceptr *dptr)
{
	void *p = NULL;

	CU(cu.cuMemHostAlloc(&p, len, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
	memset(p, 0, len);
	CU(cu.cuMemHostGetDevicePointer(dptr, p, 0));
	return p;
}

static void launch(struct dev *x, CUfunction f, unsigned blocks, unsigned threads, void **args)
{
	CU(cu.cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, x->st, args, NULL));
}

static CUdeviceptr devptr(cuflag_slot *s)
{
	CUdeviceptr p = 0, again = 0;

	CHECK_RC(cuflag_cuda_slot_devptr(s, &p));
	CHECK(p != 0);
	CHECK_RC(cuflag_cuda_slot_devptr(s, &again)); /* cached: the same */
	CHECK(again == p);
	return p;
}

/* A child's device, client and one slot with its device address. */
struct one {
	struct dev x;
	cuflag_client *c;
	cuflag_slot *s;
	CUdeviceptr dflag;
};

static int one_open(struct one *o)
{
	int rc = dev_open(&o->x);

	if (rc)
		return rc;
	CHECK_RC(cuflag_connect(d.sock, &o->c));
	CHECK_RC(cuflag_slot_acquire(o->c, &o->s));
	o->dflag = devptr(o->s);
	return 0;
}

static void one_close(struct one *o)
{
	cuflag_slot_release(o->s);
	cuflag_disconnect(o->c);
	dev_close(&o->x);
}

static uint32_t flag_now(cuflag_slot *s)
{
	return __atomic_load_n(cuflag_slot_flag(s), __ATOMIC_ACQUIRE);
}

/* Nothing more arrives on the slot within 50 ms. */
static void expect_quiet(cuflag_slot *s)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t n;

	if (poll(&p, 1, 50) == 1)
		CHECK_MSG(cuflag_slot_consume(s, &n) == -EAGAIN, "%llu more than were armed",
			  (unsigned long long)n);
}

/*
 * The stream and restart scenarios: n values from one kernel thread, armed
 * CHUNK at a time (the first before the launch, the next ones as counts
 * come in, so the kernel runs ahead of them). Counted through the eventfd;
 * at each wake the data of the last value counted must be there. When
 * restart_fd >= 0, the parent is asked to restart the daemon once a quarter
 * is counted, and answers when the new one listens.
 */
#define CHUNK 100000u

static int stream_run(uint32_t n, uint64_t pace_ns, int ask_fd, int done_fd)
{
	struct one o;
	CUdeviceptr ddata;
	uint32_t *data, first, next, armed, f_at_restart = 0;
	uint64_t got = 0, wakes = 0, t0, t1, v;
	int asked = 0, rc = one_open(&o);
	cuflag_slot *s = o.s;

	if (rc)
		return rc;
	data = hostmem(64 * sizeof(uint32_t), &ddata);
	armed = n < CHUNK ? n : CHUNK;
	CHECK_RC(cuflag_slot_arm_many(s, armed, &first));
	void *args[] = { &o.dflag, &first, &n, &ddata, &pace_ns };
	t0 = cuflag_now_ns();
	launch(&o.x, o.x.stream, 1, 1, args);
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t idle_since = cuflag_now_ns();
	while (got < n) {
		if (armed < n && armed - got < 2 * CHUNK) {
			uint32_t k = n - armed < CHUNK ? n - armed : CHUNK;
			CHECK_RC(cuflag_slot_arm_many(s, k, &next));
			CHECK_MSG(next == first + armed, "arm_many gave %u, not %u", next,
				  first + armed);
			armed += k;
		}
		/* Short polls, and a consume after each (a timeout too): a consume
		 * that finds the daemon gone resumes with the next one. */
		if (poll(&p, 1, 100) < 0 || cuflag_slot_consume(s, &v)) {
			CHECK_MSG(cuflag_now_ns() - idle_since < WAKE_MS * 1000000ull,
				  "no completion for %d ms: %llu of %u counted, flag at +%u",
				  WAKE_MS, (unsigned long long)got, n, flag_now(s) - first);
			continue;
		}
		idle_since = cuflag_now_ns();
		got += v;
		wakes++;
		CHECK_MSG(got <= armed, "counted %llu, armed %u", (unsigned long long)got, armed);
		uint32_t last = first + (uint32_t)got - 1;
		CHECK((int32_t)(flag_now(s) - last) >= 0);
		uint32_t seen = __atomic_load_n(&data[last % 64], __ATOMIC_RELAXED);
		CHECK_MSG((int32_t)(seen - last) >= 0, "value +%u woke with data +%u", last - first,
			  seen - first);
		if (ask_fd >= 0 && !asked && got >= n / 4) {
			char b = 'r';
			CHECK(write(ask_fd, &b, 1) == 1);
			CHECK(read(done_fd, &b, 1) == 1);
			f_at_restart = flag_now(s);
			asked = 1;
		}
	}
	t1 = cuflag_now_ns();
	CU(cu.cuStreamSynchronize(o.x.st));
	expect_quiet(s);
	CHECK(flag_now(s) == first + n - 1);
	CHECK_RC(cuflag_slot_wait(s, first + n - 1, 0));
	if (ask_fd >= 0) {
		CHECK_MSG(f_at_restart != first + n - 1,
			  "the kernel had finished when the new daemon came up: nothing proven");
		CHECK(devptr(s) == o.dflag); /* the region is the client's: same address */
		printf("PASS restart: %u values from one kernel across a SIGKILLed daemon, exact "
		       "(the kernel at +%u of %u when the new daemon listened; %llu wakes)\n",
		       n, f_at_restart - first, n, (unsigned long long)wakes);
	} else {
		printf("PASS stream: %u values from one kernel thread counted exactly, %llu wakes, "
		       "%.3f s = %.2f M values/s (data before each value seen at every wake)\n",
		       n, (unsigned long long)wakes, (double)(t1 - t0) / 1e9,
		       n / ((double)(t1 - t0) / 1e9) / 1e6);
	}
	cu.cuMemFreeHost(data);
	one_close(&o);
	return 0;
}

static int stream_child(void)
{
	return stream_run(1000000, 0, -1, -1);
}

/* ---- payload: each wake sees the whole block's payload ---- */

static int payload_child(void)
{
	enum { N = 20000 };
	struct one o;
	CUdeviceptr dbuf;
	uint32_t *buf, first, n = N;
	uint64_t timeout = 5000000000ull, t0, v;
	int rc = one_open(&o);
	cuflag_slot *s = o.s;

	if (rc)
		return rc;
	/* [0..63] payload, [64] ack, [65] stuck */
	buf = hostmem(128 * sizeof(uint32_t), &dbuf);
	CUdeviceptr dpay = dbuf, dack = dbuf + 64 * 4, dstuck = dbuf + 65 * 4;
	CHECK_RC(cuflag_slot_arm_many(s, N, &first));
	buf[64] = first - 1;
	void *args[] = { &o.dflag, &first, &n, &dpay, &dack, &dstuck, &timeout };
	t0 = cuflag_now_ns();
	launch(&o.x, o.x.payload, 1, 64, args);
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	for (uint32_t k = 0; k < N; k++) {
		uint32_t want = first + k;
		v = 0;
		do
			CHECK_MSG(poll(&p, 1, WAKE_MS) == 1, "no wake for value +%u (kernel stuck at %u)",
				  k, buf[65]);
		while (cuflag_slot_consume(s, &v) == -EAGAIN);
		CHECK_MSG(v == 1, "a wake carried %llu values, one was outstanding",
			  (unsigned long long)v);
		/* No flag read before: the eventfd wake alone orders these loads. */
		for (uint32_t j = 0; j < 64; j++)
			CHECK_MSG(__atomic_load_n(&buf[j], __ATOMIC_RELAXED) == want * 64u + j,
				  "value +%u: payload word %u is %u, not %u", k, j, buf[j],
				  want * 64u + j);
		__atomic_store_n(&buf[64], want, __ATOMIC_RELEASE);
	}
	CU(cu.cuStreamSynchronize(o.x.st));
	CHECK_MSG(buf[65] == 0, "the kernel gave up waiting for ack %u", buf[65]);
	expect_quiet(s);
	printf("PASS payload: %u signals from a block, each wake saw its 64-word payload, "
	       "%.1f us per round trip\n",
	       N, (double)(cuflag_now_ns() - t0) / 1e3 / N);
	cu.cuMemFreeHost(buf);
	one_close(&o);
	return 0;
}

/* ---- advance: 128 x 256 threads each complete one value ---- */

static int advance_child(void)
{
	enum { BLOCKS = 128, THREADS = 256, ROUNDS = 10, PER = BLOCKS * THREADS };
	struct one o;
	CUdeviceptr ddata;
	uint32_t *data, first, prev = 0;
	int rc = one_open(&o);
	cuflag_slot *s = o.s;

	if (rc)
		return rc;
	data = hostmem(PER * sizeof(uint32_t), &ddata);
	/* With no context current in the thread there is no address to give. */
	CU(cu.cuCtxSetCurrent(NULL));
	CUdeviceptr none = 0;
	CHECK(cuflag_cuda_slot_devptr(s, &none) == -EINVAL && none == 0);
	CU(cu.cuCtxSetCurrent(o.x.g.ctx));
	for (int r = 0; r < ROUNDS; r++) {
		uint64_t got = 0, v;
		struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
		CHECK_RC(cuflag_slot_arm_many(s, PER, &first));
		CHECK(r == 0 || first == prev + 1);
		void *args[] = { &o.dflag, &ddata };
		launch(&o.x, o.x.advance, BLOCKS, THREADS, args);
		/* The kernel first (the scanner counts meanwhile): a flag short of
		 * the last value would mean the device's atomics to host memory
		 * lost updates, which no count can make up for. */
		CU(cu.cuStreamSynchronize(o.x.st));
		CHECK_MSG(flag_now(s) == first + PER - 1,
			  "round %d: %d advances moved the flag by %u: the device's atomics to "
			  "host memory are not atomic here", r, PER, flag_now(s) - (first - 1));
		while (got < PER) {
			CHECK_MSG(poll(&p, 1, WAKE_MS) == 1, "round %d: %llu of %d counted", r,
				  (unsigned long long)got, PER);
			if (cuflag_slot_consume(s, &v) == 0)
				got += v;
			CHECK_MSG(got <= PER, "round %d: %llu counted, %d armed", r,
				  (unsigned long long)got, PER);
		}
		prev = first + PER - 1;
		expect_quiet(s);
	}
	for (int i = 0; i < PER; i++)
		CHECK_MSG(data[i] == ROUNDS, "thread %d ran %u times", i, data[i]);
	printf("PASS advance: %d rounds of %d blocks x %d threads advancing once, each "
	       "round exact\n", ROUNDS, BLOCKS, THREADS);
	cu.cuMemFreeHost(data);
	one_close(&o);
	return 0;
}

/* ---- group: 64 slots, 64 blocks, one group fd ---- */

static int group_child(void)
{
	enum { S = 64, N = 20000 };
	struct cuflag_completion rec[128];
	cuflag_slot *s[S];
	uint64_t per[S] = { 0 }, got = 0, records = 0;
	struct dev x;
	cuflag_client *c;
	cuflag_group *g;
	CUdeviceptr dtab;
	uint32_t n = N;
	int rc = dev_open(&x);

	if (rc)
		return rc;
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_group_create(c, &g));
	CHECK_RC(cuflag_group_slots_acquire(g, S, s));
	/* [0..S) flag addresses (u64), then S first values (u32). */
	uint64_t *tab = hostmem(S * 8 + S * 4, &dtab);
	uint32_t *firsts = (uint32_t *)(tab + S);
	for (int i = 0; i < S; i++) {
		tab[i] = devptr(s[i]);
		CHECK_RC(cuflag_slot_arm_many(s[i], N, &firsts[i]));
	}
	CUdeviceptr dflags = dtab, dfirsts = dtab + S * 8;
	void *args[] = { &dflags, &dfirsts, &n };
	launch(&x, x.group, S, 32, args);
	struct pollfd p = { .fd = cuflag_group_fd(g), .events = POLLIN };
	while (got < (uint64_t)S * N) {
		CHECK_MSG(poll(&p, 1, WAKE_MS) == 1, "%llu of %d counted", (unsigned long long)got,
			  S * N);
		int k = cuflag_group_drain(g, rec, 128);
		CHECK(k >= 0);
		for (int j = 0; j < k; j++) {
			int i = 0;
			while (i < S && s[i] != rec[j].slot)
				i++;
			CHECK(i < S);
			per[i] += rec[j].completions;
			CHECK_MSG(per[i] <= N, "slot %d: %llu counted, %d armed", i,
				  (unsigned long long)per[i], N);
			got += rec[j].completions;
			records++;
		}
	}
	CU(cu.cuStreamSynchronize(x.st));
	if (poll(&p, 1, 50) == 1)
		CHECK(cuflag_group_drain(g, rec, 128) == 0);
	for (int i = 0; i < S; i++) {
		CHECK(per[i] == N);
		CHECK(flag_now(s[i]) == firsts[i] + N - 1);
	}
	printf("PASS group: %d slots of one group signalled from %d blocks, %d values each, "
	       "exact through the group's fd (%llu records)\n",
	       S, S, N, (unsigned long long)records);
	cu.cuMemFreeHost(tab);
	for (int i = 0; i < S; i++)
		cuflag_slot_release(s[i]);
	CHECK_RC(cuflag_group_destroy(g));
	cuflag_disconnect(c);
	dev_close(&x);
	return 0;
}

/* ---- the parent ---- */

static int child_status(pid_t pid)
{
	int st;

	CHECK(waitpid(pid, &st, 0) == pid);
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	fprintf(stderr, "%s: the child died of signal %d\n", scenario, WTERMSIG(st));
	return 1;
}

static int run_child(int (*fn)(void))
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
		_exit(fn());
	}
	return child_status(pid);
}

/* The child asks for the restart through one pipe; the parent kills the
 * daemon, starts the next on the same socket, and answers through the other. */
static int test_restart(void)
{
	int ask[2], done[2];
	struct daemon_proc gone;
	struct pollfd p;
	pid_t pid;
	char b;

	CHECK(pipe(ask) == 0 && pipe(done) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(ask[0]);
		close(done[1]);
		_exit(stream_run(2000000, 1000, ask[1], done[0]));
	}
	close(ask[1]);
	close(done[0]);
	p = (struct pollfd){ .fd = ask[0], .events = POLLIN };
	if (poll(&p, 1, 120000) == 1 && read(ask[0], &b, 1) == 1) {
		CHECK(kill(d.pid, SIGKILL) == 0);
		CHECK(waitpid(d.pid, NULL, 0) == d.pid);
		gone = d;
		daemon_start_at(&d, gone.dir, gone.sock, 0, NULL);
		CHECK(write(done[1], &b, 1) == 1);
	}
	close(ask[0]);
	close(done[1]);
	return child_status(pid);
}

static int probe_child(void)
{
	return gpu_load();
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*child)(void);
		int (*parent)(void);
	} tests[] = {
		{ "stream", stream_child, NULL },   { "payload", payload_child, NULL },
		{ "advance", advance_child, NULL }, { "group", group_child, NULL },
		{ "restart", NULL, test_restart },
	};
	const char *extra[16];
	int n = 0, rc;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: test-devsig SCENARIO [cuflagd options]\n");
		return 2;
	}
	scenario = argv[1];
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (strcmp(argv[1], tests[i].name))
			continue;
		for (int k = 2; k < argc && n < 15; k++)
			extra[n++] = argv[k];
		extra[n] = NULL;
		if (run_child(probe_child) == GPU_EXIT_SKIP) {
			printf("SKIP %s: no GPU here\n", argv[1]);
			return GPU_EXIT_SKIP;
		}
		daemon_start(&d, 0, extra);
		rc = tests[i].child ? run_child(tests[i].child) : tests[i].parent();
		if (rc && rc != GPU_EXIT_SKIP)
			printf("FAIL %s: exit status %d (the check that failed is above)\n", argv[1],
			       rc);
		CHECK(daemon_stop(&d) == 0);
		return rc;
	}
	fprintf(stderr, "unknown scenario %s\n", argv[1]);
	return 2;
}
