/* SPDX-License-Identifier: MIT */
/*
 * What the daemon tells an operator (cuflagctl metrics, top, stuck): who
 * each client is, its arms, completions and arm -> done histogram (kept by
 * the scanner, scanner.h), its stuck slots, and per user the clients dropped
 * and the cool-downs begun, with their reasons. Main thread only; the
 * scanner's side is a few relaxed stores per arm and completion. Stuck slots
 * are found in stuck.c; the METRICS answer is sent by queries.c, with the
 * records made here. The tables (struct drop_table, struct user_totals) are
 * the server's (server-state.h), kept here.
 */
#ifndef CUFLAGD_METRICS_H
#define CUFLAGD_METRICS_H

#include <stdint.h>
#include <sys/types.h>

#include "cuflag-proto.h"

struct server;
struct session;
struct session_metrics;
struct user;
struct user_total;
struct user_totals;
struct loop_work;
struct lhist_snap;

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
