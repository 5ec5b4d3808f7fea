/* SPDX-License-Identifier: MIT */
#include "base/region-guard.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"

/* One guarded mapping. Written by the main thread, read by the SIGBUS
 * handler in whichever thread touched it: atomics only. */
struct guard_range {
	_Atomic uintptr_t start; /* 0: free */
	_Atomic size_t size;
	_Atomic int punched;
};

static struct {
	enum guard_mode mode;
	int uffd, efd;
	uint32_t n;
	struct guard_range *r;
	size_t page;
} g = { .uffd = -1, .efd = -1 };

/* A touch of a page the memfd does not have. Runs in the thread that
 * touched it, on any guarded region: a private zero page goes in its place
 * (the touch is then made again and lands there), the region is marked. A
 * SIGBUS anywhere else is what it always was. */
static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	int saved = errno;

	(void)uc;
	for (uint32_t i = 0; i < g.n; i++) {
		uintptr_t start = atomic_load(&g.r[i].start);
		if (!start || a < start || a - start >= atomic_load(&g.r[i].size))
			continue;
		void *pg = (void *)(a & ~(uintptr_t)(g.page - 1));
		if (mmap(pg, g.page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) == MAP_FAILED)
			break;
		atomic_store(&g.r[i].punched, 1);
		uint64_t one = 1;
		if (write(g.efd, &one, sizeof(one)) < 0)
			(void)0; /* the counter is full: the main loop wakes anyway */
		errno = saved;
		return;
	}
	signal(sig, SIG_DFL);
	errno = saved;
}

static int uffd_open(int flags)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | flags);
	struct uffdio_api api = { .api = UFFD_API,
				  .features = UFFD_FEATURE_SIGBUS | UFFD_FEATURE_MISSING_SHMEM };

	if (fd < 0)
		return -errno;
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

enum guard_mode guard_start(uint32_t max, enum guard_mode most)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER };
	int rc;

	g.page = (size_t)sysconf(_SC_PAGESIZE);
	if (most == GUARD_OFF) {
		log_warn("region guard off (--region-guard off): a client that punches a hole in "
			 "its region can have the daemon fault pages in, its region's size at "
			 "most, until its session ends");
		return GUARD_OFF;
	}
	g.mode = GUARD_FULL;
	g.uffd = most == GUARD_FULL ? uffd_open(0) : -EPERM;
	if (g.uffd < 0) {
		g.mode = GUARD_USER;
		g.uffd = uffd_open(UFFD_USER_MODE_ONLY);
	}
	rc = g.uffd;
	g.r = calloc(max ? max : 1, sizeof(*g.r));
	g.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g.uffd < 0 || !g.r || g.efd < 0 || sigaction(SIGBUS, &sa, NULL) < 0) {
		log_warn("userfaultfd unavailable (%s): a client that punches a hole in its region "
			 "can have the daemon fault pages in, its region's size at most, until its "
			 "session ends", strerror(rc < 0 ? -rc : errno));
		guard_stop();
		return GUARD_OFF;
	}
	g.n = max;
	if (g.mode == GUARD_USER)
		log_notice("userfaultfd for user-mode faults only: a region is checked page by page "
			   "at ATTACH");
	return g.mode;
}

void guard_stop(void)
{
	if (g.uffd >= 0)
		close(g.uffd);
	if (g.efd >= 0)
		close(g.efd);
	free(g.r);
	g.r = NULL;
	g.n = 0;
	g.uffd = g.efd = -1;
	g.mode = GUARD_OFF;
}

enum guard_mode guard_mode(void)
{
	return g.mode;
}

int guard_fd(void)
{
	return g.efd;
}

/* Every page present: by the kernel, where its faults are guarded too
 * (a hole fails with EFAULT, nothing allocated), else by our own loads
 * (a hole lands in the SIGBUS handler and marks the range). */
static int populate(uint8_t *map, size_t size, struct guard_range *r)
{
	if (g.mode == GUARD_FULL && madvise(map, size, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (g.mode == GUARD_FULL && errno != EINVAL) /* EINVAL: a kernel before 5.14 */
		return -errno;
	for (size_t off = 0; off < size; off += g.page)
		(void)*(volatile uint8_t *)(map + off);
	return atomic_load(&r->punched) ? -EFAULT : 0;
}

int guard_add(uint8_t *map, size_t size, int *idx)
{
	struct uffdio_register reg = { .range = { (uintptr_t)map, size },
				       .mode = UFFDIO_REGISTER_MODE_MISSING };
	uint32_t i;
	int rc;

	*idx = -1;
	if (g.mode == GUARD_OFF)
		return 0;
	for (i = 0; i < g.n && atomic_load(&g.r[i].start); i++)
		;
	if (i == g.n)
		return -ENOSPC;
	if (ioctl(g.uffd, UFFDIO_REGISTER, &reg) < 0)
		return -errno;
	atomic_store(&g.r[i].punched, 0);
	atomic_store(&g.r[i].size, size);
	atomic_store(&g.r[i].start, (uintptr_t)map);
	*idx = (int)i;
	rc = populate(map, size, &g.r[i]);
	if (rc) {
		guard_del(i);
		*idx = -1;
	}
	return rc;
}

void guard_del(int idx)
{
	if (idx >= 0 && (uint32_t)idx < g.n)
		atomic_store(&g.r[idx].start, 0);
}

uint8_t *guard_take_punched(void)
{
	uint64_t v;

	if (g.efd < 0)
		return NULL;
	if (read(g.efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return NULL;
	for (uint32_t i = 0; i < g.n; i++)
		if (atomic_load(&g.r[i].start) && atomic_exchange(&g.r[i].punched, 0))
			return (uint8_t *)atomic_load(&g.r[i].start);
	return NULL;
}
