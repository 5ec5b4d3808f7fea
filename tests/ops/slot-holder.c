/* SPDX-License-Identifier: MIT */
/*
 * A client for tests driven from outside C: slot-holder SOCKET SLOTS ARMED
 * [GROUPED] connects, acquires SLOTS slots, arms ARMED of them (never
 * completed), and GROUPED more in a group, prints "ready PID" and holds
 * everything until its stdin closes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuflag/cuflag.h"

#define HOLDER_MAX 64

int main(int argc, char **argv)
{
	cuflag_slot *s[HOLDER_MAX], *gs[HOLDER_MAX];
	cuflag_group *g = NULL;
	cuflag_client *c;
	unsigned nslots, narmed, ngrouped = 0;
	char buf[64];
	uint32_t t;
	int rc;

	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: slot-holder SOCKET SLOTS ARMED [GROUPED]\n");
		return 2;
	}
	nslots = (unsigned)strtoul(argv[2], NULL, 10);
	narmed = (unsigned)strtoul(argv[3], NULL, 10);
	if (argc == 5)
		ngrouped = (unsigned)strtoul(argv[4], NULL, 10);
	if (nslots < 1 || nslots > HOLDER_MAX || narmed > nslots || ngrouped > HOLDER_MAX) {
		fprintf(stderr, "slot-holder: need 1 <= SLOTS <= %d and ARMED <= SLOTS\n",
			HOLDER_MAX);
		return 2;
	}
	rc = cuflag_connect(argv[1], &c);
	if (rc) {
		const char *hint = cuflag_connect_hint(rc);
		fprintf(stderr, "slot-holder: %s: %s%s%s\n", argv[1], strerror(-rc),
			hint ? ": " : "", hint ? hint : "");
		return 1;
	}
	rc = cuflag_slots_acquire(c, nslots, s);
	for (unsigned i = 0; rc == 0 && i < narmed; i++)
		rc = cuflag_slot_arm(s[i], &t);
	if (rc == 0 && ngrouped && (rc = cuflag_group_create(c, &g)) == 0)
		rc = cuflag_group_slots_acquire(g, ngrouped, gs);
	if (rc) {
		fprintf(stderr, "slot-holder: %s\n", strerror(-rc));
		return 1;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	for (unsigned i = 0; i < nslots; i++)
		cuflag_slot_release(s[i]);
	for (unsigned i = 0; i < ngrouped; i++)
		cuflag_slot_release(gs[i]);
	if (cuflag_group_destroy(g) < 0)
		return 1;
	cuflag_disconnect(c);
	return 0;
}
