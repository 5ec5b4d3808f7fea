/* SPDX-License-Identifier: MIT */
/*
 * The price of crossing a process boundary on this machine, the relay of
 * perf-handoff's two rows. A relay spins on the flag while something is armed, writes the
 * eventfd the waiter blocks on, and parks as soon as nothing is armed (the
 * arm that finds it parked wakes it). During these rows the relay and the
 * waiter are pinned to one CPU and the storing thread to another, so every
 * wake is a switch on one CPU, and the two rows differ only in whose address
 * space the relay runs in:
 *   handoff-thread   the relay is a thread of the waiter's process
 *   handoff-process  the relay is a child process running the same code
 * Every waker in another process, cuflagd included, pays at least the second.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handoff.h"
#include "perf.h"
#include "cpu-relax.h"

/* One page shared with the relay; each word on its own cache line, so the
 * relay's reads of one do not slow the writers of another. */
struct handoff_page {
	_Alignas(64) _Atomic uint32_t armed; /* written by the waiter */
	_Alignas(64) uint32_t flag;           /* written by the storing thread */
	_Alignas(64) _Atomic int parked;      /* written by the relay */
	_Alignas(64) _Atomic int stop;
};

struct handoff {
	struct handoff_page *page;
	int efd;      /* what the waiter polls; the relay writes it */
	int wake_efd; /* wakes a parked relay */
	pid_t pid;    /* the relay process, or 0 */
	pthread_t thread;
	int have_thread;
};

static void relay_loop(struct handoff_page *p, int efd, int wake_efd)
{
	uint32_t signalled = atomic_load(&p->armed);

	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		uint32_t armed = atomic_load_explicit(&p->armed, memory_order_acquire);
		uint64_t v = 1;

		if (armed != signalled) {
			if (__atomic_load_n(&p->flag, __ATOMIC_ACQUIRE) != armed) {
				cuflag_cpu_relax();
				continue;
			}
			/* Non-blocking eventfd: a full counter is the waiter's concern. */
			if (write(efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				return;
			signalled = armed;
			continue;
		}
		/* Park: publish, full fence, look again (the arm does the mirror). */
		atomic_store(&p->parked, 1);
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load(&p->armed) == signalled && !atomic_load(&p->stop) &&
		    read(wake_efd, &v, sizeof(v)) < 0 && errno != EINTR)
			return;
		atomic_store(&p->parked, 0);
	}
}

static void *relay_thread(void *arg)
{
	struct handoff *h = arg;

	relay_loop(h->page, h->efd, h->wake_efd);
	return NULL;
}

int handoff_start(struct handoff **out, int process)
{
	struct handoff *h = calloc(1, sizeof(*h));
	int rc = 0;

	if (!h)
		return -ENOMEM;
	h->efd = h->wake_efd = -1;
	h->page = mmap(NULL, sizeof(*h->page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	if (h->page == MAP_FAILED) {
		h->page = NULL;
		rc = -errno;
		goto fail;
	}
	h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	h->wake_efd = eventfd(0, EFD_CLOEXEC);
	if (h->efd < 0 || h->wake_efd < 0) {
		rc = -errno;
		goto fail;
	}
	if (!process) {
		rc = -pthread_create(&h->thread, NULL, relay_thread, h);
		if (rc)
			goto fail;
		h->have_thread = 1;
		*out = h;
		return 0;
	}
	/* The caller has no other thread yet, so the child may run freely. */
	h->pid = fork();
	if (h->pid < 0) {
		rc = -errno;
		h->pid = 0;
		goto fail;
	}
	if (h->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		relay_loop(h->page, h->efd, h->wake_efd);
		_exit(0);
	}
	*out = h;
	return 0;
fail:
	handoff_stop(h);
	return rc;
}

void handoff_stop(struct handoff *h)
{
	uint64_t one = 1;

	if (!h)
		return;
	if (h->page) {
		atomic_store(&h->page->stop, 1);
		if (h->wake_efd >= 0 && write(h->wake_efd, &one, sizeof(one)) != sizeof(one))
			bench_say("handoff: wake write failed\n");
	}
	if (h->have_thread)
		pthread_join(h->thread, NULL);
	if (h->pid > 0)
		bench_reap(h->pid, 0);
	safe_close(h->efd);
	safe_close(h->wake_efd);
	if (h->page)
		munmap(h->page, sizeof(*h->page));
	free(h);
}

uint32_t handoff_arm(struct handoff *h)
{
	uint64_t one = 1;
	uint32_t t = atomic_fetch_add(&h->page->armed, 1) + 1;

	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&h->page->parked, memory_order_relaxed) &&
	    write(h->wake_efd, &one, sizeof(one)) != sizeof(one))
		bench_say("handoff: wake write failed\n");
	return t;
}

int handoff_fd(const struct handoff *h)
{
	return h->efd;
}

volatile uint32_t *handoff_flag(struct handoff *h)
{
	return &h->page->flag;
}
