/* SPDX-License-Identifier: MIT */
/*
 * A hostile client against the real daemon. One well-behaved client (the
 * library) completes arms in a thread for the whole run, while raw
 * SOCK_SEQPACKET connections send every malformed message the protocol can
 * refuse, scribble over their own region, make their eventfd block the
 * scanner, and open more connections than the daemon allows. After each:
 * the reply is an error with a reason, the connection is closed where the
 * protocol says so, the daemon logged one line naming our pid and uid, its
 * fd count is back to where it was, and the good client's completions are
 * all there, counted exactly.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "fdpass.h"
#include "harness.h"
#include "proto.h"

#define MAX_CLIENTS 8
#define SLOTS_PER_CLIENT 128
#define QUEUE_SIZE 64
/* Longest a good completion may take while a hostile client does its worst. */
#define GOOD_LATENCY_MAX_NS (1000u * 1000000u)
/* A write a client made block is cut within the scanner's 2 ms tick; the
 * main loop's backstop alone would take 50-300 ms. */
#define STALL_LATENCY_MAX_NS (100u * 1000000u)
/* The daemon lets 20 client-triggered lines through per second; stay under. */
#define LOG_PACE_NS (60u * 1000000u)

static struct daemon_proc d;
static int baseline_fds;
static int stats_fd = -1; /* a connection without HELLO, for STATS */
static char who[64];      /* "pid=N uid=N" as the daemon logs us */

/* ---------------------------------------------------------------- */
/* The well-behaved client                                           */
/* ---------------------------------------------------------------- */

static struct {
	pthread_t thread;
	cuflag_client *c;
	cuflag_slot *s;
	_Atomic int stop;
	_Atomic int failed; /* 0, or the step that went wrong */
	_Atomic uint64_t armed, completed;
	_Atomic uint64_t max_lat_ns; /* since the last good_reset_latency() */
	_Atomic unsigned pause_us;   /* sleep between completions (0: none) */
} good;

static void good_note_latency(uint64_t ns)
{
	uint64_t old = atomic_load(&good.max_lat_ns);
	while (ns > old && !atomic_compare_exchange_weak(&good.max_lat_ns, &old, ns))
		;
}

/* Arm, store, wait for exactly one completion on the eventfd; again. */
static void *good_main(void *arg)
{
	int fd = cuflag_slot_fd(good.s);

	(void)arg;
	while (!atomic_load(&good.stop)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t got = 0, t0;
		uint32_t t;

		if (cuflag_slot_arm(good.s, &t)) {
			atomic_store(&good.failed, 1);
			return NULL;
		}
		atomic_fetch_add(&good.armed, 1);
		t0 = now_ns();
		sim_store(cuflag_slot_flag(good.s), t);
		while (!got) {
			uint64_t v;
			int rc;
			if (poll(&p, 1, 10000) != 1) {
				atomic_store(&good.failed, 2);
				return NULL;
			}
			rc = cuflag_slot_consume(good.s, &v);
			if (rc == -EAGAIN)
				continue;
			if (rc) {
				atomic_store(&good.failed, 3);
				return NULL;
			}
			got = v;
		}
		good_note_latency(now_ns() - t0);
		atomic_fetch_add(&good.completed, got);
		if (got != 1) {
			atomic_store(&good.failed, 4);
			return NULL;
		}
		if (atomic_load(&good.pause_us))
			usleep(atomic_load(&good.pause_us));
	}
	return NULL;
}

static void good_start(void)
{
	CHECK_RC(cuflag_connect(d.sock, &good.c));
	CHECK_RC(cuflag_slot_acquire(good.c, &good.s));
	CHECK(pthread_create(&good.thread, NULL, good_main, NULL) == 0);
}

static void good_stop(void)
{
	atomic_store(&good.stop, 1);
	CHECK(pthread_join(good.thread, NULL) == 0);
	CHECK(atomic_load(&good.failed) == 0);
	/* Every arm completed, once. */
	CHECK(atomic_load(&good.armed) == atomic_load(&good.completed));
	cuflag_slot_release(good.s);
	cuflag_disconnect(good.c);
}

static void good_reset_latency(void)
{
	atomic_store(&good.max_lat_ns, 0);
}

static int good_progress_pred(void *arg)
{
	return atomic_load(&good.completed) >= *(uint64_t *)arg || atomic_load(&good.failed);
}

/* The good client is healthy and completes n more from now. */
static void good_check(uint64_t n)
{
	uint64_t want = atomic_load(&good.completed) + n;

	CHECK(wait_until(good_progress_pred, &want, 5000));
	CHECK(atomic_load(&good.failed) == 0);
}

/* ---------------------------------------------------------------- */
/* Daemon state: log, fds, liveness                                  */
/* ---------------------------------------------------------------- */

static char logbuf[4 << 20];
static size_t loglen;
static uint64_t last_logged_ns;

static void log_collect(void)
{
	loglen += daemon_read_log(&d, logbuf + loglen, sizeof(logbuf) - loglen);
	CHECK(loglen + 4096 < sizeof(logbuf));
}

/* Lines logged from offset from that contain both a and b. */
static int log_count(size_t from, const char *a, const char *b)
{
	int n = 0;

	log_collect();
	for (char *p = logbuf + from; p < logbuf + loglen;) {
		char *e = memchr(p, '\n', (size_t)(logbuf + loglen - p));
		if (!e)
			break;
		*e = 0;
		if (strstr(p, a) && (!b || strstr(p, b)))
			n++;
		*e = '\n';
		p = e + 1;
	}
	return n;
}

struct log_want {
	size_t from;
	const char *a, *b;
};

static int log_pred(void *arg)
{
	struct log_want *w = arg;
	return log_count(w->from, w->a, w->b) > 0;
}

/* Exactly one line since from names us and says why. */
static void expect_log_line(size_t from, const char *why)
{
	struct log_want w = { from, who, why };

	if (!wait_until(log_pred, &w, 3000)) {
		fprintf(stderr, "no log line with '%s' and '%s'; log since:\n%s\n", who, why,
			logbuf + from);
		fprintf(stderr, "log tail:\n%s\n", loglen > 3000 ? logbuf + loglen - 3000 : logbuf);
		abort();
	}
	CHECK(log_count(from, who, why) == 1);
	last_logged_ns = now_ns();
}

static int paced_pred(void *arg)
{
	(void)arg;
	log_collect();
	return now_ns() >= last_logged_ns + LOG_PACE_NS;
}

/* Before a case that makes the daemon log: stay under its log rate limit. */
static size_t case_begin(void)
{
	CHECK(wait_until(paced_pred, NULL, 2000));
	return loglen;
}

static int daemon_alive(void)
{
	int st;
	return waitpid(d.pid, &st, WNOHANG) == 0;
}

static int fds_back_pred(void *arg)
{
	(void)arg;
	log_collect();
	return daemon_fd_count(&d) == baseline_fds;
}

static void expect_fds_back(void)
{
	if (!wait_until(fds_back_pred, NULL, 5000)) {
		fprintf(stderr, "daemon holds %d fds, %d before\n", daemon_fd_count(&d),
			baseline_fds);
		abort();
	}
	CHECK(daemon_alive());
}

/* ---------------------------------------------------------------- */
/* Raw messages                                                      */
/* ---------------------------------------------------------------- */

static uint32_t next_req = 1000;

struct msg {
	struct cuflag_msg_hdr h;
	uint8_t body[70000];
	size_t blen;
};

