/* SPDX-License-Identifier: MIT */
#include "base/client-info.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd-util.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* Most of /proc/PID/cgroup read: a v2 path fits in far less. */
#define CGROUP_READ_MAX 4096

void client_ident_clean(char *dst, size_t n, const char *src, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < n && i < len && src[i] && src[i] != '\n'; i++) {
		unsigned char c = (unsigned char)src[i];
		dst[i] = c < 0x20 || c > 0x7e || c == '"' || c == '\\' ? '_' : (char)c;
	}
	dst[i] = 0;
}

static int ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);
	return len >= n && !memcmp(s + len - n, suffix, n);
}

static size_t hex_run(const char *s, size_t len)
{
	size_t i = 0;
	while (i < len && ((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
		i++;
	return i;
}

/* A container runtime's cgroup: "docker-<id>.scope", "cri-containerd-<id>.scope",
 * "crio-<id>.scope", "libpod-<id>.scope", or a bare 64-digit id (cgroupfs).
 * Sets the first 12 digits; whether it was one. */
static int parse_container(struct client_ident *ci, const char *c, size_t len)
{
	static const char *const prefixes[] = { "docker-", "cri-containerd-", "crio-", "libpod-",
						"containerd-", "" };

	for (size_t p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++) {
		size_t pl = strlen(prefixes[p]), h, rest;
		if (len < pl || memcmp(c, prefixes[p], pl))
			continue;
		h = hex_run(c + pl, len - pl);
		rest = len - pl - h;
		/* A bare component must be all id; a prefixed one an id, then
		 * ".scope" or nothing. */
		if (h < (pl ? 12u : 64u) ||
		    (rest && (!pl || rest != 6 || memcmp(c + pl + h, ".scope", 6))))
			continue;
		/* The short id docker ps and crictl ps show. */
		client_ident_clean(ci->container, sizeof(ci->container), c + pl, 12);
		return 1;
	}
	return 0;
}

/* A pod's UID: "kubepods-<qos>-pod<uid>.slice" (systemd driver, '_' for '-')
 * or "pod<uid>" (cgroupfs driver). */
static void parse_pod(struct client_ident *ci, const char *c, size_t len)
{
	const char *p = NULL;
	size_t n, i;

	if (len > 3 && !memcmp(c, "pod", 3))
		p = c + 3;
	for (size_t k = 0; !p && k + 4 <= len; k++)
		if (!memcmp(c + k, "-pod", 4))
			p = c + k + 4;
	if (!p)
		return;
	n = (size_t)(c + len - p);
	if (ends_with(p, n, ".slice"))
		n -= 6;
	if (n < 8 || n >= sizeof(ci->pod))
		return;
	for (i = 0; i < n; i++) {
		char ch = p[i] == '_' ? '-' : p[i];
		if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || ch == '-'))
			return;
		ci->pod[i] = ch;
	}
	ci->pod[n] = 0;
}

void client_ident_parse_cgroup(struct client_ident *ci, const char *path)
{
	const char *c = path;

	ci->unit[0] = ci->pod[0] = ci->container[0] = 0;
	client_ident_clean(ci->cgroup, sizeof(ci->cgroup), path, strlen(path));
	while (*c) {
		const char *e = strchr(c, '/');
		size_t len = e ? (size_t)(e - c) : strlen(c);

		if (len) {
			parse_pod(ci, c, len);
			/* The innermost unit, but not a container's own scope
			 * (its id says more, and is kept as the container). */
			if (!parse_container(ci, c, len) &&
			    (ends_with(c, len, ".service") || ends_with(c, len, ".scope")))
				client_ident_clean(ci->unit, sizeof(ci->unit), c, len);
		}
		if (!e)
			break;
		c = e + 1;
	}
}

/* Read up to n - 1 bytes of a file under /proc/PID into buf; the length, or -1. */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t n)
{
	char path[64];
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	r = read(fd, buf, n - 1);
	close(fd);
	if (r >= 0)
		buf[r] = 0;
	return r;
}

/* Whether the process the pidfd (or, without one, the pid) names is alive:
 * signal 0 checks without sending; EPERM (another user's process, the
 * daemon's case) says it exists, ESRCH that it is gone. */
static int still_alive(int pidfd, pid_t pid)
{
	if (pidfd >= 0)
		return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno == EPERM;
	return kill(pid, 0) == 0 || errno == EPERM;
}

void client_ident_read(struct client_ident *ci, int sock, pid_t pid)
{
	char buf[CGROUP_READ_MAX];
	socklen_t l = sizeof(int);
	int pidfd = -1;
	ssize_t r;

	memset(ci, 0, sizeof(*ci));
	if (pid <= 0)
		return;
	/* Linux 6.5 and later: the peer itself, whatever its pid becomes. */
	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &l) < 0)
		pidfd = -1;
	r = read_proc(pid, "comm", buf, sizeof(buf));
	if (r > 0)
		client_ident_clean(ci->comm, sizeof(ci->comm), buf, (size_t)r);
	r = read_proc(pid, "cgroup", buf, sizeof(buf));
	if (r > 0) {
		/* cgroup v2: the line "0::/path"; v1 hierarchies are not read. */
		char *line = strstr(buf, "\n0::");
		char *path = !strncmp(buf, "0::", 3) ? buf + 3 : line ? line + 4 : NULL;
		if (path) {
			char *end = strchr(path, '\n');
			if (end)
				*end = 0;
			client_ident_parse_cgroup(ci, path);
		}
	}
	if (!still_alive(pidfd, pid))
		memset(ci, 0, sizeof(*ci));
	safe_close(pidfd);
}
