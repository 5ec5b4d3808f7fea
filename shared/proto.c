/* SPDX-License-Identifier: MIT */
#include "proto.h"

#include <errno.h>
#include <string.h>

#define FAIL(err, why)                                                                     \
	do {                                                                               \
		*reason = (why);                                                           \
		return (err);                                                              \
	} while (0)

void cuflag_hdr_init(struct cuflag_msg_hdr *h, uint16_t type, uint32_t len, uint32_t req_id,
		     int32_t status, uint16_t nfds)
{
	*h = (struct cuflag_msg_hdr){
		.type = type, .nfds = nfds, .len = len, .req_id = req_id, .status = status,
	};
}

/* The header every message must pass: length agrees with what arrived. */
static int hdr_check(const void *buf, size_t len, unsigned nfds, struct cuflag_msg_hdr *h,
		     const char **reason)
{
	if (len < sizeof(*h))
		FAIL(-EBADMSG, "message shorter than its header");
	if (len > CUFLAG_MSG_MAX)
		FAIL(-EBADMSG, "message longer than the protocol allows");
	memcpy(h, buf, sizeof(*h));
	if (h->len != len)
		FAIL(-EBADMSG, "header length does not match the message");
	if (h->nfds != nfds)
		FAIL(-EBADMSG, "header fd count does not match the fds received");
	return 0;
}

/* FREE and ADOPT: count, a second word (FREE: reserved, zero; ADOPT: the
 * group), then count ids. */
static int check_id_batch(const unsigned char *body, size_t blen, const char *bad_len,
			  const char *bad_reserved, const char *bad_count, const char *bad_sum,
			  uint32_t *count_out, uint32_t *word2, const char **reason)
{
	uint32_t count;

	if (blen < cuflag_id_batch_len(0))
		FAIL(-EBADMSG, bad_len);
	memcpy(&count, body, 4);
	memcpy(word2, body + 4, 4);
	if (bad_reserved && *word2)
		FAIL(-EINVAL, bad_reserved);
	if (count < 1 || count > CUFLAG_BATCH_MAX)
		FAIL(-EINVAL, bad_count);
	/* Widened before the sum: count is the peer's. */
	if ((uint64_t)blen != cuflag_id_batch_len(count))
		FAIL(-EBADMSG, bad_sum);
	*count_out = count;
	return 0;
}

/* What a check reads of a message: its type, the body after the header
 * (blen bytes) and the fds that came with it. */
struct msg_body {
	uint16_t type;
	const unsigned char *body;
	size_t blen;
	unsigned nfds;
};

/* One check per request type. */
static int check_hello(const struct msg_body *q, const char **reason)
{
	struct cuflag_msg_hello m;

	if (q->blen != sizeof(m) || q->nfds)
		FAIL(-EBADMSG, "HELLO: bad length or fds");
	memcpy(&m, q->body, sizeof(m));
	if (m.flags || m.reserved)
		FAIL(-EINVAL, "HELLO: reserved fields not zero");
	if (m.version_min > m.version_max)
		FAIL(-EINVAL, "HELLO: version range empty");
	return 0;
}

static int check_alloc(const struct msg_body *q, const char **reason)
{
	struct cuflag_msg_alloc m;

	if (q->blen != sizeof(m) || q->nfds)
		FAIL(-EBADMSG, "ALLOC: bad length or fds");
	memcpy(&m, q->body, sizeof(m));
	if (m.count < 1 || m.count > CUFLAG_BATCH_MAX)
		FAIL(-EINVAL, "ALLOC: count out of range");
	return 0; /* m.group: the daemon checks it names a group made */
}

static int check_free(const struct msg_body *q, const char **reason)
{
	uint32_t count, reserved;

	if (q->nfds)
		FAIL(-EBADMSG, "FREE: bad length or fds");
	return check_id_batch(q->body, q->blen, "FREE: bad length or fds",
			      "FREE: reserved field not zero", "FREE: count out of range",
			      "FREE: length does not match count", &count, &reserved, reason);
}

