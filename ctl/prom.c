/* SPDX-License-Identifier: MIT */
/*
 * One table per record kind: a family added to the wire is added here once.
 * Every family's samples follow its HELP and TYPE lines together, as the
 * format requires.
 */
#include "prom.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

enum pkind {
	P_U32,
	P_U64,
	P_MS,  /* ms on the wire, seconds out */
	P_NS,  /* ns on the wire, seconds out */
};

struct pfield {
	const char *name;
	const char *type; /* "counter" or "gauge" */
	const char *help;
	size_t off;
	enum pkind kind;
};

/* A sample's value: counts exactly, durations in seconds. */
static void value(FILE *f, const void *base, const struct pfield *p)
{
	const unsigned char *b = (const unsigned char *)base + p->off;
	uint32_t v32;
	uint64_t v64;

	if (p->kind == P_U32) {
		memcpy(&v32, b, sizeof(v32));
		fprintf(f, " %" PRIu32 "\n", v32);
		return;
	}
	memcpy(&v64, b, sizeof(v64));
	if (p->kind == P_U64)
		fprintf(f, " %" PRIu64 "\n", v64);
	else
		fprintf(f, " %.9g\n", (double)v64 / (p->kind == P_MS ? 1e3 : 1e9));
}

static void header(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value of at most max bytes, escaped as the format says (backslash,
 * quote, newline). The daemon sends printable ASCII; any other byte (from a
 * daemon that did not) is written '_', so the exposition stays valid UTF-8. */
static void label(FILE *f, const char *sep, const char *key, const char *v, size_t max)
{
	fprintf(f, "%s%s=\"", sep, key);
	for (size_t i = 0; i < max && v[i]; i++) {
		unsigned char c = (unsigned char)v[i];
		if (c == '\\' || c == '"')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else
			fputc(c < 0x20 || c > 0x7e ? '_' : c, f);
	}
	fputc('"', f);
}

#define D(name, type, help, key, kind)                                                      \
	{ name, type, help, offsetof(struct cuflag_metrics_daemon, key), kind }
static const struct pfield daemon_fields[] = {
	D("cuflag_stuck_threshold_seconds", "gauge",
	  "A slot waiting longer than this is stuck (--stuck-ms).", stuck_ms, P_MS),
	D("cuflag_clients", "gauge",
	  "Clients: connections holding a region (what cuflagctl status and clients count).",
	  regions, P_U32),
	D("cuflag_connections", "gauge",
	  "Open connections, clients and the others (cuflagctl's, ones before their region).",
	  connections, P_U32),
	D("cuflag_users", "gauge", "Users with a connection.", users, P_U32),
	D("cuflag_slots_allocated", "gauge", "Slots held, all clients.", slots, P_U32),
	D("cuflag_pending_slots", "gauge", "Slots armed and not complete, all clients.", pending,
	  P_U32),
	D("process_open_fds", "gauge", "Number of open file descriptors.", fds_open, P_U32),
	D("process_max_fds", "gauge", "Maximum number of open file descriptors.", fds_limit,
	  P_U32),
	D("cuflag_scanner_parked", "gauge", "1 while the scanner is parked, 0 while it runs.",
	  scanner_state, P_U32),
	D("cuflag_daemon_arms_total", "counter", "Arms taken from every client's queue.", armed,
	  P_U64),
	D("cuflag_daemon_completions_total", "counter", "Completions signalled, all clients.",
	  completions, P_U64),
	D("cuflag_eventfd_writes_total", "counter", "Eventfd writes by the scanner.", wakes, P_U64),
	D("cuflag_scanner_passes_total", "counter", "Passes of the scanner over the pending slots.",
	  passes, P_U64),
	D("cuflag_scanner_parks_total", "counter", "Times the scanner parked.", parks, P_U64),
	D("cuflag_bad_arms_total", "counter", "Arm entries refused (bad index, not owned, stale).",
	  bad_arms, P_U64),
	D("cuflag_dropped_clients_total", "counter", "Clients the daemon disconnected.", dropped,
	  P_U64),
	D("cuflag_scanner_cpu_seconds_total", "counter", "CPU time of the scanner thread.",
	  scanner_cpu_ns, P_NS),
};
#undef D

#define C(name, type, help, key, kind)                                                      \
	{ name, type, help, offsetof(struct cuflag_metrics_client, key), kind }
static const struct pfield client_fields[] = {
	C("cuflag_arms_total", "counter", "Arms the daemon took from the client.", armed, P_U64),
	C("cuflag_completions_total", "counter", "Completions signalled to the client.",
	  completions, P_U64),
	C("cuflag_in_flight", "gauge", "The client's slots armed and not complete.", in_flight,
	  P_U32),
	C("cuflag_stuck_slots", "gauge", "Of those, slots waiting longer than the stuck threshold.",
	  stuck, P_U32),
	C("cuflag_oldest_wait_seconds", "gauge",
	  "The longest any of the client's slots has been waiting, now.", oldest_wait_ms, P_MS),
	C("cuflag_slots", "gauge", "Slots the client holds.", slots, P_U32),
	C("cuflag_grouped_slots", "gauge", "Of those, slots in a group.", grouped, P_U32),
	C("cuflag_groups", "gauge", "Slot groups the client made.", groups, P_U32),
	C("cuflag_client_eventfd_writes_total", "counter", "Eventfd writes to the client.", wakes,
	  P_U64),
	C("cuflag_client_age_seconds", "gauge", "Time since the client connected.", age_ms, P_MS),
};
#undef C

#define NF(a) (sizeof(a) / sizeof((a)[0]))

/* A client's labels: who it is, on every series of its; with info, also its
 * cgroup (cuflag_client_info alone carries it). */
static void client_labels(FILE *f, const struct cuflag_metrics_client *c, const char *le,
			  int info)
{
	fprintf(f, "{client=\"%" PRIu32 "\",pid=\"%" PRId32 "\",uid=\"%" PRIu32 "\"", c->client_id,
		c->pid, c->uid);
	label(f, ",", "comm", c->comm, sizeof(c->comm));
	if (c->unit[0])
		label(f, ",", "unit", c->unit, sizeof(c->unit));
	if (c->pod[0])
		label(f, ",", "pod_uid", c->pod, sizeof(c->pod));
	if (c->container[0])
		label(f, ",", "container_id", c->container, sizeof(c->container));
	if (info && c->cgroup[0])
		label(f, ",", "cgroup", c->cgroup, sizeof(c->cgroup));
	if (le)
		fprintf(f, ",le=\"%s\"", le);
	fputc('}', f);
}

static void histograms(FILE *f, const struct ctl_metrics *m)
{
	const struct cuflag_metrics_daemon *d = &m->daemon;
	uint32_t nb = d->nbounds < CUFLAG_HIST_BOUNDS ? d->nbounds : CUFLAG_HIST_BOUNDS;

	header(f, "cuflag_completion_seconds", "histogram",
	       "Time from an arm to the scanner seeing its flag (or from the slot's previous "
	       "completion, if later).");
	for (size_t i = 0; i < m->nclients; i++) {
		const struct cuflag_metrics_client *c = &m->clients[i];
		uint64_t cum = 0;
		char le[32];

		for (uint32_t b = 0; b <= nb; b++) {
			cum += c->buckets[b];
			if (b < nb)
				snprintf(le, sizeof(le), "%.9g", (double)d->bounds_ns[b] / 1e9);
			else
				snprintf(le, sizeof(le), "+Inf");
			fputs("cuflag_completion_seconds_bucket", f);
			client_labels(f, c, le, 0);
			fprintf(f, " %" PRIu64 "\n", cum);
		}
		fputs("cuflag_completion_seconds_sum", f);
		client_labels(f, c, NULL, 0);
		fprintf(f, " %.9g\n", (double)c->sum_ns / 1e9);
		fputs("cuflag_completion_seconds_count", f);
		client_labels(f, c, NULL, 0);
		fprintf(f, " %" PRIu64 "\n", cum);
	}
}

/*
 * One series of value 1 per client with every label of who it is, its cgroup
 * path too: node_exporter's node_uname_info and kube-state-metrics'
 * kube_pod_info do the same, so that text too long or too rarely wanted to
 * repeat on every series (a cgroup path is up to 127 bytes, times the
 * histogram's 24 series per client) is had by a join on (instance, client).
 */
static void client_info(FILE *f, const struct ctl_metrics *m)
{
	header(f, "cuflag_client_info", "gauge",
	       "Who the client is, its cgroup among the labels; always 1.");
	for (size_t i = 0; i < m->nclients; i++) {
		fputs("cuflag_client_info", f);
		client_labels(f, &m->clients[i], NULL, 1);
		fputs(" 1\n", f);
	}
}

/* The reasons' label values, by enum cuflag_drop_reason. */
static const char *const reasons[CUFLAG_DROP_REASONS] = {
	[CUFLAG_DROP_PROTOCOL] = "protocol", [CUFLAG_DROP_HELLO_TIMEOUT] = "hello_timeout",
	[CUFLAG_DROP_QUEUE] = "queue",       [CUFLAG_DROP_STALL] = "stall",
	[CUFLAG_DROP_FULL] = "full",         [CUFLAG_DROP_COST] = "cost",
	[CUFLAG_DROP_WATCH] = "watch",
};

static void user_counts(FILE *f, const struct ctl_metrics *m, const char *name, const char *help,
			size_t off)
{
	header(f, name, "counter", help);
	for (size_t i = 0; i < m->nusers; i++) {
		uint64_t v[CUFLAG_DROP_REASONS];
		memcpy(v, (const unsigned char *)&m->users[i] + off, sizeof(v));
		for (unsigned r = 0; r < CUFLAG_DROP_REASONS; r++)
			if (reasons[r])
				fprintf(f, "%s{uid=\"%" PRIu32 "\",reason=\"%s\"} %" PRIu64 "\n", name,
					m->users[i].uid, reasons[r], v[r]);
	}
}

static void users(FILE *f, const struct ctl_metrics *m)
{
	user_counts(f, m, "cuflag_user_drops_total", "Clients of the user dropped, by reason.",
		    offsetof(struct cuflag_metrics_user, drops));
	user_counts(f, m, "cuflag_user_cooldowns_total",
		    "Times the user's new clients were refused a while, by reason.",
		    offsetof(struct cuflag_metrics_user, cooldowns));
	header(f, "cuflag_user_cooldown_seconds", "gauge",
	       "How much longer the user's new clients are refused.");
	for (size_t i = 0; i < m->nusers; i++)
		fprintf(f, "cuflag_user_cooldown_seconds{uid=\"%" PRIu32 "\"} %.3f\n", m->users[i].uid,
			(double)m->users[i].cooldown_left_ms / 1e3);
	header(f, "cuflag_user_pending_slots", "gauge",
	       "The user's slots watched, armed and not complete (at most --max-pending-per-uid).");
	for (size_t i = 0; i < m->nusers; i++)
		fprintf(f, "cuflag_user_pending_slots{uid=\"%" PRIu32 "\"} %" PRIu32 "\n",
			m->users[i].uid, m->users[i].pending);
}

/* What each user counted since the daemon started, its clients gone
 * included: these outlive the clients, and sum to the daemon's own. */
static void user_totals(FILE *f, const struct ctl_metrics *m)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} t[] = {
		{ "cuflag_user_arms_total", "Arms taken from the user's clients, gone ones included.",
		  offsetof(struct cuflag_metrics_user_totals, arms) },
		{ "cuflag_user_completions_total",
		  "Completions signalled to the user's clients, gone ones included.",
		  offsetof(struct cuflag_metrics_user_totals, completions) },
		{ "cuflag_user_clients_total", "The user's connections that took a region.",
		  offsetof(struct cuflag_metrics_user_totals, clients) },
	};

	if (!m->ntotals)
		return; /* an older daemon: no totals */
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
		header(f, t[k].name, "counter", t[k].help);
		for (size_t i = 0; i < m->ntotals; i++) {
			uint64_t v;
			memcpy(&v, (const unsigned char *)&m->totals[i] + t[k].off, sizeof(v));
			if (m->totals[i].uid == CUFLAG_UID_OTHERS)
				fprintf(f, "%s{uid=\"others\"} %" PRIu64 "\n", t[k].name, v);
			else
				fprintf(f, "%s{uid=\"%" PRIu32 "\"} %" PRIu64 "\n", t[k].name,
					m->totals[i].uid, v);
		}
	}
}

