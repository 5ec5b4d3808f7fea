/* SPDX-License-Identifier: MIT */
#include "loop/server.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/closer.h"
#include "base/config.h"
#include "base/notify.h"
#include "base/region-guard.h"
#include "fd-util.h"
#include "loop/listener.h"
#include "loop/user-mode.h"
#include "proto.h"
#include "serve/answer.h"
#include "serve/export.h"
#include "serve/metrics.h"
#include "serve/queries.h"
#include "serve/session.h"
#include "serve/stuck.h"

/* Fds kept free below the limit for requests that carry fds and for accept. */
#define FD_RESERVE (CUFLAG_BATCH_MAX + 64)

/* Main-loop tick: watchdogs, dropping broken clients, status. Slow enough
 * that an idle daemon costs next to nothing, quick enough that a client
 * stalling the scanner is cut off within a fraction of a second. */
#define TICK_MS 250

static int ep_add(struct server *srv, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };
	return epoll_ctl(srv->ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static void on_scanner_done(struct server *srv)
{
	struct scanner_cmd *list = scanner_take_done(srv->sc);

	while (list) {
		struct scanner_cmd *c = list;
		list = list->next;
		session_on_done(srv, c->owner, c);
	}
	/* The scanner also rings when it found a client broken: drop it now,
	 * not at the next tick, so that its user's cool-down starts at once.
	 * Only then: commands come back far more often than clients break. */
	if (scanner_broken_count(srv->sc) != srv->broken_seen) {
		srv->broken_seen = scanner_broken_count(srv->sc);
		sessions_drop_broken(srv);
	}
}

/* A region lost a page under the daemon (region-guard.h). */
static void on_region_punched(struct server *srv)
{
	uint8_t *map;

	while ((map = guard_take_punched()))
		session_on_punched(srv, map);
}

/* --exit-idle: no connection for that long, and none waiting to be taken
 * either (a client that connected just now keeps the daemon). The socket
 * goes at exit: the next client starts another daemon. */
static void exit_if_idle(struct server *srv, uint64_t now)
{
	if (!idle_exit_due(srv->cfg->exit_idle_s, srv->users.total[USER_CONNS], now,
			   &srv->idle_since_ms))
		return;
	listener_on_accept(srv);
	if (srv->users.total[USER_CONNS]) {
		srv->idle_since_ms = 0;
		return;
	}
	log_notice("no connection for %u s: exiting (--exit-idle)", srv->cfg->exit_idle_s);
	/* The socket goes first: a client that comes while the rest winds down
	 * finds none and starts the next daemon, which waits for our lock
	 * (user-mode.h) instead of connecting to one that no longer accepts. */
	listener_close(srv);
	srv->stopping = 1;
}

static void on_tick(struct server *srv)
{
	uint64_t v, now = cuflag_now_ms();

	if (read(srv->timer_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_err("timerfd: %s", strerror(errno));
	listener_tick(srv);

	/* A client that made its eventfd blocking and full holds the scanner in
	 * write(): interrupt it; the scanner then marks that client broken. */
	scanner_cut_stalled_write(srv->sc);

	sessions_drop_broken(srv);
	sessions_drop_late(srv);
	users_tick(&srv->users, now);
	stuck_tick(srv);
	export_tick(srv, now);
	/* A burst of clients that came and went leaves the heap's free memory
	 * with the daemon: give it back (at most once a tick, after frees). */
	if (srv->freed_since_trim) {
		srv->freed_since_trim = 0;
		malloc_trim(0);
	}
	sessions_expire_parked(srv);
	exit_if_idle(srv, now);

	/* Watchdog: ping only while the scanner makes passes or sits parked. */
	if (srv->watchdog_usec && now - srv->last_ping_ms >= srv->watchdog_usec / 2000) {
		struct scanner_stats st;
		uint64_t hb = scanner_heartbeat(srv->sc);
		scanner_get_stats(srv->sc, &st);
		if (hb != srv->last_heartbeat || st.state == CUFLAG_SCANNER_PARKED) {
			notify_watchdog_ping();
			srv->last_ping_ms = now;
		} else if (cuflagd_ratelimit_ok(&srv->rl)) {
			log_err("scanner made no pass since the last check: watchdog not pinged");
		}
		srv->last_heartbeat = hb;
	}

	if (now - srv->last_status_ms >= 2000) {
		struct daemon_totals t;
		daemon_totals_read(srv, &t);
		notify_status("%u clients, %llu armed slots, %.0f wakes/s", t.clients,
			      (unsigned long long)t.pending,
			      (double)(t.st.wakes - srv->last_wakes) * 1000.0 /
				      (double)(now - srv->last_status_ms));
		srv->last_wakes = t.st.wakes;
		srv->last_status_ms = now;
	}
}

static int on_signal(struct server *srv)
{
	struct signalfd_siginfo si;

	while (read(srv->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGUSR1 && srv->cfg->test_hooks) {
			static int stuck;
			stuck = !stuck;
			log_notice("test hook: scanner %s", stuck ? "frozen" : "released");
			scanner_set_stuck(srv->sc, stuck);
			continue;
		}
		if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM) {
			log_notice("signal %u: shutting down", si.ssi_signo);
			srv->stopping = 1;
		}
	}
	return 0;
}

static void loop_signals(sigset_t *mask)
{
	sigemptyset(mask);
	sigaddset(mask, SIGINT);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, SIGUSR1);
}

void server_block_signals(void)
{
	sigset_t mask;

	loop_signals(&mask);
	sigprocmask(SIG_BLOCK, &mask, NULL);
}

/* The daemon page, the closer threads and the scanner. */
static int start_workers(struct server *srv, const struct cuflagd_config *cfg)
{
	struct scanner_config scfg = {
		.max_sessions = cfg->max_clients,
		.max_slots = (uint64_t)cfg->max_clients * cfg->slots_per_client,
		.max_groups = (uint64_t)cfg->max_clients * cfg->groups_per_client,
		.idle = { .mode = cfg->scanner_mode,
			  .spin_ns = cfg->spin_us * 1000u,
			  .pending_spin_ns = cfg->pending_spin_ms * 1000000u,
			  .pending_poll_ns = cfg->pending_poll_us * 1000u,
			  .backstop_ns = cfg->backstop_us * 1000u },
		.metrics = !cfg->no_metrics,
		.budget = WRITE_BUDGET_DEFAULTS(cfg->write_budget_us * 1000u),
	};
	int rc;

	rc = cuflag_region_layout_make(&srv->layout, cfg->slots_per_client, cfg->queue_size,
				       cfg->groups_per_client, cfg->group_ring,
				       (uint32_t)sysconf(_SC_PAGESIZE));
	if (rc) {
		log_err("no region layout for %u slots and a queue of %u", cfg->slots_per_client,
			cfg->queue_size);
		return rc;
	}
	guard_start(cfg->max_clients, (enum guard_mode)cfg->region_guard);
	rc = daemon_page_create(&srv->dp, srv->epoch);
	if (rc) {
		log_err("cannot create the daemon page: %s", strerror(-rc));
		return rc;
	}
	rc = closer_start(&srv->closer);
	if (rc) {
		log_err("cannot start the closer threads: %s", strerror(-rc));
		return rc;
	}
	rc = scanner_start(&srv->sc, srv->dp.page, &scfg);
	if (rc)
		log_err("cannot start the scanner: %s", strerror(-rc));
	return rc;
}

/* What the node has room for, and one user's part of it (users.h). */
static void set_limits(struct server *srv, const struct cuflagd_config *cfg)
{
	struct users *t = &srv->users;
	/* Fds other than slot and group eventfds: every connection (admin
	 * ones too), every region's wake eventfd, the daemon's own. */
	uint64_t other = (uint64_t)cfg->max_clients * 2 + EXTRA_CONNECTIONS + ADMIN_CONNECTIONS + 64;

	t->rate = cfg->msg_rate_per_uid;
	t->max_pending = cfg->max_pending_per_uid;
	t->loop = answer_budget;
	t->cap[USER_CONNS] = cfg->max_clients + EXTRA_CONNECTIONS;
	t->user_cap[USER_CONNS] = cfg->max_connections_per_uid;
	t->cap[USER_REGIONS] = cfg->max_clients;
	t->user_cap[USER_REGIONS] = cfg->max_clients_per_uid;
	t->cap[USER_FDS] = srv->fd_reserve_from == INT32_MAX ? UINT32_MAX
			   : (uint64_t)srv->fd_reserve_from > other
				   ? (uint32_t)(srv->fd_reserve_from - other)
				   : 0;
	t->user_cap[USER_FDS] = cfg->max_slots_per_uid;
}

int server_init(struct server *srv, const struct cuflagd_config *cfg)
{
	struct itimerspec its = { .it_interval = { 0, TICK_MS * 1000000L },
				  .it_value = { 0, TICK_MS * 1000000L } };
	struct timespec wall;
	struct rlimit rl;
	sigset_t mask;
	int rc;

	memset(srv, 0, sizeof(*srv));
	srv->cfg = cfg;
	srv->ep = srv->listen_fd = srv->sig_fd = srv->timer_fd = -1;
	srv->dp.fd = -1;
	srv->user_lock_fd = -1;
	srv->tag_listen.kind = EP_LISTEN;
	srv->tag_signal.kind = EP_SIGNAL;
	srv->tag_timer.kind = EP_TIMER;
	srv->tag_scanner.kind = EP_SCANNER;
	srv->tag_guard.kind = EP_GUARD;
	srv->rl = (struct cuflagd_ratelimit){ .interval_ms = 1000, .burst = 20 };
	srv->start_ms = srv->last_status_ms = srv->last_ping_ms = cuflag_now_ms();
	/* The wall clock once: the start time shown stays the same however
	 * the clock is set later. */
	clock_gettime(CLOCK_REALTIME, &wall);
	srv->start_unix_ms = (uint64_t)wall.tv_sec * 1000u + (uint64_t)wall.tv_nsec / 1000000u;
	if (getrandom(&srv->epoch, sizeof(srv->epoch), 0) != sizeof(srv->epoch))
		srv->epoch = cuflag_now_ns() ^ ((uint64_t)getpid() << 32);

	/* Signals: the scanner inherits this mask; SIGUSR2 stays deliverable
	 * (write-police.h). */
	signal(SIGPIPE, SIG_IGN);
	loop_signals(&mask);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if ((rc = start_workers(srv, cfg)))
		return rc;

	srv->sig_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	srv->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	srv->ep = epoll_create1(EPOLL_CLOEXEC);
	if (srv->sig_fd < 0 || srv->timer_fd < 0 || srv->ep < 0)
		return -errno;
	if (timerfd_settime(srv->timer_fd, 0, &its, NULL) < 0)
		return -errno;
	/* The socket last: a client that can connect finds the daemon whole. */
	if ((rc = listener_open(srv)) || (rc = ep_add(srv, srv->listen_fd, &srv->tag_listen)) ||
	    (rc = ep_add(srv, srv->sig_fd, &srv->tag_signal)) ||
	    (rc = ep_add(srv, srv->timer_fd, &srv->tag_timer)) ||
	    (rc = ep_add(srv, scanner_done_fd(srv->sc), &srv->tag_scanner)) ||
	    (guard_fd() >= 0 && (rc = ep_add(srv, guard_fd(), &srv->tag_guard))))
		return rc;
	srv->watchdog_usec = notify_watchdog_usec();
	srv->fd_reserve_from = INT32_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < INT32_MAX)
		srv->fd_reserve_from = (int)rl.rlim_cur - FD_RESERVE;
	set_limits(srv, cfg);
	return 0;
}