static int check_bind(const struct msg_body *q, const char **reason)
{
	struct cuflag_msg_bind m;

	if (q->blen != sizeof(m))
		FAIL(-EBADMSG, "BIND: bad length");
	if (q->nfds != 1)
		FAIL(-EBADMSG, "BIND: needs exactly one fd");
	memcpy(&m, q->body, sizeof(m));
	if (m.reserved)
		FAIL(-EINVAL, "BIND: reserved field not zero");
	return 0;
}

static int check_query(const struct msg_body *q, const char **reason)
{
	if (q->blen || q->nfds)
		FAIL(-EBADMSG, "query with a body or fds");
	return 0;
}

static int check_attach(const struct msg_body *q, const char **reason)
{
	struct cuflag_msg_attach m;

	if (q->blen != sizeof(m))
		FAIL(-EBADMSG, "ATTACH: bad length");
	if (q->nfds != 2)
		FAIL(-EBADMSG, "ATTACH: needs the region and the wake eventfd");
	memcpy(&m, q->body, sizeof(m));
	if (m.flags)
		FAIL(-EINVAL, "ATTACH: reserved fields not zero");
	return 0;
}

static int check_adopt(const struct msg_body *q, const char **reason)
{
	uint32_t count, group;
	int rc = check_id_batch(q->body, q->blen, "ADOPT: too short", NULL,
				"ADOPT: count out of range", "ADOPT: length does not match count",
				&count, &group, reason);

	if (rc)
		return rc;
	if (q->nfds != (group ? 0 : count))
		FAIL(-EBADMSG, "ADOPT: one eventfd per slot, none for a group's");
	return 0;
}

static int check_group(const struct msg_body *q, const char **reason)
{
	struct cuflag_msg_group m;

	if (q->blen != sizeof(m))
		FAIL(-EBADMSG, "GROUP: bad length");
	if (q->nfds != (q->type == CUFLAG_MSG_GROUP ? 1u : 0u))
		FAIL(-EBADMSG, "GROUP takes its eventfd, UNGROUP no fd");
	memcpy(&m, q->body, sizeof(m));
	if (m.reserved)
		FAIL(-EINVAL, "GROUP: reserved field not zero");
	return 0;
}

static int check_metrics(const struct msg_body *q, const char **reason)
{
	struct cuflag_msg_metrics m;

	if (q->blen != sizeof(m) || q->nfds)
		FAIL(-EBADMSG, "METRICS: bad length, or fds");
	memcpy(&m, q->body, sizeof(m));
	if (m.want & ~CUFLAG_METRICS_WANT_ALL)
		FAIL(-EINVAL, "METRICS: asks for records this daemon does not know");
	return 0;
}

static int check_export(const struct msg_body *q, const char **reason)
{
	struct cuflag_msg_export m;

	if (q->blen != sizeof(m))
		FAIL(-EBADMSG, "EXPORT: bad length");
	memcpy(&m, q->body, sizeof(m));
	if ((m.flags & ~(CUFLAG_EXPORT_REDECLARE | CUFLAG_EXPORT_DECLARE)) ||
	    m.flags == (CUFLAG_EXPORT_REDECLARE | CUFLAG_EXPORT_DECLARE))
		FAIL(-EINVAL, "EXPORT: unknown flags");
	if (q->nfds != (m.flags ? 1u : 0u))
		FAIL(-EBADMSG, "EXPORT: a (re)declare needs the handle, an export no fd");
	return 0;
}

static int check_import(const struct msg_body *q, const char **reason)
{
	struct cuflag_msg_import m;

	if (q->blen != sizeof(m))
		FAIL(-EBADMSG, "IMPORT: bad length");
	memcpy(&m, q->body, sizeof(m));
	/* A resume hands back the slot's eventfd too, unless it is grouped. */
	if (q->nfds != ((m.flags & CUFLAG_IMPORT_RESUME) && !m.group ? 2u : 1u))
		FAIL(-EBADMSG, "IMPORT: needs the handle (and, resuming, the eventfd)");
	if (m.reserved || (m.flags & ~CUFLAG_IMPORT_RESUME) || (!m.flags && m.id))
		FAIL(-EINVAL, "IMPORT: reserved fields or unknown flags not zero");
	return 0; /* group and id: the daemon checks them against the client's */
}

