/* SPDX-License-Identifier: MIT */
#include "query.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "fd-util.h"
#include "unix-socket.h"

/* More than a daemon can hold (max-clients is at most 65536): a runaway list. */
#define CLIENTS_MAX (1u << 17)

static int fail(struct ctl_conn *c, int err, const char *what)
{
	snprintf(c->why, sizeof(c->why), "%s: %s", what, strerror(-err));
	return err;
}

int ctl_open(struct ctl_conn *c, const char *path)
{
	/* Blocking with a timeout: a stuck daemon is reported, not waited for. */
	int fd = cuflag_unix_connect(path, CUFLAG_REPLY_TIMEOUT_S);

	c->next_id = 0;
	c->why[0] = 0;
	c->fd = fd < 0 ? -1 : fd;
	if (fd < 0) {
		const char *hint = cuflag_unix_connect_hint(fd);
		snprintf(c->why, sizeof(c->why), "%s: %s%s%s", path, strerror(-fd),
			 hint ? ": " : "", hint ? hint : "");
		return fd;
	}
	return 0;
}

void ctl_close(struct ctl_conn *c)
{
	c->fd = safe_close(c->fd);
}

/* Send a query (a body of blen bytes, no fds) on a call of type, with a fresh id. */
static int send_query_body(struct ctl_conn *c, struct cuflag_call *call, uint16_t type,
			   void *buf, const void *body, uint32_t blen)
{
	int rc;

	*call = (struct cuflag_call){
		.type = type, .id = ++c->next_id, .reply = buf, .body = body, .blen = blen
	};
	rc = cuflag_call_send(c->fd, call);
	if (rc == -EAGAIN)
		rc = -ETIMEDOUT;
	return rc ? fail(c, rc, "sending the request") : 0;
}

static int send_query(struct ctl_conn *c, struct cuflag_call *call, uint16_t type, void *buf)
{
	return send_query_body(c, call, type, buf, NULL, 0);
}

/*
 * Receive one reply to call and copy its body (exactly blen bytes, the reply
 * check made sure) to body. A daemon's error reply is returned as its status
 * with its reason in c->why.
 */
static int recv_reply(struct ctl_conn *c, struct cuflag_call *call, void *body, size_t blen)
{
	int rc = cuflag_call_recv(c->fd, call);

	if (call->why) {
		snprintf(c->why, sizeof(c->why), "malformed reply: %s", call->why);
		return rc;
	}
	if (rc < 0 && call->reply_len) {
		size_t rlen = call->reply_len - sizeof(struct cuflag_msg_hdr);
		/* The reason is the daemon's text: keep it inside its bytes. */
		snprintf(c->why, sizeof(c->why), "the daemon refused: %.*s", (int)rlen,
			 (const char *)cuflag_call_body(call));
		return rc;
	}
	if (rc == -ENOTCONN)
		return fail(c, -ECONNRESET, "the daemon hung up");
	if (rc == -ETIMEDOUT)
		return fail(c, rc, "waiting for the reply");
	if (rc < 0)
		return fail(c, rc, "receiving the reply");
	memcpy(body, cuflag_call_body(call), blen);
	return 0;
}

int ctl_stats(struct ctl_conn *c, struct cuflag_msg_stats_reply *out)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_call call;
	int rc = send_query(c, &call, CUFLAG_MSG_STATS, buf);

	return rc ? rc : recv_reply(c, &call, out, sizeof(*out));
}

/* Room for one more element of size in *v (cap, len counted in elements). */
static int grow(struct ctl_conn *c, void **v, size_t *cap, size_t len, size_t size)
{
	size_t ncap;
	void *nv;

	if (len < *cap)
		return 0;
	if (len >= CLIENTS_MAX)
		return fail(c, -EBADMSG, "a list without an end");
	ncap = *cap ? *cap * 2 : 16;
	nv = realloc(*v, ncap * size);
	if (!nv)
		return fail(c, -ENOMEM, "a list");
	*v = nv;
	*cap = ncap;
	return 0;
}

