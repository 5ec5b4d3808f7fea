/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text cuflagctl writes (ctl/prom.c) for labels a process
 * chose: escaped as the format says, and clean under promtool where it is
 * installed ($PROMTOOL, set by meson; the check is skipped without it); and
 * the conventions Prometheus users expect: cuflag_build_info, the standard
 * process_* series, per-user totals that outlive clients.
 */
#undef NDEBUG
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "prom.h"
#include "unit-run.h"

/* A string literal, its NUL included, into a wire field. */
#define SET(dst, lit) memcpy(dst, lit, sizeof(lit))

/* One client whose comm, unit and cgroup hold every byte the format escapes,
 * and bytes that are not text at all. */
static char *write_one(struct cuflag_metrics_client *c)
{
	static struct cuflag_metrics_user_totals t[2] = {
		{ .kind = CUFLAG_METRICS_USER_TOTALS, .uid = 1000, .arms = 12, .completions = 10,
		  .clients = 3 },
		{ .kind = CUFLAG_METRICS_USER_TOTALS, .uid = CUFLAG_UID_OTHERS, .arms = 2,
		  .completions = 1, .clients = 1 },
	};
	struct ctl_metrics m = { .clients = c, .nclients = 1, .totals = t, .ntotals = 2,
				 .start_unix_ms = 1700000000123ull };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(f);
	m.daemon.kind = CUFLAG_METRICS_DAEMON;
	m.daemon.nbounds = CUFLAG_HIST_BOUNDS;
	m.daemon.fds_open = 17;
	m.daemon.fds_limit = 1024;
	m.daemon.regions = 3;
	m.daemon.connections = 4;
	SET(m.version, "0.1.0\"x");
	for (unsigned b = 0; b < CUFLAG_HIST_BOUNDS; b++)
		m.daemon.bounds_ns[b] = 10000ull << b;
	memset(c, 0, sizeof(*c));
	c->kind = CUFLAG_METRICS_CLIENT;
	c->client_id = 7;
	c->pid = 4242;
	c->uid = 1000;
	c->buckets[3] = 5;
	SET(c->comm, "a\"b\\c\nd");
	SET(c->unit, "x\"y.service");
	SET(c->cgroup, "/s.slice/q\"\\\n\x01\xff.scope");
	prom_write(f, &m);
	ck_assert_int_eq(fclose(f), 0);
	return text;
}

START_TEST(test_escaped_labels)
{
	struct cuflag_metrics_client c;
	char *text = write_one(&c);
	char *info = strstr(text, "\ncuflag_client_info{");

	ck_assert_ptr_nonnull(strstr(text, "comm=\"a\\\"b\\\\c\\nd\""));
	ck_assert_ptr_nonnull(strstr(text, "unit=\"x\\\"y.service\""));
	/* The cgroup on the info series only, its non-text bytes made '_'. */
	ck_assert_ptr_nonnull(info);
	ck_assert_ptr_nonnull(strstr(info, "cgroup=\"/s.slice/q\\\"\\\\\\n__.scope\"} 1\n"));
	ck_assert_ptr_eq(strstr(text, "cgroup="), strstr(info, "cgroup="));
	ck_assert_ptr_null(strstr(strstr(info, "cgroup=") + 1, "cgroup="));
	/* Every line is one sample or one comment: no newline left unescaped. */
	for (char *l = text; *l; l = strchr(l, '\n') + 1)
		ck_assert(l[0] == '#' || !strncmp(l, "cuflag_", 7) || !strncmp(l, "process_", 8));
	free(text);
}
END_TEST

START_TEST(test_conventions)
{
	static const char *const lines[] = {
		"cuflag_build_info{version=\"0.1.0\\\"x\"} 1",
		"process_start_time_seconds 1700000000.123",
		"process_open_fds 17",
		"process_max_fds 1024",
		/* One meaning of clients: those holding a region, as status says. */
		"cuflag_clients 3",
		"cuflag_connections 4",
		/* Per user, outliving the clients; the users past the table as "others". */
		"cuflag_user_completions_total{uid=\"1000\"} 10",
		"cuflag_user_arms_total{uid=\"others\"} 2",
		"cuflag_user_clients_total{uid=\"1000\"} 3",
	};
	/* The old names are gone, not kept beside the new ones. */
	static const char *const gone[] = { "cuflag_uptime_seconds", "cuflag_fds_",
					    "cuflag_regions" };
	struct cuflag_metrics_client c;
	char *text = write_one(&c), line[128];

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		snprintf(line, sizeof(line), "\n%s\n", lines[i]);
		ck_assert_msg(strstr(text, line), "no line %s", lines[i]);
	}
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
		ck_assert_msg(!strstr(text, gone[i]), "%s is still written", gone[i]);
	free(text);
}
END_TEST

START_TEST(test_promtool_clean)
{
	const char *promtool = getenv("PROMTOOL");
	struct cuflag_metrics_client c;
	char cmd[512], *text;
	FILE *p;
	int st;

	if (!promtool || !promtool[0])
		return; /* not installed (Debian: prometheus) */
	text = write_one(&c);
	snprintf(cmd, sizeof(cmd), "'%s' check metrics >&2", promtool);
	p = popen(cmd, "w");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(fputs(text, p) >= 0, 1);
	st = pclose(p);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "promtool check metrics: %d", st);
	free(text);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { test_escaped_labels, test_conventions, test_promtool_clean,
				       NULL };
	return unit_run("prom", tests);
}
