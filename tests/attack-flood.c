/* SPDX-License-Identifier: MIT */
/*
 * A connection flood from one user, with the daemon's default limits:
 *   without HELLO: hundreds of sockets that never say anything; the user
 *     holds at most its connection share, and each is closed once the
 *     time allowed before HELLO has passed;
 *   with HELLO: clients until the daemon refuses, plus idle sockets on top;
 *     the user holds at most its share of regions.
 * Meanwhile another user's HELLO and root's cuflagctl are served within 1 s,
 * and that other user's CLIENTS shows none of the attacker's clients.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "attacks.h"
#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "fdpass.h"
#include "proto.h"

/* The defaults with --max-clients 256: a quarter per user, and connections
 * (with or without HELLO) 8 more than that. */
#define DEFAULT_CLIENTS_PER_UID 64
#define DEFAULT_CONNECTIONS_PER_UID (DEFAULT_CLIENTS_PER_UID + 8)
#define HELLO_TIMEOUT_MS 2000
/* Past every default: 400 sockets are five times the share, and above the
 * node-wide 256 + 64 that once locked everyone out. */
#define FLOOD 400

struct flood_ctl {
	_Atomic int opened, open_early, open_late; /* without HELLO */
	_Atomic int hellos, first_err, idle_open;  /* with HELLO */
	_Atomic int holding, release;
	_Atomic int others_seen, answered;          /* the bystander's CLIENTS */
};

static int still_open(int fd)
{
	return !hung_up(fd, 0);
}

static int count_open(const int *fds, int n)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		k += fds[i] >= 0 && still_open(fds[i]);
	return k;
}

static void idle_main(void *arg)
{
	static int fds[FLOOD];
	struct flood_ctl *fc = arg;
	uint64_t last, give_up = cuflag_now_ns() + 5000000000ull;
	int n = 0;

	/* A daemon that stopped accepting makes each connect wait: not for ever. */
	for (int i = 0; i < FLOOD; i++) {
		fds[i] = cuflag_now_ns() < give_up ? daemon_connect_raw() : -1;
		n += fds[i] >= 0;
	}
	last = cuflag_now_ns();
	atomic_store(&fc->opened, n);
	attack_mark("%d connected", n);
	usleep(300000);
	atomic_store(&fc->open_early, count_open(fds, FLOOD));
	/* Past the time allowed before HELLO, with a second to spare. */
	while (cuflag_now_ns() < last + (HELLO_TIMEOUT_MS + 1000) * 1000000ull)
		usleep(10000);
	atomic_store(&fc->open_late, count_open(fds, FLOOD));
	for (int i = 0; i < FLOOD; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static void hello_main(void *arg)
{
	static cuflag_client *c[FLOOD];
	static int idle[100];
	struct flood_ctl *fc = arg;
	int n = 0, rc = 0;

	while (n < FLOOD && (rc = cuflag_connect(attack_daemon.sock, &c[n])) == 0)
		n++;
	atomic_store(&fc->hellos, n);
	atomic_store(&fc->first_err, rc);
	attack_mark("%d clients, then %d", n, rc);
	for (int i = 0; i < 100; i++)
		idle[i] = daemon_connect_raw();
	usleep(300000);
	atomic_store(&fc->idle_open, count_open(idle, 100));
	atomic_store(&fc->holding, 1);
	wait_flag(&fc->release, 1, 60000);
	for (int i = 0; i < 100; i++)
		if (idle[i] >= 0)
			close(idle[i]);
	for (int i = 0; i < n; i++)
		cuflag_disconnect(c[i]);
}

/* Another user asks CLIENTS (no HELLO needed): whose clients does it see? */
static void count_others(const struct cuflag_msg_client_info *ci, void *arg)
{
	struct flood_ctl *fc = arg;

	if (ci->uid != getuid())
		atomic_fetch_add(&fc->others_seen, 1);
}

static void clients_main(void *arg)
{
	struct flood_ctl *fc = arg;

	if (clients_each(count_others, fc) == 0)
		atomic_store(&fc->answered, 1);
}

void attack_flood(void)
{
	struct flood_ctl *fc = shm_alloc(sizeof(*fc));
	struct window w;
	pid_t pid;
	int logged;

	window_open(&w, "400 connections of one user, no HELLO");
	attacker_run(w.name, 19, idle_main, fc, 30000);
	logged = window_log_count(&w, "uid=60001", NULL);
	snprintf(w.outcome, sizeof(w.outcome),
		 "%d of %d connected; open after 0.3 s: %d, after %d ms: %d; %d log lines",
		 atomic_load(&fc->opened), FLOOD, atomic_load(&fc->open_early),
		 HELLO_TIMEOUT_MS + 1000, atomic_load(&fc->open_late), logged);
	if (atomic_load(&fc->open_early) > DEFAULT_CONNECTIONS_PER_UID)
		fail("%s: %d held open, more than the user's %d", w.name,
		     atomic_load(&fc->open_early), DEFAULT_CONNECTIONS_PER_UID);
	if (atomic_load(&fc->open_late))
		fail("%s: %d still open after the time allowed before HELLO", w.name,
		     atomic_load(&fc->open_late));
	if (!logged)
		fail("%s: no log line names the attacker's uid", w.name);
	window_close(&w);

	window_open(&w, "clients of one user until refused, +100 idle sockets");
	pid = spawn_user(UID_ATTACKER, 19, hello_main, fc);
	wait_flag(&fc->holding, 1, 20000);
	CHECK(child_wait(spawn_user(UID_BYSTANDER, 0, clients_main, fc), 10000) == 0);
	atomic_store(&fc->release, 1);
	if (child_wait(pid, 30000) != 0)
		fail("%s: the attacker did not finish", w.name);
	snprintf(w.outcome, sizeof(w.outcome),
		 "%d clients, then %s; idle sockets open: %d of 100; another user's CLIENTS "
		 "%s %d not its own",
		 atomic_load(&fc->hellos), strerror(-atomic_load(&fc->first_err)),
		 atomic_load(&fc->idle_open), atomic_load(&fc->answered) ? "shows" : "NOT ANSWERED,",
		 atomic_load(&fc->others_seen));
	if (atomic_load(&fc->hellos) > DEFAULT_CLIENTS_PER_UID)
		fail("%s: %d clients, more than the user's %d", w.name, atomic_load(&fc->hellos),
		     DEFAULT_CLIENTS_PER_UID);
	if (atomic_load(&fc->first_err) != -EUSERS)
		fail("%s: the client past the limit got %d, not -EUSERS", w.name,
		     atomic_load(&fc->first_err));
	if (!atomic_load(&fc->answered))
		fail("%s: another user's CLIENTS was not answered", w.name);
	if (atomic_load(&fc->hellos) + atomic_load(&fc->idle_open) > DEFAULT_CONNECTIONS_PER_UID)
		fail("%s: %d connections held, more than the user's %d", w.name,
		     atomic_load(&fc->hellos) + atomic_load(&fc->idle_open),
		     DEFAULT_CONNECTIONS_PER_UID);
	if (atomic_load(&fc->others_seen))
		fail("%s: CLIENTS showed another user %d clients not its own", w.name,
		     atomic_load(&fc->others_seen));
	window_close(&w);
}
