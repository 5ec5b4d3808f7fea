/* SPDX-License-Identifier: MIT */
#include "top-rates.h"

double top_rate(uint64_t p, uint64_t d, double seconds)
{
	return seconds > 0 && d >= p ? (double)(d - p) / seconds : 0;
}

/* A daemon that started again has counters that began anew. */
static int restarted(const struct cuflag_metrics_daemon *p, const struct cuflag_metrics_daemon *d)
{
	return d->uptime_ms < p->uptime_ms || d->armed < p->armed ||
	       d->completions < p->completions || d->wakes < p->wakes ||
	       d->scanner_cpu_ns < p->scanner_cpu_ns;
}

struct top_rates top_rates(const struct cuflag_metrics_daemon *p,
			   const struct cuflag_metrics_daemon *d)
{
	struct top_rates r = { 0 };

	if (restarted(p, d) || d->uptime_ms == p->uptime_ms)
		return r;
	r.valid = 1;
	r.seconds = (double)(d->uptime_ms - p->uptime_ms) / 1e3;
	r.arms = top_rate(p->armed, d->armed, r.seconds);
	r.done = top_rate(p->completions, d->completions, r.seconds);
	r.wakes = top_rate(p->wakes, d->wakes, r.seconds);
	r.cpu_pct = top_rate(p->scanner_cpu_ns, d->scanner_cpu_ns, r.seconds) / 1e9 * 100;
	return r;
}

int top_next_baseline(const struct cuflag_metrics_daemon *p, const struct cuflag_metrics_daemon *d)
{
	return restarted(p, d) || d->uptime_ms - p->uptime_ms >= TOP_MIN_INTERVAL_MS;
}
