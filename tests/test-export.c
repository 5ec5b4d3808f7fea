/* SPDX-License-Identifier: MIT */
/*
 * Completions across processes through the real daemon: a slot exported as
 * an fd and imported by other clients (another user's process, many
 * importers, a group) counts every completion exactly once per importer,
 * also across a daemon killed with SIGKILL; importers learn within a second
 * that the exporter's slot went (released, disconnected, killed); anything
 * but a live handle is refused; imports cost the importer's quotas; an
 * imported slot cannot be armed, completed or exported.
 */
#undef NDEBUG
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#ifdef CUFLAG_TEST_CUDA
#include "cuflag/cuflag_cuda.h"
#endif
#include "fdpass.h"
#include "harness.h"
#include "test-runner.h"
#include "unix-socket.h"

static struct daemon_proc d;

static int eventfd_for_test(void)
{
	int fd = eventfd(0, EFD_CLOEXEC);

	CHECK(fd >= 0);
	return fd;
}

/* Arm and complete n values of s, one at a time. */
static void complete_n(cuflag_slot *s, unsigned n)
{
	uint32_t t;

	for (unsigned i = 0; i < n; i++) {
		CHECK_RC(cuflag_slot_arm(s, &t));
		CHECK_RC(cuflag_slot_complete(s, t));
	}
}

/* Consume s until total completions came (aborts after 10 s without one).
 * Short polls: a consume is what resumes with a daemon that restarted. */
static uint64_t count_until(cuflag_slot *s, uint64_t total)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t got = 0, n, since = cuflag_now_ns();

	while (got < total) {
		int rc = cuflag_slot_consume(s, &n);
		if (rc == -EAGAIN) {
			CHECK_MSG(cuflag_now_ns() - since < 10000000000ull,
				  "no completion for 10 s: %llu of %llu", (unsigned long long)got,
				  (unsigned long long)total);
			(void)poll(&p, 1, 100);
			continue;
		}
		CHECK_RC(rc);
		got += n;
		since = cuflag_now_ns();
	}
	CHECK(got == total);
	return got;
}

/* How long until consume says -EPIPE, in ms (aborts after 5 s). Completions
 * still to count come first and are added to *left. */
static uint64_t ms_until_gone(cuflag_slot *s, uint64_t *left)
{
	uint64_t t0 = cuflag_now_ns(), n;
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };

	for (;;) {
		int rc = cuflag_slot_consume(s, &n);
		if (rc == -EPIPE)
			return (cuflag_now_ns() - t0) / 1000000u;
		if (rc == 0) {
			if (left)
				*left += n;
			continue;
		}
		CHECK(rc == -EAGAIN);
		CHECK_MSG(cuflag_now_ns() - t0 < 5000000000ull, "no -EPIPE within 5 s");
		(void)poll(&p, 1, 100);
	}
}

/* Every call an importer may not make. */
static void check_eperm(cuflag_slot *s)
{
	uint32_t t;
	int fd;

	CHECK(cuflag_slot_arm(s, &t) == -EPERM);
	CHECK(cuflag_slot_arm_many(s, 4, &t) == -EPERM);
	CHECK(cuflag_slot_complete(s, *cuflag_slot_flag(s) + 1) == -EPERM);
	CHECK(cuflag_slot_export(s, &fd) == -EPERM);
	fd = eventfd_for_test();
	CHECK(cuflag_slot_bind_eventfd(s, fd) == -EPERM);
	close(fd);
#ifdef CUFLAG_TEST_CUDA
	CHECK(cuflag_cuda_signal(s, NULL, &t) == -EPERM);
	CHECK(cuflag_cuda_launched(s, NULL, &t) == -EPERM);
	CUdeviceptr dp;
	CHECK(cuflag_cuda_slot_devptr(s, &dp) == -EPERM);
#endif
}

static void send_fd(int sock, int fd, uint64_t word)
{
	CHECK(cuflag_send_msg(sock, &word, sizeof(word), &fd, fd >= 0 ? 1 : 0, 0) == 0);
}

