/* SPDX-License-Identifier: MIT */
/*
 * What users hold, and what they can make the daemon log:
 *   fd-mix: one user makes groups, allocates grouped slots and BINDs each
 *     one to an eventfd (the API says BIND is not for a grouped slot; a
 *     daemon that took it held one fd per slot past the user's quota, 19 680
 *     against 4 936), then allocates slots of their own until refused; the
 *     daemon's fds stay within the user's quota, and a new user's first
 *     acquire still gets a slot, not -EMFILE;
 *   four-users: four users each take clients until refused and hold them;
 *     a fifth user's first client still gets in (each used to hold a quarter
 *     of --max-clients, locking every new user out with -EUSERS);
 *   log-flood: four processes of one user churn connections, each sending
 *     20 refused ATTACHes, then a resuming ATTACH left without ADOPT; the
 *     lines naming the user stay at its 20 warnings and 20 other lines a
 *     second, and a line for each says how many were held back.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "attack-raw.h"
#include "attacks.h"
#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "fdpass.h"
#include "proto.h"

#define UID_NEWCOMER 60004
#define MIX_CLIENTS 24
#define SLOTS_PER_CLIENT 1024 /* the daemon's default */
#define GROUPS_PER_CLIENT 8   /* the daemon's default */

struct users_ctl {
	_Atomic int clients, groups, grouped, bind_refused, bind_other, own, first_err;
	_Atomic int holding, release, newcomer_rc, joined;
	_Atomic int hold[4], hold_err[4];
	_Atomic int rounds, refusals, resumes;
};

static cuflag_client *mix_c[MIX_CLIENTS];

/* A raw BIND of a grouped slot on the library's connection: its status. */
static int bind_raw(cuflag_client *c, uint32_t id)
{
	struct {
		struct cuflag_msg_hdr h;
		struct cuflag_msg_bind b;
	} m = { .b = { .id = id } };
	int efd = eventfd(0, EFD_CLOEXEC), st = 1;

	cuflag_hdr_init(&m.h, CUFLAG_MSG_BIND, sizeof(m), 0x7fff0001u, 0, 1);
	if (send_with_fds(cuflag_client_fd(c), &m, sizeof(m), &efd, 1) ||
	    recv_reply(cuflag_client_fd(c), &st, 5000) <= 0)
		st = 1;
	close(efd);
	return st;
}

static void mix_main(void *arg)
{
	struct users_ctl *uc = arg;
	cuflag_slot *s[64];
	int rc = 0;

	raise_nofile();
	for (int i = 0; i < MIX_CLIENTS; i++) {
		cuflag_group *g;
		if ((rc = cuflag_connect(attack_daemon.sock, &mix_c[i])))
			break;
		atomic_fetch_add(&uc->clients, 1);
		/* Every group it may make, each an fd of the daemon's. */
		for (int k = 0; k < GROUPS_PER_CLIENT; k++) {
			if ((rc = cuflag_group_create(mix_c[i], &g)))
				break;
			atomic_fetch_add(&uc->groups, 1);
		}
		if (rc)
			break;
		/* Grouped slots, each BOUND: refused, the client stays. */
		for (int k = 0; k < SLOTS_PER_CLIENT / 2 / 64; k++) {
			if ((rc = cuflag_group_slots_acquire(g, 64, s)))
				break;
			atomic_fetch_add(&uc->grouped, 64);
			for (int j = 0; j < 64; j++) {
				int st = bind_raw(mix_c[i], (uint32_t)cuflag_slot_id(s[j]));
				atomic_fetch_add(st == -EOPNOTSUPP ? &uc->bind_refused : &uc->bind_other, 1);
			}
		}
		if (rc)
			break;
	}
	/* Then slots of their own until the daemon says no. */
	for (int i = 0; !rc && i < atomic_load(&uc->clients); i++)
		for (int k = 0; k < SLOTS_PER_CLIENT / 2 / 64 && !rc; k++)
			if (!(rc = cuflag_slots_acquire(mix_c[i], 64, s)))
				atomic_fetch_add(&uc->own, 64);
	atomic_store(&uc->first_err, rc);
	attack_mark("%d clients, %d groups, %d grouped, %d own slots; then %d",
		    atomic_load(&uc->clients), atomic_load(&uc->groups), atomic_load(&uc->grouped),
		    atomic_load(&uc->own), rc);
	atomic_store(&uc->holding, 1);
	wait_flag(&uc->release, 1, 60000);
	for (int i = 0; i < atomic_load(&uc->clients); i++)
		cuflag_disconnect(mix_c[i]);
}

