/* SPDX-License-Identifier: MIT */
/*
 * Handles of exported slots and the IMPORT that names one (export.h).
 *
 * A handle is a memfd per exported slot holding a struct
 * cuflag_handle_record (a random secret, the exporter's region file and
 * slot), sealed against any change. The exporter makes it, of the record the
 * daemon offers (cuflag-proto.h), so that its memory is charged to the
 * exporter and goes with the exporter's last fd of it, never to the daemon:
 * a daemon-made file's page stayed the daemon's for as long as anyone held
 * the file, which let one user fill the daemon's memory cgroup with handles.
 * Whoever holds an fd of it may import the slot: the daemon knows the file
 * by its identity (device and inode, held open in its table, so never
 * reused while it is there) and checks that its record is the one it
 * offered. A file a client made otherwise has another identity or another
 * record, whatever it holds, and is refused. Each handle a session was
 * offered counts against its user's fds until the session goes, so that
 * exporting, freeing and exporting again cannot make handles without end.
 * The record matters after a restart: the exporter, resuming, hands its copy
 * back (EXPORT with REDECLARE), and the new daemon takes it only in a
 * resuming session, within the relink window, where the record names that
 * client's own region and slot, so that nobody who merely holds a handle can
 * make it name a slot of theirs, nor an exporter point an old handle at a
 * new slot of a running daemon.
 *
 * Imports are capped per exported slot and per user (CUFLAG_IMPORTS_PER_SLOT,
 * CUFLAG_IMPORTS_PER_USER): each one is a record the scanner writes, and a
 * doorbell, whenever the exporter completes.
 *
 * What a client hands over is checked without anything that could block:
 * F_GET_SEALS answers at once for any file (only memfds have seals), and
 * only then is the file looked at and read.
 */
#include "serve/export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/closer.h"
#include "base/config.h"
#include "list.h"
#include "serve/handler.h"
#include "serve/server-state.h"
#include "serve/session-state.h"

#define HANDLE_SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define BUCKETS 1024u

struct export_entry {
	struct session *owner;
	uint32_t slot;
	int fd;          /* -1: offered, not declared yet (not in the table) */
	dev_t dev;
	ino_t ino;
	uint64_t serial; /* which entry this is, for its imports (never reused) */
	uint32_t nimports;
	struct cuflag_handle_record rec;
	LIST_FIELDS(struct export_entry, bucket);
};

/* An import a resume brought back, waiting for its exporter's redeclare. */
struct relink {
	struct session *s;
	uint32_t slot;
	dev_t dev;
	ino_t ino;
	struct cuflag_handle_record rec;
	LIST_FIELDS(struct relink, link); /* the table's relinks */
};

/* A user's imports held, over all its sessions. */
struct import_user {
	uid_t uid;
	uint32_t n;
	LIST_FIELDS(struct import_user, chain); /* its bucket's */
};
#define USER_BUCKETS 64u

struct export_table {
	struct export_entry *bucket[BUCKETS];
	struct relink *relinks;
	uint64_t serial;
	struct import_user *users[USER_BUCKETS];
};

/* Which handle an import counts against (serial 0: none, or a resumed
 * import not linked by a handle of this daemon's yet). */
struct import_ref {
	dev_t dev;
	ino_t ino;
	uint64_t serial;
};

/* Per session, made at its first EXPORT or IMPORT. */
struct session_exports {
	struct export_entry **by_slot; /* nslots: its handle, or NULL */
	uint8_t *imported;             /* nslots: the slot watches another's */
	struct import_ref *import_of;  /* nslots: the handle it counts against */
	uint32_t nexported;
	uint32_t nspent;   /* handles offered: fds of its user's until it goes */
	uint32_t nimports; /* imports held (its user's count has them) */
};

static struct export_table *table(struct server *srv)
{
	if (!srv->exports)
		srv->exports = calloc(1, sizeof(*srv->exports));
	return srv->exports;
}

static struct session_exports *session_xp(struct session *s)
{
	struct session_exports *xp = s->xp;

	if (xp)
		return xp;
	xp = calloc(1, sizeof(*xp));
	if (!xp)
		return NULL;
	xp->by_slot = calloc(s->slots.n, sizeof(*xp->by_slot));
	xp->imported = calloc(s->slots.n, 1);
	xp->import_of = calloc(s->slots.n, sizeof(*xp->import_of));
	if (!xp->by_slot || !xp->imported || !xp->import_of) {
		free(xp->by_slot);
		free(xp->imported);
		free(xp->import_of);
		free(xp);
		return NULL;
	}
	return s->xp = xp;
}