static uint64_t recv_word(int sock, int *fd)
{
	uint64_t word = 0;
	int fds[1] = { -1 };
	unsigned nfds = 0;
	ssize_t n = cuflag_recv_msg(sock, &word, sizeof(word), fds, 1, &nfds, 0);

	CHECK(n == (ssize_t)sizeof(word));
	if (fd)
		*fd = fds[0];
	else if (fds[0] >= 0)
		close(fds[0]);
	return word;
}

/* ---------------------------------------------------------------- */
/* Another user's process, across a SIGKILLed daemon                 */
/* ---------------------------------------------------------------- */

enum { ROUND = 50 };

/* The importer, as uid 65534: imports the handle it is sent, checks what
 * it may not do, counts 3 rounds (the second landing across a daemon
 * restart), tells each count, then how long -EPIPE took. */
static void importer_child(const char *sock, int sp)
{
	cuflag_client *c;
	cuflag_slot *s;
	int fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (become_user(65534))
		_exit(99);
	CHECK_RC(cuflag_connect(sock, &c));
	cuflag_client_set_resume_timeout(c, 20000);
	recv_word(sp, &fd);
	CHECK(fd >= 0);
	CHECK_RC(cuflag_slot_import(c, fd, &s));
	close(fd);
	check_eperm(s);
	send_fd(sp, -1, 0); /* imported */
	for (int round = 0; round < 3; round++) {
		uint64_t want = recv_word(sp, NULL);
		send_fd(sp, -1, count_until(s, want));
	}
	/* The last value the exporter reached is what this slot's flag holds. */
	send_fd(sp, -1, *cuflag_slot_flag(s));
	uint64_t left = 0;
	send_fd(sp, -1, ms_until_gone(s, &left) + (left ? 100000 : 0));
	CHECK(cuflag_slot_wait(s, *cuflag_slot_flag(s) + 1, 1000) == -EPIPE);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	_exit(0);
}

TEST(two_users_restart)
{
	struct daemon_proc b;
	cuflag_client *c;
	cuflag_slot *s;
	int sp[2], fd, st;
	uint32_t t;
	pid_t pid;

	daemon_start(&b, 0, NULL);
	CHECK(chmod(b.dir, 0711) == 0);
	CHECK(cuflag_unix_pair(sp) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		close(sp[0]);
		importer_child(b.sock, sp[1]);
	}
	close(sp[1]);
	CHECK_RC(cuflag_connect(b.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	complete_n(s, 3); /* signalled before the import: not the importer's */
	CHECK(count_until(s, 3) == 3);
	CHECK_RC(cuflag_slot_export(s, &fd));
	send_fd(sp[0], fd, 0);
	close(fd);
	recv_word(sp[0], NULL);
	/* Round 1: with the daemon. */
	send_fd(sp[0], -1, ROUND);
	complete_n(s, ROUND);
	CHECK(recv_word(sp[0], NULL) == ROUND);
	/* Round 2: armed before the kill, half landing while no daemon runs. */
	CHECK_RC(cuflag_slot_arm_many(s, ROUND, &t));
	CHECK_RC(cuflag_slot_complete(s, t + ROUND / 2 - 1));
	kill(b.pid, SIGKILL);
	CHECK(waitpid(b.pid, NULL, 0) == b.pid);
	CHECK_RC(cuflag_slot_complete(s, t + ROUND - 1));
	struct daemon_proc gone = b;
	daemon_start_at(&b, gone.dir, gone.sock, 0, NULL);
	CHECK_RC(cuflag_reconnect(c));
	send_fd(sp[0], -1, ROUND);
	CHECK(recv_word(sp[0], NULL) == ROUND);
	/* Round 3: on with the new daemon. */
	send_fd(sp[0], -1, ROUND);
	complete_n(s, ROUND);
	CHECK(recv_word(sp[0], NULL) == ROUND);
	CHECK(recv_word(sp[0], NULL) == *cuflag_slot_flag(s));
	/* The exporter's own count is its own: all of them, once. */
	CHECK(count_until(s, 3 * ROUND) == 3 * ROUND);
	cuflag_slot_release(s);
	uint64_t ms = recv_word(sp[0], NULL);
	CHECK_MSG(ms < 1000, "-EPIPE after %llu ms", (unsigned long long)ms);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(sp[0]);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&b) == 0);
}

