/* SPDX-License-Identifier: MIT */
/*
 * A connected client and fork(2): the child's inherited client answers
 * -ECHILD wherever it would use the parent's connection, arm queue or
 * eventfds, releasing and disconnecting there leave the parent's slots alone,
 * and a fresh connection in the child works. Meanwhile the parent's arm made
 * before the fork, and its slots afterwards, complete exactly once each.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "cuflag-proto.h"
#include "harness.h"

static struct daemon_proc d;

/* In the child: everything the parent's client would share is refused. */
static void child_inherited(cuflag_client *c, cuflag_slot **s, uint32_t armed)
{
	cuflag_slot *more = NULL;
	uint64_t n;
	uint32_t t;
	int efd_copy = dup(cuflag_slot_fd(s[0]));

	CHECK(cuflag_slot_arm(s[0], &t) == -ECHILD);
	CHECK(cuflag_slot_wait(s[0], armed, 0) == -ECHILD);
	CHECK(cuflag_slot_wait_spin(s[0], armed, 10, 10) == -ECHILD);
	CHECK(cuflag_slot_consume(s[0], &n) == -ECHILD);
	CHECK(cuflag_slot_acquire(c, &more) == -ECHILD && more == NULL);
	CHECK(cuflag_slot_bind_eventfd(s[0], efd_copy) == -ECHILD);
	CHECK(cuflag_reconnect(c) == -ECHILD);
	/* The getters still answer. */
	CHECK(cuflag_slot_fd(s[0]) >= 0 && cuflag_slot_flag(s[0]) != NULL);
	CHECK(cuflag_slot_id(s[1]) >= 0 && cuflag_client_epoch(c) != 0);
	close(efd_copy);
	/* These free the child's copies only: no FREE reaches the daemon. */
	cuflag_slot_release(s[1]);
	cuflag_disconnect(c);
}

/* In the child: a connection of its own works end to end. */
static void child_fresh(void)
{
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t t;

	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm(s, &t));
	sim_store(cuflag_slot_flag(s), t);
	CHECK_RC(cuflag_slot_wait(s, t, 2000));
	CHECK(consume_blocking(s) == 1);
	cuflag_disconnect(c);
}

static int nslots_of_daemon(void)
{
	struct cuflag_msg_stats_reply st;

	daemon_stats(&d, &st);
	return (int)st.slots;
}

static int expect_slots;
static int slots_are(void *arg)
{
	(void)arg;
	return nslots_of_daemon() == expect_slots;
}

/* A thread of the parent holds the client's locks across the fork: the
 * child must not need them to free its copies. */
struct holder {
	cuflag_slot *s;
	_Atomic int stop;
	uint64_t arms;
};

static void *arm_loop(void *arg)
{
	struct holder *h = arg;
	uint32_t t;

	while (!h->stop) {
		CHECK_RC(cuflag_slot_arm(h->s, &t));
		sim_store(cuflag_slot_flag(h->s), t);
		h->arms++;
	}
	return NULL;
}

int main(void)
{
	cuflag_client *c;
	cuflag_slot *s[3];
	struct holder h = { 0 };
	pthread_t th;
	uint32_t t, armed;
	uint64_t n, total = 0;
	int status, fds_before = self_fd_count();
	pid_t pid;

	daemon_start(&d, 0, NULL);
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slots_acquire(c, 3, s));
	expect_slots = 3;
	CHECK(wait_until(slots_are, NULL, 2000));
	/* In flight across the fork. */
	CHECK_RC(cuflag_slot_arm(s[0], &armed));
	h.s = s[2];
	CHECK(pthread_create(&th, NULL, arm_loop, &h) == 0);

	for (int round = 0; round < 20; round++) {
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			child_inherited(c, s, armed);
			child_fresh();
			_exit(0);
		}
		CHECK(waitpid(pid, &status, 0) == pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	h.stop = 1;
	pthread_join(th, NULL);

	/* The children's releases and disconnects freed nothing of ours. */
	expect_slots = 3;
	CHECK(wait_until(slots_are, NULL, 2000));
	sim_store(cuflag_slot_flag(s[0]), armed);
	CHECK_RC(cuflag_slot_wait(s[0], armed, 2000));
	CHECK(consume_blocking(s[0]) == 1);
	for (int i = 0; i < 2; i++) {
		CHECK_RC(cuflag_slot_arm(s[i], &t));
		sim_store(cuflag_slot_flag(s[i]), t);
		CHECK_RC(cuflag_slot_wait(s[i], t, 2000));
		CHECK(consume_blocking(s[i]) == 1);
	}
	/* Every arm of the busy thread came back, exactly once. */
	{
		struct pollfd p = { .fd = cuflag_slot_fd(s[2]), .events = POLLIN };
		while (total < h.arms && poll(&p, 1, 2000) == 1 &&
		       cuflag_slot_consume(s[2], &n) == 0)
			total += n;
		CHECK(h.arms > 0 && total == h.arms);
		CHECK(poll(&p, 1, 100) == 0);
	}
	{
		/* No arm entry was refused and nobody was dropped: the children
		 * never wrote to the parent's queue or socket. */
		struct cuflag_msg_stats_reply st;
		daemon_stats(&d, &st);
		CHECK(st.bad_arms == 0 && st.dropped == 0);
	}
	cuflag_disconnect(c);
	expect_slots = 0;
	CHECK(wait_until(slots_are, NULL, 2000));
	CHECK(daemon_stop(&d) == 0);
	CHECK(self_fd_count() == fds_before);
	printf("fork: ok\n");
	return 0;
}