/* The daemon's version, and when it started, the process_ way. */
static void daemon_process(FILE *f, const struct ctl_metrics *m)
{
	header(f, "cuflag_build_info", "gauge", "The daemon's version; always 1.");
	label(f, "cuflag_build_info{", "version", m->version, sizeof(m->version));
	fputs("} 1\n", f);
	if (!m->start_unix_ms)
		return; /* an older daemon does not say */
	header(f, "process_start_time_seconds", "gauge",
	       "Start time of the process since unix epoch in seconds.");
	fprintf(f, "process_start_time_seconds %.3f\n", (double)m->start_unix_ms / 1e3);
}

static void scanner_times(FILE *f, const struct cuflag_metrics_daemon *d)
{
	if (!(d->flags & CUFLAG_METRICS_F_SCAN_TIMES))
		return;
	header(f, "cuflag_scanner_wakeups_total", "counter",
	       "Times the scanner woke from parked or asleep.");
	fprintf(f, "cuflag_scanner_wakeups_total %" PRIu64 "\n", d->wakeups);
	header(f, "cuflag_scanner_seconds_total", "counter",
	       "Wall time the scanner spent in each state.");
	fprintf(f, "cuflag_scanner_seconds_total{state=\"parked\"} %.9g\n", (double)d->parked_ns / 1e9);
	fprintf(f, "cuflag_scanner_seconds_total{state=\"sleeping\"} %.9g\n",
		(double)d->sleeping_ns / 1e9);
	fprintf(f, "cuflag_scanner_seconds_total{state=\"spinning\"} %.9g\n",
		(double)d->spinning_ns / 1e9);
}

