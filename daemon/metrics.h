/* SPDX-License-Identifier: MIT */
/*
 * What the daemon tells an operator (cuflagctl metrics, top, stuck): who
 * each client is, its arms, completions and arm -> done histogram (kept by
 * the scanner, scanner.h), its stuck slots, and per user the clients dropped
 * and the cool-downs begun, with their reasons. Main thread only; the
 * scanner's side is a few relaxed stores per arm and completion. Stuck slots
 * are found in stuck.c; the METRICS answer is sent by queries.c, with the
 * records made here.
 */
#ifndef CUFLAGD_METRICS_H
#define CUFLAGD_METRICS_H

#include <stdint.h>
#include <sys/types.h>

#include "client-info.h"
#include "cuflag-proto.h"
#include "log.h"

struct server;
struct session;
struct user;
struct loop_work;
struct lhist_snap;

/* One client's share, in struct session. */
struct session_metrics {
	struct client_ident ident;
	uint32_t stuck;          /* stuck slots at the last look */
	uint64_t *stuck_logged;  /* per slot: the wait logged as stuck (its start), or 0;
				  * made at the first stuck slot */
	struct cuflagd_ratelimit rl; /* its stuck lines */
	int folded;              /* its counts are in its user's totals */
};

/* Drops and cool-downs per user, for the users seen lately (the oldest entry
 * makes room). Kept past the user's last connection: a drop usually is it. */
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

/* At accept: who the peer of sock is. */
void metrics_session_init(struct session_metrics *m, int sock, pid_t pid);
void metrics_session_free(struct session_metrics *m);

/* A client is being dropped with err (why: not NULL); counted for its user. */
void metrics_on_drop(struct server *srv, const struct session *s, int err);
/* Its user's new clients are refused a while, for the reason it was dropped. */
void metrics_on_cooldown(struct server *srv, const struct session *s);
/* The scanner let go of a client that held a region: its counts are final
 * and go to its user's totals. */
void metrics_on_gone(struct server *srv, struct session *s);
/* Free the totals (at exit). */
void metrics_totals_free(struct user_totals *t);

/* The totals the asker s may see, as of now: the table's (a user: its own
 * entry) and the counts of the clients not added to it yet, live or dropped
 * and not let go by the scanner (so that no total ever goes back). Into *out
 * (malloc'ed, sorted by uid, the others' last): their count, or -ENOMEM. The
 * walk is added to *w. */
int metrics_totals_view(struct server *srv, const struct session *s, struct user_total **out,
			struct loop_work *w);

/* The users s may see (itself; root and the admin group: all), those
 * connected first, at most DROP_USERS in all, into uids; their count. */
uint32_t metrics_users_seen(struct server *srv, const struct session *s, uid_t *uids);
/* uid's record (u: its accounting while it is connected, else NULL). */
void metrics_user_fill(struct cuflag_metrics_user *r, struct server *srv, uid_t uid,
		       const struct user *u, uint64_t now_ms);
/* Client o's record; snap is room for its histogram, the slots read are
 * added to *w. */
void metrics_client_fill(struct cuflag_metrics_client *r, struct server *srv,
			 const struct session *o, struct lhist_snap *snap, struct loop_work *w);

#endif
