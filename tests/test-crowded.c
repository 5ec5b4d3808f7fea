/* SPDX-License-Identifier: MIT */
/*
 * Two users, each completing more slots at once than its share of a pass
 * writes (daemon/policy/fair-share.h) and more than its hot room holds
 * (daemon/policy/cold-sweep.h, COLD_HOT_PER_USER): every slot armed ROUNDS values
 * ahead, every flag advanced by one each millisecond. Writes are carried to
 * later passes and slots move between hot and cold as the users crowd each
 * other. Checked: every slot counts exactly ROUNDS completions, the daemon's
 * count of completions is exactly the sum, and nothing more arrives
 * afterwards; the writes were carried (fewer eventfd writes than
 * completions), and nobody was dropped.
 *
 * As root, the second process runs as another uid (two users, both busy:
 * the crowding applies); otherwise both are one user and the test checks
 * exactness under carried writes only.
 */
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "harness.h"
#include "slowdown.h"

#define CONNS 3
#define SLOTS 1024 /* per connection: the daemon's default */
#define PER_PROC (CONNS * SLOTS)
#define ROUNDS 40
#define OTHER_UID 60008
#define DEADLINE_MS (10000 * CUFLAG_SLOWDOWN)

struct proc_slots {
	cuflag_client *c[CONNS];
	cuflag_slot *s[PER_PROC];
	uint32_t first[PER_PROC];
	uint32_t got[PER_PROC];
};

static void take(const char *sock, struct proc_slots *p)
{
	for (int k = 0; k < CONNS; k++) {
		CHECK_RC(cuflag_connect(sock, &p->c[k]));
		CHECK_RC(cuflag_slots_acquire(p->c[k], SLOTS, p->s + k * SLOTS));
	}
	for (int i = 0; i < PER_PROC; i++)
		CHECK_RC(cuflag_slot_arm_many(p->s[i], ROUNDS, &p->first[i]));
}

/* Every flag one value on, ROUNDS times, a millisecond apart. */
static void advance(struct proc_slots *p)
{
	for (uint32_t r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < PER_PROC; i++)
			sim_store(cuflag_slot_flag(p->s[i]), p->first[i] + r);
		usleep(1000);
	}
}

/* What s counted since the last time: *n, 0 when none. */
static void consume(cuflag_slot *s, uint64_t *n)
{
	int rc = cuflag_slot_consume(s, n);

	if (rc == -EAGAIN)
		*n = 0;
	else
		CHECK_RC(rc);
}

/* Count every slot's completions until each has ROUNDS; none may have more,
 * then or 100 ms later. */
static void count_all(struct proc_slots *p, const char *who)
{
	uint64_t end = cuflag_now_ns() + DEADLINE_MS * 1000000ull;
	int done = 0;

	while (done < PER_PROC) {
		done = 0;
		for (int i = 0; i < PER_PROC; i++) {
			uint64_t n = 0;
			if (p->got[i] < ROUNDS)
				consume(p->s[i], &n);
			p->got[i] += (uint32_t)n;
			CHECK_MSG(p->got[i] <= ROUNDS, "%s: slot %d counted %u of %d", who, i,
				  p->got[i], ROUNDS);
			done += p->got[i] == ROUNDS;
		}
		CHECK_MSG(done == PER_PROC || cuflag_now_ns() < end,
			  "%s: %d of %d slots counted all %d completions after %d ms", who, done,
			  PER_PROC, ROUNDS, DEADLINE_MS);
		usleep(2000);
	}
	usleep(100000);
	for (int i = 0; i < PER_PROC; i++) {
		uint64_t n = 0;
		consume(p->s[i], &n);
		CHECK_MSG(n == 0, "%s: slot %d counted %llu more after its %d", who, i,
			  (unsigned long long)n, ROUNDS);
	}
	for (int k = 0; k < CONNS; k++)
		cuflag_disconnect(p->c[k]);
}

/* The other user: its slots armed, a byte to the parent; once one comes
 * back, the flags advance and are counted. */
static int other_user(const char *sock, int ready, int go)
{
	static struct proc_slots p;
	char b = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed check of the parent's ends it */
	if (getuid() == 0 && become_user(OTHER_UID))
		return 2;
	take(sock, &p);
	CHECK(write(ready, &b, 1) == 1 && read(go, &b, 1) == 1);
	advance(&p);
	count_all(&p, "the other user");
	return 0;
}

int main(void)
{
	static struct proc_slots p;
	struct cuflag_msg_stats_reply st0, st;
	struct daemon_proc d;
	int ready[2], go[2], status;
	pid_t pid;
	char b = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	daemon_start(&d, 0, NULL);
	/* The other user reaches the socket (mode 0660, group root: it keeps
	 * gid 0). */
	CHECK(getuid() != 0 || chmod(d.dir, 0711) == 0);
	CHECK(pipe(ready) == 0 && pipe(go) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(other_user(d.sock, ready[1], go[0]));
	take(d.sock, &p);
	CHECK(read(ready[0], &b, 1) == 1);
	daemon_stats(&d, &st0);
	CHECK(write(go[1], &b, 1) == 1);
	advance(&p);
	count_all(&p, "this user");
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the other user's process: %#x",
		  status);
	daemon_stats(&d, &st);
	printf("crowded: %d users x %d slots x %d completions: %llu eventfd writes carried "
	       "%llu completions, %llu passes\n",
	       getuid() == 0 ? 2 : 1, PER_PROC, ROUNDS,
	       (unsigned long long)(st.wakes - st0.wakes),
	       (unsigned long long)(st.completions - st0.completions),
	       (unsigned long long)(st.passes - st0.passes));
	CHECK(st.completions - st0.completions == 2ull * PER_PROC * ROUNDS);
	/* Carried writes coalesce: a slot written once for several values. */
	CHECK(st.wakes - st0.wakes < st.completions - st0.completions);
	CHECK(st.dropped == st0.dropped);
	CHECK(st.pending == 0);
	CHECK(daemon_stop(&d) == 0);
	return 0;
}