/* ---------------------------------------------------------------- */
/* Many importers, a group, in one process                           */
/* ---------------------------------------------------------------- */

TEST(many_importers)
{
	enum { K = 6, G = 40, N = 25 };
	cuflag_client *e, *im[K], *gc;
	cuflag_slot *s, *is[K], *gs[G];
	cuflag_group *g;
	uint32_t first;
	int fd;

	CHECK_RC(cuflag_connect(d.sock, &e));
	CHECK_RC(cuflag_slot_acquire(e, &s));
	CHECK_RC(cuflag_slot_export(s, &fd));
	for (int i = 0; i < K; i++) {
		CHECK_RC(cuflag_connect(d.sock, &im[i]));
		CHECK_RC(cuflag_slot_import(im[i], fd, &is[i]));
		CHECK(*cuflag_slot_flag(is[i]) == *cuflag_slot_flag(s));
	}
	CHECK_RC(cuflag_connect(d.sock, &gc));
	CHECK_RC(cuflag_group_create(gc, &g));
	for (int i = 0; i < G; i++) {
		/* Any fd of the handle: a second export gives another. */
		int fd2;
		CHECK_RC(cuflag_slot_export(s, &fd2));
		CHECK_RC(cuflag_group_slot_import(g, i & 1 ? fd2 : fd, &gs[i]));
		close(fd2);
		CHECK(cuflag_slot_fd(gs[i]) == -EOPNOTSUPP);
	}
	close(fd);
	complete_n(s, N);
	/* Many values at once: one arm, one store of the last. */
	CHECK_RC(cuflag_slot_arm_many(s, N, &first));
	CHECK_RC(cuflag_slot_complete(s, first + N - 1));
	for (int i = 0; i < K; i++) {
		CHECK(count_until(is[i], 2 * N) == 2 * N);
		CHECK_RC(cuflag_slot_wait(is[i], first + N - 1, 2000));
	}
	uint64_t per[G] = { 0 }, got = 0;
	struct cuflag_completion rec[64];
	struct pollfd p = { .fd = cuflag_group_fd(g), .events = POLLIN };
	while (got < (uint64_t)G * 2 * N) {
		CHECK(poll(&p, 1, 10000) == 1);
		int n = cuflag_group_drain(g, rec, 64);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++) {
			for (int k = 0; k < G; k++)
				if (rec[i].slot == gs[k])
					per[k] += rec[i].completions;
			got += rec[i].completions;
		}
	}
	for (int k = 0; k < G; k++)
		CHECK(per[k] == 2 * N);
	/* Released: every importer is told, the group with a record of none. */
	uint64_t t0 = cuflag_now_ns();
	cuflag_slot_release(s);
	for (int i = 0; i < K; i++) {
		CHECK(ms_until_gone(is[i], NULL) < 1000);
		CHECK(cuflag_slot_wait(is[i], first + N, 0) == -EPIPE);
		CHECK_RC(cuflag_slot_wait(is[i], first + N - 1, 0)); /* reached before */
	}
	unsigned told = 0;
	while (told < G) {
		CHECK(cuflag_now_ns() - t0 < 1000000000ull);
		(void)poll(&p, 1, 100);
		int n = cuflag_group_drain(g, rec, 64);
		for (int i = 0; i < n; i++) {
			CHECK(rec[i].completions == 0);
			told++;
		}
	}
	for (int k = 0; k < G; k++) {
		uint64_t n;
		CHECK(cuflag_slot_consume(gs[k], &n) == -EPIPE);
		cuflag_slot_release(gs[k]);
	}
	for (int i = 0; i < K; i++) {
		cuflag_slot_release(is[i]);
		cuflag_disconnect(im[i]);
	}
	CHECK_RC(cuflag_group_destroy(g));
	cuflag_disconnect(gc);
	cuflag_disconnect(e);
}

/* ---------------------------------------------------------------- */
/* Revocation                                                        */
/* ---------------------------------------------------------------- */

