/* SPDX-License-Identifier: MIT */
/* cuflagctl: ask a running cuflagd how it is doing. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuflag/cuflag.h"
#include "exporter.h"
#include "prom.h"
#include "query.h"
#include "reach.h"
#include "report.h"
#include "top.h"

enum { EXIT_OK = 0, EXIT_DAEMON = 1, EXIT_USAGE = 2 };

static void usage(void)
{
	printf(
		"Usage: cuflagctl [--socket PATH] [--json] COMMAND\n"
		"Ask a running cuflagd how it is doing.\n\n"
		"Commands:\n"
		"  status          which daemon (node or user, and why), version, uptime,\n"
		"                  slab backend, epoch, scanner, load\n"
		"  clients         one line per connected client\n"
		"  stats           every counter the daemon keeps\n"
		"  stuck           slots armed longer than the daemon's --stuck-ms\n"
		"  metrics         what the daemon records, in the Prometheus text format\n"
		"  top             a live view, one row per client (q quits)\n\n"
		"Options:\n"
		"  --socket PATH   the daemon's socket (default: $CUFLAG_SOCKET, else\n"
		"                  " CUFLAG_DEFAULT_SOCKET ", else, when no node daemon\n"
		"                  serves this user, the user's own at\n"
		"                  $XDG_RUNTIME_DIR/cuflag/cuflagd.sock or\n"
		"                  /tmp/cuflag-UID/cuflagd.sock)\n"
		"  --json          print one JSON object instead of a table\n"
		"  --listen HOST:PORT\n"
		"                  metrics: serve GET /metrics over HTTP there instead\n"
		"  --once          top: print one frame and exit\n"
		"  -h, --help      this text\n"
		"  --version       print the version\n\n"
		"Exit status: 0 success, 1 the daemon is unreachable or answered an error,\n"
		"2 usage error.\n");
}

/* A usage error: one line (what, and the word it is about), then where the
 * usage is; EXIT_USAGE. what NULL: getopt_long has printed the line. */
static int usage_error(const char *what, const char *word)
{
	if (what)
		fprintf(stderr, "cuflagctl: %s%s%s%s\n", what, word ? " '" : "", word ? word : "",
			word ? "'" : "");
	fprintf(stderr, "Try 'cuflagctl --help' for the commands and options.\n");
	return EXIT_USAGE;
}

/* Which daemon answered, and why that one: its own word (a daemon that
 * says nothing of it is a node daemon), and how it was chosen. */
static void which_daemon(struct ctl_conn *c, const struct ctl_reach *r, const char *named_by,
			 struct ctl_which *w)
{
	uint32_t flags = 0;

	if (ctl_daemon_flags(c, &flags))
		c->why[0] = 0; /* not the command's error: STATS answered */
	w->kind = flags & CUFLAG_METRICS_F_USER ? "user" : "node";
	w->socket = r->path;
	if (named_by)
		snprintf(w->why, sizeof(w->why), "%s", named_by);
	else
		snprintf(w->why, sizeof(w->why), "%s", r->why);
}

static int run_counters(struct ctl_conn *c, int json, int brief, const struct ctl_reach *r,
			const char *named_by)
{
	struct cuflag_msg_stats_reply st;
	struct ctl_which w;
	int rc = ctl_stats(c, &st);

	if (rc)
		return rc;
	if (brief) {
		which_daemon(c, r, named_by, &w);
		report_status(stdout, &st, json, &w);
	} else {
		report_stats(stdout, &st, json);
	}
	return 0;
}

static int run_stuck(struct ctl_conn *c, int json)
{
	struct cuflag_msg_stuck_slot *v = NULL;
	uint32_t more = 0;
	size_t n = 0;
	int rc = ctl_stuck(c, &v, &n, &more);

	if (rc)
		return rc;
	report_stuck(stdout, v, n, more, json);
	free(v);
	return 0;
}

static int run_metrics(struct ctl_conn *c)
{
	struct ctl_metrics m;
	int rc = ctl_metrics(c, &m);

	if (rc)
		return rc;
	prom_write(stdout, &m);
	ctl_metrics_free(&m);
	return 0;
}

