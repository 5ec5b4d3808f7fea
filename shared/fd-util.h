/* SPDX-License-Identifier: MIT */
/* Closing fds in one idiom: `fd = safe_close(fd);`. */
#ifndef CUFLAG_FD_UTIL_H
#define CUFLAG_FD_UTIL_H

#include <errno.h>
#include <unistd.h>

/*
 * Close fd if it is one (>= 0) and return -1, to store back. errno is kept,
 * so an error path may close what it holds and then return -errno. A close
 * that fails has still released the fd on Linux: there is nothing to retry.
 */
static inline int safe_close(int fd)
{
	if (fd >= 0) {
		int saved = errno;

		(void)close(fd);
		errno = saved;
	}
	return -1;
}

#endif
