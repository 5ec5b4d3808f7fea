/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuflag-proto.h"
#include "log.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cuflagd [OPTIONS]\n"
		"GPU completion flags for every process on the node.\n\n"
		"  --socket PATH             listen on PATH (default: socket activation, else\n"
		"                            " CUFLAG_DEFAULT_SOCKET ")\n"
		"  --max-clients N           clients holding a region at once (default 256)\n"
		"  --max-clients-per-uid N   of those, per user id (default: max-clients / 4)\n"
		"  --max-connections-per-uid N\n"
		"                            connections per user id, with or without HELLO\n"
		"                            (default: max-clients-per-uid + 8)\n"
		"  --max-slots-per-uid N     slots per user id (default: a quarter of what the\n"
		"                            open-file limit leaves for slots)\n"
		"  --max-pending-per-uid N   armed slots not complete per user id; further arms\n"
		"                            wait in the client's queue (default 16384)\n"
		"  --msg-rate-per-uid N      requests per second per user id (default 4 x\n"
		"                            msg-rate)\n"
		"  --hello-timeout-ms N      close a connection that has not said HELLO by then\n"
		"                            (default 2000; STATS and CLIENTS need no HELLO)\n"
		"  --admin-group GROUP       members, like root, are never refused a connection\n"
		"                            and see every client (default: root only)\n"
		"  --write-budget-us N       eventfd write time a user's clients may cost the\n"
		"                            scanner beyond 10%% of its time (default 5000)\n"
		"  --slots-per-client N      slots (flags) per client (default 1024)\n"
		"  --queue-size N            arm queue entries per client, power of two\n"
		"                            (default 1024)\n"
		"  --spin-us N               scanner spin budget before it parks (default 50)\n"
		"  --pending-spin-ms N       with slots pending and none of them completing,\n"
		"                            spin this long, then poll (default 10; 0: spin)\n"
		"  --pending-poll-us N       the poll interval then (default 250)\n"
		"  --msg-rate N              requests per second per client (default 20000)\n"
		"  --slab memfd|cuda-ipc     how client regions are backed (default memfd)\n"
		"  --log-level LEVEL         err, warning, notice, info, debug (default info)\n"
		"  --test-hooks              enable test-only hooks (SIGUSR1 freezes the scanner)\n"
		"  -h, --help                this text\n"
		"  --version                 print the version\n");
}

