/* SPDX-License-Identifier: MIT */
/*
 * The user's own daemon, started on demand: cuflag_connect(NULL) with no
 * node daemon starts one cuflagd --user per user (one for processes that
 * come at once, shared by the next, gone after --exit-idle, started again
 * by the next connect and by the resume of a client whose daemon was
 * killed, every count exact); a node daemon that serves is used instead;
 * one that refuses falls back and says why; starting turned off or failing
 * says what to do; other users can neither reach nor replace the daemon,
 * nor plant its directory. Each test has a directory of its own for the
 * user's runtime directory and the node socket ($CUFLAG_NODE_SOCKET), so
 * that no test meets the host's daemon or another test's. The tests with
 * other users need root (they exit 77 without).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "slowdown.h"
#include "test-runner.h"

/* Users of these tests alone (none of them root, none in group 0). */
#define UID_OWNER 60021
#define UID_OTHER 60022
#define UID_PLANTED 60023
#define CHILDREN 8

static const char *real_daemon; /* $CUFLAGD as meson set it */

struct ud {
	char base[64];  /* the test's own directory */
	char run[96];   /* its XDG_RUNTIME_DIR */
	char dir[128];  /* the user's directory in it */
	char sock[160]; /* the user daemon's socket */
	char log[160];
	char node[128]; /* $CUFLAG_NODE_SOCKET: nobody there unless a test starts one */
};

/* A fresh directory and environment; the daemon started exits after
 * idle_s seconds with no client (< 0: its default). owner: the uid the
 * runtime directory belongs to. */
static void ud_setup(struct ud *u, int idle_s, uid_t owner)
{
	snprintf(u->base, sizeof(u->base), "/tmp/cuflag-ud-XXXXXX");
	CHECK(mkdtemp(u->base));
	CHECK(chmod(u->base, 0755) == 0); /* other users of a test enter it */
	snprintf(u->run, sizeof(u->run), "%s/run", u->base);
	snprintf(u->dir, sizeof(u->dir), "%s/cuflag", u->run);
	snprintf(u->sock, sizeof(u->sock), "%s/cuflagd.sock", u->dir);
	snprintf(u->log, sizeof(u->log), "%s/cuflagd.log", u->dir);
	snprintf(u->node, sizeof(u->node), "%s/node.sock", u->base);
	CHECK(mkdir(u->run, 0700) == 0);
	CHECK(chown(u->run, owner, owner) == 0 || owner == geteuid());
	CHECK(setenv("XDG_RUNTIME_DIR", u->run, 1) == 0);
	CHECK(setenv("CUFLAG_NODE_SOCKET", u->node, 1) == 0);
	unsetenv("CUFLAG_SOCKET");
	unsetenv("CUFLAG_AUTOSPAWN");
	if (idle_s < 0) {
		CHECK(setenv("CUFLAGD", real_daemon, 1) == 0);
		return;
	}
	/* The binary the library starts, with a short --exit-idle. */
	char wrap[96];
	snprintf(wrap, sizeof(wrap), "%s/cuflagd-idle", u->base);
	FILE *f = fopen(wrap, "w");
	CHECK(f);
	fprintf(f, "#!/bin/sh\nexec '%s' --exit-idle %d \"$@\"\n", real_daemon, idle_s);
	CHECK(fclose(f) == 0);
	CHECK(chmod(wrap, 0755) == 0);
	CHECK(setenv("CUFLAGD", wrap, 1) == 0);
}

static void ud_remove(struct ud *u)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", u->base);
	CHECK(system(cmd) == 0);
}

/* The pid at the other end of the client's connection: its daemon. */
static pid_t daemon_of(cuflag_client *c)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);

	CHECK(getsockopt(cuflag_client_fd(c), SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0);
	return cr.pid;
}

/* A started daemon is this process's to reap (a subreaper: main()). Its
 * exit status, waiting up to ms; -1 when it did not exit by then. */
static int reap(pid_t pid, int ms)
{
	uint64_t end = cuflag_now_ms() + (uint64_t)ms * CUFLAG_SLOWDOWN;
	int st;

	while (cuflag_now_ms() < end) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return cuflag_exit_code(st);
		CHECK_MSG(r == 0, "waitpid %d: %s", (int)pid, strerror(errno));
		usleep(5000);
	}
	return -1;
}

