/* SPDX-License-Identifier: MIT */
/*
 * cuflagctl's side of the wire: connect to cuflagd and ask it the admin
 * queries (STATS, CLIENTS, METRICS, STUCK). These need no HELLO: they take no
 * region.
 */
#ifndef CUFLAGCTL_QUERY_H
#define CUFLAGCTL_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "cuflag-proto.h"

struct ctl_conn {
	int fd;
	uint32_t next_id;
	/* Why the last call failed, in words: the daemon's reason or ours. */
	char why[CUFLAG_REASON_MAX + 256]; /* the daemon's reason, or ours with a hint */
};

/*
 * Connect to the daemon's socket at path. 0 or a negative errno from
 * socket(2) / connect(2) (-ENAMETOOLONG for a path too long), with c->why set.
 */
int ctl_open(struct ctl_conn *c, const char *path);
void ctl_close(struct ctl_conn *c);

/*
 * The daemon's counters. 0, or a negative errno: the daemon's error status,
 * -ECONNRESET (it hung up), -ETIMEDOUT (no reply in time), -EPROTO /
 * -EBADMSG (a malformed reply); c->why says which.
 */
int ctl_stats(struct ctl_conn *c, struct cuflag_msg_stats_reply *out);

/* Who a client is, as its METRICS record says: each text NUL-terminated,
 * printable ASCII, "" where the daemon does not know it. */
struct ctl_ident {
	char comm[CUFLAG_COMM_MAX + 1];
	char unit[CUFLAG_UNIT_MAX + 1];
	char cgroup[CUFLAG_CGROUP_MAX + 1];
	char pod[CUFLAG_POD_MAX + 1];
	char container[CUFLAG_CONTAINER_MAX + 1];
};

/* One row of cuflagctl clients: what CLIENTS says, and who the client is. */
struct ctl_client {
	struct cuflag_msg_client_info info;
	struct ctl_ident who;
};

/*
 * Every client holding a region; *list is malloc'ed (free it), *n entries.
 * Who each is comes from METRICS, asked after CLIENTS on the same
 * connection: a client gone in between, or a daemon that does not answer
 * METRICS (older ones), leaves it "" and is no error. Errors as ctl_stats()
 * (of CLIENTS), and -ENOMEM.
 */
int ctl_clients(struct ctl_conn *c, struct ctl_client **list, size_t *n);

/* What METRICS says, every page of it (ctl_metrics). */
struct ctl_metrics {
	struct cuflag_metrics_daemon daemon;
	struct cuflag_metrics_user *users;
	size_t nusers;
	struct cuflag_metrics_user_totals *totals; /* none from older daemons */
	size_t ntotals;
	struct cuflag_metrics_client *clients;
	size_t nclients;
	char version[32];      /* the daemon's, NUL-terminated */
	uint64_t start_unix_ms; /* when the daemon started (0: an older daemon) */
};

/*
 * Everything the daemon records that this user may see, page by page (and
 * its version, from STATS); free it with ctl_metrics_free(). Errors as
 * ctl_stats(), and -ENOMEM.
 */
int ctl_metrics(struct ctl_conn *c, struct ctl_metrics *out);

/* The daemon's CUFLAG_METRICS_F_* flags (which kind of daemon it is), from
 * the first METRICS page. Errors as ctl_metrics(). */
int ctl_daemon_flags(struct ctl_conn *c, uint32_t *flags);
void ctl_metrics_free(struct ctl_metrics *m);

/*
 * The stuck slots this user may see, longest waiting first (*list malloc'ed,
 * *n entries), and how many more the daemon did not list. Errors as
 * ctl_clients().
 */
int ctl_stuck(struct ctl_conn *c, struct cuflag_msg_stuck_slot **list, size_t *n,
	      uint32_t *more);

#endif
