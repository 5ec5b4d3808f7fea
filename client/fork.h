/* SPDX-License-Identifier: MIT */
/* The forks this process descends from (fork.c): what cuflag__forked() in
 * client-private.h compares a client's generation with. */
#ifndef CUFLAG_CLIENT_FORK_H
#define CUFLAG_CLIENT_FORK_H

/* How many forks this process descends from, since the first connect. */
unsigned cuflag__fork_gen(void);

/* Count forks from now on (once; before the first client is made). */
void cuflag__watch_forks(void);

#endif