static void stop(pid_t pid)
{
	CHECK(kill(pid, SIGTERM) == 0);
	CHECK(reap(pid, 5000) == 0);
}

/* A whole completion on the client: acquire, arm, store, wait. */
static void one_completion(cuflag_client *c)
{
	cuflag_slot *s;
	uint32_t t;

	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm(s, &t));
	sim_store(cuflag_slot_flag(s), t);
	CHECK_RC(cuflag_slot_wait(s, t, 2000));
	CHECK(consume_blocking(s) == 1);
	cuflag_slot_release(s);
}

/* How many lines of the user daemon's log hold text. */
static int log_count(const struct ud *u, const char *text)
{
	char buf[16384];
	int fd = open(u->log, O_RDONLY | O_CLOEXEC), n = 0;
	ssize_t len;

	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[len > 0 ? len : 0] = 0;
	for (char *p = buf; (p = strstr(p, text)); p += strlen(text))
		n++;
	return n;
}

/*
 * n children, each connecting once all are forked (a pipe's close lets
 * them go at once), sending its daemon's pid, then holding the connection
 * until told to go (its pipe closes). The pids in pids; the children
 * reaped.
 */
static void connect_at_once(int n, pid_t *pids)
{
	int go[2], back[2], hold[2];
	pid_t kids[CHILDREN];

	CHECK(n <= CHILDREN);
	CHECK(pipe(go) == 0 && pipe(back) == 0 && pipe(hold) == 0);
	for (int i = 0; i < n; i++) {
		kids[i] = fork();
		CHECK(kids[i] >= 0);
		if (kids[i] == 0) {
			cuflag_client *c;
			char b;
			pid_t p;
			close(go[1]);
			close(back[0]);
			close(hold[1]);
			CHECK(read(go[0], &b, 1) == 0);
			CHECK_RC(cuflag_connect(NULL, &c));
			one_completion(c);
			p = daemon_of(c);
			CHECK(write(back[1], &p, sizeof(p)) == sizeof(p));
			CHECK(read(hold[0], &b, 1) == 0);
			cuflag_disconnect(c);
			_exit(0);
		}
	}
	close(go[0]);
	close(back[1]);
	close(hold[0]);
	close(go[1]); /* go */
	for (int i = 0; i < n; i++)
		CHECK(read(back[0], &pids[i], sizeof(pids[i])) == sizeof(pids[i]));
	close(hold[1]);
	close(back[0]);
	for (int i = 0; i < n; i++) {
		int st;
		CHECK(waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) && !WEXITSTATUS(st));
	}
}

/* This process's children, as the kernel lists them: how many, the first
 * in *first. */
static int children(pid_t *first)
{
	char path[64], buf[256] = "";
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
	f = fopen(path, "r");
	CHECK(f);
	if (fgets(buf, sizeof(buf), f))
		for (char *p = strtok(buf, " \n"); p; p = strtok(NULL, " \n"))
			if (n++ == 0)
				*first = (pid_t)atoi(p);
	fclose(f);
	return n;
}

/* Whether process pid holds an fd open on the file st describes. */
static int holds(pid_t pid, const struct stat *st)
{
	char path[64];
	struct stat fs;
	int found = 0;

	for (int fd = 0; fd < 1024 && !found; fd++) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
		found = stat(path, &fs) == 0 && fs.st_dev == st->st_dev && fs.st_ino == st->st_ino;
	}
	return found;
}

/* Two processes share one daemon; it exits once idle, socket and all; the
 * next connect starts another, detached: no zombie of its start left here,
 * none of this process's fds in it. */