/* A user holding nothing: its first client and slot. */
static void newcomer_main(void *arg)
{
	struct users_ctl *uc = arg;
	cuflag_client *c;
	cuflag_slot *s;
	int rc = cuflag_connect(attack_daemon.sock, &c);

	if (!rc) {
		rc = cuflag_slot_acquire(c, &s);
		cuflag_disconnect(c);
	}
	atomic_store(&uc->newcomer_rc, rc);
}

static int newcomer(struct users_ctl *uc)
{
	atomic_store(&uc->newcomer_rc, 1);
	CHECK(child_wait(spawn_user(UID_NEWCOMER, 0, newcomer_main, uc), 10000) == 0);
	return atomic_load(&uc->newcomer_rc);
}

void attack_fd_mix(void)
{
	struct users_ctl *uc = shm_alloc(sizeof(*uc));
	struct window w;
	int fds, base, rc;
	pid_t pid;

	window_open(&w, "one user's fds through groups, BIND of grouped slots, ALLOC");
	base = daemon_fd_count(&attack_daemon);
	pid = spawn_user(UID_ATTACKER, 19, mix_main, uc);
	wait_flag(&uc->holding, 1, 60000);
	fds = daemon_fd_count(&attack_daemon) - base;
	rc = newcomer(uc);
	atomic_store(&uc->release, 1);
	if (child_wait(pid, 30000) != 0)
		fail("%s: the attacker did not finish", w.name);
	snprintf(w.outcome, sizeof(w.outcome),
		 "%d clients, %d groups, %d grouped slots: BIND refused %d (-EOPNOTSUPP), %d "
		 "otherwise; %d slots of their own, then %s; daemon fds +%d; a new user's first "
		 "acquire: %s",
		 atomic_load(&uc->clients), atomic_load(&uc->groups), atomic_load(&uc->grouped),
		 atomic_load(&uc->bind_refused), atomic_load(&uc->bind_other),
		 atomic_load(&uc->own), strerror(-atomic_load(&uc->first_err)), fds,
		 rc ? strerror(-rc) : "ok");
	if (atomic_load(&uc->bind_other) || !atomic_load(&uc->bind_refused))
		fail("%s: BIND of a grouped slot must be refused with -EOPNOTSUPP", w.name);
	if (atomic_load(&uc->first_err) != -EDQUOT)
		fail("%s: the user's last ALLOC got %d, not -EDQUOT", w.name,
		     atomic_load(&uc->first_err));
	/* Its fds: the quota (groups and slots), a connection and a wake
	 * eventfd a client, and a little for closes in flight. */
	if (fds > atomic_load(&uc->groups) + atomic_load(&uc->own) +
			  2 * atomic_load(&uc->clients) + 16)
		fail("%s: the daemon holds %d more fds than the user's groups and slots", w.name,
		     fds);
	if (rc)
		fail("%s: a new user's first acquire got %s", w.name, strerror(-rc));
	window_close(&w);
}

/* ---- four users hold their shares ---- */

static const uid_t holders[4] = { UID_ATTACKER, 60011, 60012, 60013 };

struct holder_arg {
	struct users_ctl *uc;
	int k;
};

static void holder_main(void *arg)
{
	static cuflag_client *c[256];
	struct holder_arg *h = arg;
	int n = 0, rc;

	while (n < 256 && (rc = cuflag_connect(attack_daemon.sock, &c[n])) == 0)
		n++;
	atomic_store(&h->uc->hold[h->k], n);
	atomic_store(&h->uc->hold_err[h->k], rc);
	atomic_fetch_add(&h->uc->joined, 1);
	wait_flag(&h->uc->release, 1, 60000);
	for (int i = 0; i < n; i++)
		cuflag_disconnect(c[i]);
}

void attack_four_users(void)
{
	struct users_ctl *uc = shm_alloc(sizeof(*uc));
	struct holder_arg *ha = shm_alloc(sizeof(*ha) * 4);
	struct window w;
	pid_t pid[4];
	int rc, total = 0;

	window_open(&w, "four users take clients until refused and hold them; a fifth connects");
	/* One after the other: each takes all it is given. */
	for (int k = 0; k < 4; k++) {
		ha[k] = (struct holder_arg){ uc, k };
		pid[k] = spawn_user(holders[k], 19, holder_main, &ha[k]);
		wait_flag(&uc->joined, k + 1, 20000);
		total += atomic_load(&uc->hold[k]);
	}
	rc = newcomer(uc);
	atomic_store(&uc->release, 1);
	for (int k = 0; k < 4; k++)
		if (child_wait(pid[k], 30000) != 0)
			fail("%s: holder %d did not finish", w.name, k);
	snprintf(w.outcome, sizeof(w.outcome),
		 "held %d, %d, %d, %d clients (%d of 256), each then %s; the fifth user's first "
		 "client: %s",
		 atomic_load(&uc->hold[0]), atomic_load(&uc->hold[1]), atomic_load(&uc->hold[2]),
		 atomic_load(&uc->hold[3]), total, strerror(-atomic_load(&uc->hold_err[3])),
		 rc ? strerror(-rc) : "ok");
	for (int k = 0; k < 4; k++)
		if (atomic_load(&uc->hold_err[k]) != -EUSERS)
			fail("%s: holder %d was stopped by %d, not -EUSERS", w.name, k,
			     atomic_load(&uc->hold_err[k]));
	if (rc)
		fail("%s: a fifth user holding nothing got %s", w.name, strerror(-rc));
	window_close(&w);
}

