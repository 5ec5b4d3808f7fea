/* SPDX-License-Identifier: MIT */
/*
 * The slot state machine (daemon/serve/slots.h): every transition from every state
 * of a slot, a group and the table, legal or not. A legal one leaves the
 * state it names and sends the scanner its one command; an illegal one
 * fails an assertion where slots.c has them (test-slots-assert), and where
 * it has none (test-slots, built with NDEBUG) returns its errno with nothing
 * changed and nothing sent. The commands are kept by the table's submit
 * function here: no scanner runs.
 */
#ifdef NDEBUG
#define ILLEGAL_ABORTS 0 /* slots.c is built as this file is */
#else
#define ILLEGAL_ABORTS 1
#endif
#undef NDEBUG
#include <assert.h>
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "scanner/scanner.h"
#include "serve/slots.h"
#include "unit-run.h"

/* ---------------------------------------------------------------- */
/* A table, and the commands it sent                                 */
/* ---------------------------------------------------------------- */

#define MAX_SENT 64

struct sent {
	struct scanner_cmd *cmd[MAX_SENT];
	unsigned n;
};

static void keep(void *arg, struct scanner_cmd *c)
{
	struct sent *s = arg;

	ck_assert_uint_lt(s->n, MAX_SENT);
	s->cmd[s->n++] = c;
}

static void forget(struct sent *s)
{
	for (unsigned i = 0; i < s->n; i++)
		free(s->cmd[i]);
	s->n = 0;
}

/* The fixture: four slots and three groups, each in a state of its own. */
enum {
	NSLOTS = 4,
	NGROUPS = 3,
	S_FREE = 0,      /* FREE */
	S_OWN = 1,       /* LIVE, an eventfd of its own */
	S_GROUPED = 2,   /* LIVE, in group G_LIVE */
	S_RETIRING = 3,  /* RETIRING */
	S_OUT = NSLOTS,  /* no such slot */
	G_LIVE = 0,      /* made, S_GROUPED in it */
	G_EMPTY = 1,     /* made, no slot in it */
	G_UNMADE = 2,    /* not made */
	G_OUT = NGROUPS, /* no such group */
	EFD_RETIRING = 13,
};

struct fx {
	struct slot_table t;
	struct users users;
	struct user user;
	struct sent sent;
	volatile uint32_t flags[NSLOTS];
	struct scanner_session sess, src; /* only their addresses matter */
	int owner;
};

static void fx_init(struct fx *f)
{
	memset(f, 0, sizeof(*f));
	f->user.uid = 1000;
	for (unsigned i = 0; i < NSLOTS; i++)
		f->flags[i] = 0xdead0000u + i;
	ck_assert_int_eq(slot_table_init(&f->t, &(struct slot_table_cfg){
					.nslots = NSLOTS, .ngroups = NGROUPS,
					.users = &f->users, .user = &f->user, .submit = keep,
					.submit_arg = &f->sent, .sess = &f->sess,
					.owner = &f->owner, .flags = f->flags }),
			 0);
}

static void fx_free(struct fx *f)
{
	forget(&f->sent);
	slot_table_free(&f->t);
}

/* The fixture in table state ts, built by legal moves; nothing kept sent. */
static void fx_setup(struct fx *f, enum slot_table_state ts)
{
	struct cuflag_slot_state rec = { .armed = 7, .signalled = 5 };

	fx_init(f);
	ck_assert_int_eq(slot_group_make(&f->t, G_LIVE, 100), 0);
	ck_assert_int_eq(slot_group_make(&f->t, G_EMPTY, 101), 0);
	ck_assert_int_eq(slot_adopt(&f->t, S_OWN, 11, 0, &rec), S_OWN);
	ck_assert_int_eq(slot_adopt(&f->t, S_GROUPED, -1, G_LIVE + 1, &rec), S_GROUPED);
	ck_assert_int_eq(slot_adopt(&f->t, S_RETIRING, EFD_RETIRING, 0, &rec), S_RETIRING);
	ck_assert_int_eq(slot_retire(&f->t, S_RETIRING), 0);
	if (ts != SLOTS_HELD)
		ck_assert_int_eq(slot_table_start(&f->t, 0), 0);
	if (ts == SLOTS_GONE)
		ck_assert_int_eq(slot_table_stop(&f->t), 0);
	forget(&f->sent);
}

