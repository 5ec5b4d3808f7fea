/* SPDX-License-Identifier: MIT */
#include "top.h"
#include "top-rates.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "query.h"

#define REFRESH_MS 1000
#define WIDE 80 /* the columns a row takes in full, and the most it uses */

/* How a frame fits the terminal: its columns (0: no limit) and, from them,
 * how wide the COMM and UNIT columns are (UNIT 0: left out). */
struct layout {
	size_t cols;
	int comm, unit;
};

/* One look at the daemon: its counters and, in the same record, its
 * uptime when it took them (what every rate is measured by). */
struct frame {
	struct ctl_metrics m;
};

static volatile sig_atomic_t quit;

static void on_quit(int sig)
{
	(void)sig;
	quit = 1;
}

static int take(const char *path, struct frame *f)
{
	struct ctl_conn c;
	int rc = ctl_open(&c, path);

	if (!rc)
		rc = ctl_metrics(&c, &f->m);
	if (rc)
		fprintf(stderr, "cuflagctl: top: %s\n", c.why);
	ctl_close(&c);
	return rc;
}

/* 1234 -> "1.2k": at most 6 characters. */
static void fmt_rate(char *buf, size_t n, double v)
{
	if (v < 0)
		v = 0;
	if (v < 1000)
		snprintf(buf, n, "%.0f", v);
	else if (v < 1e6)
		snprintf(buf, n, "%.1fk", v / 1e3);
	else
		snprintf(buf, n, "%.1fM", v / 1e6);
}

/* A duration in ns: "15us", "1.2ms", "3.4s"; "-" for none. */
static void fmt_dur(char *buf, size_t n, uint64_t ns)
{
	if (!ns)
		snprintf(buf, n, "-");
	else if (ns < 1000000)
		snprintf(buf, n, "%" PRIu64 "us", (ns + 500) / 1000);
	else if (ns < 1000000000)
		snprintf(buf, n, "%.1fms", (double)ns / 1e6);
	else
		snprintf(buf, n, "%.1fs", (double)ns / 1e9);
}

/* Where a client runs, in 14 characters: its unit, its pod, its container. */
static void fmt_where(char *buf, size_t n, const struct cuflag_metrics_client *c)
{
	if (c->unit[0])
		snprintf(buf, n, "%.14s", c->unit);
	else if (c->pod[0])
		snprintf(buf, n, "pod:%.10s", c->pod);
	else if (c->container[0])
		snprintf(buf, n, "ctr:%.10s", c->container);
	else
		snprintf(buf, n, "-");
}

static const struct cuflag_metrics_client *find(const struct ctl_metrics *m, uint32_t id)
{
	for (size_t i = 0; i < m->nclients; i++)
		if (m->clients[i].client_id == id)
			return &m->clients[i];
	return NULL;
}

struct row {
	const struct cuflag_metrics_client *c;
	double done_s;
};

static int by_rate(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->done_s != y->done_s)
		return x->done_s < y->done_s ? 1 : -1;
	return x->c->pid - y->c->pid;
}

/* One line, cut at the layout's columns (the last column stays empty, so
 * that a terminal never wraps it). */
__attribute__((format(printf, 3, 4))) static void line(FILE *out, const struct layout *l,
						      const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (l->cols && strlen(buf) >= l->cols)
		buf[l->cols - 1] = 0;
	fprintf(out, "%s\n", buf);
}

/* Full width: COMM 11, UNIT 14. Narrower: UNIT shrinks, then goes (COMM
 * takes what is left, up to a whole process name), then COMM shrinks to 4;
 * narrower still, lines are cut. */
static struct layout fit(size_t cols)
{
	struct layout l = { .cols = cols, .comm = 11, .unit = 14 };
	int room = cols ? (int)cols - 1 - (WIDE - 1 - 15) : 15; /* for " UNIT" */

	if (cols >= WIDE || room >= 15)
		return l;
	l.unit = room >= 6 ? room - 1 : 0;
	if (!l.unit)
		l.comm = room + 11 > 15 ? 15 : room + 11 > 4 ? room + 11 : 4;
	return l;
}

static void header(FILE *out, const struct layout *l, const struct frame *cur,
		   const struct top_rates *r)
{
	const struct cuflag_metrics_daemon *d = &cur->m.daemon;
	char arms[16] = "-", done[16] = "-", wakes[16] = "-", cpu[16] = "-";
	uint64_t up = d->uptime_ms / 1000;

	if (r->valid) {
		fmt_rate(arms, sizeof(arms), r->arms);
		fmt_rate(done, sizeof(done), r->done);
		fmt_rate(wakes, sizeof(wakes), r->wakes);
		snprintf(cpu, sizeof(cpu), "%.1f%%", r->cpu_pct);
	}
	line(out, l, "cuflagd  up %" PRIu64 "h%02" PRIu64 "m%02" PRIu64 "s  clients %u  slots %u"
		"  in flight %u  stuck %u",
		up / 3600, up / 60 % 60, up % 60, d->regions, d->slots, d->pending, d->stuck);
	line(out, l, "arms/s %s  done/s %s  wakes/s %s  scanner cpu %s, %s", arms, done, wakes,
		cpu, d->scanner_state == CUFLAG_SCANNER_PARKED ? "parked" : "running");
	line(out, l, "fds %u of %u  users %u  connections %u  stuck after %.1fs", d->fds_open,
		d->fds_limit, d->users, d->connections, (double)d->stuck_ms / 1e3);
}