/* --ready-fd: whoever started the daemon learns that it serves (and, when
 * the fd closes without it, that it failed to start). */
static void tell_ready(const struct cuflagd_config *cfg)
{
	static const char ready[] = "READY=1\n";
	int fd = (int)cfg->ready_fd;

	if (cfg->ready_fd == READY_FD_NONE)
		return;
	if (write(fd, ready, sizeof(ready) - 1) != (ssize_t)sizeof(ready) - 1)
		log_warn("--ready-fd %d: %s", fd, strerror(errno));
	close(fd);
}

int server_run(struct server *srv)
{
	struct epoll_event ev[64];

	notify_ready();
	tell_ready(srv->cfg);
	log_notice("ready: max %u clients x %u slots, spin %llu us, epoch %016llx",
		   srv->cfg->max_clients, srv->cfg->slots_per_client,
		   (unsigned long long)srv->cfg->spin_us, (unsigned long long)srv->epoch);
	while (!srv->stopping) {
		int n = epoll_wait(srv->ep, ev, 64, answers_timeout_ms(srv));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err("epoll_wait: %s", strerror(errno));
			return -errno;
		}
		for (int i = 0; i < n && !srv->stopping; i++) {
			const struct ep_tag *tag = ev[i].data.ptr;
			switch (tag->kind) {
			case EP_LISTEN:
				listener_on_accept(srv);
				break;
			case EP_SIGNAL:
				on_signal(srv);
				break;
			case EP_TIMER:
				on_tick(srv);
				break;
			case EP_SCANNER:
				on_scanner_done(srv);
				break;
			case EP_GUARD:
				on_region_punched(srv);
				break;
			case EP_CLIENT:
				session_on_event(srv, ev[i].data.ptr, ev[i].events);
				break;
			}
		}
		/* Long answers between batches of events, a slice at a time. */
		sessions_run_answers(srv);
		session_free_graveyard(srv);
	}
	notify_stopping();
	return 0;
}

void server_fini(struct server *srv)
{
	/* Stop the scanner first: then nothing else reads a region. */
	if (srv->sc)
		scanner_stop(srv->sc);
	srv->sc = NULL;
	if (srv->closer) {
		session_free_all(srv);
		export_fini(srv);
	}
	closer_stop(srv->closer);
	srv->closer = NULL;
	users_clear(&srv->users);
	metrics_totals_free(&srv->totals);
	listener_close(srv);
	user_mode_fini(srv); /* after the socket went: the next daemon may start */
	srv->sig_fd = safe_close(srv->sig_fd);
	srv->timer_fd = safe_close(srv->timer_fd);
	srv->ep = safe_close(srv->ep);
	daemon_page_destroy(&srv->dp);
	guard_stop();
}