/* SPDX-License-Identifier: MIT */
/*
 * Completions across processes: exporting a slot as an fd, importing one,
 * and handing both to a daemon that restarted.
 *
 * The handle is a file the daemon made; the library keeps a copy of it for
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
#include <unistd.h>

#include "client-private.h"
#include "fd-util.h"

struct export_args {
	struct cuflag_slot *s;
	int fd;
};

static int export_run(struct cuflag_client *c, int sock, void *arg)
{
	struct export_args *a = arg;
	struct cuflag_msg_export m = { .id = a->s->id };
	uint8_t reply[CUFLAG_MSG_MAX];
	int fd = -1, rc;
	struct cuflag_call call = { .type = CUFLAG_MSG_EXPORT, .body = &m, .blen = sizeof(m),
				    .reply = reply, .reply_fds = &fd, .max_fds = 1 };

	rc = cuflag__request_on(c, sock, &call);
	if (!rc && call.reply_nfds != 1)
		rc = -EBADMSG;
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
