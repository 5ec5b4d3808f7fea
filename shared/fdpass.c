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

ssize_t cuflag_recv_msg(int sock, void *buf, size_t cap, int *fds, unsigned max_fds,
			unsigned *nfds, int flags)
{
	/* Room for exactly the fds allowed: anything more sets MSG_CTRUNC. */
	union {
		char buf[CMSG_SPACE(sizeof(int) * CUFLAG_MSG_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = CMSG_SPACE(sizeof(int) * (max_fds ? max_fds : 1)),
	};
	unsigned got = 0;
	ssize_t n;
	int err = 0;

	*nfds = 0;
	if (max_fds > CUFLAG_MSG_MAX_FDS)
		return -EINVAL;
	if (max_fds == 0)
		msg.msg_controllen = CMSG_SPACE(sizeof(int));
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
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (got < max_fds)
				fds[got++] = fd;
			else {
				close(fd);
				err = -EBADMSG;
			}
		}
	}
	/* Truncated with room left: our own fd table was full (the kernel passes
	 * what fits and drops the rest); with no room left: the peer sent more. */
	if (msg.msg_flags & MSG_CTRUNC)
		err = got < max_fds ? -EMFILE : -EBADMSG;
	else if (msg.msg_flags & MSG_TRUNC)
		err = -EMSGSIZE;
	if (err) {
		cuflag_close_fds(fds, got);
		return err;
	}
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
