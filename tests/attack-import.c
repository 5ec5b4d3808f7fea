/* SPDX-License-Identifier: MIT */
/*
 * Completions across processes, as a hostile user would use them:
 *
 * - import-fanout: three users, each exporting 16 slots and importing every
 *   one of them as often as the daemon lets it (CUFLAG_IMPORTS_PER_SLOT of
 *   each, CUFLAG_IMPORTS_PER_USER in all), each import with an eventfd of
 *   its own, then completing its exported slots as fast as it can: every
 *   completion is a record and a doorbell per import. The doorbells go under
 *   each importer's user's share of the pass (daemon/scanner/import.c), so
 *   the victim must not wait behind them; the caps must hold (the next import
 *   refused with -EDQUOT); every import's count must come out exact, and
 *   none of these users, whose writes are cheap, may be dropped.
 * - import-watched: one user's 64 imports of one slot, all BOUND to one
 *   eventfd in 16 000 epolls, the slot completed again and again: each
 *   doorbell a write that costs milliseconds. The importer is a costly writer
 *   like any other: dropped, logged, and its user cooled down.
 * - resume-phantom: IMPORT RESUME from a session that never resumed (a
 *   daemon used to take it), and from one that claims to, its record of the
 *   slot scribbled 2^31 - 1 behind the exporter's value (a daemon used to
 *   write 2 147 483 647 phantom completions to its eventfd): refused, and owed
 *   nothing; what the exporter completes after counted exactly. Then an
 *   exporter frees a slot it exported, takes it again and REDECLAREs the
 *   old handle for it on the running daemon (a daemon used to take it, so
 *   that the old handle named the new slot): refused, and the old handle
 *   imports nothing.
 * - handle-memory: export a slot, map the handle, free the slot, again and
 *   again for 2.5 s (reconnecting when the daemon says no more), with the
 *   daemon's cgroup held to 256 MiB. The handles are the attacker's files
 *   (the exporter makes them, cuflag-proto.h), so the daemon's memory must
 *   not grow with them, and must be back once the attacker has left.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "attack-raw.h"
#include "attacks.h"
#include "cuflag-proto.h"
#include "cuflag/cuflag.h"

#define FAN_USERS 3
#define FAN_EXPORTS 16 /* 16 x 64 imports: the user's cap */
#define FAN_RUN_MS 2000
#define WATCH_IMPORTS 64
#define WATCH_EPOLLS 16000
#define WATCH_ROUNDS 4
#define WATCH_ROUND_MS 1500
#define HANDLE_RUN_MS 2500
#define HANDLE_LIMIT_MB 256
/* What the daemon's memory may grow by while the attacker holds its
 * handles: its own tables (a few hundred bytes a handle), not a page each. */
#define HANDLE_GROWTH_MAX_KB (32 * 1024)

static const uid_t fan_uids[FAN_USERS] = { UID_ATTACKER, 60021, 60022 };

struct fan_user {
	_Atomic int ready, done, err, err_step, imports, refused_cap, inexact, dropped;
	_Atomic long completions;
};

struct fan {
	_Atomic int go, stop;
	struct fan_user u[FAN_USERS];
};

struct fan_arg {
	struct fan *f;
	struct fan_user *u;
};

static void fan_failed(struct fan_user *u, int step, int rc)
{
	if (!atomic_load(&u->err)) {
		atomic_store(&u->err_step, step);
		atomic_store(&u->err, rc ? rc : -EPROTO);
	}
}