static int run_clients(struct ctl_conn *c, int json)
{
	struct ctl_client *v = NULL;
	size_t n = 0;
	int rc = ctl_clients(c, &v, &n);

	if (rc)
		return rc;
	report_clients(stdout, v, n, json);
	free(v);
	return 0;
}

int main(int argc, char **argv)
{
	enum { O_SOCKET = 256, O_JSON, O_VERSION, O_LISTEN, O_ONCE };
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "json", no_argument, NULL, O_JSON },
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "once", no_argument, NULL, O_ONCE },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ 0 },
	};
	const char *path = getenv(CUFLAG_SOCKET_ENV), *named_by = NULL;
	struct ctl_reach reach;
	struct ctl_conn conn;
	const char *cmd, *listen = NULL;
	int c, json = 0, once = 0, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_SOCKET:
			path = optarg;
			named_by = "--socket";
			break;
		case O_JSON:
			json = 1;
			break;
		case O_LISTEN:
			listen = optarg;
			break;
		case O_ONCE:
			once = 1;
			break;
		case 'h':
			usage();
			return EXIT_OK;
		case O_VERSION:
			printf("cuflagctl %s (protocol %u)\n", CUFLAG_VERSION, CUFLAG_PROTO_VERSION);
			return EXIT_OK;
		default: /* getopt_long has said which option */
			return usage_error(NULL, NULL);
		}
	}
	if (optind + 1 != argc) {
		return usage_error(optind == argc ? "a command is needed" : "one command at a time",
				   NULL);
	}
	cmd = argv[optind];
	if (strcmp(cmd, "status") && strcmp(cmd, "stats") && strcmp(cmd, "clients") &&
	    strcmp(cmd, "stuck") && strcmp(cmd, "metrics") && strcmp(cmd, "top")) {
		return usage_error("unknown command", cmd);
	}
	/* No socket named: the node daemon's, else the user's own. */
	memset(&reach, 0, sizeof(reach));
	if (path && path[0]) {
		if (!named_by)
			named_by = "$" CUFLAG_SOCKET_ENV;
		snprintf(reach.path, sizeof(reach.path), "%s", path);
	} else if (ctl_reach_choose(&reach)) {
		fprintf(stderr, "cuflagctl: %s\n", reach.why);
		return EXIT_DAEMON;
	}
	path = reach.path;
	if (listen && strcmp(cmd, "metrics")) {
		return usage_error("--listen goes with metrics", NULL);
	}
	/* These two ask the daemon again and again, each time afresh. */
	if (listen)
		return exporter_run(listen, path) ? EXIT_DAEMON : EXIT_OK;
	if (!strcmp(cmd, "top"))
		return top_run(path, once) ? EXIT_DAEMON : EXIT_OK;

	rc = ctl_open(&conn, path);
	if (rc == 0) {
		if (!strcmp(cmd, "clients"))
			rc = run_clients(&conn, json);
		else if (!strcmp(cmd, "stuck"))
			rc = run_stuck(&conn, json);
		else if (!strcmp(cmd, "metrics"))
			rc = run_metrics(&conn);
		else
			rc = run_counters(&conn, json, !strcmp(cmd, "status"), &reach, named_by);
	}
	ctl_close(&conn);
	if (rc && !named_by && reach.user && (rc == -ENOENT || rc == -ECONNREFUSED)) {
		fprintf(stderr, "cuflagctl: %s: %s, and no user daemon at %s (%s): none runs; "
			"any client of this user starts one, or: cuflagd --user &\n", cmd,
			reach.why, reach.path, strerror(-rc));
		return EXIT_DAEMON;
	}
	if (rc) {
		fprintf(stderr, "cuflagctl: %s: %s\n", cmd, conn.why);
		return EXIT_DAEMON;
	}
	/* Output cut short (a closed pipe, a full disk) is a failure too. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "cuflagctl: writing the output: %s\n", strerror(errno));
		return EXIT_DAEMON;
	}
	return EXIT_OK;
}
