/* SPDX-License-Identifier: MIT */
/*
 * systemd glue: readiness, status, watchdog, socket activation. Built from
 * notify-systemd.c with libsystemd, else from notify-none.c, where every call
 * is a no-op and socket activation finds no socket.
 */
#ifndef CUFLAGD_NOTIFY_H
#define CUFLAGD_NOTIFY_H

#include <stdint.h>

/* The socket systemd passed (named "cuflagd" or the only one), or -1. */
int notify_listen_fd(void);

void notify_ready(void);
void notify_stopping(void);
__attribute__((format(printf, 1, 2))) void notify_status(const char *fmt, ...);

/* Watchdog interval in µs the service manager expects, 0 when none. */
uint64_t notify_watchdog_usec(void);
void notify_watchdog_ping(void);

#endif