static int session_gone(cuflag_client *c)
{
	struct pollfd p = { .fd = cuflag_client_fd(c), .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* Every import of exported slot k came out at its exporter's value, its
 * count the exporter's completions since the import: the inexact ones. */
static int fan_check(cuflag_slot **imp, int nimp, const uint32_t *final, const uint32_t *start,
		     const int *of)
{
	int bad = 0;

	for (int i = 0; i < nimp; i++) {
		int k = of[i];
		uint64_t n = 0, got = 0;
		if (cuflag_slot_wait(imp[i], final[k], 2000)) {
			bad++;
			continue;
		}
		while (cuflag_slot_consume(imp[i], &n) == 0)
			got += n;
		bad += got != (uint64_t)(final[k] - start[i]);
	}
	return bad;
}

#define FAN_CONNS 6 /* importer sessions: a user's fd quota of imports fits */
#define FAN_IMPORTS_MAX 6000

/* Import handle fd as often as the daemon lets it, into ci[*k] and the
 * sessions after it as each fills up; the refusal that ended it. */
static int import_all(cuflag_client **ci, int *k, int fd, cuflag_slot **imp, int *n)
{
	int rc;

	for (;;) {
		if (*n >= FAN_IMPORTS_MAX)
			return 0;
		rc = cuflag_slot_import(ci[*k], fd, &imp[*n]);
		if (rc == -ENOSPC && *k + 1 < FAN_CONNS) {
			++*k; /* slots-per-client reached: the next session */
			continue;
		}
		if (rc)
			return rc;
		++*n;
	}
}

static void fan_main(void *arg)
{
	struct fan_arg *a = arg;
	struct fan_user *u = a->u;
	static cuflag_slot *ex[FAN_EXPORTS], *imp[FAN_IMPORTS_MAX];
	static uint32_t start[FAN_IMPORTS_MAX], final[FAN_EXPORTS];
	static int of[FAN_IMPORTS_MAX];
	cuflag_client *ce, *ci[FAN_CONNS];
	int fds[FAN_EXPORTS], n = 0, rc, k = 0, last = 0;

	if ((rc = cuflag_connect(attack_daemon.sock, &ce))) {
		fan_failed(u, 1, rc);
		atomic_store(&u->ready, 1);
		return;
	}
	for (int i = 0; i < FAN_CONNS; i++)
		if ((rc = cuflag_connect(attack_daemon.sock, &ci[i])))
			fan_failed(u, 1, rc);
	if (!rc && (rc = cuflag_slots_acquire(ce, FAN_EXPORTS, ex)))
		fan_failed(u, 2, rc);
	for (int e = 0; !rc && e < FAN_EXPORTS; e++)
		if ((rc = cuflag_slot_export(ex[e], &fds[e])))
			fan_failed(u, 3, rc);
	/* Each exported slot imported until refused; the next slot after the
	 * per-slot cap, none after the user's. */
	for (int e = 0; !rc && e < FAN_EXPORTS; e++) {
		int n0 = n;
		last = import_all(ci, &k, fds[e], imp, &n);
		for (int i = n0; i < n; i++) {
			of[i] = e;
			start[i] = *cuflag_slot_flag(imp[i]);
		}
		if (n == n0 || last != -EDQUOT)
			break;
	}
	atomic_store(&u->imports, n);
	atomic_store(&u->refused_cap, last == -EDQUOT && n == (int)CUFLAG_IMPORTS_PER_USER);
	atomic_store(&u->ready, 1);
	wait_flag(&a->f->go, 1, 60000);
	while (!rc && !atomic_load(&a->f->stop)) {
		for (int e = 0; e < FAN_EXPORTS; e++) {
			uint32_t t;
			if ((rc = cuflag_slot_arm(ex[e], &t))) {
				fan_failed(u, 5, rc);
				break;
			}
			sim_store(cuflag_slot_flag(ex[e]), t);
			final[e] = t;
		}
		atomic_fetch_add(&u->completions, FAN_EXPORTS);
	}
	for (int i = 0; i < FAN_CONNS; i++)
		atomic_fetch_or(&u->dropped, session_gone(ci[i]));
	atomic_fetch_or(&u->dropped, session_gone(ce));
	if (!rc)
		atomic_store(&u->inexact, fan_check(imp, n, final, start, of));
	for (int e = 0; e < FAN_EXPORTS; e++)
		close(fds[e]);
	for (int i = 0; i < FAN_CONNS; i++)
		cuflag_disconnect(ci[i]);
	cuflag_disconnect(ce);
	atomic_store(&u->done, 1);
}

void attack_import_fanout(void)
{
	struct fan *f = shm_alloc(sizeof(*f));
	struct fan_arg *a = shm_alloc(sizeof(*a) * FAN_USERS);
	pid_t pid[FAN_USERS];
	struct window w;
	long done = 0;
	int imports = 0, inexact = 0, capped = 0, dropped = 0;

	for (int k = 0; k < FAN_USERS; k++) {
		a[k] = (struct fan_arg){ f, &f->u[k] };
		pid[k] = spawn_user(fan_uids[k], 19, fan_main, &a[k]);
	}
	for (int k = 0; k < FAN_USERS; k++)
		wait_flag(&f->u[k].ready, 1, 60000);
	window_open(&w, "3 users importing their exported slots all they may, completed flat out");
	atomic_store(&f->go, 1);
	usleep(FAN_RUN_MS * 1000);
	atomic_store(&f->stop, 1);
	for (int k = 0; k < FAN_USERS; k++) {
		struct fan_user *u = &f->u[k];
		if (child_wait(pid[k], 30000) != 0 || !atomic_load(&u->done))
			fail("%s: user %d did not get to its end", w.name, k);
		if (atomic_load(&u->err))
			fail("%s: user %d's step %d failed: %s", w.name, k, atomic_load(&u->err_step),
			     strerror(-atomic_load(&u->err)));
		imports += atomic_load(&u->imports);
		inexact += atomic_load(&u->inexact);
		capped += atomic_load(&u->refused_cap);
		dropped += atomic_load(&u->dropped);
		done += atomic_load(&u->completions);
	}
	snprintf(w.outcome, sizeof(w.outcome),
		 "%d imports, %ld exporter completions; caps held for %d of %d users; inexact "
		 "%d; dropped %d",
		 imports, done, capped, FAN_USERS, inexact, dropped);
	if (imports != FAN_USERS * (int)CUFLAG_IMPORTS_PER_USER)
		fail("%s: %d imports made, %u wanted", w.name, imports,
		     FAN_USERS * CUFLAG_IMPORTS_PER_USER);
	if (capped != FAN_USERS)
		fail("%s: imports beyond the caps were not refused with -EDQUOT", w.name);
	if (inexact)
		fail("%s: %d imports not counted exactly", w.name, inexact);
	if (dropped)
		fail("%s: %d honest importers dropped", w.name, dropped);
	window_close(&w);
}

/* ---- import-watched ---- */

struct watched {
	struct rounds r;
	int efd;
	_Atomic long watchers;
	_Atomic int imports;
};

static int watch_eps[WATCH_EPOLLS], nwatch;

/* The imports: on a session spoken on the wire, so that each can be BOUND
 * to the watched eventfd (the library binds no import). */
static int watched_imports(struct raw_sess *r, int handle, int efd)
{
	int n = 0, rc;

	if ((rc = raw_open(r)) || (rc = raw_attach(r, 0, 0)))
		return rc;
	for (; n < WATCH_IMPORTS; n++) {
		struct cuflag_msg_import im = { 0 };
		struct cuflag_slot_grant g;
		struct cuflag_msg_bind b;
		if ((rc = raw_call(r, CUFLAG_MSG_IMPORT, &im, sizeof(im), &handle, 1, &g, sizeof(g))))
			break;
		b = (struct cuflag_msg_bind){ .id = g.id };
		if ((rc = raw_call(r, CUFLAG_MSG_BIND, &b, sizeof(b), &efd, 1, NULL, 0)))
			break;
	}
	if (rc)
		attack_mark("import %d: %s", n, strerror(-rc));
	return n;
}

static int watched_round(void *arg)
{
	struct watched *wt = arg;
	struct raw_sess r;
	cuflag_slot *ex;
	cuflag_client *c;
	int fd, n, rc, dropped = 0;
	uint64_t end;

	if ((rc = cuflag_connect(attack_daemon.sock, &c)))
		return rc;
	CHECK_RC(cuflag_client_set_resume_timeout(c, 0));
	if ((rc = cuflag_slot_acquire(c, &ex)) || (rc = cuflag_slot_export(ex, &fd))) {
		cuflag_disconnect(c);
		return rc;
	}
	n = watched_imports(&r, fd, wt->efd);
	close(fd);
	atomic_store(&wt->imports, n);
	attack_mark("%d imports bound to the watched eventfd: completing", n);
	end = cuflag_now_ns() + WATCH_ROUND_MS * 1000000ull;
	while (!dropped && cuflag_now_ns() < end) {
		uint32_t t;
		if (cuflag_slot_arm(ex, &t))
			break;
		sim_store(cuflag_slot_flag(ex), t);
		usleep(200);
		dropped = hung_up(r.sock, 0);
	}
	attack_mark(dropped ? "dropped" : "round over, not dropped");
	if (dropped)
		atomic_fetch_add(&wt->r.dropped, 1);
	raw_close(&r);
	cuflag_disconnect(c);
	return n ? 0 : -EPROTO;
}

static void watched_main(void *arg)
{
	struct watched *wt = arg;
	struct epoll_event ev = { .events = EPOLLIN };

	wt->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK(wt->efd >= 0);
	for (nwatch = 0; nwatch < WATCH_EPOLLS; nwatch++) {
		int ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, wt->efd, &ev) < 0) {
			if (ep >= 0)
				close(ep);
			break;
		}
		watch_eps[nwatch] = ep;
	}
	atomic_store(&wt->watchers, nwatch);
	attack_mark("%d epolls watch the eventfd", nwatch);
	rounds_run(&wt->r, WATCH_ROUNDS, watched_round, wt);
	for (int i = 0; i < nwatch; i++)
		close(watch_eps[i]);
	close(wt->efd);
}