static int (*const request_checks[CUFLAG_MSG_TYPE_END])(const struct msg_body *q,
							   const char **reason) = {
	[CUFLAG_MSG_HELLO] = check_hello,   [CUFLAG_MSG_ALLOC] = check_alloc,
	[CUFLAG_MSG_FREE] = check_free,     [CUFLAG_MSG_BIND] = check_bind,
	[CUFLAG_MSG_STATS] = check_query,   [CUFLAG_MSG_CLIENTS] = check_query,
	[CUFLAG_MSG_ATTACH] = check_attach, [CUFLAG_MSG_ADOPT] = check_adopt,
	[CUFLAG_MSG_GROUP] = check_group,   [CUFLAG_MSG_UNGROUP] = check_group,
	[CUFLAG_MSG_METRICS] = check_metrics, [CUFLAG_MSG_STUCK] = check_query,
	[CUFLAG_MSG_EXPORT] = check_export,
	[CUFLAG_MSG_IMPORT] = check_import,
};

int cuflag_request_check(const void *buf, size_t len, unsigned nfds, const char **reason)
{
	struct cuflag_msg_hdr h;
	struct msg_body q;
	int r = hdr_check(buf, len, nfds, &h, reason);

	if (r)
		return r;
	if (h.status != 0)
		FAIL(-EINVAL, "request with a non-zero status");
	if (h.type >= CUFLAG_MSG_TYPE_END || !request_checks[h.type])
		FAIL(-EPROTO, "unknown message type");
	q = (struct msg_body){ .type = h.type, .body = (const unsigned char *)buf + sizeof(h),
			       .blen = len - sizeof(h), .nfds = nfds };
	return request_checks[h.type](&q, reason);
}

/* A reply of size bytes with at most max_fds fds; why, if not. */
static int reply_sized(const struct msg_body *q, size_t size, unsigned max_fds, const char *why,
		       const char **reason)
{
	if (q->blen != size || q->nfds > max_fds)
		FAIL(-EBADMSG, why);
	return 0;
}

/* One check per reply type, of a success reply. */
static int reply_hello(const struct msg_body *q, const char **reason)
{
	if (q->blen != sizeof(struct cuflag_msg_hello_reply))
		FAIL(-EBADMSG, "HELLO reply: bad length");
	if (q->nfds != 1)
		FAIL(-EBADMSG, "HELLO reply: not exactly the daemon page");
	return 0;
}

static int reply_alloc(const struct msg_body *q, const char **reason)
{
	uint32_t count;

	if (q->blen < cuflag_alloc_reply_len(0))
		FAIL(-EBADMSG, "ALLOC reply: too short");
	memcpy(&count, q->body, 4);
	if (count < 1 || count > CUFLAG_BATCH_MAX ||
	    (uint64_t)q->blen != cuflag_alloc_reply_len(count) || (q->nfds != count && q->nfds))
		FAIL(-EBADMSG, "ALLOC reply: count, length and fds disagree");
	return 0;
}

static int reply_attach(const struct msg_body *q, const char **reason)
{
	/* With slab CUDA_IPC the flags allocation comes with it. */
	return reply_sized(q, 0, 1, "ATTACH reply: a body or too many fds", reason);
}

/* FREE, BIND, ADOPT, GROUP, UNGROUP: the status says it all. */
static int reply_empty(const struct msg_body *q, const char **reason)
{
	return reply_sized(q, 0, 0, "reply with an unexpected body", reason);
}

static int reply_stats(const struct msg_body *q, const char **reason)
{
	return reply_sized(q, sizeof(struct cuflag_msg_stats_reply), 0, "STATS reply: bad length",
			   reason);
}

static int reply_clients(const struct msg_body *q, const char **reason)
{
	return reply_sized(q, sizeof(struct cuflag_msg_client_info), 0,
			   "CLIENTS reply: bad length", reason);
}

