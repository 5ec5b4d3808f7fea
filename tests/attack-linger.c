/* SPDX-License-Identifier: MIT */
/*
 * A TCP socket whose close lingers (SO_LINGER {1, 600}, data the peer never
 * reads), its last reference handed to the daemon:
 *   (a) as the fd of a valid message (BIND, refused: not an eventfd),
 *   (b) with a malformed message (STATS carrying an fd),
 *   (c) queued on a client socket behind a message that gets the client
 *       dropped, so that the daemon never reads it and the fd goes when the
 *       connection's socket is closed;
 *   (d) eight of them at once, more than the daemon's closer threads.
 * Whoever closes it waits up to ten minutes. While it lingers, others must
 * be served within 1 s, and at the end SIGTERM must stop the daemon within
 * TARGET_STOP_MS with the last one still lingering.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "attacks.h"
#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "proto.h"

/* Long enough for several rounds of every probe (every 100 ms). */
#define HOLD_MS 1200
#define VARIANTS 4
/* (d): more lingering sockets at once than the daemon has closer threads
 * (4): a close queued behind them must still happen. */
#define MANY 8

struct linger_ctl {
	_Atomic int start, done, release;
	_Atomic int delivered[VARIANTS], lingering[VARIANTS];
};

/* (a) A session of our own (public API), then BIND of its slot to the socket. */
static void send_bind(int sock, void *arg)
{
	struct {
		struct cuflag_msg_hdr h;
		struct cuflag_msg_bind b;
	} m = { .b = { 0 } };
	cuflag_client *c;
	cuflag_slot *s;

	(void)arg;
	if (cuflag_connect(attack_daemon.sock, &c) || cuflag_slot_acquire(c, &s))
		_exit(1);
	m.b.id = (uint32_t)cuflag_slot_id(s);
	cuflag_hdr_init(&m.h, CUFLAG_MSG_BIND, sizeof(m), 0x7fff0001u, 0, 1);
	if (send_with_fds(cuflag_client_fd(c), &m, sizeof(m), &sock, 1))
		_exit(1);
}

/* (b) STATS may carry no fd: a protocol error. */
static void send_malformed(int sock, void *arg)
{
	struct cuflag_msg_hdr h;
	int fd = daemon_connect_raw();

	(void)arg;
	cuflag_hdr_init(&h, CUFLAG_MSG_STATS, sizeof(h), 1, 0, 1);
	if (fd < 0 || send_with_fds(fd, &h, sizeof(h), &sock, 1))
		_exit(1);
}

/* (c) A message of no known type first (the client is dropped on reading
 * it), then the socket: queued, never read. Both go in one sendmmsg(), so
 * that the daemon cannot read the first and hang up before the second is in. */
static void send_queued(int sock, void *arg)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct cuflag_msg_hdr bad, h;
	struct iovec iov[2] = { { &bad, sizeof(bad) }, { &h, sizeof(h) } };
	struct mmsghdr mm[2];
	struct cmsghdr *c;
	int fd = daemon_connect_raw();

	(void)arg;
	cuflag_hdr_init(&bad, 0x7ffe, sizeof(bad), 1, 0, 0);
	cuflag_hdr_init(&h, CUFLAG_MSG_STATS, sizeof(h), 2, 0, 1);
	memset(mm, 0, sizeof(mm));
	memset(&ctl, 0, sizeof(ctl));
	for (int i = 0; i < 2; i++) {
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	mm[1].msg_hdr.msg_control = ctl.buf;
	mm[1].msg_hdr.msg_controllen = sizeof(ctl.buf);
	c = CMSG_FIRSTHDR(&mm[1].msg_hdr);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &sock, sizeof(int));
	if (fd < 0 || sendmmsg(fd, mm, 2, MSG_NOSIGNAL) != 2)
		_exit(1);
}

static void (*const senders[VARIANTS])(int, void *) = { send_bind, send_malformed, send_queued,
							  send_malformed };
static const int counts[VARIANTS] = { 1, 1, 1, MANY };

static void attacker_main(void *arg)
{
	struct linger_ctl *lc = arg;

	for (int k = 0; k < VARIANTS; k++) {
		struct linger_conn l[MANY];
		wait_flag(&lc->start, k + 1, 60000);
		for (int i = 0; i < counts[k]; i++) {
			atomic_fetch_add(&lc->delivered[k], linger_deliver(&l[i], senders[k], NULL));
			atomic_fetch_add(&lc->lingering[k], linger_lingering(&l[i]));
		}
		atomic_store(&lc->done, k + 1);
		wait_flag(&lc->release, k + 1, 60000);
		for (int i = 0; i < counts[k]; i++)
			linger_release(&l[i]);
	}
}

/* The daemon must stop while a close still lingers. */
static void expect_prompt_stop(void)
{
	double ms = daemon_term(TARGET_STOP_MS);
	char t[64];

	if (ms < 0)
		snprintf(t, sizeof(t), "not stopped within %d ms (killed)", TARGET_STOP_MS);
	else
		snprintf(t, sizeof(t), "stopped in %.0f ms", ms);
	printf("| SIGTERM while the last close lingers | | | | | | | | | | | %s |\n", t);
	if (ms < 0)
		fail("SIGTERM did not stop the daemon within %d ms while a close lingered",
		     TARGET_STOP_MS);
}

static const char *const names[VARIANTS] = {
	"lingering TCP socket as the fd of a valid BIND",
	"lingering TCP socket with a malformed message (STATS + fd)",
	"lingering TCP socket queued behind a message that drops the client",
	"8 lingering TCP sockets at once (malformed messages), more than the closer threads",
};

void attack_linger(void)
{
	struct linger_ctl *lc = shm_alloc(sizeof(*lc));
	struct window w[VARIANTS];
	pid_t pid;

	/* No priority lowered: the handover must beat the daemon's close. */
	pid = spawn_user(UID_ATTACKER, 0, attacker_main, lc);
	for (int k = 0; k < VARIANTS; k++) {
		uint64_t dropped;

		window_open(&w[k], names[k]);
		atomic_store(&lc->start, k + 1);
		wait_flag(&lc->done, k + 1, 10000);
		usleep(HOLD_MS * 1000);
		dropped = daemon_dropped() - w[k].dropped0;
		/* (a)'s sender hangs up after its refusal: STATS counts that too. */
		snprintf(w[k].outcome, sizeof(w[k].outcome),
			 "%d of %d delivered, %d of them lingering in a close; requests refused: "
			 "%d, clients dropped: %llu",
			 atomic_load(&lc->delivered[k]), counts[k], atomic_load(&lc->lingering[k]),
			 window_log_count(&w[k], "uid=60001", "refused"),
			 (unsigned long long)dropped);
		if (atomic_load(&lc->delivered[k]) != counts[k])
			fail("%s: not every socket reached the daemon", names[k]);
		/* (b), (c) and (d) are protocol errors: those clients are dropped. */
		if (k > 0 && !dropped)
			fail("%s: its client was not dropped", names[k]);
		window_close(&w[k]);
		if (k == VARIANTS - 1)
			expect_prompt_stop();
		atomic_store(&lc->release, k + 1);
	}
	if (child_wait(pid, 10000) != 0)
		fail("linger: the attacker did not finish");
}
