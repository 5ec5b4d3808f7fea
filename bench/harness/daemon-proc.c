/* SPDX-License-Identifier: MIT */
#include "daemon-proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call.h"
#include "cuflag-proto.h"
#include "fd-util.h"
#include "spawn.h"
#include "unix-socket.h"

/* A daemon that ignores SIGTERM after it missed its start is killed after
 * this: the caller is about to report the failure, not to wait for it. */
#define STOP_UNREADY_MS 5000

int daemon_proc_dir(struct daemon_proc *d, const char *prefix)
{
	*d = (struct daemon_proc){ .log_fd = -1 };
	snprintf(d->dir, sizeof(d->dir), "/tmp/%s-XXXXXX", prefix);
	if (!mkdtemp(d->dir)) {
		d->dir[0] = 0;
		return -errno;
	}
	snprintf(d->sock, sizeof(d->sock), "%s/cuflagd.sock", d->dir);
	return 0;
}

int daemon_proc_start(struct daemon_proc *d, const char *bin, const char *const *args,
		      int capture_log, int *wstatus)
{
	const char *argv[64];
	int n = 0, rc, pfd[2] = { -1, -1 };

	if (!bin)
		bin = getenv("CUFLAGD");
	argv[n++] = bin ? bin : "cuflagd";
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	for (int i = 0; args && args[i]; i++) {
		if (n == 63)
			return -E2BIG;
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	d->log_fd = -1;
	if (capture_log && pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	rc = cuflag_daemon_spawn(argv, d->sock, pfd[1], DAEMON_PROC_READY_MS, &d->pid, wstatus);
	safe_close(pfd[1]);
	if (capture_log) {
		/* Read as it comes (a log thread, a check between steps): never block. */
		fcntl(pfd[0], F_SETFL, O_NONBLOCK);
		d->log_fd = pfd[0];
	}
	if (rc == -ETIMEDOUT)
		cuflag_daemon_stop(d->pid, STOP_UNREADY_MS);
	if (rc)
		d->pid = 0;
	return rc;
}

int daemon_proc_stop(struct daemon_proc *d, int kill_after_ms)
{
	/* Never kill(0, ...): that would be our whole process group. */
	if (d->pid <= 0)
		return -ESRCH;
	return cuflag_daemon_stop(d->pid, kill_after_ms);
}

void daemon_proc_remove(struct daemon_proc *d)
{
	d->log_fd = safe_close(d->log_fd);
	if (!d->dir[0])
		return;
	unlink(d->sock);
	rmdir(d->dir);
	d->dir[0] = 0;
}

int daemon_proc_stats(const struct daemon_proc *d, struct cuflag_msg_stats_reply *out)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_call call = { .type = CUFLAG_MSG_STATS, .id = 1, .reply = buf };
	int fd = cuflag_unix_connect(d->sock, CUFLAG_REPLY_TIMEOUT_S), rc;

	if (fd < 0)
		return fd;
	rc = cuflag_call(fd, &call);
	if (!rc)
		memcpy(out, cuflag_call_body(&call), sizeof(*out));
	safe_close(fd);
	return rc;
}
