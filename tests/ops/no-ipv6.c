/* SPDX-License-Identifier: MIT */
/*
 * LD_PRELOAD for a test: the process is on a host without IPv6 (booted with
 * ipv6.disable=1, or in a unit whose RestrictAddressFamilies= leaves out
 * AF_INET6), where socket(AF_INET6, ...) fails with EAFNOSUPPORT.
 */
#include <dlfcn.h>
#include <errno.h>
#include <sys/socket.h>

int socket(int domain, int type, int protocol)
{
	static int (*real)(int, int, int);

	if (domain == AF_INET6) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	if (!real)
		real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	return real(domain, type, protocol);
}
