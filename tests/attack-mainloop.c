/* SPDX-License-Identifier: MIT */
/*
 * Requests that cost the main loop more than their count says, from one
 * user with the daemon's default limits:
 *   STUCK flood: 64 sessions, each with 1024 grouped slots armed and never
 *     completed, each keeping 64 STUCK requests in flight (every STUCK
 *     walks all the user's slots);
 *   METRICS flood: the same sessions keeping 64 METRICS (first page) in
 *     flight each.
 * The daemon builds these answers a step at a time, charges their work to
 * the user and, once it is over its share of the loop, answers it later:
 * root's cuflagctl status and another user's HELLO are served within 1 s
 * and the victim's wakes stay within their targets. The attacker's answers
 * keep coming, only at the rate its share allows.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "attack-raw.h"
#include "fd-util.h"
#include "attacks.h"

#define SESSIONS 64
#define SLOTS 1024
#define IN_FLIGHT 64
#define FLOOD_MS 4000

struct mainloop_ctl {
	uint16_t type;        /* what is asked: STUCK or METRICS */
	_Atomic int sessions; /* set up */
	_Atomic int err;      /* the first setup error */
	_Atomic uint64_t sent, answered, dropped;
};

/* A session with SLOTS grouped slots, every one armed once: never to land. */
static int arm_all(struct raw_sess *r)
{
	struct cuflag_slot_grant g[CUFLAG_BATCH_MAX];
	int rc;

	if ((rc = raw_open(r)) || (rc = raw_attach(r, 0, 0)) || (rc = raw_group(r, 0)))
		return rc < 0 ? rc : -EPROTO;
	for (uint32_t done = 0; done < SLOTS; done += CUFLAG_BATCH_MAX) {
		if ((rc = raw_alloc_grouped(r, 0, CUFLAG_BATCH_MAX, g)))
			return rc;
		for (uint32_t i = 0; i < CUFLAG_BATCH_MAX; i++)
			raw_arm(r, g[i].id, g[i].start + 1);
	}
	raw_kick(r);
	return 0;
}

/* One request of the flood's kind on r, not waiting for room. */
static int ask(struct raw_sess *r, uint16_t type)
{
	uint8_t buf[sizeof(struct cuflag_msg_hdr) + sizeof(struct cuflag_msg_metrics)];
	struct cuflag_msg_metrics m = { 0 };
	uint32_t blen = type == CUFLAG_MSG_METRICS ? sizeof(m) : 0;
	struct cuflag_msg_hdr h;

	cuflag_hdr_init(&h, type, (uint32_t)sizeof(h) + blen, ++r->req_id, 0, 0);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &m, blen);
	return send(r->sock, buf, sizeof(h) + blen, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static void flood_main(void *arg)
{
	static struct raw_sess r[SESSIONS];
	struct mainloop_ctl *mc = arg;
	struct pollfd p[SESSIONS];
	uint8_t buf[CUFLAG_MSG_MAX];
	uint64_t end;
	int n = 0;

	raise_nofile();
	for (; n < SESSIONS; n++) {
		int rc = arm_all(&r[n]);
		if (rc) {
			atomic_store(&mc->err, rc);
			raw_close(&r[n]);
			break;
		}
	}
	atomic_store(&mc->sessions, n);
	attack_mark("%d sessions x %d grouped slots armed", n, SLOTS);
	for (int i = 0; i < n; i++)
		for (int k = 0; k < IN_FLIGHT; k++)
			if (!ask(&r[i], mc->type))
				atomic_fetch_add(&mc->sent, 1);
	attack_mark("%d requests in flight on each", IN_FLIGHT);
	end = cuflag_now_ns() + FLOOD_MS * 1000000ull;
	while (cuflag_now_ns() < end) {
		for (int i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = r[i].sock, .events = POLLIN };
		if (poll(p, (nfds_t)n, 50) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			ssize_t len;
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			while ((len = recv(r[i].sock, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
				uint32_t first = 1;
				if ((size_t)len >= sizeof(struct cuflag_msg_hdr) + 4)
					memcpy(&first, buf + sizeof(struct cuflag_msg_hdr), 4);
				/* Both answers end with a record whose first word is 0. */
				if (first)
					continue;
				atomic_fetch_add(&mc->answered, 1);
				if (!ask(&r[i], mc->type))
					atomic_fetch_add(&mc->sent, 1);
			}
			if (len == 0 || (len < 0 && errno != EAGAIN)) {
				atomic_fetch_add(&mc->dropped, 1);
				r[i].sock = safe_close(r[i].sock);
			}
		}
	}
	for (int i = 0; i < n; i++)
		raw_close(&r[i]);
}

static void run_flood(const char *name, uint16_t type)
{
	struct mainloop_ctl *mc = shm_alloc(sizeof(*mc));
	struct window w;

	mc->type = type;
	window_open(&w, name);
	attacker_run(w.name, 19, flood_main, mc, 60000);
	snprintf(w.outcome, sizeof(w.outcome),
		 "%d sessions; %llu requests sent, %llu answered in %d s; %llu connections dropped",
		 atomic_load(&mc->sessions), (unsigned long long)atomic_load(&mc->sent),
		 (unsigned long long)atomic_load(&mc->answered), FLOOD_MS / 1000,
		 (unsigned long long)atomic_load(&mc->dropped));
	if (atomic_load(&mc->err))
		fail("%s: setting up the attacker's sessions failed: %s", w.name,
		     strerror(-atomic_load(&mc->err)));
	if (atomic_load(&mc->sessions) < SESSIONS)
		fail("%s: only %d of %d sessions", w.name, atomic_load(&mc->sessions), SESSIONS);
	/* Later, not never: the attacker's own answers keep coming. */
	if (!atomic_load(&mc->answered))
		fail("%s: none of the attacker's requests was answered", w.name);
	window_close(&w);
}

void attack_stuck_flood(void)
{
	run_flood("STUCK flood: 64 sessions x 1024 armed slots, 64 STUCK in flight each",
		  CUFLAG_MSG_STUCK);
}

void attack_metrics_flood(void)
{
	run_flood("METRICS flood: 64 sessions x 1024 armed slots, 64 METRICS in flight each",
		  CUFLAG_MSG_METRICS);
}
