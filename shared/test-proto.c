/* SPDX-License-Identifier: MIT */
/* Wire protocol checks, fd passing, and region layout validation. */
#undef NDEBUG
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "fdpass.h"
#include "proto.h"
#include "unix-socket.h"
#include "unit-run.h"

static size_t build(uint8_t *buf, uint16_t type, const void *body, uint32_t blen, uint16_t nfds)
{
	struct cuflag_msg_hdr h;
	cuflag_hdr_init(&h, type, (uint32_t)sizeof(h) + blen, 7, 0, nfds);
	memcpy(buf, &h, sizeof(h));
	if (blen)
		memcpy(buf + sizeof(h), body, blen);
	return sizeof(h) + blen;
}

static int check_req(const uint8_t *buf, size_t len, unsigned nfds)
{
	const char *why = NULL;
	int rc = cuflag_request_check(buf, len, nfds, &why);
	if (rc)
		ck_assert_ptr_nonnull(why);
	return rc;
}

START_TEST(test_good_requests)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hello hello = { .version_min = 1, .version_max = 1 };
	struct cuflag_msg_alloc alloc = { .count = 3 };
	uint32_t freeb[4] = { 2, 0, 5, 6 };
	struct cuflag_msg_bind bind = { .id = 1 };

	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_HELLO, &hello, sizeof(hello), 0), 0), 0);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_ALLOC, &alloc, sizeof(alloc), 0), 0), 0);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_FREE, freeb, 16, 0), 0), 0);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_BIND, &bind, sizeof(bind), 1), 1), 0);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_STATS, NULL, 0, 0), 0), 0);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_CLIENTS, NULL, 0, 0), 0), 0);
}
END_TEST

START_TEST(test_bad_type)
{
	uint8_t buf[64];
	ck_assert_int_eq(check_req(buf, build(buf, 0, NULL, 0, 0), 0), -EPROTO);
	ck_assert_int_eq(check_req(buf, build(buf, 999, NULL, 0, 0), 0), -EPROTO);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_STATS | CUFLAG_MSG_REPLY, NULL, 0, 0), 0),
			 -EPROTO);
}
END_TEST

START_TEST(test_bad_length)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hello hello = { .version_min = 1, .version_max = 1 };
	struct cuflag_msg_alloc alloc = { .count = 1 };
	uint32_t freeb[4] = { 3, 0, 5, 6 }; /* says 3 ids, carries 2 */
	size_t n;

	/* Shorter than a header. */
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(check_req(buf, 3, 0), -EBADMSG);
	/* Header length disagrees with what arrived. */
	n = build(buf, CUFLAG_MSG_HELLO, &hello, sizeof(hello), 0);
	ck_assert_int_eq(check_req(buf, n - 1, 0), -EBADMSG);
	/* Body of the wrong size for the type. */
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_HELLO, &hello, 8, 0), 0), -EBADMSG);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_ALLOC, &alloc, 4, 0), 0), -EBADMSG);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_FREE, freeb, 16, 0), 0), -EBADMSG);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_STATS, &alloc, 8, 0), 0), -EBADMSG);
	/* A FREE count whose byte size would wrap 32 bits. */
	freeb[0] = 0x40000002u;
	ck_assert_int_ne(check_req(buf, build(buf, CUFLAG_MSG_FREE, freeb, 16, 0), 0), 0);
}
END_TEST

START_TEST(test_bad_fds)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_alloc alloc = { .count = 1 };
	struct cuflag_msg_bind bind = { .id = 1 };

	/* Header says one fd, none arrived (or the reverse). */
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_BIND, &bind, sizeof(bind), 1), 0),
			 -EBADMSG);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_ALLOC, &alloc, sizeof(alloc), 0), 1),
			 -EBADMSG);
	/* Fds where the type takes none, and BIND with two. */
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_ALLOC, &alloc, sizeof(alloc), 1), 1),
			 -EBADMSG);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_BIND, &bind, sizeof(bind), 2), 2),
			 -EBADMSG);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_BIND, &bind, sizeof(bind), 0), 0),
			 -EBADMSG);
}
END_TEST

START_TEST(test_bad_fields)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hello hello = { .version_min = 2, .version_max = 1 };
	struct cuflag_msg_alloc alloc = { .count = 0 };
	struct cuflag_msg_hdr h;

	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_HELLO, &hello, sizeof(hello), 0), 0), -EINVAL);
	hello = (struct cuflag_msg_hello){ .version_min = 1, .version_max = 1, .reserved = 1 };
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_HELLO, &hello, sizeof(hello), 0), 0), -EINVAL);
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_ALLOC, &alloc, sizeof(alloc), 0), 0), -EINVAL);
	alloc.count = CUFLAG_BATCH_MAX + 1;
	ck_assert_int_eq(check_req(buf, build(buf, CUFLAG_MSG_ALLOC, &alloc, sizeof(alloc), 0), 0), -EINVAL);
	/* A request must not carry a status. */
	build(buf, CUFLAG_MSG_STATS, NULL, 0, 0);
	memcpy(&h, buf, sizeof(h));
	h.status = -1;
	memcpy(buf, &h, sizeof(h));
	ck_assert_int_eq(check_req(buf, sizeof(h), 0), -EINVAL);
}
END_TEST