static void msg_init(struct msg *m, uint16_t type, const void *body, size_t blen)
{
	CHECK(blen <= sizeof(m->body));
	cuflag_hdr_init(&m->h, type, (uint32_t)(sizeof(m->h) + blen), ++next_req, 0, 0);
	if (blen)
		memcpy(m->body, body, blen);
	m->blen = blen;
}

struct reply {
	struct cuflag_msg_hdr h;
	uint8_t body[CUFLAG_MSG_MAX];
	size_t blen;
	int fds[CUFLAG_MSG_MAX_FDS];
	unsigned nfds;
};

static int raw_connect(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 5 };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", d.sock);
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0);
	return fd;
}

/* Send bytes as they are (the header may lie); 0 or a negative errno. */
static int raw_send_bytes(int fd, const void *buf, size_t len, const int *fds, unsigned nfds)
{
	return cuflag_send_msg(fd, buf, len, fds, nfds, 0);
}

static const uint8_t *msg_bytes(const struct msg *m);

static int raw_send(int fd, const struct msg *m, const int *fds, unsigned nfds)
{
	return raw_send_bytes(fd, msg_bytes(m), sizeof(m->h) + m->blen, fds, nfds);
}

/* One message from the daemon: its length, 0 when it hung up, or -errno. */
static ssize_t raw_recv(int fd, struct reply *r)
{
	static uint8_t buf[CUFLAG_MSG_MAX];
	ssize_t n = cuflag_recv_msg(fd, buf, sizeof(buf), r->fds, CUFLAG_MSG_MAX_FDS, &r->nfds, 0);

	if (n <= 0)
		return n;
	CHECK((size_t)n >= sizeof(r->h));
	memcpy(&r->h, buf, sizeof(r->h));
	CHECK(r->h.len == (uint32_t)n);
	CHECK(r->h.nfds == r->nfds);
	r->blen = (size_t)n - sizeof(r->h);
	memcpy(r->body, buf + sizeof(r->h), r->blen);
	return n;
}

/* The connection was closed by the daemon (after any reply we left unread). */
static void expect_closed(int fd)
{
	struct reply r;
	ssize_t n;

	do {
		n = raw_recv(fd, &r);
		if (n > 0)
			cuflag_close_fds(r.fds, r.nfds);
	} while (n > 0);
	CHECK(n == 0 || n == -ECONNRESET);
}

/* An error reply: negative status (want, unless 0), a reason, no fds. */
static void expect_error(int fd, int want, int want_type, uint32_t want_id, char *why,
			 size_t why_cap)
{
	struct reply r;
	ssize_t n = raw_recv(fd, &r);

	if (n <= 0) {
		fprintf(stderr, "no reply (%zd), wanted status %d\n", n, want);
		abort();
	}
	if (r.h.status >= 0 || (want && r.h.status != want)) {
		fprintf(stderr, "reply status %d, wanted %d\n", r.h.status, want);
		abort();
	}
	if (want_type >= 0 && r.h.type != ((unsigned)want_type | CUFLAG_MSG_REPLY))
		fprintf(stderr, "reply type 0x%x id %u, wanted 0x%x id %u (%s)\n", r.h.type,
			r.h.req_id, (unsigned)want_type | CUFLAG_MSG_REPLY, want_id, (char *)r.body);
	CHECK(r.h.type & CUFLAG_MSG_REPLY);
	if (want_type >= 0)
		CHECK(r.h.type == ((unsigned)want_type | CUFLAG_MSG_REPLY));
	if (want_type > 0)
		CHECK(r.h.req_id == want_id);
	CHECK(r.nfds == 0);
	CHECK(r.blen >= 2 && r.blen <= CUFLAG_REASON_MAX);
	CHECK(r.body[r.blen - 1] == 0);
	CHECK(strlen((char *)r.body) == r.blen - 1);
	CHECK(why_cap >= r.blen);
	memcpy(why, r.body, r.blen);
}

static void expect_ok(int fd, uint16_t type, uint32_t id, struct reply *r)
{
	ssize_t n = raw_recv(fd, r);

	CHECK(n > 0);
	if (r->h.status != 0) {
		fprintf(stderr, "request %u: status %d (%s)\n", type, r->h.status,
			r->blen ? (char *)r->body : "");
		abort();
	}
	CHECK(r->h.type == (type | CUFLAG_MSG_REPLY));
	CHECK(r->h.req_id == id);
}

static void stats_on(int fd, struct cuflag_msg_stats_reply *st)
{
	struct msg m;
	struct reply r;

	msg_init(&m, CUFLAG_MSG_STATS, NULL, 0);
	CHECK_RC(raw_send(fd, &m, NULL, 0));
	expect_ok(fd, CUFLAG_MSG_STATS, m.h.req_id, &r);
	CHECK(r.blen == sizeof(*st));
	memcpy(st, r.body, sizeof(*st));
}

static void stats(struct cuflag_msg_stats_reply *st)
{
	stats_on(stats_fd, st);
}

/* The connection still serves requests. */
static void expect_served(int fd)
{
	struct cuflag_msg_stats_reply st;
	stats_on(fd, &st);
	CHECK(st.max_clients == MAX_CLIENTS);
}

/* HELLO, then ATTACH a region made as the library makes it. fds: [0] the
 * region, [1] the daemon page, [2] the wake eventfd. */
static void raw_hello(int fd, struct cuflag_msg_hello_reply *hr, int fds[3])
{
	struct cuflag_msg_hello h = { .version_min = 1, .version_max = CUFLAG_PROTO_VERSION };
	struct cuflag_msg_attach a = { 0 };
	struct msg m;
	struct reply r;

	msg_init(&m, CUFLAG_MSG_HELLO, &h, sizeof(h));
	CHECK_RC(raw_send(fd, &m, NULL, 0));
	expect_ok(fd, CUFLAG_MSG_HELLO, m.h.req_id, &r);
	CHECK(r.blen == sizeof(*hr) && r.nfds == 1);
	memcpy(hr, r.body, sizeof(*hr));
	fds[1] = r.fds[0];
	fds[0] = make_client_region(hr);
	fds[2] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	msg_init(&m, CUFLAG_MSG_ATTACH, &a, sizeof(a));
	m.h.nfds = 2;
	CHECK_RC(raw_send(fd, &m, (int[]){ fds[0], fds[2] }, 2));
	expect_ok(fd, CUFLAG_MSG_ATTACH, m.h.req_id, &r);
	CHECK(r.blen == 0 && r.nfds == 0);
}

/* ALLOC n on a raw connection: grants and eventfds. */
static void raw_alloc(int fd, uint32_t n, struct cuflag_slot_grant *g, int *efds)
{
	struct cuflag_msg_alloc a = { .count = n };
	struct msg m;
	struct reply r;
	uint32_t count;

	msg_init(&m, CUFLAG_MSG_ALLOC, &a, sizeof(a));
	CHECK_RC(raw_send(fd, &m, NULL, 0));
	expect_ok(fd, CUFLAG_MSG_ALLOC, m.h.req_id, &r);
	memcpy(&count, r.body, 4);
	CHECK(count == n && r.nfds == n && r.blen == 8 + n * sizeof(*g));
	memcpy(g, r.body + 8, n * sizeof(*g));
	memcpy(efds, r.fds, n * sizeof(int));
}

/* ---------------------------------------------------------------- */
/* Malformed messages                                                */
/* ---------------------------------------------------------------- */

enum { NO_HELLO = 0, AFTER_HELLO = 1 };
enum { STAYS = 0, DROPS = 1 };

/*
 * On a fresh connection (after a HELLO when hello), send len bytes and nfds
 * fds; expect an error reply with status want (any negative when 0) and
 * reply type want_type (-1: any), then the connection closed (drop) or still
 * served; one log line; the daemon's fds back to the baseline.
 */
