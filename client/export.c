/* SPDX-License-Identifier: MIT */
/*
 * Completions across processes: exporting a slot as an fd, importing one,
 * and handing both to a daemon that restarted.
 *
 * The handle is a file this library makes of the record the daemon offers
 * (so that its memory is the exporter's, not the daemon's); it keeps a copy for
 * every slot it exported or imported, because a daemon that restarts knows
 * nothing of them: on resume the exporter hands its copy back (EXPORT with
 * REDECLARE) and the importer takes its slot again by its copy (IMPORT with
 * RESUME), with its record in the region, so that its count goes on from
 * where it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client-private.h"
#include "fd-util.h"

struct export_args {
	struct cuflag_slot *s;
	int fd;
};

/* The handle file, made here so that its memory is this process's: a memfd
 * holding the record the daemon offered, sealed against any change. */
static int handle_file(const struct cuflag_handle_record *rec)
{
	int fd = memfd_create("cuflag-handle", MFD_CLOEXEC | MFD_ALLOW_SEALING), rc;

	if (fd < 0)
		return -errno;
	if (pwrite(fd, rec, sizeof(*rec), 0) != (ssize_t)sizeof(*rec) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = errno ? -errno : -EIO;
		close(fd);
		return rc;
	}
	return fd;
}

/* EXPORT of a slot with no handle yet: the daemon offers the record, we make
 * the file and declare it. Returns the file (ours), or a negative errno. */
static int handle_declare(struct cuflag_client *c, int sock, struct cuflag_slot *s,
			  const struct cuflag_call *offer)
{
	struct cuflag_msg_export m = { .id = s->id, .flags = CUFLAG_EXPORT_DECLARE };
	struct cuflag_handle_record rec;
	uint8_t reply[CUFLAG_MSG_MAX];
	int fd, rc;

	if (offer->reply_len != sizeof(struct cuflag_msg_hdr) + sizeof(rec))
		return -EBADMSG;
	memcpy(&rec, cuflag_call_body(offer), sizeof(rec));
	if ((fd = handle_file(&rec)) < 0)
		return fd;
	struct cuflag_call call = { .type = CUFLAG_MSG_EXPORT, .body = &m, .blen = sizeof(m),
				    .fds = &fd, .nfds = 1, .reply = reply };
	rc = cuflag__request_on(c, sock, &call);
	if (!rc && call.reply_nfds)
		rc = -EBADMSG;
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

static int export_run(struct cuflag_client *c, int sock, void *arg)
{
	struct export_args *a = arg;
	struct cuflag_msg_export m = { .id = a->s->id };
	uint8_t reply[CUFLAG_MSG_MAX];
	int fd = -1, rc;
	struct cuflag_call call = { .type = CUFLAG_MSG_EXPORT, .body = &m, .blen = sizeof(m),
				    .reply = reply, .reply_fds = &fd, .max_fds = 1 };

	rc = cuflag__request_on(c, sock, &call);
	if (!rc && !call.reply_nfds) {
		/* No handle yet: the reply is the record to make it of. */
		if ((rc = handle_declare(c, sock, a->s, &call)) >= 0) {
			safe_close(a->s->handle_fd);
			a->s->handle_fd = rc;
			rc = (fd = fcntl(rc, F_DUPFD_CLOEXEC, 0)) < 0 ? -errno : 0;
		}
	} else if (!rc && call.reply_nfds != 1) {
		rc = -EBADMSG;
	}
	if (rc) {
		safe_close(fd);
		return rc;
	}
	/* Our copy, for a daemon that restarts (under req_lock: one at a time). */
	if (a->s->handle_fd < 0 && (a->s->handle_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	a->fd = fd;
	return 0;
}

CUFLAG_EXPORT int cuflag_slot_export(cuflag_slot *s, int *fd)
{
	struct export_args a = { .s = s, .fd = -1 };
	int rc;

	if (!s || !fd)
		return -EINVAL;
	if (cuflag__forked(s->c))
		return -ECHILD;
	if (s->imported)
		return -EPERM;
	rc = cuflag__request_retry(s->c, export_run, &a);
	if (rc)
		return rc;
	*fd = a.fd;
	return 0;
}

struct import_args {
	struct cuflag_group *g;
	int fd;
	struct cuflag_slot *out;
};

static int import_run(struct cuflag_client *c, int sock, void *arg)
{
	struct import_args *a = arg;
	struct cuflag_slot_grant g;
	struct cuflag_slot *s;
	int efd, keep, rc;

	keep = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
	if (keep < 0)
		return -errno;
	rc = cuflag__import_on(c, sock, a->g, a->fd, NULL, &g, &efd);
	if (rc) {
		close(keep);
		return rc;
	}
	s = cuflag__slot_new(c, &g, efd);
	if (!s) {
		struct cuflag_msg_free m = { .count = 1, .ids = { g.id } };
		uint8_t reply[CUFLAG_MSG_MAX];
		struct cuflag_call call = { .type = CUFLAG_MSG_FREE, .body = &m,
					    .blen = (uint32_t)cuflag_id_batch_len(1), .reply = reply };
		safe_close(efd);
		close(keep);
		(void)cuflag__request_on(c, sock, &call); /* give it back */
		return -ENOMEM;
	}
	s->imported = 1;
	s->group = a->g;
	s->handle_fd = keep;
	/* Linked before req_lock is let go: a resume hands it over too. */
	cuflag__slot_link(c, s);
	a->out = s;
	return 0;
}

static int import(struct cuflag_client *c, struct cuflag_group *g, int fd, cuflag_slot **out)
{
	struct import_args a = { .g = g, .fd = fd };
	int rc;

	if (!c || !out)
		return -EINVAL;
	if (cuflag__forked(c))
		return -ECHILD;
	/* Before anything is sent: a closed fd is the caller's error, not a
	 * refusal of the daemon's. */
	if (fd < 0 || fcntl(fd, F_GETFD) < 0)
		return -EBADF;
	rc = cuflag__request_retry(c, import_run, &a);
	if (rc)
		return rc;
	*out = a.out;
	return 0;
}

CUFLAG_EXPORT int cuflag_slot_import(cuflag_client *c, int fd, cuflag_slot **out)
{
	return import(c, NULL, fd, out);
}

CUFLAG_EXPORT int cuflag_group_slot_import(cuflag_group *g, int fd, cuflag_slot **out)
{
	return g ? import(g->c, g, fd, out) : -EINVAL;
}