void attack_import_watched(void)
{
	struct watched *wt = shm_alloc(sizeof(*wt));
	struct window w;

	window_open(&w, "64 imports of one slot BOUND to one eventfd in 16 000 epolls");
	attacker_run(w.name, 19, watched_main, wt, 30000);
	snprintf(w.outcome, sizeof(w.outcome), "%d imports, %ld watchers; ",
		 atomic_load(&wt->imports), atomic_load(&wt->watchers));
	expect_dropped_and_cooled(&w, &wt->r);
	window_close(&w);
}

/* ---- handle-memory ---- */

struct handles {
	_Atomic int made, sessions, refused, err, err_step, holding, release;
	_Atomic long peak_kb;
};

static void handles_main(void *arg)
{
	struct handles *h = arg;
	uint64_t end = cuflag_now_ns() + HANDLE_RUN_MS * 1000000ull;
	cuflag_client *c = NULL;

	while (cuflag_now_ns() < end && !atomic_load(&h->err)) {
		cuflag_slot *s;
		void *map;
		int fd, rc;

		if (!c) {
			if ((rc = cuflag_connect(attack_daemon.sock, &c))) {
				if (rc == -EBUSY || rc == -EUSERS) {
					usleep(5000);
					continue;
				}
				atomic_store(&h->err_step, 1);
				atomic_store(&h->err, rc);
				break;
			}
			atomic_fetch_add(&h->sessions, 1);
		}
		if ((rc = cuflag_slot_acquire(c, &s))) {
			atomic_fetch_add(&h->refused, 1);
			cuflag_disconnect(c);
			c = NULL;
			continue;
		}
		rc = cuflag_slot_export(s, &fd);
		cuflag_slot_release(s);
		if (rc) {
			/* The session's handles are at its user's quota: anew. */
			atomic_fetch_add(&h->refused, 1);
			cuflag_disconnect(c);
			c = NULL;
			continue;
		}
		/* Mapped and kept: the file lives on with its page. */
		map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (map == MAP_FAILED || *(volatile char *)map != 'F') {
			atomic_store(&h->err_step, 2);
			atomic_store(&h->err, map == MAP_FAILED ? -errno : -EPROTO);
			break;
		}
		atomic_fetch_add(&h->made, 1);
	}
	if (c)
		cuflag_disconnect(c);
	atomic_store(&h->holding, 1);
	wait_flag(&h->release, 1, 60000);
	/* Leaving unmaps every handle. */
}

