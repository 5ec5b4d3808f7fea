/* SPDX-License-Identifier: MIT */
#include "base/region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "base/region-guard.h"
#include "fd-util.h"

static int memfd_sized(const char *name, uint64_t size)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Whether the region's header reads as zeros: in a resume, a region an
 * unguarded daemon emptied (region_discard) when its session ended. Read
 * through the fd: a read of a hole allocates no page, where a touch of the
 * mapping would (charged to the daemon). */
static int header_gone(int fd)
{
	struct cuflag_region_hdr hdr;
	static const struct cuflag_region_hdr zero;

	return pread(fd, &hdr, sizeof(hdr), 0) == (ssize_t)sizeof(hdr) &&
	       !memcmp(&hdr, &zero, sizeof(hdr));
}

int region_adopt(struct region *r, int fd, const struct cuflag_region_layout *l, int resuming,
		 const char **why)
{
	static int mlock_warned;
	const int want = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	struct cuflag_region_hdr hdr, expect;
	struct stat st;
	int seals, rc;

	memset(r, 0, sizeof(*r));
	r->guard = -1;
	/* Sealed so it can never shrink under our mapping (no SIGBUS), and no
	 * seal can be added later to make our writes fail. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & want) != want) {
		*why = "ATTACH: the region is not a memfd sealed against shrink, grow and seals";
		return -EINVAL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != l->size) {
		*why = "ATTACH: the region's size is not this daemon's layout";
		return -EINVAL;
	}
	/* Pages the daemon would be first to touch would be charged to it. */
	if ((uint64_t)st.st_blocks * 512u < l->size) {
		if (resuming && header_gone(fd)) {
			*why = "ATTACH: the region was emptied (an unguarded daemon removes a "
			       "region's pages when its session ends): connect anew";
			return -ESTALE;
		}
		*why = "ATTACH: the region's pages are not all allocated (fallocate it)";
		return -EINVAL;
	}
	r->map = mmap(NULL, l->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		*why = "ATTACH: cannot map the region writable";
		return -EINVAL;
	}
	r->size = l->size;
	r->dev = st.st_dev;
	r->ino = st.st_ino;
	/* Before the first touch: a page punched out since the count above
	 * must not be faulted in as the daemon's. */
	rc = guard_add(r->map, r->size, &r->guard);
	if (rc) {
		region_destroy(r);
		*why = rc == -EFAULT ? "ATTACH: the region has a hole (a page not allocated)"
				     : "ATTACH: cannot guard the region against holes";
		return rc == -EFAULT ? -EINVAL : rc;
	}
	cuflag_region_hdr_make(&expect, l);
	memcpy(&hdr, r->map, sizeof(hdr));
	if (memcmp(&hdr, &expect, sizeof(hdr))) {
		region_destroy(r);
		*why = "ATTACH: the region's header is not this daemon's layout";
		return -EINVAL;
	}
	/* Locked so a flag write never waits on a page fault; not fatal. The
	 * pages present now (all of them, populated above) are locked, none is
	 * faulted in: a page punched since the population would be faulted in
	 * by mlock() in the kernel, where a guard of the daemon's own loads and
	 * stores (GUARD_USER, the unit's) does not see it. */
	if (mlock2(r->map, l->size, MLOCK_ONFAULT) < 0 && !mlock_warned) {
		mlock_warned = 1;
		log_warn("mlock of a %llu-byte region failed (%s): raise LimitMEMLOCK; "
			 "continuing unlocked",
			 (unsigned long long)l->size, strerror(errno));
	}
	return 0;
}

void region_discard(struct region *r)
{
	/* Unguarded, the daemon may have faulted in pages of the region that
	 * the client had punched out: they are charged to the daemon for as
	 * long as the memfd lives, which the client decides (it may keep it
	 * after hanging up, session after session). The session is over and
	 * nothing in the region is any use to the client now: every page goes
	 * (unlocked first: locked pages cannot be removed). Guarded, the daemon
	 * never faults a page in: the region is left as it is. */
	if (!r->map || guard_mode() != GUARD_OFF)
		return;
	/* The system call itself: a sanitizer runtime's munlock() does
	 * nothing, and the pages would stay locked. */
	if (syscall(SYS_munlock, r->map, r->size) < 0 ||
	    madvise(r->map, r->size, MADV_REMOVE) < 0)
		log_warn("a %llu-byte region could not be emptied at its session's end: %s",
			 (unsigned long long)r->size, strerror(errno));
}

void region_destroy(struct region *r)
{
	if (r->map) {
		guard_del(r->guard); /* set whenever map is */
		munmap(r->map, r->size);
	}
	r->map = NULL;
	r->guard = -1;
}

int daemon_page_create(struct daemon_page *dp, uint64_t epoch)
{
	long page = sysconf(_SC_PAGESIZE);
	int rc;

	dp->size = (size_t)page;
	dp->page = NULL;
	dp->fd = memfd_sized("cuflag-daemon", dp->size);
	if (dp->fd < 0)
		return dp->fd;
	dp->page = mmap(NULL, dp->size, PROT_READ | PROT_WRITE, MAP_SHARED, dp->fd, 0);
	if (dp->page == MAP_FAILED) {
		rc = -errno;
		dp->page = NULL;
		goto fail;
	}
	dp->page->magic = CUFLAG_DPAGE_MAGIC;
	dp->page->version = CUFLAG_PROTO_VERSION;
	dp->page->size = sizeof(*dp->page);
	dp->page->epoch = epoch;
	dp->page->scanner_state = CUFLAG_SCANNER_SPINNING;
	/* Our mapping stays writable; every later mapping can only read. */
	if (fcntl(dp->fd, F_ADD_SEALS,
		  F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = -errno;
		goto fail;
	}
	return 0;
fail:
	daemon_page_destroy(dp);
	return rc;
}

void daemon_page_destroy(struct daemon_page *dp)
{
	if (dp->page)
		munmap(dp->page, dp->size);
	dp->fd = safe_close(dp->fd);
	dp->page = NULL;
	dp->fd = -1;
}
