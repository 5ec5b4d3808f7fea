/* SPDX-License-Identifier: MIT */
/*
 * What the daemon tells an operator, end to end: the real daemon, clients
 * completing on a simulated device after known delays, and cuflagctl
 * ($CUFLAGCTL) reading it back. Checked: the arm -> done histogram puts
 * completions after 1.1 ms and 11 ms in the buckets that hold them (and tells
 * 1 ms from 2 ms, 10 ms from 20 ms); the counters agree with what was done;
 * a slot armed and never completed is listed by cuflagctl stuck, with its
 * pid, within --stuck-ms + 1 s, counted in cuflag_stuck_slots, logged once,
 * and the log lines a client's stuck slots cause are limited; --no-metrics
 * leaves the histogram empty and the counts right. Every answer fits: a
 * daemon at --max-clients 1024 with one user holding most of them answers
 * cuflagctl clients, stuck, metrics and top in full, however slowly the
 * asker reads, and serves the others meanwhile.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "cuflag-proto.h"
#include "harness.h"
#include "unix-socket.h"

#define US 1000ull
#define MS 1000000ull

/* Run "$CUFLAGCTL --socket sock ARGS..." and return its stdout (static, NUL-terminated). */
static const char *ctl(const char *sock, const char *a1, const char *a2)
{
	static char out[16 << 20];
	const char *exe = getenv("CUFLAGCTL");
	int p[2];
	size_t len = 0;
	ssize_t n;
	pid_t pid;
	int st;

	CHECK(exe != NULL);
	CHECK(pipe(p) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl(exe, exe, "--socket", sock, a1, a2, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	while ((n = read(p[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)n;
	close(p[0]);
	out[len] = 0;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return out;
}

/* The value of the sample whose line starts with name{ and holds every one
 * of the label texts in want (NULL-terminated); -1 if there is none. */
static double sample(const char *text, const char *name, const char *const *want)
{
	size_t nl = strlen(name);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *end = strchr(l, '\n'), *sp;
		size_t len = end ? (size_t)(end - l) : strlen(l);
		char line[1024];
		int all = 1;

		if (len >= sizeof(line) || strncmp(l, name, nl) || (l[nl] != '{' && l[nl] != ' '))
			continue;
		memcpy(line, l, len);
		line[len] = 0;
		for (const char *const *w = want; *w; w++)
			all &= strstr(line, *w) != NULL;
		if (all && (sp = strrchr(line, ' ')))
			return strtod(sp + 1, NULL);
	}
	return -1;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

/* Until the daemon has taken n arms in all: asked again at once, so that
 * the device's delay starts right after (a sleep between would add to it). */
static void wait_taken(const struct daemon_proc *d, uint64_t n)
{
	uint64_t end = cuflag_now_ns() + 2000 * MS;
	struct cuflag_msg_stats_reply st;

	for (daemon_stats(d, &st); st.armed < n; daemon_stats(d, &st))
		CHECK(cuflag_now_ns() < end);
}

/* What a client can tell of each completion's arm -> done as the daemon
 * measures it: at least lo (the flag was stored delay after the daemon was
 * seen to have taken the arm, and the daemon stamps an arm no later than it
 * takes it), at most hi (the client armed, then woke once it had been
 * signalled). In seconds. */
struct timed {
	double lo[64], hi[64];
	int n;
};

/* n completions on slot s, each stored delay_ns after the daemon took its
 * arm (its count of arms taken, armed before the first, says so); with d
 * NULL, delay_ns after the arm. */
static void complete_after(const struct daemon_proc *d, uint64_t armed, cuflag_slot *s, int n,
			   uint64_t delay_ns, struct timed *tm)
{
	for (int i = 0; i < n; i++) {
		uint64_t t0 = cuflag_now_ns(), t2;
		uint32_t t;
		CHECK_RC(cuflag_slot_arm(s, &t));
		if (d)
			wait_taken(d, armed + (uint64_t)i + 1);
		sleep_ns(delay_ns);
		sim_store(cuflag_slot_flag(s), t);
		CHECK_RC(cuflag_slot_wait(s, t, 2000));
		CHECK(consume_blocking(s) == 1);
		t2 = cuflag_now_ns();
		if (tm && tm->n < 64) {
			tm->lo[tm->n] = (double)delay_ns / 1e9;
			tm->hi[tm->n++] = (double)(t2 - t0) / 1e9;
		}
	}
}

/* Completions of the client with label text who at or below bound le. */
static double at_or_below(const char *text, const char *client, const char *le)
{
	char lbl[32];
	const char *want[] = { client, lbl, NULL };

	snprintf(lbl, sizeof(lbl), "le=\"%s\"", le);
	return sample(text, "cuflag_completion_seconds_bucket", want);
}

/*
 * Each bound of the client's histogram holds no more than the completions
 * that could have been that fast, and no fewer than those that surely were
 * (less a 200 us allowance: the daemon's stamps come from its scanner's
 * passes). Prints how many fell in (b1, b2].
 */
static void check_buckets(const char *text, const char *client, const struct timed *tm,
			  const char *b1, const char *b2)
{
	static const char *const les[] = { "0.0005", "0.001", "0.002", "0.005", "0.01",
					   "0.02",   "0.05",  "0.1",   "+Inf" };

	for (size_t k = 0; k < sizeof(les) / sizeof(les[0]); k++) {
		double b = strcmp(les[k], "+Inf") ? strtod(les[k], NULL) : 1e300;
		double cum = at_or_below(text, client, les[k]);
		int maybe = 0, surely = 0;
		for (int i = 0; i < tm->n; i++) {
			maybe += tm->lo[i] <= b;
			surely += tm->hi[i] + 200e-6 <= b;
		}
		if (cum < surely || cum > maybe)
			printf("metrics: le=%s: %.0f, expected %d to %d\n", les[k], cum, surely, maybe);
		CHECK(cum >= surely && cum <= maybe);
	}
	printf("metrics: %s: %.0f of %d in (%s, %s]\n", client,
	       at_or_below(text, client, b2) - at_or_below(text, client, b1), tm->n, b1, b2);
}

static void known_delays(void)
{
	/* Spinning all along: the flag is seen within microseconds of its
	 * store (as long as the machine lets the scanner run). */
	const char *args[] = { "--scanner-mode", "spin", "--pending-spin-ms", "0", NULL };
	static struct timed fast_t, slow_t;
	struct daemon_proc d;
	cuflag_client *fast, *slow;
	cuflag_slot *sf, *ss;
	const char *text, *p;
	char fid[32], sid[32];
	const int nf = 40, ns = 20;

	daemon_start(&d, 0, args);
	CHECK_RC(cuflag_connect(d.sock, &fast));
	CHECK_RC(cuflag_slot_acquire(fast, &sf));
	complete_after(&d, 0, sf, nf, 1100 * US, &fast_t);
	CHECK_RC(cuflag_connect(d.sock, &slow));
	CHECK_RC(cuflag_slot_acquire(slow, &ss));
	complete_after(&d, nf, ss, ns, 11 * MS, &slow_t);

	text = ctl(d.sock, "metrics", NULL);
	/* Clients are listed in the order they connected: the fast one first. */
	p = strstr(text, "\ncuflag_arms_total{client=\"");
	CHECK(p && sscanf(p, "\ncuflag_arms_total{client=\"%20[0-9]", fid + 8) == 1);
	p = strstr(p + 1, "\ncuflag_arms_total{client=\"");
	CHECK(p && sscanf(p, "\ncuflag_arms_total{client=\"%20[0-9]", sid + 8) == 1);
	memcpy(fid, "client=\"", 8);
	memcpy(sid, "client=\"", 8);
	strcat(fid, "\"");
	strcat(sid, "\"");
	{
		char pid[32];
		snprintf(pid, sizeof(pid), "pid=\"%d\"", (int)getpid());
		const char *want[] = { fid, pid, "comm=\"test-metrics\"", NULL };
		CHECK(sample(text, "cuflag_arms_total", want) == nf);
		CHECK(sample(text, "cuflag_completions_total", want) == nf);
		CHECK(sample(text, "cuflag_completion_seconds_count", want) == nf);
		CHECK(sample(text, "cuflag_in_flight", want) == 0);
	}
	/* 1.1 ms: never at or below 1 ms; in (1 ms, 2 ms] unless it ran late. */
	check_buckets(text, fid, &fast_t, "0.001", "0.002");
	CHECK(at_or_below(text, fid, "0.001") == 0);
	/* 11 ms: never at or below 10 ms. */
	check_buckets(text, sid, &slow_t, "0.01", "0.02");
	CHECK(at_or_below(text, sid, "0.01") == 0);
	{
		const char *want[] = { sid, NULL };
		double sum = sample(text, "cuflag_completion_seconds_sum", want);
		/* The sum: at least ns x 11 ms. */
		CHECK(sum >= ns * 0.011);
	}
	cuflag_disconnect(fast);
	cuflag_disconnect(slow);
	CHECK(daemon_stop(&d) == 0);
}

/*
 * The default scanner naps through regular arms: an arm waits in its queue
 * until a lead before its work can be due, and is taken then. Its arm ->
 * done still counts from when it was made: work stored 400 us after its arm
 * is never at or below 200 us (from when the scanner took it, it read as
 * tens of us).
 */
static void regular_arms_timed_from_the_arm(void)
{
	static struct timed tm;
	struct daemon_proc d;
	cuflag_client *c;
	cuflag_slot *s;
	const char *text, *p;
	char id[32] = "client=\"";
	const int n = 64; /* what struct timed holds */

	daemon_start(&d, 0, NULL);
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	for (int i = 0; i < n; i++) {
		uint64_t t0 = cuflag_now_ns(), t1, t2, now;
		uint32_t t;
		CHECK_RC(cuflag_slot_arm(s, &t));
		t1 = cuflag_now_ns();
		/* now, read last before the store, is when the flag surely
		 * was not stored yet: a read after it could come any time
		 * later on a loaded machine, and overstate the lower bound. */
		while ((now = cuflag_now_ns()) < t1 + 400 * US)
			sleep_ns(t1 + 400 * US - now);
		sim_store(cuflag_slot_flag(s), t);
		CHECK_RC(cuflag_slot_wait(s, t, 2000));
		CHECK(consume_blocking(s) == 1);
		t2 = cuflag_now_ns();
		if (tm.n < 64) {
			tm.lo[tm.n] = (double)(now - t1) / 1e9;
			tm.hi[tm.n++] = (double)(t2 - t0) / 1e9;
		}
		while ((now = cuflag_now_ns()) < t0 + 800 * US)
			sleep_ns(t0 + 800 * US - now);
	}
	text = ctl(d.sock, "metrics", NULL);
	p = strstr(text, "\ncuflag_arms_total{client=\"");
	CHECK(p && sscanf(p, "\ncuflag_arms_total{client=\"%20[0-9]", id + 8) == 1);
	strcat(id, "\"");
	check_buckets(text, id, &tm, "0.0002", "0.0005");
	/* Timed from when the scanner took the arm, nearly all read short;
	 * a loaded machine once had a few of 64 do so. */
	{
		double shorter = at_or_below(text, id, "0.0002");
		if (shorter)
			printf("metrics: %.0f of %d at or below 200 us\n", shorter, n);
		CHECK(shorter <= n / 16);
	}
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void stuck_slot(void)
{
	const char *args[] = { "--stuck-ms", "500", NULL };
	static char log[1 << 16];
	char row[64], want_pid[32];
	struct daemon_proc d;
	cuflag_client *c;
	cuflag_slot *s, *more[12];
	uint64_t t0, seen_ms = 0;
	uint32_t t;
	const char *text;
	size_t len = 0;

	daemon_start(&d, 1, args);
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm(s, &t));
	t0 = cuflag_now_ns();
	snprintf(want_pid, sizeof(want_pid), "\"pid\":%d", (int)getpid());
	snprintf(row, sizeof(row), "\"armed\":%u", t);
	/* Named with its pid once --stuck-ms has passed, not before; how soon
	 * after is printed, not checked: a loaded machine runs each cuflagctl
	 * late by as much as it is busy. */
	while (cuflag_now_ns() - t0 < 20000 * MS) {
		text = ctl(d.sock, "stuck", "--json");
		if (strstr(text, want_pid) && strstr(text, row)) {
			seen_ms = (cuflag_now_ns() - t0) / MS;
			break;
		}
		sleep_ns(50 * MS);
	}
	printf("metrics: a slot armed and never completed listed as stuck after %llu ms\n",
	       (unsigned long long)seen_ms);
	CHECK(seen_ms >= 500);
	CHECK(strstr(text, "\"comm\":\"test-metrics\"") && strstr(text, "\"age_ms\":"));
	{
		const char *want[] = { "comm=\"test-metrics\"", NULL };
		text = ctl(d.sock, "metrics", NULL);
		CHECK(sample(text, "cuflag_stuck_slots", want) == 1);
		CHECK(sample(text, "cuflag_in_flight", want) == 1);
		CHECK(sample(text, "cuflag_oldest_wait_seconds", want) >= 0.5);
	}
	/* Logged once, however long it stays stuck. */
	sleep_ns(1000 * MS);
	len += daemon_read_log(&d, log + len, sizeof(log) - len);
	CHECK(count(log, "stuck: armed") == 1);
	CHECK(strstr(log, "comm=test-metrics"));

	/* Completed: no longer stuck. */
	sim_store(cuflag_slot_flag(s), t);
	CHECK_RC(cuflag_slot_wait(s, t, 2000));
	CHECK(consume_blocking(s) == 1);
	text = ctl(d.sock, "stuck", "--json");
	CHECK(!strstr(text, want_pid));

	/* Twelve more at once: at most five lines a minute for this client. */
	for (int i = 0; i < 12; i++) {
		CHECK_RC(cuflag_slot_acquire(c, &more[i]));
		CHECK_RC(cuflag_slot_arm(more[i], &t));
	}
	sleep_ns(1200 * MS);
	text = ctl(d.sock, "stuck", NULL);
	CHECK(count(text, "test-metrics") == 12);
	len += daemon_read_log(&d, log + len, sizeof(log) - len);
	printf("metrics: 12 stuck slots of one client: %d log lines\n", count(log, "stuck: armed"));
	CHECK(count(log, "stuck: armed") == 5);
	for (int i = 0; i < 12; i++)
		cuflag_slot_release(more[i]);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
}

static void no_metrics(void)
{
	const char *args[] = { "--no-metrics", "--stuck-ms", "100", NULL };
	const char *want[] = { "comm=\"test-metrics\"", NULL };
	struct daemon_proc d;
	cuflag_client *c;
	cuflag_slot *s;
	const char *text;
	uint32_t t;

	daemon_start(&d, 0, args);
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	complete_after(NULL, 0, s, 10, 100000, NULL);
	CHECK_RC(cuflag_slot_arm(s, &t));
	sleep_ns(400 * MS);
	text = ctl(d.sock, "metrics", NULL);
	CHECK(sample(text, "cuflag_timing_enabled", (const char *[]){ NULL }) == 0);
	CHECK(sample(text, "cuflag_completions_total", want) == 10);
	CHECK(sample(text, "cuflag_completion_seconds_count", want) == 0);
	CHECK(sample(text, "cuflag_stuck_slots", want) == 0);
	sim_store(cuflag_slot_flag(s), t);
	CHECK_RC(cuflag_slot_wait(s, t, 2000));
	CHECK(consume_blocking(s) == 1);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
}

/* n completions on a new slot of c, each armed, stored and consumed. */
static void complete_n(cuflag_client *c, int n)
{
	cuflag_slot *s;
	uint32_t t;

	CHECK_RC(cuflag_slot_acquire(c, &s));
	for (int i = 0; i < n; i++) {
		CHECK_RC(cuflag_slot_arm(s, &t));
		sim_store(cuflag_slot_flag(s), t);
		CHECK_RC(cuflag_slot_wait(s, t, 2000));
		CHECK(consume_blocking(s) == 1);
	}
	cuflag_slot_release(s);
}

/* Per-user counters outlive the clients and sum to the daemon's; "clients"
 * means what status means; the process_* series and the build's version. */
static void user_totals(void)
{
	struct cuflag_msg_stats_reply st;
	struct daemon_proc d;
	cuflag_client *gone, *live;
	char uid[32];
	const char *const by_uid[] = { uid, NULL }, *const none[] = { NULL };
	const char *text;
	double start;

	snprintf(uid, sizeof(uid), "uid=\"%u\"", (unsigned)getuid());
	daemon_start(&d, 0, NULL);
	CHECK_RC(cuflag_connect(d.sock, &gone));
	complete_n(gone, 5);
	cuflag_disconnect(gone);
	CHECK_RC(cuflag_connect(d.sock, &live));
	complete_n(live, 3);
	text = ctl(d.sock, "metrics", NULL);
	daemon_stats(&d, &st);
	printf("metrics: user completions %g (daemon %g), clients %g of %g connections\n",
	       sample(text, "cuflag_user_completions_total", by_uid),
	       sample(text, "cuflag_daemon_completions_total", none),
	       sample(text, "cuflag_clients", none), sample(text, "cuflag_connections", none));
	CHECK(sample(text, "cuflag_user_completions_total", by_uid) == 8);
	CHECK(sample(text, "cuflag_daemon_completions_total", none) == 8);
	CHECK(sample(text, "cuflag_user_arms_total", by_uid) == 8);
	CHECK(sample(text, "cuflag_user_clients_total", by_uid) == 2);
	/* The live client's own counter holds its 3 only. */
	CHECK(sample(text, "cuflag_completions_total", by_uid) == 3);
	/* Clients as status counts them; cuflagctl's connection is not one. */
	CHECK(sample(text, "cuflag_clients", none) == st.clients && st.clients == 1);
	CHECK(sample(text, "cuflag_connections", none) == 2);
	CHECK(sample(text, "process_open_fds", none) > 0);
	CHECK(sample(text, "process_max_fds", none) > 0);
	start = sample(text, "process_start_time_seconds", none);
	CHECK(start > (double)time(NULL) - 60 && start <= (double)time(NULL) + 1);
	CHECK(strstr(text, "\ncuflag_build_info{version=\"") != NULL);
	cuflag_disconnect(live);
	CHECK(daemon_stop(&d) == 0);
}

/* The first METRICS page asked with want on a fresh connection: the kinds
 * of its records, or-ed as bits, or the error status of its reply. */
static int first_page_kinds(const char *sock, uint32_t want, uint32_t *kinds)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_metrics m = { .after_id = 0, .want = want };
	struct cuflag_msg_hdr h = { .type = CUFLAG_MSG_METRICS,
				    .len = sizeof(h) + sizeof(m), .req_id = 9 };
	int fd = cuflag_unix_connect(sock, 5);
	uint32_t kind;

	CHECK(fd >= 0);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &m, sizeof(m));
	CHECK(send(fd, buf, sizeof(h) + sizeof(m), MSG_NOSIGNAL) == (ssize_t)(sizeof(h) + sizeof(m)));
	*kinds = 0;
	do {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		CHECK(n >= (ssize_t)(sizeof(h) + sizeof(kind)));
		memcpy(&h, buf, sizeof(h));
		if (h.status) {
			close(fd);
			return h.status;
		}
		memcpy(&kind, buf + sizeof(h), sizeof(kind));
		*kinds |= 1u << kind;
	} while (kind != CUFLAG_METRICS_END);
	close(fd);
	return 0;
}

/* A reader that asks for nothing new (want 0: every older cuflagctl) gets
 * only the kinds it knows; one asking what the daemon does not know is
 * refused with -EINVAL, so that a newer reader can ask again without it. */
static void older_readers(void)
{
	struct daemon_proc d;
	cuflag_client *c;
	uint32_t kinds;

	daemon_start(&d, 0, NULL);
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK(first_page_kinds(d.sock, 0, &kinds) == 0);
	CHECK(kinds == (1u << CUFLAG_METRICS_DAEMON | 1u << CUFLAG_METRICS_USER |
			1u << CUFLAG_METRICS_CLIENT | 1u << CUFLAG_METRICS_END));
	CHECK(first_page_kinds(d.sock, CUFLAG_METRICS_WANT_ALL, &kinds) == 0);
	CHECK(kinds & (1u << CUFLAG_METRICS_USER_TOTALS));
	CHECK(kinds & (1u << CUFLAG_METRICS_PROCESS));
	CHECK(first_page_kinds(d.sock, 0x80000000u, &kinds) == -EINVAL);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
}

#define SESSIONS 1000
#define ARMED 100

/* CLIENTS asked on a raw connection whose replies are left unread for a
 * while: the daemon waits for the reader, serves STATS meanwhile, and the
 * whole list arrives, ended. */
static void slow_reader(const struct daemon_proc *d)
{
	struct cuflag_msg_hdr h = { .type = CUFLAG_MSG_CLIENTS, .len = sizeof(h), .req_id = 7 };
	struct cuflag_msg_stats_reply st;
	uint8_t buf[CUFLAG_MSG_MAX];
	int fd = cuflag_unix_connect(d->sock, 5), listed = 0;
	uint64_t t0;

	CHECK(fd >= 0);
	CHECK(send(fd, &h, sizeof(h), MSG_NOSIGNAL) == (ssize_t)sizeof(h));
	/* Its socket fills; the loop goes on with everybody else. */
	usleep(300 * 1000);
	t0 = cuflag_now_ns();
	daemon_stats(d, &st);
	printf("STATS beside a full CLIENTS answer: %.2f ms\n", (double)(cuflag_now_ns() - t0) / 1e6);
	CHECK(st.clients >= SESSIONS);
	for (;;) {
		struct cuflag_msg_hdr r;
		struct cuflag_msg_client_info ci;
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		CHECK(n == (ssize_t)(sizeof(r) + sizeof(ci)));
		memcpy(&r, buf, sizeof(r));
		CHECK(r.status == 0 && r.req_id == 7 && r.type == (CUFLAG_MSG_CLIENTS | CUFLAG_MSG_REPLY));
		memcpy(&ci, buf + sizeof(r), sizeof(ci));
		if (!ci.client_id)
			break;
		listed++;
	}
	printf("a slow reader got %d clients\n", listed);
	CHECK(listed >= SESSIONS);
	/* The connection is read again after its answer. */
	CHECK(send(fd, &h, sizeof(h), MSG_NOSIGNAL) == (ssize_t)sizeof(h));
	CHECK(recv(fd, buf, sizeof(buf), 0) > 0);
	close(fd);
}

static void many_clients(void)
{
	static cuflag_client *c[SESSIONS];
	const char *args[] = { "--max-clients", "1024", "--max-clients-per-uid", "1024",
			       "--max-connections-per-uid", "1100", "--stuck-ms", "50", NULL };
	cuflag_slot *s[ARMED];
	struct daemon_proc d;
	struct rlimit rl;
	const char *out;
	int fds0, unread;

	/* Each client holds a few fds here (its socket, its wake eventfd...). */
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_cur < 8 * SESSIONS) {
		rl.rlim_cur = rl.rlim_max < 8 * SESSIONS ? rl.rlim_max : 8 * SESSIONS;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	}
	if (rl.rlim_cur < 4 * SESSIONS) {
		printf("open-file limit %llu too low for %d sessions\n",
		       (unsigned long long)rl.rlim_cur, SESSIONS);
		return;
	}
	fds0 = self_fd_count();
	daemon_start(&d, 0, args);
	for (int i = 0; i < SESSIONS; i++) {
		int rc = cuflag_connect(d.sock, &c[i]);
		if (rc) {
			fprintf(stderr, "session %d: %s\n", i, strerror(-rc));
			abort();
		}
	}
	/* Some slots armed and never completed: stuck after 50 ms. */
	for (int i = 0; i < ARMED; i++) {
		uint32_t target;
		CHECK(cuflag_slot_acquire(c[i], &s[i]) == 0);
		CHECK(cuflag_slot_arm(s[i], &target) == 0);
	}
	usleep(300 * 1000);

	out = ctl(d.sock, "clients", "--json");
	printf("clients --json: %d clients\n", count(out, "\"id\""));
	CHECK(count(out, "\"id\"") == SESSIONS);
	out = ctl(d.sock, "clients", NULL);
	CHECK(count(out, "\n") >= SESSIONS);
	out = ctl(d.sock, "stuck", NULL);
	printf("stuck: %d lines\n", count(out, "\n"));
	CHECK(strstr(out, "more stuck slots not listed") != NULL);
	out = ctl(d.sock, "metrics", NULL);
	printf("metrics: %d client_info series\n", count(out, "cuflag_client_info{"));
	CHECK(count(out, "cuflag_client_info{") == SESSIONS);
	out = ctl(d.sock, "top", "--once");
	CHECK(count(out, "\n") > 10);
	slow_reader(&d);
	/* One more that is never read: the daemon stops with it half sent. */
	unread = cuflag_unix_connect(d.sock, 5);
	CHECK(unread >= 0);
	CHECK(send(unread, &(struct cuflag_msg_hdr){ .type = CUFLAG_MSG_CLIENTS,
						   .len = sizeof(struct cuflag_msg_hdr) },
		   sizeof(struct cuflag_msg_hdr), MSG_NOSIGNAL) > 0);

	for (int i = 0; i < ARMED; i++)
		cuflag_slot_release(s[i]);
	for (int i = 0; i < SESSIONS; i++)
		cuflag_disconnect(c[i]);
	check_serves(d.sock);
	CHECK(daemon_stop(&d) == 0);
	close(unread);
	daemon_proc_remove(&d);
	CHECK(self_fd_count() == fds0);
	}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	known_delays();
	regular_arms_timed_from_the_arm();
	stuck_slot();
	no_metrics();
	user_totals();
	older_readers();
	many_clients();
	printf("metrics: ok\n");
	return 0;
}
