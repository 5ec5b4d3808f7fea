/* SPDX-License-Identifier: MIT */
/*
 * The pending limit on every way into the pending set. One user fills all
 * its sessions (64 of 1024 grouped slots: four times --max-pending-per-uid)
 * with slots whose arms are in flight and whose flags never land, then holds
 * them while the victim completes one slot at a time:
 *
 * - arms: every slot armed through the queue (arm-flood);
 * - ADOPT: resuming ATTACHes whose region says every slot is armed far
 *   ahead, every slot adopted (adopt-flood); one session first hangs up
 *   half adopted, its slots waiting for room; and the same with every
 *   group's eventfd in 300 epolls of the attacker's (adopt-flood-watched),
 *   so that each ring of a group costs the pass a wake-up per watcher;
 * - FREE: every slot armed and completed, its flag wound back, then freed,
 *   so that it retires only once the flag comes back (free-rewind).
 *
 * The user's pending count (METRICS, what cuflagctl shows) must never pass
 * the limit, and once the flags land every completion must be counted
 * exactly: each slot's state at its target and one record in its group's
 * ring. The scanner's CPU while the slots are held is shown: each pass looks
 * at the user's share, no more (test-pending checks that it does not spin on
 * arms it cannot take). The attacker harms only itself, so it need not be
 * dropped; with watchers its group rings may cost enough for the write
 * budget to drop its sessions, whose completions are then not counted (the
 * live ones' still are).
 */
#include <poll.h>
#include <sys/epoll.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "attack-raw.h"
#include "attacks.h"

#define SESSIONS 64
#define AHEAD 1000u
#define LIMIT 16384u
#define WATCHERS 300 /* adopt-flood-watched: epolls watching every group */

enum mode { ARMS, ADOPT, FREE };

struct pctl {
	enum mode mode;
	int watchers; /* epolls each watching every group's eventfd */
	_Atomic int watches, dropped;
	_Atomic int holding, release, done, sessions, slots, users_refused;
	_Atomic int err, err_step, inexact, queued;
	_Atomic int reclaimed; /* FREE: slots allocated again once retired */
	_Atomic int rehung;    /* FREE: sessions hung up with slots retiring */
};

struct sess {
	struct raw_sess r;
	uint32_t target[1024];
	uint8_t grp[1024]; /* each slot's group */
	uint32_t ring0[RAW_GROUPS_MAX]; /* ring tails before the completions checked */
};

static struct sess sess[SESSIONS];

static void failed(struct pctl *pc, int step, int rc)
{
	if (!atomic_load(&pc->err)) {
		atomic_store(&pc->err_step, step);
		atomic_store(&pc->err, rc ? rc : -EPROTO);
	}
}

static uint32_t per_group(const struct sess *s)
{
	return s->r.l.nslots / s->r.l.ngroups;
}

/* per slots in each group (ids as ALLOC hands them out). */
static int alloc_all(struct pctl *pc, struct sess *s)
{
	uint32_t per = per_group(s);

	for (uint32_t g = 0; g < s->r.l.ngroups; g++)
		for (uint32_t k = 0; k < per; k += CUFLAG_BATCH_MAX) {
			struct cuflag_slot_grant gr[CUFLAG_BATCH_MAX];
			uint32_t n = per - k < CUFLAG_BATCH_MAX ? per - k : CUFLAG_BATCH_MAX;
			int rc = raw_alloc_grouped(&s->r, g, n, gr);
			if (rc) {
				failed(pc, 3, rc);
				return rc;
			}
			for (uint32_t i = 0; i < n; i++) {
				if (gr[i].id >= s->r.l.nslots) {
					failed(pc, 4, -EPROTO);
					return -EPROTO;
				}
				s->target[gr[i].id] = gr[i].start;
				s->grp[gr[i].id] = (uint8_t)g;
			}
		}
	return 0;
}

static void arm_all(struct sess *s, uint32_t ahead)
{
	for (uint32_t i = 0; i < s->r.l.nslots; i++) {
		s->target[i] += ahead;
		raw_arm(&s->r, i, s->target[i]);
	}
	raw_kick(&s->r);
}

static void land_all(struct sess *s)
{
	for (uint32_t i = 0; i < s->r.l.nslots; i++)
		sim_store(&s->r.flags[i], s->target[i]);
	raw_kick(&s->r);
}

static void note_rings(struct sess *s)
{
	for (uint32_t g = 0; g < s->r.l.ngroups; g++)
		s->ring0[g] = raw_ring(&s->r, g)->tail;
}