static void expect_refused_bytes(const char *name, int hello, const void *bytes, size_t len,
				 const int *fds, unsigned nfds, int want, int want_type, int drop)
{
	static uint8_t buf[sizeof(struct msg)]; /* bytes may be msg_bytes()'s buffer */
	size_t mark = case_begin();
	int fd = raw_connect(), region[3] = { -1, -1, -1 };
	uint32_t id = 0;
	char why[CUFLAG_REASON_MAX];
	int rc;

	CHECK(len <= sizeof(buf));
	memcpy(buf, bytes, len);
	if (len >= sizeof(struct cuflag_msg_hdr))
		memcpy(&id, (const uint8_t *)buf + 8, 4);
	if (hello) {
		struct cuflag_msg_hello_reply hr;
		raw_hello(fd, &hr, region);
	}
	rc = raw_send_bytes(fd, buf, len, fds, nfds);
	if (rc) {
		fprintf(stderr, "%s: send: %s\n", name, strerror(-rc));
		abort();
	}
	expect_error(fd, want, want_type, id, why, sizeof(why));
	if (drop)
		expect_closed(fd);
	else
		expect_served(fd);
	close(fd);
	cuflag_close_fds(region, 3);
	expect_fds_back();
	expect_log_line(mark, why);
	CHECK(atomic_load(&good.failed) == 0);
	printf("  %-52s %s: %s\n", name, drop ? "dropped" : "refused", why);
}

/* The bytes of m as they go on the wire (one static buffer). */
static const uint8_t *msg_bytes(const struct msg *m)
{
	static uint8_t buf[sizeof(struct msg)];

	memcpy(buf, &m->h, sizeof(m->h));
	memcpy(buf + sizeof(m->h), m->body, m->blen);
	return buf;
}

static void expect_refused(const char *name, int hello, const struct msg *m, const int *fds,
			   unsigned nfds, int want, int drop)
{
	expect_refused_bytes(name, hello, msg_bytes(m), sizeof(m->h) + m->blen, fds, nfds, want,
			     m->h.type & 0x7fff, drop);
}

static int new_eventfd(void)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK(fd >= 0);
	return fd;
}

/* Well-formed bodies, for the cases that break something else. */
static const struct cuflag_msg_hello hello_v1 = { .version_min = 1,
					       .version_max = CUFLAG_PROTO_VERSION };
static const struct cuflag_msg_alloc alloc_one = { .count = 1 };
static const struct cuflag_msg_bind bind_zero = { .id = 0 };
static const uint32_t free_one[3] = { 1, 0, 0 };

