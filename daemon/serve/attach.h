/* SPDX-License-Identifier: MIT */
/* The requests that give a connection its region (attach.c): HELLO, ATTACH
 * and a resume's ADOPTs, handlers of request.c's table (handler.h). */
#ifndef CUFLAGD_ATTACH_H
#define CUFLAGD_ATTACH_H

struct server;
struct session;
struct request;

int req_hello(struct server *srv, struct session *s, struct request *req);
int req_attach(struct server *srv, struct session *s, struct request *req);
int req_adopt(struct server *srv, struct session *s, struct request *req);

#endif
