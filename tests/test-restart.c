/* SPDX-License-Identifier: MIT */
/*
 * A daemon restart loses no completion: a client whose cuflagd stops (cleanly
 * or killed) keeps its region and eventfds, reconnects to the new daemon with
 * cuflag_reconnect(), and every completion is counted exactly once: those
 * signalled before, those that landed while no daemon ran, and those armed
 * while no daemon ran. The new daemon refuses what it must not adopt.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "call.h"
#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "fd-util.h"
#include "proto.h"
#include "test-runner.h"
#include "unix-socket.h"

/* Completions in the eventfd, waiting up to ms for the first. */
static uint64_t drain(cuflag_slot *s, int ms)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t total = 0, n;

	if (poll(&p, 1, ms) != 1)
		return 0;
	while (cuflag_slot_consume(s, &n) == 0) {
		total += n;
		if (poll(&p, 1, 20) != 1)
			break;
	}
	return total;
}

/* The scanner has finished both signals (it counts them after it has
 * recorded them in the region). */
static int two_recorded(void *arg)
{
	struct cuflag_msg_stats_reply st;
	daemon_stats(arg, &st);
	return st.completions >= 2;
}

static void scenario(int kill_it)
{
	struct daemon_proc a, b;
	cuflag_client *c;
	cuflag_slot *s[6];
	uint32_t t[6], t3b;
	uint64_t epoch_a;

	daemon_start(&a, 0, NULL);
	CHECK_RC(cuflag_connect(a.sock, &c));
	CHECK_RC(cuflag_slots_acquire(c, 6, s));
	epoch_a = cuflag_client_epoch(c);
	/* 0: completed and consumed before; 1: completed, not consumed;
	 * 2: armed, completes while no daemon runs; 3: armed while no daemon
	 * runs, completes then; 4: armed, completes after the new daemon took
	 * over; 5: idle. */
	for (int i = 0; i < 5; i++)
		if (i != 3)
			CHECK_RC(cuflag_slot_arm(s[i], &t[i]));
	sim_store(cuflag_slot_flag(s[0]), t[0]);
	CHECK(drain(s[0], 2000) == 1);
	sim_store(cuflag_slot_flag(s[1]), t[1]);
	CHECK_RC(cuflag_slot_wait(s[1], t[1], 2000));
	{ /* the old daemon has signalled slot 1 (its counter is readable) */
		struct pollfd p = { .fd = cuflag_slot_fd(s[1]), .events = POLLIN };
		CHECK(poll(&p, 1, 2000) == 1);
	}

	/* The daemon goes away. Killed, it must be between two signals: one
	 * killed inside an eventfd write may repeat that count after the
	 * restart (the documented at-least-once edge of a crash). */
	if (kill_it) {
		CHECK(wait_until(two_recorded, &a, 5000));
		kill(a.pid, SIGKILL);
		CHECK(waitpid(a.pid, NULL, 0) == a.pid);
	} else {
		CHECK(daemon_stop_keep_dir(&a) == 0);
	}
	struct pollfd hup = { .fd = cuflag_client_fd(c), .events = POLLRDHUP };
	CHECK(poll(&hup, 1, 2000) == 1);
	sim_store(cuflag_slot_flag(s[2]), t[2]);
	CHECK_RC(cuflag_slot_arm(s[3], &t[3])); /* queued, nobody reads it yet */
	sim_store(cuflag_slot_flag(s[3]), t[3]);
	CHECK(cuflag_reconnect(c) == -ECONNREFUSED || cuflag_reconnect(c) == -ENOENT);

	/* A new daemon on the same path; the client carries on. */
	daemon_start_at(&b, a.dir, a.sock, 0, NULL);
	CHECK_RC(cuflag_reconnect(c));
	CHECK(cuflag_client_epoch(c) != epoch_a);
	CHECK(drain(s[1], 2000) == 1); /* signalled by the old daemon, still there */
	CHECK(drain(s[2], 2000) == 1); /* landed while no daemon ran */
	CHECK(drain(s[3], 2000) == 1); /* armed while no daemon ran */
	CHECK(drain(s[0], 50) == 0);   /* nothing twice */
	sim_store(cuflag_slot_flag(s[4]), t[4]);
	CHECK(drain(s[4], 2000) == 1); /* armed before, completed after */
	/* Every slot works on: same ids, same eventfds, next values in order. */
	for (int i = 0; i < 6; i++) {
		uint32_t u;
		CHECK_RC(cuflag_slot_arm(s[i], &u));
		sim_store(cuflag_slot_flag(s[i]), u);
		CHECK(drain(s[i], 2000) == 1);
	}
	CHECK_RC(cuflag_slot_arm(s[3], &t3b));
	CHECK(t3b == t[3] + 2);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&b) == 0);
	printf("restart (%s): every completion counted once across the restart\n",
	       kill_it ? "SIGKILL" : "SIGTERM");
}

