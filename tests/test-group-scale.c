/* SPDX-License-Identifier: MIT */
/*
 * Scale without fds: 16 processes, each with 16 384 slots in one group,
 * every slot completing 4 times in shuffled order, counted through the
 * group's one fd: every count exact, and the daemon's fd count flat (a
 * handful per client, none per slot).
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "harness.h"

#define PROCS 16
#define SLOTS 16384
#define ROUNDS 4

static struct daemon_proc d;

/* One process: its group, its slots, the rounds. Exit status 0 if exact. */
static int one_process(unsigned seed)
{
	static cuflag_slot *s[SLOTS];
	static uint32_t t[SLOTS], order[SLOTS];
	static uint8_t count[SLOTS];
	struct cuflag_completion rec[256];
	cuflag_client *c;
	cuflag_group *g;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_group_create(c, &g));
	CHECK_RC(cuflag_group_slots_acquire(g, SLOTS, s));
	for (unsigned i = 0; i < SLOTS; i++)
		order[i] = i;
	for (unsigned r = 1; r <= ROUNDS; r++) {
		struct pollfd p = { .fd = cuflag_group_fd(g), .events = POLLIN };
		uint64_t got = 0;

		for (unsigned i = SLOTS - 1; i > 0; i--) { /* shuffle */
			unsigned j = (unsigned)rand_r(&seed) % (i + 1), x = order[i];
			order[i] = order[j];
			order[j] = x;
		}
		for (unsigned i = 0; i < SLOTS; i++)
			CHECK_RC(cuflag_slot_arm(s[i], &t[i]));
		for (unsigned i = 0; i < SLOTS; i++)
			sim_store(cuflag_slot_flag(s[order[i]]), t[order[i]]);
		while (got < SLOTS) {
			CHECK_MSG(poll(&p, 1, 20000) == 1, "round %u: %llu of %d", r,
				  (unsigned long long)got, SLOTS);
			int n = cuflag_group_drain(g, rec, 256);
			CHECK(n >= 0);
			for (int k = 0; k < n; k++) {
				CHECK(rec[k].completions == 1);
				count[cuflag_slot_id(rec[k].slot)]++;
				got++;
			}
		}
		for (unsigned i = 0; i < SLOTS; i++)
			CHECK_MSG(count[cuflag_slot_id(s[i])] == r, "slot %u: %u in round %u", i,
				  count[cuflag_slot_id(s[i])], r);
	}
	cuflag_disconnect(c);
	return 0;
}

int main(void)
{
	const char *args[] = { "--slots-per-client", "16384", "--max-clients", "32",
			       "--group-ring", "4096", NULL };
	pid_t pid[PROCS];
	int fds_before, fds_peak = 0, bad = 0;
	uint64_t t0;

	setvbuf(stdout, NULL, _IONBF, 0);
	daemon_start(&d, 0, args);
	fds_before = daemon_fd_count_steady(&d);
	t0 = cuflag_now_ns();
	for (int i = 0; i < PROCS; i++) {
		pid[i] = fork();
		CHECK(pid[i] >= 0);
		if (pid[i] == 0)
			_exit(one_process(1000u + (unsigned)i));
	}
	for (int left = PROCS; left;) {
		int st, f = daemon_fd_count(&d);
		pid_t p = waitpid(-1, &st, WNOHANG);
		if (f > fds_peak)
			fds_peak = f;
		if (p > 0) {
			left--;
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				bad++;
		} else {
			usleep(20000);
		}
	}
	printf("group scale: %d processes x %d grouped slots x %d completions in %.2f s, "
	       "%d not exact; daemon fds %d before, at most %d during\n",
	       PROCS, SLOTS, ROUNDS, (double)(cuflag_now_ns() - t0) / 1e9, bad, fds_before,
	       fds_peak);
	CHECK(bad == 0);
	/* Per client: its socket, wake eventfd and group eventfd (and a
	 * moment's received fds); none per slot. */
	CHECK(fds_peak <= fds_before + PROCS * 4);
	CHECK(daemon_stop(&d) == 0);
	return 0;
}
