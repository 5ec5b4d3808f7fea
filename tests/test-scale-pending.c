/* SPDX-License-Identifier: MIT */
/*
 * About 200 000 slots pending at once, through the real daemon: 196
 * sessions of 1024 grouped slots each, every slot armed and none landing.
 * Once they have been pending long enough to be cold (read by the sweep,
 * not by every pass: daemon/policy/cold-sweep.h), the test checks that
 *
 * - a slot of another session, completed once a millisecond, still wakes;
 * - a random subset completed late (some while young, some after >= 1 s
 *   pending) is signalled, each completion once, within a generous bound;
 * - once every flag lands, every slot has been counted exactly once and
 *   nothing more arrives.
 *
 * The figures (wake and notice latencies) are printed, not held to tight
 * targets: those are the attack suite's and the bench's, on a quiet machine.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "fd-util.h"
#include "harness.h"
#include "percentile.h"
#include "slowdown.h"

#define SESSIONS 196
#define SLOTS 1024
#define TOTAL (SESSIONS * SLOTS)
#define COLD_MS 200     /* pending this long before anything completes: cold */
#define OLD_MS 1000     /* the second half of the late ones: pending at least this */
#define BATCH 16        /* slots completed together */
#define BATCHES 64      /* batches of each half */
#define HOT_ROUNDS 500  /* the other session's completions while all are pending */
/* No completion may take longer to be signalled: a bound on "lost", not a
 * speed target, so a sanitizer build (whose scanner reads 200 000 slots
 * many times slower) gets its slowdown's worth more. */
#define BOUND_MS (1000 * CUFLAG_SLOWDOWN)
#define FDS_NEEDED (SESSIONS * 8 + 256)

static struct daemon_proc d;
static cuflag_client *cl[SESSIONS];
static cuflag_group *grp[SESSIONS];
static cuflag_slot *slot[TOTAL];
static uint32_t target[TOTAL];
static uint8_t count[TOTAL];
static uint8_t expected[TOTAL]; /* completed by the test, not yet counted */
static int ep = -1;

static unsigned rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (unsigned)(*s >> 11);
}

/* Drain every readable group, counting; the completions counted. */
static uint64_t drain_ready(int timeout_ms)
{
	struct epoll_event ev[64];
	struct cuflag_completion rec[256];
	uint64_t got = 0;
	int k = epoll_wait(ep, ev, 64, timeout_ms);

	CHECK(k >= 0 || errno == EINTR);
	for (int j = 0; j < k; j++) {
		int n;
		while ((n = cuflag_group_drain(grp[ev[j].data.u32], rec, 256)) > 0)
			for (int r = 0; r < n; r++) {
				uintptr_t i = (uintptr_t)cuflag_slot_data(rec[r].slot);
				CHECK(i < TOTAL);
				CHECK_MSG(rec[r].completions == 1 && expected[i],
					  "slot %zu of session %zu: %llu completions, %s", (size_t)i % SLOTS,
					  (size_t)i / SLOTS, (unsigned long long)rec[r].completions,
					  expected[i] ? "completed" : "never completed");
				expected[i] = 0;
				count[i]++;
				got += rec[r].completions;
			}
		CHECK(n == 0);
	}
	return got;
}

static int all_pending(void *arg)
{
	struct cuflag_msg_stats_reply st;

	(void)arg;
	daemon_stats(&d, &st);
	return st.pending >= TOTAL;
}

static int none_pending(void *arg)
{
	struct cuflag_msg_stats_reply st;

	(void)arg;
	daemon_stats(&d, &st);
	return st.pending == 0;
}

static void print_ms(const char *what, double *v, size_t n)
{
	samples_sort(v, n);
	printf("%s: %zu, p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", what, n,
	       samples_percentile(v, n, 50), samples_percentile(v, n, 99), v[n ? n - 1 : 0]);
}

/* The other session's slot, completed HOT_ROUNDS times a ms apart. */
static void hot_rounds(cuflag_slot *s)
{
	static double ms[HOT_ROUNDS];
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };

	for (int r = 0; r < HOT_ROUNDS; r++) {
		uint32_t t;
		uint64_t t0, got;
		CHECK_RC(cuflag_slot_arm(s, &t));
		usleep(1000);
		t0 = cuflag_now_ns();
		sim_store(cuflag_slot_flag(s), t);
		CHECK_MSG(poll(&p, 1, BOUND_MS) == 1, "round %d: no wake within %d ms", r,
			  BOUND_MS);
		ms[r] = (double)(cuflag_now_ns() - t0) / 1e6;
		CHECK_RC(cuflag_slot_consume(s, &got));
		CHECK(got == 1);
	}
	print_ms("another session's slot, wake while all are pending", ms, HOT_ROUNDS);
}

/* BATCHES batches of BATCH slots not completed yet, each batch's flags
 * landing together; every one signalled within BOUND_MS. */