/* Everything a transition may change. */
struct snap {
	uint8_t state[NSLOTS];
	int efd[NSLOTS], group_efd[NGROUPS];
	uint32_t group[NSLOTS], next_start[NSLOTS], flags[NSLOTS], group_live[NGROUPS];
	uint32_t free_stack[NSLOTS], nfree, nlive, nretiring, fds;
	enum slot_table_state scanned;
};

static void snap_take(const struct fx *f, struct snap *s)
{
	const struct slot_table *t = &f->t;

	memset(s, 0, sizeof(*s));
	memcpy(s->state, t->state, NSLOTS);
	memcpy(s->efd, t->efd, sizeof(s->efd));
	memcpy(s->group, t->group, sizeof(s->group));
	memcpy(s->next_start, t->next_start, sizeof(s->next_start));
	memcpy(s->free_stack, t->free_stack, t->nfree * sizeof(uint32_t));
	memcpy(s->group_efd, t->group_efd, sizeof(s->group_efd));
	memcpy(s->group_live, t->group_live, sizeof(s->group_live));
	for (unsigned i = 0; i < NSLOTS; i++)
		s->flags[i] = f->flags[i];
	s->nfree = t->nfree;
	s->nlive = t->nlive;
	s->nretiring = t->nretiring;
	s->fds = f->user.held[USER_FDS];
	s->scanned = t->scanned;
}

/* ---------------------------------------------------------------- */
/* The moves, and what each must do                                 */
/* ---------------------------------------------------------------- */

enum move {
	M_OPEN, M_ADOPT, M_IMPORT, M_RETIRE, M_RECLAIM, M_BIND, M_LINK, /* on a slot */
	M_MAKE, M_UNMAKE,                                               /* on a group */
	M_START, M_STOP,                                                /* on the table */
	M_OPEN_ANY_FULL,    /* SLOT_ANY with no slot free */
	M_OPEN_UNMADE,      /* into a group not made */
	M_OPEN_GROUP_OUT,   /* into a group out of range */
	M_ADOPT_ANY,        /* ADOPT names its slot */
	M_MAKE_NO_FD,       /* a group is made with an eventfd */
	M_NMOVES,
};

static const char *const move_name[M_NMOVES] = {
	"open", "adopt", "import", "retire", "reclaim", "bind", "link", "make", "unmake",
	"start", "stop", "open-any-full", "open-unmade", "open-group-out", "adopt-any",
	"make-no-fd",
};

/* What move m needs of the fixture first. */
static void prep(struct fx *f, enum move m)
{
	if (m == M_OPEN_ANY_FULL && f->t.scanned != SLOTS_GONE) {
		ck_assert_int_eq(slot_open(&f->t, SLOT_ANY, 20, 0), S_FREE); /* the last free */
		forget(&f->sent);
	}
}

static int apply(struct fx *f, enum move m, uint32_t on)
{
	struct slot_table *t = &f->t;
	struct cuflag_slot_state rec = { .armed = 40, .signalled = 30 };
	struct slot_import im = { .id = on, .efd = 21, .start = 9, .resume = 1, .src = &f->src,
				  .src_slot = 2, .req_id = 77 };

	switch (m) {
	case M_OPEN:
		return slot_open(t, on, 20, 0);
	case M_ADOPT:
		return slot_adopt(t, on, 20, 0, &rec);
	case M_IMPORT:
		return slot_import(t, &im);
	case M_RETIRE:
		return slot_retire(t, on);
	case M_RECLAIM:
		return slot_reclaim(t, on, 1u << 30);
	case M_BIND:
		return slot_bind(t, on, 22, 78);
	case M_LINK:
		return slot_link_import(t, on, &f->src, 3);
	case M_MAKE:
		return slot_group_make(t, on, 23);
	case M_UNMAKE:
		return slot_group_unmake(t, on);
	case M_START:
		return slot_table_start(t, 55);
	case M_STOP:
		return slot_table_stop(t);
	case M_OPEN_ANY_FULL:
		return slot_open(t, SLOT_ANY, 20, 0);
	case M_OPEN_UNMADE:
		return slot_open(t, SLOT_ANY, -1, G_UNMADE + 1);
	case M_OPEN_GROUP_OUT:
		return slot_open(t, SLOT_ANY, -1, G_OUT + 1);
	case M_ADOPT_ANY:
		return slot_adopt(t, SLOT_ANY, 20, 0, &rec);
	case M_MAKE_NO_FD:
		return slot_group_make(t, G_UNMADE, -1);
	case M_NMOVES:
		break;
	}
	ck_abort();
	return 0;
}

/* The state machine of slots.h as a table: what move m on `on` returns with
 * the table in state ts (0 or an id: legal). */