static void test_malformed(void)
{
	static struct msg m;
	uint8_t raw[64];
	int efd = new_eventfd(), efds[CUFLAG_MSG_MAX_FDS];

	for (unsigned i = 0; i < CUFLAG_MSG_MAX_FDS; i++)
		efds[i] = efd;

	printf("malformed messages:\n");
	for (int hello_first = 0; hello_first < 2; hello_first++) {
		/* Shorter than the header. */
		memset(raw, 0, sizeof(raw));
		expect_refused_bytes("1 byte", hello_first, raw, 1, NULL, 0, -EBADMSG, 0, DROPS);
		msg_init(&m, CUFLAG_MSG_STATS, NULL, 0);
		memcpy(raw, &m.h, sizeof(m.h));
		expect_refused_bytes("15 bytes of a header", hello_first, raw, 15, NULL, 0,
				     -EBADMSG, 0, DROPS);

		/* Header length against what arrived. */
		msg_init(&m, CUFLAG_MSG_STATS, NULL, 0);
		m.h.len = 20;
		expect_refused("header length > received", hello_first, &m, NULL, 0, -EBADMSG,
			       DROPS);
		msg_init(&m, CUFLAG_MSG_HELLO, &hello_v1, sizeof(hello_v1));
		m.h.len = 16;
		expect_refused("header length < received", hello_first, &m, NULL, 0, -EBADMSG,
			       DROPS);
		msg_init(&m, CUFLAG_MSG_STATS, NULL, 0);
		m.h.len = UINT32_MAX;
		expect_refused("header length 2^32-1", hello_first, &m, NULL, 0, -EBADMSG, DROPS);

		/* Types. */
		uint16_t bad_types[] = { 0, CUFLAG_MSG_TYPE_END, 0x7fff, 0xffff,
					 CUFLAG_MSG_HELLO | CUFLAG_MSG_REPLY,
					 CUFLAG_MSG_STATS | CUFLAG_MSG_REPLY };
		for (unsigned i = 0; i < sizeof(bad_types) / sizeof(bad_types[0]); i++) {
			char name[64];
			msg_init(&m, bad_types[i], NULL, 0);
			snprintf(name, sizeof(name), "type 0x%04x", bad_types[i]);
			expect_refused(name, hello_first, &m, NULL, 0, -EPROTO, DROPS);
		}

		/* A request with a status. */
		msg_init(&m, CUFLAG_MSG_STATS, NULL, 0);
		m.h.status = -EIO;
		expect_refused("request with status -EIO", hello_first, &m, NULL, 0, -EINVAL,
			       DROPS);
		m.h.status = 1;
		expect_refused("request with status 1", hello_first, &m, NULL, 0, -EINVAL, DROPS);

		/* Body lengths per type. */
		msg_init(&m, CUFLAG_MSG_HELLO, &hello_v1, sizeof(hello_v1) - 1);
		expect_refused("HELLO body 15", hello_first, &m, NULL, 0, -EBADMSG, DROPS);
		msg_init(&m, CUFLAG_MSG_HELLO, &hello_v1, sizeof(hello_v1));
		m.blen++;
		m.h.len++;
		expect_refused("HELLO body 17", hello_first, &m, NULL, 0, -EBADMSG, DROPS);
		msg_init(&m, CUFLAG_MSG_ALLOC, &alloc_one, 4);
		expect_refused("ALLOC body 4", hello_first, &m, NULL, 0, -EBADMSG, DROPS);
		msg_init(&m, CUFLAG_MSG_ALLOC, NULL, 0);
		expect_refused("ALLOC body 0", hello_first, &m, NULL, 0, -EBADMSG, DROPS);
		msg_init(&m, CUFLAG_MSG_FREE, free_one, 4);
		expect_refused("FREE body 4", hello_first, &m, NULL, 0, -EBADMSG, DROPS);
		msg_init(&m, CUFLAG_MSG_BIND, &bind_zero, 4);
		m.h.nfds = 1;
		expect_refused("BIND body 4", hello_first, &m, &efd, 1, -EBADMSG, DROPS);
		msg_init(&m, CUFLAG_MSG_STATS, &bind_zero, 4);
		expect_refused("STATS with a body", hello_first, &m, NULL, 0, -EBADMSG, DROPS);
		msg_init(&m, CUFLAG_MSG_CLIENTS, &bind_zero, 8);
		expect_refused("CLIENTS with a body", hello_first, &m, NULL, 0, -EBADMSG, DROPS);

		/* FREE: count against length, count range. */
		uint32_t fb[2 + CUFLAG_BATCH_MAX + 1] = { 0 };
		fb[0] = 2;
		msg_init(&m, CUFLAG_MSG_FREE, fb, 12);
		expect_refused("FREE count 2, one id", hello_first, &m, NULL, 0, -EBADMSG, DROPS);
		fb[0] = 1;
		msg_init(&m, CUFLAG_MSG_FREE, fb, 16);
		expect_refused("FREE count 1, two ids", hello_first, &m, NULL, 0, -EBADMSG, DROPS);
		fb[0] = 0;
		msg_init(&m, CUFLAG_MSG_FREE, fb, 8);
		expect_refused("FREE count 0", hello_first, &m, NULL, 0, -EINVAL, DROPS);
		fb[0] = CUFLAG_BATCH_MAX + 1;
		msg_init(&m, CUFLAG_MSG_FREE, fb, 8 + 4 * (CUFLAG_BATCH_MAX + 1));
		expect_refused("FREE count BATCH_MAX+1", hello_first, &m, NULL, 0, -EINVAL, DROPS);
		fb[0] = 0x40000002u; /* count * 4 wraps to 8 in 32 bits */
		msg_init(&m, CUFLAG_MSG_FREE, fb, 16);
		expect_refused("FREE count 2^30+2", hello_first, &m, NULL, 0, -EINVAL, DROPS);

		/* Reserved fields. */
		struct cuflag_msg_hello hr = hello_v1;
		hr.flags = 1;
		msg_init(&m, CUFLAG_MSG_HELLO, &hr, sizeof(hr));
		expect_refused("HELLO flags set", hello_first, &m, NULL, 0, -EINVAL, DROPS);
		hr = hello_v1;
		hr.reserved = 0x80000000u;
		msg_init(&m, CUFLAG_MSG_HELLO, &hr, sizeof(hr));
		expect_refused("HELLO reserved set", hello_first, &m, NULL, 0, -EINVAL, DROPS);
		struct cuflag_msg_alloc ar = { .count = 1, .reserved = 1 };
		msg_init(&m, CUFLAG_MSG_ALLOC, &ar, sizeof(ar));
		expect_refused("ALLOC reserved set", hello_first, &m, NULL, 0, -EINVAL, DROPS);
		fb[0] = 1;
		fb[1] = 7;
		msg_init(&m, CUFLAG_MSG_FREE, fb, 12);
		expect_refused("FREE reserved set", hello_first, &m, NULL, 0, -EINVAL, DROPS);
		fb[1] = 0;
		struct cuflag_msg_bind br = { .id = 0, .reserved = 1 };
		msg_init(&m, CUFLAG_MSG_BIND, &br, sizeof(br));
		m.h.nfds = 1;
		expect_refused("BIND reserved set", hello_first, &m, &efd, 1, -EINVAL, DROPS);

		/* ALLOC count range. */
		uint32_t counts[] = { 0, CUFLAG_BATCH_MAX + 1, UINT32_MAX };
		for (unsigned i = 0; i < 3; i++) {
			char name[64];
			struct cuflag_msg_alloc ac = { .count = counts[i] };
			msg_init(&m, CUFLAG_MSG_ALLOC, &ac, sizeof(ac));
			snprintf(name, sizeof(name), "ALLOC count %u", counts[i]);
			expect_refused(name, hello_first, &m, NULL, 0, -EINVAL, DROPS);
		}

		/* Header fd count against the fds that came. */
		msg_init(&m, CUFLAG_MSG_STATS, NULL, 0);
		m.h.nfds = 1;
		expect_refused("nfds 1, no fd sent", hello_first, &m, NULL, 0, -EBADMSG, DROPS);
		msg_init(&m, CUFLAG_MSG_BIND, &bind_zero, sizeof(bind_zero));
		expect_refused("BIND: nfds 0, one fd sent", hello_first, &m, &efd, 1, -EBADMSG,
			       DROPS);
		msg_init(&m, CUFLAG_MSG_BIND, &bind_zero, sizeof(bind_zero));
		m.h.nfds = 1;
		expect_refused("BIND: nfds 1, no fd sent", hello_first, &m, NULL, 0, -EBADMSG,
			       DROPS);

		/* Fds on messages that take none. */
		msg_init(&m, CUFLAG_MSG_STATS, NULL, 0);
		m.h.nfds = 1;
		expect_refused("STATS with an fd", hello_first, &m, &efd, 1, -EBADMSG, DROPS);
		msg_init(&m, CUFLAG_MSG_HELLO, &hello_v1, sizeof(hello_v1));
		m.h.nfds = 1;
		expect_refused("HELLO with an fd", hello_first, &m, &efd, 1, -EBADMSG, DROPS);
		msg_init(&m, CUFLAG_MSG_ALLOC, &alloc_one, sizeof(alloc_one));
		m.h.nfds = 1;
		expect_refused("ALLOC with an fd", hello_first, &m, &efd, 1, -EBADMSG, DROPS);

		/* More fds than BIND takes (up to what an ADOPT may carry, so they
		 * all arrive and the check of the request refuses them; more than
		 * that is truncated control data, covered in test-proto). */
		unsigned many[] = { 2, 3, 16, CUFLAG_MSG_MAX_FDS };
		for (unsigned i = 0; i < 4; i++) {
			char name[64];
			msg_init(&m, CUFLAG_MSG_BIND, &bind_zero, sizeof(bind_zero));
			m.h.nfds = (uint16_t)many[i];
			snprintf(name, sizeof(name), "BIND with %u fds", many[i]);
			expect_refused_bytes(name, hello_first, msg_bytes(&m), sizeof(m.h) + m.blen,
					     efds, many[i], -EBADMSG, CUFLAG_MSG_BIND, DROPS);
		}

		/* Longer than any message may be, with and without fds (which are
		 * closed unread). */
		msg_init(&m, CUFLAG_MSG_STATS, NULL, 0);
		m.blen = CUFLAG_MSG_MAX + 1 - sizeof(m.h);
		memset(m.body, 0, m.blen);
		m.h.len = CUFLAG_MSG_MAX + 1;
		expect_refused_bytes("MSG_MAX+1 bytes", hello_first, msg_bytes(&m),
				     CUFLAG_MSG_MAX + 1, NULL, 0, -EMSGSIZE, 0, DROPS);
		m.blen = 60000;
		m.h.len = (uint32_t)(sizeof(m.h) + m.blen);
		m.h.nfds = 3;
		expect_refused_bytes("60000 bytes and 3 fds", hello_first, msg_bytes(&m),
				     sizeof(m.h) + m.blen, efds, 3, -EMSGSIZE, 0, DROPS);
	}
	close(efd);
}