static struct export_entry **bucket_of(struct export_table *t, ino_t ino)
{
	return &t->bucket[(uint64_t)ino % BUCKETS];
}

static struct export_entry *table_find(struct export_table *t, dev_t dev, ino_t ino)
{
	for (struct export_entry *e = t ? *bucket_of(t, ino) : NULL; e; e = e->bucket_next)
		if (e->dev == dev && e->ino == ino)
			return e;
	return NULL;
}

/* The entry leaves the table (if it was declared) and is freed; the fd it
 * cost stays held until its session goes (export_session_gone). */
static void table_remove(struct server *srv, struct export_entry *e)
{
	struct export_entry **b = bucket_of(srv->exports, e->ino);

	if (e->fd >= 0) {
		LIST_REMOVE(bucket, *b, e);
		closer_close(srv->closer, e->fd);
	}
	free(e);
}

static struct import_user *import_user_find(struct export_table *t, uid_t uid)
{
	struct import_user *u = t->users[uid % USER_BUCKETS];

	while (u && u->uid != uid)
		u = u->chain_next;
	return u;
}

/* The user of s holds delta more imports; its entry goes at 0. */
static void import_user_add(struct export_table *t, uid_t uid, int32_t delta)
{
	struct import_user *u = import_user_find(t, uid);

	if (!u)
		return; /* made by import_user_may_take before any import counted */
	u->n += (uint32_t)delta;
	if (!u->n) {
		LIST_REMOVE(chain, t->users[uid % USER_BUCKETS], u);
		free(u);
	}
}

/* Whether the user of uid may hold one more import. 0, -EDQUOT, -ENOMEM. */
static int import_user_may_take(struct export_table *t, uid_t uid)
{
	struct import_user *u = import_user_find(t, uid);

	if (!u) {
		if (!(u = calloc(1, sizeof(*u))))
			return -ENOMEM;
		u->uid = uid;
		LIST_PREPEND(chain, t->users[uid % USER_BUCKETS], u);
	}
	return u->n < CUFLAG_IMPORTS_PER_USER ? 0 : -EDQUOT;
}

/* An import of s's (slot id) counts against e (NULL: none yet) and its user. */
static void import_count(struct server *srv, struct session *s, uint32_t id,
			 struct export_entry *e)
{
	if (e) {
		s->xp->import_of[id] = (struct import_ref){ e->dev, e->ino, e->serial };
		e->nimports++;
	}
	s->xp->nimports++;
	import_user_add(srv->exports, s->uid, 1);
}

/* An import of s's (slot id) no longer counts. */
static void import_uncount(struct server *srv, struct session *s, uint32_t id)
{
	struct import_ref *r = &s->xp->import_of[id];
	struct export_entry *e = r->serial ? table_find(srv->exports, r->dev, r->ino) : NULL;

	if (e && e->serial == r->serial)
		e->nimports--;
	memset(r, 0, sizeof(*r));
	s->xp->nimports--;
	import_user_add(srv->exports, s->uid, -1);
}

int export_is_import(const struct session *s, uint32_t id)
{
	return s->xp && id < s->slots.n && s->xp->imported[id];
}

/* ---------------------------------------------------------------- */
/* Handle files                                                      */
/* ---------------------------------------------------------------- */

/* Who makes this daemon's handles (struct cuflag_handle_record's daemon). */
static uint32_t handle_maker(const struct server *srv)
{
	return srv->cfg->user_mode ? CUFLAG_HANDLE_USER | ((uint32_t)srv->own_uid & ~CUFLAG_HANDLE_USER)
				   : 0;
}

/* A handle of another daemon's: why it cannot be imported here. */
static int refuse_foreign(const struct server *srv, struct request *req,
			  const struct cuflag_handle_record *rec)
{
	return req_refuse(req, -EXDEV,
			  !(rec->daemon & CUFLAG_HANDLE_USER)
				  ? "IMPORT: the handle comes from the node daemon, this is a "
				    "user's own (cuflagd --user): exports do not cross daemons; "
				    "connect both processes to the same one"
			  : srv->cfg->user_mode
				  ? "IMPORT: the handle comes from another user's own daemon: "
				    "exports do not cross daemons; connect both processes to the "
				    "node daemon"
				  : "IMPORT: the handle comes from a user's own daemon (cuflagd "
				    "--user), this is the node daemon: exports do not cross "
				    "daemons; connect both processes to the same one");
}