void attack_handle_memory(void)
{
	struct handles *h = shm_alloc(sizeof(*h));
	struct daemon_mem m0, m;
	struct window w;
	long peak = 0;
	int limited;
	pid_t pid;

	daemon_mem(&m0);
	limited = daemon_mem_limit(HANDLE_LIMIT_MB) == 0;
	window_open(&w, "export, map the handle, free the slot, again for 2.5 s; daemon at 256 MiB");
	pid = spawn_user(UID_ATTACKER, 19, handles_main, h);
	while (!atomic_load(&h->holding) && daemon_running()) {
		daemon_mem(&m);
		if (m.cg_kb > peak)
			peak = m.cg_kb;
		usleep(50000);
	}
	wait_flag(&h->holding, 1, 30000);
	daemon_mem(&m);
	if (m.cg_kb > peak)
		peak = m.cg_kb;
	snprintf(w.outcome, sizeof(w.outcome),
		 "%d handles mapped and kept over %d sessions (%d refusals); daemon cgroup %ld -> "
		 "peak %ld kB while they are held%s",
		 atomic_load(&h->made), atomic_load(&h->sessions), atomic_load(&h->refused),
		 m0.cg_kb, peak, limited ? "" : " (no cgroup limit could be set)");
	if (!daemon_running())
		fail("%s: the daemon died", w.name);
	if (atomic_load(&h->err))
		fail("%s: the attacker's step %d failed: %s", w.name, atomic_load(&h->err_step),
		     strerror(-atomic_load(&h->err)));
	if (atomic_load(&h->made) < 5000)
		fail("%s: only %d handles made", w.name, atomic_load(&h->made));
	if (m0.cg_kb >= 0 && peak - m0.cg_kb > HANDLE_GROWTH_MAX_KB)
		fail("%s: the daemon's cgroup grew by %ld kB with the attacker's handles", w.name,
		     peak - m0.cg_kb);
	atomic_store(&h->release, 1);
	if (child_wait(pid, 10000) != 0)
		fail("%s: the attacker did not finish", w.name);
	/* Measured once the attacker has left: memory back, fds back. */
	window_close(&w);
	(void)daemon_mem_limit(-1);
}

