/* SPDX-License-Identifier: MIT */
#include "serve/answer.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "fdpass.h"
#include "proto.h"
#include "serve/handler.h"
#include "serve/server-state.h"
#include "serve/session-state.h"

/* Messages one step sends at most: a step's worth of system calls. */
#define STEP_MSGS 32u

const struct loop_budget_cfg answer_budget = LOOP_BUDGET_DEFAULT;
const struct loop_prices answer_prices = LOOP_PRICES_DEFAULT;

struct answer {
	const struct answer_ops *ops;
	void *state;
	uint16_t type;
	uint32_t req_id;
	int built;     /* build() said the answer is whole */
	int wait_out;  /* the client's socket is full: waiting for it to read */
	struct req_verdict failed; /* on the failed list: what its client is told */
	/* Messages built and not sent yet, each a header and its body. */
	uint8_t *out;
	size_t out_len, out_off, out_cap;
};

/* ---------------------------------------------------------------- */
/* The list of sessions with an answer or a hold                     */
/* ---------------------------------------------------------------- */

static void list_add(struct answer_list *l, struct session *s)
{
	assert(!s->answering);
	s->answering = 1;
	LIST_APPEND(answers, l->head, l->tail, s);
}

static void list_del(struct answer_list *l, struct session *s)
{
	assert(s->answering);
	s->answering = 0;
	LIST_REMOVE_LAST(answers, l->head, l->tail, s);
}

/* ---------------------------------------------------------------- */
/* Budgets                                                           */
/* ---------------------------------------------------------------- */

static enum loop_lane lane_now(struct session *s, uint64_t now_ns)
{
	if (s->admin)
		return LANE_ADMIN;
	loop_budget_refill(&s->user->loop, &answer_budget, now_ns);
	return loop_lane_of(0, &s->user->loop);
}

void answer_charge(struct server *srv, struct session *s, const struct loop_work *w)
{
	(void)srv;
	if (!s->admin)
		loop_budget_charge(&s->user->loop, &answer_budget, loop_price_ns(&answer_prices, w));
}

int answer_hold(struct server *srv, struct session *s)
{
	if (s->held)
		return 1;
	if (lane_now(s, cuflag_now_ns()) != LANE_OVER)
		return 0;
	s->held = 1;
	session_watch(srv->ep, s, 0);
	list_add(&srv->answers, s);
	return 1;
}

static void unhold(struct server *srv, struct session *s)
{
	s->held = 0;
	list_del(&srv->answers, s);
	/* Level-triggered: what it queued meanwhile is read at the next wait. */
	session_watch(srv->ep, s, EPOLLIN);
}

/* ---------------------------------------------------------------- */
/* Building and sending                                              */
/* ---------------------------------------------------------------- */

int answer_start(struct server *srv, struct session *s, struct request *req,
		 const struct answer_ops *ops, void *state)
{
	struct answer *a = state ? calloc(1, sizeof(*a)) : NULL;

	assert(!s->answer && !s->held);
	if (!a) {
		if (state)
			ops->fini(state);
		return req_refuse(req, -ENOMEM, "out of memory");
	}
	a->ops = ops;
	a->state = state;
	a->type = req->h.type;
	a->req_id = req->h.req_id;
	s->answer = a;
	list_add(&srv->answers, s);
	session_watch(srv->ep, s, 0);
	return 0;
}

int answer_emit(struct answer *a, const void *body, uint32_t blen)
{
	struct cuflag_msg_hdr h;
	size_t need = sizeof(h) + blen;

	assert(need <= CUFLAG_MSG_MAX);
	if (a->out_len + need > a->out_cap) {
		size_t cap = a->out_cap ? a->out_cap : 4096;
		uint8_t *p;
		while (cap < a->out_len + need)
			cap *= 2;
		p = realloc(a->out, cap);
		if (!p)
			return -ENOMEM;
		a->out = p;
		a->out_cap = cap;
	}
	cuflag_hdr_init(&h, a->type | CUFLAG_MSG_REPLY, (uint32_t)need, a->req_id, 0, 0);
	memcpy(a->out + a->out_len, &h, sizeof(h));
	memcpy(a->out + a->out_len + sizeof(h), body, blen);
	a->out_len += need;
	return 0;
}

/* Send what was built, as far as the socket takes it, at most a step's
 * worth. 0 (maybe with wait_out set), or a negative errno. */
static int flush(struct session *s, struct answer *a, struct loop_work *w)
{
	for (unsigned k = 0; k < STEP_MSGS && a->out_off < a->out_len; k++) {
		struct cuflag_msg_hdr h;
		int rc;

		memcpy(&h, a->out + a->out_off, sizeof(h));
		rc = cuflag_send_msg(s->fd, a->out + a->out_off, h.len, NULL, 0, MSG_DONTWAIT);
		if (rc == -EAGAIN || rc == -ENOBUFS) {
			a->wait_out = 1;
			return 0;
		}
		if (rc)
			return rc;
		a->out_off += h.len;
		w->msgs++;
		w->bytes += h.len;
	}
	if (a->out_off == a->out_len)
		a->out_off = a->out_len = 0;
	return 0;
}

static void answer_free(struct answer *a)
{
	a->ops->fini(a->state);
	free(a->out);
	free(a);
}

void answer_cancel(struct server *srv, struct session *s)
{
	if (s->answer) {
		answer_free(s->answer);
		s->answer = NULL;
		list_del(&srv->answers, s);
	} else if (s->held) {
		s->held = 0;
		list_del(&srv->answers, s);
	}
}

