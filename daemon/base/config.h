/* SPDX-License-Identifier: MIT */
/* cuflagd's settings, from the command line. */
#ifndef CUFLAGD_CONFIG_H
#define CUFLAGD_CONFIG_H

#include <stdint.h>

#include "cuflag/cuflag.h" /* CUFLAG_DEFAULT_SOCKET */

struct cuflagd_config {
	const char *socket_path;     /* NULL: socket activation, else the default */
	int64_t socket_gid;          /* --socket-group, or -1: the daemon's */
	uint32_t socket_mode;        /* --socket-mode */
	uint32_t max_clients;        /* sessions (regions) at once */
	uint32_t max_clients_per_uid;  /* regions per uid */
	uint32_t max_connections_per_uid; /* connections per uid, HELLO or not */
	uint32_t max_slots_per_uid;    /* 0: from the fd limit at start (main.c) */
	uint32_t max_pending_per_uid;  /* armed slots not complete, per uid */
	uint32_t msg_rate_per_uid;     /* requests per second per uid */
	uint64_t hello_timeout_ms;     /* a connection must say HELLO by then */
	int64_t admin_gid;             /* --admin-group, or -1: root only */
	uint64_t write_budget_us;      /* eventfd write time a user may run up */
	uint32_t slots_per_client;   /* flags per region */
	uint32_t queue_size;         /* arm queue entries per region (power of two) */
	uint32_t groups_per_client;  /* slot groups per region */
	uint32_t group_ring;         /* completion records per group ring (power of two) */
	uint64_t spin_us;            /* scanner spin budget before it parks */
	uint64_t pending_spin_ms;    /* spin while pending slots make no progress
				      * (0: for ever), then poll */
	uint64_t pending_poll_us;    /* the poll interval then */
	uint64_t backstop_us;        /* adaptive: the longest wait without a look */
	int scanner_mode;            /* enum scanner_mode (policy/idle-policy.h) */
	uint32_t msg_rate;           /* requests per second per client before refusal */
	int slab;                    /* enum cuflag_slab_kind */
	int region_guard;            /* enum guard_mode (region-guard.h): the most tried */
	int test_hooks;              /* SIGUSR1 freezes the scanner (tests only) */
	uint64_t stuck_ms;           /* a slot armed this long with no progress is stuck */
	int no_metrics;              /* --no-metrics: no arm -> done times, no stuck work */
	int user_mode;               /* --user: one user's own daemon */
	uint32_t exit_idle_s;        /* --exit-idle: 0 never */
	uint32_t ready_fd;           /* --ready-fd, or READY_FD_NONE */
	int detach;                  /* --detach */
	int sized_by_operator;       /* --max-clients or --slots-per-client given: a
				      * limit that cannot hold them is warned about */
};

/* --exit-idle not given: EXIT_IDLE_USER_S with --user, else never. */
#define EXIT_IDLE_UNSET UINT32_MAX
#define EXIT_IDLE_USER_S 30u
#define READY_FD_NONE UINT32_MAX

/*
 * Parse argv. 0 to run, 1 when --help or --version was printed, or a
 * negative errno after printing why.
 */
int cuflagd_config_parse(struct cuflagd_config *cfg, int argc, char **argv);

#endif
