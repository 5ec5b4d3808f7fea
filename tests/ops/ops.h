/* SPDX-License-Identifier: MIT */
/*
 * What the ops tests share: a service-manager stand-in (a datagram socket
 * to give cuflagd as NOTIFY_SOCKET) and a child process started with extra
 * environment whose stderr the test reads.
 */
#ifndef CUFLAG_TEST_OPS_H
#define CUFLAG_TEST_OPS_H

#include <stddef.h>
#include <sys/types.h>

#include "harness.h"

/* Exit status meson reads as "skipped". */
#define EXIT_SKIP 77

struct notify_listener {
	int fd;
	char dir[64];
	char path[108];
	char env[128]; /* "NOTIFY_SOCKET=path", for a child's environment */
};

/* Bind a fresh datagram socket in a private directory. Aborts on failure. */
void notify_listen(struct notify_listener *n);
void notify_close(struct notify_listener *n);

/*
 * Wait up to timeout_ms for a datagram with a line starting with prefix;
 * the whole datagram lands in buf (NUL-terminated). 1 if one came.
 */
int notify_wait_for(struct notify_listener *n, const char *prefix, char *buf, size_t cap,
		    int timeout_ms);

/* Datagrams holding the line `line` that arrive within ms. */
int notify_count(struct notify_listener *n, const char *line, int ms);

struct child {
	pid_t pid;
	int log_fd;      /* read end of its stderr */
	char log[32768]; /* what it wrote so far */
	size_t log_len;
};

/*
 * Start argv[0] with argv, the "NAME=value" entries of env added to its
 * environment, and WATCHDOG_PID set to its own pid when watchdog_pid is
 * set. Its stderr goes to a pipe; it dies with the test. Aborts on failure.
 */
void child_start(struct child *c, const char *const *argv, const char *const *env,
		 int watchdog_pid);

/* Wait up to timeout_ms until the child's stderr contains text; 1 if it did. */
int child_log_wait(struct child *c, const char *text, int timeout_ms);

/* SIGTERM, wait; the exit status, or 128 + the signal that ended it. */
int child_stop(struct child *c);

/* A directory of our own under /tmp, for sockets; aborts on failure. */
void private_dir(char *dir, size_t cap);

#endif
