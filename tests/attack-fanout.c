/* SPDX-License-Identifier: MIT */
/*
 * Eventfd fan-out. A slot's eventfd is a file the client holds too: it can
 * register it in any number of epoll instances, and every write by the
 * scanner then runs one wake-up callback per watcher. The write never
 * blocks, so only a cost budget can stop it.
 *   fanout-bind:    1024 slots bound to one eventfd (cuflag_slot_bind_eventfd)
 *                   that sits in as many epolls as the fd limit allows;
 *   fanout-nobind:  many epolls each watching every daemon-made eventfd of
 *                   one client;
 *   fanout-helpers: the first, with helper processes of the same user
 *                   adding watchers while the flags advance;
 *   fanout-group:   1024 slots of one group, whose one eventfd sits in as
 *                   many epolls (the scanner writes it once a pass);
 *   fanout-alternate: one slot bound to that eventfd, another with a cheap
 *                   one, completed in turn 3 ms apart, so that no two
 *                   costly passes of its user come in a row.
 * The attacker advances every flag as fast as it can, reconnects when
 * dropped, and goes on until its user is refused (cooled down).
 *
 * The write never blocks: the fair share bounds what many moderately costly
 * writes cost the others, the write budget drops a user whose single writes
 * cost far beyond any wake-up, again and again. What a watcher costs is the
 * machine's, so the attacks that must show the budget firing run against a
 * daemon with a low budget (test-attack.c) and must end dropped and cooled
 * down. fanout-nobind's writes (a few hundred watchers each) cost what a
 * wake-up costs on a virtual machine: no budget can tell them from honest
 * ones, and the victim's wakes (judged as in every attack) show that the
 * share holds; a drop is noted, not required.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attacks.h"
#include "cuflag/cuflag.h"

/* Up to 1024 slots: the daemon's default slots per client. */
#define SLOTS 1024
/* Epolls per process watching the one bound eventfd. 19 000 watchers made a
 * write cost 1.3 ms, so 18 000 make each write cost several times the write
 * allowance; more (a hard limit of 10^6 is common) would only make the setup
 * slow on a small machine. */
#define BIND_EPOLLS 18000
/* Without BIND every watcher costs one registration per slot: 256 epolls x
 * 1024 eventfds are 262 000 callbacks a pass (tens of ms), set up in a
 * fraction of a second with 50 MB of kernel memory; the 2000 epolls once
 * tried take 0.4 GB and seconds. */
#define NOBIND_EPOLLS 256
#define HELPERS 4
/* Rounds: a user's first two strikes are let go, the third cools it down;
 * the fourth connect must be refused. fanout-nobind, which need not be
 * dropped, shows the share holding across a reconnect in two: each of its
 * rounds sets up 262 144 watchers, seconds of the attacker's CPU. */
#define ROUNDS 4
#define NOBIND_ROUNDS 2
/* A round the daemon does not end by itself ends here. */
#define ROUND_MS 1500

enum fanout_mode { BIND, NOBIND, GROUP, ALTERNATE };
/* ALTERNATE: between a costly completion and a cheap one (separate passes). */
#define ALTERNATE_GAP_US 3000

struct fanout {
	struct rounds r;
	enum fanout_mode mode;
	int helpers, efd;
	_Atomic int stop;
	_Atomic long watchers;
	_Atomic int slots;
};

static int make_epolls(int *eps, int n, const int *fds, int nfds)
{
	int made = 0;

	for (; made < n; made++) {
		struct epoll_event ev = { .events = EPOLLIN };
		int ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0)
			break;
		for (int i = 0; i < nfds; i++)
			if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) < 0) {
				close(ep);
				return made;
			}
		eps[made] = ep;
	}
	return made;
}

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* A helper of the same user: adds watchers on efd bit by bit, so that the
 * cost of each write grows while the attack runs. */
static void helper_main(struct fanout *f, int efd)
{
	static int eps[BIND_EPOLLS];
	int n = 0;

	while (!atomic_load(&f->stop) && n < BIND_EPOLLS) {
		int k = make_epolls(eps + n, n + 1000 <= BIND_EPOLLS ? 1000 : BIND_EPOLLS - n, &efd, 1);
		n += k;
		atomic_fetch_add(&f->watchers, k);
		if (n % 6000 == 0)
			attack_mark("helper %d: %d watchers", (int)getpid(), n);
		if (k < 1000)
			break;
		usleep(20000);
	}
	while (!atomic_load(&f->stop))
		usleep(10000);
}

/* The epolls that watch the one eventfd (BIND) or the group's (GROUP). */
static int watch_eps[BIND_EPOLLS], nwatch;

/* Acquire up to SLOTS slots, of group g when there is one, in batches, as
 * many as the daemon grants. */
static int acquire(cuflag_client *c, cuflag_group *g, cuflag_slot **s)
{
	int n = 0;

	while (n < SLOTS) {
		if (g ? cuflag_group_slots_acquire(g, 64, s + n) : cuflag_slots_acquire(c, 64, s + n))
			break;
		n += 64;
	}
	while (n < SLOTS && (g ? cuflag_group_slot_acquire(g, &s[n]) : cuflag_slot_acquire(c, &s[n])) == 0)
		n++;
	return n;
}