static void test_protocol_state(void)
{
	uint32_t fb[3] = { 1, 0, 0 };
	static struct msg m;
	int efd = new_eventfd();

	printf("protocol state:\n");
	msg_init(&m, CUFLAG_MSG_ALLOC, &alloc_one, sizeof(alloc_one));
	expect_refused("ALLOC before HELLO", NO_HELLO, &m, NULL, 0, -EPROTO, DROPS);
	msg_init(&m, CUFLAG_MSG_FREE, fb, 12);
	expect_refused("FREE before HELLO", NO_HELLO, &m, NULL, 0, -EPROTO, DROPS);
	msg_init(&m, CUFLAG_MSG_BIND, &bind_zero, sizeof(bind_zero));
	m.h.nfds = 1;
	expect_refused("BIND before HELLO", NO_HELLO, &m, &efd, 1, -EPROTO, DROPS);
	msg_init(&m, CUFLAG_MSG_HELLO, &hello_v1, sizeof(hello_v1));
	expect_refused("second HELLO", AFTER_HELLO, &m, NULL, 0, -EPROTO, DROPS);

	uint32_t ranges[][2] = { { 0, 0 }, { CUFLAG_PROTO_VERSION + 1, CUFLAG_PROTO_VERSION + 9 },
				 { CUFLAG_PROTO_VERSION + 1, UINT32_MAX } };
	for (unsigned i = 0; i < 3; i++) {
		char name[64];
		struct cuflag_msg_hello h = { .version_min = ranges[i][0],
					      .version_max = ranges[i][1] };
		msg_init(&m, CUFLAG_MSG_HELLO, &h, sizeof(h));
		snprintf(name, sizeof(name), "HELLO versions %u..%u", h.version_min,
			 h.version_max);
		expect_refused(name, NO_HELLO, &m, NULL, 0, -EPROTONOSUPPORT, DROPS);
	}
	struct cuflag_msg_hello empty = { .version_min = CUFLAG_PROTO_VERSION + 1,
					  .version_max = CUFLAG_PROTO_VERSION };
	msg_init(&m, CUFLAG_MSG_HELLO, &empty, sizeof(empty));
	expect_refused("HELLO version range empty", NO_HELLO, &m, NULL, 0, -EINVAL, DROPS);

	/* An empty message is not a hang-up: an error reply, then the close. */
	size_t mark = case_begin();
	int fd = raw_connect();
	CHECK(send(fd, "", 0, MSG_NOSIGNAL) == 0);
	expect_closed(fd);
	close(fd);
	expect_fds_back();
	expect_log_line(mark, "empty message");
	printf("  %-52s dropped: empty message\n", "empty message");

	/* CLIENTS and STATS need no HELLO. */
	fd = raw_connect();
	msg_init(&m, CUFLAG_MSG_CLIENTS, NULL, 0);
	CHECK_RC(raw_send(fd, &m, NULL, 0));
	for (;;) {
		struct reply r;
		struct cuflag_msg_client_info ci;
		expect_ok(fd, CUFLAG_MSG_CLIENTS, m.h.req_id, &r);
		CHECK(r.blen == sizeof(ci));
		memcpy(&ci, r.body, sizeof(ci));
		if (!ci.client_id)
			break;
	}
	expect_served(fd);
	close(fd);
	expect_fds_back();
	close(efd);
}

/* A request refused for what it names: an error reply, one log line, served on. */
static void expect_refusal_on(int fd, const char *name, const struct msg *m, const int *fds,
			      unsigned nfds, int want)
{
	size_t mark = case_begin();
	char why[CUFLAG_REASON_MAX];

	CHECK_RC(raw_send(fd, m, fds, nfds));
	expect_error(fd, want, m->h.type, m->h.req_id, why, sizeof(why));
	expect_served(fd);
	expect_log_line(mark, why);
	CHECK(atomic_load(&good.failed) == 0);
	printf("  %-52s refused: %s\n", name, why);
}

static void test_refusals(void)
{
	struct cuflag_msg_hello_reply hr;
	struct cuflag_slot_grant g[CUFLAG_BATCH_MAX];
	int region[3], efds[2], more[CUFLAG_BATCH_MAX];
	uint32_t fb[2 + CUFLAG_BATCH_MAX] = { 1, 0 };
	static struct msg m;
	int fd, efd = new_eventfd(), pfd[2];

	printf("refused requests, connection kept:\n");
	fd = raw_connect();
	raw_hello(fd, &hr, region);
	CHECK(hr.nslots == SLOTS_PER_CLIENT);

	/* The good client's slot id names nothing of ours. */
	fb[2] = (uint32_t)cuflag_slot_id(good.s);
	msg_init(&m, CUFLAG_MSG_FREE, fb, 12);
	expect_refusal_on(fd, "FREE of the good client's slot id", &m, NULL, 0, -EINVAL);
	raw_alloc(fd, 2, g, efds);
	uint32_t bad_ids[] = { hr.nslots, UINT32_MAX, 0x80000000u, hr.nslots - 1 };
	for (unsigned i = 0; i < 4; i++) {
		char name[64];
		fb[2] = bad_ids[i];
		msg_init(&m, CUFLAG_MSG_FREE, fb, 12);
		snprintf(name, sizeof(name), "FREE of slot %u (not held)", bad_ids[i]);
		expect_refusal_on(fd, name, &m, NULL, 0, -EINVAL);
	}
	fb[0] = 2;
	fb[2] = g[0].id;
	fb[3] = g[0].id;
	msg_init(&m, CUFLAG_MSG_FREE, fb, 16);
	expect_refusal_on(fd, "FREE of one slot twice", &m, NULL, 0, -EINVAL);
	fb[3] = hr.nslots - 1;
	msg_init(&m, CUFLAG_MSG_FREE, fb, 16);
	expect_refusal_on(fd, "FREE of a held and an unheld slot", &m, NULL, 0, -EINVAL);

	/* BIND: only an eventfd, only to a held slot. */
	struct cuflag_msg_bind b = { .id = g[1].id };
	CHECK(pipe2(pfd, O_CLOEXEC) == 0);
	msg_init(&m, CUFLAG_MSG_BIND, &b, sizeof(b));
	m.h.nfds = 1;
	expect_refusal_on(fd, "BIND with a pipe", &m, &pfd[1], 1, -EBADF);
	int memfd = memfd_create("not-an-eventfd", MFD_CLOEXEC);
	CHECK(memfd >= 0);
	m.h.req_id = ++next_req;
	expect_refusal_on(fd, "BIND with a memfd", &m, &memfd, 1, -EBADF);
	m.h.req_id = ++next_req;
	expect_refusal_on(fd, "BIND with the connection's own socket", &m, &fd, 1, -EBADF);
	b.id = hr.nslots - 1;
	msg_init(&m, CUFLAG_MSG_BIND, &b, sizeof(b));
	m.h.nfds = 1;
	expect_refusal_on(fd, "BIND to a slot not held", &m, &efd, 1, -EINVAL);
	b.id = UINT32_MAX;
	msg_init(&m, CUFLAG_MSG_BIND, &b, sizeof(b));
	m.h.nfds = 1;
	expect_refusal_on(fd, "BIND to slot 2^32-1", &m, &efd, 1, -EINVAL);

	/* ALLOC past slots-per-client. */
	raw_alloc(fd, CUFLAG_BATCH_MAX, g, more);
	cuflag_close_fds(more, CUFLAG_BATCH_MAX);
	raw_alloc(fd, SLOTS_PER_CLIENT - 2 - CUFLAG_BATCH_MAX, g, more);
	cuflag_close_fds(more, SLOTS_PER_CLIENT - 2 - CUFLAG_BATCH_MAX);
	struct cuflag_msg_alloc a = { .count = 1 };
	msg_init(&m, CUFLAG_MSG_ALLOC, &a, sizeof(a));
	expect_refusal_on(fd, "ALLOC past slots-per-client", &m, NULL, 0, -ENOSPC);

	close(fd);
	cuflag_close_fds(region, 3);
	cuflag_close_fds(efds, 2);
	close(pfd[0]);
	close(pfd[1]);
	close(memfd);
	close(efd);
	/* The refused fds were closed by the daemon, the slots freed at hang-up. */
	expect_fds_back();
}

/* ---------------------------------------------------------------- */
/* A client scribbling over its own region                           */
/* ---------------------------------------------------------------- */

struct rawc {
	int sock, region_fd, dpage_fd, wake_fd;
	struct cuflag_msg_hello_reply hr;
	uint8_t *map;
	volatile uint32_t *head, *tail, *flags;
	volatile struct cuflag_arm *queue;
	uint32_t tail_local;
};

static void rawc_open(struct rawc *r)
{
	int fds[3];

	memset(r, 0, sizeof(*r));
	r->sock = raw_connect();
	raw_hello(r->sock, &r->hr, fds);
	r->region_fd = fds[0];
	r->dpage_fd = fds[1];
	r->wake_fd = fds[2];
	r->map = mmap(NULL, r->hr.region_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->region_fd, 0);
	CHECK(r->map != MAP_FAILED);
	r->head = (volatile uint32_t *)(r->map + r->hr.head_off);
	r->tail = (volatile uint32_t *)(r->map + r->hr.tail_off);
	r->queue = (volatile struct cuflag_arm *)(r->map + r->hr.queue_off);
	r->flags = (volatile uint32_t *)(r->map + r->hr.flags_off);
	r->tail_local = *r->tail;
}

