/* SPDX-License-Identifier: MIT */
/* The attacks of test-attack, one function each (see docs/RELIABILITY.md). */
#ifndef CUFLAG_TEST_ATTACKS_H
#define CUFLAG_TEST_ATTACKS_H

#include "attack-util.h"

void attack_fanout_bind(void);
void attack_fanout_nobind(void);
void attack_fanout_helpers(void);
void attack_fanout_group(void);
void attack_fanout_alternate(void);
void attack_linger(void);
void attack_many_fds(void);
void attack_flood(void);
void attack_cheap_writes(void);
void attack_cheap_writes_users(void);
void attack_cheap_writes_16k(void);
void attack_blocking(void);
void attack_kept_memfds(void);
void attack_region_twice(void);
void attack_punched_regions(void);
void attack_punched_regions_unguarded(void);
void attack_fd_mix(void);
void attack_four_users(void);
void attack_log_flood(void);
void attack_arm_flood(void);
void attack_adopt_flood(void);
void attack_adopt_flood_watched(void);
void attack_free_rewind(void);
void attack_stuck_flood(void);
void attack_metrics_flood(void);
void attack_scale_pending(void);
void attack_import_fanout(void);
void attack_import_watched(void);
void attack_handle_memory(void);
void attack_cold_churn(void);
void attack_request_price(void);
void attack_honest_poll(void);
void attack_resume_phantom(void);

/* The attacker's rounds: connect, misbehave until dropped, again, until its
 * user is cooled down (-EBUSY). Shared by the attacks that must end so. */
struct rounds {
	_Atomic int rounds, dropped, busy, err;
	_Atomic int pid; /* the attacker's, as the daemon logs it */
};
/* Up to n rounds of round(arg) (0, or the error of its connect), stopping
 * at -EBUSY; then one more HELLO to see whether the user is cooled down. */
void rounds_run(struct rounds *r, int n, int (*round)(void *), void *arg);
/* Check that the attacker was dropped and then cooled down; note it in w. */
void expect_dropped_and_cooled(struct window *w, struct rounds *r);
/* Note in w whether the attacker was dropped and cooled down, for an attack
 * judged by what the others see (window_close): "dropped, or the victim
 * unharmed". A drop must still be logged, and every connect must work. */
void note_dropped(struct window *w, struct rounds *r);

#endif
