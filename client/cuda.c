/* SPDX-License-Identifier: MIT */
/*
 * The CUDA binding: register the client's flag pages in each context a
 * stream signals from, enqueue the flag store on the stream, arm the slot.
 * Driver API only.
 */
#include <cuda.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client-private.h"
#include "cuda-load.h"
#include "cuflag/cuflag_cuda.h"

/* One context the flag pages are usable from, and their device address there. */
struct cuda_ctx {
	CUcontext ctx;
	CUdeviceptr flags_dptr;
	int registered_here; /* this context made the registration: it undoes it */
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
		if (!cc->ctxs[i].registered_here)
			continue;
		/* A context destroyed already took its registration with it. */
		if (cuflag__cu.CtxPushCurrent(cc->ctxs[i].ctx) == CUDA_SUCCESS) {
			(void)cuflag__cu.MemHostUnregister((void *)c->flags);
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

/*
 * The device address of the flag pages in ctx, registering them on first
 * use. PORTABLE makes one registration valid in every context, so a second
 * context usually finds it there already; either way each context's device
 * address is asked of that context and cached.
 */
static int flags_dptr_in(struct cuflag_client *c, struct cuda_client *cc, CUcontext ctx,
			 CUdeviceptr *out)
{
	void *host = (void *)c->flags;
	size_t len = c->layout.size - c->layout.flags_off;
	CUcontext dummy;
	CUresult r;
	int rc = 0, here = 0;

	/* An imported CUDA IPC allocation is mapped at the same address for
	 * every device already: nothing to register. */
	if (c->ipc_va) {
		*out = (CUdeviceptr)c->ipc_va;
		return 0;
	}
	pthread_mutex_lock(&cc->lock);
	for (unsigned i = 0; i < cc->n; i++) {
		if (cc->ctxs[i].ctx == ctx) {
			*out = cc->ctxs[i].flags_dptr;
			pthread_mutex_unlock(&cc->lock);
			return 0;
		}
	}
	if (cc->n == cc->cap) {
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
	r = cuflag__cu.MemHostRegister(host, len, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
	if (r == CUDA_SUCCESS)
		here = 1;
	else if (r != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
		rc = -ENODEV;
	if (!rc && cuflag__cu.MemHostGetDevicePointer(out, host, 0) != CUDA_SUCCESS) {
		rc = -ENODEV;
		if (here)
			(void)cuflag__cu.MemHostUnregister(host);
	}
	(void)cuflag__cu.CtxPopCurrent(&dummy);
	if (!rc)
		cc->ctxs[cc->n++] = (struct cuda_ctx){ ctx, *out, here };
	pthread_mutex_unlock(&cc->lock);
	return rc;
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

	if (!cc->force_hostfn &&
	    cuflag__cu.StreamWriteValue32(stream, dptr, value, CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS)
		return 0;
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

CUFLAG_EXPORT int cuflag_cuda_signal(cuflag_slot *s, CUstream stream, uint32_t *target)
{
	struct cuda_client *cc;
	struct cuda_slot *cs;
	CUcontext ctx = NULL;
	CUdeviceptr base;
	uint32_t t;
	int rc;

	if (!s || !target)
		return -EINVAL;
	if (cuflag__forked(s->c))
		return -ECHILD;
	if (cuflag__cuda_load())
		return -ENODEV;
	cc = cuda_client_get(s->c);
	if (!cc)
		return -ENOMEM;
	if (cuflag__cu.StreamGetCtx(stream, &ctx) != CUDA_SUCCESS || !ctx)
		return -ENODEV;
	rc = flags_dptr_in(s->c, cc, ctx, &base);
	if (rc)
		return rc;

	/* Reserve, enqueue and record under the slot's lock: a value is taken
	 * only once its store is on a stream, so none is ever skipped. */
	pthread_mutex_lock(&s->lock);
	cs = s->cuda;
	if (!cs) {
		cs = calloc(1, sizeof(*cs));
		if (!cs) {
			pthread_mutex_unlock(&s->lock);
			return -ENOMEM;
		}
	}
	t = atomic_load_explicit(&s->next, memory_order_relaxed) + 1;
	rc = enqueue_store(cc, s, stream, base + (CUdeviceptr)s->id * sizeof(uint32_t), t);
	if (rc) {
		if (!s->cuda)
			free(cs);
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	atomic_store_explicit(&s->next, t, memory_order_relaxed);
	cs->stream = stream;
	cs->ctx = ctx;
	s->cuda = cs;
	/* Under the slot's lock, as cuflag_slot_arm() does: in value order. */
	rc = cuflag__publish(s, t);
	pthread_mutex_unlock(&s->lock);
	if (rc == 0)
		*target = t;
	return rc;
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
