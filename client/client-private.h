/* SPDX-License-Identifier: MIT */
/* What the client library's files share; nothing here is public. */
#ifndef CUFLAG_CLIENT_PRIVATE_H
#define CUFLAG_CLIENT_PRIVATE_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "call.h"
#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "fork.h"
#include "proto.h"

/* A daemon page mapping a resume replaced: other threads may still read it,
 * so it stays mapped until the client goes. */
struct retired_page {
	const struct cuflag_daemon_page *page;
	size_t size;
	struct retired_page *next;
};

/*
 * The connection's state as the client follows it for an event loop
 * (dispatch.c, under dispatch_lock), moved only by conn_move() there, which
 * asserts each move is one of these:
 *
 *   SERVED          -> GONE      the daemon hung up
 *   SERVED          -> LOST      it hung up, and the client cannot resume
 *                                (cuflag__resumable())
 *   GONE            -> RESUMING  an attempt's HELLO went out
 *   RESUMING        -> GONE      the attempt failed, or had no answer in time
 *   GONE, RESUMING  -> SERVED    resumed, by the loop's attempt or any call's
 *   all but CLOSED  -> CLOSED    the client is freed
 *
 * Calls that block (a request, a wait, an arm on a full queue) resume by
 * themselves (cuflag__resume()); the loop's state follows them through the
 * connection generation. A client in a child of fork(2) is none of these:
 * cuflag__forked() refuses it at every entry.
 */
enum cuflag_conn_state {
	CUFLAG_CONN_SERVED,   /* a daemon serves the connection (a new client's state) */
	CUFLAG_CONN_GONE,     /* it hung up: attempts spaced, flags looked at */
	CUFLAG_CONN_RESUMING, /* an attempt's HELLO is out (attempt.sock), its answer awaited */
	CUFLAG_CONN_LOST,     /* it hung up, and its flags died with it */
	CUFLAG_CONN_CLOSED,   /* the client is being freed */
};

/*
 * The library's mutexes, in the order a thread takes them: holding one, it
 * takes only those further down (TSan checks it in CI: scripts/test.sh).
 *
 *   dispatch_lock  an event loop's dispatch step (dispatch.c)
 *   s->lock        a slot's next value, held until its arm is written: a
 *                  slot's arms reach the daemon in value order, and a CUDA
 *                  arm's value is on a stream before it is written (cuda.c);
 *                  a resume that a full queue needs runs under it (only that
 *                  slot's arms wait behind it)
 *   resume_lock    one resume at a time
 *   req_lock       one request on the connection at a time
 *   g->lock        a group's drain
 *   slots_lock     the client's lists of slots and groups
 *
 * dispatch_lock and s->lock are never held together. Two more are leaves,
 * under which nothing is taken: arm_lock (the arm queue's one producer,
 * taken under s->lock; a resume that a full queue needs runs with it let
 * go: slot-arm.c) and the CUDA binding's lock (cuda.c).
 */
struct cuflag_client {
	/* The connection. Its fd number never changes: a resume puts the new
	 * connection in its place (dup2), so no thread can use a stale number. */
	int sock;
	char path[108];           /* the daemon's socket, to resume with */
	uint8_t user_daemon;      /* the user's own (user-daemon.h): started again if gone */
	int region_fd;            /* ours: a daemon that restarts is handed it again */
	pthread_mutex_t req_lock; /* one request in flight at a time (order above) */
	uint32_t next_req;

	/* Resuming with the daemon that listens after a restart (resume.c). */
	pthread_mutex_t resume_lock; /* at most one resume in flight (order above) */
	_Atomic unsigned conn_gen;   /* bumped by every resume */
	uint64_t last_try_ns;        /* attempts are spaced while nobody listens */
	_Atomic int resume_timeout_ms;
	struct retired_page *retired;

