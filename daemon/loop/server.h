/* SPDX-License-Identifier: MIT */
/*
 * cuflagd's main thread: one epoll loop over the listening socket
 * (listener.h), the clients (session.h), a signalfd, a timerfd (the tick:
 * watchdog, status, what is due) and the scanner's hand-backs. What the
 * daemon holds is server-state.h.
 */
#ifndef CUFLAGD_SERVER_H
#define CUFLAGD_SERVER_H

#include "serve/server-state.h"

/* Block the signals the main loop takes through its signalfd. */
void server_block_signals(void);

/* Set up everything (socket, scanner, loop). 0 or a negative errno. */
int server_init(struct server *srv, const struct cuflagd_config *cfg);
/* Run until SIGINT/SIGTERM. 0 or a negative errno. */
int server_run(struct server *srv);
void server_fini(struct server *srv);

#endif