static int expect(enum move m, uint32_t on, enum slot_table_state ts)
{
	int live = on == S_OWN || on == S_GROUPED;

	if (m == M_START)
		return ts == SLOTS_HELD ? 0 : -EINVAL;
	if (m == M_STOP)
		return ts != SLOTS_GONE ? 0 : -EINVAL;
	if (m == M_RECLAIM) /* the answer to a DEL_SLOT: in any table state */
		return on == S_RETIRING ? EFD_RETIRING : -1;
	if (m == M_ADOPT_ANY) /* an ADOPT names its slot, whatever the table */
		return -EINVAL;
	if (ts == SLOTS_GONE)
		return -EPIPE;
	switch (m) {
	case M_OPEN:
	case M_ADOPT:
	case M_IMPORT:
		return on == S_FREE ? (int)on : -EINVAL;
	case M_RETIRE:
	case M_LINK:
		return live ? 0 : -EINVAL;
	case M_BIND:
		return on == S_OWN ? 0 : on == S_GROUPED ? -EOPNOTSUPP : -EINVAL;
	case M_MAKE:
		return on == G_UNMADE ? 0 : -EINVAL;
	case M_UNMAKE:
		return on == G_EMPTY ? 0 : on == G_LIVE ? -EBUSY : -EINVAL;
	case M_OPEN_ANY_FULL:
		return -ENOSPC;
	case M_OPEN_UNMADE:
	case M_OPEN_GROUP_OUT:
	case M_MAKE_NO_FD:
		return -EINVAL;
	default:
		ck_abort();
	}
	return 0;
}