static int parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
		fprintf(stderr, "cuflagd: %s: '%s' is not a number in %llu..%llu\n", opt, s,
			(unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* A group name or number. */
static int parse_group(const char *s, int64_t *gid)
{
	struct group *g = getgrnam(s);
	uint64_t v;

	if (g) {
		*gid = g->gr_gid;
		return 0;
	}
	if (s[0] >= '0' && s[0] <= '9' && !parse_u64("--admin-group", s, 0, UINT32_MAX - 1, &v)) {
		*gid = (int64_t)v;
		return 0;
	}
	fprintf(stderr, "cuflagd: --admin-group: no group '%s'\n", s);
	return -EINVAL;
}

int cuflagd_config_parse(struct cuflagd_config *cfg, int argc, char **argv)
{
	enum { O_SOCKET = 256, O_MAXC, O_MAXUID, O_SLOTS, O_QUEUE, O_SPIN, O_PSPIN, O_PPOLL,
	       O_RATE, O_SLAB, O_LOG, O_HOOKS, O_VERSION, O_CONNUID, O_SLOTSUID, O_PENDUID,
	       O_RATEUID, O_HELLO_TO, O_ADMIN, O_BUDGET };
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "max-clients", required_argument, NULL, O_MAXC },
		{ "max-clients-per-uid", required_argument, NULL, O_MAXUID },
		{ "max-connections-per-uid", required_argument, NULL, O_CONNUID },
		{ "max-slots-per-uid", required_argument, NULL, O_SLOTSUID },
		{ "max-pending-per-uid", required_argument, NULL, O_PENDUID },
		{ "msg-rate-per-uid", required_argument, NULL, O_RATEUID },
		{ "hello-timeout-ms", required_argument, NULL, O_HELLO_TO },
		{ "admin-group", required_argument, NULL, O_ADMIN },
		{ "write-budget-us", required_argument, NULL, O_BUDGET },
		{ "slots-per-client", required_argument, NULL, O_SLOTS },
		{ "queue-size", required_argument, NULL, O_QUEUE },
		{ "spin-us", required_argument, NULL, O_SPIN },
		{ "pending-spin-ms", required_argument, NULL, O_PSPIN },
		{ "pending-poll-us", required_argument, NULL, O_PPOLL },
		{ "msg-rate", required_argument, NULL, O_RATE },
		{ "slab", required_argument, NULL, O_SLAB },
		{ "log-level", required_argument, NULL, O_LOG },
		{ "test-hooks", no_argument, NULL, O_HOOKS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ 0 },
	};
	uint64_t v;
	int c, per_uid_set = 0;
	uint32_t conn_per_uid = 0, rate_per_uid = 0;

	*cfg = (struct cuflagd_config){
		.max_clients = 256,
		.slots_per_client = 1024,
		.queue_size = 1024,
		.spin_us = 50,
		.pending_spin_ms = 10,
		.pending_poll_us = 250,
		.msg_rate = 20000,
		.slab = CUFLAG_SLAB_MEMFD,
		.max_pending_per_uid = 16384,
		.hello_timeout_ms = 2000,
		.admin_gid = -1,
		.write_budget_us = 5000,
	};
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_SOCKET:
			if (!optarg[0] || strlen(optarg) >= 108) {
				fprintf(stderr, "cuflagd: --socket: path empty or too long\n");
				return -EINVAL;
			}
			cfg->socket_path = optarg;
			break;
		case O_MAXC:
			if (parse_u64("--max-clients", optarg, 1, 65536, &v))
				return -EINVAL;
			cfg->max_clients = (uint32_t)v;
			break;
		case O_MAXUID:
			if (parse_u64("--max-clients-per-uid", optarg, 1, 65536, &v))
				return -EINVAL;
			cfg->max_clients_per_uid = (uint32_t)v;
			per_uid_set = 1;
			break;
		case O_CONNUID:
			if (parse_u64("--max-connections-per-uid", optarg, 1, 1u << 20, &v))
				return -EINVAL;
			conn_per_uid = (uint32_t)v;
			break;
		case O_SLOTSUID:
			if (parse_u64("--max-slots-per-uid", optarg, 1, UINT32_MAX, &v))
				return -EINVAL;
			cfg->max_slots_per_uid = (uint32_t)v;
			break;
		case O_PENDUID:
			if (parse_u64("--max-pending-per-uid", optarg, 1, UINT32_MAX, &v))
				return -EINVAL;
			cfg->max_pending_per_uid = (uint32_t)v;
			break;
		case O_RATEUID:
			if (parse_u64("--msg-rate-per-uid", optarg, 1, 100000000, &v))
				return -EINVAL;
			rate_per_uid = (uint32_t)v;
			break;
		case O_HELLO_TO:
			if (parse_u64("--hello-timeout-ms", optarg, 1, 3600000, &v))
				return -EINVAL;
			cfg->hello_timeout_ms = v;
			break;
		case O_ADMIN:
			if (parse_group(optarg, &cfg->admin_gid))
				return -EINVAL;
			break;
		case O_BUDGET:
			if (parse_u64("--write-budget-us", optarg, 100, 10000000, &v))
				return -EINVAL;
			cfg->write_budget_us = v;
			break;
		case O_SLOTS:
			if (parse_u64("--slots-per-client", optarg, 1, 1u << 20, &v))
				return -EINVAL;
			cfg->slots_per_client = (uint32_t)v;
			break;
		case O_QUEUE:
			if (parse_u64("--queue-size", optarg, 2, 1u << 20, &v))
				return -EINVAL;
			if (v & (v - 1)) {
				fprintf(stderr, "cuflagd: --queue-size: %s is not a power of two\n",
					optarg);
				return -EINVAL;
			}
			cfg->queue_size = (uint32_t)v;
			break;
		case O_SPIN:
			if (parse_u64("--spin-us", optarg, 0, 10000000, &v))
				return -EINVAL;
			cfg->spin_us = v;
			break;
		case O_PSPIN:
			if (parse_u64("--pending-spin-ms", optarg, 0, 3600000, &v))
				return -EINVAL;
			cfg->pending_spin_ms = v;
			break;
		case O_PPOLL:
			if (parse_u64("--pending-poll-us", optarg, 1, 1000000, &v))
				return -EINVAL;
			cfg->pending_poll_us = v;
			break;
		case O_RATE:
			if (parse_u64("--msg-rate", optarg, 1, 100000000, &v))
				return -EINVAL;
			cfg->msg_rate = (uint32_t)v;
			break;
		case O_SLAB:
			if (!strcmp(optarg, "memfd"))
				cfg->slab = CUFLAG_SLAB_MEMFD;
			else if (!strcmp(optarg, "cuda-ipc"))
				cfg->slab = CUFLAG_SLAB_CUDA_IPC;
			else {
				fprintf(stderr, "cuflagd: --slab: '%s' is not memfd or cuda-ipc\n",
					optarg);
				return -EINVAL;
			}
			break;
		case O_LOG: {
			int l = cuflagd_log_parse_level(optarg);
			if (l < 0) {
				fprintf(stderr, "cuflagd: --log-level: unknown level '%s'\n", optarg);
				return -EINVAL;
			}
			cuflagd_log_level = l;
			break;
		}
		case O_HOOKS:
			cfg->test_hooks = 1;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case O_VERSION:
			printf("cuflagd %s (protocol %u)\n", CUFLAG_VERSION, CUFLAG_PROTO_VERSION);
			return 1;
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cuflagd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	/* A fair share by default: no user takes more than a quarter. */
	if (!per_uid_set)
		cfg->max_clients_per_uid = cfg->max_clients / 4 ? cfg->max_clients / 4 : 1;
	if (cfg->max_clients_per_uid > cfg->max_clients)
		cfg->max_clients_per_uid = cfg->max_clients;
	cfg->max_connections_per_uid = conn_per_uid ? conn_per_uid : cfg->max_clients_per_uid + 8;
	cfg->msg_rate_per_uid = rate_per_uid ? rate_per_uid : 4 * cfg->msg_rate;
	return 0;
}