	uint8_t *region;
	struct cuflag_region_layout layout;
	_Atomic uint32_t *head;   /* written by the daemon */
	_Atomic uint32_t *tail;   /* written by us */
	_Atomic uint64_t *arm_time; /* by us: when we last stored the tail */
	struct cuflag_arm *queue;
	volatile uint32_t *flags;

	const struct cuflag_daemon_page *dpage; /* atomic pointer: a resume swaps it */
	size_t dpage_size;
	volatile struct cuflag_slot_state *states; /* the daemon's record per slot */
	int wake_fd;
	uint64_t epoch;
	int slab;

	pthread_mutex_t arm_lock; /* the arm queue has one producer at a time (a leaf) */
	uint32_t tail_local;
	uint32_t head_seen;       /* the head as last read (under arm_lock) */

	pthread_mutex_t slots_lock; /* the lists below (taken last) */
	struct cuflag_slot *slots; /* every slot held, for disconnect */
	struct cuflag_slot **by_id; /* layout.nslots: the slot of each id (slots_lock) */
	struct cuflag_group **groups; /* layout.ngroups: the group of each id (slots_lock) */

	/* Driven by an event loop (dispatch.c), under dispatch_lock (taken first). */
	pthread_mutex_t dispatch_lock;
	_Atomic int dispatch_ep;  /* what the loop waits on; -1 until asked for */
	unsigned dispatch_gen;    /* the connection generation it watches */
	enum cuflag_conn_state conn_state;
	uint64_t gone_ns;         /* when it found the daemon gone (not SERVED) */
	uint64_t try_ns;          /* while gone: the next resume attempt */
	uint64_t look_ns;         /* while gone: the next look at the flags */
	unsigned look_us;         /* the sleep before it, growing */
	uint64_t probe_ns;        /* the next fault probe of CUDA slots */
	int refusal;              /* why the daemon that listens refused us, or 0 (not SERVED) */
	struct cuflag_attempt {   /* a resume attempt that does not wait */
		int sock;         /* its HELLO sent; -1: none */
		uint32_t id;
		unsigned gen;     /* the connection generation it replaces */
		uint64_t sent_ns;
	} attempt;

	/* CUDA binding state (cuda.c), NULL until first used. */
	void *cuda;
	void (*cuda_fini)(struct cuflag_client *c);
	/* Checks a slot's streams; 0 or the negative errno of a device fault. */
	int (*cuda_probe)(struct cuflag_slot *s);

	/* --slab cuda-ipc: the imported flags allocation (c->flags points in it). */
	uint64_t ipc_va, ipc_size, ipc_handle;
	unsigned fork_gen;        /* cuflag__fork_gen() when connected */
};

struct cuflag_slot {
	struct cuflag_client *c;
	uint32_t id;
	int efd;
	volatile uint32_t *flag;
	pthread_mutex_t lock;    /* reserving the next value, until armed (order above) */
	_Atomic uint32_t next;   /* last value reserved */
	_Atomic uint32_t first;  /* the oldest value a wait may name (cuflag__reserved) */
	void *_Atomic data;      /* the caller's, cuflag_slot_set_data() */
	_Atomic uint32_t consumed; /* the daemon's record up to which consume counted */
	int wait_ep;             /* cached edge-triggered epoll for waits, or -1 */
	_Atomic int wait_ep_busy;
	uint32_t wait_ep_gen;    /* efd_gen the cached epoll was made for */
	_Atomic uint32_t efd_gen; /* bumped when cuflag_slot_bind_eventfd() swaps efd */
	int retired_efd;         /* the eventfd before the last bind, kept open */
	/* Set by the CUDA binding: checks the slot's streams for a fault. */
	_Atomic int fault;       /* 0, or the negative errno a fault ended work with */
	void *cuda;              /* per-slot CUDA state (cuda.c) */
	struct cuflag_group *group; /* NULL, or the group whose eventfd rings for it */
	uint32_t rung;           /* while the daemon is gone: the flag dispatch rang for */
	struct cuflag_slot *prev, *next_slot;
	/* Completions across processes (export.c). */
	uint8_t imported;        /* watches another slot: never armed here */
	uint8_t detached;        /* imported, and no daemon holds it any more */
	uint8_t gone_told;       /* a group's drain handed out its gone record */
	int handle_fd;           /* the handle, kept for a daemon that restarts; or -1 */
};

