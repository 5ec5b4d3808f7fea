/* SPDX-License-Identifier: MIT */
/* The intrusive lists of list.h: order kept, ends kept, and an unlink of an
 * item that is not where its links say fails its assertion. */
#undef NDEBUG
#include <check.h>
#include <signal.h>
#include <stdlib.h>

#include "list.h"
#include "unit-run.h"

struct item {
	int v;
	LIST_FIELDS(struct item, l);
};

struct ends {
	struct item *first, *last;
};

/* The values of the list in order, as digits, and checked backwards too. */
static int values(const struct ends *e)
{
	int n = 0, back = 0, mul = 1;

	for (const struct item *i = e->first; i; i = i->l_next) {
		n = n * 10 + i->v;
		ck_assert(i->l_next ? i->l_next->l_prev == i : e->last == i);
	}
	for (const struct item *i = e->last; i; i = i->l_prev, mul *= 10)
		back += i->v * mul;
	ck_assert_int_eq(n, back);
	return n;
}

START_TEST(test_order)
{
	struct item it[4] = { { .v = 1 }, { .v = 2 }, { .v = 3 }, { .v = 4 } };
	struct ends e = { 0 };

	ck_assert(!LIST_LINKED(l, e.first, &it[0]));
	LIST_APPEND(l, e.first, e.last, &it[1]);
	LIST_APPEND(l, e.first, e.last, &it[2]);
	ck_assert_int_eq(values(&e), 23);
	ck_assert(LIST_LINKED(l, e.first, &it[1]) && LIST_LINKED(l, e.first, &it[2]));
	LIST_REMOVE_LAST(l, e.first, e.last, &it[2]);
	ck_assert_int_eq(values(&e), 2);
	ck_assert(!LIST_LINKED(l, e.first, &it[2]) && !it[2].l_prev && !it[2].l_next);
	LIST_APPEND(l, e.first, e.last, &it[3]);
	LIST_APPEND(l, e.first, e.last, &it[2]);
	ck_assert_int_eq(values(&e), 243);
	LIST_REMOVE_LAST(l, e.first, e.last, &it[3]); /* the middle one */
	ck_assert_int_eq(values(&e), 23);
	LIST_REMOVE_LAST(l, e.first, e.last, &it[1]); /* the first */
	LIST_REMOVE_LAST(l, e.first, e.last, &it[2]); /* the only one */
	ck_assert(!e.first && !e.last);
}
END_TEST

START_TEST(test_prepend)
{
	struct item it[3] = { { .v = 1 }, { .v = 2 }, { .v = 3 } };
	struct item *first = NULL;

	for (int k = 0; k < 3; k++)
		LIST_PREPEND(l, first, &it[k]);
	ck_assert(first == &it[2] && it[2].l_next == &it[1] && it[1].l_next == &it[0]);
	LIST_REMOVE(l, first, &it[1]);
	ck_assert(first == &it[2] && it[2].l_next == &it[0] && it[0].l_prev == &it[2]);
	LIST_REMOVE(l, first, &it[2]);
	LIST_REMOVE(l, first, &it[0]);
	ck_assert(!first);
}
END_TEST

/* An item taken out twice, or out of a list it is not on: abort, with the
 * list left as it was up to there. */
START_TEST(test_unlinked_twice)
{
	struct item a = { .v = 1 }, b = { .v = 2 };
	struct item *first = NULL;

	LIST_PREPEND(l, first, &a);
	LIST_PREPEND(l, first, &b);
	LIST_REMOVE(l, first, &a);
	LIST_REMOVE(l, first, &a);
}
END_TEST

START_TEST(test_wrong_list)
{
	struct item a = { .v = 1 }, b = { .v = 2 };
	struct item *one = NULL, *other = NULL;

	LIST_PREPEND(l, one, &a);
	LIST_PREPEND(l, other, &b);
	LIST_REMOVE(l, one, &b);
}
END_TEST

START_TEST(test_linked_twice)
{
	struct item a = { .v = 1 };
	struct ends e = { 0 };

	LIST_APPEND(l, e.first, e.last, &a);
	LIST_APPEND(l, e.first, e.last, &a);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_order);
	tcase_add_test(tc, test_prepend);
	tcase_add_test_raise_signal(tc, test_unlinked_twice, SIGABRT);
	tcase_add_test_raise_signal(tc, test_wrong_list, SIGABRT);
	tcase_add_test_raise_signal(tc, test_linked_twice, SIGABRT);
	return unit_run_case("list", tc);
}