static int reply_metrics(const struct msg_body *q, const char **reason)
{
	static const uint32_t size[CUFLAG_METRICS_KIND_END] = {
		[CUFLAG_METRICS_END] = sizeof(struct cuflag_metrics_end),
		[CUFLAG_METRICS_DAEMON] = sizeof(struct cuflag_metrics_daemon),
		[CUFLAG_METRICS_USER] = sizeof(struct cuflag_metrics_user),
		[CUFLAG_METRICS_CLIENT] = sizeof(struct cuflag_metrics_client),
		[CUFLAG_METRICS_USER_TOTALS] = sizeof(struct cuflag_metrics_user_totals),
		[CUFLAG_METRICS_PROCESS] = sizeof(struct cuflag_metrics_process),
	};
	uint32_t kind;

	if (q->blen < sizeof(kind) || q->nfds)
		FAIL(-EBADMSG, "METRICS reply: too short, or fds");
	memcpy(&kind, q->body, sizeof(kind));
	if (kind >= CUFLAG_METRICS_KIND_END || q->blen != size[kind])
		FAIL(-EBADMSG, "METRICS reply: unknown kind, or bad length");
	return 0;
}

static int reply_stuck(const struct msg_body *q, const char **reason)
{
	return reply_sized(q, sizeof(struct cuflag_msg_stuck_slot), 0, "STUCK reply: bad length",
			   reason);
}

static int reply_export(const struct msg_body *q, const char **reason)
{
	/* The handle (or nothing, to a declare), or the record to make it of. */
	if ((q->blen == 0 && q->nfds <= 1) ||
	    (q->blen == sizeof(struct cuflag_handle_record) && !q->nfds))
		return 0;
	FAIL(-EBADMSG, "EXPORT reply: neither a handle nor a record");
}

static int reply_import(const struct msg_body *q, const char **reason)
{
	return reply_sized(q, sizeof(struct cuflag_slot_grant), 1,
			   "IMPORT reply: bad length or too many fds", reason);
}

static int (*const reply_checks[CUFLAG_MSG_TYPE_END])(const struct msg_body *q,
							 const char **reason) = {
	[CUFLAG_MSG_HELLO] = reply_hello,     [CUFLAG_MSG_ALLOC] = reply_alloc,
	[CUFLAG_MSG_FREE] = reply_empty,      [CUFLAG_MSG_BIND] = reply_empty,
	[CUFLAG_MSG_STATS] = reply_stats,     [CUFLAG_MSG_CLIENTS] = reply_clients,
	[CUFLAG_MSG_ATTACH] = reply_attach,   [CUFLAG_MSG_ADOPT] = reply_empty,
	[CUFLAG_MSG_GROUP] = reply_empty,     [CUFLAG_MSG_UNGROUP] = reply_empty,
	[CUFLAG_MSG_METRICS] = reply_metrics, [CUFLAG_MSG_STUCK] = reply_stuck,
	[CUFLAG_MSG_EXPORT] = reply_export,
	[CUFLAG_MSG_IMPORT] = reply_import,
};

int cuflag_reply_check(const void *buf, size_t len, unsigned nfds, uint16_t expect_type,
		       uint32_t expect_id, const char **reason)
{
	struct cuflag_msg_hdr h;
	struct msg_body q;
	int r = hdr_check(buf, len, nfds, &h, reason);

	if (r)
		return r;
	if (h.type != (expect_type | CUFLAG_MSG_REPLY))
		FAIL(-EPROTO, "reply of an unexpected type");
	if (h.req_id != expect_id)
		FAIL(-EPROTO, "reply to another request");
	q = (struct msg_body){ .type = expect_type, .body = (const unsigned char *)buf + sizeof(h),
			       .blen = len - sizeof(h), .nfds = nfds };
	if (h.status > 0)
		FAIL(-EPROTO, "reply with a positive status");
	if (h.status < 0) {
		if (nfds || q.blen > CUFLAG_REASON_MAX)
			FAIL(-EBADMSG, "error reply too long or with fds");
		return 0;
	}
	if (expect_type >= CUFLAG_MSG_TYPE_END || !reply_checks[expect_type])
		FAIL(-EPROTO, "unknown message type");
	return reply_checks[expect_type](&q, reason);
}

