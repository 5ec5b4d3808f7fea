/* SPDX-License-Identifier: MIT */
#include "base/notify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "base/log.h"

int notify_listen_fd(void)
{
	char **names = NULL;
	int n = sd_listen_fds_with_names(1, &names);
	int fd = -1;

	if (n <= 0)
		return -1;
	for (int i = 0; i < n; i++) {
		int cand = SD_LISTEN_FDS_START + i;
		int ok = sd_is_socket_unix(cand, SOCK_SEQPACKET, 1, NULL, 0) > 0;
		if (fd < 0 && ok && (n == 1 || (names && names[i] && !strcmp(names[i], "cuflagd"))))
			fd = cand;
		else if (fd != cand)
			log_warn("ignoring passed fd %d (%s)", cand,
				 names && names[i] ? names[i] : "?");
	}
	if (names) {
		for (int i = 0; i < n; i++)
			free(names[i]);
		free(names);
	}
	return fd;
}

void notify_ready(void)
{
	sd_notify(0, "READY=1");
}

void notify_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

void notify_status(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "STATUS=");

	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	sd_notify(0, buf);
}

uint64_t notify_watchdog_usec(void)
{
	uint64_t usec = 0;
	return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

void notify_watchdog_ping(void)
{
	sd_notify(0, "WATCHDOG=1");
}
