/* SPDX-License-Identifier: MIT */
#include "exporter.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "fd-util.h"
#include "prom.h"
#include "query.h"

/* A request's head (request line and headers) larger than this is refused. */
#define HEAD_MAX 8192
/* A peer gets this long to send its request's head: Prometheus sends it at
 * once, so a connection that says nothing is let go soon. */
#define READ_TIMEOUT_MS 2000
/* And this long to take the answer (a large one, to a slow reader). */
#define WRITE_TIMEOUT_MS 5000
/* Connections held at once: more than a scraper and a crowd of peers that
 * hold a connection without sending or reading. */
#define CONNS_MAX 128
/* Past this, a peer that holds a connection without sending its whole
 * request, or without taking any of its answer, may be closed to make room
 * for a new one; before it, a new peer is never closed: a scraper's request
 * may still be on its way. */
#define GRACE_MS 500
/* Peers taken from the backlog in one turn of the loop at most. */
#define ACCEPT_BATCH 16
/* Out of fds or memory for accept: the listening socket rests this long. */
#define ACCEPT_PAUSE_MS 100

/* One peer: reading its request's head, then (out set) sending the answer. */
struct conn {
	int fd;            /* -1: a free entry */
	uint64_t since_ms; /* accepted then; once answering, when it last took some */
	uint64_t deadline_ms;
	size_t len;        /* of head */
	char *out;         /* the answer (malloc'ed), once the head is read */
	size_t out_len, out_off;
	char head[HEAD_MAX];
};

/* ---------------------------------------------------------------- */
/* Listening                                                         */
/* ---------------------------------------------------------------- */

/* A listening socket on a, or a negative errno. An IPv6 one takes IPv4 too
 * (IPV6_V6ONLY off: on "::", every address of both). */
static int listen_at(const struct addrinfo *a)
{
	int one = 1, off = 0, err;
	int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			a->ai_protocol);

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (a->ai_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0) ||
	    bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, CONNS_MAX) < 0) {
		err = -errno;
		safe_close(fd);
		return err;
	}
	return fd;
}

static void say_where(const char *spec, const struct addrinfo *a, int any, int v6_err)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];

	if (getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(host, sizeof(host), "?");
	if (a->ai_family == AF_INET6)
		fprintf(stderr, "cuflagctl: --listen %s: on [%s]:%s%s\n", spec, host, port,
			any ? " (IPv6 and IPv4)" : "");
	else if (any)
		fprintf(stderr, "cuflagctl: --listen %s: on %s:%s (IPv4 only; IPv6: %s)\n", spec,
			host, port, strerror(-v6_err));
	else
		fprintf(stderr, "cuflagctl: --listen %s: on %s:%s\n", spec, host, port);
}

/*
 * The listening socket for spec ("HOST:PORT", "[V6]:PORT", ":PORT"), or a
 * negative errno (said on stderr). ":PORT" is every address: "::" with
 * IPv4 mapped into it, or, where there is no IPv6 (no such family, or no
 * such address), 0.0.0.0.
 */
static int listen_on(const char *spec)
{
	char host[256], *port, *h = host;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai, *a;
	int fd = -EADDRNOTAVAIL, v6_err = -EAFNOSUPPORT, rc, any;

	if (snprintf(host, sizeof(host), "%s", spec) >= (int)sizeof(host) ||
	    !(port = strrchr(host, ':'))) {
		fprintf(stderr, "cuflagctl: --listen %s: not HOST:PORT\n", spec);
		return -EINVAL;
	}
	*port++ = 0;
	/* "[::1]:9446": the brackets are not part of the address. */
	if (h[0] == '[' && h[strlen(h) - 1] == ']') {
		h[strlen(h) - 1] = 0;
		h++;
	}
	any = !h[0];
	rc = getaddrinfo(any ? NULL : h, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "cuflagctl: --listen %s: %s\n", spec, gai_strerror(rc));
		return -EINVAL;
	}
	/* Every address: the IPv6 one first (getaddrinfo gives 0.0.0.0 first). */
	for (int pass = 0; pass < 2 && fd < 0; pass++) {
		for (a = ai; a && fd < 0; a = a->ai_next) {
			if (any ? (a->ai_family == AF_INET6) == pass : pass)
				continue;
			fd = listen_at(a);
			if (fd >= 0)
				say_where(spec, a, any, v6_err);
			else if (a->ai_family == AF_INET6)
				v6_err = fd;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0)
		fprintf(stderr, "cuflagctl: --listen %s: %s\n", spec, strerror(-fd));
	return fd;
}

/* ---------------------------------------------------------------- */
/* Answering                                                         */
/* ---------------------------------------------------------------- */

static void conn_close(struct conn *c)
{
	c->fd = safe_close(c->fd);
	free(c->out);
	c->out = NULL;
}