START_TEST(test_reply_checks)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	const char *why;
	struct cuflag_msg_hdr h;
	uint32_t ar[2 + 2 * 2] = { 2, 0, 1, 0, 2, 0 };

	cuflag_hdr_init(&h, CUFLAG_MSG_ALLOC | CUFLAG_MSG_REPLY, sizeof(h) + sizeof(ar), 9, 0, 2);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), ar, sizeof(ar));
	ck_assert_int_eq(cuflag_reply_check(buf, sizeof(h) + sizeof(ar), 2, CUFLAG_MSG_ALLOC, 9, &why), 0);
	/* Count and fds disagree. */
	h.nfds = 1;
	memcpy(buf, &h, sizeof(h));
	ck_assert_int_eq(cuflag_reply_check(buf, sizeof(h) + sizeof(ar), 1, CUFLAG_MSG_ALLOC, 9, &why),
			 -EBADMSG);
	/* Reply to another request id. */
	h.nfds = 2;
	memcpy(buf, &h, sizeof(h));
	ck_assert_int_eq(cuflag_reply_check(buf, sizeof(h) + sizeof(ar), 2, CUFLAG_MSG_ALLOC, 10, &why),
			 -EPROTO);
}
END_TEST

/* ---- fd passing ---- */

static int count_open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

