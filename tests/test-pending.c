/* SPDX-License-Identifier: MIT */
/*
 * Slots armed on work that does not complete for a long time: after
 * --pending-spin-ms without progress the scanner stops spinning and looks
 * every --pending-poll-us, parked in between. Checked here: its CPU use while
 * a slot stays pending; the late completion still arrives, exactly once; an
 * arm made meanwhile wakes it at once, and its completion is seen promptly;
 * many pending slots across clients complete after a long stall, none lost.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "cuflag-proto.h"
#include "harness.h"

static int none_pending(void *arg)
{
	struct cuflag_msg_stats_reply st;

	daemon_stats(arg, &st);
	return st.pending == 0;
}

/* us from a store to the eventfd turning readable (aborts after 2 s). */
static double store_to_wake_us(cuflag_slot *s, uint32_t t)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t t0 = cuflag_now_ns();

	sim_store(cuflag_slot_flag(s), t);
	CHECK(poll(&p, 1, 2000) == 1);
	return (double)(cuflag_now_ns() - t0) / 1e3;
}

/*
 * A poll interval longer than the scanner's 2 ms write tick: the tick's
 * signal must not restart the timed park for ever, or a stalled slot's
 * completion would never be seen.
 */
static void long_poll_interval(void)
{
	const char *args[] = { "--pending-spin-ms", "5", "--pending-poll-us", "5000", NULL };
	struct daemon_proc d;
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t t;
	double us;

	daemon_start(&d, 0, args);
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm(s, &t));
	usleep(50000);
	us = store_to_wake_us(s, t);
	printf("pending: with a 5 ms poll interval, a completion after a stall took %.1f us\n",
	       us);
	/* One interval and a slow wake-up, not the many a restarted wait took. */
	CHECK(us < 100000);
	CHECK(consume_blocking(s) == 1);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
}

/* The user that share_full() arms as: root's share has no limit. */
#define SHARE_UID 60005

/* As share_full()'s user: 8 slots armed, a byte to the parent, then once it
 * writes one back, the flags land and each completes exactly once. Then the
 * flags wound back and the slots freed: a byte to the parent; once it
 * writes one back, the flags land again and the slots retire (allocated
 * again, all 8). */
static int share_client(const char *sock, int ready, int go)
{
	cuflag_client *c;
	cuflag_slot *s[8];
	volatile uint32_t *flag[8];
	uint32_t t[8];
	char b = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed check of the parent's ends it */
	if (getuid() == 0 && become_user(SHARE_UID))
		return 2;
	CHECK_RC(cuflag_connect(sock, &c));
	CHECK_RC(cuflag_slots_acquire(c, 8, s));
	for (int i = 0; i < 8; i++)
		CHECK_RC(cuflag_slot_arm(s[i], &t[i]));
	CHECK(write(ready, &b, 1) == 1 && read(go, &b, 1) == 1);
	for (int i = 0; i < 8; i++)
		sim_store(cuflag_slot_flag(s[i]), t[i]);
	for (int i = 0; i < 8; i++)
		CHECK(consume_blocking(s[i]) == 1);
	for (int i = 0; i < 8; i++) {
		flag[i] = cuflag_slot_flag(s[i]);
		sim_store(flag[i], t[i] - 1);
		cuflag_slot_release(s[i]);
	}
	CHECK(write(ready, &b, 1) == 1 && read(go, &b, 1) == 1);
	for (int i = 0; i < 8; i++)
		sim_store(flag[i], t[i]);
	/* Waits (parked in the daemon) while freed slots still retire. */
	CHECK_RC(cuflag_slots_acquire(c, 8, s));
	cuflag_disconnect(c);
	return 0;
}

/*
 * One user's arms beyond --max-pending-per-uid wait in its queue: its
 * pending count stays at the limit, the scanner does not spin on arms it
 * cannot take (it used to: a queue with arms in it kept it from blocking),
 * and once the flags land every arm is taken and completed exactly once.
 */