static void rawc_close(struct rawc *r)
{
	munmap(r->map, r->hr.region_size);
	close(r->sock);
	close(r->region_fd);
	close(r->dpage_fd);
	close(r->wake_fd);
}

static void rawc_wake(struct rawc *r)
{
	uint64_t one = 1;
	CHECK(write(r->wake_fd, &one, sizeof(one)) == sizeof(one));
}

/* Publish one arm entry, whatever it says (the queue has room: we wait). */
static void rawc_push(struct rawc *r, uint32_t slot, uint32_t target)
{
	uint64_t end = now_ns() + 5000000000u;

	/* A head we scribbled over ourselves (more used than fits) tells nothing. */
	for (;;) {
		uint32_t used = r->tail_local - __atomic_load_n(r->head, __ATOMIC_ACQUIRE);
		if (used < r->hr.queue_cap || used > r->hr.queue_cap)
			break;
		CHECK(now_ns() < end);
		rawc_wake(r);
		usleep(100);
	}
	r->queue[r->tail_local & (r->hr.queue_cap - 1)].slot = slot;
	r->queue[r->tail_local & (r->hr.queue_cap - 1)].target = target;
	r->tail_local++;
	__atomic_store_n(r->tail, r->tail_local, __ATOMIC_SEQ_CST);
	rawc_wake(r);
}

static int drained_pred(void *arg)
{
	struct rawc *r = arg;
	return __atomic_load_n(r->head, __ATOMIC_ACQUIRE) == r->tail_local;
}

static uint64_t efd_wait(int efd, int ms)
{
	struct pollfd p = { .fd = efd, .events = POLLIN };
	uint64_t v = 0;

	if (poll(&p, 1, ms) != 1)
		return 0;
	CHECK(read(efd, &v, sizeof(v)) == sizeof(v));
	return v;
}

static int bad_arms_pred(void *arg)
{
	struct cuflag_msg_stats_reply st;
	stats(&st);
	return st.bad_arms >= *(uint64_t *)arg;
}

static int hung_up_pred(void *arg)
{
	struct pollfd p = { .fd = *(int *)arg, .events = POLLRDHUP };
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP));
}

/* What the daemon shares is sealed: the region's size, the daemon page's bytes. */
static void test_seals(void)
{
	struct rawc r;
	long page = sysconf(_SC_PAGESIZE);
	struct stat st;
	int seals;
	void *p;

	printf("seals:\n");
	rawc_open(&r);
	seals = fcntl(r.region_fd, F_GET_SEALS);
	CHECK(seals >= 0);
	CHECK((seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
	      (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
	CHECK(fstat(r.region_fd, &st) == 0 && (uint64_t)st.st_size == r.hr.region_size);
	CHECK(ftruncate(r.region_fd, 0) < 0 && errno == EPERM);
	CHECK(ftruncate(r.region_fd, st.st_size + page) < 0 && errno == EPERM);
	CHECK(fcntl(r.region_fd, F_ADD_SEALS, F_SEAL_WRITE) < 0 && errno == EPERM);
	printf("  %-52s ok\n", "region: SHRINK|GROW|SEAL, size fixed");

	seals = fcntl(r.dpage_fd, F_GET_SEALS);
	CHECK(seals >= 0 && (seals & F_SEAL_FUTURE_WRITE) && (seals & F_SEAL_SEAL));
	CHECK(fstat(r.dpage_fd, &st) == 0 && st.st_size >= (off_t)sizeof(struct cuflag_daemon_page));
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, r.dpage_fd, 0);
	CHECK(p == MAP_FAILED && errno == EPERM);
	CHECK(pwrite(r.dpage_fd, "x", 1, 0) < 0 && errno == EPERM);
	CHECK(ftruncate(r.dpage_fd, 0) < 0 && errno == EPERM);
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, r.dpage_fd, 0);
	CHECK(p != MAP_FAILED);
	CHECK(mprotect(p, (size_t)st.st_size, PROT_READ | PROT_WRITE) < 0);
	CHECK(((const struct cuflag_daemon_page *)p)->magic == CUFLAG_DPAGE_MAGIC);
	munmap(p, (size_t)st.st_size);
	/* A private writable mapping is allowed, and changes nothing shared. */
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, r.dpage_fd, 0);
	if (p != MAP_FAILED) {
		((struct cuflag_daemon_page *)p)->magic = 0;
		munmap(p, (size_t)st.st_size);
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, r.dpage_fd, 0);
	CHECK(p != MAP_FAILED);
	CHECK(((const struct cuflag_daemon_page *)p)->magic == CUFLAG_DPAGE_MAGIC);
	munmap(p, (size_t)st.st_size);
	printf("  %-52s ok\n", "daemon page: no shared write by mmap, mprotect, write");
	rawc_close(&r);
	expect_fds_back();
}