/* ---- log flood ---- */

/* 20 ATTACHes whose wake fd is a pipe (refused, the client stays) on one
 * connection; then, on it, a resuming ATTACH of a region of its own
 * ("resumed", "took over"), left without its ADOPT: it hangs up. */
static void churn_once(struct users_ctl *uc)
{
	struct {
		struct cuflag_msg_hdr h;
		struct cuflag_msg_attach b;
	} attach = { .b = { 0 } };
	struct raw_sess r;
	int p[2], st, fds[2];

	if (raw_open(&r))
		return;
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	fds[0] = fds[1] = p[0];
	cuflag_hdr_init(&attach.h, CUFLAG_MSG_ATTACH, sizeof(attach), 2, 0, 2);
	for (int i = 0; i < 20; i++) {
		if (send_with_fds(r.sock, &attach, sizeof(attach), fds, 2) ||
		    recv_reply(r.sock, &st, 5000) <= 0)
			break;
		atomic_fetch_add(&uc->refusals, st < 0);
	}
	close(p[0]);
	close(p[1]);
	st = raw_attach(&r, r.l.nslots, 1);
	atomic_fetch_add(st ? &uc->refusals : &uc->resumes, 1);
	raw_close(&r);
	atomic_fetch_add(&uc->rounds, 1);
}

static void flood_main(void *arg)
{
	struct users_ctl *uc = arg;
	uint64_t end = cuflag_now_ns() + 2 * SUSTAIN_MS * 1000000ull;

	while (cuflag_now_ns() < end)
		churn_once(uc);
}

void attack_log_flood(void)
{
	struct users_ctl *uc = shm_alloc(sizeof(*uc));
	struct window w;
	pid_t pid[4];
	uint64_t t0;
	int lines, others, warned, told_warn, told_other, limit;
	double s;

	window_open(&w, "4 processes of one user churn connections, 20 refused ATTACHes and a "
			"resume left without ADOPT each");
	t0 = cuflag_now_ns();
	for (int k = 0; k < 4; k++)
		pid[k] = spawn_user(UID_ATTACKER, 19, flood_main, uc);
	for (int k = 0; k < 4; k++)
		if (child_wait(pid[k], 30000) != 0)
			fail("%s: a flooding process did not finish", w.name);
	s = (double)(cuflag_now_ns() - t0) / 1e9;
	usleep(1300000); /* the line that says what was held back comes after its second */
	/* The two budgets apart: warnings (the refusals), and the rest
	 * ("resumed" and "took over" of the resumes). */
	lines = window_log_count(&w, "uid=60001:", NULL);
	others = window_log_count(&w, "uid=60001:", "<5>") + window_log_count(&w, "uid=60001:", "<6>");
	warned = lines - others;
	told_warn = window_log_count(&w, "lines suppressed for uid 60001 (warning", NULL);
	told_other = window_log_count(&w, "lines suppressed for uid 60001 (notice", NULL);
	/* 20 a second each, the seconds begun, and the one before. */
	limit = 20 * ((int)s + 2);
	snprintf(w.outcome, sizeof(w.outcome),
		 "%d connections, %d refusals, %d resumes without ADOPT in %.1f s; lines naming "
		 "the user: %d warnings, %d others; %d + %d say how many were held back",
		 atomic_load(&uc->rounds), atomic_load(&uc->refusals), atomic_load(&uc->resumes),
		 s, warned, others, told_warn, told_other);
	if (atomic_load(&uc->refusals) < 1000)
		fail("%s: only %d refusals: not a flood", w.name, atomic_load(&uc->refusals));
	/* Two lines each: more than twice what the other budget lets through. */
	if (2 * atomic_load(&uc->resumes) <= 2 * limit)
		fail("%s: only %d resumes: not a flood", w.name, atomic_load(&uc->resumes));
	if (warned > limit)
		fail("%s: %d warnings name the user in %.1f s (its limit: 20 a second)", w.name,
		     warned, s);
	if (others > limit)
		fail("%s: %d other lines name the user in %.1f s (its limit: 20 a second)", w.name,
		     others, s);
	if (!told_warn || !told_other)
		fail("%s: no line says how many of the user's %s lines were held back", w.name,
		     !told_warn ? "warning" : "other");
	window_close(&w);
}
