/* SPDX-License-Identifier: MIT */
/*
 * Socket activation as systemd does it, through systemd-socket-activate:
 * cuflagd takes the SOCK_SEQPACKET socket named "cuflagd" that it is passed
 * (and no path of its own), says READY=1, and serves a client on it. The
 * socket arrives blocking, as systemd passes it by default: the daemon
 * makes it non-blocking itself, so accept() never stalls its loop.
 */
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "fd-util.h"
#include "ops.h"
#include "unix-socket.h"

static const char *sock_path;

/* The activator runs cuflagd at the first connection: this is it. */
static int probe(void *arg)
{
	int fd = cuflag_unix_connect(sock_path, 0);

	(void)arg;
	safe_close(fd);
	return fd >= 0;
}

int main(void)
{
	const char *activate = getenv("SYSTEMD_SOCKET_ACTIVATE");
	const char *bin = getenv("CUFLAGD");
	struct notify_listener n;
	struct child proc;
	cuflag_client *c;
	cuflag_slot *s;
	char dir[64], sock[100], msg[512];
	uint64_t done = 0;
	uint32_t t;

	if (!activate || !activate[0] || access(activate, X_OK)) {
		printf("systemd-socket-activate not found: skipped\n");
		return EXIT_SKIP;
	}
	CHECK(bin != NULL);
	private_dir(dir, sizeof(dir));
	snprintf(sock, sizeof(sock), "%s/cuflagd.sock", dir);
	sock_path = sock;
	notify_listen(&n);

	const char *argv[] = { activate, "--seqpacket", "-l", sock, "--fdname=cuflagd",
			       "-E", n.env, bin, NULL };
	child_start(&proc, argv, NULL, 0);
	CHECK(wait_until(probe, NULL, 5000));
	if (!notify_wait_for(&n, "READY=1", msg, sizeof(msg), 5000)) {
		child_log_wait(&proc, "\x01", 0);
		CHECK_FAIL("no READY=1; output:\n%s", proc.log);
	}
	CHECK(child_log_wait(&proc, "using the socket passed by the service manager", 1000));

	/* A whole completion through the passed socket. */
	CHECK_RC(cuflag_connect(sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm(s, &t));
	sim_store(cuflag_slot_flag(s), t);
	CHECK_RC(cuflag_slot_wait(s, t, 2000));
	CHECK(poll(&(struct pollfd){ .fd = cuflag_slot_fd(s), .events = POLLIN }, 1, 2000) == 1);
	CHECK_RC(cuflag_slot_consume(s, &done));
	CHECK(done == 1);
	cuflag_slot_release(s);
	cuflag_disconnect(c);

	CHECK(child_stop(&proc) == 0);
	CHECK(notify_wait_for(&n, "STOPPING=1", msg, sizeof(msg), 1000));
	notify_close(&n);
	unlink(sock);
	rmdir(dir);
	printf("activation: ok\n");
	return 0;
}
