/* SPDX-License-Identifier: MIT */
#include "serve/session.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/closer.h"
#include "base/config.h"
#include "fdpass.h"
#include "policy/broken.h"
#include "policy/fair-share.h"
#include "serve/answer.h"
#include "serve/export.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "serve/server-state.h"

/* Requests served per readiness, so one busy client cannot starve the loop. */
#define MAX_MSGS_PER_WAKE 64

/* The moves of a session's state, as pictured in session-state.h. */
static const unsigned session_moves[SESSION_NSTATES] = {
	[SESSION_FRESH] = 1u << SESSION_HELLO | 1u << SESSION_DYING | 1u << SESSION_BURIED,
	[SESSION_HELLO] = 1u << SESSION_ADOPTING | 1u << SESSION_REGION | 1u << SESSION_DYING |
			  1u << SESSION_BURIED,
	[SESSION_ADOPTING] = 1u << SESSION_REGION | 1u << SESSION_DYING | 1u << SESSION_BURIED,
	[SESSION_REGION] = 1u << SESSION_DYING | 1u << SESSION_BURIED,
	[SESSION_DYING] = 1u << SESSION_BURIED,
	[SESSION_BURIED] = 0,
};

void session_move(struct session *s, enum session_state to)
{
	int legal = (unsigned)s->state < SESSION_NSTATES && session_moves[s->state] & 1u << to;

	assert(legal);
	(void)legal;
	s->state = to;
}

/* Into the graveyard, freed after the event batch. */
static void session_bury(struct server *srv, struct session *s)
{
	session_move(s, SESSION_BURIED);
	registry_bury(&srv->reg, s);
}

static struct session *session_new(struct server *srv, int fd, pid_t pid, uid_t uid, gid_t gid,
				   int admin)
{
	uint64_t now = cuflag_now_ms();
	struct session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->user = user_get(&srv->users, uid, now);
	if (!s->user) {
		free(s);
		return NULL;
	}
	s->tag.kind = EP_CLIENT;
	s->state = SESSION_FRESH;
	s->fd = fd;
	s->pid = pid;
	s->uid = uid;
	s->gid = gid;
	s->admin = admin;
	s->wake_fd = -1;
	s->ipc.fd = -1;
	s->id = ++srv->next_id;
	s->connected_ms = now;
	s->rate = (struct rate_bucket){ .tokens = srv->cfg->msg_rate, .at_ms = now };
	metrics_session_init(&s->met, fd, pid);
	user_hold(&srv->users, s->user, USER_CONNS, 1);
	registry_link(&srv->reg, s);
	return s;
}

static void session_free(struct server *srv, struct session *s)
{
	answer_cancel(srv, s); /* at exit: one may still be on its way */
	free(s->parked);
	slot_table_free(&s->slots);
	metrics_session_free(&s->met);
	export_session_free(s);
	free(s->scan);
	user_put(&srv->users, s->user);
	free(s);
}

void session_free_graveyard(struct server *srv)
{
	struct session *s;

	while ((s = registry_unbury(&srv->reg))) {
		session_free(srv, s);
		srv->freed_since_trim++;
	}
}

static void close_on_closer(void *closer, int fd)
{
	closer_close(closer, fd);
}

/* Give the session's slot eventfds, wake fd and region back (the scanner no
 * longer refers to them), at a drop or at exit. */
static void session_release(struct server *srv, struct session *s)
{
	slot_table_release(&s->slots, close_on_closer, srv->closer);
	closer_close(srv->closer, s->wake_fd);
	s->wake_fd = -1;
	region_destroy(&s->region);
	slab_cuda_free(&s->ipc);
	if (s->scan) {
		metrics_on_gone(srv, s);
		user_hold(&srv->users, s->user, USER_REGIONS, -1);
	}
}

static void free_at_exit(struct session *s, void *srv)
{
	closer_close_connection(((struct server *)srv)->closer, s->fd);
	session_release(srv, s);
	session_bury(srv, s);
}

void session_free_all(struct server *srv)
{
	registry_each(&srv->reg, REG_ALL, free_at_exit, srv);
	session_free_graveyard(srv);
}

/* Hang up: close the socket, hand the region to the scanner to let go of.
 * err and why say why (why NULL: the client hung up, no misdeed). The one
 * place a session is dropped. */