static void test_scribble(void)
{
	struct cuflag_msg_stats_reply st0, st1;
	struct cuflag_slot_grant g[2];
	struct rawc r;
	int efds[2];
	uint64_t want;

	printf("region scribbling:\n");
	rawc_open(&r);
	raw_alloc(r.sock, 2, g, efds);
	stats(&st0);

	/* Garbage in the header, the head word, every flag but the first slot's. */
	memset(r.map, 0xa5, sizeof(struct cuflag_region_hdr));
	*r.head = 0xdeadbeefu;
	for (uint32_t i = 0; i < r.hr.nslots; i++)
		if (i != g[0].id)
			r.flags[i] = 0x9e3779b9u * (i + 1);
	memset(r.map + r.hr.head_off + 4, 0x5a, CUFLAG_CACHELINE - 4);
	memset(r.map + r.hr.tail_off + 4, 0x5a, CUFLAG_CACHELINE - 4);
	rawc_wake(&r);
	/* A proper arm is still served; the daemon writes its own head back. */
	rawc_push(&r, g[0].id, g[0].start + 1);
	sim_store(&r.flags[g[0].id], g[0].start + 1);
	CHECK(efd_wait(efds[0], 5000) == 1);
	CHECK(*r.head == r.tail_local);
	/* A flag far past what was armed counts only what was armed. */
	r.flags[g[1].id] = g[1].start + 100000;
	rawc_push(&r, g[1].id, g[1].start + 1);
	CHECK(efd_wait(efds[1], 5000) == 1);
	CHECK(efd_wait(efds[1], 50) == 0);
	stats(&st1);
	CHECK(st1.bad_arms == st0.bad_arms);
	printf("  %-52s ok\n", "garbage header, head, flags, line padding");

	/* Bad entries: each refused and counted, the client kept. */
	uint32_t unheld = g[0].id == 5 || g[1].id == 5 ? 6 : 5;
	rawc_push(&r, r.hr.nslots, g[0].start + 2);
	rawc_push(&r, UINT32_MAX, g[0].start + 2);
	rawc_push(&r, 0x80000000u, 1);
	rawc_push(&r, unheld, 1);
	rawc_push(&r, g[0].id, g[0].start + 1 + 0x80000000u); /* 2^31 ahead */
	rawc_push(&r, g[0].id, g[0].start + 1 - 0x80000000u); /* 2^31 behind */
	rawc_push(&r, g[0].id, g[0].start);                    /* behind */
	want = st0.bad_arms + 7;
	CHECK(wait_until(bad_arms_pred, &want, 5000));
	stats(&st1);
	CHECK(st1.bad_arms == want);
	CHECK(st1.dropped == st0.dropped);
	expect_served(r.sock);
	CHECK(efd_wait(efds[0], 50) == 0);
	/* And the next good arm works. */
	rawc_push(&r, g[0].id, g[0].start + 2);
	sim_store(&r.flags[g[0].id], g[0].start + 2);
	CHECK(efd_wait(efds[0], 5000) == 1);
	printf("  %-52s ok\n", "7 bad arm entries: counted in bad_arms, ignored");
	good_check(100);

	/* An impossible tail: dropped. */
	size_t mark = case_begin();
	__atomic_store_n(r.tail, r.tail_local + r.hr.queue_cap + 1, __ATOMIC_SEQ_CST);
	rawc_wake(&r);
	CHECK(wait_until(hung_up_pred, &r.sock, 5000));
	expect_closed(r.sock);
	rawc_close(&r);
	cuflag_close_fds(efds, 2);
	expect_fds_back();
	expect_log_line(mark, "arm queue corrupted");
	stats(&st1);
	CHECK(st1.dropped == st0.dropped + 1);
	printf("  %-52s dropped\n", "tail - head > queue_cap");
	good_check(100);

	/* A tail behind the head reads as a huge count: dropped too. */
	mark = case_begin();
	rawc_open(&r);
	raw_alloc(r.sock, 1, g, efds);
	rawc_push(&r, g[0].id, g[0].start + 1);
	rawc_push(&r, g[0].id, g[0].start + 2);
	CHECK(wait_until(drained_pred, &r, 5000));
	__atomic_store_n(r.tail, r.tail_local - 1, __ATOMIC_SEQ_CST);
	rawc_wake(&r);
	CHECK(wait_until(hung_up_pred, &r.sock, 5000));
	rawc_close(&r);
	close(efds[0]);
	expect_fds_back();
	expect_log_line(mark, "arm queue corrupted");
	printf("  %-52s dropped\n", "tail behind head");

	/* Punching the region's pages out: the daemon reads zeros, no SIGBUS. */
	mark = case_begin();
	rawc_open(&r);
	raw_alloc(r.sock, 1, g, efds);
	for (int i = 0; i < 3; i++)
		rawc_push(&r, g[0].id, g[0].start + 1 + (uint32_t)i);
	CHECK(wait_until(drained_pred, &r, 5000));
	CHECK(wait_until(hung_up_pred, &r.sock, 0) == 0);
	if (fallocate(r.region_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
		      (off_t)r.hr.region_size) == 0) {
		rawc_wake(&r);
		CHECK(wait_until(hung_up_pred, &r.sock, 5000));
		expect_log_line(mark, "arm queue corrupted");
		printf("  %-52s dropped\n", "region punched out (tail reads 0)");
	}
	rawc_close(&r);
	close(efds[0]);
	expect_fds_back();
	CHECK(daemon_alive());
	good_check(100);
}

/* HELLO and ATTACH on connection fd: the first error, 0, or 1 when the
 * daemon closed the connection instead (fds brought closed). */
static int hello_attach_on(int fd)
{
	struct cuflag_msg_hello h = { .version_min = 1, .version_max = CUFLAG_PROTO_VERSION };
	struct cuflag_msg_hello_reply hr;
	struct cuflag_msg_attach a = { 0 };
	struct msg m;
	struct reply r;
	ssize_t n;
	int st, give[2];

	msg_init(&m, CUFLAG_MSG_HELLO, &h, sizeof(h));
	if (raw_send(fd, &m, NULL, 0))
		return 1;
	n = raw_recv(fd, &r);
	if (n <= 0) {
		CHECK(n == 0 || n == -ECONNRESET);
		return 1;
	}
	st = r.h.status;
	if (!st)
		memcpy(&hr, r.body, sizeof(hr));
	cuflag_close_fds(r.fds, r.nfds);
	if (st)
		return st;
	give[0] = make_client_region(&hr);
	give[1] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	msg_init(&m, CUFLAG_MSG_ATTACH, &a, sizeof(a));
	m.h.nfds = 2;
	CHECK_RC(raw_send(fd, &m, give, 2));
	cuflag_close_fds(give, 2);
	CHECK(raw_recv(fd, &r) > 0);
	cuflag_close_fds(r.fds, r.nfds);
	return r.h.status;
}

/* The same on a fresh connection. */
static int hello_status(void)
{
	int fd = raw_connect(), st = hello_attach_on(fd);

	close(fd);
	return st;
}

/* After a user's clients made writes block three times, its new clients are
 * refused (-EBUSY) for about ms, then accepted again. */
static void expect_cooldown(uint64_t ms)
{
	uint64_t t0 = now_ns();
	double waited;

	CHECK(hello_status() == -EBUSY);
	while (hello_status() == -EBUSY) {
		CHECK(now_ns() - t0 < (ms + 3000) * 1000000ull);
		usleep(20000);
	}
	waited = (double)(now_ns() - t0) / 1e6;
	printf("  %-52s %.0f ms\n", "then the user's new clients refused for", waited);
	CHECK(waited > (double)ms / 2);
}

/*
 * A client clears O_NONBLOCK on a slot eventfd (the flag lives in the file
 * description it shares with the daemon) and fills the counter: the
 * scanner's next write to it would block for ever. The daemon interrupts
 * it, drops the client, and the good client barely notices.
 */
static void stall_with(unsigned nslots, const char *name, uint64_t cooldown_ms)
{
	struct cuflag_slot_grant g[CUFLAG_BATCH_MAX];
	struct cuflag_msg_stats_reply st0, st1;
	int efds[CUFLAG_BATCH_MAX];
	uint64_t full = 0xfffffffffffffffeull, v;
	struct rawc r;
	size_t mark = case_begin();

	rawc_open(&r);
	raw_alloc(r.sock, nslots, g, efds);
	for (unsigned i = 0; i < nslots; i++) {
		int fl = fcntl(efds[i], F_GETFL);
		CHECK(fl >= 0 && fcntl(efds[i], F_SETFL, fl & ~O_NONBLOCK) == 0);
		CHECK(write(efds[i], &full, sizeof(full)) == sizeof(full));
	}
	stats(&st0);
	good_check(10);
	good_reset_latency();
	for (unsigned i = 0; i < nslots; i++) {
		rawc_push(&r, g[i].id, g[i].start + 1);
		sim_store(&r.flags[g[i].id], g[i].start + 1);
	}
	CHECK(wait_until(hung_up_pred, &r.sock, 10000));
	/* Long enough to measure a stall rather than only to see one. */
	uint64_t want = atomic_load(&good.completed) + 100;
	CHECK(wait_until(good_progress_pred, &want, 30000));
	CHECK(atomic_load(&good.failed) == 0);
	uint64_t lat = atomic_load(&good.max_lat_ns);
	printf("  %-52s dropped; good client's worst latency %.1f ms\n", name, (double)lat / 1e6);
	CHECK(lat < STALL_LATENCY_MAX_NS);
	/* Nothing was added to a full counter. */
	for (unsigned i = 0; i < nslots; i++) {
		CHECK(read(efds[i], &v, sizeof(v)) == sizeof(v));
		CHECK(v == full);
	}
	stats(&st1);
	CHECK(st1.dropped == st0.dropped + 1);
	rawc_close(&r);
	cuflag_close_fds(efds, nslots);
	expect_log_line(mark, "eventfd made to block a write");
	if (cooldown_ms)
		expect_cooldown(cooldown_ms);
	else
		CHECK(hello_status() == 0); /* let go: new clients still welcome */
	expect_fds_back();
	good_check(10);
}

