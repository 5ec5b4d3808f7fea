/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

int cuflagd_log_level = LOG_INFO;

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
	fwrite(line, 1, (size_t)n, stderr);
}

int cuflagd_ratelimit_ok(struct cuflagd_ratelimit *rl)
{
	uint64_t now = cuflag_now_ms();

	if (now - rl->window_start_ms >= rl->interval_ms) {
		if (rl->suppressed)
			cuflagd_log(LOG_WARNING, "%u similar messages suppressed", rl->suppressed);
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