struct cuflag_group {
	struct cuflag_client *c;
	uint32_t id;
	int efd;
	volatile struct cuflag_group_ring *ring;
	pthread_mutex_t lock;    /* one drain at a time (order above) */
	uint32_t head;           /* records consumed (the truth of ring->head) */
	uint32_t overflows_seen;
	_Atomic int rescan;      /* look at every slot of the group at the next drain */
};

/* The eventfd a slot's signals ring: its own, or its group's. */
static inline int cuflag__doorbell(const struct cuflag_slot *s)
{
	return s->group ? s->group->efd : __atomic_load_n(&s->efd, __ATOMIC_ACQUIRE);
}

/* Record t as the slot's last reserved value (s->lock held). The oldest
 * value a wait may name follows 2^31 behind: timeline arithmetic orders no
 * two values further apart, and a slot armed for ever must not see its
 * start again after 2^32 values. */
static inline void cuflag__reserved(struct cuflag_slot *s, uint32_t t)
{
	if ((uint32_t)(t - atomic_load_explicit(&s->first, memory_order_relaxed)) > (1u << 31))
		atomic_store_explicit(&s->first, t - (1u << 31), memory_order_relaxed);
	atomic_store_explicit(&s->next, t, memory_order_relaxed);
}

/* Count a slot's completions from the daemon's record: *n of them (> 0), or
 * 0 when none since the last count. Several threads may call it. */
int cuflag__slot_take(struct cuflag_slot *s, uint64_t *n);

/* ALLOC n slots (of group g, or none), linked into the client. */
int cuflag__slots_acquire(struct cuflag_client *c, struct cuflag_group *g, unsigned n,
			  struct cuflag_slot **out);

/* Free a group's local resources, without telling the daemon (NULL: none). */
void cuflag__group_free(struct cuflag_group *g);

/* GROUP: tell the daemon (on sock, req_lock held) of the group and its
 * eventfd (handover.c: a resume tells the new daemon the same). */
int cuflag__group_announce(struct cuflag_client *c, int sock, struct cuflag_group *g);

/* One IMPORT of handle on sock (req_lock held), into group grp or none: new
 * (s NULL), or s taken again after a restart. The grant in *g, the new
 * slot's eventfd (if new, not grouped) in *efd. */
int cuflag__import_on(struct cuflag_client *c, int sock, struct cuflag_group *grp, int handle,
		      struct cuflag_slot *s, struct cuflag_slot_grant *g, int *efd);

/*
 * Send one request and wait for its reply (one at a time per client); the
 * request's id is chosen here. Returns the reply's status (0 or a negative
 * errno from the daemon) or a transport error (-EPIPE, -ENOTCONN,
 * -ETIMEDOUT, ...); call->reply_len and call->reply_nfds describe what
 * arrived. A daemon gone away is resumed with first, as
 * cuflag__request_retry() says.
 */
int cuflag__request(struct cuflag_client *c, struct cuflag_call *call);

/*
 * The request-then-resume loop every request that needs the daemon goes
 * through: run(c, sock, arg) with c->req_lock held, on the client's
 * connection; when it finds the daemon gone, resume (waiting up to the
 * resume timeout) and run it once more on the new connection. run's
 * result, or -ENOTCONN (no daemon came back in time), -ESTALE or
 * -EOPNOTSUPP (no resume can mend it).
 */
int cuflag__request_retry(struct cuflag_client *c,
			  int (*run)(struct cuflag_client *c, int sock, void *arg), void *arg);

/* Whether the daemon's socket has hung up (non-blocking check). */
int cuflag__daemon_gone(struct cuflag_client *c);

