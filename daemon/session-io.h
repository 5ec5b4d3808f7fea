/* SPDX-License-Identifier: MIT */
/*
 * What a file that serves a client may do to its session without owning it
 * (session.c owns it: only there is a session made, dropped or freed): write
 * a line about it, and choose which of its socket's events the loop hears.
 */
#ifndef CUFLAGD_SESSION_IO_H
#define CUFLAGD_SESSION_IO_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>

#include "log.h"
#include "users.h"

#define slog(prio, s, fmt, ...)                                                            \
	cuflagd_log(prio, "client %u pid=%d uid=%u: " fmt, (s)->id, (int)(s)->pid,            \
		    (unsigned)(s)->uid, ##__VA_ARGS__)
/* A line the client can cause: limited per user, whatever the connection
 * (users.h), so that no user can flood the journal. */
#define ulog(prio, s, fmt, ...)                                                            \
	do {                                                                               \
		if ((prio) <= cuflagd_log_level && user_log_ok((s)->user, prio))                \
			slog(prio, s, fmt, ##__VA_ARGS__);                                 \
	} while (0)

/* What the loop's epoll ep reports of s's socket from now on: EPOLLIN,
 * EPOLLOUT, or 0 (only a hang-up). Nothing once it hung up. */
#define session_watch(ep, s, mask)                                                         \
	do {                                                                               \
		struct epoll_event ev_ = { .events = (mask), .data.ptr = (s) };            \
		if ((s)->fd >= 0 && epoll_ctl(ep, EPOLL_CTL_MOD, (s)->fd, &ev_) < 0)       \
			ulog(LOG_ERR, s, "epoll_ctl: %s", strerror(errno));               \
	} while (0)

#endif