/* ---- resume-phantom ---- */

#define PHANTOM_SLOT 5
#define PHANTOM_DONE 100 /* completions of the exporter's before the resume */
#define PHANTOM_AFTER 10 /* and after: the importer must count exactly these */

struct phantom {
	_Atomic int err, err_step, fresh_refused, resumed, exact;
	_Atomic int redeclare_rc, reimport_rc, same_id;
	_Atomic long long phantom, counted;
};

static int complete_n(cuflag_slot *s, int n, uint32_t *last)
{
	int rc = 0;

	for (int i = 0; i < n && !rc; i++)
		if (!(rc = cuflag_slot_arm(s, last)))
			sim_store(cuflag_slot_flag(s), *last);
	return rc ? rc : cuflag_slot_wait(s, *last, 2000);
}

/* IMPORT RESUME of handle into slot PHANTOM_SLOT of r, with eventfd efd. */
static int import_resume_raw(struct raw_sess *r, int handle, int efd)
{
	struct cuflag_msg_import im = { .flags = CUFLAG_IMPORT_RESUME, .id = PHANTOM_SLOT };
	struct cuflag_slot_grant g;

	return raw_call(r, CUFLAG_MSG_IMPORT, &im, sizeof(im), (int[]){ handle, efd }, 2, &g,
			sizeof(g));
}

