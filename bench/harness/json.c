/* SPDX-License-Identifier: MIT */
/* The report as exactly one JSON object on stdout. */
#include <math.h>
#include <stdio.h>

#include "perf.h"

static void put_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* A number, or null when it is not available (negative or not finite). */
static void put_num(double v)
{
	if (!isfinite(v) || v < 0)
		fputs("null", stdout);
	else
		printf("%.3f", v);
}

static void put_lat(struct bench_lat *l)
{
	struct bench_pcts p = bench_lat_pcts(l);

	fputs("{\"name\": ", stdout);
	put_str(l->name);
	if (l->failed || !l->n) {
		fputs(", \"p50_us\": null, \"p90_us\": null, \"p99_us\": null, \"max_us\": null, "
		      "\"n\": 0, \"error\": ",
		      stdout);
		put_str(l->failed ? l->why : "no samples");
		putchar('}');
		return;
	}
	printf(", \"p50_us\": %.3f, \"p90_us\": %.3f, \"p99_us\": %.3f, \"max_us\": %.3f, "
	       "\"n\": %zu}",
	       p.p50, p.p90, p.p99, p.max, l->n);
}

static void put_tput(const struct bench_tput *t, const char *unit)
{
	fputs("{\"name\": ", stdout);
	put_str(t->name);
	printf(", \"processes\": %u, \"%s\": %u, \"completions\": %llu, \"seconds\": ", t->procs,
	       unit, t->per_proc, (unsigned long long)t->completions);
	put_num(t->failed ? -1 : t->seconds);
	fputs(", \"per_s\": ", stdout);
	put_num(t->failed ? -1 : t->per_s);
	fputs(", \"daemon_cpu_ms\": ", stdout);
	put_num(t->daemon_cpu_ms);
	fputs(", \"daemon_us_per_completion\": ", stdout);
	put_num(t->failed || t->daemon_cpu_ms < 0 || !t->completions
			? -1
			: t->daemon_cpu_ms * 1000.0 / (double)t->completions);
	if (t->failed) {
		fputs(", \"error\": ", stdout);
		put_str(t->why);
	}
	putchar('}');
}

/* The scale run: null when it did not run. */
static void put_scale(const struct bench_scale *s)
{
	if (!s->ran) {
		fputs("null", stdout);
		return;
	}
	fputs("{\"fleet\": ", stdout);
	put_str(s->row);
	printf(", \"fleet_processes\": %u, \"fleet_slots_per_process\": %u, \"armed\": %llu, "
	       "\"armed_processes\": %u, \"armed_slots_per_process\": %u, \"complete_ms\": ",
	       s->clients, s->slots, (unsigned long long)s->armed, s->armed_procs,
	       s->armed_per_proc);
	put_num(s->exact ? s->complete_ms : -1);
	fputs(", \"daemon_cpu_ms\": ", stdout);
	put_num(s->exact ? s->daemon_cpu_ms : -1);
	printf(", \"exact\": %s", s->exact ? "true" : "false");
	if (s->note[0]) {
		fputs(", \"note\": ", stdout);
		put_str(s->note);
	}
	if (!s->exact) {
		fputs(", \"error\": ", stdout);
		put_str(s->why[0] ? s->why : "not measured");
	}
	putchar('}');
}

