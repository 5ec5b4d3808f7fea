/* SPDX-License-Identifier: MIT */
/*
 * What the daemon holds, as its main thread keeps it: one struct server,
 * made by server_init() (server.h) and handed to every main-thread function.
 * The files that serve clients read and change their parts of it; each part
 * names the file that keeps it.
 */
#ifndef CUFLAGD_SERVER_STATE_H
#define CUFLAGD_SERVER_STATE_H

#include <stdint.h>

#include "base/eptag.h"
#include "base/log.h"
#include "base/region.h"
#include "cuflag-proto.h"
#include "policy/penalty.h"
#include "serve/registry.h"
#include "serve/users.h"

struct closer;
struct cuflagd_config;
struct export_table;
struct scanner;

/* The sessions with an answer or held for their user's budget, in the
 * order they are stepped; and those whose answer failed, for the session's
 * owner to drop (answer.h). */
struct answer_list {
	struct session *head, *tail;
	struct session *failed;
};

/* Drops and cool-downs per user, for the users seen lately (the oldest entry
 * makes room). Kept past the user's last connection: a drop usually is it.
 * Kept by metrics.c, as are the totals below. */
#define DROP_USERS 64

struct drop_table_entry {
	uid_t uid;
	uint64_t last_ms; /* 0: entry unused */
	uint64_t drops[CUFLAG_DROP_REASONS];
	uint64_t cooldowns[CUFLAG_DROP_REASONS];
};

struct drop_table {
	struct drop_table_entry e[DROP_USERS];
};

/* Each user's arms, completions and clients since the daemon started, its
 * clients gone included (a client's counts are added when the scanner has
 * let go of it; a live one's are added when asked). One entry per uid that
 * ever held a region, sorted by uid, up to USER_TOTALS_MAX; the users past
 * that are summed in others, so that every user's totals still add up to
 * the daemon's. */
#define USER_TOTALS_MAX 4096

struct user_total {
	uid_t uid;
	uint64_t arms, completions, clients;
};

struct user_totals {
	struct user_total *v;
	uint32_t n, cap;
	struct user_total others;
};

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
	/* --user (user-mode.c): its socket's path, the lock held while it
	 * runs, the one uid it serves; and since when no connection is open
	 * (--exit-idle; 0 while one is). */
	char user_path[108];
	int user_lock_fd;
	uid_t own_uid;
	uint64_t idle_since_ms;
};

#endif
