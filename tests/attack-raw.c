/* SPDX-License-Identifier: MIT */
#include "attack-raw.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "attack-util.h"
#include "fdpass.h"

int raw_open(struct raw_sess *r)
{
	struct cuflag_msg_hello_reply hr;
	int rc;

	memset(r, 0, sizeof(*r));
	r->region = r->wake = -1;
	for (int g = 0; g < RAW_GROUPS_MAX; g++)
		r->group_efd[g] = -1;
	r->req_id = 1;
	r->sock = daemon_connect_raw();
	if (r->sock < 0)
		return r->sock;
	if ((rc = hello_raw(r->sock, &hr))) {
		raw_close(r);
		return rc;
	}
	cuflag_region_layout_from_reply(&r->l, &hr);
	r->region = make_client_region(&hr);
	r->map = mmap(NULL, r->l.size, PROT_READ | PROT_WRITE, MAP_SHARED, r->region, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		raw_close(r);
		return -ENOMEM;
	}
	r->flags = (volatile uint32_t *)(r->map + r->l.flags_off);
	r->states = (volatile struct cuflag_slot_state *)(r->map + r->l.state_off);
	return 0;
}

/* One request, its reply: the status (-EPIPE when none came); up to cap
 * bytes of the reply's body into out. */
int raw_call(struct raw_sess *r, uint16_t type, const void *body, uint32_t blen, const int *fds,
	     unsigned nfds, void *out, size_t cap)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hdr h;
	int got[CUFLAG_MSG_MAX_FDS];
	struct pollfd p = { .fd = r->sock, .events = POLLIN };
	unsigned ngot = 0;
	ssize_t n;

	cuflag_hdr_init(&h, type, (uint32_t)sizeof(h) + blen, ++r->req_id, 0, (uint16_t)nfds);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), body, blen);
	if (send_with_fds(r->sock, buf, sizeof(h) + blen, fds, nfds) || poll(&p, 1, 5000) != 1)
		return -EPIPE;
	n = cuflag_recv_msg(r->sock, buf, sizeof(buf), got, CUFLAG_MSG_MAX_FDS, &ngot,
			    MSG_DONTWAIT);
	cuflag_close_fds(got, ngot);
	if (n < (ssize_t)sizeof(h))
		return -EPIPE;
	memcpy(&h, buf, sizeof(h));
	if (out && (size_t)n > sizeof(h))
		memcpy(out, buf + sizeof(h), (size_t)n - sizeof(h) < cap ? (size_t)n - sizeof(h) : cap);
	return h.status;
}

int raw_attach(struct raw_sess *r, uint32_t slots, uint64_t epoch)
{
	struct cuflag_msg_attach m = { .slots = slots, .epoch = epoch };
	int fds[2];

	r->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fds[0] = r->region;
	fds[1] = r->wake;
	return raw_call(r, CUFLAG_MSG_ATTACH, &m, sizeof(m), fds, 2, NULL, 0);
}

int raw_group(struct raw_sess *r, uint32_t g)
{
	struct cuflag_msg_group m = { .id = g };

	r->group_efd[g] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return raw_call(r, CUFLAG_MSG_GROUP, &m, sizeof(m), &r->group_efd[g], 1, NULL, 0);
}

/* FREE and ADOPT share one layout: count, a word, ids. */
static int id_batch(struct raw_sess *r, uint16_t type, uint32_t word, const uint32_t *ids,
		    uint32_t n)
{
	struct cuflag_msg_adopt m = { .count = n, .group = word };

	memcpy(m.ids, ids, n * sizeof(*ids));
	return raw_call(r, type, &m, (uint32_t)cuflag_id_batch_len(n), NULL, 0, NULL, 0);
}

int raw_adopt_grouped(struct raw_sess *r, uint32_t g, const uint32_t *ids, uint32_t n)
{
	return id_batch(r, CUFLAG_MSG_ADOPT, g + 1, ids, n);
}

int raw_free(struct raw_sess *r, const uint32_t *ids, uint32_t n)
{
	return id_batch(r, CUFLAG_MSG_FREE, 0, ids, n);
}

