/* SPDX-License-Identifier: MIT */
/* Without libsystemd: no notification, no socket activation. */
#include "base/notify.h"

int notify_listen_fd(void)
{
	return -1;
}

void notify_ready(void)
{
}

void notify_stopping(void)
{
}

void notify_status(const char *fmt, ...)
{
	(void)fmt;
}

uint64_t notify_watchdog_usec(void)
{
	return 0;
}

void notify_watchdog_ping(void)
{
}