TEST(restart_after_sigterm)
{
	scenario(0);
}

TEST(restart_after_sigkill)
{
	scenario(1);
}

/* ---- what the new daemon must refuse ---- */

struct fdwant {
	const struct daemon_proc *d;
	int fds;
};

static int fds_are(void *arg)
{
	struct fdwant *w = arg;
	return daemon_fd_count(w->d) == w->fds;
}

static int wait_until_fds(const struct daemon_proc *d, int fds)
{
	struct fdwant w = { d, fds };
	return wait_until(fds_are, &w, 5000);
}

/* One request on sock, its reply in a static buffer: the reply's status. */
static int raw_call(int sock, struct cuflag_call *call)
{
	static uint8_t buf[CUFLAG_MSG_MAX];
	static uint32_t id;
	int rc;

	call->id = ++id;
	call->reply = buf;
	rc = cuflag_call(sock, call);
	CHECK_MSG(call->reply_len > 0, "no reply, or a malformed one (%d: %s)", rc,
		  call->why ? call->why : "-");
	return rc;
}

/* ATTACH a region with a wake fd, announcing slots to adopt. */
static int attach_with(int sock, int region, int wake, uint32_t slots)
{
	struct cuflag_msg_attach m = { .slots = slots };
	int give[2] = { region, wake }, got = -1;
	struct cuflag_call call = { .type = CUFLAG_MSG_ATTACH, .body = &m, .blen = sizeof(m),
				    .fds = give, .nfds = 2, .reply_fds = &got, .max_fds = 1 };
	int rc = raw_call(sock, &call);

	safe_close(got);
	return rc;
}

/* A connection that has said HELLO; the reply in *hr. */
static int hello_on(const char *path, struct cuflag_msg_hello_reply *hr)
{
	struct cuflag_msg_hello hello = { .version_min = 1, .version_max = CUFLAG_PROTO_VERSION };
	int sock = cuflag_unix_connect(path, 0), dp = -1;
	struct cuflag_call hc = { .type = CUFLAG_MSG_HELLO, .body = &hello, .blen = sizeof(hello),
				  .reply_fds = &dp, .max_fds = 1 };

	CHECK(sock >= 0);
	CHECK(raw_call(sock, &hc) == 0);
	memcpy(hr, cuflag_call_body(&hc), sizeof(*hr));
	safe_close(dp);
	return sock;
}

/* ADOPT of one slot id with the eventfd efd: the reply's status. */
static int adopt_one(int sock, uint32_t id, int efd)
{
	struct cuflag_msg_adopt ad = { .count = 1, .ids = { id } };
	struct cuflag_call call = { .type = CUFLAG_MSG_ADOPT, .body = &ad,
				    .blen = (uint32_t)cuflag_id_batch_len(1), .fds = &efd,
				    .nfds = 1 };

	return raw_call(sock, &call);
}

