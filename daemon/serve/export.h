/* SPDX-License-Identifier: MIT */
/*
 * Completions across processes, the main thread's side: the handles the
 * daemon made for exported slots (a sealed memfd each, known by its file's
 * identity), EXPORT and IMPORT, and the imports a resume brings back before
 * their exporter has redeclared its handle. The scanner's side, which makes
 * importers follow their exporter, is scanner/import.c.
 */
#ifndef CUFLAGD_EXPORT_H
#define CUFLAGD_EXPORT_H

#include <stdint.h>

#include "serve/handler.h"

struct server;
struct session;
struct request;
struct scanner_cmd;

/* The handlers (request.c's table, handler.h's contract). */
int req_export(struct server *srv, struct session *s, struct request *req);
int req_import(struct server *srv, struct session *s, struct request *req);

/* Whether slot id of s watches another's (it may not be armed or exported). */
int export_is_import(const struct session *s, uint32_t id);

/* s freed slot id: its handle is forgotten (IMPORT of it is refused from now
 * on; its importers are told by the scanner), and so is its import. */
void export_slot_freed(struct server *srv, struct session *s, uint32_t id);

/* s was dropped: every handle it exported and every import it waits with. */
void export_session_gone(struct server *srv, struct session *s);
/* Free what s kept here (the session is freed). */
void export_session_free(struct session *s);

/* An ADD_IMPORT handed back: the IMPORT is answered; whether the client
 * stays. */
struct req_verdict export_on_done(struct session *s, struct scanner_cmd *c);

/* Every tick: imports a resume brought back whose exporter did not redeclare
 * within CUFLAG_IMPORT_RELINK_MS of the daemon's start are gone. */
void export_tick(struct server *srv, uint64_t now_ms);

/* At exit, the sessions freed. */
void export_fini(struct server *srv);

#endif
