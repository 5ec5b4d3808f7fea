/* SPDX-License-Identifier: MIT */
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int cuflagd_log_level = LOG_INFO;

/* Where lines go: stderr, never waited on (cuflagd_log_open). */
static int log_is_socket;
static _Atomic unsigned log_dropped;

void cuflagd_log_open(void)
{
	struct stat st;
	int fd;

	if (fstat(STDERR_FILENO, &st) < 0)
		return;
	if (S_ISSOCK(st.st_mode)) {
		log_is_socket = 1; /* the journal's stream: MSG_DONTWAIT per line */
		return;
	}
	if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
		return; /* a file: a write does not wait on a reader */
	/* A pipe or a terminal: a description of our own, non-blocking, so
	 * that whoever shares the one we were given is not changed. */
	fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	if (dup2(fd, STDERR_FILENO) < 0)
		(void)0; /* keep the blocking one: lines still go out */
	close(fd);
}

/* One line in one write, or none: a reader that does not keep up loses
 * lines (counted, and said once it keeps up again), the daemon never waits. */
static int put_line(const char *line, size_t n)
{
	ssize_t w = log_is_socket ? send(STDERR_FILENO, line, n, MSG_DONTWAIT | MSG_NOSIGNAL)
				  : write(STDERR_FILENO, line, n);
	return w == (ssize_t)n ? 0 : -1;
}

int cuflagd_log_parse_level(const char *s)
{
	static const char *const names[] = { "emerg", "alert", "crit", "err",
					     "warning", "notice", "info", "debug" };
	for (int i = 0; i < 8; i++)
		if (!strcasecmp(s, names[i]))
			return i;
	if (!strcasecmp(s, "error"))
		return LOG_ERR;
	if (!strcasecmp(s, "warn"))
		return LOG_WARNING;
	if (s[0] >= '0' && s[0] <= '7' && !s[1])
		return s[0] - '0';
	return -1;
}

void cuflagd_log(int prio, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	if (prio > cuflagd_log_level)
		return;
	/* Build the whole line first: one write, so lines from two threads never mix. */
	n = snprintf(line, sizeof(line), "<%d>", prio);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n = (int)strlen(line);
	line[n++] = '\n';
	if (put_line(line, (size_t)n)) {
		atomic_fetch_add(&log_dropped, 1);
		return;
	}
	unsigned lost = atomic_exchange(&log_dropped, 0);
	if (lost) {
		n = snprintf(line, sizeof(line), "<%d>%u log lines dropped: the log's reader did not keep up\n",
			     LOG_WARNING, lost);
		if (put_line(line, (size_t)n))
			atomic_fetch_add(&log_dropped, lost);
	}
}

int cuflagd_ratelimit_take(struct cuflagd_ratelimit *rl, unsigned *held_back)
{
	uint64_t now = cuflag_now_ms();

	*held_back = 0;
	if (now - rl->window_start_ms >= rl->interval_ms) {
		*held_back = rl->suppressed;
		rl->window_start_ms = now;
		rl->used = 0;
		rl->suppressed = 0;
	}
	if (rl->used < rl->burst) {
		rl->used++;
		return 1;
	}
	rl->suppressed++;
	return 0;
}

int cuflagd_ratelimit_ok(struct cuflagd_ratelimit *rl)
{
	unsigned held;
	int ok = cuflagd_ratelimit_take(rl, &held);

	if (held)
		cuflagd_log(LOG_WARNING, "%u similar messages suppressed", held);
	return ok;
}