/* A record of size bytes appended to the list *v of *n (room for *cap). */
static int append(struct ctl_conn *c, void **v, size_t *cap, size_t *n, const void *rec,
		  size_t size)
{
	int rc = grow(c, v, cap, *n, size);

	if (!rc)
		memcpy((uint8_t *)*v + (*n)++ * size, rec, size);
	return rc;
}

/* Where ctl_metrics() grows its lists. */
struct metrics_room {
	size_t users, totals, clients;
};

/* One METRICS page: records into m, *next the next page's after_id (0: none). */
static int metrics_page(struct ctl_conn *c, struct ctl_metrics *m, uint32_t after, uint32_t want,
			uint32_t *next, struct metrics_room *room)
{
	struct cuflag_msg_metrics q = { .after_id = after, .want = after ? 0 : want };
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_call call;
	int rc = send_query_body(c, &call, CUFLAG_MSG_METRICS, buf, &q, sizeof(q));

	while (rc == 0) {
		const uint8_t *body;
		uint32_t kind;

		rc = recv_reply(c, &call, &kind, sizeof(kind));
		if (rc)
			break;
		/* The reply check made sure the length is the kind's. */
		body = cuflag_call_body(&call);
		switch (kind) {
		case CUFLAG_METRICS_END: {
			struct cuflag_metrics_end e;
			memcpy(&e, body, sizeof(e));
			*next = e.next_after;
			if (*next && *next <= after)
				return fail(c, -EBADMSG, "METRICS pages going backwards");
			return 0;
		}
		case CUFLAG_METRICS_DAEMON:
			memcpy(&m->daemon, body, sizeof(m->daemon));
			break;
		case CUFLAG_METRICS_USER:
			rc = append(c, (void **)&m->users, &room->users, &m->nusers, body,
				    sizeof(*m->users));
			break;
		case CUFLAG_METRICS_PROCESS: {
			struct cuflag_metrics_process p;
			memcpy(&p, body, sizeof(p));
			m->start_unix_ms = p.start_unix_ms;
			break;
		}
		case CUFLAG_METRICS_USER_TOTALS:
			rc = append(c, (void **)&m->totals, &room->totals, &m->ntotals, body,
				    sizeof(*m->totals));
			break;
		case CUFLAG_METRICS_CLIENT:
			rc = append(c, (void **)&m->clients, &room->clients, &m->nclients, body,
				    sizeof(*m->clients));
			break;
		}
	}
	return rc;
}

int ctl_metrics(struct ctl_conn *c, struct ctl_metrics *out)
{
	struct metrics_room room = { 0 };
	struct cuflag_msg_stats_reply st;
	uint32_t after = 0, next = 0, want = CUFLAG_METRICS_WANT_ALL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = ctl_stats(c, &st);
	if (rc)
		return rc;
	snprintf(out->version, sizeof(out->version), "%.*s", (int)sizeof(st.daemon_version),
		 st.daemon_version);
	rc = metrics_page(c, out, 0, want, &next, &room);
	/* A daemon older than the totals refuses to be asked for them. */
	if (rc == -EINVAL && !out->nusers && !out->nclients) {
		want = 0;
		rc = metrics_page(c, out, 0, want, &next, &room);
	}
	for (after = next; !rc && after; after = next)
		rc = metrics_page(c, out, after, want, &next, &room);
	if (rc)
		ctl_metrics_free(out);
	else if (out->daemon.kind != CUFLAG_METRICS_DAEMON)
		rc = fail(c, -EBADMSG, "METRICS without the daemon's record");
	return rc;
}

int ctl_daemon_flags(struct ctl_conn *c, uint32_t *flags)
{
	struct metrics_room room = { 0 };
	struct ctl_metrics m = { 0 };
	uint32_t next = 0;
	int rc = metrics_page(c, &m, 0, 0, &next, &room);

	if (!rc && m.daemon.kind != CUFLAG_METRICS_DAEMON)
		rc = fail(c, -EBADMSG, "METRICS without the daemon's record");
	*flags = m.daemon.flags;
	ctl_metrics_free(&m);
	return rc;
}

void ctl_metrics_free(struct ctl_metrics *m)
{
	free(m->users);
	free(m->totals);
	free(m->clients);
	m->users = NULL;
	m->totals = NULL;
	m->clients = NULL;
	m->nusers = m->ntotals = m->nclients = 0;
}