TEST(two_share_then_idle_exit)
{
	struct ud u;
	pid_t pids[2], third;
	cuflag_client *c;
	struct stat st;
	uint64_t t0;

	ud_setup(&u, 1, geteuid());
	connect_at_once(2, pids);
	CHECK_MSG(pids[0] == pids[1], "two daemons: %d and %d", (int)pids[0], (int)pids[1]);
	t0 = cuflag_now_ms();
	CHECK_MSG(reap(pids[0], 5000) == 0, "the daemon did not exit after 1 s idle");
	CHECK_MSG(cuflag_now_ms() - t0 >= 500, "exited %llu ms after its last client",
		  (unsigned long long)(cuflag_now_ms() - t0));
	CHECK(lstat(u.sock, &st) < 0 && errno == ENOENT);
	CHECK(log_count(&u, "exiting (--exit-idle)") == 1);
	int leak[2];
	struct stat leak_st;
	pid_t child = 0;
	CHECK(pipe(leak) == 0 && fstat(leak[0], &leak_st) == 0); /* not close-on-exec */
	CHECK(children(&child) == 0);
	CHECK_RC(cuflag_connect(NULL, &c));
	third = daemon_of(c);
	CHECK(third != pids[0]);
	/* The one child: the daemon, whose parent exited (this process is the
	 * subreaper); the process that started it was reaped. */
	CHECK(children(&child) == 1 && child == third);
	CHECK(holds(getpid(), &leak_st) && !holds(third, &leak_st));
	close(leak[0]);
	close(leak[1]);
	one_completion(c);
	cuflag_disconnect(c);
	CHECK(reap(third, 5000) == 0);
	CHECK(log_count(&u, "started by pid") == 2);
	ud_remove(&u);
}

/* Eight processes connecting at once start one daemon between them. */
TEST(eight_at_once_one_daemon)
{
	pid_t pids[CHILDREN];
	struct ud u;

	ud_setup(&u, -1, geteuid());
	connect_at_once(CHILDREN, pids);
	for (int i = 1; i < CHILDREN; i++)
		CHECK_MSG(pids[i] == pids[0], "child %d served by %d, child 0 by %d", i,
			  (int)pids[i], (int)pids[0]);
	CHECK_MSG(log_count(&u, "started by pid") == 1, "%d daemons started",
		  log_count(&u, "started by pid"));
	CHECK(log_count(&u, "ready:") == 1);
	CHECK(log_count(&u, "serving uid") == 1);
	stop(pids[0]);
	ud_remove(&u);
}

/* A node daemon that serves this user is used, and no user daemon made. */
TEST(node_daemon_preferred)
{
	struct daemon_proc node;
	cuflag_client *c;
	struct stat st;
	struct ud u;

	ud_setup(&u, -1, geteuid());
	daemon_start(&node, 0, NULL);
	CHECK(setenv("CUFLAG_NODE_SOCKET", node.sock, 1) == 0);
	CHECK_RC(cuflag_connect(NULL, &c));
	CHECK(daemon_of(c) == node.pid);
	one_completion(c);
	cuflag_disconnect(c);
	CHECK(lstat(u.dir, &st) < 0 && errno == ENOENT);
	CHECK(daemon_stop(&node) == 0);
	daemon_proc_remove(&node);
	ud_remove(&u);
}

/* Starting turned off, or failing: the error comes at once, and the hint
 * names the sockets tried, the binary and what to run. */
