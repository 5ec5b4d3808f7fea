/* SPDX-License-Identifier: MIT */
/* The forks this process descends from: a client belongs to the process that
 * connected it (cuflag__forked() in client-private.h). */
#include <pthread.h>
#include <stdatomic.h>

#include "fork.h"

static _Atomic unsigned fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
	atomic_fetch_add_explicit(&fork_gen, 1, memory_order_relaxed);
}

static void watch_forks(void)
{
	/* Cannot fail for want of memory in glibc; if it did, forks go unseen. */
	(void)pthread_atfork(NULL, NULL, on_fork_child);
}

unsigned cuflag__fork_gen(void)
{
	return atomic_load_explicit(&fork_gen, memory_order_relaxed);
}

void cuflag__watch_forks(void)
{
	pthread_once(&fork_once, watch_forks);
}
