/* SPDX-License-Identifier: MIT */
/*
 * Churn: client processes connect, take and give back slots, arm, complete
 * some, and go away — politely, by hanging up mid-flight, or killed — over
 * and over, while one steady client completes work the whole time. The
 * steady client's counts stay exact, and afterwards the daemon holds exactly
 * what it held before (fds, regions, clients, slots).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "harness.h"

#define CHURNERS 6
#define ROUNDS 60

static struct daemon_proc d;
static _Atomic int stop;
static _Atomic uint64_t steady_done;

/* The steady client: arm, store, wait for exactly one signal, forever. */
static void *steady(void *arg)
{
	cuflag_client *c;
	cuflag_slot *s[4];

	(void)arg;
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slots_acquire(c, 4, s));
	while (!atomic_load(&stop)) {
		for (int i = 0; i < 4; i++) {
			struct pollfd p = { .fd = cuflag_slot_fd(s[i]), .events = POLLIN };
			uint64_t n = 0;
			uint32_t t;
			CHECK_RC(cuflag_slot_arm(s[i], &t));
			sim_store(cuflag_slot_flag(s[i]), t);
			CHECK(poll(&p, 1, 5000) == 1);
			CHECK_RC(cuflag_slot_consume(s[i], &n));
			CHECK(n == 1);
			atomic_fetch_add(&steady_done, 1);
		}
	}
	cuflag_disconnect(c);
	return NULL;
}

/* One churning client's life; how it ends depends on the dice. */
static void churn_once(unsigned *seed)
{
	cuflag_client *c;
	cuflag_slot *s[64];
	unsigned n = 1 + rand_r(seed) % 64;
	int rc = cuflag_connect(d.sock, &c);

	if (rc == -EUSERS)
		return; /* a limit, not a failure */
	CHECK_RC(rc);
	CHECK_RC(cuflag_slots_acquire(c, n, s));
	for (unsigned i = 0; i < n; i++) {
		uint32_t t;
		int arms = rand_r(seed) % 4;
		for (int k = 0; k < arms; k++)
			CHECK_RC(cuflag_slot_arm(s[i], &t));
		if (arms && rand_r(seed) % 2)
			sim_store(cuflag_slot_flag(s[i]), t);
	}
	/* Give some back (even with arms in flight), take some again. */
	for (unsigned i = 0; i < n; i += 1 + rand_r(seed) % 3) {
		cuflag_slot_release(s[i]);
		CHECK_RC(cuflag_slot_acquire(c, &s[i]));
	}
	switch (rand_r(seed) % 3) {
	case 0:
		cuflag_disconnect(c); /* polite */
		break;
	case 1:
		_exit(0); /* hangs up with everything in flight */
	default:
		raise(SIGKILL);
	}
}

static void churner(unsigned seed)
{
	for (int r = 0; r < ROUNDS; r++) {
		pid_t p = fork();
		CHECK(p >= 0);
		if (p == 0) {
			churn_once(&seed);
			_exit(0);
		}
		int st;
		CHECK(waitpid(p, &st, 0) == p);
		CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0) ||
		      (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL));
		seed = seed * 1103515245u + 12345u;
	}
	_exit(0);
}

struct back {
	int fds, maps;
};

static int is_back(void *arg)
{
	struct back *b = arg;
	struct cuflag_msg_stats_reply st;

	daemon_stats(&d, &st);
	return daemon_fd_count(&d) == b->fds && daemon_region_maps(&d) == b->maps &&
	       st.clients == 0 && st.slots == 0 && st.pending == 0;
}

int main(void)
{
	const char *args[] = { "--max-clients", "16", NULL };
	pid_t kids[CHURNERS];
	struct back base;
	pthread_t th;
	uint64_t t0 = cuflag_now_ns(), before;

	setvbuf(stdout, NULL, _IONBF, 0);
	daemon_start(&d, 0, args);
	base = (struct back){ daemon_fd_count_steady(&d), daemon_region_maps(&d) };
	/* Fork the churners before any thread exists in this process. */
	for (int k = 0; k < CHURNERS; k++) {
		kids[k] = fork();
		CHECK(kids[k] >= 0);
		if (kids[k] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
			raise(SIGSTOP); /* released once the steady client runs */
			churner(0x9e3779b9u * (unsigned)(k + 1));
		}
	}
	CHECK(pthread_create(&th, NULL, steady, NULL) == 0);
	for (int k = 0; k < CHURNERS; k++) {
		int st;
		CHECK(waitpid(kids[k], &st, WUNTRACED) == kids[k] && WIFSTOPPED(st));
		kill(kids[k], SIGCONT);
	}
	before = atomic_load(&steady_done);
	for (int k = 0; k < CHURNERS; k++) {
		int st;
		CHECK(waitpid(kids[k], &st, 0) == kids[k]);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	CHECK(atomic_load(&steady_done) > before); /* it kept going through the churn */
	if (!wait_until(is_back, &base, 10000)) {
		struct cuflag_msg_stats_reply st;
		daemon_stats(&d, &st);
		char cmd[96];
		snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd >&2", (int)d.pid);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot list the daemon's fds\n");
		CHECK_FAIL("not back: %d fds (%d before), %d regions (%d), %u clients, %u slots, "
			   "%llu pending",
			   daemon_fd_count(&d), base.fds, daemon_region_maps(&d), base.maps,
			   st.clients, st.slots, (unsigned long long)st.pending);
	}
	printf("churn: %d clients came and went (a third killed), steady client completed "
	       "%llu, daemon back to %d fds in %.2f s\n",
	       CHURNERS * ROUNDS, (unsigned long long)atomic_load(&steady_done), base.fds,
	       (double)(cuflag_now_ns() - t0) / 1e9);
	CHECK(daemon_stop(&d) == 0);
	return 0;
}
