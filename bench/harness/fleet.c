/* SPDX-License-Identifier: MIT */
/*
 * A throughput run: P worker processes get ready (connected, slots or streams
 * in hand), start together, and each reports its count and its first and
 * last instants; the row gets the total over the span from the first start to
 * the last end, and the daemon's CPU time over the run. Every wait is bounded;
 * a worker that misses its deadline is killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf.h"

int bench_read_full(int fd, void *buf, size_t len, uint64_t deadline)
{
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = cuflag_now_ns();
		ssize_t n;
		if (now >= deadline)
			return -1;
		if (poll(&p, 1, (int)((deadline - now) / 1000000 + 1)) <= 0)
			continue;
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

void bench_reap(pid_t pid, int kill_now)
{
	int st;

	if (kill_now)
		kill(pid, SIGKILL);
	for (int w = 0; w < 1000; w++) {
		if (waitpid(pid, &st, WNOHANG) != 0)
			return;
		bench_sleep_ns(10000000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

void bench_worker_fail(struct bench_worker_result *res, int rc, const char *what)
{
	res->rc = rc ? rc : -EIO;
	snprintf(res->why, sizeof(res->why), "%s%s%s", what, rc ? ": " : "",
		 rc ? strerror(-rc) : "");
}

double bench_fleet_run(struct bench_tput *t, const struct daemon_proc *d, unsigned P,
		       bench_worker_fn fn, void *arg, uint64_t expect, unsigned ready_s,
		       unsigned run_s)
{
	pid_t *pids = calloc(P, sizeof(*pids));
	int *res_fd = calloc(P, sizeof(*res_fd));
	int ready[2] = { -1, -1 }, go[2] = { -1, -1 };
	uint64_t t_start = UINT64_MAX, t_end = 0, total = 0, deadline;
	unsigned started = 0;
	double cpu0 = -1, cpu1 = -1;
	char byte;

	t->procs = P;
	if (!pids || !res_fd || pipe2(ready, O_CLOEXEC) || pipe2(go, O_CLOEXEC)) {
		snprintf(t->why, sizeof(t->why), "setup: %s", strerror(errno));
		t->failed = 1;
		goto out;
	}
	fflush(NULL);
	for (; started < P; started++) {
		int res[2];
		if (pipe2(res, O_CLOEXEC) < 0)
			break;
		pids[started] = fork();
		if (pids[started] < 0) {
			close(res[0]);
			close(res[1]);
			break;
		}
		if (pids[started] == 0) {
			fn(started, ready[1], go[0], res[1], arg);
			_exit(127);
		}
		close(res[1]);
		res_fd[started] = res[0];
	}
	close(ready[1]);
	close(go[0]);
	if (started < P) {
		snprintf(t->why, sizeof(t->why), "cannot start worker processes: %s",
			 strerror(errno));
		t->failed = 1;
	}
	deadline = cuflag_now_ns() + (uint64_t)ready_s * 1000000000u;
	for (unsigned i = 0; i < started && !t->failed; i++)
		if (bench_read_full(ready[0], &byte, 1, deadline)) {
			snprintf(t->why, sizeof(t->why), "a worker did not get ready (see above)");
			t->failed = 1;
		}
	cpu0 = bench_daemon_cpu_ms(d);
	for (unsigned i = 0; i < started && !t->failed; i++)
		if (write(go[1], "g", 1) != 1)
			t->failed = 1;
	close(go[1]);
	deadline = cuflag_now_ns() + (uint64_t)run_s * 1000000000u;
	for (unsigned i = 0; i < started; i++) {
		struct bench_worker_result res;
		if (bench_read_full(res_fd[i], &res, sizeof(res), deadline)) {
			if (!t->failed)
				snprintf(t->why, sizeof(t->why), "worker %u gave no result", i);
			t->failed = 1;
		} else if (res.rc) {
			res.why[sizeof(res.why) - 1] = 0;
			if (!t->failed)
				snprintf(t->why, sizeof(t->why), "worker %u: %.120s", i, res.why);
			t->failed = 1;
		} else {
			total += res.done;
			if (res.t_start < t_start)
				t_start = res.t_start;
			if (res.t_end > t_end)
				t_end = res.t_end;
		}
		close(res_fd[i]);
	}
	cpu1 = bench_daemon_cpu_ms(d);
	for (unsigned i = 0; i < started; i++)
		bench_reap(pids[i], t->failed);
	if (!t->failed && total != expect) {
		snprintf(t->why, sizeof(t->why), "%llu completions counted, %llu expected",
			 (unsigned long long)total, (unsigned long long)expect);
		t->failed = 1;
	}
	if (!t->failed) {
		t->completions = total;
		t->seconds = (double)(t_end - t_start) / 1e9;
		t->per_s = (double)total / t->seconds;
	}
out:
	safe_close(ready[0]);
	free(pids);
	free(res_fd);
	if (t->failed) {
		bench_say("throughput %s: %s\n", t->name, t->why);
		return -1;
	}
	return cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : -1;
}