/* The answer to send: the status line, the headers, and (but for HEAD) body. */
static void respond(struct conn *c, const char *status, const char *type, const char *body,
		    size_t len, int head_only)
{
	FILE *f = open_memstream(&c->out, &c->out_len);

	if (!f) {
		conn_close(c);
		return;
	}
	fprintf(f,
		"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		"Connection: close\r\n\r\n",
		status, type, len);
	if (!head_only)
		fwrite(body, 1, len, f);
	if (fclose(f)) {
		conn_close(c);
		return;
	}
	c->out_off = 0;
	c->deadline_ms = cuflag_now_ms() + WRITE_TIMEOUT_MS;
}

/* The metrics text of one look at the daemon: every request whose head
 * came in the same turn of the loop is answered with it, so that a crowd of
 * requests costs the daemon one METRICS, not one each. */
struct scrape_text {
	char *body; /* NULL: not asked yet this turn */
	size_t len;
	int ok;
};

static void scrape_text_clear(struct scrape_text *t)
{
	free(t->body);
	*t = (struct scrape_text){ 0 };
}

/* The daemon's metrics, or cuflag_up 0 when it cannot be asked (the scrape
 * itself succeeds: Prometheus records the 0); ok 0 when out of memory. */
static void scrape_text_make(struct scrape_text *t, const char *socket_path)
{
	static uint64_t last_complaint_ms;
	struct ctl_conn c;
	struct ctl_metrics m;
	FILE *f = open_memstream(&t->body, &t->len);
	int rc;

	if (!f) {
		t->ok = 0;
		return;
	}
	rc = ctl_open(&c, socket_path);
	if (!rc)
		rc = ctl_metrics(&c, &m);
	if (!rc) {
		prom_write(f, &m);
		ctl_metrics_free(&m);
	} else {
		uint64_t now = cuflag_now_ms();
		/* At most one line a minute about a daemon that is away. */
		if (!last_complaint_ms || now - last_complaint_ms >= 60000) {
			fprintf(stderr, "cuflagctl: metrics: %s\n", c.why);
			last_complaint_ms = now;
		}
		prom_write_down(f);
	}
	ctl_close(&c);
	t->ok = fclose(f) == 0;
}

static void scrape(struct conn *conn, const char *socket_path, int head_only,
		   struct scrape_text *t)
{
	if (!t->body)
		scrape_text_make(t, socket_path);
	if (t->ok)
		respond(conn, "200 OK", PROM_CONTENT_TYPE, t->body, t->len, head_only);
	else
		respond(conn, "500 Internal Server Error", "text/plain", "", 0, head_only);
}

/* The request's head is in: what it asks for becomes c's answer. */
static void answer(struct conn *c, const char *socket_path, struct scrape_text *t)
{
	static const char index_page[] =
		"<html><head><title>cuflag exporter</title></head><body>"
		"<h1>cuflag exporter</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>\n";
	char method[8], path[256];
	int head_only;

	if (sscanf(c->head, "%7s %255s HTTP/1.%*c", method, path) != 2) {
		respond(c, "400 Bad Request", "text/plain", "bad request\n", 12, 0);
		return;
	}
	head_only = !strcmp(method, "HEAD");
	if (strcmp(method, "GET") && !head_only) {
		respond(c, "405 Method Not Allowed", "text/plain", "GET only\n", 9, 0);
		return;
	}
	/* A query string (Prometheus sends none, curl users may) is ignored. */
	path[strcspn(path, "?")] = 0;
	if (!strcmp(path, "/metrics"))
		scrape(c, socket_path, head_only, t);
	else if (!strcmp(path, "/"))
		respond(c, "200 OK", "text/html", index_page, sizeof(index_page) - 1, head_only);
	else
		respond(c, "404 Not Found", "text/plain", "not found\n", 10, head_only);
}

/* ---------------------------------------------------------------- */
/* Connections                                                       */
/* ---------------------------------------------------------------- */

/* Send what the socket takes now; closed once all is sent, or on an error. */
static void conn_write(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0)
			break;
		c->out_off += (size_t)n;
		c->since_ms = cuflag_now_ms();
	}
	conn_close(c);
}

/* Read what has come of the head; once it is whole, answer. */
static void conn_read(struct conn *c, const char *socket_path, struct scrape_text *t)
{
	ssize_t n = recv(c->fd, c->head + c->len, sizeof(c->head) - 1 - c->len, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c); /* gone, or an error: no one to answer */
		return;
	}
	c->len += (size_t)n;
	c->head[c->len] = 0;
	if (strstr(c->head, "\r\n\r\n") || strstr(c->head, "\n\n"))
		answer(c, socket_path, t);
	else if (c->len == sizeof(c->head) - 1)
		respond(c, "400 Bad Request", "text/plain", "bad request\n", 12, 0);
	if (c->fd >= 0 && c->out)
		conn_write(c);
}

/* The peer to close for a new one: of those holding a connection without
 * sending their request or taking their answer for GRACE_MS, the one that
 * has done so longest; NULL if none. A peer being answered is counted from
 * the last time it took some: a scraper reading a large answer is cut only
 * if it stops taking it while every place is held. */
static struct conn *idlest(struct conn *conns, uint64_t now)
{
	struct conn *worst = NULL;