static void late_half(const char *what, uint64_t *rng, uint64_t armed_at)
{
	static double ms[BATCHES * BATCH];
	uint64_t age = cuflag_now_ns() - armed_at;
	size_t n = 0;

	for (int b = 0; b < BATCHES; b++) {
		uint32_t pick[BATCH];
		uint64_t t0, got = 0;
		for (int j = 0; j < BATCH; j++) {
			uint32_t i;
			do
				i = rnd(rng) % TOTAL;
			while (count[i] || expected[i]);
			expected[i] = 1;
			pick[j] = i;
		}
		usleep(rnd(rng) % 3000); /* anywhere in the sweep's period */
		t0 = cuflag_now_ns();
		for (int j = 0; j < BATCH; j++)
			sim_store(cuflag_slot_flag(slot[pick[j]]), target[pick[j]]);
		while (got < BATCH) {
			uint64_t now = cuflag_now_ns(), more;
			CHECK_MSG(now - t0 < BOUND_MS * 1000000ull,
				  "%s: %llu of %d completions signalled after %d ms", what,
				  (unsigned long long)got, BATCH, BOUND_MS);
			more = drain_ready(BOUND_MS);
			now = cuflag_now_ns();
			for (uint64_t k = 0; k < more; k++)
				ms[n++] = (double)(now - t0) / 1e6;
			got += more;
		}
		CHECK(got == BATCH);
	}
	printf("%s (pending %.2f s and more):\n", what, (double)age / 1e9);
	print_ms("  notice after the flag landed", ms, n);
}

int main(void)
{
	const char *args[] = { "--max-clients", "256", "--max-clients-per-uid", "256",
			       "--max-pending-per-uid", "262144", NULL };
	struct rlimit rl;
	cuflag_client *hc;
	cuflag_slot *hot;
	uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid(), t0, armed_at, left;
	int fds0;

	setvbuf(stdout, NULL, _IONBF, 0);
	/* Before the daemon starts: it inherits the limit. */
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < FDS_NEEDED) {
		printf("RLIMIT_NOFILE hard limit %llu < %d: skipped\n",
		       (unsigned long long)rl.rlim_max, FDS_NEEDED);
		return 77;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < FDS_NEEDED) {
		rl.rlim_cur = FDS_NEEDED;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	}
	fds0 = self_fd_count();
	daemon_start(&d, 0, args);
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);

	t0 = cuflag_now_ns();
	for (uint32_t k = 0; k < SESSIONS; k++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = k };
		CHECK_RC(cuflag_connect(d.sock, &cl[k]));
		CHECK_RC(cuflag_group_create(cl[k], &grp[k]));
		CHECK_RC(cuflag_group_slots_acquire(grp[k], SLOTS, &slot[k * SLOTS]));
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, cuflag_group_fd(grp[k]), &ev) == 0);
		for (uint32_t i = k * SLOTS; i < (k + 1) * SLOTS; i++) {
			CHECK_RC(cuflag_slot_set_data(slot[i], (void *)(uintptr_t)i));
			CHECK_RC(cuflag_slot_arm(slot[i], &target[i]));
		}
	}
	CHECK_RC(cuflag_connect(d.sock, &hc));
	CHECK_RC(cuflag_slot_acquire(hc, &hot));
	CHECK_MSG(wait_until(all_pending, NULL, 60000), "the daemon never held %d pending", TOTAL);
	armed_at = cuflag_now_ns();
	printf("%d sessions x %d grouped slots armed and pending in %.2f s\n", SESSIONS, SLOTS,
	       (double)(armed_at - t0) / 1e9);
	usleep(COLD_MS * 1000);
	CHECK_MSG(drain_ready(0) == 0, "a completion signalled before any flag landed");

	late_half("late completions", &rng, armed_at);
	hot_rounds(hot);
	while (cuflag_now_ns() - armed_at < OLD_MS * 1000000ull)
		usleep(10000);
	late_half("completions after >= 1 s pending", &rng, armed_at);
	hot_rounds(hot);

	/* Every other flag lands: each slot counted once, nothing more. */
	left = 0;
	for (uint32_t i = 0; i < TOTAL; i++)
		if (!count[i]) {
			expected[i] = 1;
			left++;
		}
	t0 = cuflag_now_ns();
	for (uint32_t i = 0; i < TOTAL; i++)
		if (!count[i])
			sim_store(cuflag_slot_flag(slot[i]), target[i]);
	while (left) {
		uint64_t got = drain_ready(1000);
		CHECK_MSG(got || cuflag_now_ns() - t0 < 30000000000ull,
			  "%llu completions never signalled", (unsigned long long)left);
		CHECK(got <= left);
		left -= got;
	}
	printf("the other %d landed at once: all signalled in %.3f s\n",
	       TOTAL - 2 * BATCHES * BATCH, (double)(cuflag_now_ns() - t0) / 1e9);
	CHECK_MSG(drain_ready(50) == 0, "a completion signalled twice");
	for (uint32_t i = 0; i < TOTAL; i++)
		CHECK_MSG(count[i] == 1, "slot %u of session %u counted %u times", i % SLOTS,
			  i / SLOTS, count[i]);
	CHECK(wait_until(none_pending, NULL, 5000));
	printf("every one of %d completions counted exactly once\n", TOTAL);

	cuflag_slot_release(hot);
	cuflag_disconnect(hc);
	for (uint32_t k = 0; k < SESSIONS; k++)
		cuflag_disconnect(cl[k]);
	ep = safe_close(ep);
	CHECK(daemon_stop(&d) == 0);
	CHECK_MSG(self_fd_count() == fds0, "fds: %d before, %d after", fds0, self_fd_count());
	return 0;
}