static void share_full(void)
{
	const char *args[] = { "--max-pending-per-uid", "4", NULL };
	struct cuflag_msg_stats_reply st;
	struct daemon_proc d;
	int ready[2], go[2], status;
	uint32_t pending, in_flight, slots;
	double share;
	pid_t pid;
	char b = 0;

	daemon_start(&d, 0, args);
	/* The user reaches the socket (mode 0660, group root: it keeps gid 0). */
	CHECK(getuid() != 0 || chmod(d.dir, 0711) == 0);
	CHECK(pipe(ready) == 0 && pipe(go) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(share_client(d.sock, ready[1], go[0]));
	close(ready[1]);
	close(go[0]);
	CHECK(read(ready[0], &b, 1) == 1);
	usleep(100000);
	share = daemon_cpu_share(&d, 500);
	daemon_stats(&d, &st);
	printf("pending: 8 arms of a user whose share is 4: %llu pending, %.1f%% of a core\n",
	       (unsigned long long)st.pending, share * 100);
	CHECK(st.pending == 4);
	CHECK(share < 0.2);
	CHECK(write(go[1], &b, 1) == 1);
	/* Freed with their flags wound back: retiring, 4 in the share and 4
	 * waiting; the user's pending count is the share's. */
	CHECK(read(ready[0], &b, 1) == 1);
	usleep(100000);
	daemon_stats(&d, &st);
	CHECK_RC(daemon_user_metrics(d.sock, SHARE_UID, &pending, &in_flight, &slots));
	printf("pending: 8 freed slots retiring, a share of 4: user pending %u, in flight %u, "
	       "%llu in all\n",
	       pending, in_flight, (unsigned long long)st.pending);
	CHECK(pending == 4 && in_flight == 8 && st.pending == 8 && slots == 0);
	CHECK(write(go[1], &b, 1) == 1);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(wait_until(none_pending, &d, 2000));
	close(ready[0]);
	close(go[1]);
	CHECK(daemon_stop(&d) == 0);
}

int main(void)
{
	const char *args[] = { "--pending-spin-ms", "20", "--pending-poll-us", "500", NULL };
	struct cuflag_msg_stats_reply st;
	struct daemon_proc d;
	cuflag_client *c[4];
	cuflag_slot *s[4][16], *quick;
	uint32_t t[4][16], tq, tl;
	double share, us;

	daemon_start(&d, 0, args);
	for (int i = 0; i < 4; i++) {
		CHECK_RC(cuflag_connect(d.sock, &c[i]));
		CHECK_RC(cuflag_slots_acquire(c[i], 16, s[i]));
	}
	CHECK_RC(cuflag_slot_acquire(c[0], &quick));

	/* 64 slots armed, nothing completes: past 20 ms the scanner polls. */
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < 16; k++)
			CHECK_RC(cuflag_slot_arm(s[i][k], &t[i][k]));
	usleep(100000);
	share = daemon_cpu_share(&d, 500);
	daemon_stats(&d, &st);
	printf("pending: %.1f%% of a core with 64 slots pending and none completing\n",
	       share * 100);
	CHECK(st.pending == 64);
	CHECK(share < 0.2);

	/* An arm meanwhile wakes it, and its completion comes at once. */
	CHECK_RC(cuflag_slot_arm(quick, &tq));
	us = store_to_wake_us(quick, tq);
	printf("pending: a new arm's completion during the stall took %.1f us\n", us);
	CHECK(consume_blocking(quick) == 1);

	/* One late completion: seen within the poll interval (bounded loosely:
	 * a loaded machine may be slow to run the daemon at all). */
	usleep(100000);
	us = store_to_wake_us(s[2][7], t[2][7]);
	printf("pending: a completion after a 100 ms stall took %.1f us\n", us);
	CHECK(us < 500000);
	CHECK(consume_blocking(s[2][7]) == 1);

	/* The rest land at once, after a stall: every one counted once. */
	usleep(100000);
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < 16; k++)
			if (!(i == 2 && k == 7))
				sim_store(cuflag_slot_flag(s[i][k]), t[i][k]);
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < 16; k++) {
			uint64_t n;
			if (i == 2 && k == 7) {
				CHECK(cuflag_slot_consume(s[i][k], &n) == -EAGAIN);
				continue;
			}
			CHECK_RC(cuflag_slot_wait(s[i][k], t[i][k], 2000));
			CHECK(consume_blocking(s[i][k]) == 1);
		}
	/* The scanner writes a slot's eventfd before it takes the slot out of its
	 * pending set: the count can reach us a moment before STATS agrees. */
	CHECK(wait_until(none_pending, &d, 2000));

	/* And the next arm after all that is served as fast as ever. */
	CHECK_RC(cuflag_slot_arm(s[0][0], &tl));
	us = store_to_wake_us(s[0][0], tl);
	printf("pending: the next completion took %.1f us\n", us);
	CHECK(consume_blocking(s[0][0]) == 1);

	for (int i = 0; i < 4; i++)
		cuflag_disconnect(c[i]);
	CHECK(daemon_stop(&d) == 0);
	long_poll_interval();
	share_full();
	printf("pending: ok\n");
	return 0;
}
