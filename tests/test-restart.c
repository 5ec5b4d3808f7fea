/* SPDX-License-Identifier: MIT */
/*
 * A daemon restart loses no completion: a client whose cuflagd stops (cleanly
 * or killed) keeps its region and eventfds, reconnects to the new daemon with
 * cuflag_reconnect(), and every completion is counted exactly once: those
 * signalled before, those that landed while no daemon ran, and those armed
 * while no daemon ran. The new daemon refuses what it must not adopt.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "fdpass.h"
#include "harness.h"
#include "proto.h"

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
	int fds_before = self_fd_count();

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
	CHECK(self_fd_count() == fds_before);
	printf("restart (%s): every completion counted once across the restart\n",
	       kill_it ? "SIGKILL" : "SIGTERM");
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

static int raw_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	return fd;
}

/* Send one request, return the reply's status; received fds go to fds. */
static int raw_request(int sock, uint16_t type, const void *body, uint32_t blen, const int *sfds,
		       unsigned snfds, int *fds, unsigned max_fds, void *out, size_t out_len)
{
	static uint32_t id;
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hdr h;
	const char *why;
	unsigned nfds = 0;
	ssize_t n;

	cuflag_hdr_init(&h, type, (uint32_t)sizeof(h) + blen, ++id, 0, (uint16_t)snfds);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), body, blen);
	CHECK_RC(cuflag_send_msg(sock, buf, sizeof(h) + blen, sfds, snfds, 0));
	n = cuflag_recv_msg(sock, buf, sizeof(buf), fds, max_fds, &nfds, 0);
	CHECK(n > 0);
	CHECK_RC(cuflag_reply_check(buf, (size_t)n, nfds, type, id, &why));
	memcpy(&h, buf, sizeof(h));
	if (out && h.status == 0)
		memcpy(out, buf + sizeof(h), out_len);
	return h.status;
}

/* ATTACH a region with a wake fd, announcing slots to adopt. */
static int attach_with(int sock, int region, int wake, uint32_t slots)
{
	struct cuflag_msg_attach m = { .slots = slots };
	int give[2] = { region, wake }, got = -1;
	int rc = raw_request(sock, CUFLAG_MSG_ATTACH, &m, sizeof(m), give, 2, &got, 1, NULL, 0);

	if (got >= 0)
		close(got);
	return rc;
}

/* A connection that has said HELLO; the reply in *hr. */
static int hello_on(const char *path, struct cuflag_msg_hello_reply *hr)
{
	struct cuflag_msg_hello hello = { .version_min = 1, .version_max = CUFLAG_PROTO_VERSION };
	int sock = raw_connect(path), dp = -1;

	CHECK(raw_request(sock, CUFLAG_MSG_HELLO, &hello, sizeof(hello), NULL, 0, &dp, 1, hr,
			  sizeof(*hr)) == 0);
	close(dp);
	return sock;
}

static void test_refusals(void)
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
		uint8_t rep[CUFLAG_MSG_MAX];
		int sfd = -1;
		/* A second connection may not attach a region a live one holds. */
		sock2 = hello_on(a.sock, &hr);
		CHECK(attach_with(sock2, region, efd, 0) == -EBUSY);
		close(sock2);
		CHECK(raw_request(sock, CUFLAG_MSG_ALLOC, &al, sizeof(al), NULL, 0, &sfd, 1, rep,
				  sizeof(rep) - 16) == 0);
		close(sfd);
	}
	close(sock);
	CHECK(daemon_stop_keep_dir(&a) == 0);

	daemon_start_at(&b, a.dir, a.sock, 0, args);
	base = daemon_fd_count(&b);
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
		struct cuflag_msg_adopt ad = { .count = 1, .ids = { 99 } };
		int e2 = eventfd(0, EFD_CLOEXEC);
		CHECK(raw_request(sock, CUFLAG_MSG_ADOPT, &ad, 12, &e2, 1, NULL, 0, NULL, 0) ==
		      -EINVAL); /* out of range */
		ad.ids[0] = 0;
		CHECK(raw_request(sock, CUFLAG_MSG_ADOPT, &ad, 12, &p[0], 1, NULL, 0, NULL, 0) ==
		      -EBADF); /* not an eventfd */
		CHECK(raw_request(sock, CUFLAG_MSG_ADOPT, &ad, 12, &e2, 1, NULL, 0, NULL, 0) == 0);
		CHECK(raw_request(sock, CUFLAG_MSG_ADOPT, &ad, 12, &e2, 1, NULL, 0, NULL, 0) ==
		      -EINVAL); /* twice */
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

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	scenario(0);
	scenario(1);
	test_refusals();
	printf("restart: ok\n");
	return 0;
}
