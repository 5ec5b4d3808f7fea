/* SPDX-License-Identifier: MIT */
#include "autospawn.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client-private.h"
#include "clock.h"
#include "daemon-exec.h"
#include "fd-util.h"
#include "spawn.h"
#include "unix-socket.h"
#include "user-dir.h"

extern char **environ;

/* A log that grew past this is started afresh by the next daemon. */
#define LOG_MAX_BYTES (1u << 20)

int cuflag__autospawn_allowed(void)
{
	const char *v = getenv(CUFLAG_AUTOSPAWN_ENV);

	return !v || strcmp(v, "0");
}

static int connect_to(const char *sock, int nonblock)
{
	return nonblock ? cuflag_unix_connect_nonblock(sock)
			: cuflag_unix_connect(sock, CUFLAG_REPLY_TIMEOUT_S);
}

static int absent(int err)
{
	return err == -ENOENT || err == -ECONNREFUSED;
}

static int remaining_ms(uint64_t end_ns)
{
	uint64_t now = cuflag_now_ns();

	return now >= end_ns ? 0 : (int)((end_ns - now) / 1000000u) + 1;
}

/* Where the daemon binary is: $CUFLAGD, else beside this library (a wheel
 * keeps both in one folder; a build tree has daemon/ beside client/), else
 * where it is installed. looked (ln bytes) lists the places tried. */
static int find_daemon(char *exe, size_t n, char *looked, size_t ln)
{
	const char *env = getenv(CUFLAG_DAEMON_ENV);
	char libdir[PATH_MAX] = "", cand[3][PATH_MAX];
	Dl_info info;
	size_t nc = 0;

	if (env && env[0]) {
		snprintf(looked, ln, "$" CUFLAG_DAEMON_ENV " (%s)", env);
		snprintf(exe, n, "%s", env);
		return access(exe, X_OK) == 0 ? 0 : -ENOENT;
	}
	if (dladdr((void *)cuflag_connect, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
		snprintf(libdir, sizeof(libdir), "%s", info.dli_fname);
		*strrchr(libdir, '/') = 0;
		snprintf(cand[nc++], PATH_MAX, "%s/cuflagd", libdir);
		snprintf(cand[nc++], PATH_MAX, "%s/../daemon/cuflagd", libdir);
	}
	snprintf(cand[nc++], PATH_MAX, "%s/cuflagd", CUFLAG_SBINDIR);
	looked[0] = 0;
	for (size_t i = 0; i < nc; i++) {
		size_t used = strlen(looked);
		snprintf(looked + used, ln - used, "%s%s", i ? ", " : "", cand[i]);
		if (access(cand[i], X_OK) == 0 && strlen(cand[i]) < n) {
			memcpy(exe, cand[i], strlen(cand[i]) + 1);
			return 0;
		}
	}
	return -ENOENT;
}

/* fd moved to 10 or above (close-on-exec), so that the spawn's dup2 onto
 * 0..3 never meets it there. */
static int high_fd(int fd)
{
	int h;

	if (fd < 0 || fd >= 10)
		return fd;
	h = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	safe_close(fd);
	return h;
}

/* The daemon's stderr: its log in the user's directory (started afresh
 * when it grew large), with a first line that says who started it, why. */
static int open_log(const char *dir, const char *reason)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, CUFLAG_USER_LOG_NAME) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* A log that cannot be cut is no reason not to start. */
	if (fstat(fd, &st) == 0 && st.st_size > LOG_MAX_BYTES)
		(void)!ftruncate(fd, 0);
	dprintf(fd, "<5>started by pid %d (%s): %s\n", (int)getpid(),
		program_invocation_short_name, reason);
	return high_fd(fd);
}

/* Spawn exe --user --detach --ready-fd 3 --socket sock, with stdin and
 * stdout /dev/null, stderr the log, and reap the process that returns at
 * once (the daemon goes on detached: no zombie here). 0, or a negative
 * errno with why. */
