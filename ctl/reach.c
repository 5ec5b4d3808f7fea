/* SPDX-License-Identifier: MIT */
#include "reach.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "call.h"
#include "unix-socket.h"
#include "user-dir.h"

int ctl_reach_choose(struct ctl_reach *r)
{
	const char *node = cuflag_node_socket();
	char dir[108], why[400];
	int fd, rc;

	memset(r, 0, sizeof(*r));
	snprintf(r->path, sizeof(r->path), "%s", node);
	fd = cuflag_unix_connect(node, CUFLAG_REPLY_TIMEOUT_S);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (!cuflag_node_fallback(node, fd, r->why, sizeof(r->why)))
		return 0; /* asking it says what is wrong */
	rc = cuflag_user_dir(dir, sizeof(dir));
	if (!rc)
		rc = cuflag_user_path(r->path, sizeof(r->path), dir, CUFLAG_USER_SOCKET_NAME);
	if (rc) {
		snprintf(r->why + strlen(r->why), sizeof(r->why) - strlen(r->why),
			 ", and the user's directory %s is too long for a socket", dir);
		return rc;
	}
	r->user = 1;
	/* Never a directory planted by someone else: its daemon would answer. */
	rc = cuflag_user_dir_check(dir, 0, why, sizeof(why));
	if (rc && rc != -ENOENT) {
		size_t used = strlen(r->why);
		snprintf(r->why + used, sizeof(r->why) - used, ", and the user's daemon: %s", why);
		return rc;
	}
	return 0;
}
