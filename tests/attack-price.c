/* SPDX-License-Identifier: MIT */
/*
 * Requests priced by their work, and a verdict not fooled by the machine.
 *
 * - request-price: three users, 19 sessions each, every session keeping
 *   four ALLOCs of 64 slots in flight and FREEing each batch as its reply
 *   comes: each ALLOC has the daemon make 64 eventfds and send them, each
 *   FREE has a closer thread close them. Priced at what they cost
 *   (daemon/policy/loop-price.h), those requests take their users' shares of the
 *   loop, not the loop: the victim's wakes, root's status and another
 *   user's HELLO must not wait behind them. Nobody need be dropped.
 * - honest-poll: no attacker at all. A user completes its one slot and
 *   waits for it with poll() as fast as it can, while two busy processes
 *   take the CPUs the scanner runs on, against the lowest write budget
 *   (--write-budget-us 100): a write that was charged for the scanner's time
 *   off the CPU is no costly writer (budget_own_costly), so it must never be
 *   dropped, and every completion must be counted.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attack-raw.h"
#include "attacks.h"
#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "fdpass.h"

#define PRICE_USERS 3
#define PRICE_SESSIONS 19
#define PRICE_BATCH 64
#define PRICE_PIPE 4
#define PRICE_RUN_MS 2000
#define POLL_RUN_MS 2500
#define POLL_HOGS 2

static const uid_t price_uids[PRICE_USERS] = { UID_ATTACKER, 60041, 60042 };

struct price_user {
	_Atomic int ready, done, err, err_step, refused;
	_Atomic long allocs, fds;
};

struct price {
	_Atomic int go, stop;
	struct price_user u[PRICE_USERS];
};

struct price_arg {
	struct price *p;
	struct price_user *u;
};

/* One session's pipeline: ALLOCs in flight, a FREE for each reply. */
struct pipe_sess {
	struct raw_sess r;
	unsigned inflight;
};

static int send_req(struct raw_sess *r, uint16_t type, const void *body, uint32_t blen)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hdr h;

	cuflag_hdr_init(&h, type, (uint32_t)sizeof(h) + blen, ++r->req_id, 0, 0);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), body, blen);
	return send_with_fds(r->sock, buf, sizeof(h) + blen, NULL, 0);
}

static int send_alloc(struct pipe_sess *ps)
{
	struct cuflag_msg_alloc m = { .count = PRICE_BATCH };
	int rc = send_req(&ps->r, CUFLAG_MSG_ALLOC, &m, sizeof(m));

	ps->inflight += !rc;
	return rc;
}

/* A reply: an ALLOC's is answered with a FREE of its slots (and another
 * ALLOC); a FREE's, or a refusal, counted. 0 or -errno. */
static int on_reply(struct pipe_sess *ps, struct price_user *u)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	int fds[CUFLAG_MSG_MAX_FDS];
	unsigned nfds = 0;
	struct cuflag_msg_hdr h;
	ssize_t n = cuflag_recv_msg(ps->r.sock, buf, sizeof(buf), fds, CUFLAG_MSG_MAX_FDS, &nfds,
				    MSG_DONTWAIT);

	if (n == -EAGAIN)
		return 0;
	cuflag_close_fds(fds, nfds);
	if (n < (ssize_t)sizeof(h))
		return n < 0 ? (int)n : -EPIPE;
	memcpy(&h, buf, sizeof(h));
	if ((h.type & ~CUFLAG_MSG_REPLY) != CUFLAG_MSG_ALLOC)
		return h.status ? (atomic_fetch_add(&u->refused, 1), 0) : 0;
	ps->inflight--;
	if (h.status) {
		atomic_fetch_add(&u->refused, 1);
		return send_alloc(ps);
	}
	struct cuflag_msg_alloc_reply rep;
	struct cuflag_msg_free f = { 0 };
	memcpy(&rep, buf + sizeof(h), sizeof(rep) < (size_t)n - sizeof(h) ? sizeof(rep)
									   : (size_t)n - sizeof(h));
	f.count = rep.count;
	for (uint32_t i = 0; i < rep.count && i < CUFLAG_BATCH_MAX; i++)
		f.ids[i] = rep.grants[i].id;
	atomic_fetch_add(&u->allocs, 1);
	atomic_fetch_add(&u->fds, nfds);
	if (send_req(&ps->r, CUFLAG_MSG_FREE, &f, (uint32_t)cuflag_id_batch_len(f.count)))
		return -EPIPE;
	return send_alloc(ps);
}

static void price_main(void *arg)
{
	struct price_arg *a = arg;
	struct price_user *u = a->u;
	static struct pipe_sess ps[PRICE_SESSIONS];
	struct pollfd pf[PRICE_SESSIONS];
	int n = 0, rc = 0;

	for (; n < PRICE_SESSIONS; n++) {
		if ((rc = raw_open(&ps[n].r)) || (rc = raw_attach(&ps[n].r, 0, 0))) {
			atomic_store(&u->err_step, 1);
			atomic_store(&u->err, rc);
			break;
		}
		ps[n].inflight = 0;
		pf[n] = (struct pollfd){ .fd = ps[n].r.sock, .events = POLLIN };
	}
	atomic_store(&u->ready, 1);
	wait_flag(&a->p->go, 1, 60000);
	for (int k = 0; !rc && k < n; k++)
		for (int j = 0; j < PRICE_PIPE && !rc; j++)
			rc = send_alloc(&ps[k]);
	while (!rc && !atomic_load(&a->p->stop)) {
		if (poll(pf, (nfds_t)n, 100) < 0)
			break;
		for (int k = 0; k < n && !rc; k++)
			if (pf[k].revents & (POLLIN | POLLHUP | POLLERR))
				rc = on_reply(&ps[k], u);
	}
	if (rc && !atomic_load(&u->err)) {
		atomic_store(&u->err_step, 2);
		atomic_store(&u->err, rc);
	}
	for (int k = 0; k < n; k++)
		raw_close(&ps[k].r);
	atomic_store(&u->done, 1);
}

