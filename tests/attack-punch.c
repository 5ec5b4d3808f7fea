/* SPDX-License-Identifier: MIT */
/*
 * Punched regions: the region memfd is sealed against shrink and grow, but
 * fallocate(PUNCH_HOLE) still takes its pages away, and a page the daemon
 * then touches (the arm queue's indices, a slot's state, a new slot's start
 * value) would be faulted in fresh, charged to the daemon's cgroup, and kept
 * for as long as the attacker keeps the memfd. The attacker opens 6000
 * sessions, punches each region out after ATTACH, allocates a slot (the
 * daemon writes its start value), and hangs up keeping the memfd; the
 * daemon's cgroup is held to 256 MiB meanwhile (once OOM-killed in 13 s).
 * Also a region with a hole before ATTACH: refused. Unguarded (no
 * userfaultfd, as under a container runtime's default seccomp profile) the
 * sessions are not dropped, but each region is emptied when its session
 * ends: the daemon's cgroup does not grow either.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attacks.h"
#include "cuflag-proto.h"
#include "fdpass.h"
#include "proto.h"

#define SESSIONS 6000
#define LIMIT_MB 256

struct punch_ctl {
	_Atomic int sessions, dropped, users, err, hole_refused, holding, release;
	int guarded; /* the daemon drops a punched session (else: not waited for) */
};

/* HELLO on sock, then a region made for the layout it offers (kept by the
 * caller): the region's fd, or -errno. */
static int hello_region(int sock, uint64_t *size)
{
	struct cuflag_msg_hello_reply hr;
	int st = hello_raw(sock, &hr);

	if (st)
		return st;
	*size = hr.region_size;
	return make_client_region(&hr);
}

/* ATTACH region on sock: the reply's status (-EPIPE when none came). */
static int attach(int sock, int region)
{
	struct {
		struct cuflag_msg_hdr h;
		struct cuflag_msg_attach b;
	} m = { .b = { 0 } };
	int fds[2] = { region, eventfd(0, EFD_CLOEXEC) }, st = -EPIPE;

	cuflag_hdr_init(&m.h, CUFLAG_MSG_ATTACH, sizeof(m), 2, 0, 2);
	if (send_with_fds(sock, &m, sizeof(m), fds, 2) || recv_reply(sock, &st, 5000) <= 0)
		st = -EPIPE;
	close(fds[1]);
	return st;
}

static int punch(int fd, off_t off, uint64_t len)
{
	return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, (off_t)len) ? -errno
											     : 0;
}

/* One session: 1 when the daemon dropped it within wait_ms, 0 when it did
 * not (or wait_ms < 0: not waited for), -errno. */
static int punched_session(int *kept, int wait_ms)
{
	struct {
		struct cuflag_msg_hdr h;
		struct cuflag_msg_alloc b;
	} a = { .b = { .count = 1 } };
	uint64_t size = 0;
	int sock = daemon_connect_raw(), region, st, rc;

	if (sock < 0)
		return sock;
	region = hello_region(sock, &size);
	if (region < 0) {
		close(sock);
		return region;
	}
	st = attach(sock, region);
	if (st) {
		close(region);
		close(sock);
		return st;
	}
	rc = punch(region, 0, size);
	/* The daemon writes the new slot's start value into a page that is gone. */
	cuflag_hdr_init(&a.h, CUFLAG_MSG_ALLOC, sizeof(a), 3, 0, 0);
	if (!rc && send_with_fds(sock, &a, sizeof(a), NULL, 0) == 0)
		(void)recv_reply(sock, &st, 2000);
	if (!rc && wait_ms >= 0)
		rc = hung_up(sock, wait_ms);
	close(sock);
	*kept = region;
	return rc;
}

