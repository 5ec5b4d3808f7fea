/* SPDX-License-Identifier: MIT */
#include "server.h"

#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include "export.h"
#include "fair-share.h"
#include "fd-util.h"
#include "fdpass.h"
#include "group-name.h"
#include "notify.h"
#include "proto.h"
#include "region-guard.h"
#include "request.h"
#include "socket-perms.h"
#include "stuck.h"

/* Fds kept free below the limit for requests that carry fds and for accept. */
#define FD_RESERVE (CUFLAG_BATCH_MAX + 64)

/* Connections beyond the region limit, for cuflagctl and refused clients;
 * root and the admin group have a few more of their own beyond that. */
#define EXTRA_CONNECTIONS 64
#define ADMIN_CONNECTIONS 16
/* Main-loop tick: watchdogs, dropping broken clients, status. Slow enough
 * that an idle daemon costs next to nothing, quick enough that a client
 * stalling the scanner is cut off within a fraction of a second. */
#define TICK_MS 250
/* An eventfd write taking longer than this means a client made it block. */

/* ---------------------------------------------------------------- */
/* The listening socket                                              */
/* ---------------------------------------------------------------- */

/*
 * Whether a daemon answers on path. A socket file nobody listens on is stale
 * (ECONNREFUSED) and may be replaced; a live one is never stolen.
 */
static int socket_is_live(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int live;

	if (fd < 0)
		return -errno;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	live = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 1
	       : errno == ECONNREFUSED || errno == ENOENT ? 0 : -errno;
	close(fd);
	return live;
}

static int listen_on_path(struct server *srv, const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, rc;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	socket_dir_make(path, srv->cfg);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_err("%s exists and is not a socket; not replacing it", path);
			return -EEXIST;
		}
		rc = socket_is_live(path);
		if (rc > 0) {
			log_err("%s: another daemon is listening there", path);
			return -EADDRINUSE;
		}
		if (rc < 0) {
			log_err("%s: cannot tell whether it is in use: %s", path, strerror(-rc));
			return rc;
		}
		log_notice("%s: replacing a stale socket", path);
		if (unlink(path) < 0 && errno != ENOENT)
			return -errno;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Created with its mode from the start: no window where it is wider. */
	old = umask(socket_umask(srv->cfg));
	rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
	umask(old);
	if (rc == 0 && (rc = socket_own(path, srv->cfg)) < 0) {
		log_err("%s: cannot give it group %lld: %s", path, (long long)srv->cfg->socket_gid,
			strerror(-rc));
		unlink(path);
		close(fd);
		return rc;
	}
	if (rc < 0 || listen(fd, 128) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	srv->unlink_path = path;
	return fd;
}

/* ---------------------------------------------------------------- */
/* Loop                                                              */
/* ---------------------------------------------------------------- */

static int ep_add(struct server *srv, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };
	return epoll_ctl(srv->ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* Root, or a member of --admin-group (its primary or a supplementary group). */
static int peer_is_admin(const struct server *srv, int fd, const struct ucred *c)
{
	gid_t groups[256];
	socklen_t len = sizeof(groups);
	int64_t admin = srv->cfg->admin_gid;

	if (c->uid == 0)
		return 1;
	if (admin < 0)
		return 0;
	if ((int64_t)c->gid == admin)
		return 1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
		return 0;
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if ((int64_t)groups[i] == admin)
			return 1;
	return 0;
}

/* Whether a new connection of this peer may stay; why not, if not. Root and
 * the admin group are held only to the node's cap, with room of their own
 * beyond it. */
static const char *connection_refusal(struct server *srv, const struct ucred *c, int admin)
{
	struct users *t = &srv->users;
	enum user_refusal r;

	if (admin)
		return t->total[USER_CONNS] >= t->cap[USER_CONNS] + ADMIN_CONNECTIONS
			       ? users_refusal_why(USER_CONNS, USER_NODE_FULL)
			       : NULL;
	r = users_admit(t, user_find(t, c->uid), c->uid, USER_CONNS, 1);
	return r ? users_refusal_why(USER_CONNS, r) : NULL;
}

/* A connection refused before it is a session: the line is its user's. */
static void refuse_connection(struct server *srv, int fd, const struct ucred *c, const char *why)
{
	struct user *u = user_get(&srv->users, c->uid, cuflag_now_ms());

	if (!u || user_log_ok(u, LOG_WARNING))
		log_warn("connection from pid=%d uid=%u refused: %s (%u open)", (int)c->pid,
			 (unsigned)c->uid, why, srv->users.total[USER_CONNS]);
	user_put(&srv->users, u);
	request_refuse_connection(fd, -EUSERS, why);
	closer_close_connection(srv->closer, fd);
}

static void on_accept(struct server *srv)
{
	for (;;) {
		int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred c = { .pid = -1, .uid = (uid_t)-1, .gid = (gid_t)-1 };
		socklen_t l = sizeof(c);
		const char *why;
		int admin;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && cuflagd_ratelimit_ok(&srv->rl))
				log_err("accept: %s", strerror(errno));
			if (errno == EMFILE || errno == ENFILE) {
				/* Out of fds: the socket stays readable, so stop looking
				 * at it until the next tick instead of spinning on it. */
				struct epoll_event ev = { .events = 0, .data.ptr = &srv->tag_listen };
				epoll_ctl(srv->ep, EPOLL_CTL_MOD, srv->listen_fd, &ev);
				srv->listen_paused = 1;
			}
			return;
		}
		getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &l);
		admin = peer_is_admin(srv, fd, &c);
		why = connection_refusal(srv, &c, admin);
		if (why) {
			refuse_connection(srv, fd, &c, why);
			continue;
		}
		struct session *s = session_new(srv, fd, c.pid, c.uid, c.gid, admin);
		if (!s || ep_add(srv, fd, s)) {
			log_err("cannot take a connection: out of memory");
			if (s)
				session_drop(srv, s, 0, NULL);
			else
				closer_close_connection(srv->closer, fd);
			continue;
		}
		ulog(LOG_DEBUG, s, "connection");
	}
}

