/* SPDX-License-Identifier: MIT */
/*
 * The daemon under test: spawn cuflagd on a private socket with an explicit
 * --spin-us and wait until it accepts a connection (never a fixed sleep), or
 * use the one at --socket. Its pid comes from SO_PEERCRED either way, so its
 * CPU time can be read from /proc/PID/stat.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* 0 connected (and *peer set), else -errno. */
static int try_connect(const char *path, pid_t *peer)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd, rc = 0;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		rc = -errno;
	else if (peer && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
		*peer = cred.pid;
	close(fd);
	return rc;
}

static int executable(const char *path)
{
	return access(path, X_OK) == 0;
}

/* $CUFLAGD, else cuflagd next to this binary (or in the build tree's daemon/), else PATH. */
const char *bench_find_daemon(const char *self)
{
	static char buf[PATH_MAX];
	const char *env = getenv("CUFLAGD");
	const char *path;
	char *slash;

	if (env && *env)
		return env;
	if (self && (slash = strrchr(self, '/'))) {
		int dl = (int)(slash - self);
		snprintf(buf, sizeof(buf), "%.*s/cuflagd", dl, self);
		if (executable(buf))
			return buf;
		snprintf(buf, sizeof(buf), "%.*s/../daemon/cuflagd", dl, self);
		if (executable(buf))
			return buf;
	}
	path = getenv("PATH");
	while (path && *path) {
		const char *end = strchr(path, ':');
		int len = end ? (int)(end - path) : (int)strlen(path);
		snprintf(buf, sizeof(buf), "%.*s/cuflagd", len, len ? path : ".");
		if (executable(buf))
			return buf;
		path = end ? end + 1 : NULL;
	}
	return "cuflagd";
}

int bench_daemon_start(struct bench_daemon *d, const struct bench_opts *o)
{
	char spin[32], maxc[16];
	int st;

	memset(d, 0, sizeof(*d));
	if (o->socket) {
		int rc;
		snprintf(d->sock, sizeof(d->sock), "%s", o->socket);
		rc = try_connect(d->sock, &d->pid);
		if (rc) {
			fprintf(stderr, "cuflag-bench: cannot connect to %s: %s\n", d->sock,
				strerror(-rc));
			return rc;
		}
		return 0;
	}
	snprintf(d->dir, sizeof(d->dir), "/tmp/cuflag-bench-XXXXXX");
	if (!mkdtemp(d->dir)) {
		fprintf(stderr, "cuflag-bench: mkdtemp: %s\n", strerror(errno));
		return -errno;
	}
	snprintf(d->sock, sizeof(d->sock), "%s/cuflagd.sock", d->dir);
	snprintf(spin, sizeof(spin), "%u", o->spin_us);
	snprintf(maxc, sizeof(maxc), "%u", BENCH_MAX_CLIENTS);
	d->pid = fork();
	if (d->pid < 0) {
		fprintf(stderr, "cuflag-bench: fork: %s\n", strerror(errno));
		rmdir(d->dir);
		return -errno;
	}
	if (d->pid == 0) {
		/* --max-clients explicit: the scale run connects up to 240 processes at once. */
		const char *argv[] = { o->daemon, "--socket", d->sock, "--spin-us", spin,
				       "--max-clients", maxc, "--log-level", "warning", NULL };
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execvp(o->daemon, (char *const *)argv);
		fprintf(stderr, "cuflag-bench: cannot run %s: %s (set --daemon or $CUFLAGD)\n",
			o->daemon, strerror(errno));
		_exit(127);
	}
	d->spawned = 1;
	/* Ready when it accepts a connection; give up if it dies or after 10 s. */
	for (uint64_t end = bench_now_ns() + 10000000000ull; bench_now_ns() < end;) {
		pid_t peer = 0;
		if (try_connect(d->sock, &peer) == 0) {
			if (peer && peer != d->pid)
				fprintf(stderr, "cuflag-bench: warning: the socket's peer is pid %d, "
						"not the daemon spawned (%d)\n",
					(int)peer, (int)d->pid);
			return 0;
		}
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			fprintf(stderr, "cuflag-bench: %s exited before it was ready (status %d)\n",
				o->daemon, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
			d->spawned = 0;
			d->pid = 0;
			rmdir(d->dir);
			return -ECHILD;
		}
		bench_sleep_ns(500000);
	}
	fprintf(stderr, "cuflag-bench: %s did not accept connections within 10 s\n", o->daemon);
	bench_daemon_stop(d);
	return -ETIMEDOUT;
}

void bench_daemon_stop(struct bench_daemon *d)
{
	int st;

	if (!d->spawned)
		return;
	kill(d->pid, SIGTERM);
	/* Bounded: SIGKILL after 5 s. */
	for (int i = 0; i < 5000; i++) {
		if (waitpid(d->pid, &st, WNOHANG) == d->pid)
			goto reaped;
		bench_sleep_ns(1000000);
	}
	fprintf(stderr, "cuflag-bench: cuflagd did not stop on SIGTERM; killing it\n");
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &st, 0);
reaped:
	unlink(d->sock);
	rmdir(d->dir);
	d->spawned = 0;
}

double bench_daemon_cpu_ms(const struct bench_daemon *d)
{
	char path[64], buf[1024];
	unsigned long ut = 0, st = 0;
	const char *p;
	ssize_t n;
	int fd;

	if (d->pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)d->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* Fields after the command name, which is in parentheses. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}