/* A legal move left what slots.h says and sent its one command. */
static void check_legal(struct fx *f, enum move m, uint32_t on, const struct snap *was)
{
	struct slot_table *t = &f->t;
	struct scanner_cmd *c = f->sent.n ? f->sent.cmd[0] : NULL;

	if (m == M_RECLAIM) {
		ck_assert_uint_eq(f->sent.n, 0); /* it answers one */
	} else {
		ck_assert_uint_eq(f->sent.n, 1);
		ck_assert_ptr_eq(c->sess, &f->sess);
		ck_assert_ptr_eq(c->owner, &f->owner);
	}
	switch (m) {
	case M_OPEN:
		ck_assert_int_eq(t->state[on], SLOT_LIVE);
		ck_assert_int_eq(c->op, SCAN_ADD_SLOT);
		ck_assert_uint_eq(c->slot, on);
		/* A fresh timeline: its start, in the flag and the command. */
		ck_assert_uint_eq(c->start, t->next_start[on]);
		ck_assert_uint_eq(c->armed, t->next_start[on]);
		ck_assert_uint_eq(f->flags[on], t->next_start[on]);
		ck_assert_int_eq(c->efd, 20);
		ck_assert_uint_eq(c->group, 0);
		ck_assert_uint_eq(f->user.held[USER_FDS], was->fds + 1);
		ck_assert_uint_eq(t->nlive, was->nlive + 1);
		ck_assert_uint_eq(t->nfree, was->nfree - 1);
		break;
	case M_ADOPT:
		ck_assert_int_eq(t->state[on], SLOT_LIVE);
		ck_assert_int_eq(c->op, SCAN_ADD_SLOT);
		ck_assert_uint_eq(c->slot, on);
		ck_assert_uint_eq(c->start, 30);
		ck_assert_uint_eq(c->armed, 40);
		ck_assert_uint_eq(f->flags[on], was->flags[on]); /* the device's */
		ck_assert_int_eq(c->efd, 20);
		ck_assert_uint_eq(f->user.held[USER_FDS], was->fds + 1);
		break;
	case M_IMPORT:
		ck_assert_int_eq(t->state[on], SLOT_LIVE);
		ck_assert_int_eq(c->op, SCAN_ADD_IMPORT);
		ck_assert_uint_eq(c->slot, on);
		ck_assert_int_eq(c->efd, 21);
		ck_assert_uint_eq(c->start, 9);
		ck_assert_uint_eq(c->resume, 1);
		ck_assert_ptr_eq(c->src_sess, &f->src);
		ck_assert_uint_eq(c->src_slot, 2);
		ck_assert_uint_eq(c->req_id, 77);
		ck_assert_uint_eq(f->user.held[USER_FDS], was->fds + 1);
		break;
	case M_RETIRE:
		ck_assert_int_eq(t->state[on], SLOT_RETIRING);
		ck_assert_int_eq(c->op, SCAN_DEL_SLOT);
		ck_assert_uint_eq(c->slot, on);
		ck_assert_uint_eq(t->nretiring, was->nretiring + 1);
		/* Its fd is held until it is reclaimed; its group has one live
		 * slot fewer (and may be unmade). */
		ck_assert_uint_eq(f->user.held[USER_FDS], was->fds);
		if (on == S_GROUPED)
			ck_assert_uint_eq(t->group_live[G_LIVE], 0);
		break;
	case M_RECLAIM:
		ck_assert_int_eq(t->state[on], SLOT_FREE);
		ck_assert_uint_eq(t->next_start[on], 1u << 30);
		ck_assert_int_eq(t->efd[on], -1);
		ck_assert_uint_eq(f->user.held[USER_FDS], was->fds - 1);
		ck_assert_uint_eq(t->nfree, was->nfree + 1);
		/* Handed out again, before the ids free longer. */
		if (t->scanned != SLOTS_GONE) {
			ck_assert_int_eq(slot_open(t, SLOT_ANY, 20, 0), (int)on);
			ck_assert_int_eq(slot_open(t, SLOT_ANY, 20, 0), S_FREE);
		}
		break;
	case M_BIND:
		ck_assert_int_eq(t->state[on], SLOT_LIVE);
		ck_assert_int_eq(c->op, SCAN_SET_EFD);
		ck_assert_uint_eq(c->slot, on);
		ck_assert_int_eq(c->efd, 22);
		ck_assert_uint_eq(c->req_id, 78);
		ck_assert_int_eq(t->efd[on], 22);
		ck_assert_uint_eq(f->user.held[USER_FDS], was->fds); /* one for one */
		break;
	case M_LINK:
		ck_assert_int_eq(t->state[on], SLOT_LIVE);
		ck_assert_int_eq(c->op, SCAN_LINK_IMPORT);
		ck_assert_uint_eq(c->slot, on);
		ck_assert_ptr_eq(c->src_sess, &f->src);
		ck_assert_uint_eq(c->src_slot, 3);
		break;
	case M_MAKE:
	case M_UNMAKE:
		ck_assert_int_eq(c->op, SCAN_SET_GROUP);
		ck_assert_uint_eq(c->slot, on);
		ck_assert_int_eq(c->efd, m == M_MAKE ? 23 : -1);
		ck_assert_int_eq(t->group_efd[on], m == M_MAKE ? 23 : -1);
		ck_assert_uint_eq(f->user.held[USER_FDS], m == M_MAKE ? was->fds + 1 : was->fds - 1);
		ck_assert_int_eq(slot_table_group_ok(t, on + 1), m == M_MAKE);
		break;
	case M_START:
		ck_assert_int_eq(t->scanned, SLOTS_SCANNED);
		ck_assert_int_eq(c->op, SCAN_ADD_SESSION);
		ck_assert_uint_eq(c->start, 55);
		break;
	case M_STOP:
		ck_assert_int_eq(t->scanned, SLOTS_GONE);
		ck_assert_int_eq(c->op, SCAN_DEL_SESSION);
		break;
	default:
		ck_abort();
	}
	ck_assert_uint_eq(t->nfree + t->nlive + t->nretiring, NSLOTS);
}

/* ---------------------------------------------------------------- */
/* Every move from every state                                       */
/* ---------------------------------------------------------------- */

struct move_case {
	enum move m;
	uint32_t on; /* a slot, a group, or nothing */
	enum slot_table_state ts;
	int want;
};

#define MAX_CASES 256
static struct move_case legal[MAX_CASES], illegal[MAX_CASES];
static int nlegal, nillegal;

static void add_case(enum move m, uint32_t on, enum slot_table_state ts)
{
	struct move_case c = { m, on, ts, expect(m, on, ts) };
	if (c.want >= 0) {
		assert(nlegal < MAX_CASES);
		legal[nlegal++] = c;
	} else {
		assert(nillegal < MAX_CASES);
		illegal[nillegal++] = c;
	}
}

static void cases_make(void)
{
	for (int ts = SLOTS_HELD; ts <= SLOTS_GONE; ts++) {
		for (int m = M_OPEN; m <= M_LINK; m++)
			for (uint32_t on = 0; on <= S_OUT; on++)
				add_case(m, on, ts);
		for (int m = M_MAKE; m <= M_UNMAKE; m++)
			for (uint32_t on = 0; on <= G_OUT; on++)
				add_case(m, on, ts);
		for (int m = M_START; m < M_NMOVES; m++)
			add_case(m, 0, ts);
	}
}