static void session_drop(struct server *srv, struct session *s, int err, const char *why)
{
	if (session_dead(s))
		return;
	answer_cancel(srv, s);
	if (why) {
		srv->dropped++;
		metrics_on_drop(srv, s, err);
		ulog(LOG_WARNING, s, "dropped: %s%s%s", why, err ? ": " : "",
		     err ? strerror(-err) : "");
	} else {
		ulog(LOG_DEBUG, s, "hung up");
	}
	session_move(s, SESSION_DYING);
	export_session_gone(srv, s);
	if (s->fd >= 0) {
		epoll_ctl(srv->ep, EPOLL_CTL_DEL, s->fd, NULL);
		/* Messages still queued on it may carry fds whose release blocks. */
		closer_close_connection(srv->closer, s->fd);
		s->fd = -1;
		user_hold(&srv->users, s->user, USER_CONNS, -1);
	}
	if (!s->scan) {
		session_bury(srv, s);
		return;
	}
	/* A resume dropped before all its slots were adopted keeps its held-back
	 * ADD_SESSION (freed with the slot table): the scanner never reads that
	 * queue. Were it added now, its first pass would take the arms queued
	 * for the slots not adopted yet, refuse them as not owned and move the
	 * region's head past them, and the client's next resume would start
	 * after arms no daemon ever signals. The DEL_SESSION below lets go of
	 * the slots already adopted. */
	/* The scanner may be reading the region right now: it lets go first.
	 * Without a command the region must stay; it is reclaimed at exit. */
	if (slot_table_stop(&s->slots))
		ulog(LOG_ERR, s, "out of memory while dropping; region kept until exit");
}

struct session *session_accept(struct server *srv, int fd, const struct ucred *c, int admin)
{
	struct session *s = session_new(srv, fd, c->pid, c->uid, c->gid, admin);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };

	if (!s || epoll_ctl(srv->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		log_err("cannot take a connection: out of memory");
		if (s)
			session_drop(srv, s, 0, NULL);
		else
			closer_close_connection(srv->closer, fd);
		return NULL;
	}
	ulog(LOG_DEBUG, s, "connection");
	return s;
}

/* Act on a verdict about s: whether it stays. */
static int session_judge(struct server *srv, struct session *s, struct req_verdict v)
{
	if (v.drop)
		session_drop(srv, s, v.err, v.why);
	return !v.drop;
}

/* ---------------------------------------------------------------- */
/* Reading requests                                                  */
/* ---------------------------------------------------------------- */

/* What a failed receive means, for the log and the client. */
static const char *recv_failure(ssize_t n)
{
	return n == 0          ? "empty message"
	       : n == -EMSGSIZE ? "message too long"
	       : n == -EBADMSG ? "control data of another kind"
	       : n == -EMFILE  ? "daemon out of fds for the fds sent"
			       : "receive failed";
}

/* Read and serve what the client sent, until it is dropped, parked, being
 * answered or held, or has sent nothing more. */
static void session_on_readable(struct server *srv, struct session *s)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	int fds[CUFLAG_SCM_MAX_FD];

	for (int k = 0; k < MAX_MSGS_PER_WAKE && !session_dead(s) && !s->parked && !s->answer; k++) {
		unsigned nfds = 0;
		ssize_t n;

		/* A user over its share of the loop is read again later. */
		if (answer_hold(srv, s))
			return;
		n = cuflag_recv_msg_all(s->fd, buf, sizeof(buf), fds, &nfds, MSG_DONTWAIT);

		if (n == 0 && !nfds) {
			/* SOCK_SEQPACKET: 0 is a hang-up, or a message of no bytes. */
			struct pollfd p = { .fd = s->fd, .events = POLLRDHUP };
			if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP))) {
				session_drop(srv, s, 0, NULL);
				return;
			}
		}
		if (n == -EAGAIN)
			return;
		if (n == -ECONNRESET || n == -EPIPE) {
			/* It went away with a reply unread: a hang-up, no misdeed. */
			closer_close_fds(srv->closer, fds, nfds);
			session_drop(srv, s, 0, NULL);
			return;
		}
		if (n <= 0) {
			int err = n ? (int)n : -EBADMSG;
			if (n != -EMFILE)
				request_refuse_connection(s->fd, err, recv_failure(n));
			session_drop(srv, s, err, recv_failure(n));
		} else {
			/* An ALLOC parked: nothing more is read until it is answered. */
			if (session_judge(srv, s, request_dispatch(srv, s, buf, (size_t)n, fds, nfds)) &&
			    s->parked)
				session_watch(srv->ep, s, 0);
			answer_charge(srv, s, &(struct loop_work){ .requests = 1 });
		}
		/* Whatever no handler took over; its release may block. */
		closer_close_fds(srv->closer, fds, nfds);
	}
}

void session_on_event(struct server *srv, struct session *s, uint32_t events)
{
	/* Sessions are freed only after the batch: this one is valid even if
	 * it was dropped by an earlier event. */
	if (session_dead(s))
		return;
	/* A session that reads nothing for now (a parked ALLOC, an answer being
	 * sent, its user over budget) still hears of a hang-up: epoll always
	 * reports it. */
	if ((s->answer || s->held || s->parked) && (events & (EPOLLHUP | EPOLLERR)))
		session_drop(srv, s, 0, NULL);
	else if (s->answer || s->held)
		answer_on_event(srv, s, events);
	else
		session_on_readable(srv, s);
}

/* What became of s's parked ALLOC, served again: once it is answered, the
 * client is read again (level-triggered: what queued is read next). */
