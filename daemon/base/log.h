/* SPDX-License-Identifier: MIT */
/* One line per event on stderr, with a <N> priority prefix the journal reads. */
#ifndef CUFLAGD_LOG_H
#define CUFLAGD_LOG_H

#include <stdint.h>

#include "clock.h"
#include <syslog.h>

extern int cuflagd_log_level;

int cuflagd_log_parse_level(const char *s);

/* From here on a line is written without waiting: a journal or a pipe that
 * does not keep up never holds the main loop or the scanner; lines it could
 * not take are counted and said as soon as one goes through. */
void cuflagd_log_open(void);

__attribute__((format(printf, 2, 3))) void cuflagd_log(int prio, const char *fmt, ...);

/*
 * Rate limit for lines a client can trigger: at most burst lines per
 * interval; returns 1 when the line may be written.
 */
struct cuflagd_ratelimit {
	uint64_t window_start_ms;
	unsigned interval_ms;
	unsigned burst;
	unsigned used;
	unsigned suppressed;
};
int cuflagd_ratelimit_ok(struct cuflagd_ratelimit *rl);
/* The same, but the caller says what was held back (a line that names who):
 * *held_back is how many lines the window that just ended suppressed (0:
 * none, or it has not ended). */
int cuflagd_ratelimit_take(struct cuflagd_ratelimit *rl, unsigned *held_back);


#define log_err(...) cuflagd_log(LOG_ERR, __VA_ARGS__)
#define log_warn(...) cuflagd_log(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) cuflagd_log(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) cuflagd_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) cuflagd_log(LOG_DEBUG, __VA_ARGS__)

#endif
