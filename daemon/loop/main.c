/* SPDX-License-Identifier: MIT */
/* cuflagd: GPU completion flags for every process on the node. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/config.h"
#include "base/slab.h"
#include "loop/server.h"

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
		/* A user's own daemon (--user) has one user to give it all. */
		unsigned parts = cfg->user_mode ? 1 : 4;
		uint64_t share = (uint64_t)cfg->slots_per_client * cfg->max_clients_per_uid;
		if (rl.rlim_cur != RLIM_INFINITY && (rl.rlim_cur - 256) / parts < share)
			share = rl.rlim_cur > 1280 ? (rl.rlim_cur - 256) / parts : 256;
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

/* Every fd from first on closed (close_range(2), else one at a time). */
static void close_from(unsigned first)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, first, ~0u, 0) == 0)
		return;
#endif
	for (long fd = first, max = sysconf(_SC_OPEN_MAX); fd < max && fd < 65536; fd++)
		close((int)fd);
}

/* No fd of the starter's but stdin, stdout, stderr and --ready-fd. */
static void close_inherited(uint32_t keep)
{
	if (keep == READY_FD_NONE || keep < 3) {
		close_from(3);
		return;
	}
	for (uint32_t fd = 3; fd < keep; fd++)
		close((int)fd);
	close_from(keep + 1);
}

/*
 * --detach: the process that was started returns at once (its starter
 * reaps it: no zombie there), and the daemon goes on in a session of its
 * own, before any thread exists, holding no fd of its starter's but those
 * it was given. 0, or -1 after a line on stderr.
 */
static int detach(uint32_t ready_fd)
{
	pid_t pid = fork();

	if (pid < 0) {
		fprintf(stderr, "cuflagd: --detach: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid > 0)
		_exit(EXIT_SUCCESS);
	if (setsid() < 0) {
		fprintf(stderr, "cuflagd: --detach: setsid: %s\n", strerror(errno));
		return -1;
	}
	close_inherited(ready_fd);
	return 0;
}

/* --ready-fd names an open fd, which no thread or child keeps. */
static int ready_fd_check(const struct cuflagd_config *cfg)
{
	int fd = (int)cfg->ready_fd, fl;

	if (cfg->ready_fd == READY_FD_NONE)
		return 0;
	fl = fcntl(fd, F_GETFD);
	if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0) {
		fprintf(stderr, "cuflagd: --ready-fd %d: %s\n", fd, strerror(errno));
		return -1;
	}
	return 0;
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
	if (ready_fd_check(&cfg) || (cfg.detach && detach(cfg.ready_fd)))
		return EXIT_FAILURE;
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
