/* SPDX-License-Identifier: MIT */
/*
 * cuflagd's main thread: one epoll loop over the listening socket
 * (listener.h), the clients (session.h), a signalfd, a timerfd (the tick:
 * watchdog, status, what is due) and the scanner's hand-backs; what the
 * daemon as a whole holds.
 */
#ifndef CUFLAGD_SERVER_H
#define CUFLAGD_SERVER_H

#include <stdint.h>

#include "answer.h"
#include "closer.h"
#include "config.h"
#include "eptag.h"
#include "log.h"
#include "region.h"
#include "registry.h"
#include "penalty.h"
#include "scanner.h"
#include "session.h"
#include "users.h"

struct server {
	const struct cuflagd_config *cfg;
	int ep;
	int listen_fd;
	int listen_paused;   /* out of fds: not accepting until the next tick */
	int fd_reserve_from; /* slot eventfds at or above this number are refused */
	const char *unlink_path; /* socket file we created, removed at exit */
	int sig_fd;
	int timer_fd;
	struct scanner *sc;
	struct daemon_page dp;
	struct cuflag_region_layout layout; /* of every client's region */
	struct closer *closer;      /* closes what clients handed over (closer.h) */
	struct users users;         /* per-uid accounting (users.h) */
	uint64_t epoch;
	uint64_t start_ms;
	uint64_t start_unix_ms;     /* the same, on the wall clock (taken once) */
	struct registry reg;        /* every connection (registry.h) */
	struct answer_list answers; /* long answers, held connections (answer.h) */
	uint32_t freed_since_trim;  /* sessions freed since the heap was last trimmed */
	uint32_t next_id;
	uint64_t dropped;
	int stopping;
	/* Watchdog and status. */
	uint64_t watchdog_usec;
	uint64_t last_heartbeat;
	uint64_t last_ping_ms;
	uint64_t last_status_ms;
	uint64_t last_wakes;
	struct cuflagd_ratelimit rl;  /* the daemon's own repeated lines (accept errors...) */
	struct uid_penalties penalties; /* users refused a while (penalty.h) */
	struct drop_table drops;        /* per user, for the metrics (metrics.h) */
	struct user_totals totals;      /* per user since start, for the metrics */
	uint64_t broken_seen;           /* scanner_broken_count() last looked at */
	struct ep_tag tag_listen, tag_signal, tag_timer, tag_scanner, tag_guard;
	struct export_table *exports;   /* exported slots' handles (export.c), or NULL */
};

/* Block the signals the main loop takes through its signalfd. */
void server_block_signals(void);

/* Set up everything (socket, scanner, loop). 0 or a negative errno. */
int server_init(struct server *srv, const struct cuflagd_config *cfg);
/* Run until SIGINT/SIGTERM. 0 or a negative errno. */
int server_run(struct server *srv);
void server_fini(struct server *srv);

#endif
