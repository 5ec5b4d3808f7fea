/* SPDX-License-Identifier: MIT */
#include "scanner/write-police.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "clock.h"
#include "scanner/scanner.h"

static void on_sigusr2(int sig)
{
	(void)sig; /* only interrupts the scanner's blocked write */
}

void police_install_signal(void)
{
	struct sigaction sa = { .sa_handler = on_sigusr2 };

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR2, &sa, NULL) < 0)
		log_err("scanner: no SIGUSR2 handler: %s", strerror(errno));
}

void police_tick(struct write_police *p, int on)
{
	struct itimerspec its = { 0 };

	if (!p->have_tick || p->tick_on == on)
		return;
	if (on) {
		its.it_value.tv_nsec = WRITE_TICK_NS;
		its.it_interval.tv_nsec = WRITE_TICK_NS;
	}
	if (timer_settime(p->tick, 0, &its, NULL) < 0)
		log_err("scanner: write tick: %s", strerror(errno));
	else
		p->tick_on = on;
}

/* In the scanner thread: a timer that signals this thread only. */
void police_start(struct write_police *p, const struct write_budget_cfg *cfg)
{
	struct sigevent sev;

	p->cfg = cfg;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGUSR2;
	sev._sigev_un._tid = gettid();
	if (timer_create(CLOCK_MONOTONIC, &sev, &p->tick) < 0) {
		log_warn("scanner: no write tick (%s): a blocked write is cut after 50-300 ms",
			 strerror(errno));
		return;
	}
	p->have_tick = 1;
	police_tick(p, 1);
}

void police_stop(struct write_police *p)
{
	if (p->have_tick)
		timer_delete(p->tick);
	p->have_tick = 0;
}

enum scanner_broken police_write(struct write_police *p, struct scanner_user *u, int efd,
				 uint64_t v, uint64_t *cost_ns)
{
	const struct write_budget_cfg *cfg = p->cfg;
	uint64_t t0 = cuflag_now_ns(), t1, c0 = 0, cost;
	int cpu = budget_suspect(&u->budget, t0);
	ssize_t w;

	*cost_ns = 0;
	if (u->cut_at_ns && t0 - u->cut_at_ns < CUT_WATCH_NS) {
		/* The same attack again, caught before it costs anyone a tick
		 * (a full counter on a non-blocking fd only fails the write). */
		struct pollfd pf = { .fd = efd, .events = POLLOUT };
		if (poll(&pf, 1, 0) != 1 || !(pf.revents & POLLOUT))
			return fcntl(efd, F_GETFL) & O_NONBLOCK ? BROKEN_FULL : BROKEN_STALL;
	}
	if (cpu)
		c0 = cuflag_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	atomic_store_explicit(&p->write_since_ns, t0, memory_order_relaxed);
	w = write(efd, &v, sizeof(v));
	atomic_store_explicit(&p->write_since_ns, 0, memory_order_relaxed);
	t1 = cuflag_now_ns();
	cost = t1 - t0;
	*cost_ns = cost;
	if (w != (ssize_t)sizeof(v)) {
		if (w < 0 && errno == EINTR) {
			u->cut_at_ns = t1;
			return BROKEN_STALL;
		}
		return BROKEN_FULL;
	}
	atomic_fetch_add_explicit(&p->writes, 1, memory_order_relaxed);
	if (cpu) {
		/* A write cannot have run longer than it took; where the CPU clock
		 * says so (seen under nested virtualisation), it is the clock's
		 * error, not the write's cost. */
		uint64_t c = cuflag_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		cost = c < cost ? c : cost;
	}
	/* What the share charges: the CPU time of a suspect's write, and no
	 * more than the allowance for a write timed on the wall clock only
	 * (it made the suspect: preempted, or costly, the CPU clock tells from
	 * the next write on). The scanner preempted is no user's cost. */
	*cost_ns = cpu || cost <= cfg->allowance_ns ? cost : cfg->allowance_ns;
	return budget_charge(&u->budget, cfg, cost, cpu, t1) ? BROKEN_COST : BROKEN_NONE;
}

void police_backstop(struct write_police *p, pthread_t thread)
{
	uint64_t since = atomic_load_explicit(&p->write_since_ns, memory_order_relaxed);

	if (since && cuflag_now_ns() - since > WRITE_STALL_NS)
		pthread_kill(thread, SIGUSR2);
}
