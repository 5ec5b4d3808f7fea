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
#include "proto.h"
#include "test-runner.h"
#include "unix-socket.h"

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
		t0 = cuflag_now_ns();
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
		good_note_latency(cuflag_now_ns() - t0);
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

/* The log's last n bytes (or all of it). */
static const char *log_tail(size_t n)
{
	return loglen > n ? logbuf + loglen - n : logbuf;
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

	CHECK_MSG(wait_until(log_pred, &w, 3000),
		  "no log line with '%s' and '%s'; log since:\n%s\nlog tail:\n%s", who, why,
		  logbuf + from, log_tail(3000));
	CHECK(log_count(from, who, why) == 1);
	last_logged_ns = cuflag_now_ns();
}

static int paced_pred(void *arg)
{
	(void)arg;
	log_collect();
	return cuflag_now_ns() >= last_logged_ns + LOG_PACE_NS;
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
	/* No more than before: the baseline may have been counted while an
	 * earlier case's connection was still being closed. */
	return daemon_fd_count(&d) <= baseline_fds;
}

static void expect_fds_back(void)
{
	if (!wait_until(fds_back_pred, NULL, 5000)) {
		fprintf(stderr, "daemon log tail:\n%s\n", log_tail(4000));
		CHECK_MSG(0, "daemon holds %d fds, %d before", daemon_fd_count(&d), baseline_fds);
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

/* A connection whose sends and receives give up after 5 s. */
static int raw_connect(void)
{
	int fd = cuflag_unix_connect(d.sock, 5);

	CHECK_MSG(fd >= 0, "connect: %s", strerror(-fd));
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

	CHECK_MSG(n > 0, "no reply (%zd), wanted status %d", n, want);
	CHECK_MSG(r.h.status < 0 && (!want || r.h.status == want), "reply status %d, wanted %d",
		  r.h.status, want);
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
	CHECK_MSG(r->h.status == 0, "request %u: status %d (%s)", type, r->h.status,
		  r->blen ? (char *)r->body : "");
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

/* What the daemon and the good client were doing when it made no progress. */
static void good_dump(void)
{
	for (int i = 0; i < 2; i++) {
		struct cuflag_msg_stats_reply st;
		stats(&st);
		fprintf(stderr,
			"stats: state %u passes %llu parks %llu wakeups %llu sleeps %llu pending %llu "
			"armed %llu completions %llu clients %u\n",
			st.scanner_state, (unsigned long long)st.passes,
			(unsigned long long)st.parks, (unsigned long long)st.scanner_wakeups,
			(unsigned long long)st.scanner_sleeps, (unsigned long long)st.pending,
			(unsigned long long)st.armed, (unsigned long long)st.completions,
			st.clients);
		usleep(200000);
	}
	fprintf(stderr, "good client: armed %llu completed %llu flag %u\n",
		(unsigned long long)atomic_load(&good.armed),
		(unsigned long long)atomic_load(&good.completed), *cuflag_slot_flag(good.s));
	log_collect();
	fprintf(stderr, "daemon log tail:\n%s\n", log_tail(3000));
}

/* The good client is healthy and completes n more from now. */
static void good_check(uint64_t n)
{
	uint64_t want = atomic_load(&good.completed) + n;

	if (!wait_until(good_progress_pred, &want, 5000)) {
		good_dump();
		CHECK_MSG(0, "the good client made no progress for 5 s");
	}
	if (atomic_load(&good.failed))
		fprintf(stderr, "good client failed at step %d\n", atomic_load(&good.failed));
	CHECK(atomic_load(&good.failed) == 0);
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
	CHECK(count == n && r.nfds == n && r.blen == cuflag_alloc_reply_len(n));
	memcpy(g, r.body + offsetof(struct cuflag_msg_alloc_reply, grants), n * sizeof(*g));
	memcpy(efds, r.fds, n * sizeof(int));
}

/* ---------------------------------------------------------------- */
/* Malformed messages                                                */
/* ---------------------------------------------------------------- */

/*
 * On a fresh connection (after a HELLO when hello), send len bytes and nfds
 * fds; expect an error reply with status want (any negative when 0) and
 * reply type want_type (-1: any), then the connection closed; one log line;
 * the daemon's fds back to the baseline.
 */
static void expect_dropped_bytes(const char *name, int hello, const void *bytes, size_t len,
				 const int *fds, unsigned nfds, int want, int want_type)
{
	static uint8_t buf[sizeof(struct msg)];
	size_t mark = case_begin();
	int fd = raw_connect(), region[3] = { -1, -1, -1 };
	uint32_t id = 0;
	char why[CUFLAG_REASON_MAX];
	int rc;

	CHECK(len <= sizeof(buf));
	memcpy(buf, bytes, len);
	if (len >= sizeof(struct cuflag_msg_hdr))
		memcpy(&id, buf + offsetof(struct cuflag_msg_hdr, req_id), sizeof(id));
	if (hello) {
		struct cuflag_msg_hello_reply hr;
		raw_hello(fd, &hr, region);
	}
	rc = raw_send_bytes(fd, buf, len, fds, nfds);
	CHECK_MSG(rc == 0, "%s: send: %s", name, strerror(-rc));
	expect_error(fd, want, want_type, id, why, sizeof(why));
	expect_closed(fd);
	close(fd);
	cuflag_close_fds(region, 3);
	expect_fds_back();
	expect_log_line(mark, why);
	CHECK(atomic_load(&good.failed) == 0);
	printf("  %-52s dropped: %s\n", name, why);
}

/* The bytes of m as they go on the wire (one static buffer). */
static const uint8_t *msg_bytes(const struct msg *m)
{
	static uint8_t buf[sizeof(struct msg)];

	memcpy(buf, &m->h, sizeof(m->h));
	memcpy(buf + sizeof(m->h), m->body, m->blen);
	return buf;
}

/*
 * A message the daemon must refuse and drop the connection for: a header
 * (type, length, status, fd count as written, which may lie), a body whose
 * first words are w and the rest zeros, the eventfds really sent, and the
 * status the error reply must carry. Its reply has the request's type and id,
 * or type 0 when the daemon could not read the request (cut inside its
 * header, or longer than a message may be).
 */
struct bad_request {
	const char *name;
	enum { EITHER, BEFORE_HELLO, AFTER_HELLO } when; /* EITHER: tried both ways */
	uint16_t type;
	uint32_t w[4];
	uint32_t blen;
	uint32_t len;      /* header length; 0: the true one */
	int32_t status;
	uint16_t hdr_nfds;
	unsigned nfds;
	uint32_t cut;      /* send only this many bytes; 0: all */
	int want;
};

#define V CUFLAG_PROTO_VERSION
#define HELLO_V1 { 1, V }
#define BATCH_MAX CUFLAG_BATCH_MAX
/* Body bytes of a FREE naming n ids, as a constant for the table. */
#define FREE_LEN(n) (offsetof(struct cuflag_msg_free, ids) + 4 * (n))

static const struct bad_request bad_requests[] = {
	/* Shorter than the header. */
	{ "1 byte", EITHER, CUFLAG_MSG_STATS, .cut = 1, .want = -EBADMSG },
	{ "15 bytes of a header", EITHER, CUFLAG_MSG_STATS, .cut = 15, .want = -EBADMSG },
	/* Header length against what arrived. */
	{ "header length > received", EITHER, CUFLAG_MSG_STATS, .len = 20, .want = -EBADMSG },
	{ "header length < received", EITHER, CUFLAG_MSG_HELLO, HELLO_V1, 16, .len = 16,
	  .want = -EBADMSG },
	{ "header length 2^32-1", EITHER, CUFLAG_MSG_STATS, .len = UINT32_MAX, .want = -EBADMSG },
	/* Types. */
	{ "type 0x0000", EITHER, 0, .want = -EPROTO },
	{ "type TYPE_END", EITHER, CUFLAG_MSG_TYPE_END, .want = -EPROTO },
	{ "type 0x7fff", EITHER, 0x7fff, .want = -EPROTO },
	{ "type 0xffff", EITHER, 0xffff, .want = -EPROTO },
	{ "type HELLO | REPLY", EITHER, CUFLAG_MSG_HELLO | CUFLAG_MSG_REPLY, .want = -EPROTO },
	{ "type STATS | REPLY", EITHER, CUFLAG_MSG_STATS | CUFLAG_MSG_REPLY, .want = -EPROTO },
	/* A request with a status. */
	{ "request with status -EIO", EITHER, CUFLAG_MSG_STATS, .status = -EIO, .want = -EINVAL },
	{ "request with status 1", EITHER, CUFLAG_MSG_STATS, .status = 1, .want = -EINVAL },
	/* Body lengths per type. */
	{ "HELLO body 15", EITHER, CUFLAG_MSG_HELLO, HELLO_V1, 15, .want = -EBADMSG },
	{ "HELLO body 17", EITHER, CUFLAG_MSG_HELLO, HELLO_V1, 17, .want = -EBADMSG },
	{ "ALLOC body 4", EITHER, CUFLAG_MSG_ALLOC, { 1 }, 4, .want = -EBADMSG },
	{ "ALLOC body 0", EITHER, CUFLAG_MSG_ALLOC, .want = -EBADMSG },
	{ "FREE body 4", EITHER, CUFLAG_MSG_FREE, { 1 }, 4, .want = -EBADMSG },
	{ "BIND body 4", EITHER, CUFLAG_MSG_BIND, { 0 }, 4, .hdr_nfds = 1, .nfds = 1,
	  .want = -EBADMSG },
	{ "STATS with a body", EITHER, CUFLAG_MSG_STATS, { 0 }, 4, .want = -EBADMSG },
	{ "CLIENTS with a body", EITHER, CUFLAG_MSG_CLIENTS, { 0 }, 8, .want = -EBADMSG },
	/* FREE: count against length, count range. */
	{ "FREE count 2, one id", EITHER, CUFLAG_MSG_FREE, { 2 }, FREE_LEN(1), .want = -EBADMSG },
	{ "FREE count 1, two ids", EITHER, CUFLAG_MSG_FREE, { 1 }, FREE_LEN(2), .want = -EBADMSG },
	{ "FREE count 0", EITHER, CUFLAG_MSG_FREE, { 0 }, FREE_LEN(0), .want = -EINVAL },
	{ "FREE count BATCH_MAX+1", EITHER, CUFLAG_MSG_FREE, { BATCH_MAX + 1 },
	  FREE_LEN(BATCH_MAX + 1), .want = -EINVAL },
	/* count * 4 wraps to 8 in 32 bits */
	{ "FREE count 2^30+2", EITHER, CUFLAG_MSG_FREE, { 0x40000002u }, FREE_LEN(2),
	  .want = -EINVAL },
	/* Reserved fields. */
	{ "HELLO flags set", EITHER, CUFLAG_MSG_HELLO, { 1, V, 1 }, 16, .want = -EINVAL },
	{ "HELLO reserved set", EITHER, CUFLAG_MSG_HELLO, { 1, V, 0, 0x80000000u }, 16,
	  .want = -EINVAL },
	{ "FREE reserved set", EITHER, CUFLAG_MSG_FREE, { 1, 7 }, FREE_LEN(1), .want = -EINVAL },
	{ "BIND reserved set", EITHER, CUFLAG_MSG_BIND, { 0, 1 }, 8, .hdr_nfds = 1, .nfds = 1,
	  .want = -EINVAL },
	/* ALLOC count range. */
	{ "ALLOC count 0", EITHER, CUFLAG_MSG_ALLOC, { 0 }, 8, .want = -EINVAL },
	{ "ALLOC count BATCH_MAX+1", EITHER, CUFLAG_MSG_ALLOC, { BATCH_MAX + 1 }, 8,
	  .want = -EINVAL },
	{ "ALLOC count 2^32-1", EITHER, CUFLAG_MSG_ALLOC, { UINT32_MAX }, 8, .want = -EINVAL },
	/* Header fd count against the fds that came. */
	{ "nfds 1, no fd sent", EITHER, CUFLAG_MSG_STATS, .hdr_nfds = 1, .want = -EBADMSG },
	{ "BIND: nfds 0, one fd sent", EITHER, CUFLAG_MSG_BIND, { 0 }, 8, .nfds = 1,
	  .want = -EBADMSG },
	{ "BIND: nfds 1, no fd sent", EITHER, CUFLAG_MSG_BIND, { 0 }, 8, .hdr_nfds = 1,
	  .want = -EBADMSG },
	/* Fds on messages that take none. */
	{ "STATS with an fd", EITHER, CUFLAG_MSG_STATS, .hdr_nfds = 1, .nfds = 1,
	  .want = -EBADMSG },
	{ "HELLO with an fd", EITHER, CUFLAG_MSG_HELLO, HELLO_V1, 16, .hdr_nfds = 1, .nfds = 1,
	  .want = -EBADMSG },
	{ "ALLOC with an fd", EITHER, CUFLAG_MSG_ALLOC, { 1 }, 8, .hdr_nfds = 1, .nfds = 1,
	  .want = -EBADMSG },
	/* More fds than BIND takes (up to what an ADOPT may carry, so they all
	 * arrive and the check of the request refuses them; more than that is
	 * truncated control data, covered in test-proto). */
	{ "BIND with 2 fds", EITHER, CUFLAG_MSG_BIND, { 0 }, 8, .hdr_nfds = 2, .nfds = 2,
	  .want = -EBADMSG },
	{ "BIND with 3 fds", EITHER, CUFLAG_MSG_BIND, { 0 }, 8, .hdr_nfds = 3, .nfds = 3,
	  .want = -EBADMSG },
	{ "BIND with 16 fds", EITHER, CUFLAG_MSG_BIND, { 0 }, 8, .hdr_nfds = 16, .nfds = 16,
	  .want = -EBADMSG },
	{ "BIND with MSG_MAX_FDS fds", EITHER, CUFLAG_MSG_BIND, { 0 }, 8,
	  .hdr_nfds = CUFLAG_MSG_MAX_FDS, .nfds = CUFLAG_MSG_MAX_FDS, .want = -EBADMSG },
	/* Longer than any message may be, with and without fds (which are
	 * closed unread). */
	{ "MSG_MAX+1 bytes", EITHER, CUFLAG_MSG_STATS, .blen = CUFLAG_MSG_MAX + 1 - 16,
	  .want = -EMSGSIZE },
	{ "60000 bytes and 3 fds", EITHER, CUFLAG_MSG_STATS, .blen = 60000, .hdr_nfds = 3,
	  .nfds = 3, .want = -EMSGSIZE },
	/* EXPORT and IMPORT: lengths, fds, flags, reserved fields. */
	{ "EXPORT body 4", EITHER, CUFLAG_MSG_EXPORT, { 0 }, 4, .want = -EBADMSG },
	{ "EXPORT with an fd", EITHER, CUFLAG_MSG_EXPORT, { 0 }, 8, .hdr_nfds = 1, .nfds = 1,
	  .want = -EBADMSG },
	{ "EXPORT unknown flags", EITHER, CUFLAG_MSG_EXPORT, { 0, 4 }, 8, .want = -EINVAL },
	{ "EXPORT declare and redeclare", EITHER, CUFLAG_MSG_EXPORT, { 0, 3 }, 8, .hdr_nfds = 1,
	  .nfds = 1, .want = -EINVAL },
	{ "EXPORT declare without the handle", EITHER, CUFLAG_MSG_EXPORT, { 0, 2 }, 8,
	  .want = -EBADMSG },
	{ "EXPORT redeclare without the handle", EITHER, CUFLAG_MSG_EXPORT, { 0, 1 }, 8,
	  .want = -EBADMSG },
	{ "IMPORT body 12", EITHER, CUFLAG_MSG_IMPORT, { 0 }, 12, .hdr_nfds = 1, .nfds = 1,
	  .want = -EBADMSG },
	{ "IMPORT without the handle", EITHER, CUFLAG_MSG_IMPORT, { 0 }, 16, .want = -EBADMSG },
	{ "IMPORT with 2 fds", EITHER, CUFLAG_MSG_IMPORT, { 0 }, 16, .hdr_nfds = 2, .nfds = 2,
	  .want = -EBADMSG },
	{ "IMPORT reserved set", EITHER, CUFLAG_MSG_IMPORT, { 0, 0, 0, 1 }, 16, .hdr_nfds = 1,
	  .nfds = 1, .want = -EINVAL },
	{ "IMPORT unknown flags", EITHER, CUFLAG_MSG_IMPORT, { 0, 2 }, 16, .hdr_nfds = 1,
	  .nfds = 1, .want = -EINVAL },
	{ "IMPORT names a slot, not resuming", EITHER, CUFLAG_MSG_IMPORT, { 0, 0, 5 }, 16,
	  .hdr_nfds = 1, .nfds = 1, .want = -EINVAL },
	{ "IMPORT resume without its eventfd", EITHER, CUFLAG_MSG_IMPORT, { 0, 1, 5 }, 16,
	  .hdr_nfds = 1, .nfds = 1, .want = -EBADMSG },
	{ "IMPORT resume of a group's slot with 2 fds", EITHER, CUFLAG_MSG_IMPORT, { 1, 1, 5 },
	  16, .hdr_nfds = 2, .nfds = 2, .want = -EBADMSG },
	{ "EXPORT before HELLO", BEFORE_HELLO, CUFLAG_MSG_EXPORT, { 0 }, 8, .want = -EPROTO },
	{ "IMPORT before HELLO", BEFORE_HELLO, CUFLAG_MSG_IMPORT, { 0 }, 16, .hdr_nfds = 1,
	  .nfds = 1, .want = -EPROTO },

	/* Protocol state: what needs a HELLO, a HELLO twice, versions. */
	{ "ALLOC before HELLO", BEFORE_HELLO, CUFLAG_MSG_ALLOC, { 1 }, 8, .want = -EPROTO },
	{ "FREE before HELLO", BEFORE_HELLO, CUFLAG_MSG_FREE, { 1 }, FREE_LEN(1), .want = -EPROTO },
	{ "BIND before HELLO", BEFORE_HELLO, CUFLAG_MSG_BIND, { 0 }, 8, .hdr_nfds = 1, .nfds = 1,
	  .want = -EPROTO },
	{ "second HELLO", AFTER_HELLO, CUFLAG_MSG_HELLO, HELLO_V1, 16, .want = -EPROTO },
	{ "HELLO versions 0..0", BEFORE_HELLO, CUFLAG_MSG_HELLO, { 0, 0 }, 16,
	  .want = -EPROTONOSUPPORT },
	{ "HELLO versions V+1..V+9", BEFORE_HELLO, CUFLAG_MSG_HELLO, { V + 1, V + 9 }, 16,
	  .want = -EPROTONOSUPPORT },
	{ "HELLO versions V+1..2^32-1", BEFORE_HELLO, CUFLAG_MSG_HELLO, { V + 1, UINT32_MAX }, 16,
	  .want = -EPROTONOSUPPORT },
	{ "HELLO version range empty", BEFORE_HELLO, CUFLAG_MSG_HELLO, { V + 1, V }, 16,
	  .want = -EINVAL },
};

/* Send b on a fresh connection, after a HELLO when hello; see it refused. */
static void refuse_one(const struct bad_request *b, int hello, const int *efds)
{
	static uint8_t buf[sizeof(struct msg)];
	struct cuflag_msg_hdr h;
	size_t len = sizeof(h) + b->blen;
	int unread;

	CHECK(len <= sizeof(buf) && b->nfds <= CUFLAG_MSG_MAX_FDS);
	cuflag_hdr_init(&h, b->type, b->len ? b->len : (uint32_t)len, ++next_req, b->status,
			b->hdr_nfds);
	memset(buf, 0, len);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), b->w, b->blen < sizeof(b->w) ? b->blen : sizeof(b->w));
	if (b->cut)
		len = b->cut;
	unread = len < sizeof(h) || len > CUFLAG_MSG_MAX;
	expect_dropped_bytes(b->name, hello, buf, len, efds, b->nfds, b->want,
			     unread ? 0 : b->type & 0x7fff);
}

static int new_eventfd(void)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK(fd >= 0);
	return fd;
}