/* A record offered for slot id of s, in e (not declared: no file yet). 0 or
 * a negative errno. */
static int handle_offer(struct server *srv, struct session *s, uint32_t id,
			struct export_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->rec = (struct cuflag_handle_record){
		.magic = CUFLAG_HANDLE_MAGIC, .version = CUFLAG_PROTO_VERSION,
		.size = sizeof(e->rec), .slot = id, .daemon = handle_maker(srv),
		.region_dev = (uint64_t)s->region.dev, .region_ino = (uint64_t)s->region.ino,
	};
	if (getrandom(&e->rec.secret, sizeof(e->rec.secret), 0) != sizeof(e->rec.secret))
		return -EIO;
	e->fd = -1;
	e->owner = s;
	e->slot = id;
	e->serial = ++srv->exports->serial;
	return 0;
}

/* e, declared with the file fd of identity (dev, ino), goes in the table. */
static void table_put(struct server *srv, struct export_entry *e, int fd, dev_t dev, ino_t ino)
{
	e->fd = fd;
	e->dev = dev;
	e->ino = ino;
	LIST_PREPEND(bucket, *bucket_of(srv->exports, ino), e);
}

/* What a client's fd is, if it is a handle: its identity and its record.
 * Anything else, -EINVAL. */
static int handle_read(int fd, dev_t *dev, ino_t *ino, struct cuflag_handle_record *rec)
{
	int seals = fcntl(fd, F_GET_SEALS);
	struct stat st;

	if (seals < 0 || (seals & HANDLE_SEALS) != HANDLE_SEALS)
		return -EINVAL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof(*rec))
		return -EINVAL;
	if (pread(fd, rec, sizeof(*rec), 0) != (ssize_t)sizeof(*rec))
		return -EINVAL;
	if (rec->magic != CUFLAG_HANDLE_MAGIC || rec->version != CUFLAG_PROTO_VERSION ||
	    rec->size != sizeof(*rec))
		return -EINVAL;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

/* ---------------------------------------------------------------- */
/* EXPORT                                                            */
/* ---------------------------------------------------------------- */

/* A handle is a daemon fd the exporter's user pays for, as a slot's
 * eventfd (so that exporting grouped slots, which hold none, cannot fill
 * the daemon's table): its quota is checked, then it is held for as long as
 * the session lasts (export_session_gone), whether the handle goes before
 * or not: the file may outlive the slot in anyone's hands. */
static int handle_charge(struct server *srv, struct session *s, struct request *req)
{
	int rc = slot_fds_may_take(&s->slots, 1, &req->why);

	if (rc)
		return req_refuse(req, rc, req->why);
	user_hold(&srv->users, s->user, USER_FDS, 1);
	s->xp->nspent++;
	return 0;
}

/* Whether s may hand back handles of a daemon before this one: it resumed,
 * within the window its importers wait for it. */
static int may_redeclare(const struct server *srv, const struct session *s)
{
	return s->resumed && cuflag_now_ms() - srv->start_ms < CUFLAG_IMPORT_RELINK_MS;
}

/* Imports that waited for this handle are linked to it now. */
static void relink_to(struct server *srv, struct export_entry *e)
{
	for (struct relink *r = srv->exports->relinks, *n; r; r = n) {
		n = r->link_next;
		if (r->dev != e->dev || r->ino != e->ino || memcmp(&r->rec, &e->rec, sizeof(r->rec)) ||
		    slot_link_import(&r->s->slots, r->slot, e->owner->scan, e->slot))
			continue; /* out of memory: it is marked gone at the deadline */
		r->s->xp->import_of[r->slot] = (struct import_ref){ e->dev, e->ino, e->serial };
		e->nimports++;
		LIST_REMOVE(link, srv->exports->relinks, r);
		free(r);
	}
}