TEST(refusals)
{
	const char *args[] = { "--slots-per-client", "16", NULL };
	struct cuflag_msg_hello_reply hr;
	struct cuflag_msg_alloc al = { .count = 1 };
	struct daemon_proc a, b;
	int p[2], sock, sock2, efd, base, memfd, sparse, region, rc;

	daemon_start(&a, 0, args);
	/* A real region, made and attached by hand, with one slot. */
	sock = hello_on(a.sock, &hr);
	region = make_client_region(&hr);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK(attach_with(sock, region, efd, 0) == 0);
	{
		int sfd = -1;
		struct cuflag_call ac = { .type = CUFLAG_MSG_ALLOC, .body = &al, .blen = sizeof(al),
					  .reply_fds = &sfd, .max_fds = 1 };
		/* A second connection may not attach a region a live one holds. */
		sock2 = hello_on(a.sock, &hr);
		CHECK(attach_with(sock2, region, efd, 0) == -EBUSY);
		close(sock2);
		CHECK(raw_call(sock, &ac) == 0);
		close(sfd);
	}
	close(sock);
	CHECK(daemon_stop_keep_dir(&a) == 0);

	daemon_start_at(&b, a.dir, a.sock, 0, args);
	base = daemon_fd_count_steady(&b);
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	memfd = memfd_create("not-sealed", MFD_CLOEXEC);
	CHECK(memfd >= 0 && ftruncate(memfd, (off_t)hr.region_size) == 0);
	sparse = memfd_create("sparse", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(sparse >= 0 && ftruncate(sparse, (off_t)hr.region_size) == 0);
	CHECK(fcntl(sparse, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);

	sock = hello_on(b.sock, &hr);
	CHECK(attach_with(sock, p[0], efd, 0) == -EINVAL);       /* a pipe */
	CHECK(attach_with(sock, memfd, efd, 0) == -EINVAL);      /* not sealed */
	CHECK(attach_with(sock, sparse, efd, 0) == -EINVAL);     /* pages not allocated */
	CHECK(attach_with(sock, region, p[1], 0) == -EBADF);     /* wake not an eventfd */
	CHECK(attach_with(sock, region, efd, 17) == -EINVAL);    /* more slots than it has */
	CHECK(attach_with(sock, region, efd, 2) == 0);           /* this one is right */
	{
		int e2 = eventfd(0, EFD_CLOEXEC);
		CHECK(adopt_one(sock, 99, e2) == -EINVAL);   /* out of range */
		CHECK(adopt_one(sock, 0, p[0]) == -EBADF);   /* not an eventfd */
		CHECK(adopt_one(sock, 0, e2) == 0);
		CHECK(adopt_one(sock, 0, e2) == -EINVAL);    /* twice */
		close(e2);
	}
	rc = attach_with(sock, region, efd, 0); /* a second ATTACH is a protocol error */
	CHECK(rc == -EPROTO);
	close(sock);
	close(p[0]);
	close(p[1]);
	close(memfd);
	close(sparse);
	close(region);
	close(efd);
	CHECK(wait_until_fds(&b, base));
	CHECK(daemon_stop(&b) == 0);
	printf("restart: a pipe, an unsealed or sparse memfd, a held region, a wrong wake fd, "
	       "bad ADOPTs refused\n");
}

/* ---- resumes that stop half-way, and resumes right after one ---- */

/* A region made and mapped by hand, as the library keeps it across restarts:
 * its queue and flags written here, its head and records read here. */
struct hand_region {
	struct cuflag_region_layout l;
	uint8_t *map;
	int fd, wake;
};

static void hand_region_make(struct hand_region *r, const struct cuflag_msg_hello_reply *hr)
{
	cuflag_region_layout_from_reply(&r->l, hr);
	r->fd = make_client_region(hr);
	r->map = mmap(NULL, r->l.size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	CHECK(r->map != MAP_FAILED);
	r->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK(r->wake >= 0);
}

static void hand_region_free(struct hand_region *r)
{
	munmap(r->map, r->l.size);
	close(r->fd);
	close(r->wake);
}

static _Atomic uint32_t *hand_word(struct hand_region *r, uint32_t off)
{
	return (_Atomic uint32_t *)(r->map + off);
}

/* An arm entry at the tail of the queue, as cuflag_slot_arm() makes it, and
 * the wake fd written (a parked scanner reads the queue then). */
static void hand_arm(struct hand_region *r, uint32_t slot, uint32_t target)
{
	uint32_t tail = atomic_load(hand_word(r, r->l.tail_off));
	struct cuflag_arm *q = (struct cuflag_arm *)(r->map + r->l.queue_off);
	uint64_t one = 1;

	q[tail & (r->l.queue_cap - 1)] = (struct cuflag_arm){ .slot = slot, .target = target };
	atomic_store(hand_word(r, r->l.tail_off), tail + 1);
	CHECK(write(r->wake, &one, sizeof(one)) == (ssize_t)sizeof(one));
}

static void hand_store(struct hand_region *r, uint32_t slot, uint32_t value)
{
	sim_store((volatile uint32_t *)(r->map + r->l.flags_off) + slot, value);
}

/* A resuming connection: HELLO, then ATTACH announcing slots, tried again on
 * a fresh connection while the daemon answers -EBUSY (the region is still
 * held), for up to ms. The connection, or -EBUSY. */
static int hand_attach(const struct daemon_proc *d, struct hand_region *r, uint32_t slots, int ms)
{
	struct cuflag_msg_hello_reply hr;

	for (int waited = 0;; waited++) {
		int sock = hello_on(d->sock, &hr), rc = attach_with(sock, r->fd, r->wake, slots);
		if (rc == 0)
			return sock;
		close(sock);
		CHECK_MSG(rc == -EBUSY, "ATTACH: %d", rc);
		if (waited >= ms)
			return -EBUSY;
		usleep(1000);
	}
}

/* Completions in eventfd efd, waiting up to ms: 0 when none came. */
static uint64_t efd_wait(int efd, int ms)
{
	struct pollfd p = { .fd = efd, .events = POLLIN };
	uint64_t n = 0;

	if (poll(&p, 1, ms) == 1)
		CHECK(read(efd, &n, sizeof(n)) == (ssize_t)sizeof(n));
	return n;
}

/* Every thread of process pid on one CPU, the first this process may use:
 * a thread it wakes then runs in the place of the waker, at once. */
static void one_cpu(pid_t pid)
{
	char path[64];
	cpu_set_t mine, one;
	DIR *dir;
	struct dirent *e;
	int cpu = 0;

	CHECK(sched_getaffinity(0, sizeof(mine), &mine) == 0);
	while (!CPU_ISSET(cpu, &mine))
		cpu++;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	CHECK((dir = opendir(path)) != NULL);
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			CHECK(sched_setaffinity(atoi(e->d_name), sizeof(one), &one) == 0);
	closedir(dir);
}

/*
 * A resume attempt that the client gives up (its reply timeout passed, it
 * was killed) after ATTACH and some of its ADOPTs: the daemon must not read
 * the queue for it. The library adopts a group's slots after the others, so
 * the arms queued for them while no daemon ran are what such a daemon would
 * refuse as "not owned", moving the head past them: the next attempt would
 * begin after arms that no daemon ever signals. The daemon runs on one CPU,
 * its scanner parked: the command that wakes it for the dropped session
 * lets it run before the main thread goes on. Then the whole resume, and
 * the arm queued before all the attempts is signalled.
 */
TEST(resume_given_up_half_way)
{
	const char *args[] = { "--slots-per-client", "16", NULL };
	struct cuflag_msg_hello_reply hr;
	struct cuflag_msg_stats_reply st;
	struct hand_region r;
	struct daemon_proc d;
	int sock, e[2];

	daemon_start(&d, 0, args);
	one_cpu(d.pid);
	sock = hello_on(d.sock, &hr);
	close(sock);
	hand_region_make(&r, &hr);
	for (int i = 0; i < 2; i++)
		CHECK((e[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) >= 0);
	hand_arm(&r, 1, 1); /* queued while no daemon ran, for slot 1 */
	for (int i = 0; i < 100; i++) {
		sock = hand_attach(&d, &r, 2, 2000);
		CHECK(sock >= 0);
		CHECK(adopt_one(sock, 0, e[0]) == 0);
		close(sock); /* slot 1 never adopted */
	}
	sock = hand_attach(&d, &r, 2, 2000);
	CHECK(sock >= 0);
	CHECK(adopt_one(sock, 0, e[0]) == 0);
	CHECK(adopt_one(sock, 1, e[1]) == 0);
	hand_store(&r, 1, 1);
	CHECK_MSG(efd_wait(e[1], 2000) == 1, "the arm queued before the attempts was lost "
		  "(head %u)", atomic_load(hand_word(&r, r.l.head_off)));
	daemon_stats(&d, &st);
	CHECK_MSG(st.bad_arms == 0, "%llu arms refused", (unsigned long long)st.bad_arms);
	close(sock);
	close(e[0]);
	close(e[1]);
	hand_region_free(&r);
	CHECK(daemon_stop(&d) == 0);
	printf("restart: 100 resumes given up half-way took no arm; the next one signals it\n");
}

/*
 * A resume right after an attempt the client gave up once its slots were
 * adopted: until the scanner has let go of that session, it may still take
 * arms from the queue (and sign them in the region's record) for it. The
 * next ATTACH of the region waits for that (-EBUSY): else its ADOPTs read a
 * record the scanner was still moving, and an arm the old session took in
 * between is nobody's. The scanner is frozen (test hook) to hold the old
 * session there.
 */
TEST(resume_after_a_given_up_one)
{
	const char *args[] = { "--slots-per-client", "16", "--test-hooks", NULL };
	struct cuflag_msg_hello_reply hr;
	struct hand_region r;
	struct daemon_proc d;
	int sock, sock2, e[2], e2[2];

	daemon_start(&d, 0, args);
	sock = hello_on(d.sock, &hr);
	close(sock);
	hand_region_make(&r, &hr);
	for (int i = 0; i < 2; i++) {
		CHECK((e[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) >= 0);
		CHECK((e2[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) >= 0);
	}
	/* The attempt adopts both slots; its session serves (value 1 of slot 0). */
	sock = hand_attach(&d, &r, 2, 2000);
	CHECK(sock >= 0);
	CHECK(adopt_one(sock, 0, e[0]) == 0);
	CHECK(adopt_one(sock, 1, e[1]) == 0);
	hand_arm(&r, 0, 1);
	hand_store(&r, 0, 1);
	CHECK(efd_wait(e[0], 2000) == 1);
	/* Frozen, then value 2 is armed and the attempt given up. */
	kill(d.pid, SIGUSR1);
	usleep(20000); /* the scanner takes the freeze */
	hand_arm(&r, 0, 2);
	close(sock);
	/* The next attempt must wait while the scanner holds the old session;
	 * a daemon that took it now would read slot 0's record before the
	 * thawed scanner takes value 2 for the old session. */
	sock2 = hand_attach(&d, &r, 2, 200);
	int early = sock2 >= 0;
	if (early)
		CHECK(adopt_one(sock2, 0, e2[0]) == 0);
	kill(d.pid, SIGUSR1); /* thawed: it takes the arm, then lets go */
	usleep(20000);
	if (!early) {
		sock2 = hand_attach(&d, &r, 2, 2000);
		CHECK(sock2 >= 0);
		CHECK(adopt_one(sock2, 0, e2[0]) == 0);
	}
	CHECK(adopt_one(sock2, 1, e2[1]) == 0);
	hand_store(&r, 0, 2);
	CHECK_MSG(efd_wait(e2[0], 2000) == 1, "value 2 was never signalled");
	CHECK_MSG(!early, "ATTACH taken while the scanner still held the session before");
	close(sock2);
	for (int i = 0; i < 2; i++) {
		close(e[i]);
		close(e2[i]);
	}
	hand_region_free(&r);
	CHECK(daemon_stop(&d) == 0);
	printf("restart: a resume waits until the scanner let go of the attempt before it\n");
}

/* ---- a full arm queue while no daemon runs ---- */

static cuflag_slot *full_slot;
static _Atomic int full_armed;

static void *arm_into_full(void *t)
{
	CHECK_RC(cuflag_slot_arm(full_slot, t));
	atomic_store(&full_armed, 1);
	return NULL;
}

/* An arm that finds the queue full and the daemon gone resumes with the next
 * one (the queue's lock let go meanwhile) and is made then, not lost: every
 * value queued before it and it are counted by the new daemon. */
TEST(full_queue_without_daemon)
{
	const char *args[] = { "--queue-size", "4", NULL };
	struct daemon_proc a, b;
	cuflag_client *c;
	uint32_t t[5];
	pthread_t th;

	daemon_start(&a, 0, args);
	CHECK_RC(cuflag_connect(a.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &full_slot));
	CHECK(daemon_stop_keep_dir(&a) == 0);
	for (int i = 0; i < 4; i++)
		CHECK_RC(cuflag_slot_arm(full_slot, &t[i])); /* queued, nobody reads them */
	atomic_store(&full_armed, 0);
	CHECK(pthread_create(&th, NULL, arm_into_full, &t[4]) == 0);
	usleep(50000);
	CHECK(!atomic_load(&full_armed)); /* the queue waits for the next daemon */
	daemon_start_at(&b, a.dir, a.sock, 0, args);
	CHECK(pthread_join(th, NULL) == 0);
	CHECK(t[4] == t[3] + 1);
	sim_store(cuflag_slot_flag(full_slot), t[4]);
	uint64_t got = 0;
	for (int tries = 0; got < 5 && tries < 50; tries++)
		got += drain(full_slot, 2000);
	CHECK(got == 5);
	cuflag_slot_release(full_slot);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&b) == 0);
	printf("restart: an arm into a full queue with no daemon waits for the next one\n");
}

int main(int argc, char **argv)
{
	const struct test_env env = { 0 }; /* each test starts its daemons */
	int rc;

	setvbuf(stdout, NULL, _IONBF, 0);
	rc = test_run(&env, argc, argv);
	if (rc == 0)
		printf("restart: ok\n");
	return rc;
}
