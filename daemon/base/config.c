/* SPDX-License-Identifier: MIT */
#include "base/config.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/region-guard.h"
#include "cuflag-proto.h"
#include "policy/idle-policy.h"

#define TRY_HELP "Try 'cuflagd --help' for the options.\n"

static void usage(void)
{
	printf(
		"Usage: cuflagd [OPTIONS]\n"
		"GPU completion flags for every process on the node.\n\n"
		"  --socket PATH             listen on PATH (default: socket activation, else\n"
		"                            " CUFLAG_DEFAULT_SOCKET "; with --user,\n"
		"                            $XDG_RUNTIME_DIR/cuflag/cuflagd.sock, or\n"
		"                            /tmp/cuflag-UID/cuflagd.sock without the variable)\n"
		"  --user                    serve this user only: other uids are refused, the\n"
		"                            socket's directory must be the user's own (0700),\n"
		"                            one daemon per user (a lock in that directory), the\n"
		"                            limits are one user's (what the library starts\n"
		"                            when no node daemon serves it)\n"
		"  --exit-idle S             exit after S seconds with no connection (default:\n"
		"                            30 with --user, else 0: never)\n"
		"  --ready-fd N              write READY=1 and a newline to fd N once serving,\n"
		"                            then close it (for whoever starts the daemon)\n"
		"  --detach                  go into the background: the process started\n"
		"                            returns at once, the daemon runs on in a session\n"
		"                            of its own\n"
		"  --socket-group GROUP      the socket's group, and of the directory made for it\n"
		"  --socket-mode MODE        the socket's mode, octal (default 0660; 0600\n"
		"                            with --user)\n"
		"  --max-clients N           clients holding a region at once (default 256)\n"
		"  --max-clients-per-uid N   of those, per user id (default: max-clients / 4)\n"
		"  --max-connections-per-uid N\n"
		"                            connections per user id, with or without HELLO\n"
		"                            (default: max-clients-per-uid + 8)\n"
		"  --max-slots-per-uid N     daemon fds per user id over all its clients: one per\n"
		"                            slot with an eventfd of its own, one per group; a\n"
		"                            slot of a group costs none (default: a quarter of\n"
		"                            what the open-file limit leaves for slots, at most\n"
		"                            slots-per-client x max-clients-per-uid)\n"
		"  --max-pending-per-uid N   armed slots not complete per user id; further arms\n"
		"                            wait in the client's queue (default 16384)\n"
		"  --msg-rate-per-uid N      requests per second per user id (default 4 x\n"
		"                            msg-rate)\n"
		"  --hello-timeout-ms N      close a connection that has not said HELLO by then\n"
		"                            (default 2000; STATS and CLIENTS need no HELLO)\n"
		"  --admin-group GROUP       members, like root, are never refused a connection\n"
		"                            and see every client (default: root only)\n"
		"  --write-budget-us N       eventfd write time one user's clients may cost the\n"
		"                            scanner beyond 20 us a write and 200 us a pass,\n"
		"                            summed in a bucket that drains at a tenth of real\n"
		"                            time, before the client is dropped (default 2000)\n"
		"  --slots-per-client N      slots (flags) per client (default 1024)\n"
		"  --queue-size N            arm queue entries per client, power of two\n"
		"                            (default 1024)\n"
		"  --groups-per-client N     slot groups per client (default 8)\n"
		"  --group-ring N            completion records per group ring, power of two\n"
		"                            (default 1024)\n"
		"  --spin-us N               scanner spin budget before it parks (default 50)\n"
		"  --scanner-mode adaptive|spin\n"
		"                            adaptive (default): sleep until a completion or an\n"
		"                            arm is due, learned from each slot's past ones;\n"
		"                            spin: spin while slots are pending (a core for\n"
		"                            latency)\n"
		"  --backstop-us N           adaptive: look at pending slots at least this often,\n"
		"                            so a completion sooner than predicted is seen within\n"
		"                            it (default 1000)\n"
		"  --pending-spin-ms N       spin: with slots pending and none of them completing,\n"
		"                            spin this long, then poll (default 10; 0: spin)\n"
		"  --pending-poll-us N       spin: the poll interval then (default 250)\n"
		"  --msg-rate N              requests per second per client (default 20000)\n"
		"  --slab memfd|cuda-ipc     how client regions are backed (default memfd)\n"
		"  --region-guard auto|user|off\n"
		"                            how regions are guarded against punched holes:\n"
		"                            auto (default) the most the daemon may, user: its\n"
		"                            own loads and stores only, off: none (as where\n"
		"                            userfaultfd is refused)\n"
		"  --log-level LEVEL         err, warning, notice, info, debug (default info)\n"
		"  --stuck-ms N              a slot armed this long without completing is\n"
		"                            stuck: listed, counted, logged (default 10000)\n"
		"  --no-metrics              do not time completions nor look for stuck work\n"
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

/* A group name or number, for option opt. */
static int parse_group(const char *opt, const char *s, int64_t *gid)
{
	struct group *g = getgrnam(s);
	uint64_t v;

	if (g) {
		*gid = g->gr_gid;
		return 0;
	}
	if (s[0] >= '0' && s[0] <= '9' && !parse_u64(opt, s, 0, UINT32_MAX - 1, &v)) {
		*gid = (int64_t)v;
		return 0;
	}
	fprintf(stderr, "cuflagd: %s: no group '%s'\n", opt, s);
	return -EINVAL;
}

/* The numeric options: where each goes, and its range. */
struct num_opt {
	const char *name;
	uint64_t min, max;
	size_t off;   /* in struct cuflagd_config */
	int wide;     /* a uint64_t field, else uint32_t */
};

#define NUM32(n, lo, hi, field) { n, lo, hi, offsetof(struct cuflagd_config, field), 0 }
#define NUM64(n, lo, hi, field) { n, lo, hi, offsetof(struct cuflagd_config, field), 1 }

static const struct num_opt num_opts[] = {
	NUM32("max-clients", 1, 65536, max_clients),
	NUM32("max-clients-per-uid", 1, 65536, max_clients_per_uid),
	NUM32("max-connections-per-uid", 1, 1u << 20, max_connections_per_uid),
	NUM32("max-slots-per-uid", 1, UINT32_MAX, max_slots_per_uid),
	NUM32("max-pending-per-uid", 1, UINT32_MAX, max_pending_per_uid),
	NUM32("msg-rate-per-uid", 1, 100000000, msg_rate_per_uid),
	NUM64("hello-timeout-ms", 1, 3600000, hello_timeout_ms),
	NUM64("write-budget-us", 100, 10000000, write_budget_us),
	NUM32("slots-per-client", 1, 1u << 20, slots_per_client),
	NUM32("queue-size", 2, 1u << 20, queue_size),
	NUM32("groups-per-client", 0, 4096, groups_per_client),
	NUM32("group-ring", 2, 1u << 24, group_ring),
	NUM64("spin-us", 0, 10000000, spin_us),
	NUM64("pending-spin-ms", 0, 3600000, pending_spin_ms),
	NUM64("pending-poll-us", 1, 1000000, pending_poll_us),
	NUM64("backstop-us", 10, 1000000, backstop_us),
	NUM32("msg-rate", 1, 100000000, msg_rate),
	NUM64("stuck-ms", 1, 86400000, stuck_ms),
	NUM32("exit-idle", 0, 31536000, exit_idle_s),
	NUM32("ready-fd", 0, 1u << 20, ready_fd),
};
#define NUM_OPTS (sizeof(num_opts) / sizeof(num_opts[0]))

enum { O_SOCKET = 256, O_SLAB, O_LOG, O_HOOKS, O_VERSION, O_ADMIN, O_SCANNER, O_NOMETRICS, O_GUARD,
       O_SOCKGRP, O_SOCKMODE, O_USER, O_DETACH, O_NUM };

static int parse_num(struct cuflagd_config *cfg, const struct num_opt *o, const char *arg)
{
	char opt[48];
	uint64_t v;

	snprintf(opt, sizeof(opt), "--%s", o->name);
	if (parse_u64(opt, arg, o->min, o->max, &v))
		return -EINVAL;
	if (o->off == offsetof(struct cuflagd_config, max_clients) ||
	    o->off == offsetof(struct cuflagd_config, slots_per_client))
		cfg->sized_by_operator = 1;
	if (o->wide)
		memcpy((char *)cfg + o->off, &v, sizeof(v));
	else
		memcpy((char *)cfg + o->off, &(uint32_t){ (uint32_t)v }, sizeof(uint32_t));
	return 0;
}

/* An option that is one of two words, a or b: *out becomes va or vb. */
static int parse_word(const char *opt, const char *arg, const char *a, int va, const char *b,
		      int vb, int *out)
{
	if (!strcmp(arg, a))
		*out = va;
	else if (!strcmp(arg, b))
		*out = vb;
	else {
		fprintf(stderr, "cuflagd: --%s: '%s' is not %s or %s\n", opt, arg, a, b);
		return -EINVAL;
	}
	return 0;
}

/* The options that are not numbers. 0, 1 (stop: help or version printed),
 * or -EINVAL. */
static int parse_other(struct cuflagd_config *cfg, int c, const char *arg)
{
	switch (c) {
	case O_SOCKET:
		if (!arg[0] || strlen(arg) >= 108) {
			fprintf(stderr, "cuflagd: --socket: path empty or too long\n");
			return -EINVAL;
		}
		cfg->socket_path = arg;
		return 0;
	case O_SLAB:
		return parse_word("slab", arg, "memfd", CUFLAG_SLAB_MEMFD, "cuda-ipc",
				  CUFLAG_SLAB_CUDA_IPC, &cfg->slab);
	case O_LOG: {
		int l = cuflagd_log_parse_level(arg);
		if (l < 0) {
			fprintf(stderr, "cuflagd: --log-level: unknown level '%s'\n", arg);
			return -EINVAL;
		}
		cuflagd_log_level = l;
		return 0;
	}
	case O_ADMIN:
		return parse_group("--admin-group", arg, &cfg->admin_gid);
	case O_SOCKGRP:
		return parse_group("--socket-group", arg, &cfg->socket_gid);
	case O_SOCKMODE: {
		char *end;
		unsigned long m = strtoul(arg, &end, 8);
		/* The owner must both read and write it, as the message says:
		 * a mode such as 0400 or 0260 is a slip, not a policy. */
		if (!arg[0] || *end || m > 0777 || (m & 0600) != 0600) {
			fprintf(stderr, "cuflagd: --socket-mode: '%s' is not an octal mode "
				"(0600..0777, the owner reading and writing)\n", arg);
			return -EINVAL;
		}
		cfg->socket_mode = (uint32_t)m;
		return 0;
	}
	case O_GUARD:
		if (!strcmp(arg, "auto"))
			cfg->region_guard = GUARD_FULL;
		else
			return parse_word("region-guard", arg, "user", GUARD_USER, "off", GUARD_OFF,
					  &cfg->region_guard);
		return 0;
	case O_SCANNER:
		return parse_word("scanner-mode", arg, "spin", SCANNER_SPIN, "adaptive",
				  SCANNER_ADAPTIVE, &cfg->scanner_mode);
	case O_HOOKS:
		cfg->test_hooks = 1;
		return 0;
	case O_NOMETRICS:
		cfg->no_metrics = 1;
		return 0;
	case O_USER:
		cfg->user_mode = 1;
		return 0;
	case O_DETACH:
		cfg->detach = 1;
		return 0;
	case 'h':
		usage();
		return 1;
	case O_VERSION:
		printf("cuflagd %s (protocol %u)\n", CUFLAG_VERSION, CUFLAG_PROTO_VERSION);
		return 1;
	default: /* getopt_long has said which option, in one line */
		fputs(TRY_HELP, stderr);
		return -EINVAL;
	}
}

/* Defaults that follow from other settings, unless given. */
static int finish(struct cuflagd_config *cfg)
{
	if (cfg->queue_size & (cfg->queue_size - 1)) {
		fprintf(stderr, "cuflagd: --queue-size: %u is not a power of two\n", cfg->queue_size);
		return -EINVAL;
	}
	if (cfg->group_ring & (cfg->group_ring - 1)) {
		fprintf(stderr, "cuflagd: --group-ring: %u is not a power of two\n", cfg->group_ring);
		return -EINVAL;
	}
	/* A fair share by default: no user takes more than a quarter; a
	 * user's own daemon has one user to serve. */
	if (!cfg->max_clients_per_uid)
		cfg->max_clients_per_uid = cfg->user_mode ? cfg->max_clients
				: cfg->max_clients / 4 ? cfg->max_clients / 4 : 1;
	/* The user's socket is the user's alone (its directory is 0700 too). */
	if (cfg->user_mode)
		cfg->socket_mode = 0600;
	if (cfg->exit_idle_s == EXIT_IDLE_UNSET)
		cfg->exit_idle_s = cfg->user_mode ? EXIT_IDLE_USER_S : 0;
	if (cfg->user_mode && (cfg->socket_gid >= 0 || cfg->admin_gid >= 0)) {
		fprintf(stderr, "cuflagd: --user serves one user: --socket-group and "
			"--admin-group do not go with it\n");
		return -EINVAL;
	}
	if (cfg->max_clients_per_uid > cfg->max_clients)
		cfg->max_clients_per_uid = cfg->max_clients;
	if (!cfg->max_connections_per_uid)
		cfg->max_connections_per_uid = cfg->max_clients_per_uid + 8;
	if (!cfg->msg_rate_per_uid)
		cfg->msg_rate_per_uid = 4 * cfg->msg_rate;
	return 0;
}

int cuflagd_config_parse(struct cuflagd_config *cfg, int argc, char **argv)
{
	static const struct option named[] = {
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "socket-group", required_argument, NULL, O_SOCKGRP },
		{ "socket-mode", required_argument, NULL, O_SOCKMODE },
		{ "slab", required_argument, NULL, O_SLAB },
		{ "log-level", required_argument, NULL, O_LOG },
		{ "admin-group", required_argument, NULL, O_ADMIN },
		{ "test-hooks", no_argument, NULL, O_HOOKS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ "scanner-mode", required_argument, NULL, O_SCANNER },
		{ "region-guard", required_argument, NULL, O_GUARD },
		{ "no-metrics", no_argument, NULL, O_NOMETRICS },
		{ "user", no_argument, NULL, O_USER },
		{ "detach", no_argument, NULL, O_DETACH },
	};
	enum { NAMED = sizeof(named) / sizeof(named[0]) };
	struct option opts[NAMED + NUM_OPTS + 1] = { 0 };
	int c, rc;

	memcpy(opts, named, sizeof(named));
	for (size_t i = 0; i < NUM_OPTS; i++)
		opts[NAMED + i] = (struct option){ num_opts[i].name, required_argument, NULL,
						   O_NUM + (int)i };
	*cfg = (struct cuflagd_config){
		.max_clients = 256,
		.slots_per_client = 1024,
		.queue_size = 1024,
		.groups_per_client = 8,
		.group_ring = 1024,
		.spin_us = 50,
		.pending_spin_ms = 10,
		.pending_poll_us = 250,
		.backstop_us = 1000,
		.scanner_mode = SCANNER_ADAPTIVE,
		.msg_rate = 20000,
		.slab = CUFLAG_SLAB_MEMFD,
		.region_guard = GUARD_FULL,
		.max_pending_per_uid = 16384,
		.hello_timeout_ms = 2000,
		.admin_gid = -1,
		.socket_gid = -1,
		.socket_mode = 0660,
		.write_budget_us = 2000,
		.stuck_ms = 10000,
		.exit_idle_s = EXIT_IDLE_UNSET,
		.ready_fd = READY_FD_NONE,
	};
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c >= O_NUM && c < O_NUM + (int)NUM_OPTS)
			rc = parse_num(cfg, &num_opts[c - O_NUM], optarg);
		else
			rc = parse_other(cfg, c, optarg);
		if (rc)
			return rc;
	}
	if (optind < argc) {
		fprintf(stderr, "cuflagd: unexpected argument '%s'\n%s", argv[optind], TRY_HELP);
		return -EINVAL;
	}
	return finish(cfg);
}