/* A resumed client hands back the handle its slot had (EXPORT REDECLARE). */
static int redeclare(struct server *srv, struct session *s, struct request *req, uint32_t id)
{
	struct export_entry *e;
	struct cuflag_handle_record rec;
	dev_t dev;
	ino_t ino;
	int rc;

	if (!may_redeclare(srv, s))
		return req_refuse(req, -EINVAL,
				  "EXPORT: a redeclare outside a resume (after a restart, within its "
				  "window)");
	if (s->xp->by_slot[id] || handle_read(req->fds[0], &dev, &ino, &rec) ||
	    rec.slot != id || rec.region_dev != (uint64_t)s->region.dev ||
	    rec.region_ino != (uint64_t)s->region.ino || table_find(srv->exports, dev, ino)) {
		return req_refuse(req, -EINVAL,
				  "EXPORT: not a handle of this client's slot, or one already declared");
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return req_refuse(req, -ENOMEM, "out of memory");
	if ((rc = handle_charge(srv, s, req))) {
		free(e);
		return rc;
	}
	*e = (struct export_entry){ .owner = s, .slot = id, .rec = rec,
				    .serial = ++srv->exports->serial };
	table_put(srv, e, req->fds[0], dev, ino);
	req->fds[0] = -1; /* the table's now */
	s->xp->by_slot[id] = e;
	s->xp->nexported++;
	relink_to(srv, e);
	return req_reply_ok(s, req, NULL, 0, NULL, 0);
}

/* The exporter's file of the record offered (EXPORT DECLARE). */
static int declare(struct server *srv, struct session *s, struct request *req, uint32_t id)
{
	struct export_entry *e = s->xp->by_slot[id];
	struct cuflag_handle_record rec;
	dev_t dev;
	ino_t ino;

	if (!e || e->fd >= 0)
		return req_refuse(req, -EINVAL,
				  "EXPORT: a declare of a slot offered no handle, or declared already");
	if (handle_read(req->fds[0], &dev, &ino, &rec) || memcmp(&rec, &e->rec, sizeof(rec)) ||
	    table_find(srv->exports, dev, ino))
		return req_refuse(req, -EINVAL,
				  "EXPORT: the fd is not a sealed file of the record offered");
	table_put(srv, e, req->fds[0], dev, ino);
	req->fds[0] = -1; /* the table's now */
	return req_reply_ok(s, req, NULL, 0, NULL, 0);
}

int req_export(struct server *srv, struct session *s, struct request *req)
{
	struct cuflag_msg_export m;
	struct export_entry *e;
	int rc;

	memcpy(&m, req->body, sizeof(m));
	if (m.id >= s->slots.n || s->slots.state[m.id] != SLOT_LIVE)
		return req_refuse(req, -EINVAL, "EXPORT names a slot the client does not hold");
	if (export_is_import(s, m.id))
		return req_refuse(req, -EPERM, "EXPORT of an imported slot");
	if (!table(srv) || !session_xp(s))
		return req_refuse(req, -ENOMEM, "out of memory");
	if (m.flags & CUFLAG_EXPORT_REDECLARE)
		return redeclare(srv, s, req, m.id);
	if (m.flags & CUFLAG_EXPORT_DECLARE)
		return declare(srv, s, req, m.id);
	e = s->xp->by_slot[m.id];
	if (e && e->fd >= 0) /* the same file every time: a new fd for it */
		return req_reply_ok(s, req, NULL, 0, &e->fd, 1);
	if (!e) {
		if ((rc = handle_charge(srv, s, req)))
			return rc;
		e = malloc(sizeof(*e));
		if (!e || (rc = handle_offer(srv, s, m.id, e))) {
			rc = e ? rc : -ENOMEM;
			free(e);
			ulog(LOG_ERR, s, "cannot offer a handle: %s", strerror(-rc));
			return req_refuse(req, rc, "cannot offer a handle");
		}
		s->xp->by_slot[m.id] = e;
		s->xp->nexported++;
	}
	/* The record to make the file of (offered again until declared). */
	return req_reply_ok(s, req, &e->rec, sizeof(e->rec), NULL, 0);
}

/* ---------------------------------------------------------------- */
/* IMPORT                                                            */
/* ---------------------------------------------------------------- */

/* What an IMPORT opens (slots.h): a slot of the importer's (id SLOT_ANY, or
 * the one a resume names), watching src (NULL: linked later) from start
 * (resume); e: the handle it counts against (NULL: a resume that waits for
 * its exporter's redeclare). */
static int import_open(struct server *srv, struct session *s, struct request *req,
		       const struct slot_import *o, struct export_entry *e)
{
	struct slot_table *t = &s->slots;
	struct slot_import im = *o;
	int efd = -1, rc;

	/* What every completion of the exporter costs the scanner: a record
	 * and a doorbell per import, so imports are capped. */
	if (e && e->nimports >= CUFLAG_IMPORTS_PER_SLOT)
		return req_refuse(req, -EDQUOT, "IMPORT: imports-per-slot reached");
	if ((rc = import_user_may_take(srv->exports, s->uid)))
		return req_refuse(req, rc,
				  rc == -EDQUOT ? "IMPORT: imports-per-user reached" : "out of memory");
	/* The importer's quotas: a slot, and its eventfd unless grouped. */
	if ((rc = slot_fds_may_take(t, slot_fd_cost(o->group, 1), &req->why)))
		return req_refuse(req, rc, req->why);
	if (!t->nfree)
		return req_refuse(req, -ENOSPC, "slots-per-client reached");
	if (o->resume && !o->group) {
		if ((rc = req_take_eventfd(req, req->fds[1], "IMPORT: the fd is not an eventfd")))
			return rc;
	} else if (!o->group && (rc = req_new_eventfds(srv, req, &efd, 1))) {
		return req_refuse(req, rc,
				  rc == -EMFILE || rc == -ENFILE ? "daemon out of fds" : "out of memory");
	}
	im.efd = o->resume && !o->group ? req->fds[1] : efd;
	im.req_id = req->h.req_id;
	/* Answered once the scanner has linked it: the reply says where its
	 * timeline starts. */
	if ((rc = slot_import(t, &im)) < 0) {
		if (efd >= 0)
			close(efd);
		return req_refuse(req, rc, "out of memory"); /* the rest was checked above */
	}
	if (o->resume && !o->group)
		req->fds[1] = -1; /* the slot's now */
	s->xp->imported[rc] = 1;
	import_count(srv, s, (uint32_t)rc, e);
	return 0;
}

/* IMPORT RESUME: the slot the client held before a restart, taken again. */
static int import_resume(struct server *srv, struct session *s, struct request *req,
			 struct slot_import *o)
{
	struct cuflag_handle_record rec;
	struct export_entry *e;
	struct relink *r = NULL;
	dev_t dev;
	ino_t ino;
	int rc;

	if (!s->resumed)
		return req_refuse(req, -EINVAL, "IMPORT: a resume outside a resuming session");
	if (o->id >= s->slots.n || s->slots.state[o->id] != SLOT_FREE)
		return req_refuse(req, -EINVAL, "IMPORT: resumes a slot out of range or held");
	if (handle_read(req->fds[0], &dev, &ino, &rec))
		return req_refuse(req, -EINVAL, "IMPORT: the fd is not a handle");
	if (rec.daemon != handle_maker(srv))
		return refuse_foreign(srv, req, &rec);
	/* Its own record, read once; the scanner takes it only within what
	 * a daemon could have written (scanner/import.c), so that a client
	 * that scribbled it is owed nothing. */
	o->start = s->scan->states[o->id].signalled;
	e = table_find(srv->exports, dev, ino);
	if (e && !memcmp(&e->rec, &rec, sizeof(rec))) {
		o->src = e->owner->scan;
		o->src_slot = e->slot;
	} else if (cuflag_now_ms() - srv->start_ms < CUFLAG_IMPORT_RELINK_MS) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return req_refuse(req, -ENOMEM, "out of memory");
		*r = (struct relink){ .s = s, .slot = o->id, .dev = dev, .ino = ino, .rec = rec };
	} else {
		return req_refuse(req, -EINVAL, "IMPORT: no exporter declared that handle");
	}
	rc = import_open(srv, s, req, o, r ? NULL : e);
	if (rc) {
		free(r);
		return rc;
	}
	if (r)
		LIST_PREPEND(link, srv->exports->relinks, r);
	return 0;
}