START_TEST(test_fdpass_roundtrip)
{
	int sp[2], fds[3], got[4];
	unsigned n = 0;
	char buf[16];

	ck_assert_int_eq(cuflag_unix_pair(sp), 0);
	for (int i = 0; i < 3; i++)
		fds[i] = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_eq(cuflag_send_msg(sp[0], "hello", 5, fds, 3, 0), 0);
	ck_assert_int_eq(cuflag_recv_msg(sp[1], buf, sizeof(buf), got, 4, &n, 0), 5);
	ck_assert_uint_eq(n, 3);
	for (unsigned i = 0; i < n; i++) {
		ck_assert_int_ge(got[i], 0);
		ck_assert_int_eq(fcntl(got[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	}
	cuflag_close_fds(got, n);
	cuflag_close_fds(fds, 3);
	close(sp[0]);
	close(sp[1]);
}
END_TEST

START_TEST(test_fdpass_too_many_fds)
{
	int sp[2], fds[8], got[2];
	unsigned n = 99;
	char buf[16];
	int before;

	ck_assert_int_eq(cuflag_unix_pair(sp), 0);
	for (int i = 0; i < 8; i++)
		fds[i] = eventfd(0, EFD_CLOEXEC);
	before = count_open_fds();
	ck_assert_int_eq(cuflag_send_msg(sp[0], "x", 1, fds, 8, 0), 0);
	/* Room for 2: the rest is truncated control data, and nothing leaks. */
	ck_assert_int_eq(cuflag_recv_msg(sp[1], buf, sizeof(buf), got, 2, &n, 0), -EBADMSG);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(count_open_fds(), before);
	cuflag_close_fds(fds, 8);
	close(sp[0]);
	close(sp[1]);
}
END_TEST

START_TEST(test_fdpass_no_fds_allowed)
{
	int sp[2], fd, got[1];
	unsigned n = 99;
	char buf[16];
	int before;

	ck_assert_int_eq(cuflag_unix_pair(sp), 0);
	fd = eventfd(0, EFD_CLOEXEC);
	before = count_open_fds();
	ck_assert_int_eq(cuflag_send_msg(sp[0], "x", 1, &fd, 1, 0), 0);
	ck_assert_int_eq(cuflag_recv_msg(sp[1], buf, sizeof(buf), got, 0, &n, 0), -EBADMSG);
	ck_assert_int_eq(count_open_fds(), before);
	close(fd);
	close(sp[0]);
	close(sp[1]);
}
END_TEST

START_TEST(test_fdpass_truncated_message)
{
	int sp[2], got[1];
	unsigned n;
	char big[256] = { 0 }, buf[16];

	ck_assert_int_eq(cuflag_unix_pair(sp), 0);
	ck_assert_int_eq(cuflag_send_msg(sp[0], big, sizeof(big), NULL, 0, 0), 0);
	ck_assert_int_eq(cuflag_recv_msg(sp[1], buf, sizeof(buf), got, 1, &n, 0), -EMSGSIZE);
	close(sp[0]);
	close(sp[1]);
}
END_TEST

/* ---- region layout ---- */

START_TEST(test_layout_make_and_check)
{
	struct cuflag_region_layout l;
	const char *why;

	ck_assert_int_eq(cuflag_region_layout_make(&l, 1024, 1024, 8, 1024, 4096), 0);
	ck_assert_uint_eq(l.flags_off % 4096, 0);
	ck_assert_uint_ge(l.flags_off, l.queue_off + 1024 * 8);
	ck_assert_uint_eq(l.size % 4096, 0);
	ck_assert_uint_ge(l.size, (uint64_t)l.flags_off + 4096);
	ck_assert_int_eq(cuflag_region_layout_check(&l, l.size, 4096, &why), 0);
	ck_assert_int_eq(cuflag_region_layout_make(&l, 1, 3, 8, 1024, 4096), -EINVAL);
	ck_assert_int_eq(cuflag_region_layout_make(&l, 0, 4, 8, 1024, 4096), -EINVAL);
}
END_TEST

START_TEST(test_layout_rejects)
{
	struct cuflag_region_layout good, l;
	const char *why;

	ck_assert_int_eq(cuflag_region_layout_make(&good, 100, 64, 2, 16, 4096), 0);
	/* Size differs from the memory behind it. */
	ck_assert_int_eq(cuflag_region_layout_check(&good, good.size - 4096, 4096, &why), -EINVAL);
	/* Flags past the end. */
	l = good;
	l.nslots = 5000;
	ck_assert_int_eq(cuflag_region_layout_check(&l, l.size, 4096, &why), -EINVAL);
	/* Flags not page-aligned. */
	l = good;
	l.flags_off += 4;
	ck_assert_int_eq(cuflag_region_layout_check(&l, l.size, 4096, &why), -EINVAL);
	/* Queue overlapping the flags. */
	l = good;
	l.queue_cap = 1024;
	ck_assert_int_eq(cuflag_region_layout_check(&l, l.size, 4096, &why), -EINVAL);
	/* Queue not a power of two. */
	l = good;
	l.queue_cap = 48;
	ck_assert_int_eq(cuflag_region_layout_check(&l, l.size, 4096, &why), -EINVAL);
	/* Head over the header, tail on the head's line. */
	l = good;
	l.head_off = 0;
	ck_assert_int_eq(cuflag_region_layout_check(&l, l.size, 4096, &why), -EINVAL);
	l = good;
	l.tail_off = l.head_off;
	ck_assert_int_eq(cuflag_region_layout_check(&l, l.size, 4096, &why), -EINVAL);
	/* Offsets that would wrap 32 bits when added. */
	l = good;
	l.flags_off = 0xfffff000u;
	ck_assert_int_eq(cuflag_region_layout_check(&l, l.size, 4096, &why), -EINVAL);
}
END_TEST

/* Which bits of a layout are its fields' (set) rather than padding (clear). */
static void layout_field_bits(struct cuflag_region_layout *mask)
{
	memset(mask, 0xff, sizeof(*mask));
#if defined(__has_builtin) && __has_builtin(__builtin_clear_padding)
	__builtin_clear_padding(mask);
#else
	/* Without the builtin, the padding the compiler has on x86-64 and arm64. */
	memset((uint8_t *)mask + offsetof(struct cuflag_region_layout, ring_size) + 4, 0,
	       offsetof(struct cuflag_region_layout, size) -
		       offsetof(struct cuflag_region_layout, ring_size) - 4);
#endif
}

START_TEST(test_layout_equal_every_field)
{
	struct cuflag_region_layout a, b, mask;
	unsigned bits = 0;

	memset(&a, 0, sizeof(a)); /* padding alike in both copies */
	ck_assert_int_eq(cuflag_region_layout_make(&a, 100, 64, 2, 16, 4096), 0);
	memcpy(&b, &a, sizeof(a));
	ck_assert(cuflag_region_layout_equal(&a, &b));
	/* Every bit of every field, in turn, makes them differ: a field left
	 * out of the comparison fails here, whichever it is. */
	layout_field_bits(&mask);
	for (size_t i = 0; i < sizeof(a); i++) {
		for (unsigned bit = 0; bit < 8; bit++) {
			uint8_t m = (uint8_t)(1u << bit);
			if (!(((uint8_t *)&mask)[i] & m))
				continue;
			memcpy(&b, &a, sizeof(a));
			((uint8_t *)&b)[i] ^= m;
			ck_assert_msg(!cuflag_region_layout_equal(&a, &b),
				      "byte %zu bit %u of the layout is not compared", i, bit);
			bits++;
		}
	}
	ck_assert_uint_gt(bits, 8 * (sizeof(a) - sizeof(uint64_t))); /* padding is less */
}
END_TEST

int main(void)
{
	const TTest *tests[] = {
		test_good_requests,
		test_bad_type,
		test_bad_length,
		test_bad_fds,
		test_bad_fields,
		test_reply_checks,
		test_fdpass_roundtrip,
		test_fdpass_too_many_fds,
		test_fdpass_no_fds_allowed,
		test_fdpass_truncated_message,
		test_layout_make_and_check,
		test_layout_rejects,
		test_layout_equal_every_field,
		NULL,
	};

	return unit_run("proto", tests);
}