void cuflag_region_hdr_make(struct cuflag_region_hdr *h, const struct cuflag_region_layout *l)
{
	memset(h, 0, sizeof(*h));
	h->magic = CUFLAG_REGION_MAGIC;
	h->version = CUFLAG_PROTO_VERSION;
	h->hdr_size = sizeof(*h);
	h->nslots = l->nslots;
	h->queue_cap = l->queue_cap;
	h->head_off = l->head_off;
	h->tail_off = l->tail_off;
	h->queue_off = l->queue_off;
	h->flags_off = l->flags_off;
	h->state_off = l->state_off;
	h->groups_off = l->groups_off;
	h->ngroups = l->ngroups;
	h->ring_cap = l->ring_cap;
	h->ring_size = l->ring_size;
	h->region_size = l->size;
}

static int is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

int cuflag_region_layout_make(struct cuflag_region_layout *l, uint32_t nslots,
			      uint32_t queue_cap, uint32_t ngroups, uint32_t ring_cap,
			      uint32_t page_size)
{
	uint64_t qend, send, gend, fend;

	if (!nslots || !is_pow2(queue_cap) || !is_pow2(page_size) || nslots > (1u << 24) ||
	    queue_cap > (1u << 20) || ngroups > 4096 || !is_pow2(ring_cap) ||
	    ring_cap > (1u << 24))
		return -EINVAL;
	qend = CUFLAG_REGION_QUEUE_OFF + (uint64_t)queue_cap * sizeof(struct cuflag_arm);
	l->nslots = nslots;
	l->queue_cap = queue_cap;
	l->head_off = CUFLAG_REGION_HEAD_OFF;
	l->tail_off = CUFLAG_REGION_TAIL_OFF;
	l->queue_off = CUFLAG_REGION_QUEUE_OFF;
	l->state_off = (uint32_t)round_up(qend, CUFLAG_CACHELINE);
	send = l->state_off + (uint64_t)nslots * sizeof(struct cuflag_slot_state);
	l->ngroups = ngroups;
	l->ring_cap = ring_cap;
	l->ring_size = (uint32_t)round_up(sizeof(struct cuflag_group_ring) +
					  (uint64_t)ring_cap * sizeof(uint32_t), CUFLAG_CACHELINE);
	l->groups_off = (uint32_t)round_up(send, CUFLAG_CACHELINE);
	gend = l->groups_off + (uint64_t)ngroups * l->ring_size;
	l->flags_off = (uint32_t)round_up(gend, page_size);
	fend = l->flags_off + (uint64_t)nslots * sizeof(uint32_t);
	l->size = round_up(fend, page_size);
	return l->size > UINT32_MAX ? -EINVAL : 0;
}

void cuflag_region_layout_to_reply(struct cuflag_msg_hello_reply *r,
				   const struct cuflag_region_layout *l)
{
	r->region_size = l->size;
	r->nslots = l->nslots;
	r->queue_cap = l->queue_cap;
	r->head_off = l->head_off;
	r->tail_off = l->tail_off;
	r->queue_off = l->queue_off;
	r->state_off = l->state_off;
	r->flags_off = l->flags_off;
	r->groups_off = l->groups_off;
	r->ngroups = l->ngroups;
	r->ring_cap = l->ring_cap;
	r->ring_size = l->ring_size;
}

void cuflag_region_layout_from_reply(struct cuflag_region_layout *l,
				     const struct cuflag_msg_hello_reply *r)
{
	*l = (struct cuflag_region_layout){
		.nslots = r->nslots, .queue_cap = r->queue_cap, .head_off = r->head_off,
		.tail_off = r->tail_off, .queue_off = r->queue_off, .state_off = r->state_off,
		.flags_off = r->flags_off, .groups_off = r->groups_off, .ngroups = r->ngroups,
		.ring_cap = r->ring_cap, .ring_size = r->ring_size, .size = r->region_size,
	};
}

int cuflag_region_layout_equal(const struct cuflag_region_layout *a,
			       const struct cuflag_region_layout *b)
{
	/* Field by field: the struct has padding, which memcmp would read. */
	return a->nslots == b->nslots && a->queue_cap == b->queue_cap &&
	       a->head_off == b->head_off && a->tail_off == b->tail_off &&
	       a->queue_off == b->queue_off && a->state_off == b->state_off &&
	       a->flags_off == b->flags_off && a->groups_off == b->groups_off &&
	       a->ngroups == b->ngroups && a->ring_cap == b->ring_cap &&
	       a->ring_size == b->ring_size && a->size == b->size;
}

