/* SPDX-License-Identifier: MIT */
/*
 * The scanner as the main thread sees it: starting and stopping the thread,
 * the arrays it is given once and never reallocates, and a session's view
 * of a region before it is handed over (scanner/pass.c is the thread itself).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "fd-util.h"
#include "scanner/private.h"

size_t scanner_session_size(const struct cuflag_region_layout *l)
{
	return sizeof(struct scanner_session) + sizeof(struct scanner_slot) * (size_t)l->nslots +
	       sizeof(struct scanner_group) * (size_t)l->ngroups;
}

void scanner_session_init(struct scanner_session *ss, const struct cuflag_region_layout *l,
			  uint8_t *base, volatile uint32_t *flags, int wake_fd,
			  struct scanner_user *user)
{
	memset(ss, 0, scanner_session_size(l));
	ss->layout = *l;
	ss->base = base;
	ss->head = (_Atomic uint32_t *)(base + l->head_off);
	ss->tail = (_Atomic uint32_t *)(base + l->tail_off);
	ss->arm_time = (_Atomic uint64_t *)(base + l->tail_off + CUFLAG_REGION_ARM_TIME_OFF);
	ss->queue = (struct cuflag_arm *)(base + l->queue_off);
	ss->flags = flags;
	ss->states = (volatile struct cuflag_slot_state *)(base + l->state_off);
	ss->wake_fd = wake_fd;
	ss->user = user;
	ss->slots = (struct scanner_slot *)(ss + 1);
	for (uint32_t i = 0; i < l->nslots; i++) {
		ss->slots[i].pend_idx = SCAN_NOT_PENDING;
		ss->slots[i].efd = -1;
		ss->slots[i].sess = ss;
	}
	ss->groups = (struct scanner_group *)(ss->slots + l->nslots);
	for (uint32_t g = 0; g < l->ngroups; g++) {
		ss->groups[g].ring = (volatile struct cuflag_group_ring *)(base + l->groups_off +
									   (size_t)g * l->ring_size);
		ss->groups[g].efd = -1;
		ss->groups[g].sess = ss;
	}
}

static void scanner_free(struct scanner *sc)
{
	safe_close(sc->cmd_efd);
	safe_close(sc->done_efd);
	safe_close(sc->park_ep);
	free(sc->sessions);
	free(sc->pending);
	free(sc->cold);
	free(sc->rang);
	pthread_mutex_destroy(&sc->lock);
	free(sc);
}

int scanner_start(struct scanner **out, struct cuflag_daemon_page *dpage,
		  const struct scanner_config *cfg)
{
	uint32_t max_sessions = cfg->max_sessions;
	uint64_t max_slots = cfg->max_slots, max_groups = cfg->max_groups;
	struct scanner *sc = calloc(1, sizeof(*sc));
	struct epoll_event ev = { .events = EPOLLIN };
	int r;

	if (!sc)
		return -ENOMEM;
	sc->dpage = dpage;
	sc->cfg = *cfg;
	if (!sc->cfg.share_quantum_ns)
		sc->cfg.share_quantum_ns = FAIR_SHARE_QUANTUM_NS;
	sc->few_cpus = sysconf(_SC_NPROCESSORS_ONLN) <= 4;
	sc->max_sessions = max_sessions;
	sc->max_pending = max_slots;
	sc->cmd_efd = sc->done_efd = sc->park_ep = -1;
	sc->start_ns = cuflag_now_ns();
	pthread_mutex_init(&sc->lock, NULL);
	sc->sessions = calloc(max_sessions ? max_sessions : 1, sizeof(*sc->sessions));
	sc->pending = calloc(max_slots ? max_slots : 1, sizeof(*sc->pending));
	sc->cold = calloc(max_slots ? max_slots : 1, sizeof(*sc->cold));
	sc->rang = calloc(max_groups ? max_groups : 1, sizeof(*sc->rang));
	sc->cold_next_ns = UINT64_MAX;
	if (!sc->sessions || !sc->pending || !sc->cold || !sc->rang) {
		r = -ENOMEM;
		goto fail;
	}
	sc->cmd_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sc->done_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sc->park_ep = epoll_create1(EPOLL_CLOEXEC);
	if (sc->cmd_efd < 0 || sc->done_efd < 0 || sc->park_ep < 0) {
		r = -errno;
		goto fail;
	}
	ev.data.fd = sc->cmd_efd;
	if (epoll_ctl(sc->park_ep, EPOLL_CTL_ADD, sc->cmd_efd, &ev) < 0) {
		r = -errno;
		goto fail;
	}
	scanner_set_state(sc, CUFLAG_SCANNER_SPINNING);
	police_install_signal();
	r = -pthread_create(&sc->thread, NULL, scanner_main, sc);
	if (r)
		goto fail;
	pthread_setname_np(sc->thread, "cuflagd-scan");
	*out = sc;
	return 0;
fail:
	scanner_free(sc);
	return r;
}

void scanner_stop(struct scanner *sc)
{
	if (!sc)
		return;
	atomic_store(&sc->stop, 1);
	mailbox_kick(sc);
	pthread_join(sc->thread, NULL);
	mailbox_free_all(sc);
	/* Freed slots still retiring hold their commands: the main thread will
	 * not see them again. */
	for (uint64_t i = 0; i < sc->npending; i++) {
		free(sc->pending[i]->retire_cmd);
		sc->pending[i]->retire_cmd = NULL;
	}
	for (uint64_t i = 0; i < sc->ncold; i++) {
		free(sc->cold[i].slot->retire_cmd);
		sc->cold[i].slot->retire_cmd = NULL;
	}
	for (uint32_t i = 0; i < sc->nsessions; i++)
		for (uint32_t k = 0; sc->sessions[i]->waiting && k < sc->sessions[i]->layout.nslots; k++) {
			free(sc->sessions[i]->slots[k].retire_cmd);
			sc->sessions[i]->slots[k].retire_cmd = NULL;
		}
	scanner_free(sc);
}

void scanner_cut_stalled_write(struct scanner *sc)
{
	police_backstop(&sc->police, sc->thread);
}

void scanner_set_stuck(struct scanner *sc, int stuck)
{
	atomic_store(&sc->stuck, stuck);
	mailbox_kick(sc);
}
