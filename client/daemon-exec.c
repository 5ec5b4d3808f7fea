/* SPDX-License-Identifier: MIT */
#include "daemon-exec.h"

#include <signal.h>
#include <spawn.h>

int cuflag__exec_with_fds(const char *exe, const char *const *argv, char *const *envp,
			  const int fds[4], pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	int rc;

	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	for (int i = 0; i < 4; i++)
		posix_spawn_file_actions_adddup2(&fa, fds[i], i);
	posix_spawnattr_init(&at);
	/* Not this process's signal mask or handlers: the program's own. */
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawn(pid, exe, &fa, &at, (char *const *)argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return rc;
}
