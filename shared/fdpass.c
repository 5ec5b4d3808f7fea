/* SPDX-License-Identifier: MIT */
#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "fd-util.h"

void cuflag_close_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		fds[i] = safe_close(fds[i]);
	}
}

ssize_t cuflag_recv_msg_all(int sock, void *buf, size_t cap, int *fds, unsigned *nfds,
			    int flags)
{
	/* Room for the kernel's maximum: with less, the fds that do not fit
	 * would be released inside recvmsg, in this thread, and the release of
	 * a peer's file can block (a socket with SO_LINGER, a FUSE file). */
	union {
		char buf[CMSG_SPACE(sizeof(int) * CUFLAG_SCM_MAX_FD)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	unsigned got = 0;
	ssize_t n;
	int err = 0;

	*nfds = 0;
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			err = -EBADMSG;
			continue;
		}
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k && got < CUFLAG_SCM_MAX_FD; i++)
			memcpy(&fds[got++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	*nfds = got;
	/* Truncated with room for every fd the kernel passes: our own fd table
	 * was full (it passed what fit). */
	if (msg.msg_flags & MSG_CTRUNC)
		err = -EMFILE;
	else if (msg.msg_flags & MSG_TRUNC)
		err = -EMSGSIZE;
	return err ? err : n;
}

ssize_t cuflag_recv_msg(int sock, void *buf, size_t cap, int *fds, unsigned max_fds,
			unsigned *nfds, int flags)
{
	int all[CUFLAG_SCM_MAX_FD];
	unsigned got = 0;
	ssize_t n;

	*nfds = 0;
	if (max_fds > CUFLAG_MSG_MAX_FDS)
		return -EINVAL;
	n = cuflag_recv_msg_all(sock, buf, cap, all, &got, flags);
	if (n >= 0 && got > max_fds)
		n = -EBADMSG;
	if (n < 0) {
		cuflag_close_fds(all, got);
		return n;
	}
	if (got) /* fds may be NULL when none are allowed */
		memcpy(fds, all, sizeof(int) * got);
	*nfds = got;
	return n;
}

int cuflag_send_msg(int sock, const void *buf, size_t len, const int *fds, unsigned nfds,
		    int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * CUFLAG_MSG_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds > CUFLAG_MSG_MAX_FDS)
		return -EINVAL;
	if (nfds) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}
