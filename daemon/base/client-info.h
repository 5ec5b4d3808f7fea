/* SPDX-License-Identifier: MIT */
/*
 * Who a client is, for an operator: its process name, its systemd unit or
 * cgroup, and the container and pod its cgroup path names. Read once, when
 * the connection is accepted, from /proc/PID/comm and /proc/PID/cgroup.
 *
 * Both files are the client's to shape (a process names itself; a cgroup
 * path is chosen by whoever made it), so each value is bounded and reduced
 * to printable ASCII without quotes or backslashes before it is kept: it
 * ends up in logs, JSON and Prometheus labels. A pid can be reused once its
 * process exits: where the kernel gives a pidfd of the peer (SO_PEERPIDFD),
 * what was read is kept only if that very process is still alive after the
 * read; otherwise only if the pid still belongs to a process afterwards (a
 * peer that exits at once and whose pid is reused within that window could
 * be misnamed; it no longer holds the connection either way).
 */
#ifndef CUFLAGD_CLIENT_INFO_H
#define CUFLAGD_CLIENT_INFO_H

#include <stddef.h>
#include <sys/types.h>

#include "cuflag-proto.h"

struct client_ident {
	char comm[CUFLAG_COMM_MAX];        /* "" when unknown */
	char unit[CUFLAG_UNIT_MAX];        /* a systemd unit (.service, .scope), or "" */
	char cgroup[CUFLAG_CGROUP_MAX];    /* the cgroup v2 path, cut to fit */
	char pod[CUFLAG_POD_MAX];          /* a Kubernetes pod's UID, or "" */
	char container[CUFLAG_CONTAINER_MAX]; /* the first 12 hex digits of its id, or "" */
};

/* Fill ci for the peer of sock (pid from SO_PEERCRED). Never fails: what
 * cannot be read (the process is gone, /proc is hidden) stays "". */
void client_ident_read(struct client_ident *ci, int sock, pid_t pid);

/* The unit, pod and container a cgroup path names (pure; for the tests). */
void client_ident_parse_cgroup(struct client_ident *ci, const char *path);

/* Copy at most n - 1 bytes of src (up to a newline or NUL) into dst, each
 * byte outside printable ASCII, and '"' and '\\', made '_'. */
void client_ident_clean(char *dst, size_t n, const char *src, size_t len);

#endif
