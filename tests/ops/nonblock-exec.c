/* SPDX-License-Identifier: MIT */
/*
 * nonblock-exec PROGRAM [ARG...]: make the sockets passed with LISTEN_FDS
 * non-blocking, then run PROGRAM in this process (LISTEN_PID stays right).
 * It stands in for NonBlocking=yes of cuflagd.service when the activator is
 * systemd-socket-activate, which has no such option.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LISTEN_FDS_START 3

int main(int argc, char **argv)
{
	const char *env = getenv("LISTEN_FDS");
	int n = env ? atoi(env) : 0;

	if (argc < 2) {
		fprintf(stderr, "usage: nonblock-exec PROGRAM [ARG...]\n");
		return 2;
	}
	for (int fd = LISTEN_FDS_START; fd < LISTEN_FDS_START + n; fd++) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			perror("nonblock-exec: fcntl");
			return 1;
		}
	}
	execv(argv[1], argv + 1);
	fprintf(stderr, "nonblock-exec: %s: %s\n", argv[1], strerror(errno));
	return 127;
}
