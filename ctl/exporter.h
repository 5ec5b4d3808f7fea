/* SPDX-License-Identifier: MIT */
/*
 * cuflagctl metrics --listen: a small HTTP/1.1 server that answers GET
 * /metrics with what cuflagctl metrics prints, asking the daemon afresh at
 * each scrape (so that the daemon itself keeps no network, and a restarted
 * daemon is simply asked again). One thread polls a bounded number of
 * connections at once, each bounded in size and time (a short one to send
 * its request), so that an idle or slow peer delays no one else's scrape.
 */
#ifndef CUFLAGCTL_EXPORTER_H
#define CUFLAGCTL_EXPORTER_H

/* Serve on listen ("HOST:PORT", "[V6]:PORT" or ":PORT" for every address,
 * IPv6 and IPv4, or IPv4 alone where there is no IPv6) until killed. A
 * negative errno when it cannot listen, or poll fails (said on stderr). */
int exporter_run(const char *listen, const char *socket_path);

#endif
