/* SPDX-License-Identifier: MIT */
#include "group-name.h"

#include <grp.h>
#include <stdio.h>
#include <string.h>

const char *cuflag_group_name(gid_t gid, char *buf, size_t len, int *named)
{
	char store[1024];
	struct group g, *found = NULL;

	if (getgrgid_r(gid, &g, store, sizeof(store), &found) == 0 && found &&
	    strlen(found->gr_name) < len) {
		snprintf(buf, len, "%s", found->gr_name);
		if (named)
			*named = 1;
		return buf;
	}
	snprintf(buf, len, "%u", (unsigned)gid);
	if (named)
		*named = 0;
	return buf;
}