/* Drop the clients the scanner stopped serving (it marks them broken),
 * cooling their user down where the reason says so (broken.h): one line
 * says both. */
static void drop_if_broken(struct session *s, void *arg)
{
	struct server *srv = arg;
	int why = atomic_load(&s->scan->broken);
	char line[256];
	uint64_t ms = 0;

	if (!why)
		return;
	if (broken_kind(why)->penalised)
		ms = penalty_strike(&srv->penalties, s->uid, cuflag_now_ms());
	if (ms)
		metrics_on_cooldown(srv, s);
	size_t n = (size_t)snprintf(line, sizeof(line), "%s", broken_kind(why)->text);
	if (why == BROKEN_COST && s->scan->cost_share && n < sizeof(line))
		n += (size_t)snprintf(line + n, sizeof(line) - n,
				      " (its writes wanted more than their share of every pass"
				      " for %llu s: %u writes, %llu us each on average)",
				      (unsigned long long)(FAIR_SHARE_DROP_NS / 1000000000u),
				      s->scan->cost_writes,
				      (unsigned long long)(s->scan->cost_ns / 1000 /
							   (s->scan->cost_writes ? s->scan->cost_writes
										 : 1)));
	else if (why == BROKEN_COST && n < sizeof(line))
		n += (size_t)snprintf(line + n, sizeof(line) - n,
				      " (its last costly write cost %llu us of CPU; costly writes:"
				      " %u in a row, %u in %llu ms)",
				      (unsigned long long)(s->scan->cost_ns / 1000),
				      s->scan->cost_streak, s->scan->cost_lately,
				      (unsigned long long)(WRITE_BUDGET_OFTEN_NS / 1000000));
	if (ms && n < sizeof(line))
		snprintf(line + n, sizeof(line) - n, "; new clients of this user refused for %llu s",
			 (unsigned long long)((ms + 999) / 1000));
	session_drop(srv, s, -EPROTO, line);
}

static void drop_broken(struct server *srv)
{
	registry_each(&srv->reg, REG_ATTACHED, drop_if_broken, srv);
}

/* Connections that did not take a region in time (root and the admin group
 * may sit on a connection as long as they like: cuflagctl). */
static void drop_if_late(struct session *s, void *arg)
{
	struct server *srv = arg;

	if (!s->scan && !s->admin &&
	    cuflag_now_ms() - s->connected_ms >= srv->cfg->hello_timeout_ms)
		session_drop(srv, s, -ETIMEDOUT, "no HELLO and ATTACH within hello-timeout-ms");
}

/* An ALLOC parked too long is answered. */
static void expire_parked(struct session *s, void *arg)
{
	if (s->parked)
		request_expire_parked(arg, s, cuflag_now_ms());
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
		drop_broken(srv);
	}
}

/* A region lost a page under the daemon (region-guard.h): the daemon saw a
 * private page of its own there, never one of the client's memfd. */
static void on_region_punched(struct server *srv)
{
	uint8_t *map;

	while ((map = guard_take_punched())) {
		struct session *s = registry_find_addr(&srv->reg, map);
		if (s && !s->dead)
			session_drop(srv, s, -EFAULT, "a hole was punched in its region");
	}
}

