/* SPDX-License-Identifier: MIT */
/*
 * cuflagctl metrics --listen: a small HTTP/1.1 server that answers GET
 * /metrics with what cuflagctl metrics prints, asking the daemon afresh at
 * each scrape (so that the daemon itself keeps no network, and a restarted
 * daemon is simply asked again). One request at a time, each bounded in
 * size and time: a Prometheus server scrapes every few seconds, nothing more
 * is needed, and a slow peer cannot hold it longer than the timeout.
 */
#ifndef CUFLAGCTL_EXPORTER_H
#define CUFLAGCTL_EXPORTER_H

/* Serve on listen ("HOST:PORT", "[V6]:PORT" or ":PORT" for every address)
 * until killed. A negative errno when it cannot listen (said on stderr). */
int exporter_run(const char *listen, const char *socket_path);

#endif