void bench_print_json(const struct bench_report *cr)
{
	/* Percentiles sort the samples in place. */
	struct bench_report *r = (struct bench_report *)cr;
	const struct bench_opts *o = r->opts;
	const char *unit = r->mode[0] == 'g' ? "streams" : "slots";

	fputs("{\"mode\": ", stdout);
	put_str(r->mode);
	printf(", \"config\": {\"iterations\": %u, \"warmup\": %u, \"clients\": %u, \"slots\": %u, "
	       "\"streams\": %u, \"completions_per_process\": %llu, \"spin_us\": %u, "
	       "\"idle_ms\": %u, \"scale\": %s, \"scale_clients\": %u, \"scale_pending\": %s}",
	       o->iterations, o->warmup, o->clients, o->slots, o->streams,
	       (unsigned long long)o->completions, o->spin_us, o->idle_ms,
	       o->scale > 0 ? "true" : "false", o->scale_clients,
	       o->scale_pending > 0 ? "true" : "false");
	fputs(", \"results\": [", stdout);
	for (size_t i = 0; i < r->nlat; i++) {
		if (i)
			fputs(", ", stdout);
		put_lat(&r->lat[i]);
	}
	fputs("], \"throughput\": [", stdout);
	for (size_t i = 0; i < r->ntput; i++) {
		if (i)
			fputs(", ", stdout);
		put_tput(&r->tput[i], unit);
	}
	fputs("], \"cpu\": {\"daemon_pid\": ", stdout);
	if (r->daemon_pid > 0)
		printf("%d", (int)r->daemon_pid);
	else
		fputs("null", stdout);
	fputs(", \"us_per_completion\": ", stdout);
	put_num(r->have_daemon_cpu ? r->us_per_completion : -1);
	fputs(", \"idle_pct_core\": ", stdout);
	put_num(r->have_daemon_cpu ? r->idle_pct : -1);
	fputs(", \"idle_seconds\": ", stdout);
	put_num(r->have_daemon_cpu ? r->idle_seconds : -1);
	printf(", \"idle_clients\": %u}", r->idle_clients);
	if (r->arm_ran) {
		fputs(", \"arm\": {\"per_s_1_thread\": ", stdout);
		put_num(r->arm_1);
		fputs(", \"per_s_8_threads\": ", stdout);
		put_num(r->arm_8);
		if (r->arm_8 < 0) {
			fputs(", \"error\": ", stdout);
			put_str(r->arm_why);
		}
		putchar('}');
	}
	fputs(", \"scale\": ", stdout);
	put_scale(&r->scale);
	if (r->connect_ran) {
		fputs(", \"connect\": {\"started_daemon_idle_pct_core\": ", stdout);
		put_num(r->connect_idle_pct);
		fputs(", \"idle_seconds\": ", stdout);
		put_num(r->connect_idle_pct < 0 ? -1 : r->connect_idle_s);
		putchar('}');
	}
	fputs(", \"scanner_cost\": [", stdout);
	for (int m = 0; r->have_paced && m < 2; m++)
		for (int k = 0; k < BENCH_PACED_RATES; k++) {
			const struct bench_paced *p = &r->paced[m][k];
			fputs(m || k ? ", {\"name\": " : "{\"name\": ", stdout);
			put_str(p->name);
			fputs(", \"mode\": ", stdout);
			put_str(p->mode);
			printf(", \"rate\": %u, \"per_s\": ", p->rate);
			put_num(p->per_s);
			fputs(", \"daemon_pct_core\": ", stdout);
			put_num(p->per_s < 0 ? -1 : p->pct_core);
			fputs(", \"daemon_us_per_completion\": ", stdout);
			put_num(p->per_s < 0 ? -1 : p->us_per_completion);
			fputs(", \"scanner_wakeups_per_completion\": ", stdout);
			put_num(p->wakeups);
			fputs(", \"scanner_sleeps_per_completion\": ", stdout);
			put_num(p->sleeps);
			fputs(", \"scanner_spin_us_per_completion\": ", stdout);
			put_num(p->spin_us);
			fputs(", \"scanner_timer_late_us\": ", stdout);
			put_num(p->timer_late_us);
			putchar('}');
		}
	putchar(']');
	fputs(", \"ratios\": {", stdout);
	for (size_t i = 0; i < r->nratios; i++) {
		if (i)
			fputs(", ", stdout);
		put_str(r->ratios[i].name);
		fputs(": ", stdout);
		put_num(r->ratios[i].value);
	}
	fputs("}}\n", stdout);
}