/* Every malformed request, and every one out of protocol order, dropped. */
TEST(malformed)
{
	int efd = new_eventfd(), efds[CUFLAG_MSG_MAX_FDS];
	const size_t n = sizeof(bad_requests) / sizeof(bad_requests[0]);

	for (unsigned i = 0; i < CUFLAG_MSG_MAX_FDS; i++)
		efds[i] = efd;
	printf("malformed messages and protocol state:\n");
	for (int hello = 0; hello < 2; hello++)
		for (size_t i = 0; i < n; i++)
			if (bad_requests[i].when == EITHER ||
			    bad_requests[i].when == (hello ? AFTER_HELLO : BEFORE_HELLO))
				refuse_one(&bad_requests[i], hello, efds);
	close(efd);
}

TEST(protocol_state)
{
	static struct msg m;

	printf("protocol state:\n");
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

TEST(refusals)
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
	{
		struct cuflag_msg_alloc ag = { .count = 1, .group = 1 };
		msg_init(&m, CUFLAG_MSG_ALLOC, &ag, sizeof(ag));
		expect_refusal_on(fd, "ALLOC in a group not made", &m, NULL, 0, -EINVAL);
		ag.group = UINT32_MAX;
		msg_init(&m, CUFLAG_MSG_ALLOC, &ag, sizeof(ag));
		expect_refusal_on(fd, "ALLOC in group 2^32-2", &m, NULL, 0, -EINVAL);
	}

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
	uint64_t end = cuflag_now_ns() + 5000000000u;

	/* A head we scribbled over ourselves (more used than fits) tells nothing. */
	for (;;) {
		uint32_t used = r->tail_local - __atomic_load_n(r->head, __ATOMIC_ACQUIRE);
		if (used < r->hr.queue_cap || used > r->hr.queue_cap)
			break;
		CHECK(cuflag_now_ns() < end);
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
TEST(seals)
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

TEST(scribble)
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

	/* Punching the region's pages out: the daemon faults none of them in (a
	 * private page of its own stands in at its next touch, no SIGBUS kills
	 * it) and drops the client. */
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
		expect_log_line(mark, "a hole was punched in its region");
		printf("  %-52s dropped\n", "region punched out");
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
	uint64_t t0 = cuflag_now_ns();
	double waited;

	CHECK(hello_status() == -EBUSY);
	while (hello_status() == -EBUSY) {
		CHECK(cuflag_now_ns() - t0 < (ms + 3000) * 1000000ull);
		usleep(20000);
	}
	waited = (double)(cuflag_now_ns() - t0) / 1e6;
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

TEST(blocking_eventfd)
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

TEST(wake_thief)
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

TEST(many_connections)
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
		CHECK_FAIL("connection %u of %u after the burst: not served", i + 1, room);
	}
	for (unsigned i = 0; i < room; i++)
		close(fds[i]);
	expect_fds_back();
	/* That burst used up the daemon's log lines for a while: let it pass. */
	last_logged_ns = cuflag_now_ns() + 1000000000u;
}