/* [off, off+len) lies inside size; widened so no sum wraps. */
static int inside(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* [a, a+al) and [b, b+bl) do not overlap. */
static int apart(uint64_t a, uint64_t al, uint64_t b, uint64_t bl)
{
	return a + al <= b || b + bl <= a;
}

int cuflag_region_layout_check(const struct cuflag_region_layout *l, uint64_t mapped_size,
			       uint32_t page_size, const char **reason)
{
	uint64_t qlen = (uint64_t)l->queue_cap * sizeof(struct cuflag_arm);
	/* The tail and the arm time after it (CUFLAG_REGION_ARM_TIME_OFF). */
	uint64_t tlen = CUFLAG_REGION_ARM_TIME_OFF + sizeof(uint64_t);
	uint64_t flen = (uint64_t)l->nslots * sizeof(uint32_t);
	uint64_t slen = (uint64_t)l->nslots * sizeof(struct cuflag_slot_state);
	uint64_t glen = (uint64_t)l->ngroups * l->ring_size;

	if (l->size != mapped_size)
		FAIL(-EINVAL, "region size differs from the memory behind it");
	if (!is_pow2(page_size) || l->size % page_size)
		FAIL(-EINVAL, "region size not a multiple of the page size");
	if (!l->nslots || !is_pow2(l->queue_cap))
		FAIL(-EINVAL, "region with no slots or a queue not a power of two");
	if (l->ngroups && (!is_pow2(l->ring_cap) || l->ring_size % CUFLAG_CACHELINE ||
			   l->ring_size < sizeof(struct cuflag_group_ring) +
						  (uint64_t)l->ring_cap * 4u))
		FAIL(-EINVAL, "group rings not a power of two or not their size");
	if (l->head_off % CUFLAG_CACHELINE || l->tail_off % CUFLAG_CACHELINE ||
	    l->queue_off % sizeof(struct cuflag_arm) || l->state_off % CUFLAG_CACHELINE ||
	    (l->ngroups && l->groups_off % CUFLAG_CACHELINE) ||
	    l->flags_off % page_size)
		FAIL(-EINVAL, "region part misaligned");
	if (!inside(l->head_off, 4, l->size) || !inside(l->tail_off, tlen, l->size) ||
	    !inside(l->queue_off, qlen, l->size) || !inside(l->flags_off, flen, l->size) ||
	    !inside(l->state_off, slen, l->size) || !inside(l->groups_off, glen, l->size))
		FAIL(-EINVAL, "region part outside the region");
	if (l->head_off < sizeof(struct cuflag_region_hdr) ||
	    l->tail_off < sizeof(struct cuflag_region_hdr) ||
	    l->queue_off < sizeof(struct cuflag_region_hdr) ||
	    l->state_off < sizeof(struct cuflag_region_hdr) ||
	    (l->ngroups && l->groups_off < sizeof(struct cuflag_region_hdr)) ||
	    l->flags_off < sizeof(struct cuflag_region_hdr))
		FAIL(-EINVAL, "region part over the header");
	if (!apart(l->head_off, CUFLAG_CACHELINE, l->tail_off, CUFLAG_CACHELINE) ||
	    !apart(l->head_off, 4, l->queue_off, qlen) || !apart(l->tail_off, tlen, l->queue_off, qlen) ||
	    !apart(l->queue_off, qlen, l->flags_off, flen) ||
	    !apart(l->head_off, 4, l->flags_off, flen) || !apart(l->tail_off, tlen, l->flags_off, flen) ||
	    !apart(l->state_off, slen, l->flags_off, flen) ||
	    !apart(l->state_off, slen, l->queue_off, qlen) ||
	    !apart(l->state_off, slen, l->head_off, 4) || !apart(l->state_off, slen, l->tail_off, tlen) ||
	    !apart(l->groups_off, glen, l->flags_off, flen) ||
	    !apart(l->groups_off, glen, l->queue_off, qlen) ||
	    !apart(l->groups_off, glen, l->state_off, slen) ||
	    !apart(l->groups_off, glen, l->head_off, 4) || !apart(l->groups_off, glen, l->tail_off, tlen))
		FAIL(-EINVAL, "region parts overlap");
	return 0;
}