/* One frame, rows at most (0: all), cols wide at most (0: any). */
static void draw(FILE *out, const struct frame *prev, const struct frame *cur, size_t rows,
		 size_t cols)
{
	const struct layout l = fit(cols);
	const struct ctl_metrics *m = &cur->m;
	struct top_rates rates = prev ? top_rates(&prev->m.daemon, &m->daemon)
				      : (struct top_rates){ 0 };
	struct row *r = calloc(m->nclients ? m->nclients : 1, sizeof(*r));
	size_t n = m->nclients;

	header(out, &l, cur, &rates);
	fputc('\n', out);
	line(out, &l, "%7s %-*.*s %5s%s%-*.*s %5s %5s %7s %6s %6s %3s", "PID", l.comm, l.comm,
	     "COMM", "UID", l.unit ? " " : "", l.unit, l.unit, l.unit ? "UNIT" : "", "SLOTS",
	     "FLT", "DONE/S", "P50", "P99", "STK");
	if (!r)
		return;
	for (size_t i = 0; i < n; i++) {
		const struct cuflag_metrics_client *o = prev ? find(&prev->m, m->clients[i].client_id)
							    : NULL;
		r[i].c = &m->clients[i];
		r[i].done_s = o && rates.valid ? top_rate(o->completions, r[i].c->completions,
							  rates.seconds)
					       : 0;
	}
	qsort(r, n, sizeof(*r), by_rate);
	if (rows && n > rows)
		n = rows;
	for (size_t i = 0; i < n; i++) {
		const struct cuflag_metrics_client *c = r[i].c;
		char where[16], rate[16], p50[16], p99[16];

		fmt_where(where, sizeof(where), c);
		if (rates.valid)
			fmt_rate(rate, sizeof(rate), r[i].done_s);
		else
			snprintf(rate, sizeof(rate), "-");
		fmt_dur(p50, sizeof(p50), c->p50_ns);
		fmt_dur(p99, sizeof(p99), c->p99_ns);
		line(out, &l, "%7" PRId32 " %-*.*s %5" PRIu32 "%s%-*.*s %5" PRIu32 " %5" PRIu32
		     " %7s %6s %6s %3" PRIu32, c->pid, l.comm, l.comm, c->comm[0] ? c->comm : "?",
		     c->uid, l.unit ? " " : "", l.unit, l.unit, l.unit ? where : "", c->slots,
		     c->in_flight, rate, p50, p99, c->stuck);
	}
	if (n < m->nclients)
		fprintf(out, "(%zu more clients)\n", m->nclients - n);
	free(r);
}

static size_t term_rows(void)
{
	struct winsize ws;

	/* Less the header's four lines, the column names and the last line. */
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 7)
		return ws.ws_row - 7u;
	return 0;
}

/* The terminal's width, else $COLUMNS (as a shell sets it), else 0: any. */
static size_t term_cols(void)
{
	const char *env = getenv("COLUMNS");
	struct winsize ws;
	char *end;
	long v;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	if (env && *env) {
		v = strtol(env, &end, 10);
		if (!*end && v > 0 && v < 10000)
			return (size_t)v;
	}
	return 0;
}

/* Wait up to ms for a key; 1 when it was q or a signal asks to quit (no
 * frame drawn after SIGTERM). Once stdin has ended (</dev/null,
 * a closed pipe, a closed fd), poll would report it at once every time and
 * top would redraw in a tight loop: from then on *ended is set and only the
 * interval is waited (a signal still quits). */
static int wait_key(int ms, int *ended)
{
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
	uint64_t t0 = cuflag_now_ns(), spent;
	struct timespec rest;
	ssize_t n;
	char ch;

	if (!*ended) {
		if (poll(&p, 1, ms) != 1)
			return quit;
		n = read(STDIN_FILENO, &ch, 1);
		if (n == 1)
			return ch == 'q' || ch == 'Q';
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			return quit;
		*ended = 1;
	}
	spent = (cuflag_now_ns() - t0) / 1000000u;
	if (spent >= (uint64_t)ms)
		return quit;
	ms -= (int)spent;
	rest.tv_sec = ms / 1000;
	rest.tv_nsec = (long)(ms % 1000) * 1000000L;
	nanosleep(&rest, NULL); /* EINTR: a signal, maybe SIGTERM */
	return quit;
}

int top_run(const char *path, int once)
{
	struct frame a = { 0 }, b = { 0 }, *prev = &a, *cur = &b, *t;
	struct termios saved, raw;
	int tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
	int rc = take(path, prev), ended = 0;

	if (rc)
		return rc;
	if (once) {
		/* Rates need two looks: one second apart. */
		struct timespec s = { .tv_sec = REFRESH_MS / 1000 };
		nanosleep(&s, NULL);
		if (!(rc = take(path, cur)))
			draw(stdout, prev, cur, 0, term_cols());
		ctl_metrics_free(&a.m);
		ctl_metrics_free(&b.m);
		return rc;
	}
	signal(SIGINT, on_quit);
	signal(SIGTERM, on_quit);
	if (tty) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 1;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	fputs("\033[?25l", stdout); /* no cursor */
	fputs("\033[H\033[2J", stdout);
	draw(stdout, NULL, prev, term_rows(), term_cols());
	fflush(stdout);
	while (!quit && !wait_key(REFRESH_MS, &ended)) {
		ctl_metrics_free(&cur->m);
		if ((rc = take(path, cur)))
			break;
		fputs("\033[H\033[2J", stdout);
		draw(stdout, prev, cur, term_rows(), term_cols());
		fflush(stdout);
		/* A frame drawn early (a key) measures the next one from the
		 * older baseline, never over a few milliseconds. */
		if (!top_next_baseline(&prev->m.daemon, &cur->m.daemon))
			continue;
		t = prev;
		prev = cur;
		cur = t;
	}
	fputs("\033[?25h", stdout);
	fflush(stdout);
	if (tty)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	ctl_metrics_free(&a.m);
	ctl_metrics_free(&b.m);
	return rc;
}
