/* SPDX-License-Identifier: MIT */
/*
 * The in-process scanner, the baseline cuflagd is measured against: one
 * thread in the waiter's own process that spins on the flags of armed slots
 * and writes a slot's eventfd when its flag reaches the armed value. As in the
 * seed's reactor it parks as soon as nothing is armed, spins while something
 * is (yielding between passes after SPIN_PASSES), and is woken by the arm that
 * finds it parked (Dekker pairing: one side always sees the other).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "wake.h"
#include "cpu-relax.h"

#define SPIN_PASSES 10000u
#define MAX_SLOTS 256u

struct inproc_slot {
	volatile uint32_t *flag;
	int efd;
	_Atomic uint32_t armed; /* highest armed target (written by the arming thread) */
	uint32_t signalled;     /* scanner-private: last value signalled */
};

struct inproc_scanner {
	pthread_t thread;
	int wake_efd;
	_Atomic int parked;
	_Atomic int stop;
	unsigned nslots;
	struct inproc_slot slots[MAX_SLOTS];
};

static int after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

/* One pass; returns how many slots are still waiting. */
static unsigned scan(struct inproc_scanner *sc)
{
	unsigned waiting = 0;

	for (unsigned i = 0; i < sc->nslots; i++) {
		struct inproc_slot *s = &sc->slots[i];
		uint32_t armed = atomic_load_explicit(&s->armed, memory_order_acquire);
		uint32_t flag, upto;

		if (!after(armed, s->signalled))
			continue;
		flag = __atomic_load_n(s->flag, __ATOMIC_ACQUIRE);
		upto = after(flag, armed) ? armed : flag;
		if (after(upto, s->signalled)) {
			uint64_t n = (uint32_t)(upto - s->signalled);
			if (write(s->efd, &n, sizeof(n)) != sizeof(n) && errno != EAGAIN)
				bench_say("inproc scanner: eventfd write failed\n");
			s->signalled = upto;
		}
		if (after(armed, s->signalled))
			waiting++;
	}
	return waiting;
}

static void *scanner_main(void *arg)
{
	struct inproc_scanner *sc = arg;
	unsigned passes = 0;

	while (!atomic_load_explicit(&sc->stop, memory_order_relaxed)) {
		uint64_t v;

		if (scan(sc)) {
			if (++passes < SPIN_PASSES)
				cuflag_cpu_relax();
			else
				sched_yield();
			continue;
		}
		passes = 0;
		atomic_store(&sc->parked, 1);
		atomic_thread_fence(memory_order_seq_cst);
		if (scan(sc) || atomic_load_explicit(&sc->stop, memory_order_relaxed)) {
			atomic_store(&sc->parked, 0);
			continue;
		}
		/* Blocking read: an arm that saw "parked" wrote the wake eventfd. */
		if (read(sc->wake_efd, &v, sizeof(v)) < 0 && errno != EINTR)
			bench_say("inproc scanner: wake read failed\n");
		atomic_store(&sc->parked, 0);
	}
	return NULL;
}

int inproc_scanner_start(struct inproc_scanner **out, unsigned nslots,
			 volatile uint32_t *const *flags, const int *efds)
{
	struct inproc_scanner *sc;
	int rc;

	if (nslots > MAX_SLOTS)
		return -EINVAL;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	sc->nslots = nslots;
	/* Each slot starts at its flag's value: nothing armed, nothing to signal. */
	for (unsigned i = 0; i < nslots; i++) {
		uint32_t start = __atomic_load_n(flags[i], __ATOMIC_ACQUIRE);
		sc->slots[i].flag = flags[i];
		sc->slots[i].efd = efds[i];
		sc->slots[i].signalled = start;
		atomic_init(&sc->slots[i].armed, start);
	}
	sc->wake_efd = eventfd(0, EFD_CLOEXEC);
	if (sc->wake_efd < 0) {
		rc = -errno;
		free(sc);
		return rc;
	}
	rc = pthread_create(&sc->thread, NULL, scanner_main, sc);
	if (rc) {
		close(sc->wake_efd);
		free(sc);
		return -rc;
	}
	*out = sc;
	return 0;
}

void inproc_scanner_stop(struct inproc_scanner *sc)
{
	uint64_t one = 1;

	if (!sc)
		return;
	atomic_store(&sc->stop, 1);
	if (write(sc->wake_efd, &one, sizeof(one)) != sizeof(one))
		bench_say("inproc scanner: wake write failed\n");
	pthread_join(sc->thread, NULL);
	close(sc->wake_efd);
	free(sc);
}

void inproc_scanner_arm(struct inproc_scanner *sc, unsigned i, uint32_t t)
{
	uint64_t one = 1;

	atomic_store_explicit(&sc->slots[i].armed, t, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&sc->parked, memory_order_relaxed)) {
		if (write(sc->wake_efd, &one, sizeof(one)) != sizeof(one))
			bench_say("inproc scanner: wake write failed\n");
	}
}