void attack_request_price(void)
{
	struct price *p = shm_alloc(sizeof(*p));
	struct price_arg *a = shm_alloc(sizeof(*a) * PRICE_USERS);
	pid_t pid[PRICE_USERS];
	struct window w;
	long allocs = 0, fds = 0;
	int refused = 0;

	for (int k = 0; k < PRICE_USERS; k++) {
		a[k] = (struct price_arg){ p, &p->u[k] };
		pid[k] = spawn_user(price_uids[k], 19, price_main, &a[k]);
	}
	for (int k = 0; k < PRICE_USERS; k++)
		wait_flag(&p->u[k].ready, 1, 60000);
	window_open(&w, "3 users x 19 sessions, ALLOC/FREE of 64 slots, 4 in flight each");
	atomic_store(&p->go, 1);
	usleep(PRICE_RUN_MS * 1000);
	atomic_store(&p->stop, 1);
	for (int k = 0; k < PRICE_USERS; k++) {
		struct price_user *u = &p->u[k];
		if (child_wait(pid[k], 30000) != 0 || !atomic_load(&u->done))
			fail("%s: user %d did not get to its end", w.name, k);
		if (atomic_load(&u->err))
			fail("%s: user %d's step %d failed: %s", w.name, k, atomic_load(&u->err_step),
			     strerror(-atomic_load(&u->err)));
		allocs += atomic_load(&u->allocs);
		fds += atomic_load(&u->fds);
		refused += atomic_load(&u->refused);
	}
	snprintf(w.outcome, sizeof(w.outcome),
		 "%ld ALLOCs of 64 answered (%ld eventfds made, sent and closed, %.0f/s), %d "
		 "refused",
		 allocs, fds, (double)fds * 1000.0 / PRICE_RUN_MS, refused);
	if (!allocs)
		fail("%s: no ALLOC was answered", w.name);
	window_close(&w);
}

/* ---- honest-poll ---- */

struct honest {
	_Atomic int stop, dropped, err;
	_Atomic long completions, counted, waits;
};

static void hog_main(void *arg)
{
	struct honest *h = arg;
	volatile uint64_t x = 0;

	while (!atomic_load(&h->stop))
		x++;
}

static void honest_main(void *arg)
{
	struct honest *h = arg;
	uint64_t end = cuflag_now_ns() + POLL_RUN_MS * 1000000ull;
	cuflag_client *c;
	cuflag_slot *s;
	int rc;

	if ((rc = cuflag_connect(attack_daemon.sock, &c)) || (rc = cuflag_slot_acquire(c, &s))) {
		atomic_store(&h->err, rc);
		return;
	}
	while (cuflag_now_ns() < end) {
		struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
		uint64_t n = 0;
		uint32_t t;
		if ((rc = cuflag_slot_arm(s, &t)))
			break;
		sim_store(cuflag_slot_flag(s), t);
		atomic_fetch_add(&h->completions, 1);
		if (poll(&p, 1, 1000) != 1) {
			rc = -ETIMEDOUT;
			break;
		}
		atomic_fetch_add(&h->waits, 1);
		while (cuflag_slot_consume(s, &n) == 0)
			atomic_fetch_add(&h->counted, (long)n);
	}
	{
		struct pollfd p = { .fd = cuflag_client_fd(c), .events = POLLRDHUP };
		atomic_store(&h->dropped, poll(&p, 1, 0) == 1 &&
						   (p.revents & (POLLHUP | POLLRDHUP | POLLERR)));
	}
	if (rc)
		atomic_store(&h->err, rc);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
}

void attack_honest_poll(void)
{
	struct honest *h = shm_alloc(sizeof(*h));
	pid_t hogs[POLL_HOGS];
	struct window w;
	uint64_t d0 = daemon_dropped();

	window_open(&w, "no attacker: poll() on one slot flat out, two busy CPUs, budget 100 us");
	for (int i = 0; i < POLL_HOGS; i++)
		hogs[i] = spawn_user(60051, 19, hog_main, h);
	attacker_run(w.name, 0, honest_main, h, 30000);
	atomic_store(&h->stop, 1);
	for (int i = 0; i < POLL_HOGS; i++)
		child_wait(hogs[i], 5000);
	snprintf(w.outcome, sizeof(w.outcome),
		 "%ld completions, %ld counted, %ld poll() wakes; dropped %s (STATS +%llu)",
		 atomic_load(&h->completions), atomic_load(&h->counted), atomic_load(&h->waits),
		 atomic_load(&h->dropped) ? "yes" : "no",
		 (unsigned long long)(daemon_dropped() - d0));
	if (atomic_load(&h->err))
		fail("%s: the honest client's wait failed: %s", w.name,
		     strerror(-atomic_load(&h->err)));
	if (atomic_load(&h->dropped) || daemon_dropped() != d0)
		fail("%s: an honest client was dropped", w.name);
	if (atomic_load(&h->counted) != atomic_load(&h->completions))
		fail("%s: %ld completions, %ld counted", w.name, atomic_load(&h->completions),
		     atomic_load(&h->counted));
	window_close(&w);
}