/* One request on sock, the caller holding c->req_lock; as cuflag__request. */
int cuflag__request_on(struct cuflag_client *c, int sock, struct cuflag_call *call);

/* Whether a request error means the daemon went away (then resume). */
static inline int cuflag__gone_error(int rc)
{
	return rc == -EPIPE || rc == -ENOTCONN || rc == -ECONNRESET;
}

/*
 * The daemon went away (seen on connection generation gen): resume with the
 * one that listens now, unless another thread did since. wait: keep trying,
 * attempts spaced, up to the client's resume timeout; else at most one
 * attempt, and none if the last was less than the spacing ago. 0 once
 * resumed, or the last attempt's error.
 */
int cuflag__resume(struct cuflag_client *c, unsigned gen, int wait);

/* Whether the client can resume at all: its flags live in the region it
 * made (--slab memfd), which a daemon that restarts is handed again; with
 * --slab cuda-ipc they died with the daemon. */
int cuflag__resumable(const struct cuflag_client *c);

/* Who judges a resume's error (cuflag__resume_final()). */
enum cuflag_resume_by {
	CUFLAG_RESUME_BY_LOOP,    /* the event loop's attempts (dispatch.c) */
	CUFLAG_RESUME_BY_WAIT,    /* the blocking attempts of cuflag__resume(wait) */
	CUFLAG_RESUME_BY_REQUEST, /* what a request returns (cuflag__request_retry()) */
};

/* Whether a resume's error rc is final for by: the daemon that listens
 * refused us in a way no later attempt mends (resume.c says why the three
 * differ). */
int cuflag__resume_final(int rc, enum cuflag_resume_by by);

/*
 * A resume attempt that never waits, in two steps (dispatch.c drives them).
 * Start: unless another thread resumes, or the last attempt was less than
 * spacing_ns ago, connect and send HELLO: -EINPROGRESS (a->sock then waits
 * for the answer), 0 (resumed since gen), -EAGAIN (not now), -EOPNOTSUPP,
 * or the connection's error. Finish, once a->sock is readable: 0 resumed,
 * -EAGAIN (another thread holds the client: later), or the attempt's error
 * (a->sock closed then).
 */
int cuflag__attempt_start(struct cuflag_client *c, unsigned gen, uint64_t spacing_ns,
			  struct cuflag_attempt *a);
int cuflag__attempt_finish(struct cuflag_client *c, struct cuflag_attempt *a);

/* While the daemon is away, one attempt per this long; after a refusal
 * that only another daemon can mend (-ESTALE), per RESUME_REFUSED_NS. */
#define RESUME_SPACING_NS (25u * 1000000u)
#define RESUME_REFUSED_NS (1000u * 1000000u)

/* With no daemon, a wait looks at the flag after a sleep that starts here
 * and doubles up to the cap (cuflag_slot_wait(), cuflag_client_dispatch()). */
#define GONE_SLEEP_FIRST_US 50u
#define GONE_SLEEP_MAX_US 2000u

/* How often a wait on a slot signalled from CUDA probes its stream for a
 * device fault. */
#define FAULT_PROBE_MS 100

/* Watch fd in the epoll ep, edge-triggered (resume.c). */
int cuflag__epoll_watch(int ep, int fd);

/* A resume was made: the event loop's watch follows the new connection. */
void cuflag__dispatch_watch(struct cuflag_client *c);

/* A consume or a drain found nothing: with the daemon gone, resume (one
 * attempt that never waits behind another; when an event loop dispatches
 * the client, one step of its attempt, which never waits at all). */
void cuflag__resume_if_gone(struct cuflag_client *c);

/* Free what dispatching made (client_free). */
void cuflag__dispatch_free(struct cuflag_client *c);

/* HELLO on sock: the reply and the daemon page mapped. In two halves for
 * a resume attempt that does not wait for the answer: the request (its id
 * in *id), and its reply. */
