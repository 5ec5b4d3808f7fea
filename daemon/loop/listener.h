/* SPDX-License-Identifier: MIT */
/*
 * The listening socket and the connections it takes: the socket the service
 * manager passed or one cuflagd makes itself (never stealing a live one),
 * and at each connection who the peer is and whether it may stay (its
 * user's and the node's caps, with room of their own for root and the admin
 * group). A connection that may stay becomes a session (session.h); one that
 * may not is told why and closed. Main thread only.
 */
#ifndef CUFLAGD_LISTENER_H
#define CUFLAGD_LISTENER_H

struct server;

/* Connections beyond the region limit, for cuflagctl and refused clients;
 * root and the admin group have a few more of their own beyond that. */
#define EXTRA_CONNECTIONS 64
#define ADMIN_CONNECTIONS 16

/* Listen on the socket the service manager passed, else on one of our own
 * at the configured path (srv->listen_fd). 0 or a negative errno. */
int listener_open(struct server *srv);

/* Take the connections waiting. Out of fds, the socket is not looked at
 * until the next tick. */
void listener_on_accept(struct server *srv);

/* Every tick: look at the socket again if it was left for want of fds. */
void listener_tick(struct server *srv);

/* At exit: close it, and remove the socket file cuflagd made (once: a
 * second call does nothing). */
void listener_close(struct server *srv);

#endif
