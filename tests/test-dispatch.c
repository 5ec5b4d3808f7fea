/* SPDX-License-Identifier: MIT */
/*
 * A client driven by an event loop through cuflag_client_dispatch() alone:
 * the loop below polls the dispatch fd and the slots' eventfds with the
 * library's timeout, and makes no other call that could resume. It sees the
 * daemon's hang-up through the fd, the slots' flags while no daemon runs
 * (their eventfds ring), a silent listener without blocking, a daemon that
 * refuses the region, and resumes with the next daemon by itself; every
 * completion is counted once.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "fd-util.h"
#include "test-runner.h"

/* The loop: what it watches, and what it saw. */
struct loop {
	cuflag_client *c;
	int fds[3]; /* dispatch fd, then eventfds to watch (-1: none) */
	int rc;     /* the last dispatch's answer */
	int ready[3];
	uint64_t slowest_ns; /* the longest dispatch call */
	int by_fd;  /* dispatches made because the dispatch fd was readable */
};

/* One turn: wait as the library says, then dispatch. */
static void turn(struct loop *l, int max_ms)
{
	struct pollfd p[3];
	int timeout, n = 0;
	uint64_t t;

	CHECK_RC(cuflag_client_dispatch_timeout(l->c, &timeout));
	if (timeout < 0 || timeout > max_ms)
		timeout = max_ms;
	for (int i = 0; i < 3 && l->fds[i] >= 0; i++, n++)
		p[i] = (struct pollfd){ .fd = l->fds[i], .events = POLLIN };
	CHECK(poll(p, (nfds_t)n, timeout) >= 0);
	for (int i = 0; i < n; i++)
		l->ready[i] = !!(p[i].revents & POLLIN);
	l->by_fd += l->ready[0];
	t = cuflag_now_ns();
	l->rc = cuflag_client_dispatch(l->c);
	t = cuflag_now_ns() - t;
	if (t > l->slowest_ns)
		l->slowest_ns = t;
}

/* Turns until the dispatch answers rc (1: until fd i of the loop is
 * readable, i = -want - 1000); whether it did within ms. */
static int run_until(struct loop *l, int want, int ms)
{
	uint64_t end = cuflag_now_ns() + (uint64_t)ms * 1000000u;

	while (cuflag_now_ns() < end) {
		turn(l, 20);
		if (want <= -1000 ? l->ready[-want - 1000] : l->rc == want)
			return 1;
	}
	return 0;
}
#define READY(i) (-1000 - (i))

/* Turns until the slot's eventfd brings a count: it. (A doorbell may ring
 * before the daemon's record moves: a resume rings every group's.) */
static uint64_t consume_in_loop(struct loop *l, cuflag_slot *s)
{
	uint64_t n;

	for (int i = 0; i < 100; i++)
		if (run_until(l, READY(1), 2000) && cuflag_slot_consume(s, &n) == 0)
			return n;
	CHECK_FAIL("no count came");
}

/* The same for a group: its one record. */
static struct cuflag_completion drain_in_loop(struct loop *l, cuflag_group *g)
{
	struct cuflag_completion rec;

	for (int i = 0; i < 100; i++)
		if (run_until(l, READY(2), 2000) && cuflag_group_drain(g, &rec, 1) == 1)
			return rec;
	CHECK_FAIL("no record came");
}

static struct loop loop_of(cuflag_client *c, int efd1, int efd2)
{
	struct loop l = { .c = c, .fds = { cuflag_client_dispatch_fd(c), efd1, efd2 } };

	CHECK(l.fds[0] >= 0);
	return l;
}

TEST(served)
{
	struct daemon_proc d;
	cuflag_client *c;
	int fd, timeout;
	struct pollfd p;

	daemon_start(&d, 0, NULL);
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK(cuflag_client_dispatch(NULL) == -EINVAL);
	CHECK(cuflag_client_dispatch_fd(NULL) == -EINVAL);
	CHECK(cuflag_client_dispatch_timeout(c, NULL) == -EINVAL);
	fd = cuflag_client_dispatch_fd(c);
	CHECK(fd >= 0 && fd != cuflag_client_fd(c));
	CHECK(cuflag_client_dispatch_fd(c) == fd); /* one for the client's life */
	CHECK_RC(cuflag_client_dispatch(c));
	/* Served, nothing to probe: only the fd calls for a dispatch. */
	CHECK_RC(cuflag_client_dispatch_timeout(c, &timeout));
	CHECK(timeout == -1);
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	CHECK(poll(&p, 1, 20) == 0);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
}

static void kill_daemon(struct daemon_proc *d)
{
	kill(d->pid, SIGKILL);
	CHECK(waitpid(d->pid, NULL, 0) == d->pid);
}

/* A listener on the daemon's path that never answers, as a socket unit
 * while its daemon starts. */
static int silent_listener(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(listen(fd, 8) == 0);
	return fd;
}

