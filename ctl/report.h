/* SPDX-License-Identifier: MIT */
/* Rendering what the daemon said: a human table, or one JSON object. */
#ifndef CUFLAGCTL_REPORT_H
#define CUFLAGCTL_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "cuflag-proto.h"
#include "query.h"

/* Which daemon was asked: "node" or "user", why that one ("" when there
 * is nothing to say), and its socket. */
struct ctl_which {
	const char *kind;
	char why[600];
	const char *socket;
};

/* The short view of the counters: which daemon (who), version, uptime,
 * backend, state, load. */
void report_status(FILE *f, const struct cuflag_msg_stats_reply *st, int json,
		   const struct ctl_which *who);
/* Every counter of the STATS reply. */
void report_stats(FILE *f, const struct cuflag_msg_stats_reply *st, int json);
/* One row (or array element) per client, with who it is where known. */
void report_clients(FILE *f, const struct ctl_client *v, size_t n, int json);

/* One row (or array element) per stuck slot; more: stuck slots not listed. */
void report_stuck(FILE *f, const struct cuflag_msg_stuck_slot *v, size_t n, uint32_t more,
		  int json);

#endif
