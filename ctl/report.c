/* SPDX-License-Identifier: MIT */
/*
 * Both renderings come from one table per reply struct, so a counter added
 * to the protocol is added once here and shows up in the table and in JSON
 * alike, under the same name.
 */
#include "report.h"

#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "json.h"

enum kind {
	K_U32,
	K_I32,
	K_U64,
	K_MS,      /* a duration in ms: a number in JSON, "1h 02m 03s" for people */
	K_SEC,     /* a 32-bit duration in s: the same for people */
	K_EPOCH,   /* a 64-bit tag: hex text, so no JSON reader rounds it */
	K_SLAB,    /* enum cuflag_slab_kind, by name */
	K_SCANNER, /* enum cuflag_scanner_state, by name */
	K_STR16,   /* a NUL-terminated text of at most 16 bytes */
	K_NS,      /* a duration in ns: a number in JSON, "12.345 s" for people */
	K_MODE,    /* the scanner mode, by name */
	K_TEXT,    /* a NUL-terminated text cuflagctl made (query.h): "-" for people when
		    * empty, and no member in JSON (the daemon does not know it) */
};

/* Room for any value as text: the longest is a cgroup path. */
#define VALUE_MAX (CUFLAG_CGROUP_MAX + 64)

struct field {
	const char *key;   /* JSON member name */
	const char *label; /* what people read */
	size_t off;
	enum kind kind;
	int brief;         /* part of the short view (status, the clients table) */
};