/* A client that sends and never reads its replies is dropped, not waited for. */
TEST(never_reads)
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

/* A log nobody reads (a journal that stalls): the pipe fills, and the daemon
 * must go on serving, losing lines rather than waiting; it says how many it
 * lost once the reader is back. Root's lines are not rate-limited, so each
 * refusal below is a line. */
TEST(log_reader_stalls)
{
	static uint8_t junk[1];
	struct reply r;
	uint64_t worst = 0;
	size_t mark;
	int n;

	printf("a log reader that stalls:\n");
	for (n = 0; n < 4000 && worst < 1000000000u; n++) {
		uint64_t t0 = cuflag_now_ns();
		int fd = cuflag_unix_connect(d.sock, 5);
		CHECK_MSG(fd >= 0, "connection %d: %s", n, strerror(-fd));
		CHECK(raw_send_bytes(fd, junk, sizeof(junk), NULL, 0) == 0);
		while (raw_recv(fd, &r) > 0)
			; /* the error reply, then the hang-up */
		close(fd);
		if (cuflag_now_ns() - t0 > worst)
			worst = cuflag_now_ns() - t0;
	}
	printf("  %-52s %d refused, slowest %.1f ms\n", "4000 refusals, log unread", n,
	       (double)worst / 1e6);
	CHECK_MSG(worst < 1000000000u, "a refusal took %.0f ms: the daemon waited on its log",
		  (double)worst / 1e6);
	mark = loglen;
	log_collect();
	for (int fd = raw_connect(); fd >= 0; fd = -1) { /* one more line, now that it is read */
		CHECK(raw_send_bytes(fd, junk, sizeof(junk), NULL, 0) == 0);
		while (raw_recv(fd, &r) > 0)
			;
		close(fd);
	}
	struct log_want w = { mark, "log lines dropped", NULL };
	CHECK_MSG(wait_until(log_pred, &w, 3000), "no line says how many lines were lost");
	last_logged_ns = cuflag_now_ns();
}

