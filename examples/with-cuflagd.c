/* SPDX-License-Identifier: MIT */
/*
 * Run a program against a private cuflagd: start the daemon on its own
 * socket (the integration harness), run the program with $CUFLAG_SOCKET
 * naming it, stop the daemon. Exit status: the program's, or 1 when the
 * daemon did not stop cleanly.
 *
 * Usage: with-cuflagd PROGRAM [ARGS...]   (the daemon from $CUFLAGD)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "harness.h"

int main(int argc, char **argv)
{
	struct daemon_proc d;
	pid_t pid;
	int st, status, daemon_status;

	if (argc < 2) {
		fprintf(stderr, "usage: with-cuflagd PROGRAM [ARGS...]\n");
		return 2;
	}
	daemon_start(&d, 0, NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setenv(CUFLAG_SOCKET_ENV, d.sock, 1);
		execv(argv[1], argv + 1);
		perror(argv[1]);
		_exit(127);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	daemon_status = daemon_stop(&d);
	if (daemon_status != 0) {
		fprintf(stderr, "with-cuflagd: cuflagd exited with status %d\n", daemon_status);
		return status ? status : 1;
	}
	return status;
}
