/* SPDX-License-Identifier: MIT */
/* Connecting to cuflagd (HELLO, the region made and sealed by us, ATTACH)
 * and disconnecting; requests are request.c's, resuming is resume.c's. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client-private.h"
#include "fd-util.h"
#include "unix-socket.h"
#include "user-daemon.h"

/* A user's own daemon that exits for want of clients just as we connect
 * hangs up on our HELLO: connecting again starts another. */
#define USER_DAEMON_TRIES 3

CUFLAG_EXPORT const char *cuflag_version(void)
{
	return CUFLAG_VERSION;
}

CUFLAG_EXPORT const char *cuflag_connect_hint(int err)
{
	const char *h = cuflag__reach_hint(err);

	return h ? h : cuflag_unix_connect_hint(err);
}

CUFLAG_EXPORT int cuflag_client_fd(const cuflag_client *c)
{
	return c ? c->sock : -EINVAL;
}

CUFLAG_EXPORT uint64_t cuflag_client_epoch(const cuflag_client *c)
{
	return c ? __atomic_load_n(&c->epoch, __ATOMIC_RELAXED) : 0;
}

/*
 * Make the region the daemon's HELLO reply describes: a memfd with every
 * page allocated by us (so its memory is charged to this process, not to the
 * daemon), the header written, sealed against shrink, grow and further
 * seals, and mapped.
 */
