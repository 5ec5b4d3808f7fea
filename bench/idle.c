/* SPDX-License-Identifier: MIT */
/* The daemon's CPU while clients are connected and nothing is armed: it must park. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cuflag/cuflag.h"

/* Daemon CPU while P clients hold S slots each and arm nothing. */
void bench_idle_cpu(const struct bench_opts *o, struct bench_report *r,
		     const struct daemon_proc *d)
{
	cuflag_client **c = calloc(o->clients, sizeof(*c));
	cuflag_slot **s = calloc((size_t)o->clients * o->slots, sizeof(*s));
	unsigned got = 0;
	double cpu0, cpu1;
	uint64_t t0, t1;

	if (!c || !s)
		goto out;
	for (; got < o->clients; got++) {
		int rc = cuflag_connect(d->sock, &c[got]);
		if (!rc)
			rc = cuflag_slots_acquire(c[got], o->slots, s + (size_t)got * o->slots);
		if (rc) {
			fprintf(stderr, "cuflag-bench: idle: connect / acquire: %s\n", strerror(-rc));
			cuflag_disconnect(c[got]);
			c[got] = NULL;
			r->have_daemon_cpu = 0;
			goto out;
		}
	}
	/* Let the scanner spend its spin budget (and the clients' setup settle). */
	bench_sleep_ns((uint64_t)o->spin_us * 2000 + 100000000ull);
	cpu0 = bench_daemon_cpu_ms(d);
	t0 = cuflag_now_ns();
	bench_sleep_ns((uint64_t)o->idle_ms * 1000000ull);
	cpu1 = bench_daemon_cpu_ms(d);
	t1 = cuflag_now_ns();
	if (cpu0 >= 0 && cpu1 >= 0) {
		r->idle_seconds = (double)(t1 - t0) / 1e9;
		r->idle_pct = (cpu1 - cpu0) / 10.0 / r->idle_seconds;
		r->idle_clients = o->clients;
	} else {
		r->have_daemon_cpu = 0;
	}
out:
	for (unsigned i = 0; c && i < got; i++)
		cuflag_disconnect(c[i]);
	free(c);
	free(s);
}