/* Whether the daemon has hung up on the session (dropped it). */
static int gone(const struct sess *s)
{
	struct pollfd p = { .fd = s->r.sock, .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* Every slot of a session the daemon still serves signalled to its target. */
static int all_signalled(void *arg)
{
	struct pctl *pc = arg;

	for (int k = 0; k < atomic_load(&pc->sessions); k++)
		for (uint32_t i = 0; sess[k].r.map && !gone(&sess[k]) && i < sess[k].r.l.nslots;
		     i++)
			if (sess[k].r.states[i].signalled != sess[k].target[i])
				return 0;
	return 1;
}

/* Every slot signalled up to its target, each once in its group's ring
 * since note_rings(); the inexact ones counted. */
static int count_inexact(struct sess *s)
{
	uint32_t per = per_group(s);
	int bad = 0;

	for (uint32_t i = 0; i < s->r.l.nslots; i++)
		bad += s->r.states[i].signalled != s->target[i];
	for (uint32_t g = 0; g < s->r.l.ngroups; g++) {
		volatile struct cuflag_group_ring *ring = raw_ring(&s->r, g);
		uint8_t seen[1024] = { 0 };
		uint32_t tail = ring->tail;
		if (tail - s->ring0[g] != per || ring->overflows) {
			bad++;
			continue;
		}
		for (uint32_t t = s->ring0[g]; t != tail; t++) {
			uint32_t id = ring->slot[t & (s->r.l.ring_cap - 1)];
			if (id >= s->r.l.nslots || s->grp[id] != g || seen[id]++)
				bad++;
		}
	}
	return bad;
}

/* A session of the mode's, its slots in flight (ADOPT: the first adopt_n
 * only, when not 0). 0, -EUSERS when the user may hold no more, or another
 * error. */
static int session_make(struct pctl *pc, struct sess *s, uint32_t adopt_n)
{
	int rc = raw_open(&s->r);

	if (rc)
		return rc;
	if (pc->mode == ADOPT)
		for (uint32_t i = 0; i < s->r.l.nslots; i++) {
			s->r.states[i].signalled = 0;
			s->r.states[i].armed = AHEAD;
			s->target[i] = AHEAD;
			s->grp[i] = (uint8_t)(i / per_group(s));
		}
	rc = raw_attach(&s->r, pc->mode == ADOPT ? s->r.l.nslots : 0, pc->mode == ADOPT);
	for (uint32_t g = 0; !rc && g < s->r.l.ngroups && g < RAW_GROUPS_MAX; g++)
		rc = raw_group(&s->r, g);
	if (rc) {
		raw_close(&s->r);
		return rc;
	}
	if (pc->mode == ADOPT) {
		uint32_t per = per_group(s), ids[CUFLAG_BATCH_MAX];
		for (uint32_t g = 0; g < s->r.l.ngroups && !rc; g++)
			for (uint32_t k = 0; k < per && !rc; k += CUFLAG_BATCH_MAX) {
				uint32_t n = per - k < CUFLAG_BATCH_MAX ? per - k : CUFLAG_BATCH_MAX;
				for (uint32_t i = 0; i < n; i++)
					ids[i] = g * per + k + i;
				if (adopt_n && g * per + k >= adopt_n)
					return 0;
				rc = raw_adopt_grouped(&s->r, g, ids, n);
			}
		if (rc)
			failed(pc, 2, rc);
		return rc;
	}
	if ((rc = alloc_all(pc, s)))
		return rc;
	note_rings(s);
	arm_all(s, pc->mode == FREE ? 1 : AHEAD);
	if (pc->mode == FREE)
		land_all(s); /* completed at once: then wound back and freed */
	return 0;
}

/* FREE: the flags back behind their targets, every slot freed. */
static void rewind_and_free(struct pctl *pc)
{
	for (int k = 0; k < atomic_load(&pc->sessions); k++) {
		struct sess *s = &sess[k];
		uint32_t ids[CUFLAG_BATCH_MAX];
		atomic_fetch_add(&pc->inexact, count_inexact(s));
		for (uint32_t i = 0; i < s->r.l.nslots; i++)
			sim_store(&s->r.flags[i], s->target[i] - 1);
		for (uint32_t i = 0; i < s->r.l.nslots; i += CUFLAG_BATCH_MAX) {
			uint32_t n = s->r.l.nslots - i < CUFLAG_BATCH_MAX ? s->r.l.nslots - i
									 : CUFLAG_BATCH_MAX;
			int rc;
			for (uint32_t j = 0; j < n; j++)
				ids[j] = i + j;
			if ((rc = raw_free(&s->r, ids, n))) {
				failed(pc, 6, rc);
				return;
			}
		}
	}
}

/* FREE, once released: half the sessions hang up with their freed slots
 * still retiring; the others' flags land, so their slots retire, and they
 * allocate them all again and complete each once more. */
static void free_release(struct pctl *pc)
{
	int n = atomic_load(&pc->sessions);

	for (int k = 1; k < n; k += 2) {
		raw_close(&sess[k].r);
		atomic_fetch_add(&pc->rehung, 1);
	}
	for (int k = 0; k < n; k += 2)
		land_all(&sess[k]);
	for (int k = 0; k < n; k += 2) {
		/* An ALLOC waits (parked) while freed slots are still retiring. */
		if (alloc_all(pc, &sess[k]))
			return;
		atomic_fetch_add(&pc->reclaimed, (int)sess[k].r.l.nslots);
		note_rings(&sess[k]);
		arm_all(&sess[k], 1);
		land_all(&sess[k]);
	}
}

/* Every group's eventfd of the n sessions in pc->watchers epolls (kept
 * open in eps). */
static void watch_groups(struct pctl *pc, int n, int *eps)
{
	for (int e = 0; e < pc->watchers; e++) {
		if ((eps[e] = epoll_create1(EPOLL_CLOEXEC)) < 0) {
			failed(pc, 8, -errno);
			return;
		}
		for (int k = 0; k < n; k++)
			for (uint32_t g = 0; g < sess[k].r.l.ngroups && g < RAW_GROUPS_MAX; g++) {
				struct epoll_event ev = { .events = EPOLLIN };
				if (epoll_ctl(eps[e], EPOLL_CTL_ADD, sess[k].r.group_efd[g], &ev)) {
					failed(pc, 8, -errno);
					return;
				}
				atomic_fetch_add(&pc->watches, 1);
			}
	}
}

static void attacker_main(void *arg)
{
	struct pctl *pc = arg;
	int n = 0, rc = 0, queued = 0, eps[WATCHERS];

	raise_nofile();
	for (; n < SESSIONS; n++) {
		/* ADOPT: the last one first hangs up half adopted, its share
		 * full (the slots it adopted wait); a new one takes its place
		 * once that one is gone (it counts against the user until then). */
		if (pc->mode == ADOPT && n == SESSIONS - 1) {
			if (!(rc = session_make(pc, &sess[n], 512)))
				raw_close(&sess[n].r);
			atomic_store(&pc->rehung, 1);
			for (int t = 0; t < 300 && (!t ? !rc : rc == -EUSERS); t++) {
				if (t)
					usleep(10000);
				rc = session_make(pc, &sess[n], 0);
			}
		} else {
			rc = session_make(pc, &sess[n], 0);
		}
		if (rc == -EUSERS) {
			atomic_fetch_add(&pc->users_refused, 1);
			break;
		}
		if (rc) {
			failed(pc, 1, rc);
			break;
		}
		atomic_store(&pc->sessions, n + 1);
		atomic_fetch_add(&pc->slots, (int)sess[n].r.l.nslots);
	}
	if (pc->mode == FREE && !atomic_load(&pc->err)) {
		if (!wait_until(all_signalled, pc, 20000))
			failed(pc, 5, -ETIMEDOUT);
		else
			rewind_and_free(pc);
	}
	for (int e = 0; e < WATCHERS; e++)
		eps[e] = -1;
	if (pc->watchers && !atomic_load(&pc->err))
		watch_groups(pc, atomic_load(&pc->sessions), eps);
	for (int k = 0; k < n; k++)
		queued += (int)raw_queued(&sess[k].r);
	atomic_store(&pc->queued, queued);
	attack_mark("%d sessions, %d slots in flight, %d arms queued", n,
		    atomic_load(&pc->slots), queued);
	atomic_store(&pc->holding, 1);
	wait_flag(&pc->release, 1, 60000);

	if (!atomic_load(&pc->err)) {
		if (pc->mode == FREE) {
			free_release(pc);
		} else {
			for (int k = 0; k < n; k++) {
				if (pc->mode == ADOPT)
					note_rings(&sess[k]);
				land_all(&sess[k]);
			}
		}
	}
	attack_mark("flags landed");
	if (!atomic_load(&pc->err) && !wait_until(all_signalled, pc, 20000))
		failed(pc, 7, -ETIMEDOUT);
	for (int k = 0; k < atomic_load(&pc->sessions); k++) {
		if (sess[k].r.map && gone(&sess[k]))
			atomic_fetch_add(&pc->dropped, 1);
		else if (sess[k].r.map)
			atomic_fetch_add(&pc->inexact, count_inexact(&sess[k]));
	}
	attack_mark("every completion checked");
	/* The watchers first: the attacker's own process takes them down. */
	for (int e = 0; e < WATCHERS; e++)
		if (eps[e] >= 0)
			close(eps[e]);
	attack_mark("watchers closed");
	for (int k = 0; k < SESSIONS; k++)
		if (sess[k].r.map)
			raw_close(&sess[k].r);
	atomic_store(&pc->done, 1);
}

static void run(enum mode mode, int watchers, const char *name)
{
	static const char *const what[] = { "armed", "adopted", "freed" };
	struct pctl *pc = shm_alloc(sizeof(*pc));
	struct pending_watch pw;
	struct window w;
	double cpu_pct = 0, pass_us = 0;
	pid_t pid;

	pc->mode = mode;
	pc->watchers = watchers;
	window_open(&w, name);
	pending_watch_start(&pw, UID_ATTACKER);
	pid = spawn_user(UID_ATTACKER, 19, attacker_main, pc);
	if (wait_flag(&pc->holding, 1, 60000)) {
		uint64_t p0 = 0, p1 = 0, c0 = scanner_cpu_ns(&p0), t0 = cuflag_now_ns(), c1, t1;
		usleep(SUSTAIN_MS * 1000);
		c1 = scanner_cpu_ns(&p1);
		t1 = cuflag_now_ns();
		if (c0 && c1 && p1 > p0) {
			cpu_pct = 100.0 * (double)(c1 - c0) / (double)(t1 - t0);
			pass_us = (double)(c1 - c0) / 1e3 / (double)(p1 - p0);
		}
	}
	/* What the watch saw while it was held: the user's share and beyond. */
	uint32_t held_pending = atomic_load(&pw.last_pending);
	uint32_t held_in_flight = atomic_load(&pw.last_in_flight);
	atomic_store(&pc->release, 1);
	if (child_wait(pid, 60000) != 0)
		fail("%s: the attacker did not finish", w.name);
	pending_watch_stop(&pw);

	snprintf(w.outcome, sizeof(w.outcome),
		 "%d sessions, %d slots %s; held: pending %u (limit %u), in flight %u, queued %d; "
		 "max pending %u; scanner %.0f%% (%.0f us a pass); inexact %d",
		 atomic_load(&pc->sessions), atomic_load(&pc->slots),
		 what[mode], held_pending, LIMIT, held_in_flight, atomic_load(&pc->queued),
		 atomic_load(&pw.max_pending), cpu_pct, pass_us, atomic_load(&pc->inexact));
	if (mode == ADOPT && atomic_load(&pc->rehung)) {
		size_t len = strlen(w.outcome);
		snprintf(w.outcome + len, sizeof(w.outcome) - len, "; one hung up half adopted");
	}
	if (watchers) {
		size_t len = strlen(w.outcome);
		snprintf(w.outcome + len, sizeof(w.outcome) - len,
			 "; groups in %d epolls (%d watches), %d sessions dropped", watchers,
			 atomic_load(&pc->watches), atomic_load(&pc->dropped));
	}
	if (mode == FREE) {
		size_t len = strlen(w.outcome);
		snprintf(w.outcome + len, sizeof(w.outcome) - len,
			 "; %d hung up retiring, %d retired, allocated again",
			 atomic_load(&pc->rehung), atomic_load(&pc->reclaimed));
	}
	if (atomic_load(&pc->err))
		fail("%s: the attacker's step %d failed: %s", w.name, atomic_load(&pc->err_step),
		     strerror(-atomic_load(&pc->err)));
	if (atomic_load(&pw.max_pending) > LIMIT)
		fail("%s: the user's pending count reached %u, over the limit %u", w.name,
		     atomic_load(&pw.max_pending), LIMIT);
	if ((uint32_t)atomic_load(&pc->slots) <= LIMIT || held_pending < LIMIT)
		fail("%s: the attack did not fill the user's share (%d slots, %u pending)", w.name,
		     atomic_load(&pc->slots), held_pending);
	if (atomic_load(&pc->dropped) && !window_log_count(&w, "uid=60001", "dropped"))
		fail("%s: %d sessions dropped, and no log line names the attacker and its drop",
		     w.name, atomic_load(&pc->dropped));
	if (atomic_load(&pc->inexact))
		fail("%s: %d completions not counted exactly", w.name, atomic_load(&pc->inexact));
	if (!atomic_load(&pc->done))
		fail("%s: the attacker did not get to its end", w.name);
	if (atomic_load(&pw.errors))
		fail("%s: METRICS failed %u times", w.name, atomic_load(&pw.errors));
	window_close(&w);
}

void attack_arm_flood(void)
{
	run(ARMS, 0, "64 sessions of one user arm all their 65536 grouped slots, never landing");
}

void attack_adopt_flood(void)
{
	run(ADOPT, 0, "64 resuming ATTACHes say all 65536 slots are armed ahead; all ADOPTed");
}

void attack_adopt_flood_watched(void)
{
	run(ADOPT, WATCHERS,
	    "64 resuming ATTACHes, all 65536 slots ADOPTed armed ahead, every group in 300 epolls");
}

void attack_free_rewind(void)
{
	run(FREE, 0, "65536 slots completed, flags wound back, all freed");
}
