/* SPDX-License-Identifier: MIT */
/* Running a program with given fds as its 0..3, the signal mask and
 * handlers its own: posix_spawn(3), for starting the user's daemon. Built
 * apart from the rest of the library: the tree's shared/spawn.h would
 * shadow the system's <spawn.h>. */
#ifndef CUFLAG_DAEMON_EXEC_H
#define CUFLAG_DAEMON_EXEC_H

#include <sys/types.h>

/* Run exe with argv (NULL-terminated) and the environment envp; fds[i]
 * becomes the child's fd i (each at 4 or above here, close-on-exec). 0
 * with *pid set, or the positive error posix_spawn(3) returned. */
int cuflag__exec_with_fds(const char *exe, const char *const *argv, char *const *envp,
			  const int fds[4], pid_t *pid);

#endif