int req_import(struct server *srv, struct session *s, struct request *req)
{
	struct cuflag_msg_import m;
	struct cuflag_handle_record rec;
	struct export_entry *e;
	dev_t dev;
	ino_t ino;

	memcpy(&m, req->body, sizeof(m));
	if (!slot_table_group_ok(&s->slots, m.group))
		return req_refuse(req, -EINVAL, "IMPORT names a group that was not made");
	if (!table(srv) || !session_xp(s))
		return req_refuse(req, -ENOMEM, "out of memory");
	struct slot_import o = { .group = m.group, .id = SLOT_ANY };
	if (m.flags & CUFLAG_IMPORT_RESUME) {
		o.id = m.id;
		o.resume = 1;
		return import_resume(srv, s, req, &o);
	}
	if (handle_read(req->fds[0], &dev, &ino, &rec))
		return req_refuse(req, -EINVAL, "IMPORT: the fd is not a handle");
	if (rec.daemon != handle_maker(srv))
		return refuse_foreign(srv, req, &rec);
	e = table_find(srv->exports, dev, ino);
	if (!e || memcmp(&e->rec, &rec, sizeof(rec)))
		return req_refuse(req, -EINVAL,
				  "IMPORT: the fd is not a live handle of this daemon's");
	o.src = e->owner->scan;
	o.src_slot = e->slot;
	return import_open(srv, s, req, &o, e);
}

