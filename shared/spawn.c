/* SPDX-License-Identifier: MIT */
#include "spawn.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fd-util.h"
#include "unix-socket.h"

/* How often a starting daemon is probed. */
#define PROBE_EVERY_NS 500000

static void sleep_ns(long ns)
{
	struct timespec ts = { .tv_nsec = ns };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int cuflag_daemon_probe(const char *sock, pid_t *peer)
{
	int fd = cuflag_unix_connect(sock, 0);
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (fd < 0)
		return fd;
	if (peer && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
		*peer = cred.pid;
	if (shutdown(fd, SHUT_WR) == 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char b;
		/* EOF once the daemon closed it; give up quietly after 5 s. */
		while (poll(&p, 1, 5000) == 1 && recv(fd, &b, 1, MSG_DONTWAIT) > 0)
			;
	}
	safe_close(fd);
	return 0;
}

static void exec_child(const char *const *argv, int stderr_fd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (stderr_fd >= 0 && dup2(stderr_fd, 2) < 0)
		_exit(127);
	execvp(argv[0], (char *const *)argv);
	fprintf(stderr, "%s: cannot run %s: %s\n", program_invocation_short_name, argv[0],
		strerror(errno));
	_exit(127);
}

int cuflag_daemon_spawn(const char *const *argv, const char *sock, int stderr_fd,
			int timeout_ms, pid_t *pid, int *wstatus)
{
	uint64_t end = cuflag_now_ns() + (uint64_t)timeout_ms * 1000000u;

	*pid = fork();
	if (*pid < 0)
		return -errno;
	if (*pid == 0)
		exec_child(argv, stderr_fd);
	/* Ready when it accepts a connection; fail fast if it died. */
	for (;;) {
		if (cuflag_daemon_probe(sock, NULL) == 0)
			return 0;
		if (waitpid(*pid, wstatus, WNOHANG) == *pid)
			return -ECHILD;
		if (cuflag_now_ns() >= end)
			return -ETIMEDOUT;
		sleep_ns(PROBE_EVERY_NS);
	}
}

int cuflag_fd_count(pid_t pid)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *dir;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/fd");
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return pid ? n : n - 1; /* the opendir's own fd */
}

int cuflag_daemon_stop(pid_t pid, int kill_after_ms)
{
	uint64_t end = cuflag_now_ns() + (uint64_t)kill_after_ms * 1000000u;
	int st = 0;
	pid_t r;

	kill(pid, SIGTERM);
	if (kill_after_ms >= 0) {
		while ((r = waitpid(pid, &st, WNOHANG)) == 0 && cuflag_now_ns() < end)
			sleep_ns(1000000);
		if (r == pid)
			return st;
		if (r < 0)
			return -errno;
		fprintf(stderr, "%s: pid %d did not stop on SIGTERM; killing it\n",
			program_invocation_short_name, (int)pid);
		kill(pid, SIGKILL);
	}
	return waitpid(pid, &st, 0) == pid ? st : -errno;
}