static int spawn(const char *exe, const char *sock, int ready_w, int log_fd, char *why, size_t n)
{
	const char *argv[] = { exe, "--user", "--detach", "--ready-fd", "3", "--socket", sock, NULL };
	int null_fd, rc, st = 0;
	pid_t pid;

	null_fd = high_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
	if (null_fd < 0) {
		snprintf(why, n, "cannot open /dev/null: %s", strerror(errno));
		return -errno;
	}
	rc = cuflag__exec_with_fds(exe, argv, environ,
				   (const int[4]){ null_fd, null_fd, log_fd, ready_w }, &pid);
	safe_close(null_fd);
	if (rc) {
		snprintf(why, n, "cannot run %s: %s", exe, strerror(rc));
		return -rc;
	}
	/* It forks and returns before it does anything else. A program that
	 * reaps every child itself may have taken it: ECHILD is fine. */
	while ((rc = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
		;
	if (rc == pid && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		snprintf(why, n, "%s --user exited with status %d", exe, cuflag_exit_code(st));
		return -ECONNREFUSED;
	}
	return 0;
}

/* Until the daemon says it serves (READY=1 on the pipe), it closes the pipe
 * without (it failed), or end_ns. */
static int wait_ready(int ready_r, uint64_t end_ns)
{
	struct pollfd p = { .fd = ready_r, .events = POLLIN };
	char buf[16];
	ssize_t got;
	int rc;

	for (;;) {
		rc = poll(&p, 1, remaining_ms(end_ns));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			return rc < 0 ? -errno : -ETIMEDOUT;
		got = read(ready_r, buf, sizeof(buf));
		if (got < 0 && errno == EINTR)
			continue;
		return got > 0 ? 0 : -ECONNREFUSED;
	}
}

/* Start the daemon and wait until it serves (the spawn lock held). */
static int start(const char *dir, const char *sock, const char *reason, uint64_t end_ns,
		 char *why, size_t n)
{
	char exe[PATH_MAX], looked[3 * PATH_MAX + 64];
	int p[2], log_fd, rc;

	rc = find_daemon(exe, sizeof(exe), looked, sizeof(looked));
	if (rc) {
		snprintf(why, n, "no cuflagd to start (looked for %s): install cuflagd or set "
			 CUFLAG_DAEMON_ENV " to its path", looked);
		return rc;
	}
	log_fd = open_log(dir, reason);
	if (log_fd < 0) {
		snprintf(why, n, "cannot open the daemon's log in %s: %s", dir, strerror(-log_fd));
		return log_fd;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		rc = -errno;
		safe_close(log_fd);
		snprintf(why, n, "pipe: %s", strerror(-rc));
		return rc;
	}
	p[0] = high_fd(p[0]);
	p[1] = high_fd(p[1]);
	rc = p[0] < 0 || p[1] < 0 ? -EMFILE : spawn(exe, sock, p[1], log_fd, why, n);
	safe_close(p[1]);
	safe_close(log_fd);
	if (rc == -ECONNREFUSED) {
		size_t used = strlen(why);
		snprintf(why + used, n - used, " (its log: %s/%s)", dir, CUFLAG_USER_LOG_NAME);
	}
	if (!rc) {
		rc = wait_ready(p[0], end_ns);
		if (rc == -ETIMEDOUT)
			snprintf(why, n, "%s --user did not serve within %d ms (its log: %s/%s)", exe,
				 AUTOSPAWN_TIMEOUT_MS, dir, CUFLAG_USER_LOG_NAME);
		else if (rc)
			snprintf(why, n, "%s --user did not start (its log says why: %s/%s)", exe,
				 dir, CUFLAG_USER_LOG_NAME);
	}
	safe_close(p[0]);
	return rc;
}

/* The lock of whoever starts the user's daemon: one at a time, the others
 * wait (bounded) and then find it serving. The fd holding it, or a negative
 * errno with why. */
static int spawn_lock(const char *dir, uint64_t end_ns, char *why, size_t n)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, CUFLAG_USER_SPAWN_NAME);
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		int rc = -errno;
		snprintf(why, n, "cannot open %s: %s", path, strerror(-rc));
		return rc;
	}
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			int rc = -errno;
			snprintf(why, n, "cannot lock %s: %s", path, strerror(-rc));
			safe_close(fd);
			return rc;
		}
		if (!remaining_ms(end_ns)) {
			snprintf(why, n, "another process has held %s for %d ms while starting "
				 "the user's cuflagd", path, AUTOSPAWN_TIMEOUT_MS);
			safe_close(fd);
			return -ETIMEDOUT;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	return fd;
}

int cuflag__user_daemon_connect(const char *dir, const char *sock, const char *reason, int spawn_ok,
				int nonblock, char *why, size_t n)
{
	uint64_t end_ns = cuflag_now_ns() + (uint64_t)AUTOSPAWN_TIMEOUT_MS * 1000000u;
	int fd = connect_to(sock, nonblock), lock, rc;

	why[0] = 0;
	if (fd >= 0 || !absent(fd))
		goto out;
	if (!spawn_ok) {
		snprintf(why, n, "starting one is off (" CUFLAG_AUTOSPAWN_ENV "=0): start it "
			 "yourself with 'cuflagd --user &'");
		return fd;
	}
	lock = spawn_lock(dir, end_ns, why, n);
	if (lock < 0)
		return lock;
	/* Whoever held the lock before us may have started it. */
	fd = connect_to(sock, nonblock);
	if (fd < 0 && absent(fd)) {
		rc = start(dir, sock, reason, end_ns, why, n);
		fd = rc ? rc : connect_to(sock, nonblock);
	}
	safe_close(lock); /* lets go of the lock */
	if (fd >= 0 || why[0])
		return fd;
out:
	if (fd < 0)
		snprintf(why, n, "cannot connect: %s", strerror(-fd));
	return fd;
}
