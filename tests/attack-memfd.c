/* SPDX-License-Identifier: MIT */
/*
 * Kept region memfds: one user opens and closes 4000 sessions and keeps a
 * copy of each session's region memfd. The memory stays as long as the
 * copies do, and it must be charged to the user who keeps it, not to the
 * daemon: with no client of the attacker left, the daemon's memory (its
 * RSS and its cgroup's usage, shmem included) is back where it was.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attacks.h"
#include "cuflag/cuflag.h"

/* 4000 regions of the default 1024 slots are about 96 MB. */
#define SESSIONS 4000
/* A session's fds are the lowest free ones: below this while the kept
 * copies go above it. */
#define LOW_FDS 64

struct memfd_ctl {
	_Atomic int sessions, kept, busy, users, err, holding, release;
};

static ino_t seen[SESSIONS * 2 + 16];
static unsigned nseen;

static int was_seen(ino_t ino)
{
	for (unsigned i = 0; i < nseen; i++)
		if (seen[i] == ino)
			return 1;
	return 0;
}

/* Keep a copy of every memfd among the low fds not kept yet (the region;
 * the daemon page, the same file each time, only once). */
static int keep_memfds(void)
{
	int kept = 0;

	for (int fd = 0; fd < LOW_FDS; fd++) {
		struct stat st;
		if (!is_memfd_named(fd, "") || fstat(fd, &st) || was_seen(st.st_ino))
			continue;
		if (fcntl(fd, F_DUPFD_CLOEXEC, LOW_FDS) < 0)
			return -errno;
		seen[nseen++] = st.st_ino;
		kept++;
	}
	return kept;
}

static void attacker_main(void *arg)
{
	struct memfd_ctl *mc = arg;
	uint64_t end = cuflag_now_ns() + 20000000000ull;
	long room = raise_nofile() - LOW_FDS - 16;
	int sessions = room < SESSIONS ? (int)room : SESSIONS;

	for (int i = 0; i < sessions && cuflag_now_ns() < end;) {
		cuflag_client *c;
		int rc = cuflag_connect(attack_daemon.sock, &c);
		/* A rate limit, or the user's earlier sessions still being torn
		 * down (they count against its regions until then): not the
		 * attack; wait a little and go on. */
		if (rc == -EBUSY || rc == -EUSERS) {
			atomic_fetch_add(rc == -EBUSY ? &mc->busy : &mc->users, 1);
			usleep(10000);
			continue;
		}
		if (rc) {
			atomic_store(&mc->err, rc);
			break;
		}
		rc = keep_memfds();
		cuflag_disconnect(c);
		if (rc < 0) {
			atomic_store(&mc->err, rc);
			break;
		}
		atomic_fetch_add(&mc->kept, rc);
		atomic_store(&mc->sessions, ++i);
		if (i % 1000 == 0)
			attack_mark("%d sessions", i);
	}
	atomic_store(&mc->holding, 1);
	wait_flag(&mc->release, 1, 60000);
}

void attack_kept_memfds(void)
{
	struct memfd_ctl *mc = shm_alloc(sizeof(*mc));
	struct window w;
	pid_t pid;

	window_open(&w, "4000 sessions opened and closed, region memfds kept");
	pid = spawn_user(UID_ATTACKER, 19, attacker_main, mc);
	wait_flag(&mc->holding, 1, 30000);
	snprintf(w.outcome, sizeof(w.outcome),
		 "%d sessions, %d memfds kept; connects refused -EBUSY %d, -EUSERS %d times%s",
		 atomic_load(&mc->sessions), atomic_load(&mc->kept), atomic_load(&mc->busy),
		 atomic_load(&mc->users), atomic_load(&mc->err) ? "; then an error" : "");
	if (atomic_load(&mc->err))
		fail("%s: the attacker's sessions failed: %s", w.name,
		     strerror(-atomic_load(&mc->err)));
	if (atomic_load(&mc->sessions) < SESSIONS)
		fail("%s: only %d sessions in 20 s", w.name, atomic_load(&mc->sessions));
	/* Measured while the copies are still kept. */
	window_close(&w);
	atomic_store(&mc->release, 1);
	if (child_wait(pid, 10000) != 0)
		fail("%s: the attacker did not finish", w.name);
}