static void unpark(struct server *srv, struct session *s, struct req_verdict v)
{
	if (session_judge(srv, s, v) && !s->parked)
		session_watch(srv->ep, s, EPOLLIN);
}

/* ---------------------------------------------------------------- */
/* Commands the scanner handed back                                  */
/* ---------------------------------------------------------------- */

void session_on_done(struct server *srv, struct session *s, struct scanner_cmd *c)
{
	struct slot_done d = slot_table_done(&s->slots, c);

	closer_close(srv->closer, d.close_fd);
	switch (d.then) {
	case SLOT_DONE_NOTHING:
		break;
	case SLOT_DONE_BIND:
		if (!session_dead(s) &&
		    request_reply(s, CUFLAG_MSG_BIND, c->req_id, 0, NULL, 0, NULL, 0) < 0)
			session_drop(srv, s, -EPIPE, "cannot send a reply");
		break;
	case SLOT_DONE_FREED:
		if (s->parked && !session_dead(s))
			unpark(srv, s, request_retry_parked(srv, s, 1));
		break;
	case SLOT_DONE_IMPORT:
		session_judge(srv, s, export_on_done(s, c));
		break;
	case SLOT_DONE_GONE:
		/* Last command of a dead session: nothing in the scanner refers to
		 * it (it left the park set already). */
		region_discard(&s->region);
		session_release(srv, s);
		session_bury(srv, s);
		break;
	}
	free(c);
}

/* ---------------------------------------------------------------- */
/* What the loop asks of every session                               */
/* ---------------------------------------------------------------- */

void sessions_run_answers(struct server *srv)
{
	struct req_verdict v;
	struct session *s;

	answers_run(srv);
	while ((s = answer_take_failed(srv, &v)))
		session_judge(srv, s, v);
}

/* What the scanner found of a client it stopped serving, and what follows:
 * one line says both. */
static void broken_line(const struct session *s, int why, uint64_t cooldown_ms, char *line,
			size_t size)
{
	size_t n = (size_t)snprintf(line, size, "%s", broken_kind(why)->text);

	if (why == BROKEN_COST && s->scan->cost_share && n < size)
		n += (size_t)snprintf(line + n, size - n,
				      " (its writes wanted more than their share of every pass"
				      " for %llu s: %u writes, %llu us each on average)",
				      (unsigned long long)(FAIR_SHARE_DROP_NS / 1000000000u),
				      s->scan->cost_writes,
				      (unsigned long long)(s->scan->cost_ns / 1000 /
							   (s->scan->cost_writes ? s->scan->cost_writes
										 : 1)));
	else if (why == BROKEN_COST && n < size)
		n += (size_t)snprintf(line + n, size - n,
				      " (its last costly write cost %llu us of CPU; costly writes:"
				      " %u in a row, %u in %llu ms)",
				      (unsigned long long)(s->scan->cost_ns / 1000),
				      s->scan->cost_streak, s->scan->cost_lately,
				      (unsigned long long)(WRITE_BUDGET_OFTEN_NS / 1000000));
	if (cooldown_ms && n < size)
		snprintf(line + n, size - n, "; new clients of this user refused for %llu s",
			 (unsigned long long)((cooldown_ms + 999) / 1000));
}

static void drop_if_broken(struct session *s, void *arg)
{
	struct server *srv = arg;
	int why = atomic_load(&s->scan->broken);
	char line[256];
	uint64_t ms = 0;

	if (!why)
		return;
	if (broken_kind(why)->penalised)
		ms = penalty_strike(&srv->penalties, s->uid, cuflag_now_ms());
	if (ms)
		metrics_on_cooldown(srv, s);
	broken_line(s, why, ms, line, sizeof(line));
	session_drop(srv, s, -EPROTO, line);
}

void sessions_drop_broken(struct server *srv)
{
	registry_each(&srv->reg, REG_ATTACHED, drop_if_broken, srv);
}

static void drop_if_late(struct session *s, void *arg)
{
	struct server *srv = arg;

	if (!s->scan && !s->admin &&
	    cuflag_now_ms() - s->connected_ms >= srv->cfg->hello_timeout_ms)
		session_drop(srv, s, -ETIMEDOUT, "no HELLO and ATTACH within hello-timeout-ms");
}

void sessions_drop_late(struct server *srv)
{
	registry_each(&srv->reg, REG_LIVE, drop_if_late, srv);
}

static void expire_parked(struct session *s, void *arg)
{
	if (s->parked)
		unpark(arg, s, request_expire_parked(arg, s, cuflag_now_ms()));
}

void sessions_expire_parked(struct server *srv)
{
	registry_each(&srv->reg, REG_LIVE, expire_parked, srv);
}

void session_on_punched(struct server *srv, uint8_t *map)
{
	struct session *s = registry_find_addr(&srv->reg, map);

	if (s && !session_dead(s))
		session_drop(srv, s, -EFAULT, "a hole was punched in its region");
}
