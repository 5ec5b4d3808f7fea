/* SPDX-License-Identifier: MIT */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

void private_dir(char *dir, size_t cap)
{
	snprintf(dir, cap, "/tmp/cuflag-ops-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
}

void notify_listen(struct notify_listener *n)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	private_dir(n->dir, sizeof(n->dir));
	snprintf(n->path, sizeof(n->path), "%s/notify", n->dir);
	snprintf(n->env, sizeof(n->env), "NOTIFY_SOCKET=%s", n->path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", n->path);
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(n->fd >= 0);
	CHECK(bind(n->fd, (struct sockaddr *)&a, sizeof(a)) == 0);
}

void notify_close(struct notify_listener *n)
{
	close(n->fd);
	unlink(n->path);
	rmdir(n->dir);
}

/* Time left until end_ns, in ms for poll(2); 0 once past. */
static int ms_left(uint64_t end_ns)
{
	uint64_t now = cuflag_now_ns();
	return now >= end_ns ? 0 : (int)((end_ns - now + 999999u) / 1000000u);
}

/* The next datagram before end_ns, NUL-terminated; 0 when none came. */
static size_t next_datagram(struct notify_listener *n, char *buf, size_t cap, uint64_t end_ns)
{
	struct pollfd p = { .fd = n->fd, .events = POLLIN };
	ssize_t len;

	if (poll(&p, 1, ms_left(end_ns)) <= 0)
		return 0;
	len = recv(n->fd, buf, cap - 1, MSG_DONTWAIT);
	CHECK(len >= 0);
	buf[len] = 0;
	return (size_t)len;
}

/* Whether a notification (newline-separated assignments) has a line starting with prefix. */
static int has_line(const char *msg, const char *prefix, int whole)
{
	size_t pl = strlen(prefix);

	for (const char *l = msg; l; l = strchr(l, '\n')) {
		if (*l == '\n')
			l++;
		if (!strncmp(l, prefix, pl) && (!whole || l[pl] == 0 || l[pl] == '\n'))
			return 1;
	}
	return 0;
}

int notify_wait_for(struct notify_listener *n, const char *prefix, char *buf, size_t cap,
		    int timeout_ms)
{
	uint64_t end = cuflag_now_ns() + (uint64_t)timeout_ms * 1000000u;

	while (next_datagram(n, buf, cap, end))
		if (has_line(buf, prefix, 0))
			return 1;
	return 0;
}

int notify_count(struct notify_listener *n, const char *line, int ms)
{
	uint64_t end = cuflag_now_ns() + (uint64_t)ms * 1000000u;
	char buf[512];
	int count = 0;

	while (next_datagram(n, buf, sizeof(buf), end))
		count += has_line(buf, line, 1);
	return count;
}

void child_start(struct child *c, const char *const *argv, const char *const *env,
		 int watchdog_pid)
{
	int pfd[2];

	CHECK(pipe2(pfd, O_CLOEXEC) == 0);
	c->log_len = 0;
	c->log[0] = 0;
	c->pid = fork();
	CHECK(c->pid >= 0);
	if (c->pid == 0) {
		char wd[64];
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (int i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		if (watchdog_pid) {
			snprintf(wd, sizeof(wd), "%d", (int)getpid());
			setenv("WATCHDOG_PID", wd, 1);
		}
		dup2(pfd[1], 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	c->log_fd = pfd[0];
	CHECK(fcntl(c->log_fd, F_SETFL, O_NONBLOCK) == 0);
}

int child_log_wait(struct child *c, const char *text, int timeout_ms)
{
	uint64_t end = cuflag_now_ns() + (uint64_t)timeout_ms * 1000000u;

	for (;;) {
		struct pollfd p = { .fd = c->log_fd, .events = POLLIN };
		ssize_t got;

		if (strstr(c->log, text))
			return 1;
		if (c->log_len + 1 >= sizeof(c->log) || poll(&p, 1, ms_left(end)) <= 0)
			return 0;
		got = read(c->log_fd, c->log + c->log_len, sizeof(c->log) - 1 - c->log_len);
		if (got <= 0)
			return strstr(c->log, text) != NULL; /* it exited */
		c->log_len += (size_t)got;
		c->log[c->log_len] = 0;
	}
}

int child_stop(struct child *c)
{
	int st = 0;

	kill(c->pid, SIGTERM);
	CHECK(waitpid(c->pid, &st, 0) == c->pid);
	/* Keep what it said last, for the test's own messages. */
	child_log_wait(c, "\x01", 0);
	close(c->log_fd);
	return cuflag_exit_code(st);
}