TEST(revoke_disconnect)
{
	cuflag_client *e, *i;
	cuflag_slot *s, *is;
	int fd;

	CHECK_RC(cuflag_connect(d.sock, &e));
	CHECK_RC(cuflag_connect(d.sock, &i));
	CHECK_RC(cuflag_slot_acquire(e, &s));
	CHECK_RC(cuflag_slot_export(s, &fd));
	CHECK_RC(cuflag_slot_import(i, fd, &is));
	complete_n(s, 2);
	/* Signalled, not consumed yet: counted before the -EPIPE. */
	CHECK_RC(cuflag_slot_wait(is, *cuflag_slot_flag(s), 2000));
	cuflag_disconnect(e);
	uint64_t left = 0;
	CHECK(ms_until_gone(is, &left) < 1000);
	CHECK(left == 2);
	/* The handle is dead: a new import of it is refused. */
	cuflag_slot *again;
	CHECK(cuflag_slot_import(i, fd, &again) == -EINVAL);
	close(fd);
	cuflag_slot_release(is);
	cuflag_disconnect(i);
}

/* An exporter the daemon drops (here for a malformed message): its
 * importers are told as for a disconnect. */
TEST(revoke_drop)
{
	cuflag_client *e, *i;
	cuflag_slot *s, *is;
	int fd;

	CHECK_RC(cuflag_connect(d.sock, &e));
	CHECK_RC(cuflag_connect(d.sock, &i));
	CHECK_RC(cuflag_slot_acquire(e, &s));
	CHECK_RC(cuflag_slot_export(s, &fd));
	CHECK_RC(cuflag_slot_import(i, fd, &is));
	close(fd);
	complete_n(s, 1);
	CHECK(count_until(is, 1) == 1);
	/* One byte: shorter than any header. */
	CHECK(send(cuflag_client_fd(e), "x", 1, MSG_NOSIGNAL) == 1);
	CHECK(ms_until_gone(is, NULL) < 1000);
	cuflag_slot_release(is);
	cuflag_disconnect(i);
	cuflag_slot_release(s);
	cuflag_disconnect(e);
}

TEST(revoke_sigkill)
{
	cuflag_client *c;
	cuflag_slot *is;
	int sp[2], fd;
	pid_t pid;

	CHECK(cuflag_unix_pair(sp) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		cuflag_client *e;
		cuflag_slot *s;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sp[0]);
		CHECK_RC(cuflag_connect(d.sock, &e));
		CHECK_RC(cuflag_slot_acquire(e, &s));
		CHECK_RC(cuflag_slot_export(s, &fd));
		send_fd(sp[1], fd, 0);
		recv_word(sp[1], NULL);
		complete_n(s, 3);
		send_fd(sp[1], -1, 0);
		pause();
		_exit(0);
	}
	close(sp[1]);
	CHECK_RC(cuflag_connect(d.sock, &c));
	recv_word(sp[0], &fd);
	CHECK_RC(cuflag_slot_import(c, fd, &is));
	close(fd);
	send_fd(sp[0], -1, 0);
	recv_word(sp[0], NULL);
	CHECK(count_until(is, 3) == 3);
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, NULL, 0) == pid);
	CHECK(ms_until_gone(is, NULL) < 1000);
	close(sp[0]);
	cuflag_slot_release(is);
	cuflag_disconnect(c);
}

/* ---------------------------------------------------------------- */
/* What is refused                                                   */
/* ---------------------------------------------------------------- */

