/* SPDX-License-Identifier: MIT */
/*
 * Lifecycles through the real daemon: a client killed while armed is fully
 * reclaimed and nobody else notices; an idle daemon parks and costs almost no
 * CPU, and wakes at once for the next arm; 100 000 arm/complete cycles with
 * the scanner parking between them lose no wake-up; a waiter outlives the
 * daemon.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "slowdown.h"
#include "test-runner.h"

/* One arm, one store, one eventfd signal of exactly 1. */
static void cycle(cuflag_slot *s)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t n = 0;
	uint32_t t;

	CHECK_RC(cuflag_slot_arm(s, &t));
	sim_store(cuflag_slot_flag(s), t);
	CHECK(poll(&p, 1, 5000) == 1); /* 5 s without the signal: a lost wake-up */
	CHECK_RC(cuflag_slot_consume(s, &n));
	CHECK(n == 1);
}

struct reclaimed {
	const struct daemon_proc *d;
	int fds, maps;
};

static int is_reclaimed(void *arg)
{
	struct reclaimed *r = arg;
	return daemon_fd_count(r->d) == r->fds && daemon_region_maps(r->d) == r->maps;
}

static int child_armed(void *arg)
{
	struct cuflag_msg_stats_reply st;
	daemon_stats(arg, &st);
	return st.clients == 2 && st.slots == 65 && st.pending == 64;
}

TEST(sigkill_reclaims)
{
	struct daemon_proc d;
	struct cuflag_msg_stats_reply st;
	struct reclaimed base;
	cuflag_client *good;
	cuflag_slot *gs;
	int pipefd[2];
	pid_t child;
	char ok;

	daemon_start(&d, 0, NULL);
	CHECK_RC(cuflag_connect(d.sock, &good));
	CHECK_RC(cuflag_slot_acquire(good, &gs));
	cycle(gs);
	base = (struct reclaimed){ &d, daemon_fd_count_steady(&d), daemon_region_maps(&d) };
	CHECK(base.maps == 1);

	CHECK(pipe(pipefd) == 0);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		cuflag_client *c;
		cuflag_slot *s[64];
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
		CHECK_RC(cuflag_connect(d.sock, &c));
		CHECK_RC(cuflag_slots_acquire(c, 64, s));
		for (int i = 0; i < 64; i++) {
			uint32_t t;
			CHECK_RC(cuflag_slot_arm(s[i], &t));
			CHECK_RC(cuflag_slot_arm(s[i], &t)); /* two in flight, never completed */
		}
		CHECK(write(pipefd[1], "k", 1) == 1);
		for (;;)
			pause();
	}
	CHECK(read(pipefd[0], &ok, 1) == 1);
	/* Its region, wake eventfd and 64 slot eventfds are held now. */
	CHECK(daemon_fd_count(&d) >= base.fds + 64);
	CHECK(daemon_region_maps(&d) == 2);
	/* Its arms are taken by the scanner's next pass. */
	CHECK(wait_until(child_armed, &d, 5000));
	for (int i = 0; i < 100; i++)
		cycle(gs);

	kill(child, SIGKILL);
	CHECK(waitpid(child, NULL, 0) == child);
	CHECK(wait_until(is_reclaimed, &base, 5000));
	daemon_stats(&d, &st);
	CHECK(st.clients == 1 && st.slots == 1 && st.pending == 0);
	/* The other client noticed nothing. */
	for (int i = 0; i < 100; i++)
		cycle(gs);
	close(pipefd[0]);
	close(pipefd[1]);
	cuflag_disconnect(good);
	CHECK(daemon_stop(&d) == 0);
	printf("sigkill: reclaimed to %d fds, %d region\n", base.fds, base.maps);
}

static int scanner_parked(void *arg)
{
	struct cuflag_msg_stats_reply st;
	daemon_stats(arg, &st);
	return st.scanner_state == CUFLAG_SCANNER_PARKED;
}

