/* SPDX-License-Identifier: MIT */
#include "exporter.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "prom.h"
#include "query.h"

/* A request's head (request line and headers) larger than this is refused. */
#define HEAD_MAX 8192
/* A peer gets this long to send its request and take the answer. */
#define PEER_TIMEOUT_MS 5000

static int listen_on(const char *spec)
{
	char host[256], *port;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai, *a;
	int fd = -1, rc, one = 1;

	if (snprintf(host, sizeof(host), "%s", spec) >= (int)sizeof(host) ||
	    !(port = strrchr(host, ':'))) {
		fprintf(stderr, "cuflagctl: --listen %s: not HOST:PORT\n", spec);
		return -EINVAL;
	}
	*port++ = 0;
	/* "[::1]:9446": the brackets are not part of the address. */
	char *h = host;
	if (h[0] == '[' && h[strlen(h) - 1] == ']') {
		h[strlen(h) - 1] = 0;
		h++;
	}
	rc = getaddrinfo(h[0] ? h : NULL, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "cuflagctl: --listen %s: %s\n", spec, gai_strerror(rc));
		return -EINVAL;
	}
	rc = -EADDRNOTAVAIL;
	for (a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, 16) < 0) {
			rc = -errno;
			fd = safe_close(fd);
		}
	}
	freeaddrinfo(ai);
	if (fd < 0)
		fprintf(stderr, "cuflagctl: --listen %s: %s\n", spec, strerror(-rc));
	return fd < 0 ? rc : fd;
}

/* Read the request's head into buf (NUL-terminated): its length, or -1 when
 * the peer went away, took too long or sent too much. */
static ssize_t read_head(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (len + 1 < cap) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		struct timespec t;
		ssize_t n;
		long left;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = PEER_TIMEOUT_MS - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&p, 1, (int)left) != 1)
			return -1;
		n = recv(fd, buf + len, cap - 1 - len, 0);
		if (n <= 0)
			return -1;
		len += (size_t)n;
		buf[len] = 0;
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			return (ssize_t)len;
	}
	return -1;
}

static void send_all(int fd, const char *p, size_t len)
{
	while (len) {
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		ssize_t n;

		if (poll(&pf, 1, PEER_TIMEOUT_MS) != 1)
			return;
		n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

static void respond(int fd, const char *status, const char *type, const char *body, size_t len,
		    int head_only)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 status, type, len);

	send_all(fd, head, (size_t)n);
	if (!head_only)
		send_all(fd, body, len);
}

/* What /metrics answers: the daemon's metrics, or cuflag_up 0 when it cannot
 * be asked (the scrape itself succeeds: Prometheus records the 0). */
static void scrape(int fd, const char *socket_path, int head_only)
{
	static struct timespec last_complaint;
	struct ctl_conn c;
	struct ctl_metrics m;
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);
	int rc;

	if (!f) {
		respond(fd, "500 Internal Server Error", "text/plain", "", 0, head_only);
		return;
	}
	rc = ctl_open(&c, socket_path);
	if (!rc)
		rc = ctl_metrics(&c, &m);
	if (!rc) {
		prom_write(f, &m);
		ctl_metrics_free(&m);
	} else {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		/* At most one line a minute about a daemon that is away. */
		if (!last_complaint.tv_sec || now.tv_sec - last_complaint.tv_sec >= 60) {
			fprintf(stderr, "cuflagctl: metrics: %s\n", c.why);
			last_complaint = now;
		}
		prom_write_down(f);
	}
	ctl_close(&c);
	if (fclose(f) == 0)
		respond(fd, "200 OK", PROM_CONTENT_TYPE, body, len, head_only);
	free(body);
}

static void serve(int fd, const char *socket_path)
{
	static const char index_page[] =
		"<html><head><title>cuflag exporter</title></head><body>"
		"<h1>cuflag exporter</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>\n";
	char buf[HEAD_MAX], method[8], path[256];
	int head_only;

	if (read_head(fd, buf, sizeof(buf)) < 0 ||
	    sscanf(buf, "%7s %255s HTTP/1.%*c", method, path) != 2) {
		respond(fd, "400 Bad Request", "text/plain", "bad request\n", 12, 0);
		return;
	}
	head_only = !strcmp(method, "HEAD");
	if (strcmp(method, "GET") && !head_only) {
		respond(fd, "405 Method Not Allowed", "text/plain", "GET only\n", 9, 0);
		return;
	}
	/* A query string (Prometheus sends none, curl users may) is ignored. */
	path[strcspn(path, "?")] = 0;
	if (!strcmp(path, "/metrics"))
		scrape(fd, socket_path, head_only);
	else if (!strcmp(path, "/"))
		respond(fd, "200 OK", "text/html", index_page, sizeof(index_page) - 1, head_only);
	else
		respond(fd, "404 Not Found", "text/plain", "not found\n", 10, head_only);
}

int exporter_run(const char *listen, const char *socket_path)
{
	int lfd = listen_on(listen);

	if (lfd < 0)
		return lfd;
	signal(SIGPIPE, SIG_IGN);
	fprintf(stderr, "cuflagctl: serving /metrics on %s for %s\n", listen, socket_path);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			/* Out of fds or memory: wait a moment, do not spin. */
			fprintf(stderr, "cuflagctl: accept: %s\n", strerror(errno));
			sleep(1);
			continue;
		}
		serve(fd, socket_path);
		close(fd);
	}
}