static const char *const ts_name[] = { "HELD", "SCANNED", "GONE" };

/* One legal move, from a fixture of its own. */
static void legal_move(const struct move_case *c)
{
	struct fx f;
	struct snap was;
	int rc;

	fx_setup(&f, c->ts);
	prep(&f, c->m);
	snap_take(&f, &was);
	rc = apply(&f, c->m, c->on);
	ck_assert_msg(rc == c->want, "%s %u in %s: %d, not %d", move_name[c->m], c->on,
		      ts_name[c->ts], rc, c->want);
	check_legal(&f, c->m, c->on, &was);
	fx_free(&f);
}

/* One illegal move: an assertion ends the process, or it is refused. */
static void illegal_move(const struct move_case *c)
{
	struct fx f;
	struct snap was, now;
	int rc;

	fx_setup(&f, c->ts);
	prep(&f, c->m);
	snap_take(&f, &was);
	rc = apply(&f, c->m, c->on);
	/* Reached only where slots.c has no assertions. */
	ck_assert_msg(!ILLEGAL_ABORTS, "%s %u in %s: returned %d instead of failing an assertion",
		      move_name[c->m], c->on, ts_name[c->ts], rc);
	ck_assert_msg(rc == c->want, "%s %u in %s: %d, not %d", move_name[c->m], c->on,
		      ts_name[c->ts], rc, c->want);
	snap_take(&f, &now);
	ck_assert_msg(!memcmp(&was, &now, sizeof(was)), "%s %u in %s changed the table",
		      move_name[c->m], c->on, ts_name[c->ts]);
	ck_assert_uint_eq(f.sent.n, 0);
	fx_free(&f);
}

/* The moves in one process (a process a move costs a sanitized build a
 * second), but for the illegal ones that end it. */
START_TEST(test_legal)
{
	for (int i = 0; i < nlegal; i++)
		legal_move(&legal[i]);
}
END_TEST

START_TEST(test_illegal)
{
	for (int i = 0; i < nillegal; i++)
		illegal_move(&illegal[i]);
}
END_TEST

START_TEST(test_illegal_aborts)
{
	illegal_move(&illegal[_i]);
}
END_TEST

/* ---------------------------------------------------------------- */
/* Lives                                                             */
/* ---------------------------------------------------------------- */

/* A slot's whole life, twice: its second timeline starts where it was told,
 * its fd is held from its opening until it is reclaimed. */
START_TEST(test_life)
{
	struct fx f;
	int id;

	fx_init(&f);
	ck_assert_int_eq(slot_table_start(&f.t, 0), 0);
	for (int round = 0; round < 2; round++) {
		forget(&f.sent);
		id = slot_open(&f.t, SLOT_ANY, 30 + round, 0);
		ck_assert_int_eq(id, 0);
		ck_assert_uint_eq(f.flags[0], round ? 1000u + (1u << 30) : 0);
		ck_assert_uint_eq(f.user.held[USER_FDS], 1);
		ck_assert_int_eq(slot_retire(&f.t, 0), 0);
		ck_assert_int_eq(f.sent.cmd[1]->op, SCAN_DEL_SLOT);
		ck_assert_int_eq(slot_reclaim(&f.t, 0, 1000u + (1u << 30)), 30 + round);
		ck_assert_uint_eq(f.user.held[USER_FDS], 0);
	}
	fx_free(&f);
}
END_TEST

/* Grouped slots cost no fd, their group one; a group with live slots stays
 * made, one whose slots are all retiring may go. */
START_TEST(test_group_life)
{
	struct fx f;

	fx_init(&f);
	ck_assert_int_eq(slot_group_make(&f.t, 0, 50), 0);
	ck_assert_int_eq(slot_table_start(&f.t, 0), 0);
	ck_assert_int_eq(slot_open(&f.t, SLOT_ANY, 99, 1), 0);
	ck_assert_int_eq(slot_open(&f.t, SLOT_ANY, 99, 1), 1);
	ck_assert_int_eq(f.t.efd[0], -1);
	ck_assert_int_eq(f.sent.cmd[2]->efd, -1);
	ck_assert_uint_eq(f.sent.cmd[2]->group, 1);
	ck_assert_uint_eq(f.user.held[USER_FDS], 1);
	ck_assert_uint_eq(f.t.group_live[0], 2);
	ck_assert_int_eq(slot_retire(&f.t, 0), 0);
	ck_assert_int_eq(slot_retire(&f.t, 1), 0);
	ck_assert_int_eq(slot_group_unmake(&f.t, 0), 0);
	ck_assert_uint_eq(f.user.held[USER_FDS], 0);
	ck_assert_int_eq(slot_reclaim(&f.t, 1, 5), -1);
	ck_assert_uint_eq(f.user.held[USER_FDS], 0);
	fx_free(&f);
}
END_TEST

