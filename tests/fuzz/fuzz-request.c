/* SPDX-License-Identifier: MIT */
/*
 * cuflag_request_check() and cuflag_reply_check() over arbitrary bytes.
 * Input: the message, then one byte: the number of fds that "arrived" (for
 * replies, its low bits also pick the request type expected). A refusal is a
 * pass; a message either check accepts is checked again here, independently,
 * against the protocol header.
 */
#include <errno.h>
#include <string.h>

#include "cuflag-proto.h"
#include "fuzz.h"
#include "proto.h"

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* What a request the check accepted must look like. */
static void accepted_request(const uint8_t *m, size_t len, unsigned nfds)
{
	struct cuflag_msg_hdr h;
	size_t blen;

	CHECK(len >= sizeof(h) && len <= CUFLAG_MSG_MAX);
	memcpy(&h, m, sizeof(h));
	blen = len - sizeof(h);
	CHECK(h.len == len && h.nfds == nfds && h.status == 0);
	switch (h.type) {
	case CUFLAG_MSG_HELLO:
		CHECK(blen == sizeof(struct cuflag_msg_hello) && nfds == 0);
		CHECK(rd32(m + 16) <= rd32(m + 20)); /* version_min <= version_max */
		CHECK(rd32(m + 24) == 0 && rd32(m + 28) == 0);
		break;
	case CUFLAG_MSG_ALLOC:
		CHECK(blen == sizeof(struct cuflag_msg_alloc) && nfds == 0);
		CHECK(rd32(m + 16) >= 1 && rd32(m + 16) <= CUFLAG_BATCH_MAX);
		/* The second word is a group: the daemon checks it is one made. */
		break;
	case CUFLAG_MSG_FREE: {
		CHECK(blen >= 8 && nfds == 0);
		uint32_t count = rd32(m + 16);
		CHECK(count >= 1 && count <= CUFLAG_BATCH_MAX && rd32(m + 20) == 0);
		/* The daemon copies count ids from the body: they must all be there. */
		CHECK(blen == cuflag_id_batch_len(count));
		break;
	}
	case CUFLAG_MSG_BIND:
		CHECK(blen == sizeof(struct cuflag_msg_bind) && nfds == 1);
		CHECK(rd32(m + 20) == 0);
		break;
	case CUFLAG_MSG_STATS:
	case CUFLAG_MSG_CLIENTS:
	case CUFLAG_MSG_STUCK:
		CHECK(blen == 0 && nfds == 0);
		break;
	case CUFLAG_MSG_METRICS:
		CHECK(blen == sizeof(struct cuflag_msg_metrics) && nfds == 0);
		CHECK((rd32(m + 20) & ~CUFLAG_METRICS_WANT_ALL) == 0); /* want: known bits only */
		break;
	case CUFLAG_MSG_ATTACH:
		CHECK(blen == sizeof(struct cuflag_msg_attach) && nfds == 2);
		CHECK(rd32(m + 16) == 0);
		break;
	case CUFLAG_MSG_ADOPT: {
		uint32_t count = rd32(m + 16);
		CHECK(count >= 1 && count <= CUFLAG_BATCH_MAX);
		CHECK(blen == cuflag_id_batch_len(count));
		CHECK(nfds == (rd32(m + 20) ? 0 : count)); /* a group's slots bring none */
		break;
	}
	case CUFLAG_MSG_GROUP:
	case CUFLAG_MSG_UNGROUP:
		CHECK(blen == sizeof(struct cuflag_msg_group) && rd32(m + 20) == 0);
		CHECK(nfds == (h.type == CUFLAG_MSG_GROUP ? 1u : 0u));
		break;
	case CUFLAG_MSG_EXPORT:
		CHECK(blen == sizeof(struct cuflag_msg_export));
		CHECK((rd32(m + 20) & ~(CUFLAG_EXPORT_REDECLARE | CUFLAG_EXPORT_DECLARE)) == 0);
		CHECK(rd32(m + 20) != (CUFLAG_EXPORT_REDECLARE | CUFLAG_EXPORT_DECLARE));
		/* A (re)declare hands the handle over. */
		CHECK(nfds == (rd32(m + 20) ? 1u : 0u));
		break;
	case CUFLAG_MSG_IMPORT: {
		uint32_t group = rd32(m + 16), flags = rd32(m + 20);
		CHECK(blen == sizeof(struct cuflag_msg_import) && rd32(m + 28) == 0);
		CHECK((flags & ~CUFLAG_IMPORT_RESUME) == 0 && (flags || rd32(m + 24) == 0));
		CHECK(nfds == (flags && !group ? 2u : 1u)); /* resuming: its eventfd too */
		break;
	}
	default:
		CHECK(!"accepted an unknown request type");
	}
}