struct req_verdict export_on_done(struct session *s, struct scanner_cmd *c)
{
	struct cuflag_slot_grant g = { .id = c->slot, .start = c->start };
	unsigned nfds = c->group || c->resume ? 0 : 1;

	if (session_dead(s))
		return REQ_KEEP; /* its slots' eventfds go with the session */
	if (request_reply(s, CUFLAG_MSG_IMPORT, c->req_id, 0, &g, sizeof(g), &c->efd, nfds) < 0)
		return req_drop(-EPIPE, "cannot send a reply");
	return REQ_KEEP;
}

/* ---------------------------------------------------------------- */
/* Lifecycles                                                        */
/* ---------------------------------------------------------------- */

static void relinks_drop(struct server *srv, struct session *s, uint32_t slot)
{
	if (!srv->exports)
		return;
	for (struct relink *r = srv->exports->relinks, *n; r; r = n) {
		n = r->link_next;
		if (r->s == s && (slot == SLOT_ANY || r->slot == slot)) {
			LIST_REMOVE(link, srv->exports->relinks, r);
			free(r);
		}
	}
}

void export_slot_freed(struct server *srv, struct session *s, uint32_t id)
{
	struct session_exports *xp = s->xp;

	if (!xp)
		return;
	if (xp->by_slot[id]) {
		table_remove(srv, xp->by_slot[id]);
		xp->by_slot[id] = NULL;
		xp->nexported--;
	}
	if (xp->imported[id]) {
		xp->imported[id] = 0;
		import_uncount(srv, s, id);
		relinks_drop(srv, s, id);
	}
}

void export_session_gone(struct server *srv, struct session *s)
{
	struct session_exports *xp = s->xp;

	if (!xp)
		return;
	for (uint32_t i = 0; (xp->nexported || xp->nimports) && i < s->slots.n; i++) {
		if (xp->by_slot[i]) {
			table_remove(srv, xp->by_slot[i]);
			xp->by_slot[i] = NULL;
			xp->nexported--;
		}
		if (xp->imported[i]) {
			xp->imported[i] = 0;
			import_uncount(srv, s, i);
		}
	}
	relinks_drop(srv, s, SLOT_ANY);
	/* What its handles held of its user's fds, for the session's life. */
	user_hold(&srv->users, s->user, USER_FDS, -(int32_t)xp->nspent);
	xp->nspent = 0;
}

void export_session_free(struct session *s)
{
	if (!s->xp)
		return;
	free(s->xp->by_slot);
	free(s->xp->imported);
	free(s->xp->import_of);
	free(s->xp);
	s->xp = NULL;
}

void export_tick(struct server *srv, uint64_t now_ms)
{
	struct relink *r;

	if (!srv->exports || !srv->exports->relinks ||
	    now_ms - srv->start_ms < CUFLAG_IMPORT_RELINK_MS)
		return;
	while ((r = srv->exports->relinks)) {
		/* No src: the scanner marks it gone. */
		if (slot_link_import(&r->s->slots, r->slot, NULL, 0))
			return; /* out of memory: the next tick */
		LIST_REMOVE(link, srv->exports->relinks, r);
		free(r);
	}
}

void export_fini(struct server *srv)
{
	struct export_table *t = srv->exports;
	struct relink *r;

	if (!t)
		return;
	for (uint32_t b = 0; b < BUCKETS; b++)
		while (t->bucket[b]) {
			struct export_entry *e = t->bucket[b];
			LIST_REMOVE(bucket, t->bucket[b], e);
			closer_close(srv->closer, e->fd);
			free(e);
		}
	for (uint32_t b = 0; b < USER_BUCKETS; b++)
		while (t->users[b]) {
			struct import_user *u = t->users[b];
			LIST_REMOVE(chain, t->users[b], u);
			free(u);
		}
	while ((r = t->relinks)) {
		LIST_REMOVE(link, t->relinks, r);
		free(r);
	}
	free(t);
	srv->exports = NULL;
}