TEST(idle)
{
	struct daemon_proc d;
	struct cuflag_msg_stats_reply st0, st1;
	cuflag_client *c[4];
	cuflag_slot *s[4][16];
	uint64_t t0, t1;

	daemon_start(&d, 0, NULL);
	for (int i = 0; i < 4; i++) {
		CHECK_RC(cuflag_connect(d.sock, &c[i]));
		CHECK_RC(cuflag_slots_acquire(c[i], 16, s[i]));
	}
	cycle(s[0][0]);
	CHECK(wait_until(scanner_parked, &d, 5000));
	daemon_stats(&d, &st0);
	double ms_per_s = daemon_cpu_share(&d, 1000) * 1000.0;
	printf("idle: %.3f ms CPU per second with 4 clients x 16 slots connected\n", ms_per_s);
	/* A sanitizer's runtime keeps threads of its own in the daemon (TSan's
	 * wakes several times a second): their CPU is the build's, not the
	 * parked scanner's. */
	CHECK(ms_per_s < 10.0 * CUFLAG_SLOWDOWN);
	/* Parked, and the next arm is served at once. */
	t0 = cuflag_now_ns();
	cycle(s[3][15]);
	t1 = cuflag_now_ns();
	daemon_stats(&d, &st1);
	CHECK(st1.parks >= st0.parks);
	printf("idle: first completion after parking took %.1f us\n", (double)(t1 - t0) / 1e3);
	for (int i = 0; i < 4; i++)
		cuflag_disconnect(c[i]);
	CHECK(daemon_stop(&d) == 0);
}

TEST(no_lost_wakeup)
{
	const char *args[] = { "--spin-us", "0", NULL };
	struct cuflag_msg_stats_reply st;
	struct daemon_proc d;
	cuflag_client *c;
	cuflag_slot *s;
	const int cycles = 100000;
	uint64_t t0 = cuflag_now_ns();

	daemon_start(&d, 0, args);
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	for (int i = 0; i < cycles; i++) {
		cycle(s);
		/* Every other cycle, give the scanner time to park first; the
		 * rest race it on its way to the park. */
		if (i & 1)
			usleep(20);
	}
	daemon_stats(&d, &st);
	fprintf(stderr, "no-lost-wakeup: %d cycles in %.2f s, scanner parked %llu times\n",
		cycles, (double)(cuflag_now_ns() - t0) / 1e9, (unsigned long long)st.parks);
	/* The scanner really parked between cycles (not always: a cycle can be
	 * quicker than its way to the park). */
	CHECK(st.parks >= (uint64_t)cycles / 4);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
}

/* A waiter whose daemon goes away still sees its value land. */
TEST(daemon_gone)
{
	struct daemon_proc d;
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t t;

	daemon_start(&d, 0, NULL);
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm(s, &t));
	struct pollfd hup = { .fd = cuflag_client_fd(c), .events = POLLRDHUP };
	CHECK(poll(&hup, 1, 0) == 0);
	kill(d.pid, SIGKILL);
	CHECK(waitpid(d.pid, NULL, 0) == d.pid);
	/* An event loop learns it from the connection fd. */
	CHECK(poll(&hup, 1, 2000) == 1 && (hup.revents & (POLLRDHUP | POLLHUP)));
	CHECK(cuflag_slot_wait(s, t, 50) == -ETIMEDOUT);
	sim_store(cuflag_slot_flag(s), t);
	CHECK_RC(cuflag_slot_wait(s, t, 2000));
	CHECK(cuflag_slot_acquire(c, &s) != 0); /* requests fail cleanly */
	cuflag_disconnect(c);
	unlink(d.sock);
	rmdir(d.dir);
}

int main(int argc, char **argv)
{
	const struct test_env env = { 0 }; /* each test starts a daemon of its own */
	int rc;

	setvbuf(stdout, NULL, _IONBF, 0);
	rc = test_run(&env, argc, argv);
	if (rc == 0)
		printf("lifecycle: ok\n");
	return rc;
}