/* A batch is all or none: what is reserved is what the next transitions
 * send with. */
START_TEST(test_reserve)
{
	struct fx f;

	fx_init(&f);
	ck_assert_int_eq(slot_table_reserve(&f.t, 3), 0);
	ck_assert_uint_eq(f.t.nspare, 3);
	ck_assert_int_eq(slot_table_reserve(&f.t, 2), 0);
	ck_assert_uint_eq(f.t.nspare, 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(slot_open(&f.t, SLOT_ANY, 10 + i, 0), i);
	ck_assert_uint_eq(f.t.nspare, 0);
	ck_assert_int_eq(slot_open(&f.t, SLOT_ANY, 13, 0), 3); /* one of its own */
	ck_assert_int_eq(slot_table_reserve(&f.t, 1), 0);
	fx_free(&f); /* frees what was put by, and the ADD_SESSION never sent */
}
END_TEST

/* At a drop: every eventfd to close, and the user's count down by the
 * fds the table held (a grouped slot none, a group one). */
static void count_close(void *arg, int fd)
{
	if (fd >= 0)
		++*(int *)arg;
}

START_TEST(test_release)
{
	struct fx f;
	int closed = 0;

	fx_setup(&f, SLOTS_GONE);
	ck_assert_uint_eq(f.user.held[USER_FDS], 4); /* S_OWN, S_RETIRING, 2 groups */
	slot_table_release(&f.t, count_close, &closed);
	ck_assert_int_eq(closed, 4);
	ck_assert_uint_eq(f.user.held[USER_FDS], 0);
	fx_free(&f);
}
END_TEST

/* What each command handed back leaves the session to do, and the table
 * after it: a DEL_SLOT's slot FREE, its eventfd to close, its next timeline
 * past the old one. */
START_TEST(test_done)
{
	struct fx f;
	struct slot_done d;

	fx_setup(&f, SLOTS_SCANNED);
	d = slot_table_done(&f.t, &(struct scanner_cmd){ .op = SCAN_DEL_SLOT, .slot = S_RETIRING,
							 .final_armed = 7 });
	ck_assert_int_eq(d.close_fd, EFD_RETIRING);
	ck_assert_int_eq(d.then, SLOT_DONE_FREED);
	ck_assert_int_eq(f.t.state[S_RETIRING], SLOT_FREE);
	ck_assert_uint_eq(f.t.next_start[S_RETIRING], 7 + (1u << 30));
	d = slot_table_done(&f.t, &(struct scanner_cmd){ .op = SCAN_SET_EFD, .slot = S_OWN,
							 .efd = 21 });
	ck_assert_int_eq(d.close_fd, 21);
	ck_assert_int_eq(d.then, SLOT_DONE_BIND);
	d = slot_table_done(&f.t, &(struct scanner_cmd){ .op = SCAN_SET_GROUP, .efd = 22 });
	ck_assert_int_eq(d.close_fd, 22);
	ck_assert_int_eq(d.then, SLOT_DONE_NOTHING);
	d = slot_table_done(&f.t, &(struct scanner_cmd){ .op = SCAN_ADD_IMPORT, .efd = 23 });
	ck_assert_int_eq(d.close_fd, -1);
	ck_assert_int_eq(d.then, SLOT_DONE_IMPORT);
	d = slot_table_done(&f.t, &(struct scanner_cmd){ .op = SCAN_DEL_SESSION });
	ck_assert_int_eq(d.then, SLOT_DONE_GONE);
	ck_assert(f.sent.n == 0); /* taking back sends nothing */
	fx_free(&f);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("core");

	cases_make();
	tcase_add_test(tc, test_legal);
	if (ILLEGAL_ABORTS) /* each in a process of its own (check forks) */
		tcase_add_loop_test_raise_signal(tc, test_illegal_aborts, SIGABRT, 0, nillegal);
	else
		tcase_add_test(tc, test_illegal);
	tcase_add_test(tc, test_life);
	tcase_add_test(tc, test_group_life);
	tcase_add_test(tc, test_reserve);
	tcase_add_test(tc, test_release);
	tcase_add_test(tc, test_done);
	return unit_run_case("slots", tc);
}
