/* SPDX-License-Identifier: MIT */
/*
 * cuflagd and its service manager: READY=1 once it serves, STATUS= with its
 * load, STOPPING=1 on the way out; WATCHDOG=1 pings while the scanner makes
 * passes (busy) or sits parked (idle), none while it is frozen (the test
 * hook stands in for a hung scanner), again once it is released; and no
 * pings at all when WATCHDOG_PID names another process.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "ops.h"

/* Pings are due every WATCHDOG_USEC / 2 = 100 ms; a second holds several. */
#define WATCHDOG_USEC "200000"
#define WINDOW_MS 1000
#define MIN_PINGS 3

struct daemon {
	struct child proc;
	char dir[64];
	char sock[100];
};

static void start(struct daemon *d, struct notify_listener *n, const char *const *env,
		  int watchdog_pid)
{
	const char *argv[] = { getenv("CUFLAGD"), "--socket", d->sock, "--test-hooks", NULL };
	char msg[512];

	CHECK(argv[0] != NULL);
	private_dir(d->dir, sizeof(d->dir));
	snprintf(d->sock, sizeof(d->sock), "%s/cuflagd.sock", d->dir);
	child_start(&d->proc, argv, env, watchdog_pid);
	if (!notify_wait_for(n, "READY=1", msg, sizeof(msg), 5000)) {
		child_log_wait(&d->proc, "\x01", 0);
		CHECK_FAIL("no READY=1; daemon said:\n%s", d->proc.log);
	}
}

static void stop(struct daemon *d, struct notify_listener *n)
{
	char msg[512];

	CHECK(child_stop(&d->proc) == 0);
	CHECK(notify_wait_for(n, "STOPPING=1", msg, sizeof(msg), 1000));
	rmdir(d->dir);
}

/* READY means serving; STATUS= tells the clients and armed slots it has. */
static void test_ready_status(void)
{
	struct notify_listener n;
	struct daemon d;
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t t;
	char msg[512];
	int seen = 0;

	notify_listen(&n);
	const char *env[] = { n.env, NULL };
	start(&d, &n, env, 0);
	/* No wait between READY and the first request: ready means serving. */
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm(s, &t));
	/* STATUS= comes every 2 s; the one after the arm counts it. */
	for (int i = 0; i < 4 && !seen; i++) {
		CHECK(notify_wait_for(&n, "STATUS=", msg, sizeof(msg), 3000));
		seen = strstr(msg, "STATUS=1 clients, 1 armed slots") != NULL;
	}
	if (!seen)
		fprintf(stderr, "last status: %s\n", msg);
	CHECK(seen);
	sim_store(cuflag_slot_flag(s), t);
	CHECK_RC(cuflag_slot_wait(s, t, 2000));
	cuflag_disconnect(c);
	stop(&d, &n);
	notify_close(&n);
}

static void test_watchdog(void)
{
	struct notify_listener n;
	struct daemon d;
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t t;
	int pings;

	notify_listen(&n);
	const char *env[] = { n.env, "WATCHDOG_USEC=" WATCHDOG_USEC, NULL };
	start(&d, &n, env, 1);

	/* Idle: the scanner is parked, which is alive. */
	pings = notify_count(&n, "WATCHDOG=1", WINDOW_MS);
	fprintf(stderr, "idle: %d pings\n", pings);
	CHECK(pings >= MIN_PINGS);

	/* Busy: an armed slot keeps the scanner making passes. */
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm(s, &t));
	pings = notify_count(&n, "WATCHDOG=1", WINDOW_MS);
	fprintf(stderr, "busy: %d pings\n", pings);
	CHECK(pings >= MIN_PINGS);

	/* Frozen: after the check that may still see the last pass, silence. */
	CHECK(kill(d.proc.pid, SIGUSR1) == 0);
	CHECK(child_log_wait(&d.proc, "scanner frozen", 2000));
	notify_count(&n, "WATCHDOG=1", 400);
	pings = notify_count(&n, "WATCHDOG=1", WINDOW_MS);
	fprintf(stderr, "frozen: %d pings\n", pings);
	CHECK(pings == 0);
	CHECK(child_log_wait(&d.proc, "watchdog not pinged", 1000));

	/* Released: pings again, and the armed slot completes. */
	CHECK(kill(d.proc.pid, SIGUSR1) == 0);
	CHECK(child_log_wait(&d.proc, "scanner released", 2000));
	pings = notify_count(&n, "WATCHDOG=1", WINDOW_MS);
	fprintf(stderr, "released: %d pings\n", pings);
	CHECK(pings >= MIN_PINGS);
	sim_store(cuflag_slot_flag(s), t);
	CHECK_RC(cuflag_slot_wait(s, t, 2000));

	cuflag_disconnect(c);
	stop(&d, &n);
	notify_close(&n);
}

/* The watchdog is meant for WATCHDOG_PID only: another process never pings. */
static void test_watchdog_other_pid(void)
{
	struct notify_listener n;
	struct daemon d;
	char pid_env[64];

	notify_listen(&n);
	snprintf(pid_env, sizeof(pid_env), "WATCHDOG_PID=%d", (int)getpid());
	const char *env[] = { n.env, "WATCHDOG_USEC=" WATCHDOG_USEC, pid_env, NULL };
	start(&d, &n, env, 0);
	CHECK(notify_count(&n, "WATCHDOG=1", 500) == 0);
	stop(&d, &n);
	notify_close(&n);
}

int main(void)
{
	test_ready_status();
	test_watchdog();
	test_watchdog_other_pid();
	printf("notify: ok\n");
	return 0;
}
