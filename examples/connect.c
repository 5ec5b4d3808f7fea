/* SPDX-License-Identifier: MIT */
#include "connect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int example_connect(const char *prog, const char *path, cuflag_client **out)
{
	int rc = cuflag_connect(path, out);
	const char *hint;

	if (!rc)
		return 0;
	/* The path the library tried, chosen as it chooses. */
	if (!path)
		path = getenv(CUFLAG_SOCKET_ENV);
	if (!path || !*path)
		path = CUFLAG_DEFAULT_SOCKET;
	hint = cuflag_connect_hint(rc); /* e.g. join the socket's group */
	fprintf(stderr, "%s: cannot connect to cuflagd at %s: %s%s%s\n", prog, path,
		strerror(-rc), hint ? ": " : "", hint ? hint : "");
	return rc;
}