static int make_region(struct cuflag_client *c, const struct cuflag_msg_hello_reply *r)
{
	long page = sysconf(_SC_PAGESIZE);
	struct cuflag_region_hdr hdr;
	const char *why;
	int fd, rc;

	cuflag_region_layout_from_reply(&c->layout, r);
	if (cuflag_region_layout_check(&c->layout, r->region_size, (uint32_t)page, &why))
		return -EBADMSG;
	c->by_id = calloc(c->layout.nslots, sizeof(*c->by_id));
	c->groups = calloc(c->layout.ngroups ? c->layout.ngroups : 1, sizeof(*c->groups));
	if (!c->by_id || !c->groups)
		return -ENOMEM;
	fd = memfd_create("cuflag-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	c->region_fd = fd;
	if (ftruncate(fd, (off_t)c->layout.size) < 0 ||
	    fallocate(fd, 0, 0, (off_t)c->layout.size) < 0)
		return -errno;
	c->region = mmap(NULL, c->layout.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (c->region == MAP_FAILED) {
		c->region = NULL;
		return -errno;
	}
	cuflag_region_hdr_make(&hdr, &c->layout);
	memcpy(c->region, &hdr, sizeof(hdr));
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = -errno;
		return rc;
	}
	c->head = (_Atomic uint32_t *)(c->region + c->layout.head_off);
	c->tail = (_Atomic uint32_t *)(c->region + c->layout.tail_off);
	c->arm_time = (_Atomic uint64_t *)(c->region + c->layout.tail_off +
					   CUFLAG_REGION_ARM_TIME_OFF);
	c->queue = (struct cuflag_arm *)(c->region + c->layout.queue_off);
	c->flags = (volatile uint32_t *)(c->region + c->layout.flags_off);
	c->states = (volatile struct cuflag_slot_state *)(c->region + c->layout.state_off);
	c->tail_local = 0;
	c->head_seen = 0;
	return 0;
}

static void client_free(struct cuflag_client *c)
{
	/* A child of fork has no CUDA state of its own to undo. */
	if (!cuflag__forked(c))
		cuflag__ipc_unmap(c);
	if (c->region)
		munmap(c->region, c->layout.size);
	if (c->dpage)
		munmap((void *)c->dpage, c->dpage_size);
	while (c->retired) {
		struct retired_page *r = c->retired;
		c->retired = r->next;
		munmap((void *)r->page, r->size);
		free(r);
	}
	c->wake_fd = safe_close(c->wake_fd);
	c->region_fd = safe_close(c->region_fd);
	c->sock = safe_close(c->sock);
	pthread_mutex_destroy(&c->req_lock);
	pthread_mutex_destroy(&c->arm_lock);
	pthread_mutex_destroy(&c->slots_lock);
	pthread_mutex_destroy(&c->resume_lock);
	cuflag__dispatch_free(c);
	free(c->by_id);
	free(c->groups);
	free(c);
}

/* ATTACH a new region: hand the daemon our region and wake eventfd. */
static int attach_new(struct cuflag_client *c, uint64_t flags_size)
{
	struct cuflag_msg_attach m = { 0 };
	uint8_t reply[CUFLAG_MSG_MAX];
	int give[2] = { c->region_fd, c->wake_fd }, fd = -1, rc;
	struct cuflag_call call = { .type = CUFLAG_MSG_ATTACH, .body = &m, .blen = sizeof(m),
				    .fds = give, .nfds = 2, .reply = reply, .reply_fds = &fd,
				    .max_fds = 1 };

	rc = cuflag__request_on(c, c->sock, &call);
	if (rc)
		return rc;
	/* cuda-ipc: the flags live in a CUDA allocation, not in the region. */
	if (c->slab == CUFLAG_SLAB_CUDA_IPC)
		rc = call.reply_nfds == 1 ? cuflag__ipc_map(c, fd, flags_size) : -EBADMSG;
	safe_close(fd);
	return rc;
}

/* One connect to the daemon reach names (or, first, the one chosen for
 * socket_path): HELLO, the region, ATTACH. */
static int connect_once(const char *socket_path, struct cuflag_reach *reach, cuflag_client **out)
{
	struct cuflag_msg_hello_reply r;
	struct cuflag_client *c;
	int sock, rc;

	sock = cuflag__reach_connect(socket_path, reach);
	if (sock < 0)
		return sock;
	c = calloc(1, sizeof(*c));
	if (!c) {
		safe_close(sock);
		return -ENOMEM;
	}
	c->fork_gen = cuflag__fork_gen();
	c->wake_fd = c->region_fd = c->attempt.sock = c->dispatch_ep = -1;
	c->resume_timeout_ms = CUFLAG_RESUME_TIMEOUT_MS;
	memcpy(c->path, reach->path, sizeof(c->path));
	c->user_daemon = reach->user;
	pthread_mutex_init(&c->req_lock, NULL);
	pthread_mutex_init(&c->arm_lock, NULL);
	pthread_mutex_init(&c->slots_lock, NULL);
	pthread_mutex_init(&c->resume_lock, NULL);
	pthread_mutex_init(&c->dispatch_lock, NULL);
	c->sock = sock;
	rc = cuflag__hello(c, c->sock, &r, &c->dpage, &c->dpage_size);
	if (rc) {
		cuflag__reach_refused(reach->path, rc);
		goto fail;
	}
	c->epoch = r.epoch;
	c->slab = (int)r.slab;
	rc = make_region(c, &r);
	if (rc)
		goto fail;
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake_fd < 0) {
		rc = -errno;
		goto fail;
	}
	rc = attach_new(c, r.flags_size);
	if (rc)
		goto fail;
	*out = c;
	return 0;
fail:
	client_free(c);
	return rc;
}

CUFLAG_EXPORT int cuflag_connect(const char *socket_path, cuflag_client **out)
{
	struct cuflag_reach reach;
	int rc;

	if (!out)
		return -EINVAL;
	cuflag__watch_forks();
	for (int tries = 1;; tries++) {
		rc = connect_once(socket_path, &reach, out);
		if (!rc || !reach.user || !cuflag__gone_error(rc) || tries == USER_DAEMON_TRIES)
			return rc;
	}
}

CUFLAG_EXPORT int cuflag_client_set_resume_timeout(cuflag_client *c, int timeout_ms)
{
	if (!c || timeout_ms < -1)
		return -EINVAL;
	atomic_store(&c->resume_timeout_ms, timeout_ms);
	return 0;
}

CUFLAG_EXPORT void cuflag_disconnect(cuflag_client *c)
{
	if (!c)
		return;
	/* Hanging up frees every slot in the daemon: no request per slot. */
	while (c->slots) {
		struct cuflag_slot *s = c->slots;
		c->slots = s->next_slot;
		cuflag__slot_free(s);
	}
	for (uint32_t g = 0; c->groups && g < c->layout.ngroups; g++)
		cuflag__group_free(c->groups[g]);
	if (c->cuda_fini && !cuflag__forked(c))
		c->cuda_fini(c);
	client_free(c);
}

