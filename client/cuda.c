/* SPDX-License-Identifier: MIT */
/*
 * The CUDA binding: register the client's flag pages in each context a
 * stream signals from, enqueue the flag store on the stream, arm the slot.
 * A stream under graph capture gets the per-launch advance instead
 * (cuda-graph.c). Driver API only.
 */
#include <cuda.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client-private.h"
#include "cuda-graph.h"
#include "cuda-load.h"
#include "timeline.h"
#include "cuflag/cuflag_cuda.h"

/* One context the flag pages are usable from, and their device address there. */
struct cuda_ctx {
	CUcontext ctx;
	CUdeviceptr flags_dptr;
	int registered_here; /* this context made the registration: it undoes it */
	struct cuflag_advance adv; /* loaded at the first signal under capture */
	int adv_tried;
};

struct cuda_client {
	pthread_mutex_t lock;
	struct cuda_ctx *ctxs;
	unsigned n, cap;
	int force_hostfn;
};

/* Per slot: where its last signal was enqueued, for the fault probe. */
struct cuda_slot {
	CUstream stream;
	CUcontext ctx;
};

/* What a host function stores when the stream memory operation is refused. */
struct hostfn_store {
	volatile uint32_t *flag;
	uint32_t value;
};

static void cuda_fini(struct cuflag_client *c)
{
	struct cuda_client *cc = c->cuda;

	if (!cc)
		return;
	for (unsigned i = 0; i < cc->n; i++) {
		struct cuda_ctx *x = &cc->ctxs[i];
		if (!x->registered_here && !x->adv.mod)
			continue;
		/* A context destroyed already took its registration and module. */
		if (cuflag__cu.CtxPushCurrent(x->ctx) == CUDA_SUCCESS) {
			if (x->registered_here)
				(void)cuflag__cu.MemHostUnregister((void *)c->flags);
			cuflag__advance_unload(&x->adv);
			CUcontext dummy;
			(void)cuflag__cu.CtxPopCurrent(&dummy);
		}
	}
	free(cc->ctxs);
	pthread_mutex_destroy(&cc->lock);
	free(cc);
	c->cuda = NULL;
}

static int cuda_probe(struct cuflag_slot *s)
{
	struct cuda_slot *cs = s->cuda;
	CUcontext dummy;
	CUresult r;

	if (!cs || !cs->ctx)
		return 0;
	if (cuflag__cu.CtxPushCurrent(cs->ctx) != CUDA_SUCCESS)
		return 0;
	/* Querying a stream under capture would invalidate the capture (a
	 * faulted context answers the capture check with its error: go on). */
	if (cuflag__capturing(cs->stream) == 1)
		r = CUDA_SUCCESS;
	else
		r = cuflag__cu.StreamQuery(cs->stream);
	(void)cuflag__cu.CtxPopCurrent(&dummy);
	switch (r) {
	case CUDA_SUCCESS:
	case CUDA_ERROR_NOT_READY:
	/* A stream or context the program has destroyed says nothing of a fault. */
	case CUDA_ERROR_INVALID_HANDLE:
	case CUDA_ERROR_INVALID_CONTEXT:
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
		return 0;
	default:
		atomic_store(&s->fault, -EIO);
		return -EIO;
	}
}

static struct cuda_client *cuda_client_get(struct cuflag_client *c)
{
	struct cuda_client *cc;

	pthread_mutex_lock(&c->slots_lock);
	cc = c->cuda;
	if (!cc) {
		const char *f = getenv(CUFLAG_CUDA_FORCE_HOSTFN_ENV);
		cc = calloc(1, sizeof(*cc));
		if (cc) {
			pthread_mutex_init(&cc->lock, NULL);
			cc->force_hostfn = f && f[0] == '1';
			c->cuda = cc;
			c->cuda_fini = cuda_fini;
			c->cuda_probe = cuda_probe;
		}
	}
	pthread_mutex_unlock(&c->slots_lock);
	return cc;
}

