/* SPDX-License-Identifier: MIT */
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

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

int region_create(struct region *r, uint32_t nslots, uint32_t queue_cap)
{
	static int mlock_warned;
	long page = sysconf(_SC_PAGESIZE);
	struct cuflag_region_hdr hdr;
	int rc;

	r->fd = -1;
	r->map = NULL;
	rc = cuflag_region_layout_make(&r->layout, nslots, queue_cap, (uint32_t)page);
	if (rc)
		return rc;
	r->fd = memfd_sized("cuflag-region", r->layout.size);
	if (r->fd < 0)
		return r->fd;
	r->map = mmap(NULL, r->layout.size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->map == MAP_FAILED) {
		rc = -errno;
		r->map = NULL;
		goto fail;
	}
	/* Locked so a flag write never waits on a page fault; not fatal. */
	if (mlock(r->map, r->layout.size) < 0 && !mlock_warned) {
		mlock_warned = 1;
		log_warn("mlock of a %llu-byte region failed (%s): raise LimitMEMLOCK; "
			 "continuing unlocked",
			 (unsigned long long)r->layout.size, strerror(errno));
	}
	memset(&hdr, 0, sizeof(hdr));
	hdr.magic = CUFLAG_REGION_MAGIC;
	hdr.version = CUFLAG_PROTO_VERSION;
	hdr.hdr_size = sizeof(hdr);
	hdr.nslots = r->layout.nslots;
	hdr.queue_cap = r->layout.queue_cap;
	hdr.head_off = r->layout.head_off;
	hdr.tail_off = r->layout.tail_off;
	hdr.queue_off = r->layout.queue_off;
	hdr.flags_off = r->layout.flags_off;
	hdr.state_off = r->layout.state_off;
	hdr.region_size = r->layout.size;
	memcpy(r->map, &hdr, sizeof(hdr));
	/* A fresh memfd reads as zeros: head, tail and flags start at 0. */
	if (fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = -errno;
		goto fail;
	}
	return 0;
fail:
	region_destroy(r);
	return rc;
}

int region_adopt(struct region *r, int fd, uint32_t nslots, uint32_t queue_cap,
		 const char **why)
{
	const int want = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	long page = sysconf(_SC_PAGESIZE);
	struct cuflag_region_hdr hdr;
	struct stat st;
	int seals, rc;

	r->fd = -1;
	r->map = NULL;
	r->adopted = 0;
	rc = cuflag_region_layout_make(&r->layout, nslots, queue_cap, (uint32_t)page);
	if (rc)
		return rc;
	/* Sealed so it can never shrink under our mapping (no SIGBUS), and no
	 * seal can be added later to make our writes fail. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & want) != want) {
		*why = "RESUME: the region is not a sealed memfd";
		return -EINVAL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != r->layout.size) {
		*why = "RESUME: the region's size is not this daemon's layout";
		return -EINVAL;
	}
	r->map = mmap(NULL, r->layout.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		*why = "RESUME: cannot map the region";
		return -EINVAL;
	}
	memcpy(&hdr, r->map, sizeof(hdr));
	if (hdr.magic != CUFLAG_REGION_MAGIC || hdr.version != CUFLAG_PROTO_VERSION ||
	    hdr.nslots != r->layout.nslots || hdr.queue_cap != r->layout.queue_cap ||
	    hdr.flags_off != r->layout.flags_off || hdr.state_off != r->layout.state_off) {
		region_destroy(r);
		*why = "RESUME: the region's header is not this daemon's layout";
		return -EINVAL;
	}
	if (mlock(r->map, r->layout.size) < 0)
		log_debug("mlock of an adopted region failed: %s", strerror(errno));
	r->adopted = 1;
	return 0;
}

void region_destroy(struct region *r)
{
	if (r->map)
		munmap(r->map, r->layout.size);
	if (r->fd >= 0)
		close(r->fd);
	r->map = NULL;
	r->fd = -1;
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
	if (dp->fd >= 0)
		close(dp->fd);
	dp->page = NULL;
	dp->fd = -1;
}
