/* SPDX-License-Identifier: MIT */
/*
 * cuflagd --socket PATH: created mode 0660; a live daemon's socket is never
 * stolen; a stale socket file (its daemon killed) is replaced; a path that is
 * not a socket is left alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "harness.h"

/* Run cuflagd on sock and return its exit status (it must exit by itself). */
static int run_to_exit(const char *sock)
{
	const char *bin = getenv("CUFLAGD");
	int st;
	pid_t p = fork();

	CHECK(p >= 0);
	if (p == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2);
		execl(bin, bin, "--socket", sock, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 5000; i++) {
		if (waitpid(p, &st, WNOHANG) == p)
			return cuflag_exit_code(st);
		usleep(1000);
	}
	kill(p, SIGKILL);
	waitpid(p, &st, 0);
	return -1; /* still running: it took the socket */
}

int main(void)
{
	struct daemon_proc a, b;
	struct stat st;
	char file[128];
	int fd;

	setvbuf(stdout, NULL, _IONBF, 0);
	daemon_start(&a, 0, NULL);
	CHECK(stat(a.sock, &st) == 0 && S_ISSOCK(st.st_mode));
	CHECK((st.st_mode & 0777) == 0660);

	/* A second daemon on a live socket refuses and leaves it working. */
	CHECK(run_to_exit(a.sock) > 0);
	check_serves(a.sock);

	/* Killed, the daemon leaves its socket file: the next one replaces it. */
	kill(a.pid, SIGKILL);
	CHECK(waitpid(a.pid, NULL, 0) == a.pid);
	CHECK(stat(a.sock, &st) == 0 && S_ISSOCK(st.st_mode));
	daemon_start_at(&b, a.dir, a.sock, 0, NULL);
	check_serves(b.sock);
	CHECK(daemon_stop_keep_dir(&b) == 0);
	/* A clean stop removes the socket file. */
	CHECK(stat(b.sock, &st) < 0 && errno == ENOENT);

	/* A path that is not a socket is never removed. */
	snprintf(file, sizeof(file), "%s/not-a-socket", a.dir);
	fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && write(fd, "keep", 4) == 4);
	close(fd);
	CHECK(run_to_exit(file) > 0);
	CHECK(stat(file, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 4);
	unlink(file);
	rmdir(a.dir);
	printf("socket: mode 0660, live socket kept, stale one replaced, a file left alone\n");
	return 0;
}