/* The answer is sent: read the client again. */
static void answer_done(struct server *srv, struct session *s)
{
	answer_free(s->answer);
	s->answer = NULL;
	list_del(&srv->answers, s);
	session_watch(srv->ep, s, EPOLLIN);
}

/* s's answer failed: off the list, onto the failed one, for the session's
 * owner to drop s (answer_take_failed). */
static void answer_fail(struct server *srv, struct session *s, struct req_verdict v)
{
	list_del(&srv->answers, s);
	s->answer->failed = v;
	LIST_PREPEND(answers, srv->answers.failed, s);
}

struct session *answer_take_failed(struct server *srv, struct req_verdict *v)
{
	struct session *s = srv->answers.failed;

	if (!s)
		return NULL;
	LIST_REMOVE(answers, srv->answers.failed, s);
	*v = s->answer->failed;
	answer_free(s->answer);
	s->answer = NULL;
	return s;
}

/* One step of s's answer: send what waits, else build more and send it. */
static void step(struct server *srv, struct session *s)
{
	struct answer *a = s->answer;
	struct loop_work w = { 0 };
	int rc = 0;

	if (a->out_off == a->out_len && !a->built) {
		rc = a->ops->build(srv, s, a->state, a, &w);
		if (rc > 0) {
			a->built = 1;
			rc = 0;
		}
	}
	if (!rc)
		rc = flush(s, a, &w);
	answer_charge(srv, s, &w);
	if (rc == -EPIPE || rc == -ECONNRESET) {
		answer_fail(srv, s, req_drop(0, NULL)); /* it went away: no misdeed */
	} else if (rc) {
		ulog(LOG_WARNING, s, "%s answer failed: %s", a->ops->name, strerror(-rc));
		answer_fail(srv, s,
			    req_drop(rc, rc == -ENOMEM ? "out of memory" : "cannot send a reply"));
	} else if (a->wait_out) {
		session_watch(srv->ep, s, EPOLLOUT);
	} else if (a->built && a->out_off == a->out_len) {
		answer_done(srv, s);
	}
}

void answer_on_event(struct server *srv, struct session *s, uint32_t events)
{
	if (s->answer && s->answer->wait_out && (events & EPOLLOUT)) {
		s->answer->wait_out = 0;
		session_watch(srv->ep, s, 0);
	}
}

/* ---------------------------------------------------------------- */
/* The loop's turn at answers                                        */
/* ---------------------------------------------------------------- */

void answers_run(struct server *srv)
{
	uint64_t t0 = cuflag_now_ns(), now = t0;
	int ran;

	do {
		ran = 0;
		/* Root's and the admin group's answers first, every round. */
		for (int lane = LANE_ADMIN; lane <= LANE_USER; lane++) {
			for (struct session *s = srv->answers.head, *n; s; s = n) {
				n = s->answers_next; /* a step may end s's answer, or fail it */
				if (session_dead(s))
					continue;
				if (s->held) {
					if (lane == LANE_ADMIN && lane_now(s, now) != LANE_OVER)
						unhold(srv, s);
					continue;
				}
				if (s->answer->wait_out || lane_now(s, now) != (enum loop_lane)lane)
					continue;
				step(srv, s);
				ran = 1;
				now = cuflag_now_ns();
				if (now - t0 >= LOOP_SLICE_NS)
					goto out;
			}
		}
	} while (ran);
out:
	/* Round robin: whoever went first goes last next time. */
	if (srv->answers.head && srv->answers.head != srv->answers.tail) {
		struct session *s = srv->answers.head;
		list_del(&srv->answers, s);
		list_add(&srv->answers, s);
	}
}

int answers_timeout_ms(struct server *srv)
{
	uint64_t now = cuflag_now_ns(), wait = UINT64_MAX;

	for (struct session *s = srv->answers.head; s; s = s->answers_next) {
		if (session_dead(s) || (s->answer && s->answer->wait_out))
			continue;
		if (lane_now(s, now) != LANE_OVER)
			return 0;
		uint64_t w = loop_budget_wait_ns(&s->user->loop, &answer_budget);
		if (w < wait)
			wait = w;
	}
	if (wait == UINT64_MAX)
		return -1;
	return (int)(wait / 1000000u) + 1;
}

/* ---------------------------------------------------------------- */
/* Pages of sessions                                                 */
/* ---------------------------------------------------------------- */

int answer_sees(const struct session *asker, const struct session *o)
{
	return asker->admin || o->uid == asker->uid;
}

struct page_walk {
	const struct session *asker;
	uint32_t after, upto, n, max;
	struct session **out;
	struct loop_work *w;
};

static void page_take(struct session *o, void *arg)
{
	struct page_walk *p = arg;
	uint32_t at;

	p->w->sessions++;
	if (o->id <= p->after || o->id > p->upto || !answer_sees(p->asker, o))
		return;
	if (p->n == p->max && o->id > p->out[p->n - 1]->id)
		return;
	at = p->n < p->max ? p->n++ : p->n - 1;
	while (at > 0 && p->out[at - 1]->id > o->id) {
		p->out[at] = p->out[at - 1];
		at--;
	}
	p->out[at] = o;
}

uint32_t answer_page(struct server *srv, const struct session *asker, uint32_t after,
		     uint32_t upto, struct session **out, uint32_t max, struct loop_work *w)
{
	struct page_walk p = { asker, after, upto, 0, max, out, w };

	assert(max > 0);
	registry_each(&srv->reg, REG_ATTACHED, page_take, &p);
	return p.n;
}
