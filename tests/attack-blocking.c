/* SPDX-License-Identifier: MIT */
/*
 * 200 sessions of one user, each slot bound to an eventfd made blocking
 * (O_NONBLOCK cleared on the file the daemon shares) and full, all
 * completed at once: every write the scanner makes to one of them would
 * block for ever. A blocked write must cost the user at most one cut for
 * all its sessions, not one per session, and get the user cooled down.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "attacks.h"
#include "cuflag/cuflag.h"

#define SESSIONS 200
#define ROUNDS 4

struct blocking_ctl {
	struct rounds r;
	_Atomic int sessions, hung_up;
};

static int dropped_pred(cuflag_client *c)
{
	struct pollfd p = { .fd = cuflag_client_fd(c), .events = POLLRDHUP };
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* A session whose one slot signals a blocking, full eventfd. */
static int trap(cuflag_client **c, cuflag_slot **s, int *efd)
{
	uint64_t full = 0xfffffffffffffffeull;
	int rc, fl;

	rc = cuflag_connect(attack_daemon.sock, c);
	if (rc)
		return rc;
	/* Dropped, it must not wait for a resume: a new round connects anew. */
	CHECK_RC(cuflag_client_set_resume_timeout(*c, 0));
	*efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK(*efd >= 0);
	rc = cuflag_slot_acquire(*c, s);
	if (!rc)
		rc = cuflag_slot_bind_eventfd(*s, *efd);
	if (rc) {
		cuflag_disconnect(*c);
		close(*efd);
		return rc;
	}
	/* The daemon's copy shares this file's flags. */
	fl = fcntl(*efd, F_GETFL);
	CHECK(fl >= 0 && fcntl(*efd, F_SETFL, fl & ~O_NONBLOCK) == 0);
	CHECK(write(*efd, &full, sizeof(full)) == sizeof(full));
	return 0;
}

static int one_round(struct blocking_ctl *bc)
{
	static cuflag_client *c[SESSIONS];
	static cuflag_slot *s[SESSIONS];
	static int efd[SESSIONS];
	static uint32_t t[SESSIONS];
	int n = 0, rc = 0, gone = 0;
	uint64_t end;

	while (n < SESSIONS && (rc = trap(&c[n], &s[n], &efd[n])) == 0)
		n++;
	if (n > atomic_load(&bc->sessions))
		atomic_store(&bc->sessions, n);
	attack_mark("%d sessions set up, then %d", n, rc);
	if (n) {
		for (int i = 0; i < n; i++)
			CHECK_RC(cuflag_slot_arm(s[i], &t[i]));
		for (int i = 0; i < n; i++)
			sim_store(cuflag_slot_flag(s[i]), t[i]);
		attack_mark("all %d completed", n);
		/* Each of them is dropped, or the round is over. */
		end = cuflag_now_ns() + 3000000000ull;
		do {
			gone = 0;
			for (int i = 0; i < n; i++)
				gone += dropped_pred(c[i]);
			usleep(5000);
		} while (gone < n && cuflag_now_ns() < end);
		atomic_fetch_add(&bc->hung_up, gone);
		attack_mark("%d hung up", gone);
		if (gone)
			atomic_fetch_add(&bc->r.dropped, 1);
	}
	for (int i = 0; i < n; i++) {
		cuflag_disconnect(c[i]);
		close(efd[i]);
	}
	return rc;
}

static int round_fn(void *arg)
{
	return one_round(arg);
}

static void attacker_main(void *arg)
{
	struct blocking_ctl *bc = arg;
	rounds_run(&bc->r, ROUNDS, round_fn, bc);
}

void attack_blocking(void)
{
	struct blocking_ctl *bc = shm_alloc(sizeof(*bc));
	struct window w;

	window_open(&w, "200 sessions, each slot a blocking full eventfd, completed at once");
	attacker_run(w.name, 19, attacker_main, bc, 40000);
	snprintf(w.outcome, sizeof(w.outcome), "%d sessions a round, %d sessions hung up; ",
		 atomic_load(&bc->sessions), atomic_load(&bc->hung_up));
	expect_dropped_and_cooled(&w, &bc->r);
	window_close(&w);
}
