/* SPDX-License-Identifier: MIT */
/* A group as people read it: its name, or its number where it has none. */
#ifndef CUFLAG_GROUP_NAME_H
#define CUFLAG_GROUP_NAME_H

#include <stddef.h>
#include <sys/types.h>

/*
 * The name of group gid in buf (len bytes), or its number as text where this
 * host has no name for it (a container's group from the node, say). Returns
 * buf, and 1 in *named when it is a name (named may be NULL).
 */
const char *cuflag_group_name(gid_t gid, char *buf, size_t len, int *named);

#endif