/* An exporter's old handle pointed at its new slot of a running daemon:
 * export a grouped slot of r, free it, take the slot again, REDECLARE the
 * old handle for it. */
static void redeclare_old(struct phantom *ph, struct raw_sess *r)
{
	struct cuflag_slot_grant g, g2;
	struct cuflag_handle_record rec;
	struct cuflag_msg_export ex;
	struct cuflag_msg_import im = { 0 };
	int rc, h = -1;

	if ((rc = raw_open(r)) || (rc = raw_attach(r, 0, 0)) || (rc = raw_group(r, 0)) ||
	    (rc = raw_alloc_grouped(r, 0, 1, &g))) {
		atomic_store(&ph->err_step, 4);
		atomic_store(&ph->err, rc);
		return;
	}
	ex = (struct cuflag_msg_export){ .id = g.id };
	memset(&rec, 0, sizeof(rec));
	if ((rc = raw_call(r, CUFLAG_MSG_EXPORT, &ex, sizeof(ex), NULL, 0, &rec, sizeof(rec))) ||
	    rec.magic != CUFLAG_HANDLE_MAGIC ||
	    (h = memfd_create("old-handle", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0 ||
	    pwrite(h, &rec, sizeof(rec), 0) != (ssize_t)sizeof(rec) ||
	    fcntl(h, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		atomic_store(&ph->err_step, 5);
		atomic_store(&ph->err, rc ? rc : -EPROTO);
		if (h >= 0)
			close(h);
		return;
	}
	ex.flags = CUFLAG_EXPORT_DECLARE;
	if ((rc = raw_call(r, CUFLAG_MSG_EXPORT, &ex, sizeof(ex), &h, 1, NULL, 0)) ||
	    (rc = raw_free(r, &g.id, 1))) {
		atomic_store(&ph->err_step, 6);
		atomic_store(&ph->err, rc);
		close(h);
		return;
	}
	/* Slots until the freed one comes back (once the scanner let it go). */
	for (uint32_t i = 0; i < 4 * r->l.nslots; i++) {
		rc = raw_alloc_grouped(r, 0, 1, &g2);
		if (rc == -ENOSPC) {
			usleep(2000);
			continue;
		}
		if (rc || g2.id == g.id)
			break;
	}
	atomic_store(&ph->same_id, !rc && g2.id == g.id);
	ex = (struct cuflag_msg_export){ .id = g2.id, .flags = CUFLAG_EXPORT_REDECLARE };
	atomic_store(&ph->redeclare_rc, raw_call(r, CUFLAG_MSG_EXPORT, &ex, sizeof(ex), &h, 1, NULL,
						 0));
	atomic_store(&ph->reimport_rc, raw_call(r, CUFLAG_MSG_IMPORT, &im, sizeof(im), &h, 1, NULL,
						0));
	close(h);
}

static void phantom_main(void *arg)
{
	struct phantom *ph = arg;
	struct raw_sess fresh, res;
	cuflag_client *c;
	cuflag_slot *ex;
	uint32_t last = 0;
	uint64_t n = 0;
	int fd, efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), rc;

	if ((rc = cuflag_connect(attack_daemon.sock, &c)) || (rc = cuflag_slot_acquire(c, &ex)) ||
	    (rc = cuflag_slot_export(ex, &fd)) || (rc = complete_n(ex, PHANTOM_DONE, &last))) {
		atomic_store(&ph->err_step, 1);
		atomic_store(&ph->err, rc);
		return;
	}
	/* A session that never resumed may not IMPORT RESUME. */
	if (!(rc = raw_open(&fresh)) && !(rc = raw_attach(&fresh, 0, 0)))
		atomic_store(&ph->fresh_refused, import_resume_raw(&fresh, fd, efd) == -EINVAL);
	raw_close(&fresh);
	/* One that claims to resume, its record of the slot scribbled 2^31 - 1
	 * behind the exporter's value: owed nothing. */
	if ((rc = raw_open(&res))) {
		atomic_store(&ph->err_step, 2);
		atomic_store(&ph->err, rc);
		return;
	}
	res.states[PHANTOM_SLOT].signalled = last - 0x7fffffffu;
	res.states[PHANTOM_SLOT].armed = CUFLAG_IMPORT_LINKED;
	if ((rc = raw_attach(&res, 0, 0x5eed)) || (rc = import_resume_raw(&res, fd, efd))) {
		atomic_store(&ph->err_step, 3);
		atomic_store(&ph->err, rc);
	} else {
		atomic_store(&ph->resumed, 1);
		usleep(100000);
		if (read(efd, &n, sizeof(n)) == sizeof(n))
			atomic_store(&ph->phantom, (long long)n);
		if ((rc = complete_n(ex, PHANTOM_AFTER, &last)) == 0) {
			for (int i = 0; i < 200 && res.states[PHANTOM_SLOT].signalled != last; i++)
				usleep(5000);
			n = 0;
			(void)!read(efd, &n, sizeof(n));
			atomic_store(&ph->counted, (long long)n);
			atomic_store(&ph->exact, res.states[PHANTOM_SLOT].signalled == last);
		}
	}
	raw_close(&res);
	redeclare_old(ph, &res);
	raw_close(&res);
	close(efd);
	close(fd);
	cuflag_disconnect(c);
}

void attack_resume_phantom(void)
{
	struct phantom *ph = shm_alloc(sizeof(*ph));
	struct window w;

	window_open(&w, "IMPORT RESUME outside a resume, its record 2^31 - 1 behind; old REDECLARE");
	attacker_run(w.name, 19, phantom_main, ph, 30000);
	snprintf(w.outcome, sizeof(w.outcome),
		 "outside a resume: %s; claiming one, record scribbled: %s, phantom completions "
		 "%lld, then %lld counted of %d, record %s; an old handle REDECLAREd for the "
		 "slot taken again%s: %s, imported: %s",
		 atomic_load(&ph->fresh_refused) ? "refused" : "taken",
		 atomic_load(&ph->resumed) ? "taken" : "refused", atomic_load(&ph->phantom),
		 atomic_load(&ph->counted), PHANTOM_AFTER,
		 atomic_load(&ph->exact) ? "exact" : "wrong",
		 atomic_load(&ph->same_id) ? " (same id)" : " (another id)",
		 strerror(-atomic_load(&ph->redeclare_rc)), strerror(-atomic_load(&ph->reimport_rc)));
	if (atomic_load(&ph->err))
		fail("%s: the attacker's step %d failed: %s", w.name, atomic_load(&ph->err_step),
		     strerror(-atomic_load(&ph->err)));
	if (!atomic_load(&ph->fresh_refused))
		fail("%s: IMPORT RESUME taken in a session that never resumed", w.name);
	if (atomic_load(&ph->phantom))
		fail("%s: %lld phantom completions", w.name, atomic_load(&ph->phantom));
	if (!atomic_load(&ph->same_id))
		fail("%s: the freed slot was never handed out again", w.name);
	if (atomic_load(&ph->redeclare_rc) != -EINVAL || atomic_load(&ph->reimport_rc) != -EINVAL)
		fail("%s: an old handle was taken again on a running daemon", w.name);
	if (atomic_load(&ph->counted) != PHANTOM_AFTER || !atomic_load(&ph->exact))
		fail("%s: %lld counted of %d after the resume", w.name, atomic_load(&ph->counted),
		     PHANTOM_AFTER);
	window_close(&w);
}