/*
 * A query answered by one reply of size bytes per element, then one whose
 * first word (a client id) is 0: the elements into *list (malloc'ed), the
 * last reply into end.
 */
static int ctl_list(struct ctl_conn *c, uint16_t type, size_t size, void **list, size_t *n,
		    void *end)
{
	uint8_t buf[CUFLAG_MSG_MAX], one[CUFLAG_MSG_MAX];
	size_t cap = 0, len = 0;
	struct cuflag_call call;
	uint32_t id;
	void *v = NULL;
	int rc = send_query(c, &call, type, buf);

	while (rc == 0) {
		rc = recv_reply(c, &call, one, size);
		if (rc)
			break;
		memcpy(&id, one, sizeof(id));
		if (id == 0) {
			memcpy(end, one, size);
			*list = v;
			*n = len;
			return 0;
		}
		if ((rc = grow(c, &v, &cap, len, size)))
			break;
		memcpy((uint8_t *)v + len++ * size, one, size);
	}
	free(v);
	return rc;
}

int ctl_stuck(struct ctl_conn *c, struct cuflag_msg_stuck_slot **list, size_t *n,
	      uint32_t *more)
{
	struct cuflag_msg_stuck_slot end;
	int rc = ctl_list(c, CUFLAG_MSG_STUCK, sizeof(end), (void **)list, n, &end);

	*more = rc ? 0 : end.slot;
	return rc;
}

/* The daemon's text of at most n bytes into dst (n + 1 bytes): cut at n, and
 * anything but printable ASCII made '?' (what the daemon sends already is). */
static void copy_text(char *dst, const char *src, size_t n)
{
	size_t i;

	for (i = 0; i < n && src[i]; i++)
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
	dst[i] = 0;
}

static void ident_of(struct ctl_ident *w, const struct cuflag_metrics_client *r)
{
	copy_text(w->comm, r->comm, sizeof(r->comm));
	copy_text(w->unit, r->unit, sizeof(r->unit));
	copy_text(w->cgroup, r->cgroup, sizeof(r->cgroup));
	copy_text(w->pod, r->pod, sizeof(r->pod));
	copy_text(w->container, r->container, sizeof(r->container));
}

static int by_id(const void *a, const void *b)
{
	uint32_t x = ((const struct cuflag_metrics_client *)a)->client_id;
	uint32_t y = ((const struct cuflag_metrics_client *)b)->client_id;

	return x < y ? -1 : x > y;
}

/* Fill in who each of the n clients is from METRICS, best effort. Ids are
 * never reused while a daemon runs; the pid must match too. */
static void name_clients(struct ctl_conn *c, struct ctl_client *v, size_t n)
{
	struct ctl_metrics m;

	if (!n)
		return;
	if (ctl_metrics(c, &m)) {
		c->why[0] = 0; /* no error of the command's */
		return;
	}
	qsort(m.clients, m.nclients, sizeof(*m.clients), by_id);
	for (size_t i = 0; i < n; i++) {
		struct cuflag_metrics_client key = { .client_id = v[i].info.client_id };
		const struct cuflag_metrics_client *r =
			bsearch(&key, m.clients, m.nclients, sizeof(*m.clients), by_id);
		if (r && r->pid == v[i].info.pid)
			ident_of(&v[i].who, r);
	}
	ctl_metrics_free(&m);
}

int ctl_clients(struct ctl_conn *c, struct ctl_client **list, size_t *n)
{
	struct cuflag_msg_client_info end, *info = NULL;
	struct ctl_client *v;
	size_t len = 0;
	int rc = ctl_list(c, CUFLAG_MSG_CLIENTS, sizeof(end), (void **)&info, &len, &end);

	if (rc)
		return rc;
	v = calloc(len ? len : 1, sizeof(*v));
	if (!v) {
		free(info);
		return fail(c, -ENOMEM, "the clients");
	}
	for (size_t i = 0; i < len; i++)
		v[i].info = info[i];
	free(info);
	name_clients(c, v, len);
	*list = v;
	*n = len;
	return 0;
}
