/* SPDX-License-Identifier: MIT */
/*
 * The life of a connection, and its one owner: made at accept and linked
 * into the server's registry, read and served, dropped, handed back by the
 * scanner, freed. Only session.c ends a session's life: the loop asks, the
 * handlers and the answers report (a verdict, handler.h), and it drops. What
 * a session holds, and what other files may do to one, is session-state.h;
 * what each request does, request.c.
 */
#ifndef CUFLAGD_SESSION_H
#define CUFLAGD_SESSION_H

#include <stdint.h>

#include "serve/session-state.h"

struct server;
struct ucred;

/* A new connection on fd (non-blocking) of the peer c describes: a session
 * in the server's registry, its socket watched by the loop. NULL when out of
 * memory (fd is then closed). */
struct session *session_accept(struct server *srv, int fd, const struct ucred *c, int admin);

/* What epoll reported of s's socket: read and serve what the client sent,
 * step its answer, or hear it hang up. */
void session_on_event(struct server *srv, struct session *s, uint32_t events);

/* A command the scanner handed back for this session. */
void session_on_done(struct server *srv, struct session *s, struct scanner_cmd *c);

/* The loop's turn at long answers (answer.h): a client whose answer failed
 * is dropped. */
void sessions_run_answers(struct server *srv);

/* Drop the clients the scanner stopped serving (it marks them broken),
 * cooling their user down where the reason says so (broken.h). */
void sessions_drop_broken(struct server *srv);
/* Drop the connections that did not take a region within hello-timeout-ms
 * (root and the admin group may sit on one as long as they like: cuflagctl). */
void sessions_drop_late(struct server *srv);
/* Answer the ALLOCs parked too long. */
void sessions_expire_parked(struct server *srv);
/* A region lost a page under the daemon (region-guard.h): the daemon saw a
 * private page of its own at map, never one of the client's memfd. Its
 * client is dropped. */
void session_on_punched(struct server *srv, uint8_t *map);

/* Free the sessions dropped during the event batch just handled. */
void session_free_graveyard(struct server *srv);

/* Free every session (at exit, the scanner stopped). */
void session_free_all(struct server *srv);

#endif