static void test_blocking_eventfd(void)
{
	printf("blocking eventfd:\n");
	stall_with(1, "one slot eventfd made blocking and full", 0);
	/* The same made non-blocking again but full: the write fails at once. */
	struct cuflag_slot_grant g;
	struct rawc r;
	int efd;
	uint64_t full = 0xfffffffffffffffeull;
	size_t mark = case_begin();

	rawc_open(&r);
	raw_alloc(r.sock, 1, &g, &efd);
	CHECK(write(efd, &full, sizeof(full)) == sizeof(full));
	rawc_push(&r, g.id, g.start + 1);
	sim_store(&r.flags[g.id], g.start + 1);
	CHECK(wait_until(hung_up_pred, &r.sock, 5000));
	rawc_close(&r);
	close(efd);
	expect_fds_back();
	expect_log_line(mark, "eventfd made unwritable");
	printf("  %-52s dropped\n", "one slot eventfd full (non-blocking)");
	/* No write blocked: nobody waited, so no cool-down. */
	CHECK(hello_status() == 0);
	good_check(100);
	/* Once the client is found broken, its other slots are not written:
	 * a stall per slot would hold every other client for seconds. */
	stall_with(CUFLAG_BATCH_MAX, "64 slot eventfds made blocking and full", 0);
	/* A third within a minute: that user's new clients wait a while. */
	stall_with(1, "the same a third time", 1000);
}

/*
 * A client clears O_NONBLOCK on its wake eventfd (shared with the daemon) and
 * keeps writing and draining it from two threads. A scanner that read the
 * wake fds after a park could find this one drained and block in read() for
 * ever, and every client with it; the good client pauses between completions
 * so that the scanner parks all the time.
 */
struct thief {
	int fd;
	_Atomic int stop;
};

static void *thief_write(void *arg)
{
	struct thief *t = arg;
	uint64_t one = 1;

	while (!atomic_load(&t->stop) && write(t->fd, &one, sizeof(one)) == sizeof(one))
		;
	return NULL;
}

static void *thief_read(void *arg)
{
	struct thief *t = arg;
	uint64_t v;

	while (!atomic_load(&t->stop) && read(t->fd, &v, sizeof(v)) == sizeof(v))
		;
	return NULL;
}

static void test_wake_thief(void)
{
	struct thief t = { .fd = -1 };
	struct rawc r;
	pthread_t w, rd[3];
	uint64_t one = 1, want;
	int fl;

	rawc_open(&r);
	t.fd = r.wake_fd;
	fl = fcntl(t.fd, F_GETFL);
	CHECK(fl >= 0 && fcntl(t.fd, F_SETFL, fl & ~O_NONBLOCK) == 0);
	atomic_store(&good.pause_us, 200);
	good_reset_latency();
	CHECK(pthread_create(&w, NULL, thief_write, &t) == 0);
	for (int i = 0; i < 3; i++)
		CHECK(pthread_create(&rd[i], NULL, thief_read, &t) == 0);
	want = atomic_load(&good.completed) + 5000;
	CHECK(wait_until(good_progress_pred, &want, 20000));
	atomic_store(&t.stop, 1);
	CHECK(pthread_join(w, NULL) == 0);
	/* A read drains every write before it: write until each reader is out. */
	for (int i = 0; i < 3; i++)
		while (pthread_tryjoin_np(rd[i], NULL) == EBUSY) {
			CHECK(write(t.fd, &one, sizeof(one)) == sizeof(one));
			usleep(1000);
		}
	atomic_store(&good.pause_us, 0);
	CHECK(atomic_load(&good.failed) == 0);
	printf("  %-52s good client's worst latency %.1f ms\n",
	       "a wake eventfd made blocking, written and drained",
	       (double)atomic_load(&good.max_lat_ns) / 1e6);
	CHECK(atomic_load(&good.max_lat_ns) < GOOD_LATENCY_MAX_NS);
	rawc_close(&r);
	expect_fds_back();
	good_check(100);
}

/* ---------------------------------------------------------------- */
/* Too many connections; a client that never reads                   */
/* ---------------------------------------------------------------- */

static void test_many_connections(void)
{
	enum { N = MAX_CLIENTS + 100 };
	static int fds[N];
	unsigned ok = 0, refused = 0, closed = 0;
	struct cuflag_msg_stats_reply st;
	static struct msg m;

	printf("many connections:\n");
	good_check(10);
	for (int i = 0; i < N; i++)
		fds[i] = raw_connect();
	for (int i = 0; i < N; i++) {
		int got = hello_attach_on(fds[i]);
		if (got == 1) {
			closed++;
		} else if (got == 0) {
			ok++;
		} else {
			CHECK(got == -EUSERS);
			refused++;
		}
	}
	/* The good client holds one region; the rest go to the first comers. */
	printf("  %d connections: %u got a region, %u refused (-EUSERS), %u closed\n", N, ok,
	       refused, closed);
	CHECK(ok == MAX_CLIENTS - 1);
	CHECK(refused > 0 && closed > 0);
	CHECK(ok + refused + closed == N);
	good_check(100);
	stats(&st);
	CHECK(st.clients == MAX_CLIENTS);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	expect_fds_back();
	stats(&st);
	CHECK(st.clients == 1);
	good_check(100);
	/* Room for as many connections as before. */
	unsigned room = ok + refused;
	for (unsigned i = 0; i < room; i++) {
		fds[i] = raw_connect();
		msg_init(&m, CUFLAG_MSG_STATS, NULL, 0);
		if (raw_send(fds[i], &m, NULL, 0) == 0) {
			struct reply r;
			if (raw_recv(fds[i], &r) > 0) {
				ok++;
				continue;
			}
		}
		fprintf(stderr, "connection %u of %u after the burst: not served\n", i + 1, room);
		abort();
	}
	for (unsigned i = 0; i < room; i++)
		close(fds[i]);
	expect_fds_back();
	/* That burst used up the daemon's log lines for a while: let it pass. */
	last_logged_ns = now_ns() + 1000000000u;
}

/* A client that sends and never reads its replies is dropped, not waited for. */
static void test_never_reads(void)
{
	size_t mark = case_begin();
	int fd = raw_connect(), sent = 0, rc = 0;
	static struct msg m;

	printf("a client that never reads:\n");
	msg_init(&m, CUFLAG_MSG_STATS, NULL, 0);
	for (; sent < 200000; sent++) {
		rc = raw_send(fd, &m, NULL, 0);
		if (rc)
			break;
	}
	CHECK(rc == -EPIPE || rc == -ECONNRESET);
	close(fd);
	expect_fds_back();
	expect_log_line(mark, "cannot send a reply");
	printf("  %-52s dropped after %d requests\n", "STATS without reading", sent);
	good_check(100);
}

int main(void)
{
	const char *args[] = { "--max-clients", "8", "--slots-per-client", "128", "--queue-size",
			       "64", NULL };

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IONBF, 0);
	snprintf(who, sizeof(who), "pid=%d uid=%u", (int)getpid(), (unsigned)getuid());
	daemon_start(&d, 1, args);
	stats_fd = raw_connect();
	good_start();
	good_check(100);
	baseline_fds = daemon_fd_count(&d);
	test_malformed();
	test_protocol_state();
	test_refusals();
	test_seals();
	test_scribble();
	test_blocking_eventfd();
	test_wake_thief();
	test_many_connections();
	test_never_reads();
	good_stop();
	close(stats_fd);
	CHECK(daemon_stop(&d) == 0);
	printf("hostile: ok\n");
	return 0;
}