#define S(key, label, kind, brief)                                                         \
	{ #key, label, offsetof(struct cuflag_msg_stats_reply, key), kind, brief }
static const struct field stats_fields[] = {
	{ "version", "version", offsetof(struct cuflag_msg_stats_reply, daemon_version), K_STR16,
	  1 },
	{ "protocol", "protocol", offsetof(struct cuflag_msg_stats_reply, version), K_U32, 1 },
	S(uptime_ms, "uptime", K_MS, 1),
	S(slab, "slab", K_SLAB, 1),
	S(epoch, "epoch", K_EPOCH, 1),
	{ "scanner", "scanner", offsetof(struct cuflag_msg_stats_reply, scanner_state), K_SCANNER,
	  1 },
	S(clients, "clients", K_U32, 1),
	S(max_clients, "max clients", K_U32, 1),
	S(slots, "slots", K_U32, 1),
	S(grouped_slots, "  of them in groups", K_U32, 1),
	S(slots_per_client, "slots per client", K_U32, 1),
	S(pending, "pending", K_U64, 1),
	S(armed, "armed", K_U64, 0),
	S(wakes, "wakes", K_U64, 0),
	S(completions, "completions", K_U64, 0),
	S(parks, "parks", K_U64, 0),
	S(passes, "passes", K_U64, 0),
	S(bad_arms, "bad arms", K_U64, 0),
	S(dropped, "dropped clients", K_U64, 0),
	S(spin_us, "spin us", K_U32, 0),
	S(scanner_mode, "scanner mode", K_MODE, 1),
	S(scanner_cpu_ns, "scanner cpu", K_NS, 1),
	S(scanner_wakeups, "scanner wake-ups", K_U64, 0),
	S(scanner_sleeps, "scanner sleeps", K_U64, 0),
	S(parked_ns, "parked", K_NS, 0),
	S(sleeping_ns, "sleeping", K_NS, 0),
	S(spinning_ns, "spinning", K_NS, 0),
	S(timer_late_ns, "timer lateness", K_NS, 0),
};
#undef S

#define C(key, label, kind, brief)                                                         \
	{ #key, label, offsetof(struct ctl_client, info.key), kind, brief }
#define W(key, name, label, brief)                                                         \
	{ name, label, offsetof(struct ctl_client, who.key), K_TEXT, brief }
static const struct field client_fields[] = {
	{ "id", "ID", offsetof(struct ctl_client, info.client_id), K_U32, 1 },
	C(pid, "PID", K_I32, 1),
	C(uid, "UID", K_U32, 1),
	C(gid, "GID", K_U32, 1),
	C(slots, "SLOTS", K_U32, 1),
	C(armed, "ARMED", K_U64, 1),
	C(wakes, "WAKES", K_U64, 1),
	C(pending, "PENDING", K_U64, 1),
	C(age_s, "AGE", K_SEC, 1),
	/* When it connected, after the daemon's start: not an age (age_s is). */
	C(connected_ms, "CONNECTED AT", K_MS, 0),
	/* Who it is (METRICS): named as the metrics' labels are. */
	W(comm, "comm", "COMM", 1),
	W(unit, "unit", "UNIT", 1),
	W(cgroup, "cgroup", "CGROUP", 0),
	W(pod, "pod_uid", "POD", 0),
	W(container, "container_id", "CONTAINER", 0),
};
#undef W
#undef C

#define T(key, label, kind, brief)                                                         \
	{ #key, label, offsetof(struct cuflag_msg_stuck_slot, key), kind, brief }
static const struct field stuck_fields[] = {
	T(pid, "PID", K_I32, 1),
	T(uid, "UID", K_U32, 1),
	T(comm, "COMM", K_STR16, 1),
	{ "client", "CLIENT", offsetof(struct cuflag_msg_stuck_slot, client_id), K_U32, 1 },
	T(slot, "SLOT", K_U32, 1),
	T(armed, "ARMED", K_U32, 1),
	T(flag, "FLAG", K_U32, 1),
	T(signalled, "SIGNALLED", K_U32, 0),
	T(group, "GROUP", K_U32, 0),
	T(age_ms, "AGE MS", K_U64, 1),
};
#undef T

#define NFIELDS(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t get_u(const void *base, const struct field *f)
{
	const unsigned char *p = (const unsigned char *)base + f->off;
	uint32_t v32;
	uint64_t v64;

	if (f->kind == K_U64 || f->kind == K_MS || f->kind == K_EPOCH || f->kind == K_NS) {
		memcpy(&v64, p, sizeof(v64));
		return v64;
	}
	memcpy(&v32, p, sizeof(v32));
	return v32;
}

static int32_t get_i32(const void *base, const struct field *f)
{
	int32_t v;
	memcpy(&v, (const unsigned char *)base + f->off, sizeof(v));
	return v;
}

static const char *slab_name(uint64_t v)
{
	return v == CUFLAG_SLAB_MEMFD ? "memfd" : v == CUFLAG_SLAB_CUDA_IPC ? "cuda-ipc" : NULL;
}

static const char *scanner_name(uint64_t v)
{
	return v == CUFLAG_SCANNER_SPINNING ? "spinning"
	       : v == CUFLAG_SCANNER_PARKED ? "parked"
					    : NULL;
}

/* Parked with slots pending is no contradiction: why it is parked depends
 * on the mode. The adaptive scanner parks whenever it sleeps until the next
 * completion is due (at most --backstop-us), its normal state under load;
 * the spinning one parks only once the pending slots have stalled
 * (--pending-spin-ms). NULL where there is nothing to explain, or the mode
 * is a newer daemon's. */
static const char *parked_why(const struct cuflag_msg_stats_reply *st)
{
	if (!st->pending)
		return NULL;
	return st->scanner_mode == 0   ? "pending slots stalled: polled on a timer"
	       : st->scanner_mode == 1 ? "sleeping until the next completion is due"
				       : NULL;
}

/* A value as text: what the table shows and what JSON quotes for names. */
static void value_text(const void *base, const struct field *f, int human, char *buf,
		       size_t len)
{
	uint64_t v = f->kind == K_I32 || f->kind == K_STR16 || f->kind == K_TEXT ? 0
										  : get_u(base, f);
	const char *name = NULL;

	switch (f->kind) {
	case K_STR16: {
		/* The daemon's bytes: stop at 16 and show only printable ones. */
		const char *p = (const char *)base + f->off;
		size_t i;
		for (i = 0; i < 16 && i + 1 < len && p[i]; i++)
			buf[i] = p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?';
		buf[i] = 0;
		return;
	}
	case K_TEXT: {
		const char *p = (const char *)base + f->off;
		snprintf(buf, len, "%s", p[0] || !human ? p : "-");
		return;
	}
	case K_I32:
		snprintf(buf, len, "%" PRId32, get_i32(base, f));
		return;
	case K_SEC:
		v *= 1000;
		/* fall through */
	case K_MS:
		if (human) {
			uint64_t s = v / 1000;
			if (s >= 3600)
				snprintf(buf, len, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s",
					 s / 3600, s / 60 % 60, s % 60);
			else if (s >= 60)
				snprintf(buf, len, "%" PRIu64 "m %02" PRIu64 "s", s / 60, s % 60);
			else if (f->kind == K_SEC)
				snprintf(buf, len, "%" PRIu64 "s", s);
			else
				snprintf(buf, len, "%" PRIu64 ".%03" PRIu64 "s", s, v % 1000);
			return;
		}
		v = f->kind == K_SEC ? v / 1000 : v;
		break;
	case K_NS:
		if (human) {
			snprintf(buf, len, "%.3f s", (double)v / 1e9);
			return;
		}
		break;
	case K_EPOCH:
		snprintf(buf, len, "%016" PRIx64, v);
		return;
	case K_MODE:
		name = v == 0 ? "spin" : v == 1 ? "adaptive" : NULL;
		break;
	case K_SLAB:
		name = slab_name(v);
		break;
	case K_SCANNER:
		name = scanner_name(v);
		if (human && v == CUFLAG_SCANNER_PARKED) {
			const char *why = parked_why(base);
			if (why) {
				snprintf(buf, len, "parked (%s)", why);
				return;
			}
		}
		break;
	default:
		break;
	}
	if (name)
		snprintf(buf, len, "%s", name);
	else if (f->kind == K_SLAB || f->kind == K_SCANNER || f->kind == K_MODE)
		snprintf(buf, len, "unknown-%" PRIu64, v); /* a newer daemon's value */
	else
		snprintf(buf, len, "%" PRIu64, v);
}

static void json_field(struct json *j, const void *base, const struct field *f)
{
	char buf[VALUE_MAX];

	switch (f->kind) {
	case K_U32:
	case K_U64:
	case K_MS:
	case K_NS:
	case K_SEC:
		json_uint(j, f->key, get_u(base, f));
		return;
	case K_I32:
		json_int(j, f->key, get_i32(base, f));
		return;
	case K_TEXT:
		if (!((const char *)base + f->off)[0])
			return;
		/* fall through */
	default:
		value_text(base, f, 0, buf, sizeof(buf));
		json_string(j, f->key, buf);
		return;
	}
}

static void json_fields(struct json *j, const void *base, const struct field *fs, size_t n,
			int brief_only)
{
	for (size_t i = 0; i < n; i++)
		if (!brief_only || fs[i].brief)
			json_field(j, base, &fs[i]);
}

/* The brief (or every) field of base, one "label  value" line each, after
 * the line of first (label, value) when it is not NULL. */
static void print_pairs(FILE *f, const void *base, const struct field *fs, size_t n,
			int brief_only, const char *const first[2])
{
	int w = first ? (int)strlen(first[0]) : 0;
	char buf[VALUE_MAX];

	for (size_t i = 0; i < n; i++)
		if ((!brief_only || fs[i].brief) && (int)strlen(fs[i].label) > w)
			w = (int)strlen(fs[i].label);
	if (first)
		fprintf(f, "%-*s  %s\n", w + 1, first[0], first[1]);
	for (size_t i = 0; i < n; i++) {
		if (brief_only && !fs[i].brief)
			continue;
		value_text(base, &fs[i], 1, buf, sizeof(buf));
		fprintf(f, "%-*s  %s\n", w + 1, fs[i].label, buf);
	}
}

static void report_counters(FILE *f, const struct cuflag_msg_stats_reply *st, int json,
			    int brief_only, const struct ctl_which *who)
{
	char line[sizeof(who->why) + 16];
	struct json j;

	if (!json) {
		if (who)
			snprintf(line, sizeof(line), "%s%s%s%s", who->kind, who->why[0] ? " (" : "",
				 who->why, who->why[0] ? ")" : "");
		print_pairs(f, st, stats_fields, NFIELDS(stats_fields), brief_only,
			    who ? (const char *const[2]){ "daemon", line } : NULL);
		return;
	}
	json_init(&j, f);
	json_object_begin(&j, NULL);
	if (who) {
		json_string(&j, "daemon", who->kind);
		json_string(&j, "daemon_why", who->why);
		json_string(&j, "socket", who->socket);
	}
	json_fields(&j, st, stats_fields, NFIELDS(stats_fields), brief_only);
	json_object_end(&j);
	json_finish(&j);
}

void report_status(FILE *f, const struct cuflag_msg_stats_reply *st, int json,
		   const struct ctl_which *who)
{
	report_counters(f, st, json, 1, who);
}

void report_stats(FILE *f, const struct cuflag_msg_stats_reply *st, int json)
{
	report_counters(f, st, json, 0, NULL);
}

/* One cell of a table, w wide: numbers to the right, texts to the left (the
 * last column unpadded). */
static void cell(FILE *f, const char *sep, int text, int w, const char *v)
{
	if (text)
		fprintf(f, "%s%-*s", sep, w, v);
	else
		fprintf(f, "%s%*s", sep, w, v);
}

/* Rows of stride bytes from base: a table of the brief fields, or a JSON object
 * whose member key is an array of every field (extra, if not NULL, adds members). */
static void table(FILE *f, const void *base, size_t stride, size_t n, const struct field *fs,
		  size_t nf, int json, const char *key, const char *extra_key, uint64_t extra)
{
	int w[16], last = -1;
	char buf[VALUE_MAX];

	if (json) {
		struct json j;
		json_init(&j, f);
		json_object_begin(&j, NULL);
		json_array_begin(&j, key);
		for (size_t r = 0; r < n; r++) {
			json_object_begin(&j, NULL);
			json_fields(&j, (const char *)base + r * stride, fs, nf, 0);
			json_object_end(&j);
		}
		json_array_end(&j);
		if (extra_key)
			json_uint(&j, extra_key, extra);
		json_object_end(&j);
		json_finish(&j);
		return;
	}
	/* Right-aligned numbers: each column as wide as its widest cell. */
	for (size_t c = 0; c < nf && c < 16; c++) {
		w[c] = (int)strlen(fs[c].label);
		for (size_t r = 0; r < n; r++) {
			value_text((const char *)base + r * stride, &fs[c], 1, buf, sizeof(buf));
			if ((int)strlen(buf) > w[c])
				w[c] = (int)strlen(buf);
		}
	}
	for (size_t c = 0; c < nf && c < 16; c++)
		if (fs[c].brief)
			last = (int)c;
	for (int r = -1; r < (int)n; r++) {
		for (size_t c = 0; c < nf && c < 16; c++) {
			if (!fs[c].brief)
				continue;
			if (r < 0)
				snprintf(buf, sizeof(buf), "%s", fs[c].label);
			else
				value_text((const char *)base + (size_t)r * stride, &fs[c], 1, buf,
					   sizeof(buf));
			int text = fs[c].kind == K_TEXT;
			cell(f, c ? "  " : "", text, text && (int)c == last ? 0 : w[c], buf);
		}
		fputc('\n', f);
	}
}

void report_clients(FILE *f, const struct ctl_client *v, size_t n, int json)
{
	table(f, v, sizeof(*v), n, client_fields, NFIELDS(client_fields), json, "clients", NULL, 0);
}

void report_stuck(FILE *f, const struct cuflag_msg_stuck_slot *v, size_t n, uint32_t more,
		  int json)
{
	table(f, v, sizeof(*v), n, stuck_fields, NFIELDS(stuck_fields), json, "stuck", "more", more);
	if (!json && more)
		fprintf(f, "(%u more stuck slots not listed)\n", more);
}
