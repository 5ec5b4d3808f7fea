/* SPDX-License-Identifier: MIT */
#include "harness.h"
#include "proc-cpu.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "fd-util.h"
#include "fdpass.h"
#include "proto.h"
#include "unix-socket.h"

uint64_t consume_blocking(struct cuflag_slot *s)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t n = 0;

	CHECK(poll(&p, 1, 2000) == 1);
	CHECK_RC(cuflag_slot_consume(s, &n));
	return n;
}

void daemon_start(struct daemon_proc *d, int capture_log, const char *const *extra_args)
{
	CHECK(daemon_proc_dir(d, "cuflag-test") == 0);
	daemon_start_in(d, capture_log, extra_args);
}

void daemon_start_at(struct daemon_proc *d, const char *dir, const char *sock, int capture_log,
		     const char *const *extra_args)
{
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	snprintf(d->sock, sizeof(d->sock), "%s", sock);
	daemon_start_in(d, capture_log, extra_args);
}

void daemon_start_in(struct daemon_proc *d, int capture_log, const char *const *extra_args)
{
	int st = 0, rc = daemon_proc_start(d, NULL, extra_args, capture_log, &st);

	CHECK_MSG(rc != -ECHILD, "cuflagd exited before it was ready (status %d)", st);
	CHECK_MSG(rc == 0, "cuflagd did not become ready: %s", strerror(-rc));
}

int daemon_stop_keep_dir(struct daemon_proc *d)
{
	int st = daemon_proc_stop(d, -1);

	CHECK(st >= 0);
	d->log_fd = safe_close(d->log_fd);
	return cuflag_exit_code(st);
}

int daemon_stop(struct daemon_proc *d)
{
	int code = daemon_stop_keep_dir(d);

	daemon_proc_remove(d);
	return code;
}

int daemon_fd_count(const struct daemon_proc *d)
{
	return cuflag_fd_count(d->pid);
}

int self_fd_count(void)
{
	return cuflag_fd_count(0);
}

void check_serves(const char *sock)
{
	cuflag_client *c;
	cuflag_slot *s;
	uint32_t t;

	CHECK_RC(cuflag_connect(sock, &c));
	CHECK_RC(cuflag_slot_acquire(c, &s));
	CHECK_RC(cuflag_slot_arm(s, &t));
	sim_store(cuflag_slot_flag(s), t);
	CHECK_RC(cuflag_slot_wait(s, t, 2000));
	cuflag_disconnect(c);
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
	uint64_t end = cuflag_now_ns() + (uint64_t)timeout_ms * 1000000u;
	while (!pred(arg)) {
		if (cuflag_now_ns() > end)
			return 0;
		usleep(1000);
	}
	return 1;
}

void daemon_stats(const struct daemon_proc *d, struct cuflag_msg_stats_reply *out)
{
	CHECK_RC(daemon_proc_stats(d, out));
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
	int64_t ns = proc_cpu_ns(d->pid);

	CHECK(ns >= 0);
	return (uint64_t)ns;
}

double daemon_cpu_share(const struct daemon_proc *d, int ms)
{
	uint64_t c0 = daemon_cpu_ns(d), t0 = cuflag_now_ns();

	usleep((useconds_t)ms * 1000);
	return (double)(daemon_cpu_ns(d) - c0) / (double)(cuflag_now_ns() - t0);
}

int daemon_fd_count_steady(const struct daemon_proc *d)
{
	int c = daemon_fd_count(d), n;

	for (int same = 0, turns = 0; same < 10 && turns < 500; turns++) {
		usleep(10000);
		n = daemon_fd_count(d);
		same = n == c ? same + 1 : 0;
		c = n;
	}
	return c;
}

int make_client_region(const struct cuflag_msg_hello_reply *hr)
{
	struct cuflag_region_layout l;
	struct cuflag_region_hdr h;
	int fd = memfd_create("test-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	cuflag_region_layout_from_reply(&l, hr);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, (off_t)l.size) == 0 && fallocate(fd, 0, 0, (off_t)l.size) == 0);
	cuflag_region_hdr_make(&h, &l);
	CHECK(pwrite(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h));
	CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);
	return fd;
}

/* One page of METRICS on fd: adds what it says of uid; the next page's
 * after_id into *next (0: none). 0 or -errno. */
static int metrics_page(int fd, uint32_t after, uid_t uid, uint32_t *next, uint32_t *pending,
			uint32_t *in_flight, uint32_t *slots)
{
	struct {
		struct cuflag_msg_hdr h;
		struct cuflag_msg_metrics b;
	} q = { .b = { .after_id = after } };
	uint8_t buf[CUFLAG_MSG_MAX];
	const uint8_t *body = buf + sizeof(struct cuflag_msg_hdr);
	int fds[1];
	unsigned nfds;

	cuflag_hdr_init(&q.h, CUFLAG_MSG_METRICS, sizeof(q), 1, 0, 0);
	if (cuflag_send_msg(fd, &q, sizeof(q), NULL, 0, 0))
		return -EPIPE;
	for (;;) {
		ssize_t n = cuflag_recv_msg(fd, buf, sizeof(buf), fds, 0, &nfds, 0);
		struct cuflag_msg_hdr h;
		uint32_t kind;

		if (n < (ssize_t)(sizeof(h) + sizeof(kind)))
			return n < 0 ? (int)n : -EPIPE;
		memcpy(&h, buf, sizeof(h));
		if (h.status)
			return h.status;
		memcpy(&kind, body, sizeof(kind));
		if (kind == CUFLAG_METRICS_END) {
			struct cuflag_metrics_end e;
			memcpy(&e, body, sizeof(e));
			*next = e.next_after;
			return 0;
		}
		if (kind == CUFLAG_METRICS_USER) {
			struct cuflag_metrics_user u;
			memcpy(&u, body, sizeof(u));
			if (u.uid == uid) {
				*pending = u.pending;
				*slots = u.slots;
			}
		} else if (kind == CUFLAG_METRICS_CLIENT) {
			struct cuflag_metrics_client c;
			memcpy(&c, body, sizeof(c));
			if (c.uid == uid)
				*in_flight += c.in_flight;
		}
	}
}

int daemon_user_metrics(const char *sock, uid_t uid, uint32_t *pending, uint32_t *in_flight,
			uint32_t *slots)
{
	uint32_t after = 0, next = 0;
	int fd = cuflag_unix_connect(sock, 5), rc;

	if (fd < 0)
		return fd;
	*pending = *in_flight = *slots = 0;
	do {
		rc = metrics_page(fd, after, uid, &next, pending, in_flight, slots);
		after = next;
	} while (!rc && next);
	close(fd);
	return rc;
}

int become_user(uid_t uid)
{
	gid_t g0 = 0;

	return setgroups(1, &g0) || setresgid(0, 0, 0) || setresuid(uid, uid, uid) ? -1 : 0;
}