void prom_write(FILE *f, const struct ctl_metrics *m)
{
	header(f, "cuflag_up", "gauge", "1 when the daemon answered.");
	fputs("cuflag_up 1\n", f);
	header(f, "cuflag_timing_enabled", "gauge",
	       "1 when completions are timed and stuck work is looked for (no --no-metrics).");
	fprintf(f, "cuflag_timing_enabled %d\n", !!(m->daemon.flags & CUFLAG_METRICS_F_TIMING));
	for (size_t i = 0; i < NF(daemon_fields); i++) {
		header(f, daemon_fields[i].name, daemon_fields[i].type, daemon_fields[i].help);
		fputs(daemon_fields[i].name, f);
		value(f, &m->daemon, &daemon_fields[i]);
	}
	daemon_process(f, m);
	scanner_times(f, &m->daemon);
	users(f, m);
	user_totals(f, m);
	client_info(f, m);
	for (size_t k = 0; k < NF(client_fields); k++) {
		header(f, client_fields[k].name, client_fields[k].type, client_fields[k].help);
		for (size_t i = 0; i < m->nclients; i++) {
			fputs(client_fields[k].name, f);
			client_labels(f, &m->clients[i], NULL, 0);
			value(f, &m->clients[i], &client_fields[k]);
		}
	}
	histograms(f, m);
}

void prom_write_down(FILE *f)
{
	header(f, "cuflag_up", "gauge", "1 when the daemon answered.");
	fputs("cuflag_up 0\n", f);
}
