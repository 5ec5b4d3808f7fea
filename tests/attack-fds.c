/* SPDX-License-Identifier: MIT */
/*
 * More fds in one message than any message type takes: 65 and 253 (the
 * kernel's most). Fds that do not fit the receiver's control buffer are
 * released by the kernel in the receiving thread; when the last one is a
 * TCP socket whose close lingers, that thread waits ten minutes. The daemon
 * must receive with room for all 253, answer with an error, drop the
 * client, and close them off its main thread.
 */
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "attacks.h"
#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "proto.h"

#define KERNEL_MAX_FDS 253
#define HOLD_MS 1200

struct fds_ctl {
	_Atomic int cases, dropped, err; /* plain eventfds: error reply, then hang-up */
	_Atomic int delivered, lingering, done, release;
};

/* type with n copies of one eventfd, on a connection after HELLO when
 * hello: 1 when answered with an error and dropped, 0 when not, or the
 * negative errno of what failed before the message was sent. */
static int refused_and_dropped(uint16_t type, unsigned n, int hello)
{
	int fds[KERNEL_MAX_FDS], efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), sock, st = 0, rc;
	struct {
		struct cuflag_msg_hdr h;
		struct cuflag_msg_bind b;
	} m = { .b = { 0 } };
	cuflag_client *c = NULL;
	cuflag_slot *s = NULL;
	size_t len = type == CUFLAG_MSG_BIND ? sizeof(m) : sizeof(m.h);

	CHECK(efd >= 0);
	for (unsigned i = 0; i < n; i++)
		fds[i] = efd;
	if (hello) {
		rc = cuflag_connect(attack_daemon.sock, &c);
		if (!rc && (rc = cuflag_slot_acquire(c, &s)) == 0)
			m.b.id = (uint32_t)cuflag_slot_id(s);
		sock = c ? cuflag_client_fd(c) : -1;
	} else {
		sock = rc = daemon_connect_raw();
	}
	cuflag_hdr_init(&m.h, type, (uint32_t)len, 0x7fff0002u, 0, (uint16_t)n);
	if (rc >= 0)
		rc = send_with_fds(sock, &m, len, fds, n);
	close(efd);
	if (rc >= 0)
		rc = recv_reply(sock, &st, 5000) > 0 && st < 0 && hung_up(sock, 3000);
	if (c)
		cuflag_disconnect(c);
	else if (sock >= 0)
		close(sock);
	return rc;
}

/* 252 eventfds, then the lingering socket as the 253rd. */
static void send_253(int tcp, void *arg)
{
	int fds[KERNEL_MAX_FDS], efd = eventfd(0, EFD_CLOEXEC), sock = daemon_connect_raw();
	struct cuflag_msg_hdr h;

	(void)arg;
	if (efd < 0 || sock < 0)
		_exit(1);
	for (unsigned i = 0; i < KERNEL_MAX_FDS - 1; i++)
		fds[i] = efd;
	fds[KERNEL_MAX_FDS - 1] = tcp;
	cuflag_hdr_init(&h, CUFLAG_MSG_STATS, sizeof(h), 1, 0, KERNEL_MAX_FDS);
	if (send_with_fds(sock, &h, sizeof(h), fds, KERNEL_MAX_FDS))
		_exit(1);
}

static void plain_main(void *arg)
{
	struct fds_ctl *fc = arg;
	const struct {
		uint16_t type;
		unsigned n;
		int hello;
	} cases[] = {
		{ CUFLAG_MSG_STATS, 65, 0 },
		{ CUFLAG_MSG_STATS, KERNEL_MAX_FDS, 0 },
		{ CUFLAG_MSG_BIND, 65, 1 },
		{ CUFLAG_MSG_BIND, KERNEL_MAX_FDS, 1 },
	};

	uint64_t end = cuflag_now_ns() + SUSTAIN_MS * 1000000ull;

	do {
		for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			int rc = refused_and_dropped(cases[i].type, cases[i].n, cases[i].hello);
			if (rc < 0) {
				atomic_store(&fc->err, rc);
				return;
			}
			atomic_fetch_add(&fc->cases, 1);
			atomic_fetch_add(&fc->dropped, rc);
		}
	} while (cuflag_now_ns() < end);
}

static void linger_main(void *arg)
{
	struct fds_ctl *fc = arg;
	struct linger_conn l;

	atomic_store(&fc->delivered, linger_deliver(&l, send_253, NULL));
	atomic_store(&fc->lingering, linger_lingering(&l));
	atomic_store(&fc->done, 1);
	wait_flag(&fc->release, 1, 60000);
	linger_release(&l);
}

void attack_many_fds(void)
{
	struct fds_ctl *fc = shm_alloc(sizeof(*fc));
	struct window w;
	uint64_t dropped;
	pid_t pid;

	window_open(&w, "65 and 253 eventfds on STATS and BIND, again and again for 1 s");
	attacker_run(w.name, 19, plain_main, fc, 30000);
	dropped = daemon_dropped() - w.dropped0;
	snprintf(w.outcome, sizeof(w.outcome),
		 "%d of %d answered with an error and dropped (STATS +%llu)%s%s",
		 atomic_load(&fc->dropped), atomic_load(&fc->cases), (unsigned long long)dropped,
		 atomic_load(&fc->err) ? "; then a connect failed: " : "",
		 atomic_load(&fc->err) ? strerror(-atomic_load(&fc->err)) : "");
	if (atomic_load(&fc->cases) < 4)
		fail("%s: the attacker could not send its messages", w.name);
	if (atomic_load(&fc->dropped) != atomic_load(&fc->cases) ||
	    dropped < (uint64_t)atomic_load(&fc->cases))
		fail("%s: every such message must get an error reply and a drop", w.name);
	window_close(&w);

	window_open(&w, "253 fds, the last a lingering TCP socket");
	pid = spawn_user(UID_ATTACKER, 0, linger_main, fc);
	wait_flag(&fc->done, 1, 10000);
	usleep(HOLD_MS * 1000);
	snprintf(w.outcome, sizeof(w.outcome), "%s",
		 !atomic_load(&fc->delivered)  ? "NOT DELIVERED"
		 : atomic_load(&fc->lingering) ? "delivered, its close lingering"
					       : "delivered, held open");
	if (!atomic_load(&fc->delivered))
		fail("%s: the socket never reached the daemon", w.name);
	window_close(&w);
	atomic_store(&fc->release, 1);
	if (child_wait(pid, 10000) != 0)
		fail("%s: the attacker did not finish", w.name);
}