int cuflag__hello(struct cuflag_client *c, int sock, struct cuflag_msg_hello_reply *r,
		  const struct cuflag_daemon_page **dp, size_t *dp_size);
int cuflag__hello_send(struct cuflag_client *c, int sock, uint32_t *id);
int cuflag__hello_recv(int sock, uint32_t id, struct cuflag_msg_hello_reply *r,
		       const struct cuflag_daemon_page **dp, size_t *dp_size);

/* Map a daemon page fd (read-only). */
int cuflag__map_daemon_page(int fd, const struct cuflag_daemon_page **out, size_t *size);

/* The daemon page now (a resume swaps it). */
static inline const struct cuflag_daemon_page *cuflag__dpage(const struct cuflag_client *c)
{
	return __atomic_load_n(&c->dpage, __ATOMIC_ACQUIRE);
}

/* Wake the scanner if it published "parked" (after a full fence). */
void cuflag__wake_scanner(struct cuflag_client *c);

/*
 * Publish an arm of (slot, target) in the queue: waits while the queue is
 * full, wakes a parked scanner. 0 or -ENOTCONN.
 */
int cuflag__publish(struct cuflag_slot *s, uint32_t target);

/*
 * Import and map the daemon's CUDA IPC flags allocation (fd, size bytes) for
 * the host and every device; sets c->flags. 0, or -ENODEV when this process
 * cannot use CUDA. cuflag__ipc_unmap undoes it.
 */
int cuflag__ipc_map(struct cuflag_client *c, int fd, uint64_t size);
void cuflag__ipc_unmap(struct cuflag_client *c);

/* Drop the slots' cached wait epolls that no waiter holds (they watch the
 * daemon connection, which changed). */
void cuflag__forget_waits(struct cuflag_client *c);

/* Free a slot's local resources (fds, memory), without telling the daemon. */
void cuflag__slot_free(struct cuflag_slot *s);

/* Whether target lies in the slot's timeline as reserved so far (slot.c):
 * a wait for any other value would never end, or answer from a timeline
 * this slot never had. */
int cuflag__slot_reserved(const struct cuflag_slot *s, uint32_t target);

/* A slot for a grant of the daemon's, owning efd (NULL: out of memory), and
 * its linking into the client's list (slots_lock taken here). */
struct cuflag_slot *cuflag__slot_new(struct cuflag_client *c, const struct cuflag_slot_grant *g,
				     int efd);
void cuflag__slot_link(struct cuflag_client *c, struct cuflag_slot *s);

/* Whether an imported slot's exporter went (its record says so, or no daemon
 * took it back after a restart). */
static inline int cuflag__slot_gone(const struct cuflag_slot *s)
{
	return s->imported &&
	       (s->detached || __atomic_load_n(&s->c->states[s->id].armed, __ATOMIC_ACQUIRE) ==
				       CUFLAG_IMPORT_GONE);
}

/* A resume's handover on sock (req_lock and slots_lock held; handover.c):
 * every group and slot ADOPTed, then the handles of exported slots handed
 * back and imported slots taken again. An import no daemon takes back is
 * detached (its waits end with -EPIPE). 0 or the connection's error. */
int cuflag__handover(struct cuflag_client *c, int sock);

/* Once the new daemon serves: ring the doorbell of every slot whose record
 * moved past what was counted, and have every group look at all its slots. */
void cuflag__ring_unread(struct cuflag_client *c);

/*
 * A client belongs to the process that connected it. A child of fork(2)
 * shares the parent's socket, arm queue and eventfds: requests from both would
 * mix on the socket, two producers would corrupt the queue, and a read of an
 * eventfd would take the parent's completions. So in the child every call that
 * would touch them returns -ECHILD, and releasing or disconnecting only frees
 * the child's copies. cuflag__forked() is one load and one compare.
 */
static inline int cuflag__forked(const struct cuflag_client *c)
{
	return c->fork_gen != cuflag__fork_gen();
}

#define CUFLAG_EXPORT __attribute__((visibility("default")))

#endif