TEST(errors_say_what_to_do)
{
	const char *h;
	cuflag_client *c;
	struct stat st;
	uint64_t t0;
	struct ud u;
	int rc;

	ud_setup(&u, -1, geteuid());
	CHECK(setenv("CUFLAG_AUTOSPAWN", "0", 1) == 0);
	t0 = cuflag_now_ms();
	rc = cuflag_connect(NULL, &c);
	CHECK_MSG(rc == -ENOENT, "AUTOSPAWN=0: %d", rc);
	h = cuflag_connect_hint(rc);
	CHECK_MSG(h && strstr(h, u.node) && strstr(h, u.sock) && strstr(h, "CUFLAG_AUTOSPAWN=0") &&
			  strstr(h, "cuflagd --user"),
		  "hint: %s", h ? h : "(none)");
	CHECK(lstat(u.sock, &st) < 0 && errno == ENOENT);
	unsetenv("CUFLAG_AUTOSPAWN");

	CHECK(setenv("CUFLAGD", "/nonexistent/cuflagd", 1) == 0);
	rc = cuflag_connect(NULL, &c);
	CHECK_MSG(rc == -ENOENT, "no binary: %d", rc);
	h = cuflag_connect_hint(rc);
	CHECK_MSG(h && strstr(h, "/nonexistent/cuflagd") && strstr(h, "CUFLAGD") &&
			  strstr(h, u.sock),
		  "hint: %s", h ? h : "(none)");

	/* A binary that is not a daemon: it exits at once. */
	CHECK(setenv("CUFLAGD", "/bin/false", 1) == 0);
	rc = cuflag_connect(NULL, &c);
	CHECK_MSG(rc == -ECONNREFUSED, "a failing binary: %d", rc);
	h = cuflag_connect_hint(rc);
	CHECK_MSG(h && strstr(h, "/bin/false") && strstr(h, "cuflagd.log"), "hint: %s",
		  h ? h : "(none)");
	CHECK_MSG(cuflag_now_ms() - t0 < 3000u * CUFLAG_SLOWDOWN, "errors took %llu ms",
		  (unsigned long long)(cuflag_now_ms() - t0));

	/* CUFLAG_SOCKET: that socket, nothing else tried or started. */
	CHECK(setenv("CUFLAGD", real_daemon, 1) == 0);
	CHECK(setenv("CUFLAG_SOCKET", u.node, 1) == 0);
	rc = cuflag_connect(NULL, &c);
	CHECK_MSG(rc == -ENOENT, "CUFLAG_SOCKET: %d", rc);
	CHECK(lstat(u.sock, &st) < 0 && errno == ENOENT);
	unsetenv("CUFLAG_SOCKET");
	ud_remove(&u);
}

/* What cuflagctl status prints (stdout and stderr) into out; its exit
 * status. */
