/* SPDX-License-Identifier: MIT */
/* cuflagd: GPU completion flags for every process on the node. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "config.h"
#include "server.h"
#include "slab.h"

/*
 * Each client holds an eventfd per slot here: take the whole hard limit of
 * open files (the soft one is often 1024). By default the daemon fits
 * itself to that limit (no user's slots may take more than a quarter of the
 * fds left for slots, --max-slots-per-uid) and says so at level info; only
 * client and slot limits an operator gave that the limit cannot hold are
 * warned about, in the words of whoever set the limit.
 */
static void raise_fd_limit(struct cuflagd_config *cfg)
{
	uint64_t want = (uint64_t)cfg->max_clients * (cfg->slots_per_client + 3) + 128;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			log_warn("cannot raise the open-file limit: %s", strerror(errno));
	}
	if (!cfg->max_slots_per_uid) {
		uint64_t share = (uint64_t)cfg->slots_per_client * cfg->max_clients_per_uid;
		if (rl.rlim_cur != RLIM_INFINITY && (rl.rlim_cur - 256) / 4 < share)
			share = rl.rlim_cur > 1280 ? (rl.rlim_cur - 256) / 4 : 256;
		cfg->max_slots_per_uid = share > UINT32_MAX ? UINT32_MAX : (uint32_t)share;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
		return;
	if (!cfg->sized_by_operator) {
		log_info("open-file limit %llu: slots with an eventfd of their own share it, "
			 "at most %u a user (--max-slots-per-uid)",
			 (unsigned long long)rl.rlim_cur, cfg->max_slots_per_uid);
		return;
	}
	/* INVOCATION_ID: systemd sets it for what it starts. */
	log_warn("open-file limit %llu is below what %u clients x %u slots need (%llu): "
		 "%s, or lower --max-clients / --slots-per-client",
		 (unsigned long long)rl.rlim_cur, cfg->max_clients, cfg->slots_per_client,
		 (unsigned long long)want,
		 getenv("INVOCATION_ID") ? "raise LimitNOFILE= in the unit"
					 : "raise the hard limit (ulimit -Hn, as root)");
}

int main(int argc, char **argv)
{
	struct cuflagd_config cfg;
	struct server srv;
	int rc;

	/* Lines go to the journal (or a test's pipe) as written. */
	setvbuf(stderr, NULL, _IOLBF, 0);
	rc = cuflagd_config_parse(&cfg, argc, argv);
	if (rc)
		return rc > 0 ? EXIT_SUCCESS : 2;
	cuflagd_log_open();
	/* Before any thread exists (the CUDA driver starts its own): every
	 * thread inherits this mask, so these signals reach only the signalfd. */
	server_block_signals();
	raise_fd_limit(&cfg);
	if (cfg.slab == CUFLAG_SLAB_CUDA_IPC) {
		rc = slab_cuda_init();
		if (rc) {
			log_err("--slab cuda-ipc: %s", rc == -ENOTSUP
							   ? "not available (built without CUDA, or "
							     "host NUMA allocations unsupported)"
							   : "no usable NVIDIA driver or GPU");
			return EXIT_FAILURE;
		}
	}
	rc = server_init(&srv, &cfg);
	if (rc == 0)
		rc = server_run(&srv);
	server_fini(&srv);
	if (rc) {
		log_err("exiting: %s", strerror(-rc));
		return EXIT_FAILURE;
	}
	log_notice("stopped");
	return EXIT_SUCCESS;
}