static int dropped_pred(cuflag_client *c)
{
	struct pollfd p = { .fd = cuflag_client_fd(c), .events = POLLRDHUP };
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* One round: a session set up for fan-out, its flags advanced until the
 * daemon hangs up or the round's time is out. */
static int one_round(struct fanout *f, int efd)
{
	static cuflag_slot *s[SLOTS];
	static int efds[SLOTS], eps[NOBIND_EPOLLS];
	cuflag_client *c;
	cuflag_group *g = NULL;
	int n, neps = 0, rc, dropped = 0;
	uint64_t end;

	rc = cuflag_connect(attack_daemon.sock, &c);
	attack_mark("connect: %d", rc);
	if (rc)
		return rc;
	/* Dropped, it must not wait for a resume: a new round connects anew. */
	CHECK_RC(cuflag_client_set_resume_timeout(c, 0));
	if (f->mode == GROUP && (rc = cuflag_group_create(c, &g))) {
		cuflag_disconnect(c);
		return rc;
	}
	n = f->mode == ALTERNATE ? (cuflag_slots_acquire(c, 2, s) ? 0 : 2) : acquire(c, g, s);
	atomic_store(&f->slots, n);
	for (int i = 0; i < n && (f->mode == BIND || (f->mode == ALTERNATE && i == 0)); i++)
		if ((rc = cuflag_slot_bind_eventfd(s[i], efd))) {
			n = i;
			break;
		}
	for (int i = 0; i < nwatch && g; i++) {
		struct epoll_event ev = { .events = EPOLLIN };
		CHECK(epoll_ctl(watch_eps[i], EPOLL_CTL_ADD, cuflag_group_fd(g), &ev) == 0);
	}
	if (f->mode == NOBIND) {
		for (int i = 0; i < n; i++)
			efds[i] = cuflag_slot_fd(s[i]);
		neps = make_epolls(eps, NOBIND_EPOLLS, efds, n);
		atomic_store(&f->watchers, (long)neps * n);
	}
	attack_mark("%d slots, %ld watchers: advancing", n, atomic_load(&f->watchers));
	end = cuflag_now_ns() + ROUND_MS * 1000000ull;
	while (!dropped && cuflag_now_ns() < end) {
		for (int i = 0; i < n; i++) {
			uint32_t t;
			if (cuflag_slot_arm(s[i], &t)) {
				dropped = 1;
				break;
			}
			sim_store(cuflag_slot_flag(s[i]), t);
			if (f->mode == ALTERNATE)
				usleep(ALTERNATE_GAP_US);
		}
		dropped = dropped || dropped_pred(c);
	}
	attack_mark(dropped ? "dropped" : "round over, not dropped");
	if (dropped)
		atomic_fetch_add(&f->r.dropped, 1);
	close_all(eps, neps);
	cuflag_disconnect(c);
	attack_mark("disconnected");
	return 0;
}

static int round_fn(void *arg)
{
	struct fanout *f = arg;
	return one_round(f, f->efd);
}

static void attacker_main(void *arg)
{
	struct fanout *f = arg;
	pid_t helpers[HELPERS];
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	CHECK(efd >= 0);
	for (int i = 0; i < f->helpers; i++) {
		helpers[i] = fork();
		CHECK(helpers[i] >= 0);
		if (helpers[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			helper_main(f, efd);
			_exit(0);
		}
	}
	if (f->mode != NOBIND) {
		/* GROUP: empty for now; each round adds its group's eventfd. */
		nwatch = make_epolls(watch_eps, BIND_EPOLLS, &efd, f->mode != GROUP);
		atomic_fetch_add(&f->watchers, nwatch);
		attack_mark("%d epolls made", nwatch);
	}
	f->efd = efd;
	rounds_run(&f->r, f->mode == NOBIND ? NOBIND_ROUNDS : ROUNDS, round_fn, f);
	atomic_store(&f->stop, 1);
	for (int i = 0; i < f->helpers; i++)
		waitpid(helpers[i], NULL, 0);
	close_all(watch_eps, nwatch);
}

static void fanout(const char *name, enum fanout_mode mode, int helpers)
{
	struct fanout *f = shm_alloc(sizeof(*f));
	struct window w;

	f->mode = mode;
	f->helpers = helpers;
	window_open(&w, name);
	attacker_run(name, 19, attacker_main, f, 30000);
	snprintf(w.outcome, sizeof(w.outcome), "%d slots, %ld watchers; ", atomic_load(&f->slots),
		 atomic_load(&f->watchers));
	if (mode == NOBIND)
		note_dropped(&w, &f->r);
	else
		expect_dropped_and_cooled(&w, &f->r);
	window_close(&w);
}

void attack_fanout_bind(void)
{
	fanout("fan-out, 1024 slots BOUND to one eventfd in 18 000 epolls", BIND, 0);
}

void attack_fanout_nobind(void)
{
	fanout("fan-out without BIND, 256 epolls x every slot eventfd", NOBIND, 0);
}

void attack_fanout_helpers(void)
{
	fanout("fan-out BOUND, 4 helper processes adding watchers", BIND, HELPERS);
}

void attack_fanout_alternate(void)
{
	fanout("fan-out, a costly slot and a cheap one completed in turn", ALTERNATE, 0);
}

void attack_fanout_group(void)
{
	fanout("fan-out, 1024 slots of a GROUP whose eventfd is in 18 000 epolls", GROUP, 0);
}