	for (int i = 0; i < CONNS_MAX; i++) {
		struct conn *c = &conns[i];
		if (c->fd < 0 || now - c->since_ms < GRACE_MS)
			continue;
		if (!worst || c->since_ms < worst->since_ms)
			worst = c;
	}
	return worst;
}

/* A free entry for a new peer: a free one, else the idlest peer's (closed);
 * NULL if none. */
static struct conn *room(struct conn *conns)
{
	struct conn *c;

	for (int i = 0; i < CONNS_MAX; i++)
		if (conns[i].fd < 0)
			return &conns[i];
	c = idlest(conns, cuflag_now_ms());
	if (c)
		conn_close(c);
	return c;
}

/* Whether a new peer can be taken now; when not, *next_ms is brought
 * forward to when one can. */
static int can_take(struct conn *conns, uint64_t now, uint64_t *next_ms)
{
	uint64_t first = UINT64_MAX;

	for (int i = 0; i < CONNS_MAX; i++) {
		if (conns[i].fd < 0)
			return 1;
		if (conns[i].since_ms < first)
			first = conns[i].since_ms;
	}
	if (now - first >= GRACE_MS)
		return 1;
	if (first + GRACE_MS < *next_ms)
		*next_ms = first + GRACE_MS;
	return 0;
}

/* Take one peer from the backlog: 1 if one was taken. When the process is
 * out of fds or memory, the listening socket rests a moment (*pause_until). */
static int take_one(int lfd, struct conn *conns, uint64_t *pause_until)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct conn *c;

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			fprintf(stderr, "cuflagctl: accept: %s\n", strerror(errno));
			*pause_until = cuflag_now_ms() + ACCEPT_PAUSE_MS;
		}
		return 0; /* EAGAIN, EINTR, ECONNABORTED and the like: nothing */
	}
	c = room(conns);
	if (!c) {
		safe_close(fd); /* not reached: the socket is polled only with room */
		return 0;
	}
	c->fd = fd;
	c->since_ms = cuflag_now_ms();
	c->deadline_ms = c->since_ms + READ_TIMEOUT_MS;
	c->len = 0;
	c->head[0] = 0;
	return 1;
}

int exporter_run(const char *listen, const char *socket_path)
{
	struct conn *conns = calloc(CONNS_MAX, sizeof(*conns));
	struct pollfd pfd[CONNS_MAX + 1];
	struct conn *of[CONNS_MAX + 1];
	struct scrape_text text = { 0 };
	uint64_t pause_until = 0;
	int lfd;

	if (!conns) {
		fprintf(stderr, "cuflagctl: --listen: %s\n", strerror(ENOMEM));
		return -ENOMEM;
	}
	lfd = listen_on(listen);
	if (lfd < 0) {
		free(conns);
		return lfd;
	}
	for (int i = 0; i < CONNS_MAX; i++)
		conns[i].fd = -1;
	signal(SIGPIPE, SIG_IGN);
	fprintf(stderr, "cuflagctl: serving /metrics on %s for %s\n", listen, socket_path);
	for (;;) {
		uint64_t now = cuflag_now_ms(), next = now + 60000;
		nfds_t n = 0;
		int listening = now >= pause_until && can_take(conns, now, &next);

		if (listening) {
			pfd[n] = (struct pollfd){ .fd = lfd, .events = POLLIN };
			of[n++] = NULL;
		} else if (now < pause_until) {
			next = pause_until;
		}
		for (int i = 0; i < CONNS_MAX; i++) {
			if (conns[i].fd < 0)
				continue;
			pfd[n] = (struct pollfd){ .fd = conns[i].fd,
						  .events = conns[i].out ? POLLOUT : POLLIN };
			of[n++] = &conns[i];
			if (conns[i].deadline_ms < next)
				next = conns[i].deadline_ms;
		}
		if (poll(pfd, n, next > now ? (int)(next - now) : 0) < 0 && errno != EINTR) {
			int err = -errno;
			fprintf(stderr, "cuflagctl: poll: %s\n", strerror(-err));
			for (int i = 0; i < CONNS_MAX; i++)
				conn_close(&conns[i]);
			free(conns);
			safe_close(lfd);
			return err;
		}
		for (nfds_t k = 0; k < n; k++) {
			struct conn *c = of[k];
			if (!pfd[k].revents || !c || c->fd < 0)
				continue;
			if (c->out)
				conn_write(c);
			else
				conn_read(c, socket_path, &text);
		}
		scrape_text_clear(&text);
		/* Late peers are let go (silent ones, and slow readers of the answer). */
		now = cuflag_now_ms();
		for (int i = 0; i < CONNS_MAX; i++)
			if (conns[i].fd >= 0 && conns[i].deadline_ms <= now)
				conn_close(&conns[i]);
		/* A few peers a turn: a scraper behind a crowd in the backlog
		 * is not kept waiting a turn for each of them. */
		for (int k = 0; k < ACCEPT_BATCH && listening && (pfd[0].revents & POLLIN); k++)
			listening = take_one(lfd, conns, &pause_until) &&
				    can_take(conns, cuflag_now_ms(), &next);
	}
}