int raw_alloc_grouped(struct raw_sess *r, uint32_t g, uint32_t n, struct cuflag_slot_grant *out)
{
	struct cuflag_msg_alloc m = { .count = n, .group = g + 1 };
	struct cuflag_msg_alloc_reply rep;
	int st = raw_call(r, CUFLAG_MSG_ALLOC, &m, sizeof(m), NULL, 0, &rep, sizeof(rep));

	if (!st && rep.count != n)
		return -EPROTO;
	if (!st)
		memcpy(out, rep.grants, n * sizeof(*out));
	return st;
}

void raw_arm(struct raw_sess *r, uint32_t slot, uint32_t target)
{
	_Atomic uint32_t *tail = (_Atomic uint32_t *)(r->map + r->l.tail_off);
	struct cuflag_arm *q = (struct cuflag_arm *)(r->map + r->l.queue_off);
	uint32_t t = atomic_load_explicit(tail, memory_order_relaxed);

	q[t & (r->l.queue_cap - 1)] = (struct cuflag_arm){ .slot = slot, .target = target };
	atomic_store_explicit(tail, t + 1, memory_order_release);
}

void raw_kick(struct raw_sess *r)
{
	uint64_t one = 1;

	atomic_thread_fence(memory_order_seq_cst);
	if (write(r->wake, &one, sizeof(one)) < 0 && errno != EAGAIN)
		CHECK_FAIL("write to the wake eventfd: %s", strerror(errno));
}

uint32_t raw_queued(const struct raw_sess *r)
{
	uint32_t t = atomic_load((_Atomic uint32_t *)(r->map + r->l.tail_off));
	uint32_t h = atomic_load((_Atomic uint32_t *)(r->map + r->l.head_off));

	return t - h;
}

volatile struct cuflag_group_ring *raw_ring(const struct raw_sess *r, uint32_t g)
{
	return (volatile struct cuflag_group_ring *)(r->map + r->l.groups_off +
						     (size_t)g * r->l.ring_size);
}

void raw_close(struct raw_sess *r)
{
	if (r->sock >= 0)
		close(r->sock);
	if (r->map)
		munmap(r->map, r->l.size);
	if (r->region >= 0)
		close(r->region);
	if (r->wake >= 0)
		close(r->wake);
	for (int g = 0; g < RAW_GROUPS_MAX; g++)
		if (r->group_efd[g] >= 0)
			close(r->group_efd[g]);
	memset(r, 0, sizeof(*r));
	r->sock = r->region = r->wake = -1;
	for (int g = 0; g < RAW_GROUPS_MAX; g++)
		r->group_efd[g] = -1;
}

int user_pending(uid_t uid, uint32_t *pending, uint32_t *in_flight, uint32_t *slots)
{
	return daemon_user_metrics(attack_daemon.sock, uid, pending, in_flight, slots);
}

static void *watch_main(void *arg)
{
	struct pending_watch *w = arg;

	while (!atomic_load(&w->stop)) {
		uint32_t p, f, s;
		if (user_pending(w->uid, &p, &f, &s)) {
			atomic_fetch_add(&w->errors, 1);
		} else {
			if (p > atomic_load(&w->max_pending))
				atomic_store(&w->max_pending, p);
			if (f > atomic_load(&w->max_in_flight))
				atomic_store(&w->max_in_flight, f);
			atomic_store(&w->last_pending, p);
			atomic_store(&w->last_in_flight, f);
			atomic_store(&w->last_slots, s);
			atomic_fetch_add(&w->samples, 1);
		}
		usleep(20000);
	}
	return NULL;
}

void pending_watch_start(struct pending_watch *w, uid_t uid)
{
	memset(w, 0, sizeof(*w));
	w->uid = uid;
	CHECK(pthread_create(&w->th, NULL, watch_main, w) == 0);
}

void pending_watch_stop(struct pending_watch *w)
{
	atomic_store(&w->stop, 1);
	pthread_join(w->th, NULL);
}

uint64_t scanner_cpu_ns(uint64_t *passes)
{
	struct cuflag_msg_stats_reply st;

	if (daemon_proc_stats(&attack_daemon, &st))
		return 0;
	*passes = st.passes;
	return st.scanner_cpu_ns;
}