TEST(bad_fds)
{
	cuflag_client *c;
	cuflag_slot *s, *is;
	int p[2], fd, own;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK(cuflag_slot_import(c, -1, &is) == -EBADF);
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	close(p[1]);
	CHECK(cuflag_slot_import(c, p[1], &is) == -EBADF); /* closed */
	CHECK(cuflag_slot_import(c, p[0], &is) == -EINVAL);
	close(p[0]);
	/* A memfd of one's own with the very bytes of a real handle, sealed
	 * alike: another file, refused. */
	CHECK_RC(cuflag_slot_export(s, &fd));
	char rec[64];
	ssize_t n = pread(fd, rec, sizeof(rec), 0);
	CHECK(n > 0);
	own = memfd_create("forged", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(own >= 0 && write(own, rec, (size_t)n) == n);
	CHECK(fcntl(own, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);
	CHECK(cuflag_slot_import(c, own, &is) == -EINVAL);
	close(own);
	/* The handle itself cannot be changed. */
	CHECK(pwrite(fd, "x", 1, 0) < 0);
	CHECK(ftruncate(fd, 0) < 0);
	/* The daemon's socket, an eventfd: refused. */
	CHECK(cuflag_slot_import(c, cuflag_client_fd(c), &is) == -EINVAL);
	own = eventfd_for_test();
	CHECK(cuflag_slot_import(c, own, &is) == -EINVAL);
	close(own);
	/* Revoked: the slot was released. */
	cuflag_slot_release(s);
	CHECK(cuflag_slot_import(c, fd, &is) == -EINVAL);
	close(fd);
	CHECK(cuflag_slot_export(NULL, &fd) == -EINVAL);
	CHECK(cuflag_slot_import(NULL, 0, &is) == -EINVAL);
	CHECK(cuflag_group_slot_import(NULL, 0, &is) == -EINVAL);
	/* The client is served still. */
	CHECK_RC(cuflag_slot_acquire(c, &s));
	complete_n(s, 1);
	CHECK(count_until(s, 1) == 1);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
}

TEST(quotas)
{
	struct daemon_proc b;
	cuflag_client *e, *i;
	cuflag_slot *s, *es[3], *is[3], *x;
	cuflag_group *g;
	int fd;

	daemon_start(&b, 0, (const char *const[]){ "--slots-per-client", "4", NULL });
	CHECK_RC(cuflag_connect(b.sock, &e));
	CHECK_RC(cuflag_connect(b.sock, &i));
	CHECK_RC(cuflag_slot_acquire(e, &s));
	CHECK_RC(cuflag_slot_export(s, &fd));
	CHECK_RC(cuflag_slots_acquire(i, 2, is));
	CHECK_RC(cuflag_slot_import(i, fd, &is[2]));
	CHECK_RC(cuflag_group_create(i, &g));
	CHECK_RC(cuflag_group_slot_import(g, fd, &x));
	/* Four slots held: the importer's fifth, an import too, is refused. */
	cuflag_slot *y;
	CHECK(cuflag_slot_import(i, fd, &y) == -ENOSPC);
	CHECK(cuflag_group_slot_import(g, fd, &y) == -ENOSPC);
	/* The exporter paid for none of them. */
	CHECK_RC(cuflag_slots_acquire(e, 3, es));
	complete_n(s, 1);
	CHECK(count_until(is[2], 1) == 1);
	for (int k = 0; k < 3; k++)
		cuflag_slot_release(es[k]);
	cuflag_slot_release(x);
	cuflag_group_destroy(g);
	for (int k = 0; k < 3; k++)
		cuflag_slot_release(is[k]);
	close(fd);
	cuflag_slot_release(s);
	cuflag_disconnect(i);
	cuflag_disconnect(e);
	CHECK(daemon_stop(&b) == 0);
}

/* Restart with the importer resuming before its exporter: it is linked
 * once the exporter hands its handle back; completions meanwhile count. */
TEST(restart_relink)
{
	struct daemon_proc b;
	cuflag_client *e, *i;
	cuflag_group *g;
	cuflag_slot *s, *is, *gs;
	int fd;
	uint32_t t;

	daemon_start(&b, 0, NULL);
	CHECK_RC(cuflag_connect(b.sock, &e));
	CHECK_RC(cuflag_connect(b.sock, &i));
	CHECK_RC(cuflag_group_create(i, &g));
	CHECK_RC(cuflag_slot_acquire(e, &s));
	CHECK_RC(cuflag_slot_export(s, &fd));
	CHECK_RC(cuflag_slot_import(i, fd, &is));
	CHECK_RC(cuflag_group_slot_import(g, fd, &gs));
	close(fd);
	complete_n(s, 4);
	CHECK(count_until(is, 4) == 4);
	CHECK_RC(cuflag_slot_arm(s, &t));
	kill(b.pid, SIGKILL);
	CHECK(waitpid(b.pid, NULL, 0) == b.pid);
	CHECK_RC(cuflag_slot_complete(s, t));
	struct daemon_proc gone = b;
	daemon_start_at(&b, gone.dir, gone.sock, 0, NULL);
	CHECK_RC(cuflag_reconnect(i));
	CHECK_RC(cuflag_reconnect(e));
	CHECK(count_until(is, 1) == 1);
	complete_n(s, 2);
	CHECK(count_until(is, 2) == 2);
	uint64_t got = 0;
	struct cuflag_completion rec[4];
	struct pollfd p = { .fd = cuflag_group_fd(g), .events = POLLIN };
	while (got < 7) {
		CHECK(poll(&p, 1, 10000) == 1);
		int n = cuflag_group_drain(g, rec, 4);
		for (int k = 0; k < n; k++)
			got += rec[k].completions;
	}
	CHECK(got == 7);
	cuflag_slot_release(s);
	CHECK(ms_until_gone(is, NULL) < 1000);
	cuflag_slot_release(gs);
	cuflag_slot_release(is);
	cuflag_group_destroy(g);
	cuflag_disconnect(i);
	cuflag_disconnect(e);
	CHECK(daemon_stop(&b) == 0);
}

/* Restart with an exporter that never comes back (killed while no daemon
 * ran): the importer, resumed, is told -EPIPE once the daemon stops waiting
 * for the exporter's redeclare (CUFLAG_IMPORT_RELINK_MS after its start). */
TEST(restart_exporter_gone)
{
	struct daemon_proc b;
	cuflag_client *c;
	cuflag_slot *is;
	int sp[2], fd;
	pid_t pid;

	daemon_start(&b, 0, NULL);
	CHECK(cuflag_unix_pair(sp) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		cuflag_client *e;
		cuflag_slot *s;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sp[0]);
		CHECK_RC(cuflag_connect(b.sock, &e));
		CHECK_RC(cuflag_slot_acquire(e, &s));
		CHECK_RC(cuflag_slot_export(s, &fd));
		send_fd(sp[1], fd, 0);
		recv_word(sp[1], NULL);
		complete_n(s, 2);
		pause();
		_exit(0);
	}
	close(sp[1]);
	CHECK_RC(cuflag_connect(b.sock, &c));
	recv_word(sp[0], &fd);
	CHECK_RC(cuflag_slot_import(c, fd, &is));
	close(fd);
	send_fd(sp[0], -1, 0);
	CHECK(count_until(is, 2) == 2);
	kill(b.pid, SIGKILL);
	CHECK(waitpid(b.pid, NULL, 0) == b.pid);
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, NULL, 0) == pid);
	close(sp[0]);
	struct daemon_proc gone = b;
	daemon_start_at(&b, gone.dir, gone.sock, 0, NULL);
	uint64_t start = cuflag_now_ns(), n;
	CHECK_RC(cuflag_reconnect(c));
	CHECK(cuflag_slot_consume(is, &n) == -EAGAIN); /* taken back, still waiting */
	struct pollfd p = { .fd = cuflag_slot_fd(is), .events = POLLIN };
	int rc;
	while ((rc = cuflag_slot_consume(is, &n)) == -EAGAIN) {
		CHECK_MSG(cuflag_now_ns() - start < (CUFLAG_IMPORT_RELINK_MS + 3000) * 1000000ull,
			  "no -EPIPE %u ms after the restart", CUFLAG_IMPORT_RELINK_MS + 3000);
		(void)poll(&p, 1, 200);
	}
	CHECK(rc == -EPIPE);
	CHECK(cuflag_now_ns() - start > (CUFLAG_IMPORT_RELINK_MS - 2000) * 1000000ull);
	cuflag_slot_release(is);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&b) == 0);
}

int main(int argc, char **argv)
{
	const char *args[] = { "--slots-per-client", "1024", NULL };
	const struct test_env env = { .daemon = &d };
	int rc;

	if (geteuid() != 0) {
		printf("SKIP: needs root (the importer runs as another user)\n");
		return 77;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGPIPE, SIG_IGN);
	daemon_start(&d, 0, args);
	rc = test_run(&env, argc, argv);
	CHECK(daemon_stop(&d) == 0);
	if (rc == 0)
		printf("export: ok\n");
	return rc;
}
