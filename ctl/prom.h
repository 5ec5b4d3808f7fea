/* SPDX-License-Identifier: MIT */
/*
 * What METRICS says, in the Prometheus text exposition format (version
 * 0.0.4), after node_exporter's conventions: base units (seconds), counters
 * ending in _total, identity in labels (client, pid, uid, comm, and unit, pod
 * and container where known), never values in labels; the cgroup path only
 * on cuflag_client_info (an _info series of value 1, to join on).
 */
#ifndef CUFLAGCTL_PROM_H
#define CUFLAGCTL_PROM_H

#include <stdio.h>

#include "query.h"

/* The content type of what prom_write() writes, for HTTP. */
#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

void prom_write(FILE *f, const struct ctl_metrics *m);

/* What is written when the daemon cannot be asked: cuflag_up 0. */
void prom_write_down(FILE *f);

#endif
