/* SPDX-License-Identifier: MIT */
/* Sending and receiving one message with its fds (SCM_RIGHTS). */
#ifndef CUFLAG_FDPASS_H
#define CUFLAG_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Receive one SOCK_SEQPACKET message and at most max_fds fds.
 * Returns the message length (0: the peer hung up) or a negative errno:
 * -EAGAIN (nothing to read on a non-blocking socket), -EMSGSIZE (message
 * longer than cap), -EBADMSG (control data truncated, more fds than allowed,
 * or control data of another kind), -EMFILE (fds were sent and this process
 * had no room for them). On every error no received fd stays
 * open: they are closed here. Received fds are close-on-exec.
 */
ssize_t cuflag_recv_msg(int sock, void *buf, size_t cap, int *fds, unsigned max_fds,
			unsigned *nfds, int flags);

/*
 * Receive one message with room for every fd the kernel lets a message carry
 * (fds: CUFLAG_SCM_MAX_FD entries). Every fd that arrived is handed back in
 * fds and *nfds, also when an error is returned (-EMSGSIZE, -EBADMSG for
 * control data of another kind, -EMFILE when this process had no room): the
 * caller disposes of them, for the daemon off its main thread.
 */
ssize_t cuflag_recv_msg_all(int sock, void *buf, size_t cap, int *fds, unsigned *nfds,
			    int flags);

/* Send one message with nfds fds; MSG_NOSIGNAL. 0 or a negative errno. */
int cuflag_send_msg(int sock, const void *buf, size_t len, const int *fds, unsigned nfds,
		    int flags);

/* Close n fds, ignoring -1 entries, and set them to -1. */
void cuflag_close_fds(int *fds, unsigned n);

#endif
