/* SPDX-License-Identifier: MIT */
/*
 * Why the scanner stopped serving a client, and what follows from each
 * reason, in one table: the words of its log line, the drop reason its
 * metrics count it under, and whether it costs its user a cool-down
 * (penalty.h): a client that made every other one wait (a write it made
 * block, writes over its user's budget) does; one that only hurt itself (a
 * corrupted queue, a full counter) is just dropped. The scanner sets the
 * reason (scanner_set_broken); the main loop, when it sees the scanner's
 * count of broken clients move (server.c), has session.c drop each one
 * (sessions_drop_broken), as it drops every session.
 */
#ifndef CUFLAGD_BROKEN_H
#define CUFLAGD_BROKEN_H

#include "cuflag-proto.h"

/* Why the scanner stopped serving a client (0: it serves it). */
enum scanner_broken {
	BROKEN_NONE = 0,
	BROKEN_QUEUE, /* the arm queue indices are impossible */
	BROKEN_STALL, /* a write to one of its eventfds blocked and was cut */
	BROKEN_FULL,  /* one of its eventfds was full (or would have blocked) */
	BROKEN_COST,  /* its writes cost more than its user's write budget */
	BROKEN_WATCH, /* the daemon could not watch its wake eventfd */
};

struct broken_kind {
	const char *text;                /* for the log line */
	enum cuflag_drop_reason drop;    /* for the metrics */
	int penalised;                   /* its user is cooled down */
};

/* What why (not BROKEN_NONE) means. */
const struct broken_kind *broken_kind(enum scanner_broken why);

#endif
