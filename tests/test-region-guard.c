/* SPDX-License-Identifier: MIT */
/*
 * A client the daemon drops, as the region guard leaves it. Guarded (the
 * default, as root here), its region is left as it was: the library resumes
 * with it into the same daemon and the slot still counts. Unguarded
 * (--region-guard off, as where the container runtime refuses
 * userfaultfd), the daemon removes the region's pages when the session ends
 * (no page it faulted into a punched region stays charged to it): the
 * resume is refused at once with -ESTALE (connect anew), not retried until
 * the resume timeout, and a new connection is served.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "harness.h"

#define MS 1000000ull

/* A message the daemon cannot parse: it drops the client. */
static void misbehave(cuflag_client *c)
{
	static const char junk[16] = "not a message!!";

	CHECK(send(cuflag_client_fd(c), junk, sizeof(junk), MSG_NOSIGNAL) == (ssize_t)sizeof(junk));
}

/* Complete t, armed on slot s, and see it counted once. */
static void complete_and_count(cuflag_slot *s, uint32_t t)
{
	uint64_t n = 0;

	CHECK_RC(cuflag_slot_complete(s, t));
	CHECK_RC(cuflag_slot_wait(s, t, 5000));
	/* The wait saw the flag; the count comes with the daemon's doorbell. */
	for (int i = 0; i < 2000 && !n; i++) {
		int rc = cuflag_slot_consume(s, &n);
		CHECK(rc == 0 || rc == -EAGAIN);
		if (!n)
			usleep(1000);
	}
	CHECK(n == 1);
}

/* Arm slot s, complete it, and see the completion counted. */
static void one_completion(cuflag_slot *s)
{
	uint32_t t;

	CHECK_RC(cuflag_slot_arm(s, &t));
	complete_and_count(s, t);
}

/* Connect, use a slot, be dropped; then what the next call gets. */
static int after_drop(const char *sock, uint64_t *took_ns)
{
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t t;
	uint64_t t0;
	int rc;

	CHECK_RC(cuflag_connect(sock, &c));
	CHECK_RC(cuflag_client_set_resume_timeout(c, 10000));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	one_completion(s);
	misbehave(c);
	/* Armed and completed while no session has the region: the client
	 * writes its queue and the flag (pages of its own again). */
	CHECK_RC(cuflag_slot_arm(s, &t));
	CHECK_RC(cuflag_slot_complete(s, t));
	usleep(200000); /* the drop, and the session's end, are the daemon's */
	t0 = cuflag_now_ns();
	do
		rc = cuflag_reconnect(c); /* -EBUSY: the old session is still let go */
	while (rc == -EBUSY && cuflag_now_ns() - t0 < 5000 * MS);
	*took_ns = cuflag_now_ns() - t0;
	if (!rc)
		complete_and_count(s, t); /* counted once, across the resume */
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	return rc;
}

int main(void)
{
	static const char *const off[] = { "--region-guard", "off", NULL };
	struct daemon_proc d;
	cuflag_client *c;
	cuflag_slot *s;
	uint64_t took;
	int rc;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (geteuid() != 0) {
		printf("region-guard: skipped (the guard needs root here)\n");
		return 77;
	}
	daemon_start(&d, 0, NULL);
	rc = after_drop(d.sock, &took);
	printf("region-guard: guarded, dropped: cuflag_reconnect() %s after %.1f ms\n",
	       rc ? strerror(-rc) : "resumed, the completion counted once", (double)took / MS);
	CHECK(rc == 0);
	CHECK(daemon_stop(&d) == 0);

	daemon_start(&d, 0, off);
	rc = after_drop(d.sock, &took);
	printf("region-guard: unguarded, dropped: cuflag_reconnect() %s after %.1f ms\n",
	       rc ? strerror(-rc) : "resumed, the completion counted once", (double)took / MS);
	CHECK(rc == -ESTALE);
	CHECK(took < 5000 * MS);
	/* A new connection is served as ever. */
	CHECK_RC(cuflag_connect(d.sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	one_completion(s);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	CHECK(daemon_stop(&d) == 0);
	printf("region-guard: ok\n");
	return 0;
}
