/* SPDX-License-Identifier: MIT */
/*
 * What an operator asks the daemon (cuflagctl stats, clients, metrics,
 * stuck): the handlers of STATS, CLIENTS, METRICS and STUCK (request.c's
 * table, handler.h's contract), and the daemon-wide totals that STATS,
 * METRICS and the service manager's status line all report. The long answers
 * are sent a step at a time (answer.h); what they list comes from the files
 * that keep it (metrics.h, stuck.h).
 */
#ifndef CUFLAGD_QUERIES_H
#define CUFLAGD_QUERIES_H

#include <stdint.h>

#include "scanner/scanner.h"

struct server;
struct session;
struct request;

/* What the daemon as a whole counts, now. */
struct daemon_totals {
	struct scanner_stats st;
	uint32_t clients;  /* holding a region */
	uint32_t slots;    /* their live slots */
	uint32_t grouped;  /* of those, the slots in a group */
	uint64_t pending;  /* their slots pending now */
	uint64_t uptime_ms;
	uint64_t dropped;  /* clients dropped since the start */
};

/* Fill *t: one walk of every client holding a region. */
void daemon_totals_read(struct server *srv, struct daemon_totals *t);

int req_stats(struct server *srv, struct session *s, struct request *req);
int req_clients(struct server *srv, struct session *s, struct request *req);
int req_metrics(struct server *srv, struct session *s, struct request *req);
int req_stuck(struct server *srv, struct session *s, struct request *req);

#endif