static void accepted_reply(const uint8_t *m, size_t len, unsigned nfds, uint16_t type,
			   uint32_t id)
{
	struct cuflag_msg_hdr h;
	size_t blen;

	CHECK(len >= sizeof(h) && len <= CUFLAG_MSG_MAX);
	memcpy(&h, m, sizeof(h));
	blen = len - sizeof(h);
	CHECK(h.len == len && h.nfds == nfds);
	CHECK(h.type == (type | CUFLAG_MSG_REPLY) && h.req_id == id && h.status <= 0);
	if (h.status < 0) {
		CHECK(nfds == 0 && blen <= CUFLAG_REASON_MAX);
		return;
	}
	if (type == CUFLAG_MSG_ALLOC) {
		/* The library copies count grants and takes count fds (none
		 * for a group's slots). */
		uint32_t count = rd32(m + 16);
		CHECK(count >= 1 && count <= CUFLAG_BATCH_MAX && (nfds == count || !nfds));
		CHECK(blen == cuflag_alloc_reply_len(count));
	} else if (type == CUFLAG_MSG_HELLO) {
		CHECK(blen == sizeof(struct cuflag_msg_hello_reply) && nfds == 1);
	} else if (type == CUFLAG_MSG_ATTACH) {
		CHECK(blen == 0 && nfds <= 1); /* cuda-ipc: the flags allocation */
	} else if (type == CUFLAG_MSG_METRICS) {
		/* cuflagctl reads a record of the size its kind says. */
		uint32_t kind = rd32(m + 16);
		CHECK(nfds == 0 && kind < CUFLAG_METRICS_KIND_END);
		CHECK(blen == (kind == CUFLAG_METRICS_END      ? sizeof(struct cuflag_metrics_end)
			       : kind == CUFLAG_METRICS_DAEMON ? sizeof(struct cuflag_metrics_daemon)
			       : kind == CUFLAG_METRICS_USER   ? sizeof(struct cuflag_metrics_user)
							       : sizeof(struct cuflag_metrics_client)));
	} else if (type == CUFLAG_MSG_IMPORT) {
		CHECK(blen == sizeof(struct cuflag_slot_grant) && nfds <= 1);
	} else if (type == CUFLAG_MSG_EXPORT) {
		CHECK(blen == 0 && nfds <= 1);
	} else if (type == CUFLAG_MSG_STUCK) {
		CHECK(blen == sizeof(struct cuflag_msg_stuck_slot) && nfds == 0);
	} else {
		CHECK(nfds == 0);
	}
}

static void refused(int rc, const char *reason)
{
	CHECK(rc == -EPROTO || rc == -EBADMSG || rc == -EINVAL);
	CHECK(reason != NULL && reason[0] != 0 && strlen(reason) < CUFLAG_REASON_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *reason = NULL;
	unsigned nfds;
	uint8_t *m;
	size_t len;
	int rc;

	if (size < 1)
		return 0;
	nfds = data[size - 1];
	len = size - 1;
	/* An exact copy: reading one byte past the message is an error ASan sees. */
	m = malloc(len ? len : 1);
	CHECK(m != NULL);
	memcpy(m, data, len);

	rc = cuflag_request_check(m, len, nfds, &reason);
	if (rc)
		refused(rc, reason);
	else
		accepted_request(m, len, nfds);

	/* The same bytes as a reply to a request of type (nfds & 15), id from the header. */
	uint16_t type = (uint16_t)(nfds & 15);
	uint32_t id = len >= 12 ? rd32(m + 8) : 0;
	unsigned rnfds = nfds >> 4;
	reason = NULL;
	rc = cuflag_reply_check(m, len, rnfds, type, id, &reason);
	if (rc)
		refused(rc, reason);
	else
		accepted_reply(m, len, rnfds, type, id);
	free(m);
	return 0;
}