static void attacker_main(void *arg)
{
	struct punch_ctl *pc = arg;
	uint64_t end = cuflag_now_ns() + 40000000000ull;
	uint64_t size = 0;
	int sock, region;

	raise_nofile();
	/* A hole before ATTACH. */
	sock = daemon_connect_raw();
	region = sock >= 0 ? hello_region(sock, &size) : -1;
	if (region >= 0 && punch(region, (off_t)sysconf(_SC_PAGESIZE), (uint64_t)sysconf(_SC_PAGESIZE)) == 0 &&
	    attach(sock, region) == -EINVAL)
		atomic_store(&pc->hole_refused, 1);
	if (region >= 0)
		close(region);
	if (sock >= 0)
		close(sock);

	/* A daemon that never drops them (before the defence) is not waited
	 * for after 5 in a row, so that the 6000 sessions still happen. */
	for (int i = 0, missed = 0; i < SESSIONS && cuflag_now_ns() < end;) {
		int kept = -1;
		int rc = punched_session(&kept, !pc->guarded ? -1 : missed < 5 ? 1000 : 0);
		/* Its sessions still being torn down count against its regions. */
		if (rc == -EUSERS) {
			atomic_fetch_add(&pc->users, 1);
			usleep(2000);
			continue;
		}
		if (rc < 0) {
			atomic_store(&pc->err, rc);
			break;
		}
		atomic_fetch_add(&pc->dropped, rc);
		missed = rc ? 0 : missed + 1;
		atomic_store(&pc->sessions, ++i);
		if (i % 1000 == 0)
			attack_mark("%d sessions", i);
	}
	atomic_store(&pc->holding, 1); /* every region memfd still kept */
	wait_flag(&pc->release, 1, 60000);
}

static void punched_regions(int guarded)
{
	struct punch_ctl *pc = shm_alloc(sizeof(*pc));
	struct daemon_mem m0, m;
	long peak = -1;
	struct window w;
	int limited = daemon_mem_limit(LIMIT_MB) == 0;
	pid_t pid;

	pc->guarded = guarded;
	daemon_mem(&m0);
	window_open(&w, "6000 sessions punch their region out, ALLOC, hang up, keep the memfd");
	pid = spawn_user(UID_ATTACKER, 19, attacker_main, pc);
	while (!atomic_load(&pc->holding) && daemon_running()) {
		daemon_mem(&m);
		if (m.cg_kb > peak)
			peak = m.cg_kb;
		usleep(100000);
	}
	snprintf(w.outcome, sizeof(w.outcome),
		 "%d sessions, dropped %d; a hole before ATTACH %s; refused -EUSERS %d times; "
		 "daemon cgroup peak %.1f MB (%s)%s",
		 atomic_load(&pc->sessions), atomic_load(&pc->dropped),
		 atomic_load(&pc->hole_refused) ? "refused" : "NOT REFUSED",
		 atomic_load(&pc->users), (double)peak / 1024,
		 limited ? "limit " "256" " MiB" : "no limit set: no cgroup",
		 atomic_load(&pc->err) ? "; then an error" : "");
	if (!daemon_running())
		fail("%s: the daemon died", w.name);
	if (atomic_load(&pc->err))
		fail("%s: the attacker's sessions failed: %s", w.name,
		     strerror(-atomic_load(&pc->err)));
	if (atomic_load(&pc->sessions) < SESSIONS)
		fail("%s: only %d sessions in 40 s", w.name, atomic_load(&pc->sessions));
	if (guarded && atomic_load(&pc->dropped) < atomic_load(&pc->sessions))
		fail("%s: %d of %d sessions not dropped", w.name,
		     atomic_load(&pc->sessions) - atomic_load(&pc->dropped),
		     atomic_load(&pc->sessions));
	if (!atomic_load(&pc->hole_refused))
		fail("%s: a region with a hole was not refused at ATTACH", w.name);
	if (peak >= 0 && m0.cg_kb >= 0 && peak > m0.cg_kb + MEM_SLACK_KB)
		fail("%s: the daemon's cgroup grew to %ld kB, %ld kB before", w.name, peak,
		     m0.cg_kb);
	/* Measured while the memfds are still kept. */
	window_close(&w);
	atomic_store(&pc->release, 1);
	if (child_wait(pid, 10000) != 0)
		fail("%s: the attacker did not finish", w.name);
	daemon_mem_limit(-1);
}

void attack_punched_regions(void)
{
	punched_regions(1);
}

void attack_punched_regions_unguarded(void)
{
	punched_regions(0);
}