/* Register the flag pages in ctx (current) and ask for their device address. */
static int register_flags(struct cuflag_client *c, struct cuda_ctx *x)
{
	void *host = (void *)c->flags;
	size_t len = c->layout.size - c->layout.flags_off;
	CUresult r;

	/* An imported CUDA IPC allocation is mapped at the same address for
	 * every device already: nothing to register. */
	if (c->ipc_va) {
		x->flags_dptr = (CUdeviceptr)c->ipc_va;
		return 0;
	}
	r = cuflag__cu.MemHostRegister(host, len, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
	if (r == CUDA_SUCCESS)
		x->registered_here = 1;
	else if (r != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
		return -ENODEV;
	if (cuflag__cu.MemHostGetDevicePointer(&x->flags_dptr, host, 0) != CUDA_SUCCESS) {
		if (x->registered_here)
			(void)cuflag__cu.MemHostUnregister(host);
		x->registered_here = 0;
		return -ENODEV;
	}
	return 0;
}

/*
 * The flags' device address in ctx and, when adv is not NULL, ctx's advance
 * kernel (adv->fn NULL when it cannot be loaded: a host function advances
 * then). The first use in a context registers the pages; PORTABLE makes one
 * registration valid in every context, so a second context usually finds it
 * there already; either way each context's device address is asked of that
 * context and cached. Set-up runs in the relaxed capture mode: the caller's
 * stream may be under capture.
 */
static int ctx_get(struct cuflag_client *c, struct cuda_client *cc, CUcontext ctx,
		   CUdeviceptr *out, struct cuflag_advance *adv)
{
	struct cuda_ctx *x = NULL;
	CUstreamCaptureMode mode;
	CUcontext dummy;
	int rc = 0;

	pthread_mutex_lock(&cc->lock);
	for (unsigned i = 0; i < cc->n && !x; i++)
		if (cc->ctxs[i].ctx == ctx)
			x = &cc->ctxs[i];
	if (x && (!adv || x->adv_tried))
		goto found;
	if (!x && cc->n == cc->cap) {
		unsigned ncap = cc->cap ? cc->cap * 2 : 4;
		struct cuda_ctx *n = realloc(cc->ctxs, ncap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&cc->lock);
			return -ENOMEM;
		}
		cc->ctxs = n;
		cc->cap = ncap;
	}
	if (cuflag__cu.CtxPushCurrent(ctx) != CUDA_SUCCESS) {
		pthread_mutex_unlock(&cc->lock);
		return -ENODEV;
	}
	mode = cuflag__capture_relax();
	if (!x) {
		struct cuda_ctx n = { .ctx = ctx };
		rc = register_flags(c, &n);
		if (!rc) {
			cc->ctxs[cc->n] = n;
			x = &cc->ctxs[cc->n++];
		}
	}
	if (!rc && adv) {
		/* Tried once: without the kernel the host function does it. */
		(void)cuflag__advance_load(&x->adv);
		x->adv_tried = 1;
	}
	cuflag__capture_restore(mode);
	(void)cuflag__cu.CtxPopCurrent(&dummy);
	if (rc) {
		pthread_mutex_unlock(&cc->lock);
		return rc;
	}
found:
	*out = x->flags_dptr;
	if (adv)
		*adv = x->adv;
	pthread_mutex_unlock(&cc->lock);
	return 0;
}

static void CUDA_CB hostfn_store_run(void *arg)
{
	struct hostfn_store *h = arg;
	__atomic_store_n(h->flag, h->value, __ATOMIC_RELEASE);
	free(h);
}

/* Enqueue "store value into the flag" on the stream: the memory operation, or a host function. */
static int enqueue_store(struct cuda_client *cc, struct cuflag_slot *s, CUstream stream,
			 CUdeviceptr dptr, uint32_t value)
{
	struct hostfn_store *h;
	CUresult r;

	if (!cc->force_hostfn &&
	    cuflag__cu.StreamWriteValue32(stream, dptr, value, CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS)
		return 0;
	/* A faulted context refuses the write as well, yet may still run a host
	 * function, whose store would report work that never finished. */
	r = cuflag__cu.StreamQuery(stream);
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
		return -EIO;
	h = malloc(sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->flag = s->flag;
	h->value = value;
	if (cuflag__cu.LaunchHostFunc(stream, hostfn_store_run, h) != CUDA_SUCCESS) {
		free(h);
		return -EIO;
	}
	return 0;
}

/* The slot's CUDA state, made on first need; under the slot's lock. */
static struct cuda_slot *slot_cuda_locked(struct cuflag_slot *s)
{
	if (!s->cuda)
		s->cuda = calloc(1, sizeof(struct cuda_slot));
	return s->cuda;
}

/*
 * Reserve the slot's next value, enqueue its store on stream (unless cc is
 * NULL: the work is in flight already), publish the arm and remember stream
 * for the fault probe, all under the slot's
 * lock: a value is taken only once its store is on a stream, so none is ever
 * skipped, and arms reach the daemon in value order (as cuflag_slot_arm()).
 */
static int arm_after(struct cuflag_slot *s, CUstream stream, CUcontext ctx,
		     struct cuda_client *cc, CUdeviceptr dflag, uint32_t *target)
{
	struct cuda_slot *cs;
	uint32_t t;
	int rc;

	pthread_mutex_lock(&s->lock);
	cs = slot_cuda_locked(s);
	if (!cs) {
		pthread_mutex_unlock(&s->lock);
		return -ENOMEM;
	}
	t = atomic_load_explicit(&s->next, memory_order_relaxed) + 1;
	rc = cc ? enqueue_store(cc, s, stream, dflag, t) : 0;
	if (rc) {
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	cuflag__reserved(s, t);
	cs->stream = stream;
	cs->ctx = ctx;
	rc = cuflag__publish(s, t);
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		*target = t;
	return rc;
}

/* What both CUDA calls check first; 0 or the negative errno to return. */
static int usable(struct cuflag_slot *s, const uint32_t *target)
{
	if (!s || !target)
		return -EINVAL;
	if (cuflag__forked(s->c))
		return -ECHILD;
	if (s->imported)
		return -EPERM; /* its exporter signals it */
	if (cuflag__cuda_load())
		return -ENODEV;
	return 0;
}

CUFLAG_EXPORT int cuflag_cuda_signal(cuflag_slot *s, CUstream stream, uint32_t *target)
{
	struct cuflag_advance adv = { 0 };
	struct cuda_client *cc;
	CUcontext ctx = NULL;
	CUdeviceptr base, dflag;
	int rc, capturing;

	rc = usable(s, target);
	if (rc)
		return rc;
	cc = cuda_client_get(s->c);
	if (!cc)
		return -ENOMEM;
	if (cuflag__cu.StreamGetCtx(stream, &ctx) != CUDA_SUCCESS || !ctx)
		return -ENODEV;
	capturing = cuflag__capturing(stream);
	if (capturing < 0)
		return capturing;
	rc = ctx_get(s->c, cc, ctx, &base, capturing ? &adv : NULL);
	if (rc)
		return rc;
	dflag = base + (CUdeviceptr)s->id * sizeof(uint32_t);
	if (capturing) {
		/* A fixed value would complete the slot at the first launch only.
		 * The graph advances the flag by one per launch instead; nothing is
		 * reserved or armed now: the arm comes with each launch. */
		rc = cuflag__advance_enqueue(&adv, stream, dflag, s->flag, cc->force_hostfn);
		if (rc == 0)
			*target = 0;
		return rc;
	}
	return arm_after(s, stream, ctx, cc, dflag, target);
}

/*
 * The flag's address for a kernel of the current context: the same
 * registration and per-context cache as a signal's, so a slot signalled
 * both ways registers its pages once. Nothing is armed: the kernel's values
 * are armed by cuflag_slot_arm*().
 */
CUFLAG_EXPORT int cuflag_cuda_slot_devptr(cuflag_slot *s, CUdeviceptr *out)
{
	struct cuda_client *cc;
	CUcontext ctx = NULL;
	CUdeviceptr base;
	int rc;

	if (!s || !out)
		return -EINVAL;
	if (cuflag__forked(s->c))
		return -ECHILD;
	if (s->imported)
		return -EPERM; /* its flag is the daemon's to write */
	if (cuflag__cuda_load())
		return -ENODEV;
	if (cuflag__cu.CtxGetCurrent(&ctx) != CUDA_SUCCESS)
		return -ENODEV; /* cuInit was not called, or the driver is unusable */
	if (!ctx)
		return -EINVAL;
	cc = cuda_client_get(s->c);
	if (!cc)
		return -ENOMEM;
	rc = ctx_get(s->c, cc, ctx, &base, NULL);
	if (rc)
		return rc;
	*out = base + (CUdeviceptr)s->id * sizeof(uint32_t);
	return 0;
}

CUFLAG_EXPORT int cuflag_cuda_launched(cuflag_slot *s, CUstream stream, uint32_t *target)
{
	CUcontext ctx = NULL;
	int rc = usable(s, target);

	if (rc)
		return rc;
	if (cuflag__cu.StreamGetCtx(stream, &ctx) != CUDA_SUCCESS || !ctx)
		return -ENODEV;
	if (!cuda_client_get(s->c))
		return -ENOMEM;
	return arm_after(s, stream, ctx, NULL, 0, target);
}

/*
 * The stream waits until the flag reaches value. cuStreamWaitValue32 compares
 * as unsigned numbers and the timeline across the wrap at 2^32, so the value
 * reached now decides: a value ahead and numerically below it lies past the
 * wrap, and the stream first waits for the flag's top bit to clear (NOR with
 * 0x7fffffff: some bit outside the mask is 0), which happens when the flag
 * wraps, then for GEQ value.
 */
CUFLAG_EXPORT int cuflag_cuda_wait(cuflag_slot *s, CUstream stream, uint32_t value)
{
	struct cuda_client *cc;
	CUcontext ctx = NULL;
	CUdeviceptr base, dflag;
	uint32_t now;
	int rc;

	if (!s)
		return -EINVAL;
	if (cuflag__forked(s->c))
		return -ECHILD;
	if (cuflag__cuda_load())
		return -ENODEV;
	now = __atomic_load_n(s->flag, __ATOMIC_ACQUIRE);
	if (cuflag_tl_reached(now, value))
		return 0;
	if (cuflag__slot_gone(s))
		return -EPIPE;
	cc = cuda_client_get(s->c);
	if (!cc)
		return -ENOMEM;
	if (cuflag__cu.StreamGetCtx(stream, &ctx) != CUDA_SUCCESS || !ctx)
		return -ENODEV;
	rc = ctx_get(s->c, cc, ctx, &base, NULL);
	if (rc)
		return rc;
	dflag = base + (CUdeviceptr)s->id * sizeof(uint32_t);
	if (value < now && cuflag__cu.StreamWaitValue32(stream, dflag, 0x7fffffffu,
							CU_STREAM_WAIT_VALUE_NOR) != CUDA_SUCCESS)
		return -EIO;
	if (cuflag__cu.StreamWaitValue32(stream, dflag, value, CU_STREAM_WAIT_VALUE_GEQ) !=
	    CUDA_SUCCESS)
		return -EIO;
	return 0;
}

CUFLAG_EXPORT int cuflag_cuda_capturing(CUstream stream)
{
	if (cuflag__cuda_load())
		return -ENODEV;
	return cuflag__capturing(stream);
}

CUFLAG_EXPORT int cuflag_cuda_check(cuflag_slot *s)
{
	if (!s)
		return -EINVAL;
	if (cuflag__forked(s->c))
		return -ECHILD;
	if (cuflag__cuda_load())
		return 0; /* never signalled from CUDA: nothing can have faulted */
	if (atomic_load(&s->fault))
		return atomic_load(&s->fault);
	return cuda_probe(s);
}

int cuflag__ipc_map(struct cuflag_client *c, int fd, uint64_t size)
{
	CUmemGenericAllocationHandle h = 0;
	CUmemAccessDesc acc[17];
	CUdeviceptr va = 0;
	int ndev = 0, n = 0;

	if (cuflag__cuda_load() || cuflag__cu.Init(0) != CUDA_SUCCESS ||
	    cuflag__cu.DeviceGetCount(&ndev) != CUDA_SUCCESS)
		return -ENODEV;
	if (size < (uint64_t)c->layout.nslots * sizeof(uint32_t))
		return -EBADMSG;
	/* The host reads and writes it; so may every device of this process. */
	acc[n++] = (CUmemAccessDesc){ .location = { .type = CU_MEM_LOCATION_TYPE_HOST_NUMA },
				      .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	for (int d = 0; d < ndev && n < 17; d++)
		acc[n++] = (CUmemAccessDesc){
			.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d },
			.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE
		};
	if (cuflag__cu.MemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
						    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) !=
	    CUDA_SUCCESS)
		return -ENODEV;
	if (cuflag__cu.MemAddressReserve(&va, size, 0, 0, 0) != CUDA_SUCCESS)
		goto fail;
	if (cuflag__cu.MemMap(va, size, 0, h, 0) != CUDA_SUCCESS) {
		cuflag__cu.MemAddressFree(va, size);
		va = 0;
		goto fail;
	}
	if (cuflag__cu.MemSetAccess(va, size, acc, (size_t)n) != CUDA_SUCCESS) {
		cuflag__cu.MemUnmap(va, size);
		cuflag__cu.MemAddressFree(va, size);
		va = 0;
		goto fail;
	}
	c->ipc_va = va;
	c->ipc_size = size;
	c->ipc_handle = h;
	c->flags = (volatile uint32_t *)(uintptr_t)va;
	return 0;
fail:
	cuflag__cu.MemRelease(h);
	return -ENODEV;
}

void cuflag__ipc_unmap(struct cuflag_client *c)
{
	if (!c->ipc_va)
		return;
	cuflag__cu.MemUnmap(c->ipc_va, c->ipc_size);
	cuflag__cu.MemAddressFree(c->ipc_va, c->ipc_size);
	cuflag__cu.MemRelease(c->ipc_handle);
	c->ipc_va = 0;
}
