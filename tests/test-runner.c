/* SPDX-License-Identifier: MIT */
#include "test-runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The bounds of the section TEST() fills, from the linker; weak, so that a
 * program without tests links too. */
extern const struct test __start_cuflag_tests[] __attribute__((weak));
extern const struct test __stop_cuflag_tests[] __attribute__((weak));

static int by_line(const void *a, const void *b)
{
	const struct test *x = *(const struct test *const *)a, *y = *(const struct test *const *)b;

	return (x->line > y->line) - (x->line < y->line);
}

struct fd_counts {
	const struct test_env *env;
	int self, daemon;
};

static struct fd_counts fd_counts(const struct test_env *env)
{
	return (struct fd_counts){ env, self_fd_count(),
				   env->daemon ? daemon_fd_count(env->daemon) : 0 };
}

/*
 * The counts once they have held still for 100 ms (at most 5 s): a daemon
 * may still be closing what a client that just came or went left it.
 */
static struct fd_counts steady_counts(const struct test_env *env)
{
	struct fd_counts c = fd_counts(env), n;

	for (int same = 0, turns = 0; same < 10 && turns < 500; turns++) {
		usleep(10000);
		if (env->settle)
			env->settle();
		n = fd_counts(env);
		same = n.self == c.self && n.daemon == c.daemon ? same + 1 : 0;
		c = n;
	}
	return c;
}

static int fds_back(void *arg)
{
	struct fd_counts *before = arg;
	struct fd_counts now;

	if (before->env->settle)
		before->env->settle();
	now = fd_counts(before->env);
	/* Fewer than the baseline: it was counted while the daemon still
	 * held something of an earlier start (a connection being closed);
	 * the lower count is the baseline from now on. */
	if (now.daemon < before->daemon)
		before->daemon = now.daemon;
	return now.self == before->self && now.daemon == before->daemon;
}

/* Run t; then every fd must come back to the counts before the tests. */
static void run_one(const struct test *t, struct fd_counts *base)
{
	struct fd_counts after;

	printf("-- %s\n", t->name);
	fflush(stdout);
	t->run();
	if (!wait_until(fds_back, (void *)base, 5000)) {
		after = fd_counts(base->env);
		CHECK_FAIL("%s: fds not back: this process %d (%d before), daemon %d (%d before)",
			   t->name, after.self, base->self, after.daemon, base->daemon);
	}
	printf("-- %s: ok\n", t->name);
	fflush(stdout);
}

static int wanted(const struct test *t, int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], t->name))
			return 1;
	return argc < 2;
}

int test_run(const struct test_env *env, int argc, char **argv)
{
	size_t n = (size_t)(__stop_cuflag_tests - __start_cuflag_tests), found = 0;
	const struct test **list = calloc(n ? n : 1, sizeof(*list));
	struct fd_counts base;

	CHECK(list != NULL);
	for (size_t i = 0; i < n; i++)
		list[i] = &__start_cuflag_tests[i];
	qsort(list, n, sizeof(*list), by_line);
	for (size_t i = 0; i < n; i++)
		found += (size_t)wanted(list[i], argc, argv);
	if (found < (size_t)(argc > 1 ? argc - 1 : 0)) {
		fprintf(stderr, "%s: no such test among:", argv[0]);
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, " %s", list[i]->name);
		fputc('\n', stderr);
		free(list);
		return 2;
	}
	base = steady_counts(env);
	for (size_t i = 0; i < n; i++)
		if (wanted(list[i], argc, argv))
			run_one(list[i], &base);
	free(list);
	return 0;
}
