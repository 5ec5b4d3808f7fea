/* SPDX-License-Identifier: MIT */
/*
 * Restart is invisible: client programs with no restart code in them
 * (resume-soak: 8 processes x 8 threads arming and completing, one thread
 * counting through epoll) carry on across every kind of daemon restart, and
 * every completion is counted exactly once. Then what a client sees when the
 * daemon stays away longer than its resume timeout, and when the daemon that
 * comes back has other settings.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "cuflag/cuflag.h"
#include "harness.h"

static const char *soak_path(void)
{
	const char *p = getenv("RESUME_SOAK");
	CHECK(p);
	return p;
}

/* Run resume-soak against d for seconds, in the background. */
static pid_t soak_start(const struct daemon_proc *d, const char *seconds, const char *procs,
			const char *threads, const char *burst)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		execl(soak_path(), "resume-soak", d->sock, seconds, procs, threads, burst,
		      (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int soak_wait(pid_t pid)
{
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void msleep(unsigned ms)
{
	usleep(ms * 1000u);
}

/* Kill or stop the daemon, then start its successor on the same socket. */
static void restart(struct daemon_proc *d, int sig, const char *const *args)
{
	struct daemon_proc next;

	if (sig == SIGKILL) {
		kill(d->pid, SIGKILL);
		CHECK(waitpid(d->pid, NULL, 0) == d->pid);
	} else {
		CHECK(daemon_stop_keep_dir(d) == 0);
	}
	daemon_start_at(&next, d->dir, d->sock, 0, args);
	*d = next;
}

static void test_restarts(void)
{
	struct daemon_proc d;
	pid_t soak;

	daemon_start(&d, 0, NULL);
	soak = soak_start(&d, "5", "8", "8", "0");
	msleep(1000);
	restart(&d, SIGTERM, NULL);
	msleep(1000);
	restart(&d, SIGKILL, NULL);
	msleep(800);
	/* Away for a while: arms fill the queues, then wait for the next one. */
	kill(d.pid, SIGKILL);
	CHECK(waitpid(d.pid, NULL, 0) == d.pid);
	msleep(600);
	struct daemon_proc gone = d;
	daemon_start_at(&d, gone.dir, gone.sock, 0, NULL);
	CHECK(soak_wait(soak) == 0);
	CHECK(daemon_stop(&d) == 0);
	printf("resume: 8 x 8 threads exact across SIGTERM, SIGKILL and 600 ms away\n");
}

static void test_kill_in_burst(void)
{
	const char *const args[] = { "--slots-per-client", "4096", NULL };
	struct daemon_proc d;
	pid_t soak;

	daemon_start(&d, 0, args);
	/* 2 processes, each with 2000 slots completing at once every 3 ms. */
	soak = soak_start(&d, "4", "2", "4", "2000");
	for (int i = 0; i < 4; i++) {
		msleep(600);
		restart(&d, SIGKILL, args);
	}
	CHECK(soak_wait(soak) == 0);
	CHECK(daemon_stop(&d) == 0);
	printf("resume: 2 x 2000 slots exact across 4 SIGKILLs while signalling\n");
}

/* A daemon away longer than the client's resume timeout: calls that need it
 * fail, then the client resumes once one listens again. */
static void test_away_too_long(void)
{
	struct daemon_proc d;
	cuflag_client *c;
	cuflag_slot *s, *s2;
	uint32_t t = 0, last = 0;
	uint64_t n, got = 0;
	int rc = 0, arms = 0;

	daemon_start(&d, 0, (const char *const[]){ "--queue-size", "16", NULL });
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_client_set_resume_timeout(c, 300));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK(cuflag_client_set_resume_timeout(c, -2) == -EINVAL);
	kill(d.pid, SIGKILL);
	CHECK(waitpid(d.pid, NULL, 0) == d.pid);
	/* 16 arms wait in the queue; the 17th waits 300 ms, then fails. */
	uint64_t t0 = cuflag_now_ns();
	while (!(rc = cuflag_slot_arm(s, &t))) {
		last = t;
		CHECK(++arms <= 16);
	}
	CHECK(rc == -ENOTCONN);
	CHECK(arms == 16);
	CHECK(cuflag_now_ns() - t0 >= 250000000ull);
	CHECK(cuflag_slot_acquire(c, &s2) == -ENOTCONN);
	/* Back: the queued arms are taken and signalled. */
	struct daemon_proc gone = d;
	daemon_start_at(&d, gone.dir, gone.sock, 0,
			(const char *const[]){ "--queue-size", "16", NULL });
	__atomic_store_n(cuflag_slot_flag(s), last, __ATOMIC_RELEASE);
	CHECK_RC(cuflag_slot_acquire(c, &s2)); /* resumes */
	while (got < 16) {
		n = consume_blocking(s);
		got += n;
	}
	CHECK(got == 16);
	CHECK_RC(cuflag_slot_arm(s2, &t));
	__atomic_store_n(cuflag_slot_flag(s2), t, __ATOMIC_RELEASE);
	CHECK(consume_blocking(s2) == 1);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
	printf("resume: away longer than the timeout: -ENOTCONN, then resumed, 16 of 16\n");
}

/* The daemon that comes back takes regions of another size: -ESTALE. */
static void test_other_settings(void)
{
	struct daemon_proc d;
	cuflag_client *c;
	cuflag_slot *s;

	daemon_start(&d, 0, (const char *const[]){ "--slots-per-client", "64", NULL });
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_client_set_resume_timeout(c, 2000));
	restart(&d, SIGTERM, (const char *const[]){ "--slots-per-client", "128", NULL });
	CHECK(cuflag_slot_acquire(c, &s) == -ESTALE);
	CHECK(cuflag_reconnect(c) == -ESTALE);
	cuflag_disconnect(c);
	/* A new connection is served by it. */
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
	printf("resume: a daemon with another layout: -ESTALE, connect anew\n");
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGPIPE, SIG_IGN);
	test_away_too_long();
	test_other_settings();
	test_restarts();
	test_kill_in_burst();
	printf("resume: ok\n");
	return 0;
}
