/* SPDX-License-Identifier: MIT */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "cuflag-proto.h"
#include "proto.h"
#include <sys/mman.h>

uint64_t consume_blocking(struct cuflag_slot *s)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t n = 0;

	CHECK(poll(&p, 1, 2000) == 1);
	CHECK_RC(cuflag_slot_consume(s, &n));
	return n;
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Whether the daemon accepts connections. The probe hangs up and waits until
 * the daemon has closed its end too, so that a test taking the daemon's fd
 * count right after start does not count the probe.
 */
static int can_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int ok;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (ok && shutdown(fd, SHUT_WR) == 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char b;
		/* EOF once the daemon closed it; give up quietly after 5 s. */
		while (poll(&p, 1, 5000) == 1 && recv(fd, &b, 1, MSG_DONTWAIT) > 0)
			;
	}
	close(fd);
	return ok;
}

static void start_in(struct daemon_proc *d, int capture_log, const char *const *extra_args);

void daemon_start(struct daemon_proc *d, int capture_log, const char *const *extra_args)
{
	snprintf(d->dir, sizeof(d->dir), "/tmp/cuflag-test-XXXXXX");
	CHECK(mkdtemp(d->dir) != NULL);
	snprintf(d->sock, sizeof(d->sock), "%s/cuflagd.sock", d->dir);
	start_in(d, capture_log, extra_args);
}

void daemon_start_at(struct daemon_proc *d, const char *dir, const char *sock, int capture_log,
		     const char *const *extra_args)
{
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	snprintf(d->sock, sizeof(d->sock), "%s", sock);
	start_in(d, capture_log, extra_args);
}

static void start_in(struct daemon_proc *d, int capture_log, const char *const *extra_args)
{
	const char *bin = getenv("CUFLAGD");
	const char *argv[64];
	int n = 0, pfd[2] = { -1, -1 };

	if (!bin)
		bin = "cuflagd";
	argv[n++] = bin;
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	for (int i = 0; extra_args && extra_args[i] && n < 62; i++)
		argv[n++] = extra_args[i];
	argv[n] = NULL;
	d->log_fd = -1;
	if (capture_log)
		CHECK(pipe2(pfd, O_CLOEXEC) == 0);
	d->pid = fork();
	CHECK(d->pid >= 0);
	if (d->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (capture_log)
			dup2(pfd[1], 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	if (capture_log) {
		close(pfd[1]);
		d->log_fd = pfd[0];
		fcntl(d->log_fd, F_SETFL, O_NONBLOCK);
	}
	/* Ready when it accepts a connection; fail fast if it died. */
	for (int i = 0; i < 20000; i++) {
		int st;
		if (can_connect(d->sock))
			return;
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			fprintf(stderr, "cuflagd exited before it was ready (status %d)\n", st);
			abort();
		}
		usleep(500);
	}
	fprintf(stderr, "cuflagd did not become ready\n");
	abort();
}

int daemon_stop_keep_dir(struct daemon_proc *d)
{
	int st = 0;

	kill(d->pid, SIGTERM);
	CHECK(waitpid(d->pid, &st, 0) == d->pid);
	if (d->log_fd >= 0)
		close(d->log_fd);
	d->log_fd = -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int daemon_stop(struct daemon_proc *d)
{
	int st = 0;

	kill(d->pid, SIGTERM);
	CHECK(waitpid(d->pid, &st, 0) == d->pid);
	if (d->log_fd >= 0)
		close(d->log_fd);
	unlink(d->sock);
	rmdir(d->dir);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int count_dir(const char *path)
{
	DIR *dir = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!dir)
		return -1;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

int daemon_fd_count(const struct daemon_proc *d)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)d->pid);
	return count_dir(path);
}

int self_fd_count(void)
{
	return count_dir("/proc/self/fd") - 1; /* the opendir's own fd */
}

double daemon_cpu_ms(const struct daemon_proc *d)
{
	char path[64], buf[1024];
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)d->pid);
	f = fopen(path, "r");
	CHECK(f != NULL);
	CHECK(fgets(buf, sizeof(buf), f) != NULL);
	fclose(f);
	/* Fields after the command name, which is in parentheses. */
	char *p = strrchr(buf, ')');
	CHECK(p != NULL);
	CHECK(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2);
	return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

size_t daemon_read_log(struct daemon_proc *d, char *buf, size_t cap)
{
	size_t got = 0;
	ssize_t n;

	if (d->log_fd < 0 || cap == 0)
		return 0;
	while (got + 1 < cap && (n = read(d->log_fd, buf + got, cap - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = 0;
	return got;
}

int wait_until(int (*pred)(void *), void *arg, int timeout_ms)
{
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000u;
	while (!pred(arg)) {
		if (now_ns() > end)
			return 0;
		usleep(1000);
	}
	return 1;
}

#include "cuflag-proto.h"
#include "fdpass.h"
#include "proto.h"

void daemon_stats(const struct daemon_proc *d, struct cuflag_msg_stats_reply *out)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hdr h;
	const char *why;
	unsigned nfds;
	int fd, fds[1];
	ssize_t n;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", d->sock);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	cuflag_hdr_init(&h, CUFLAG_MSG_STATS, sizeof(h), 1, 0, 0);
	CHECK(cuflag_send_msg(fd, &h, sizeof(h), NULL, 0, 0) == 0);
	n = cuflag_recv_msg(fd, buf, sizeof(buf), fds, 0, &nfds, 0);
	CHECK(n > 0);
	CHECK(cuflag_reply_check(buf, (size_t)n, nfds, CUFLAG_MSG_STATS, 1, &why) == 0);
	memcpy(out, buf + sizeof(h), sizeof(*out));
	close(fd);
}

int daemon_region_maps(const struct daemon_proc *d)
{
	char path[64], line[512];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)d->pid);
	f = fopen(path, "r");
	CHECK(f != NULL);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "cuflag-region"))
			n++;
	fclose(f);
	return n;
}

uint64_t daemon_cpu_ns(const struct daemon_proc *d)
{
	char path[96];
	struct dirent *e;
	uint64_t total = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)d->pid);
	dir = opendir(path);
	CHECK(dir != NULL);
	while ((e = readdir(dir))) {
		unsigned long long run = 0;
		char p[160];
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/task/%.16s/schedstat", (int)d->pid, e->d_name);
		f = fopen(p, "r");
		if (!f)
			continue; /* a thread that just ended */
		if (fscanf(f, "%llu", &run) == 1)
			total += run;
		fclose(f);
	}
	closedir(dir);
	return total;
}

double daemon_cpu_share(const struct daemon_proc *d, int ms)
{
	uint64_t c0 = daemon_cpu_ns(d), t0 = now_ns();

	usleep((useconds_t)ms * 1000);
	return (double)(daemon_cpu_ns(d) - c0) / (double)(now_ns() - t0);
}

int make_client_region(const struct cuflag_msg_hello_reply *hr)
{
	struct cuflag_region_layout l = {
		.nslots = hr->nslots, .queue_cap = hr->queue_cap, .head_off = hr->head_off,
		.tail_off = hr->tail_off, .queue_off = hr->queue_off, .state_off = hr->state_off,
		.flags_off = hr->flags_off, .size = hr->region_size,
	};
	struct cuflag_region_hdr h;
	int fd = memfd_create("test-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	CHECK(fd >= 0);
	CHECK(ftruncate(fd, (off_t)l.size) == 0 && fallocate(fd, 0, 0, (off_t)l.size) == 0);
	cuflag_region_hdr_make(&h, &l);
	CHECK(pwrite(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h));
	CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);
	return fd;
}