static void on_tick(struct server *srv)
{
	uint64_t v, now = cuflag_now_ms();

	if (read(srv->timer_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_err("timerfd: %s", strerror(errno));
	if (srv->listen_paused) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &srv->tag_listen };
		if (epoll_ctl(srv->ep, EPOLL_CTL_MOD, srv->listen_fd, &ev) == 0)
			srv->listen_paused = 0;
	}

	/* A client that made its eventfd blocking and full holds the scanner in
	 * write(): interrupt it; the scanner then marks that client broken. */
	scanner_cut_stalled_write(srv->sc);

	drop_broken(srv);
	registry_each(&srv->reg, REG_LIVE, drop_if_late, srv);
	users_tick(&srv->users, now);
	stuck_tick(srv);
	export_tick(srv, now);
	/* A burst of clients that came and went leaves the heap's free memory
	 * with the daemon: give it back (at most once a tick, after frees). */
	if (srv->freed_since_trim) {
		srv->freed_since_trim = 0;
		malloc_trim(0);
	}
	registry_each(&srv->reg, REG_LIVE, expire_parked, srv);

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
		struct scanner_stats st;
		uint32_t clients, slots;
		uint64_t pending;
		scanner_get_stats(srv->sc, &st);
		server_totals(srv, &clients, &slots, &pending);
		notify_status("%u clients, %llu armed slots, %.0f wakes/s", clients,
			      (unsigned long long)pending,
			      (double)(st.wakes - srv->last_wakes) * 1000.0 /
				      (double)(now - srv->last_status_ms));
		srv->last_wakes = st.wakes;
		srv->last_status_ms = now;
	}
}

struct totals {
	uint32_t clients, slots, grouped;
	uint64_t pending;
};

static void add_totals(struct session *s, void *arg)
{
	struct totals *t = arg;

	t->clients++;
	t->slots += s->slots.nlive;
	for (uint32_t g = 0; g < s->slots.ngroups; g++)
		t->grouped += s->slots.group_live[g];
	t->pending += atomic_load_explicit(&s->scan->n_pending, memory_order_relaxed);
}

uint32_t server_grouped_slots(struct server *srv)
{
	struct totals t = { 0 };

	registry_each(&srv->reg, REG_ATTACHED, add_totals, &t);
	return t.grouped;
}

void server_totals(struct server *srv, uint32_t *clients, uint32_t *slots, uint64_t *pending)
{
	struct totals t = { 0 };

	registry_each(&srv->reg, REG_ATTACHED, add_totals, &t);
	*clients = t.clients;
	*slots = t.slots;
	*pending = t.pending;
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
	rc = scanner_start(&srv->sc, srv->dp.page, cfg->max_clients,
			   (uint64_t)cfg->max_clients * cfg->slots_per_client,
			   (uint64_t)cfg->max_clients * cfg->groups_per_client, &scfg);
	if (rc)
		log_err("cannot start the scanner: %s", strerror(-rc));
	return rc;
}

/* The socket systemd passed, else one of our own on the configured path. */
static int open_listener(struct server *srv, const struct cuflagd_config *cfg)
{
	srv->listen_fd = cfg->socket_path ? -1 : notify_listen_fd();
	if (srv->listen_fd >= 0) {
		/* Passed blocking by default; accept() must never block the loop. */
		int fl = fcntl(srv->listen_fd, F_GETFL);
		if (fl < 0 || fcntl(srv->listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			log_err("cannot make the passed socket non-blocking: %s", strerror(errno));
			return -errno;
		}
		log_info("using the socket passed by the service manager%s",
			 cfg->socket_gid >= 0 ? " (its unit sets the group and mode: "
						"--socket-group ignored)" : "");
		return 0;
	}
	const char *path = cfg->socket_path ? cfg->socket_path : CUFLAG_DEFAULT_SOCKET;
	char grp[64];
	srv->listen_fd = listen_on_path(srv, path);
	if (srv->listen_fd < 0) {
		log_err("cannot listen on %s: %s", path, strerror(-srv->listen_fd));
		return srv->listen_fd;
	}
	if (cfg->socket_gid >= 0)
		log_info("listening on %s (mode %04o, group %s)", path, (unsigned)cfg->socket_mode,
			 cuflag_group_name((gid_t)cfg->socket_gid, grp, sizeof(grp), NULL));
	else
		log_info("listening on %s (mode %04o)", path, (unsigned)cfg->socket_mode);
	return 0;
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
	if ((rc = open_listener(srv, cfg)) || (rc = ep_add(srv, srv->listen_fd, &srv->tag_listen)) ||
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

int server_run(struct server *srv)
{
	struct epoll_event ev[64];

	notify_ready();
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
				on_accept(srv);
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
			case EP_CLIENT: {
				/* Sessions are freed only after the batch: this one is
				 * valid even if it was dropped by an earlier event. */
				struct session *s = ev[i].data.ptr;
				if (s->dead)
					break;
				/* A session that reads nothing for now (a parked ALLOC,
				 * an answer being sent, its user over budget) still
				 * hears of a hang-up: epoll always reports it. */
				if (s->answer || s->held)
					answer_on_event(srv, s, ev[i].events);
				else if (s->parked && (ev[i].events & (EPOLLHUP | EPOLLERR)))
					session_drop(srv, s, 0, NULL);
				else
					session_on_readable(srv, s);
				break;
			}
			}
		}
		/* Long answers between batches of events, a slice at a time. */
		answers_run(srv);
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
	srv->listen_fd = safe_close(srv->listen_fd);
	if (srv->unlink_path)
		unlink(srv->unlink_path);
	srv->sig_fd = safe_close(srv->sig_fd);
	srv->timer_fd = safe_close(srv->timer_fd);
	srv->ep = safe_close(srv->ep);
	daemon_page_destroy(&srv->dp);
	guard_stop();
}
