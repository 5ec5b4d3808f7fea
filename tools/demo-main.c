/* SPDX-License-Identifier: MIT */
/*
 * cuflag-demo: push completions through a running cuflagd and report what it
 * did: completions per second (counts checked exactly) and the wake latency
 * from "the work is done" to "the waiting thread runs", p50 and p99. On a GPU
 * when there is one, else on the simulated device.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "demo.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(const double *v, unsigned n, double p)
{
	unsigned i = (unsigned)(p * (n - 1) + 0.5);
	return n ? v[i] : 0;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: cuflag-demo [--socket PATH] [--device auto|gpu|sim] [--slots N]\n"
		   "                   [--completions N] [--samples N]\n"
		   "Pushes completions through a running cuflagd and reports completions/s\n"
		   "and wake latency. --device auto (the default) uses the GPU if there is one.\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "device", required_argument, NULL, 'd' },
		{ "slots", required_argument, NULL, 'n' },
		{ "completions", required_argument, NULL, 'c' },
		{ "samples", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct demo_opts o = { .slots = 64, .completions = 2000, .samples = 2000 };
	struct demo_result r = { 0 };
	const char *device = "auto";
	cuflag_client *c;
	int opt, rc = 77;

	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 's': o.socket = optarg; break;
		case 'd': device = optarg; break;
		case 'n': o.slots = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'c': o.completions = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'l': o.samples = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!o.slots || o.slots > 1024 || !o.completions || !o.samples ||
	    (strcmp(device, "auto") && strcmp(device, "gpu") && strcmp(device, "sim"))) {
		usage(stderr);
		return 2;
	}
	o.fallback = !strcmp(device, "auto");
	rc = cuflag_connect(o.socket, &c);
	if (rc) {
		/* The socket the library tried, and what to do about it. */
		const char *path = o.socket ? o.socket : getenv(CUFLAG_SOCKET_ENV);
		const char *hint = cuflag_connect_hint(rc);
		fprintf(stderr, "cuflag-demo: cannot connect to cuflagd at %s: %s%s%s\n",
			path && path[0] ? path : CUFLAG_DEFAULT_SOCKET, strerror(-rc),
			hint ? ": " : "", hint ? hint : "");
		return 1;
	}
	rc = 77;
	if (strcmp(device, "sim"))
		rc = demo_gpu(c, &o, &r);
	if (rc == 77 && !strcmp(device, "gpu")) {
		fprintf(stderr, "cuflag-demo: --device gpu: no GPU here\n");
		cuflag_disconnect(c);
		return 77;
	}
	if (rc == 77) {
		rc = demo_sim(c, &o, &r);
		if (o.fallback)
			snprintf(r.device, sizeof(r.device),
				 "simulated (no GPU here: host threads storing the flags)");
	}
	cuflag_disconnect(c);
	if (rc) {
		fprintf(stderr, "cuflag-demo: failed: %s\n", strerror(rc < 0 ? -rc : EIO));
		free(r.lat_us);
		return 1;
	}
	qsort(r.lat_us, r.nlat, sizeof(double), cmp_double);
	printf("device:      %s\n", r.device);
	printf("completions: %llu in %.3f s = %.0f completions/s (every count exact)\n",
	       (unsigned long long)r.completions, r.seconds, (double)r.completions / r.seconds);
	printf("wake:        p50 %.1f us, p99 %.1f us (%u samples, work done -> waiter runs)\n",
	       pct(r.lat_us, r.nlat, 0.50), pct(r.lat_us, r.nlat, 0.99), r.nlat);
	free(r.lat_us);
	return 0;
}