TEST(restarts_by_dispatch_alone)
{
	const char *small[] = { "--queue-size", "16", NULL };
	struct daemon_proc a, b, x, y;
	cuflag_client *c;
	cuflag_group *g;
	cuflag_slot *s, *gs;
	struct cuflag_completion rec;
	uint32_t t, tg;
	uint64_t n, epoch;
	int lsn;

	daemon_start(&a, 0, NULL);
	CHECK_RC(cuflag_connect(a.sock, &c));
	CHECK_RC(cuflag_client_set_resume_timeout(c, 100));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_group_create(c, &g));
	CHECK_RC(cuflag_group_slot_acquire(g, &gs));
	struct loop l = loop_of(c, cuflag_slot_fd(s), cuflag_group_fd(g));
	epoch = cuflag_client_epoch(c);
	CHECK_RC(cuflag_slot_arm(s, &t));
	CHECK_RC(cuflag_slot_arm(gs, &tg));

	/* The hang-up makes the dispatch fd readable (served, there is no
	 * timeout to call it otherwise). */
	turn(&l, 0);
	CHECK(l.rc == 0);
	kill_daemon(&a);
	l.by_fd = 0;
	CHECK(run_until(&l, -EAGAIN, 2000));
	CHECK(l.by_fd > 0);

	/* No daemon: a flag that lands rings its slot's (and its group's)
	 * eventfd, counting nothing. */
	CHECK_RC(cuflag_slot_complete(s, t));
	CHECK(run_until(&l, READY(1), 2000));
	CHECK(cuflag_slot_consume(s, &n) == -EAGAIN);
	CHECK_RC(cuflag_slot_complete(gs, tg));
	CHECK(run_until(&l, READY(2), 2000));
	CHECK(cuflag_group_drain(g, &rec, 1) == 0);
	CHECK_RC(cuflag_slot_wait(s, t, 0));
	CHECK_RC(cuflag_slot_wait(gs, tg, 0));
	/* Past the resume timeout: said, and the attempts go on. */
	CHECK(run_until(&l, -ENOTCONN, 2000));

	/* A listener that accepts and never answers holds no dispatch. */
	lsn = silent_listener(a.sock);
	l.slowest_ns = 0;
	for (uint64_t end = cuflag_now_ns() + 300000000u; cuflag_now_ns() < end;)
		turn(&l, 20);
	CHECK(l.rc == -ENOTCONN);
	CHECK_MSG(l.slowest_ns < 50000000u, "a dispatch took %.1f ms", l.slowest_ns / 1e6);
	printf("dispatch: a silent listener for 300 ms, the longest dispatch %.3f ms\n",
	       l.slowest_ns / 1e6);
	close(lsn);
	unlink(a.sock);

	/* A daemon that cannot take the region refuses it. */
	daemon_start_at(&x, a.dir, a.sock, 0, small);
	CHECK(run_until(&l, -ESTALE, 5000));
	CHECK(daemon_stop_keep_dir(&x) == 0);

	/* The next daemon takes the client over, from dispatches alone. */
	daemon_start_at(&b, a.dir, a.sock, 0, NULL);
	CHECK(run_until(&l, 0, 5000));
	CHECK(cuflag_client_epoch(c) != epoch);
	CHECK_MSG(l.slowest_ns < 500000000u, "a dispatch took %.1f ms", l.slowest_ns / 1e6);
	CHECK(consume_in_loop(&l, s) == 1); /* landed while no daemon ran: once */
	rec = drain_in_loop(&l, g);
	CHECK(rec.slot == gs && rec.completions == 1);

	/* The same fd sees the next daemon go too, and the one after serves. */
	epoch = cuflag_client_epoch(c);
	kill_daemon(&b);
	l.by_fd = 0;
	CHECK(run_until(&l, -EAGAIN, 2000));
	CHECK(l.by_fd > 0);
	daemon_start_at(&y, a.dir, a.sock, 0, NULL);
	CHECK(run_until(&l, 0, 5000));
	CHECK(cuflag_client_epoch(c) != epoch);
	CHECK_RC(cuflag_slot_arm(s, &t));
	CHECK_RC(cuflag_slot_complete(s, t));
	CHECK(consume_in_loop(&l, s) == 1);
	CHECK(cuflag_slot_consume(s, &n) == -EAGAIN); /* nothing twice */
	CHECK(cuflag_group_drain(g, &rec, 1) == 0);

	cuflag_slot_release(gs);
	CHECK_RC(cuflag_group_destroy(g));
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&y) == 0);
	printf("dispatch: restarts, a silent listener and a refusal, from dispatches alone\n");
}

/* A resume made by a blocking call is followed: the fd watches the new
 * connection and sees its hang-up. */
TEST(follows_other_resumes)
{
	struct daemon_proc a, b;
	cuflag_client *c;
	cuflag_slot *s;

	daemon_start(&a, 0, NULL);
	CHECK_RC(cuflag_connect(a.sock, &c));
	struct loop l = loop_of(c, -1, -1);
	turn(&l, 0);
	CHECK(daemon_stop_keep_dir(&a) == 0);
	daemon_start_at(&b, a.dir, a.sock, 0, NULL);
	CHECK_RC(cuflag_slot_acquire(c, &s)); /* resumes, blocking */
	CHECK(run_until(&l, 0, 1000));
	kill_daemon(&b);
	l.by_fd = 0;
	CHECK(run_until(&l, -EAGAIN, 2000));
	CHECK(l.by_fd > 0);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	unlink(a.sock);
	rmdir(a.dir);
}

int main(int argc, char **argv)
{
	const struct test_env env = { 0 }; /* each test starts its daemons */
	int rc;

	setvbuf(stdout, NULL, _IONBF, 0);
	rc = test_run(&env, argc, argv);
	if (rc == 0)
		printf("dispatch: ok\n");
	return rc;
}
