/* SPDX-License-Identifier: MIT */
/*
 * Long answers (CLIENTS, STUCK, METRICS) built and sent in bounded steps
 * between the loop's other work, and each user's share of the loop.
 *
 * A request whose answer is many messages, or walks many rows, starts an
 * answer instead of replying at once: the connection is read no further
 * until it is sent, so a client keeps at most one such answer in the daemon
 * however many requests it queues. After each batch of events the loop runs
 * answers_run(): one step of each answer in turn (root's and the admin
 * group's first), each step doing at most a step's worth of work
 * (loop-price.h), for at most a slice of loop time, then back to the
 * sockets. A step's messages are sent as far as the client's socket takes
 * them; a full socket waits for the client to read (EPOLLOUT), so an answer
 * of any length reaches a client that reads it, and one that does not read
 * holds nothing but its own connection.
 *
 * The work of every step, and of every request, is charged to the asker's
 * user (root and the admin group: not). A user over its budget has its
 * answers wait and its connections not read until the budget is back: it
 * gets its answers later, and root's requests and other users' HELLO and
 * ATTACH go first. Main thread only.
 */
#ifndef CUFLAGD_ANSWER_H
#define CUFLAGD_ANSWER_H

#include <stdint.h>

#include "policy/loop-price.h"

struct server;
struct session;
struct request;
struct answer;
struct req_verdict;

/* What an answer builds. build() appends the next messages with
 * answer_emit(), doing at most about a step's work, and adds what it did to
 * *w; it returns 0 while there is more to come, 1 when the answer is whole,
 * or a negative errno (the answer fails). fini() frees state. */
struct answer_ops {
	const char *name;
	int (*build)(struct server *srv, struct session *s, void *state, struct answer *a,
		     struct loop_work *w);
	void (*fini)(void *state);
};

/*
 * Answer req with ops, state its own (fini()'d on every path, also when
 * this fails; NULL: there was no memory for it): from now on s is not read
 * until the answer is sent. 0, or REQ_REFUSED (req_refuse(): -ENOMEM).
 */
int answer_start(struct server *srv, struct session *s, struct request *req,
		 const struct answer_ops *ops, void *state);

/* One reply message (status 0, the request's type and id) appended to the
 * answer. 0 or -ENOMEM. */
int answer_emit(struct answer *a, const void *body, uint32_t blen);

/* s is being dropped: its answer or hold ends here. */
void answer_cancel(struct server *srv, struct session *s);

/* Whether s must not be read now: its user is over budget (root and the
 * admin group never are). It is then held, and read again once the budget
 * is back. */
int answer_hold(struct server *srv, struct session *s);

/* Charge s's user for w (root and the admin group: nothing). */
void answer_charge(struct server *srv, struct session *s, const struct loop_work *w);

/* An epoll event for a session with an answer or a hold, other than a
 * hang-up (its socket took room again). */
void answer_on_event(struct server *srv, struct session *s, uint32_t events);

/* Step the answers for up to a slice; release the held connections whose
 * user is back within budget. An answer that fails (its client went away,
 * or it could not be built or sent) goes to the failed list. */
void answers_run(struct server *srv);

/* The next session whose answer failed, with *v what becomes of it (a
 * drop); its answer is gone. NULL when none is left. */
struct session *answer_take_failed(struct server *srv, struct req_verdict *v);

/* What the loop may wait in epoll_wait: 0 while an answer can step now,
 * the time until an over-budget user is back, or -1 when nothing waits. */
int answers_timeout_ms(struct server *srv);

/* Whether asker may see session o (a user its own; root and the admin
 * group all). */
int answer_sees(const struct session *asker, const struct session *o);

/* Up to max sessions holding a region that asker sees, with ids above
 * after and at most upto, lowest first, into out; their count. The walk is
 * added to *w. Ids grow and are never reused while the daemon runs, so an
 * answer resumes where it stopped by id, across clients that came and went. */
uint32_t answer_page(struct server *srv, const struct session *asker, uint32_t after,
		     uint32_t upto, struct session **out, uint32_t max, struct loop_work *w);

/* What one user's share of the loop is. */
extern const struct loop_budget_cfg answer_budget;
extern const struct loop_prices answer_prices;

#endif