static int ctl_status(char *out, size_t size)
{
	const char *ctl = getenv("CUFLAGCTL");
	size_t len = 0;
	ssize_t n;
	pid_t pid;
	int p[2], st;

	CHECK(ctl && pipe(p) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		execl(ctl, ctl, "status", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	while (len < size - 1 && (n = read(p[0], out + len, size - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = 0;
	close(p[0]);
	CHECK(waitpid(pid, &st, 0) == pid);
	return cuflag_exit_code(st);
}

/* The user's directory as something else left it: a symlink, open to
 * others, or another user's: never used, and said so (cuflagctl asks no
 * daemon there either). */
TEST(directory_not_the_users)
{
	char other[160], out[4096];
	const char *h;
	cuflag_client *c;
	struct ud u;
	int rc;

	ud_setup(&u, -1, geteuid());
	snprintf(other, sizeof(other), "%s/elsewhere", u.base);
	CHECK(mkdir(other, 0700) == 0);
	CHECK(symlink(other, u.dir) == 0);
	rc = cuflag_connect(NULL, &c);
	h = cuflag_connect_hint(rc);
	CHECK_MSG(rc == -EPERM && h && strstr(h, "symbolic link"), "%d: %s", rc, h ? h : "-");
	CHECK(ctl_status(out, sizeof(out)) == 1 && strstr(out, "symbolic link"));
	CHECK(unlink(u.dir) == 0);

	CHECK(mkdir(u.dir, 0755) == 0);
	rc = cuflag_connect(NULL, &c);
	h = cuflag_connect_hint(rc);
	CHECK_MSG(rc == -EPERM && h && strstr(h, "0700"), "%d: %s", rc, h ? h : "-");
	CHECK(rmdir(u.dir) == 0);
	ud_remove(&u);
}

/* Whatever the test runs as another user: in a child, as uid with only its
 * own group, fn(u, arg); its exit status. */
static int as_user(uid_t uid, void (*fn)(struct ud *, void *), struct ud *u, void *arg)
{
	pid_t pid = fork();
	int st;

	CHECK(pid >= 0);
	if (pid == 0) {
		gid_t g = uid;
		if (setgroups(1, &g) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
			_exit(99);
		fn(u, arg);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	return cuflag_exit_code(st);
}

/* The owner's daemon started, its pid through the pipe fd *arg; the
 * connection held until that pipe's other end closes. */
static void owner_starts(struct ud *u, void *arg)
{
	int *fds = arg;
	cuflag_client *c;
	pid_t p;
	char b;

	(void)u;
	CHECK_RC(cuflag_connect(NULL, &c));
	one_completion(c);
	p = daemon_of(c);
	CHECK(write(fds[1], &p, sizeof(p)) == sizeof(p));
	CHECK(read(fds[2], &b, 1) == 0);
	cuflag_disconnect(c);
}

/* Another user: the socket out of reach, no daemon of its own there. */
static void other_tries(struct ud *u, void *arg)
{
	const char *argv[] = { real_daemon, "--user", "--socket", u->sock, NULL };
	cuflag_client *c;
	pid_t pid;
	int st;

	(void)arg;
	CHECK(cuflag_connect(u->sock, &c) == -EACCES);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2);
		execv(real_daemon, (char *const *)argv);
		_exit(127);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 127,
		  "another user's cuflagd --user in the owner's directory: status %d",
		  cuflag_exit_code(st));
}

/* A node daemon this user may not use: the user's own serves, and says why;
 * its pid into *arg (shared with the parent). */
static void outsider_falls_back(struct ud *u, void *arg)
{
	cuflag_client *c;
	char out[4096];

	CHECK_RC(cuflag_connect(NULL, &c));
	one_completion(c);
	*(volatile pid_t *)arg = daemon_of(c);
	CHECK(log_count(u, "not in group") == 1);
	/* cuflagctl says which daemon and why. */
	CHECK(ctl_status(out, sizeof(out)) == 0);
	CHECK_MSG(strstr(out, "user (not in group 60029"), "cuflagctl status said:\n%s", out);
	cuflag_disconnect(c);
}

static pid_t *shared_pid(void)
{
	void *m = mmap(NULL, sizeof(pid_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);

	CHECK(m != MAP_FAILED);
	return m;
}

/* A node daemon whose group the user is not in: the user's own is used. */
TEST(not_in_group_falls_back)
{
	const char *args[] = { "--socket-group", "60029", NULL };
	struct daemon_proc node;
	pid_t *ud_pid;
	struct ud u;

	if (geteuid() != 0) {
		printf("  (skipped: needs root)\n");
		return;
	}
	ud_setup(&u, 1, UID_OWNER);
	daemon_start(&node, 0, args);
	CHECK(chmod(node.dir, 0755) == 0);
	CHECK(setenv("CUFLAG_NODE_SOCKET", node.sock, 1) == 0);
	ud_pid = shared_pid();
	CHECK(as_user(UID_OWNER, outsider_falls_back, &u, ud_pid) == 0);
	CHECK(*ud_pid > 0 && *ud_pid != node.pid);
	CHECK(log_count(&u, "serving uid 60021 only") == 1);
	/* Its daemon exits after 1 s with no client. */
	CHECK(reap(*ud_pid, 5000) == 0);
	munmap(ud_pid, sizeof(pid_t));
	CHECK(daemon_stop(&node) == 0);
	daemon_proc_remove(&node);
	ud_remove(&u);
}

/* As a user whose /tmp/cuflag-UID someone else made: refused, and why. */
static void planted_refused(struct ud *u, void *arg)
{
	cuflag_client *c;
	const char *h;
	int rc;

	(void)u;
	rc = cuflag_connect(NULL, &c);
	h = cuflag_connect_hint(rc);
	CHECK_MSG(rc == -EPERM && h && strstr(h, arg), "%d: %s", rc, h ? h : "(no hint)");
}

/* Another user (and root) cannot reach the owner's daemon, nor replace
 * it; an attacker's directory or link planted at /tmp/cuflag-UID is not
 * used. */
TEST(other_users_kept_out)
{
	char planted[64], mine[128];
	pid_t owner, *daemon;
	int fds[3], up[2], hold[2], rc;
	cuflag_client *c;
	struct ud u;

	if (geteuid() != 0) {
		printf("  (skipped: needs root)\n");
		return;
	}
	ud_setup(&u, -1, UID_OWNER);
	daemon = shared_pid();
	CHECK(pipe(up) == 0 && pipe(hold) == 0);
	owner = fork();
	CHECK(owner >= 0);
	if (owner == 0) {
		close(up[0]);
		close(hold[1]);
		fds[1] = up[1];
		fds[2] = hold[0];
		_exit(as_user(UID_OWNER, owner_starts, &u, fds));
	}
	close(up[1]);
	close(hold[0]);
	CHECK(read(up[0], daemon, sizeof(*daemon)) == sizeof(*daemon));
	CHECK(as_user(UID_OTHER, other_tries, &u, NULL) == 0);
	/* Root passes the directory's mode; the daemon itself refuses it. */
	rc = cuflag_connect(u.sock, &c);
	CHECK_MSG(rc == -EACCES, "root connecting to a user's daemon: %d", rc);
	CHECK(strstr(cuflag_connect_hint(rc), "another user's own daemon"));
	CHECK(kill(*daemon, 0) == 0);
	close(hold[1]);
	close(up[0]);
	CHECK(waitpid(owner, &rc, 0) == owner && WIFEXITED(rc) && !WEXITSTATUS(rc));
	stop(*daemon);
	munmap(daemon, sizeof(pid_t));

	/* Without XDG_RUNTIME_DIR: /tmp/cuflag-UID, made first by another. */
	unsetenv("XDG_RUNTIME_DIR");
	snprintf(planted, sizeof(planted), "/tmp/cuflag-%u", UID_PLANTED);
	snprintf(mine, sizeof(mine), "%s/attacker", u.base);
	rmdir(planted); /* left by an earlier run stopped short */
	unlink(planted);
	CHECK(mkdir(planted, 0700) == 0 && chown(planted, UID_OTHER, UID_OTHER) == 0);
	CHECK(as_user(UID_PLANTED, planted_refused, &u, "owned by another user") == 0);
	CHECK(rmdir(planted) == 0);
	CHECK(mkdir(mine, 0700) == 0 && chown(mine, UID_PLANTED, UID_PLANTED) == 0);
	CHECK(symlink(mine, planted) == 0);
	CHECK(as_user(UID_PLANTED, planted_refused, &u, "symbolic link") == 0);
	CHECK(unlink(planted) == 0);
	ud_remove(&u);
}

/* Completions waiting on s: what consume counts, each call also a chance
 * for the library to resume with a daemon that went. */
static uint64_t take(cuflag_slot *s, int ms)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t n = 0;

	(void)poll(&p, 1, ms);
	return cuflag_slot_consume(s, &n) == 0 ? n : 0;
}

/* The user's daemon SIGKILLed with work in flight: the client's resume
 * starts another, and every completion is counted once. */
TEST(sigkill_under_load_counts_exact)
{
	enum { SLOTS = 8, ROUNDS = 400 };
	cuflag_slot *s[SLOTS];
	uint64_t got[SLOTS] = { 0 }, end;
	cuflag_client *c;
	pid_t first, second;
	struct ud u;
	uint32_t t;

	ud_setup(&u, -1, geteuid());
	CHECK_RC(cuflag_connect(NULL, &c));
	first = daemon_of(c);
	CHECK_RC(cuflag_slots_acquire(c, SLOTS, s));
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < SLOTS; i++) {
			CHECK_RC(cuflag_slot_arm(s[i], &t));
			/* Half the slots complete before the kill is seen. */
			if (r != ROUNDS / 2 || i % 2)
				sim_store(cuflag_slot_flag(s[i]), t);
		}
		if (r == ROUNDS / 2) {
			CHECK(kill(first, SIGKILL) == 0);
			CHECK(reap(first, 5000) == 128 + SIGKILL);
			for (int i = 0; i < SLOTS; i += 2)
				sim_store(cuflag_slot_flag(s[i]), t); /* while none runs */
		}
		for (int i = 0; i < SLOTS; i++)
			got[i] += take(s[i], 0);
	}
	end = cuflag_now_ms() + 10000u * CUFLAG_SLOWDOWN;
	for (int i = 0; i < SLOTS; i++)
		while (got[i] < ROUNDS && cuflag_now_ms() < end)
			got[i] += take(s[i], 20);
	for (int i = 0; i < SLOTS; i++) {
		got[i] += take(s[i], 100); /* none more than armed */
		CHECK_MSG(got[i] == ROUNDS, "slot %d: %llu completions of %d", i,
			  (unsigned long long)got[i], ROUNDS);
	}
	second = daemon_of(c);
	CHECK(second != first && second > 0);
	CHECK(log_count(&u, "started by pid") == 2);
	for (int i = 0; i < SLOTS; i++)
		cuflag_slot_release(s[i]);
	cuflag_disconnect(c);
	stop(second);
	ud_remove(&u);
}

/* A client an event loop drives (cuflag_client_dispatch() alone) starts
 * its user daemon again too, and counts what completed meanwhile. */
TEST(dispatch_starts_it_again)
{
	cuflag_client *c;
	cuflag_slot *s;
	pid_t first, second;
	uint64_t n = 0, end;
	struct ud u;
	uint32_t t;

	ud_setup(&u, -1, geteuid());
	CHECK_RC(cuflag_connect(NULL, &c));
	first = daemon_of(c);
	CHECK_RC(cuflag_slot_acquire(c, &s));
	struct pollfd p[2] = { { .fd = cuflag_client_dispatch_fd(c), .events = POLLIN },
			       { .fd = cuflag_slot_fd(s), .events = POLLIN } };
	CHECK(p[0].fd >= 0);
	CHECK_RC(cuflag_slot_arm(s, &t));
	CHECK(kill(first, SIGKILL) == 0);
	CHECK(reap(first, 5000) == 128 + SIGKILL);
	sim_store(cuflag_slot_flag(s), t); /* while none runs */
	end = cuflag_now_ms() + 10000u * CUFLAG_SLOWDOWN;
	while (!n && cuflag_now_ms() < end) {
		int timeout;
		CHECK_RC(cuflag_client_dispatch_timeout(c, &timeout));
		CHECK(poll(p, 2, timeout < 0 || timeout > 20 ? 20 : timeout) >= 0);
		(void)cuflag_client_dispatch(c);
		if (cuflag_slot_consume(s, &n))
			n = 0;
	}
	CHECK_MSG(n == 1, "%llu completions after the dispatch's resume", (unsigned long long)n);
	second = daemon_of(c);
	CHECK(second != first);
	CHECK(log_count(&u, "a client resumes") == 1);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	stop(second);
	ud_remove(&u);
}

/* A slot exported through one daemon cannot be imported through another:
 * -EXDEV, both ways. */
TEST(exports_do_not_cross_daemons)
{
	struct daemon_proc node;
	cuflag_client *on_node, *on_user;
	cuflag_slot *a, *b, *imp;
	int fa, fb;
	pid_t user_pid;
	struct ud u;

	ud_setup(&u, -1, geteuid());
	CHECK_RC(cuflag_connect(NULL, &on_user)); /* no node daemon yet */
	user_pid = daemon_of(on_user);
	daemon_start(&node, 0, NULL);
	CHECK_RC(cuflag_connect(node.sock, &on_node));
	CHECK_RC(cuflag_slot_acquire(on_node, &a));
	CHECK_RC(cuflag_slot_acquire(on_user, &b));
	CHECK_RC(cuflag_slot_export(a, &fa));
	CHECK_RC(cuflag_slot_export(b, &fb));
	CHECK(cuflag_slot_import(on_user, fa, &imp) == -EXDEV);
	CHECK(cuflag_slot_import(on_node, fb, &imp) == -EXDEV);
	/* Each daemon still takes its own. */
	CHECK_RC(cuflag_slot_import(on_user, fb, &imp));
	cuflag_slot_release(imp);
	close(fa);
	close(fb);
	cuflag_slot_release(a);
	cuflag_slot_release(b);
	cuflag_disconnect(on_node);
	cuflag_disconnect(on_user);
	CHECK(daemon_stop(&node) == 0);
	daemon_proc_remove(&node);
	stop(user_pid);
	ud_remove(&u);
}

int main(int argc, char **argv)
{
	const struct test_env env = { 0 };

	real_daemon = getenv("CUFLAGD");
	CHECK_MSG(real_daemon, "CUFLAGD is not set");
	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGPIPE, SIG_IGN);
	/* The daemons the library starts detach: they become ours to reap. */
	CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
	return test_run(&env, argc, argv);
}
