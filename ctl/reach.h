/* SPDX-License-Identifier: MIT */
/*
 * Which daemon cuflagctl asks when no socket is named: the node daemon's,
 * else (none there, or not allowed to use it) the user's own, as the
 * client library chooses (it never starts one: cuflagctl only looks).
 */
#ifndef CUFLAGCTL_REACH_H
#define CUFLAGCTL_REACH_H

#include <stddef.h>

struct ctl_reach {
	char path[108];  /* the socket to ask */
	int user;        /* the user's own daemon's socket (chosen so) */
	char why[512];   /* why this one: "" for the node daemon */
};

/* Choose (the node daemon's socket is connected to once, to see). 0, or
 * with why set -ENAMETOOLONG (the user's directory too long) or what
 * cuflag_user_dir_check() says of a directory that is not the user's. */
int ctl_reach_choose(struct ctl_reach *r);

#endif
