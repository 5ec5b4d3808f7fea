/* SPDX-License-Identifier: MIT */
/*
 * The attack suite: one hostile user against the real daemon while a user
 * of its own completes one slot at a time. Run as `test-attack NAME`; it
 * prints one row of figures per attack (a Markdown table, as in
 * docs/RELIABILITY.md) and fails when a target is missed: the victim's wake
 * p99 <= 5 ms and max <= 100 ms, root's `cuflagctl status` and another
 * user's HELLO answered within 1 s, no watchdog ping missed, the daemon's
 * fds and memory back to where they were, SIGTERM obeyed within 2 s, and
 * the attacker dropped and cooled down where a defence must fire (the daemon
 * configured so that it fires on any machine). Needs root (exit
 * 77 otherwise). ATTACK_VERBOSE=1 prints the attacker's timeline always.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "attacks.h"

static const char *const no_args[] = { NULL };
/* 200 sessions of one user need a per-user limit above them: the defaults
 * (max-clients 256, a quarter of it per user) allow 64. An operator may give
 * that, and the defence must hold all the same. */
static const char *const many_sessions[] = { "--max-clients", "512", "--max-clients-per-uid",
					     "256", NULL };

/* A user's quota of daemon fds raised to what the unit's LimitNOFILE allows
 * one user. */
static const char *const slots_16k[] = { "--max-slots-per-uid", "16384", NULL };

/* The pending attacks count against this limit (the default, said here so
 * that the test does not lean on it). */
/* As where the container runtime refuses userfaultfd. */
static const char *const unguarded[] = { "--region-guard", "off", NULL };

/* Slots armed a while are stuck, so that STUCK and METRICS list them. */
static const char *const stuck_soon[] = { "--stuck-ms", "200", NULL };

static const char *const pending_limit[] = { "--max-pending-per-uid", "16384", NULL };

/* The write budget's drop shown on any machine: what 18 000 epoll watchers
 * cost a write is the machine's, and a fast one may put it little beyond the
 * write allowance, which the default budget then drains as fast as it comes
 * (those writes are bounded by the fair share, as fanout-nobind's are). With
 * the lowest budget the third costly write close to the others drops. */
static const char *const low_budget[] = { "--write-budget-us", "100", NULL };

static const struct {
	const char *name;
	void (*run)(void);
	const char *const *args;
} attacks[] = {
	{ "fanout-bind", attack_fanout_bind, low_budget },
	{ "fanout-nobind", attack_fanout_nobind, no_args },
	{ "fanout-helpers", attack_fanout_helpers, low_budget },
	{ "fanout-group", attack_fanout_group, low_budget },
	{ "fanout-alternate", attack_fanout_alternate, low_budget },
	{ "linger", attack_linger, no_args },
	{ "many-fds", attack_many_fds, no_args },
	{ "flood", attack_flood, no_args },
	{ "cheap-writes", attack_cheap_writes, no_args },
	{ "cheap-writes-users", attack_cheap_writes_users, no_args },
	{ "cheap-writes-16k", attack_cheap_writes_16k, slots_16k },
	{ "blocking", attack_blocking, many_sessions },
	{ "kept-memfds", attack_kept_memfds, no_args },
	{ "region-twice", attack_region_twice, no_args },
	{ "punched-regions", attack_punched_regions, no_args },
	{ "punched-regions-unguarded", attack_punched_regions_unguarded, unguarded },
	{ "fd-mix", attack_fd_mix, no_args },
	{ "four-users", attack_four_users, no_args },
	{ "log-flood", attack_log_flood, no_args },
	{ "arm-flood", attack_arm_flood, pending_limit },
	{ "adopt-flood", attack_adopt_flood, pending_limit },
	{ "adopt-flood-watched", attack_adopt_flood_watched, pending_limit },
	{ "free-rewind", attack_free_rewind, pending_limit },
	{ "stuck-flood", attack_stuck_flood, stuck_soon },
	{ "metrics-flood", attack_metrics_flood, stuck_soon },
	{ "scale-pending", attack_scale_pending, no_args },
	{ "import-fanout", attack_import_fanout, no_args },
	{ "import-watched", attack_import_watched, low_budget },
	{ "handle-memory", attack_handle_memory, no_args },
	{ "cold-churn", attack_cold_churn, no_args },
	{ "request-price", attack_request_price, no_args },
	{ "honest-poll", attack_honest_poll, low_budget },
	{ "resume-phantom", attack_resume_phantom, no_args },
};

void rounds_run(struct rounds *r, int n, int (*round)(void *), void *arg)
{
	atomic_store(&r->pid, (int)getpid());
	for (int i = 0; i < n; i++) {
		int rc = round(arg);
		atomic_fetch_add(&r->rounds, 1);
		if (rc == -EBUSY) {
			atomic_store(&r->busy, 1);
			break;
		}
		if (rc) {
			atomic_store(&r->err, rc);
			break;
		}
	}
	if (!atomic_load(&r->busy) && hello_status() == -EBUSY)
		atomic_store(&r->busy, 1);
}

/* Note the attacker's rounds in w; whether it was dropped (seen by the
 * attacker and counted by the daemon), with how many log lines naming it. */
static int rounds_outcome(struct window *w, struct rounds *r, int *lines)
{
	size_t len = strlen(w->outcome);
	uint64_t dropped = daemon_dropped() - w->dropped0;
	char who[64];

	snprintf(who, sizeof(who), "pid=%d uid=%d", atomic_load(&r->pid), UID_ATTACKER);
	*lines = window_log_count(w, who, "dropped");

	snprintf(w->outcome + len, sizeof(w->outcome) - len,
		 "dropped in %d of %d rounds (STATS +%llu, %d log lines), %s",
		 atomic_load(&r->dropped), atomic_load(&r->rounds), (unsigned long long)dropped,
		 *lines, atomic_load(&r->busy) ? "then HELLO -EBUSY" : "never cooled down");
	if (atomic_load(&r->err))
		fail("%s: the attacker's connect failed: %s", w->name,
		     strerror(-atomic_load(&r->err)));
	return atomic_load(&r->dropped) && dropped;
}

void expect_dropped_and_cooled(struct window *w, struct rounds *r)
{
	int lines;

	if (!rounds_outcome(w, r, &lines))
		fail("%s: the attacker was never dropped", w->name);
	if (!lines)
		fail("%s: no log line names the attacker (pid=%d) and its drop", w->name,
		     atomic_load(&r->pid));
	if (!atomic_load(&r->busy))
		fail("%s: the attacker's user was never refused with -EBUSY (cool-down)", w->name);
}

void note_dropped(struct window *w, struct rounds *r)
{
	int lines;

	if (rounds_outcome(w, r, &lines) && !lines)
		fail("%s: no log line names the attacker (pid=%d) and its drop", w->name,
		     atomic_load(&r->pid));
}

int main(int argc, char **argv)
{
	struct window w;

	if (argc != 2) {
		fprintf(stderr, "usage: test-attack NAME\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++) {
		if (strcmp(argv[1], attacks[i].name))
			continue;
		bench_start(attacks[i].args);
		window_open(&w, "none (baseline, 0.5 s)");
		w.reference = 1;
		usleep(500000);
		window_close(&w);
		attacks[i].run();
		return bench_finish();
	}
	fprintf(stderr, "test-attack: no attack named '%s'\n", argv[1]);
	return 2;
}