/* Between checks a test may leave the daemon's log unread: drain it. */
static void settle(void)
{
	log_collect();
}

/* EXPORT and IMPORT that name what the client may not: refused, served on;
 * a handle is known by its file, never by what it holds. */
TEST(export_refusals)
{
	struct cuflag_msg_hello_reply hr;
	struct cuflag_slot_grant g[2], ig;
	struct cuflag_msg_import im = { 0 };
	struct cuflag_msg_export ex = { 0 };
	int region[3], efds[2], pfd[2], handle, fd, own, efd = new_eventfd();
	cuflag_client *c;
	cuflag_slot *s;
	struct reply r;
	static struct msg m;
	char rec[64];

	printf("EXPORT and IMPORT refused, connection kept:\n");
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_export(s, &handle));
	fd = raw_connect();
	raw_hello(fd, &hr, region);
	raw_alloc(fd, 2, g, efds);

	ex.id = hr.nslots;
	msg_init(&m, CUFLAG_MSG_EXPORT, &ex, sizeof(ex));
	expect_refusal_on(fd, "EXPORT of a slot out of range", &m, NULL, 0, -EINVAL);
	ex.id = g[1].id;
	ex.flags = CUFLAG_EXPORT_REDECLARE;
	msg_init(&m, CUFLAG_MSG_EXPORT, &ex, sizeof(ex));
	m.h.nfds = 1;
	expect_refusal_on(fd, "EXPORT redeclare of another client's handle", &m, &handle, 1,
			  -EINVAL);
	expect_refusal_on(fd, "EXPORT redeclare of an eventfd", &m, &efd, 1, -EINVAL);

	CHECK(pipe2(pfd, O_CLOEXEC) == 0);
	ssize_t n = pread(handle, rec, sizeof(rec), 0);
	CHECK(n > 0);
	own = memfd_create("forged-handle", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(own >= 0 && write(own, rec, (size_t)n) == n);
	CHECK(fcntl(own, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);
	msg_init(&m, CUFLAG_MSG_IMPORT, &im, sizeof(im));
	m.h.nfds = 1;
	expect_refusal_on(fd, "IMPORT of a pipe", &m, &pfd[0], 1, -EINVAL);
	expect_refusal_on(fd, "IMPORT of an eventfd", &m, &efd, 1, -EINVAL);
	expect_refusal_on(fd, "IMPORT of a memfd with a handle's bytes", &m, &own, 1, -EINVAL);
	expect_refusal_on(fd, "IMPORT of the daemon page", &m, &region[1], 1, -EINVAL);
	expect_refusal_on(fd, "IMPORT of a region", &m, &region[0], 1, -EINVAL);
	im.group = 3;
	msg_init(&m, CUFLAG_MSG_IMPORT, &im, sizeof(im));
	m.h.nfds = 1;
	expect_refusal_on(fd, "IMPORT into a group not made", &m, &handle, 1, -EINVAL);
	im = (struct cuflag_msg_import){ .flags = CUFLAG_IMPORT_RESUME, .id = hr.nslots };
	msg_init(&m, CUFLAG_MSG_IMPORT, &im, sizeof(im));
	m.h.nfds = 2;
	expect_refusal_on(fd, "IMPORT resuming a slot out of range", &m,
			  (int[]){ handle, efd }, 2, -EINVAL);
	im.id = g[0].id;
	msg_init(&m, CUFLAG_MSG_IMPORT, &im, sizeof(im));
	m.h.nfds = 2;
	expect_refusal_on(fd, "IMPORT resuming a slot held", &m, (int[]){ handle, efd }, 2,
			  -EINVAL);
	im.id = hr.nslots - 1;
	msg_init(&m, CUFLAG_MSG_IMPORT, &im, sizeof(im));
	m.h.nfds = 2;
	expect_refusal_on(fd, "IMPORT resuming outside a resuming session", &m,
			  (int[]){ handle, efd }, 2, -EINVAL);
	ex = (struct cuflag_msg_export){ .id = g[1].id, .flags = CUFLAG_EXPORT_DECLARE };
	msg_init(&m, CUFLAG_MSG_EXPORT, &ex, sizeof(ex));
	m.h.nfds = 1;
	expect_refusal_on(fd, "EXPORT declare of a slot offered no handle", &m, &own, 1, -EINVAL);

	/* A live handle: imported; the import cannot be exported. */
	im = (struct cuflag_msg_import){ 0 };
	msg_init(&m, CUFLAG_MSG_IMPORT, &im, sizeof(im));
	m.h.nfds = 1;
	CHECK_RC(raw_send(fd, &m, &handle, 1));
	expect_ok(fd, CUFLAG_MSG_IMPORT, m.h.req_id, &r);
	CHECK(r.blen == sizeof(ig) && r.nfds == 1);
	memcpy(&ig, r.body, sizeof(ig));
	ex = (struct cuflag_msg_export){ .id = ig.id };
	msg_init(&m, CUFLAG_MSG_EXPORT, &ex, sizeof(ex));
	expect_refusal_on(fd, "EXPORT of an imported slot", &m, NULL, 0, -EPERM);
	printf("  %-52s imported: slot %u from %u\n", "IMPORT of a live handle", ig.id, ig.start);

	cuflag_close_fds(r.fds, r.nfds);
	close(fd);
	cuflag_close_fds(region, 3);
	cuflag_close_fds(efds, 2);
	cuflag_close_fds(pfd, 2);
	close(own);
	close(efd);
	close(handle);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	expect_fds_back();
}

int main(int argc, char **argv)
{
	const char *args[] = { "--max-clients", "8", "--slots-per-client", "128", "--queue-size",
			       "64", NULL };
	const struct test_env env = { .daemon = &d, .settle = settle };
	int rc;

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IONBF, 0);
	snprintf(who, sizeof(who), "pid=%d uid=%u", (int)getpid(), (unsigned)getuid());
	daemon_start(&d, 1, args);
	stats_fd = raw_connect();
	good_start();
	good_check(100);
	baseline_fds = daemon_fd_count_steady(&d);
	rc = test_run(&env, argc, argv);
	good_stop();
	close(stats_fd);
	CHECK(daemon_stop(&d) == 0);
	if (rc == 0)
		printf("hostile: ok\n");
	return rc;
}
