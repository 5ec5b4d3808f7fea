/* SPDX-License-Identifier: MIT */
/*
 * cuflag wire protocol and shared-memory layouts.
 *
 * The one place where every byte that crosses a process boundary is defined:
 * the messages on cuflagd's SOCK_SEQPACKET socket, the per-client region
 * (flags + arm queue) and the daemon-wide read-only page. Fixed-width fields
 * only, no bitfields, reserved fields must be zero, and every size and offset
 * is pinned by a static assertion so that a change to the layout is a
 * deliberate change to the protocol version.
 */
#ifndef CUFLAG_PROTO_H
#define CUFLAG_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define CUFLAG_PROTO_VERSION 3u

/* ------------------------------------------------------------------ */
/* Wire messages                                                       */
/* ------------------------------------------------------------------ */

/* Largest message either side sends or accepts, header included. */
#define CUFLAG_MSG_MAX 4096u
/* Most fds one message may carry (kept well under the kernel's SCM_MAX_FD). */
#define CUFLAG_MSG_MAX_FDS 64u
/* Most fds the kernel lets one message carry (SCM_MAX_FD): a receiver with
 * room for fewer has the rest released in its own thread, so the daemon
 * receives with room for this many and refuses what its protocol does not. */
#define CUFLAG_SCM_MAX_FD 253u
/* Most slots one ALLOC or FREE request may name; the library batches. */
#define CUFLAG_BATCH_MAX CUFLAG_MSG_MAX_FDS
/* Longest reason text in an error reply, NUL included. */
#define CUFLAG_REASON_MAX 128u

enum cuflag_msg_type {
	CUFLAG_MSG_HELLO = 1,   /* version handshake; reply: the region layout */
	CUFLAG_MSG_ALLOC = 2,   /* allocate N slots; reply carries N eventfds */
	CUFLAG_MSG_FREE = 3,    /* free N slots */
	CUFLAG_MSG_BIND = 4,    /* replace a slot's eventfd with one the client sends */
	CUFLAG_MSG_STATS = 5,   /* daemon-wide counters */
	CUFLAG_MSG_CLIENTS = 6, /* admin: one reply per client, then an empty end */
	CUFLAG_MSG_ATTACH = 7,  /* after HELLO: the client's region and wake eventfd */
	CUFLAG_MSG_ADOPT = 8,   /* after an ATTACH that resumes: slot ids with their eventfds */
	CUFLAG_MSG_GROUP = 9,   /* a group of slots: its ring and its one eventfd */
	CUFLAG_MSG_UNGROUP = 10, /* the group's slots are all freed: let it go */
	CUFLAG_MSG_METRICS = 11, /* a page of per-client metrics (see below) */
	CUFLAG_MSG_STUCK = 12,   /* one reply per stuck slot, then an end */
	CUFLAG_MSG_EXPORT = 13,  /* a handle that names a slot (see below) */
	CUFLAG_MSG_IMPORT = 14,  /* a slot that watches the slot a handle names */
	CUFLAG_MSG_TYPE_END,
};
/* A reply has the request's type with this bit set and echoes its id. */
#define CUFLAG_MSG_REPLY 0x8000u

struct cuflag_msg_hdr {
	uint16_t type;   /* enum cuflag_msg_type, | CUFLAG_MSG_REPLY on replies */
	uint16_t nfds;   /* fds carried in SCM_RIGHTS; must equal what arrived */
	uint32_t len;    /* whole message, header included */
	uint32_t req_id; /* chosen by the requester, echoed in the reply */
	int32_t status;  /* replies: 0 or a negative errno; requests: 0 */
};
_Static_assert(sizeof(struct cuflag_msg_hdr) == 16, "hdr size");
_Static_assert(offsetof(struct cuflag_msg_hdr, nfds) == 2, "hdr nfds");
_Static_assert(offsetof(struct cuflag_msg_hdr, len) == 4, "hdr len");
_Static_assert(offsetof(struct cuflag_msg_hdr, req_id) == 8, "hdr req_id");
_Static_assert(offsetof(struct cuflag_msg_hdr, status) == 12, "hdr status");

/* An error reply (status < 0) carries this body: a NUL-terminated reason. */
struct cuflag_msg_error {
	char reason[CUFLAG_REASON_MAX];
};

struct cuflag_msg_hello {
	uint32_t version_min; /* oldest protocol version the client speaks */
	uint32_t version_max; /* newest */
	uint32_t flags;       /* must be 0 */
	uint32_t reserved;    /* must be 0 */
};
_Static_assert(sizeof(struct cuflag_msg_hello) == 16, "hello size");

enum cuflag_slab_kind {
	CUFLAG_SLAB_MEMFD = 1,    /* sealed memfd; the client registers it with CUDA */
	CUFLAG_SLAB_CUDA_IPC = 2, /* cuMemCreate HOST_NUMA, POSIX-fd handle */
};

/*
 * Reply to HELLO; fds: [0] the daemon page. It says which region this daemon
 * takes: the client creates it (a memfd of region_size bytes, every page
 * allocated, the header written, sealed against shrink, grow and further
 * seals), so the region's memory is charged to the client, and hands it over
 * with ATTACH. Where things sit inside the region travels here ("sizes
 * travel"), so the layout can grow without breaking old clients.
 */
struct cuflag_msg_hello_reply {
	uint32_t version;      /* the version chosen */
	uint32_t slab;         /* enum cuflag_slab_kind */
	uint64_t epoch;        /* changes at every daemon start */
	uint64_t region_size;  /* bytes of the region memfd */
	uint32_t nslots;       /* flags in the region = most slots this client holds */
	uint32_t queue_cap;    /* arm queue entries, a power of two */
	uint32_t head_off;     /* uint32 written by the daemon: entries consumed */
	uint32_t tail_off;     /* uint32 written by the client: entries produced */
	uint32_t queue_off;    /* struct cuflag_arm[queue_cap] */
	uint32_t flags_off;    /* uint32 flags[nslots], page-aligned */
	uint32_t page_size;    /* bytes of the daemon page */
	uint32_t client_id;    /* the daemon's name for this connection */
	uint64_t flags_size;   /* CUDA_IPC: bytes of the flags allocation; else 0 */
	uint32_t state_off;    /* struct cuflag_slot_state[nslots], daemon-written */
	uint32_t groups_off;   /* struct cuflag_group_ring[ngroups], each ring_size bytes */
	uint32_t ngroups;      /* groups a client may have */
	uint32_t ring_cap;     /* completion records per group ring, a power of two */
	uint32_t ring_size;    /* bytes per group: header line + ring_cap records */
	uint32_t reserved;
};
_Static_assert(sizeof(struct cuflag_msg_hello_reply) == 88, "hello reply size");
_Static_assert(offsetof(struct cuflag_msg_hello_reply, groups_off) == 68, "hr groups");
_Static_assert(offsetof(struct cuflag_msg_hello_reply, flags_size) == 56, "hr flags size");
_Static_assert(offsetof(struct cuflag_msg_hello_reply, region_size) == 16, "hr size");
_Static_assert(offsetof(struct cuflag_msg_hello_reply, flags_off) == 44, "hr flags");

struct cuflag_msg_alloc {
	uint32_t count; /* 1..CUFLAG_BATCH_MAX */
	uint32_t group; /* 0, or a group id + 1: the slots signal that group's ring */
};
_Static_assert(sizeof(struct cuflag_msg_alloc) == 8, "alloc size");

/* One allocated slot: index into the region's flags and its starting value. */
struct cuflag_slot_grant {
	uint32_t id;
	uint32_t start; /* the flag holds this when the slot is handed out */
};
_Static_assert(sizeof(struct cuflag_slot_grant) == 8, "grant size");

/* Reply to ALLOC: count grants; fds: one eventfd per grant, in order (none
 * for slots of a group: the group's eventfd rings for them). */
struct cuflag_msg_alloc_reply {
	uint32_t count;
	uint32_t reserved;
	struct cuflag_slot_grant grants[CUFLAG_BATCH_MAX];
};
_Static_assert(offsetof(struct cuflag_msg_alloc_reply, grants) == 8, "ar grants");

/* FREE: count ids (1..CUFLAG_BATCH_MAX); the message length must match. */
struct cuflag_msg_free {
	uint32_t count;
	uint32_t reserved;
	uint32_t ids[CUFLAG_BATCH_MAX];
};
_Static_assert(offsetof(struct cuflag_msg_free, ids) == 8, "free ids");

/* BIND: fds: [0] an eventfd of the client's that replaces the slot's. */
struct cuflag_msg_bind {
	uint32_t id;
	uint32_t reserved;
};
_Static_assert(sizeof(struct cuflag_msg_bind) == 8, "bind size");

/*
 * ATTACH: the second message of every connection. fds: [0] the region memfd
 * the client made (see the HELLO reply), [1] its wake eventfd. The daemon
 * checks the memfd (a sealed memfd of exactly its layout's size, every page
 * allocated, a matching header, held by no live session) and maps it. With
 * slots > 0 the client resumes a region a daemon that went away served: the
 * ADOPTs that follow name its slots, and the daemon reads the arm queue only
 * once every slot is adopted, so an arm queued while no daemon ran finds its
 * slot. Reply: no body; with slab CUDA_IPC, fds: [0] the flags allocation (a
 * POSIX-fd CUDA handle of flags_size bytes, flags at offset 0; the region's
 * own flag pages are then unused).
 */
struct cuflag_msg_attach {
	uint32_t flags;    /* must be 0 */
	uint32_t slots;    /* how many slots the ADOPTs that follow will name */
	uint64_t epoch;    /* of the daemon the region came from; 0 for a new one */
};
_Static_assert(sizeof(struct cuflag_msg_attach) == 16, "attach size");

/* ADOPT: count ids (1..CUFLAG_BATCH_MAX) and as many eventfds, in order; or,
 * with group = a group id + 1, slots of that group (GROUP sent first) and no
 * fds. */
struct cuflag_msg_adopt {
	uint32_t count;
	uint32_t group;
	uint32_t ids[CUFLAG_BATCH_MAX];
};

/* GROUP: fds: [0] the group's eventfd (the client's). UNGROUP: no fds, and
 * no slot of the group may be held. */
struct cuflag_msg_group {
	uint32_t id;       /* 0..ngroups-1 */
	uint32_t reserved; /* must be 0 */
};
_Static_assert(sizeof(struct cuflag_msg_group) == 8, "group size");
_Static_assert(offsetof(struct cuflag_msg_adopt, ids) == 8, "adopt ids");
_Static_assert(offsetof(struct cuflag_msg_adopt, ids) == offsetof(struct cuflag_msg_free, ids),
	       "FREE and ADOPT share one id batch layout");

/*
 * Body bytes of a FREE or ADOPT naming n ids, and of an ALLOC reply with n
 * grants: the messages whose length follows their count. 64-bit, so that a
 * peer's count cannot wrap the sum.
 */
static inline uint64_t cuflag_id_batch_len(uint64_t n)
{
	return offsetof(struct cuflag_msg_free, ids) + n * sizeof(uint32_t);
}

static inline uint64_t cuflag_alloc_reply_len(uint64_t n)
{
	return offsetof(struct cuflag_msg_alloc_reply, grants) + n * sizeof(struct cuflag_slot_grant);
}

/* Reply to STATS. */
struct cuflag_msg_stats_reply {
	uint32_t version;
	uint32_t slab;
	uint64_t epoch;
	uint64_t uptime_ms;
	uint32_t clients;
	uint32_t slots;      /* allocated, all clients */
	uint64_t armed;      /* arms taken from queues since start */
	uint64_t wakes;      /* eventfd writes by the scanner */
	uint64_t completions;/* sum of the counts written */
	uint64_t parks;      /* times the scanner parked */
	uint64_t passes;     /* scanner passes */
	uint64_t pending;    /* slots armed and not yet complete, now */
	uint64_t bad_arms;   /* arm entries refused (bad index, not owned, stale) */
	uint64_t dropped;    /* clients disconnected for a protocol error */
	uint32_t scanner_state; /* enum cuflag_scanner_state */
	uint32_t max_clients;
	uint32_t slots_per_client;
	uint32_t spin_us;
	char daemon_version[16]; /* the daemon's release, NUL-terminated */
	/* What the scanner costs (since the daemon's start). */
	uint32_t scanner_mode;   /* 0 spin, 1 adaptive (cuflagd --scanner-mode) */
	uint32_t grouped_slots;  /* of slots, those in a group (0 from older daemons) */
	uint64_t scanner_cpu_ns; /* the scanner thread's CPU time */
	uint64_t scanner_wakeups;/* times it woke from a park or a sleep */
	uint64_t scanner_sleeps; /* of which from a sleep (until a completion was due) */
	uint64_t parked_ns;      /* time parked until woken */
	uint64_t sleeping_ns;    /* time sleeping until a completion was due */
	uint64_t spinning_ns;    /* the rest: passes, and spins between them */
	uint64_t timer_late_ns;  /* how late its timed waits end, lately (running mean) */
};
_Static_assert(sizeof(struct cuflag_msg_stats_reply) == 192, "stats size");
_Static_assert(offsetof(struct cuflag_msg_stats_reply, daemon_version) == 112, "stats ver");
_Static_assert(offsetof(struct cuflag_msg_stats_reply, scanner_cpu_ns) == 136, "stats cpu");
_Static_assert(offsetof(struct cuflag_msg_stats_reply, spinning_ns) == 176, "stats spin");

/* One reply per client to CLIENTS; a reply with id 0 ends the list. */
struct cuflag_msg_client_info {
	uint32_t client_id;
	int32_t pid;
	uint32_t uid;
	uint32_t gid;
	uint32_t slots;
	uint32_t age_s;   /* seconds since it connected (0 from older daemons) */
	uint64_t armed;   /* arms taken */
	uint64_t wakes;   /* eventfd writes */
	uint64_t pending; /* slots armed, not complete */
	uint64_t connected_ms; /* when it connected, in ms after the daemon's start (not an age) */
};
_Static_assert(sizeof(struct cuflag_msg_client_info) == 56, "client info size");

/*
 * METRICS: what the daemon records, a page at a time. Each reply is one
 * record starting with its kind. The first page (after_id 0) has the
 * daemon's record, then one per user the asker may see (and, asked with
 * CUFLAG_METRICS_WANT_TOTALS, one USER_TOTALS per user); every page then has
 * up to CUFLAG_METRICS_PAGE clients with ids above after_id, lowest first,
 * and ends with an END record naming where the next page starts. Who is
 * seen follows CLIENTS: a user its own clients and user record, root and
 * the admin group everyone's.
 *
 * A reader refuses a record kind it does not know (its length is the kind's),
 * so a new kind is sent only to a reader that asks for it in want: an older
 * reader sends 0 and reads what it always did; an older daemon refuses a
 * want it does not know with -EINVAL (it checks the word is zero), and the
 * reader asks again without it.
 */
#define CUFLAG_METRICS_PAGE 16u
/* The arm -> done histogram's fixed bounds (the buckets: one more, +Inf). */
#define CUFLAG_HIST_BOUNDS 21u
#define CUFLAG_COMM_MAX 16u
#define CUFLAG_UNIT_MAX 64u
#define CUFLAG_POD_MAX 40u
#define CUFLAG_CONTAINER_MAX 16u
#define CUFLAG_CGROUP_MAX 128u

struct cuflag_msg_metrics {
	uint32_t after_id; /* 0: the first page */
	uint32_t want;     /* CUFLAG_METRICS_WANT_*, or-ed; other bits 0 */
};
_Static_assert(sizeof(struct cuflag_msg_metrics) == 8, "metrics size");
_Static_assert(offsetof(struct cuflag_msg_metrics, want) == 4, "metrics want");

/* What more a METRICS asker reads. */
#define CUFLAG_METRICS_WANT_TOTALS 1u  /* USER_TOTALS records on the first page */
#define CUFLAG_METRICS_WANT_PROCESS 2u /* a PROCESS record after the daemon's */
#define CUFLAG_METRICS_WANT_ALL (CUFLAG_METRICS_WANT_TOTALS | CUFLAG_METRICS_WANT_PROCESS)

enum cuflag_metrics_kind {
	CUFLAG_METRICS_END = 0,
	CUFLAG_METRICS_DAEMON = 1,
	CUFLAG_METRICS_USER = 2,
	CUFLAG_METRICS_CLIENT = 3,
	CUFLAG_METRICS_USER_TOTALS = 4, /* only when asked (CUFLAG_METRICS_WANT_TOTALS) */
	CUFLAG_METRICS_PROCESS = 5,     /* only when asked (CUFLAG_METRICS_WANT_PROCESS) */
	CUFLAG_METRICS_KIND_END,
};

/* Daemon record flags. */
#define CUFLAG_METRICS_F_TIMING 1u     /* completions are timed (no --no-metrics) */
#define CUFLAG_METRICS_F_SCAN_TIMES 2u /* wakeups and the *_ns times are kept */
#define CUFLAG_METRICS_F_ALL 4u        /* the asker sees every client */
#define CUFLAG_METRICS_F_USER 8u       /* a user's own daemon (cuflagd --user); older
					* daemons never set it */

struct cuflag_metrics_daemon {
	uint32_t kind;          /* CUFLAG_METRICS_DAEMON */
	uint32_t flags;         /* CUFLAG_METRICS_F_* */
	uint64_t uptime_ms;
	uint64_t stuck_ms;      /* --stuck-ms */
	uint32_t connections;   /* open sockets */
	uint32_t regions;       /* of those, holding a region */
	uint32_t slots;         /* allocated, all clients */
	uint32_t pending;       /* slots armed, not complete */
	uint32_t stuck;         /* slots armed longer than stuck_ms, all clients */
	uint32_t fds_open;      /* the daemon's */
	uint32_t fds_limit;     /* RLIMIT_NOFILE, or 0: none */
	uint32_t users;         /* users with a connection */
	uint32_t scanner_state; /* enum cuflag_scanner_state */
	uint32_t nbounds;       /* CUFLAG_HIST_BOUNDS */
	uint64_t armed;         /* arms taken, since start */
	uint64_t completions;
	uint64_t wakes;         /* eventfd writes */
	uint64_t passes;
	uint64_t parks;
	uint64_t bad_arms;
	uint64_t dropped;       /* clients dropped for a protocol error */
	uint64_t scanner_cpu_ns;/* CPU time of the scanner thread */
	uint64_t wakeups;       /* the scanner's, from parked or asleep (F_SCAN_TIMES) */
	uint64_t parked_ns, sleeping_ns, spinning_ns; /* F_SCAN_TIMES */
	uint64_t bounds_ns[CUFLAG_HIST_BOUNDS]; /* the histogram's, ascending */
};
_Static_assert(sizeof(struct cuflag_metrics_daemon) == 328, "md size");
_Static_assert(offsetof(struct cuflag_metrics_daemon, uptime_ms) == 8, "md uptime");
_Static_assert(offsetof(struct cuflag_metrics_daemon, stuck_ms) == 16, "md stuck_ms");
_Static_assert(offsetof(struct cuflag_metrics_daemon, connections) == 24, "md conns");
_Static_assert(offsetof(struct cuflag_metrics_daemon, regions) == 28, "md regions");
_Static_assert(offsetof(struct cuflag_metrics_daemon, slots) == 32, "md slots");
_Static_assert(offsetof(struct cuflag_metrics_daemon, pending) == 36, "md pending");
_Static_assert(offsetof(struct cuflag_metrics_daemon, stuck) == 40, "md stuck");
_Static_assert(offsetof(struct cuflag_metrics_daemon, fds_open) == 44, "md fds");
_Static_assert(offsetof(struct cuflag_metrics_daemon, fds_limit) == 48, "md fd limit");
_Static_assert(offsetof(struct cuflag_metrics_daemon, users) == 52, "md users");
_Static_assert(offsetof(struct cuflag_metrics_daemon, scanner_state) == 56, "md state");
_Static_assert(offsetof(struct cuflag_metrics_daemon, nbounds) == 60, "md nbounds");
_Static_assert(offsetof(struct cuflag_metrics_daemon, armed) == 64, "md armed");
_Static_assert(offsetof(struct cuflag_metrics_daemon, completions) == 72, "md done");
_Static_assert(offsetof(struct cuflag_metrics_daemon, wakes) == 80, "md wakes");
_Static_assert(offsetof(struct cuflag_metrics_daemon, passes) == 88, "md passes");
_Static_assert(offsetof(struct cuflag_metrics_daemon, parks) == 96, "md parks");
_Static_assert(offsetof(struct cuflag_metrics_daemon, bad_arms) == 104, "md bad");
_Static_assert(offsetof(struct cuflag_metrics_daemon, dropped) == 112, "md dropped");
_Static_assert(offsetof(struct cuflag_metrics_daemon, scanner_cpu_ns) == 120, "md cpu");
_Static_assert(offsetof(struct cuflag_metrics_daemon, wakeups) == 128, "md wakeups");
_Static_assert(offsetof(struct cuflag_metrics_daemon, parked_ns) == 136, "md parked");
_Static_assert(offsetof(struct cuflag_metrics_daemon, sleeping_ns) == 144, "md sleeping");
_Static_assert(offsetof(struct cuflag_metrics_daemon, spinning_ns) == 152, "md spinning");
_Static_assert(offsetof(struct cuflag_metrics_daemon, bounds_ns) == 160, "md bounds");

/* Why a client was dropped, or its user cooled down (refused new clients). */
enum cuflag_drop_reason {
	CUFLAG_DROP_PROTOCOL = 0, /* a malformed or out-of-order request */
	CUFLAG_DROP_HELLO_TIMEOUT = 1,
	CUFLAG_DROP_QUEUE = 2,    /* its arm queue indices were impossible */
	CUFLAG_DROP_STALL = 3,    /* it made an eventfd write block */
	CUFLAG_DROP_FULL = 4,     /* it filled an eventfd's counter */
	CUFLAG_DROP_COST = 5,     /* its eventfd writes cost over its user's budget */
	CUFLAG_DROP_WATCH = 6,    /* its wake eventfd could not be watched */
	CUFLAG_DROP_REASONS = 8,  /* room in the records; unused ones are 0 */
};

struct cuflag_metrics_user {
	uint32_t kind;          /* CUFLAG_METRICS_USER */
	uint32_t uid;
	uint32_t connections;
	uint32_t regions;
	uint32_t slots;
	uint32_t pending;       /* slots the scanner watches: at most max-pending-per-uid */
	uint64_t cooldown_left_ms; /* its new clients are refused this much longer */
	uint64_t drops[CUFLAG_DROP_REASONS];     /* by enum cuflag_drop_reason */
	uint64_t cooldowns[CUFLAG_DROP_REASONS]; /* cool-downs begun, by reason */
};
_Static_assert(sizeof(struct cuflag_metrics_user) == 160, "mu size");
_Static_assert(offsetof(struct cuflag_metrics_user, uid) == 4, "mu uid");
_Static_assert(offsetof(struct cuflag_metrics_user, connections) == 8, "mu conns");
_Static_assert(offsetof(struct cuflag_metrics_user, regions) == 12, "mu regions");
_Static_assert(offsetof(struct cuflag_metrics_user, slots) == 16, "mu slots");
_Static_assert(offsetof(struct cuflag_metrics_user, pending) == 20, "mu pending");
_Static_assert(offsetof(struct cuflag_metrics_user, cooldown_left_ms) == 24, "mu cool left");
_Static_assert(offsetof(struct cuflag_metrics_user, drops) == 32, "mu drops");
_Static_assert(offsetof(struct cuflag_metrics_user, cooldowns) == 96, "mu cooldowns");

struct cuflag_metrics_client {
	uint32_t kind;          /* CUFLAG_METRICS_CLIENT */
	uint32_t client_id;
	int32_t pid;
	uint32_t uid;
	uint32_t gid;
	uint32_t slots;         /* held */
	uint32_t grouped;       /* of those, in a group */
	uint32_t groups;        /* groups made */
	uint32_t in_flight;     /* slots armed, not complete */
	uint32_t stuck;         /* of those, waiting longer than stuck_ms */
	uint64_t age_ms;        /* since it connected */
	uint64_t armed;         /* arms taken */
	uint64_t completions;   /* completions signalled */
	uint64_t wakes;         /* eventfd writes */
	uint64_t oldest_wait_ms;/* the longest any of its slots has waited now */
	uint64_t p50_ns, p99_ns;/* arm -> done, since it connected (0: none) */
	uint64_t sum_ns;        /* arm -> done, summed */
	uint64_t buckets[CUFLAG_HIST_BOUNDS + 1]; /* per bound, not cumulative; last +Inf */
	char comm[CUFLAG_COMM_MAX];       /* NUL-terminated, printable ASCII */
	char unit[CUFLAG_UNIT_MAX];       /* "" when unknown */
	char pod[CUFLAG_POD_MAX];
	char container[CUFLAG_CONTAINER_MAX];
	char cgroup[CUFLAG_CGROUP_MAX];
};
_Static_assert(sizeof(struct cuflag_metrics_client) == 544, "mc size");
_Static_assert(offsetof(struct cuflag_metrics_client, client_id) == 4, "mc id");
_Static_assert(offsetof(struct cuflag_metrics_client, pid) == 8, "mc pid");
_Static_assert(offsetof(struct cuflag_metrics_client, uid) == 12, "mc uid");
_Static_assert(offsetof(struct cuflag_metrics_client, gid) == 16, "mc gid");
_Static_assert(offsetof(struct cuflag_metrics_client, slots) == 20, "mc slots");
_Static_assert(offsetof(struct cuflag_metrics_client, grouped) == 24, "mc grouped");
_Static_assert(offsetof(struct cuflag_metrics_client, groups) == 28, "mc groups");
_Static_assert(offsetof(struct cuflag_metrics_client, in_flight) == 32, "mc in flight");
_Static_assert(offsetof(struct cuflag_metrics_client, stuck) == 36, "mc stuck");
_Static_assert(offsetof(struct cuflag_metrics_client, age_ms) == 40, "mc age");
_Static_assert(offsetof(struct cuflag_metrics_client, armed) == 48, "mc armed");
_Static_assert(offsetof(struct cuflag_metrics_client, completions) == 56, "mc done");
_Static_assert(offsetof(struct cuflag_metrics_client, wakes) == 64, "mc wakes");
_Static_assert(offsetof(struct cuflag_metrics_client, oldest_wait_ms) == 72, "mc oldest");
_Static_assert(offsetof(struct cuflag_metrics_client, p50_ns) == 80, "mc p50");
_Static_assert(offsetof(struct cuflag_metrics_client, p99_ns) == 88, "mc p99");
_Static_assert(offsetof(struct cuflag_metrics_client, sum_ns) == 96, "mc sum");
_Static_assert(offsetof(struct cuflag_metrics_client, buckets) == 104, "mc buckets");
_Static_assert(offsetof(struct cuflag_metrics_client, comm) == 280, "mc comm");
_Static_assert(offsetof(struct cuflag_metrics_client, unit) == 296, "mc unit");
_Static_assert(offsetof(struct cuflag_metrics_client, pod) == 360, "mc pod");
_Static_assert(offsetof(struct cuflag_metrics_client, container) == 400, "mc container");
_Static_assert(offsetof(struct cuflag_metrics_client, cgroup) == 416, "mc cgroup");

/* A user's counts since the daemon started, its clients gone included, so
 * that they outlive the clients: summed over every user they are the
 * daemon's own arms and completions. */
struct cuflag_metrics_user_totals {
	uint32_t kind;        /* CUFLAG_METRICS_USER_TOTALS */
	uint32_t uid;         /* CUFLAG_UID_OTHERS: users past the daemon's table */
	uint64_t arms;        /* arms taken from its clients' queues */
	uint64_t completions; /* completions signalled to its clients */
	uint64_t clients;     /* its connections that took a region */
};
_Static_assert(sizeof(struct cuflag_metrics_user_totals) == 32, "mt size");
_Static_assert(offsetof(struct cuflag_metrics_user_totals, uid) == 4, "mt uid");
_Static_assert(offsetof(struct cuflag_metrics_user_totals, arms) == 8, "mt arms");
_Static_assert(offsetof(struct cuflag_metrics_user_totals, completions) == 16, "mt done");
_Static_assert(offsetof(struct cuflag_metrics_user_totals, clients) == 24, "mt clients");
/* The uid of the totals of the users the daemon keeps no entry for. */
#define CUFLAG_UID_OTHERS 0xffffffffu

/* The daemon process, as exporters describe one (process_start_time_seconds). */
struct cuflag_metrics_process {
	uint32_t kind;          /* CUFLAG_METRICS_PROCESS */
	uint32_t reserved;      /* 0 */
	uint64_t start_unix_ms; /* when it started, ms since the Unix epoch (fixed) */
};
_Static_assert(sizeof(struct cuflag_metrics_process) == 16, "mp size");
_Static_assert(offsetof(struct cuflag_metrics_process, start_unix_ms) == 8, "mp start");

struct cuflag_metrics_end {
	uint32_t kind;       /* CUFLAG_METRICS_END */
	uint32_t next_after; /* 0: the last page; else the next page's after_id */
};
_Static_assert(sizeof(struct cuflag_metrics_end) == 8, "me size");
_Static_assert(offsetof(struct cuflag_metrics_end, next_after) == 4, "me next");

/* STUCK: one reply per stuck slot the asker may see (at most
 * CUFLAG_STUCK_MAX, longest waiting first), then one with client_id 0
 * whose slot field counts the stuck slots not listed. */
#define CUFLAG_STUCK_MAX 64u

struct cuflag_msg_stuck_slot {
	uint32_t client_id;
	int32_t pid;
	uint32_t uid;
	uint32_t slot;
	uint32_t armed;     /* the highest target armed */
	uint32_t flag;      /* the flag's value now */
	uint32_t signalled; /* completions signalled up to this value */
	uint32_t group;     /* 0, or the id + 1 of its group */
	uint64_t age_ms;    /* since it was armed, or last completed */
	char comm[CUFLAG_COMM_MAX];
};
_Static_assert(sizeof(struct cuflag_msg_stuck_slot) == 56, "stuck size");
_Static_assert(offsetof(struct cuflag_msg_stuck_slot, pid) == 4, "stuck pid");
_Static_assert(offsetof(struct cuflag_msg_stuck_slot, uid) == 8, "stuck uid");
_Static_assert(offsetof(struct cuflag_msg_stuck_slot, slot) == 12, "stuck slot");
_Static_assert(offsetof(struct cuflag_msg_stuck_slot, armed) == 16, "stuck armed");
_Static_assert(offsetof(struct cuflag_msg_stuck_slot, flag) == 20, "stuck flag");
_Static_assert(offsetof(struct cuflag_msg_stuck_slot, signalled) == 24, "stuck signalled");
_Static_assert(offsetof(struct cuflag_msg_stuck_slot, group) == 28, "stuck group");
_Static_assert(offsetof(struct cuflag_msg_stuck_slot, age_ms) == 32, "stuck age");
_Static_assert(offsetof(struct cuflag_msg_stuck_slot, comm) == 40, "stuck comm");

/*
 * Completions across processes. EXPORT names a slot the client holds (not
 * one it imported). The first time, the reply carries no fd but a struct
 * cuflag_handle_record (the daemon's secret for that slot): the client makes
 * the handle, a memfd holding exactly that record, sealed (F_SEAL_WRITE,
 * SHRINK, GROW, SEAL), so that its memory is the exporter's, and sends it
 * back with flags CUFLAG_EXPORT_DECLARE (fds: [0]); the daemon checks it and
 * keeps it (reply: no fds). From then on every EXPORT of that slot replies
 * fds: [0], that same file; the daemon forgets it when the slot goes. Each
 * handle a session was offered counts against its user's fds for as long
 * as the session lasts. With flags CUFLAG_EXPORT_REDECLARE the client,
 * resuming (only in a session whose ATTACH resumed, within
 * CUFLAG_IMPORT_RELINK_MS of the daemon's start), hands back (fds: [0]) the
 * handle a daemon before this one offered for that slot: the new daemon
 * checks that its record names this client's region and slot, and keeps it;
 * reply: no fds.
 *
 * IMPORT: fds: [0] a handle. The daemon knows the file by its identity (a
 * sealed memfd in its table, its record unchanged); anything else is
 * refused with -EINVAL. Reply: one struct cuflag_slot_grant, fds: [0] the
 * slot's eventfd (none into a group). The slot is the client's own, counted
 * in its quotas; its flag is written by the daemon only: the exporter's
 * timeline value signalled so far (start: the value at the import). With
 * flags CUFLAG_IMPORT_RESUME (only in a session whose ATTACH resumed), id
 * names the slot the client held before a restart: it is taken again with
 * its record, and linked once the exporter has redeclared the handle (within
 * CUFLAG_IMPORT_RELINK_MS of the daemon's start, else it is gone); a record
 * no daemon wrote (behind the exporter's when this daemon took the exporter
 * over, or beyond what it armed) starts from the exporter's value, owed
 * nothing. At most CUFLAG_IMPORTS_PER_SLOT imports of one exported slot and
 * CUFLAG_IMPORTS_PER_USER of one user are held at once: beyond, -EDQUOT.
 */
#define CUFLAG_EXPORT_REDECLARE 1u
#define CUFLAG_EXPORT_DECLARE 2u
#define CUFLAG_IMPORTS_PER_SLOT 64u
#define CUFLAG_IMPORTS_PER_USER 1024u
#define CUFLAG_IMPORT_RESUME 1u
#define CUFLAG_IMPORT_RELINK_MS 10000u

struct cuflag_msg_export {
	uint32_t id;    /* the slot */
	uint32_t flags; /* 0, CUFLAG_EXPORT_DECLARE or CUFLAG_EXPORT_REDECLARE */
};
_Static_assert(sizeof(struct cuflag_msg_export) == 8, "export size");
_Static_assert(offsetof(struct cuflag_msg_export, flags) == 4, "export flags");

struct cuflag_msg_import {
	uint32_t group;    /* 0, or a group id + 1 */
	uint32_t flags;    /* 0 or CUFLAG_IMPORT_RESUME */
	uint32_t id;       /* RESUME: the slot held before; else 0 */
	uint32_t reserved; /* must be 0 */
};
_Static_assert(sizeof(struct cuflag_msg_import) == 16, "import size");
_Static_assert(offsetof(struct cuflag_msg_import, flags) == 4, "import flags");
_Static_assert(offsetof(struct cuflag_msg_import, id) == 8, "import id");
_Static_assert(offsetof(struct cuflag_msg_import, reserved) == 12, "import reserved");

/* What a handle file holds, as the daemon offered it to the exporter, who
 * wrote it and sealed the file (F_SEAL_WRITE, SHRINK, GROW, SEAL). A handle
 * another kind of daemon offered (node or a user's, or another user's) is
 * refused on IMPORT with -EXDEV: exports do not cross daemons. */
#define CUFLAG_HANDLE_USER 0x80000000u
#define CUFLAG_HANDLE_MAGIC 0x58454c46u /* "FLEX" */
struct cuflag_handle_record {
	uint32_t magic;
	uint16_t version;    /* CUFLAG_PROTO_VERSION */
	uint16_t size;       /* bytes of this struct */
	uint32_t slot;       /* the exporter's slot id */
	uint32_t daemon;     /* who made it: 0 a node daemon, CUFLAG_HANDLE_USER | uid
			      * the uid's own (cuflagd --user; daemons before it made
			      * 0 only and refuse any other) */
	uint64_t secret;     /* random */
	uint64_t region_dev; /* the exporter's region file */
	uint64_t region_ino;
};
_Static_assert(sizeof(struct cuflag_handle_record) == 40, "handle size");
_Static_assert(offsetof(struct cuflag_handle_record, slot) == 8, "handle slot");
_Static_assert(offsetof(struct cuflag_handle_record, secret) == 16, "handle secret");
_Static_assert(offsetof(struct cuflag_handle_record, daemon) == 12, "handle daemon");
_Static_assert(offsetof(struct cuflag_handle_record, region_dev) == 24, "handle dev");
_Static_assert(offsetof(struct cuflag_handle_record, region_ino) == 32, "handle ino");

/* ------------------------------------------------------------------ */
/* The per-client region (a sealed memfd, mapped shared by both sides)  */
/* ------------------------------------------------------------------ */

#define CUFLAG_REGION_MAGIC 0x47414c46u /* "FLAG" */
#define CUFLAG_CACHELINE 64u

/* Offset 0, written once by the client before it hands the region over. */
struct cuflag_region_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t hdr_size;
	uint32_t nslots;
	uint32_t queue_cap;
	uint32_t head_off;
	uint32_t tail_off;
	uint32_t queue_off;
	uint32_t flags_off;
	uint64_t region_size;
	uint32_t state_off;
	uint32_t groups_off;
	uint32_t ngroups;
	uint32_t ring_cap;
	uint32_t ring_size;
	uint8_t reserved[CUFLAG_CACHELINE - 60];
};
_Static_assert(sizeof(struct cuflag_region_hdr) == CUFLAG_CACHELINE, "region hdr");
_Static_assert(offsetof(struct cuflag_region_hdr, region_size) == 32, "region size off");

/*
 * Per slot, written by the daemon only: what it has taken from the arm queue
 * and what it has signalled. A daemon that restarts and adopts the region
 * continues from here, so no completion is lost across the restart. (The
 * client can scribble on it, and then only confuses its own counts.)
 */
struct cuflag_slot_state {
	uint32_t armed;
	uint32_t signalled;
};
_Static_assert(sizeof(struct cuflag_slot_state) == 8, "slot state size");
/* An imported slot is never armed: its armed word says instead whether the
 * exporter's slot still lives (signalled: the exporter's value up to which
 * this importer was signalled). */
#define CUFLAG_IMPORT_LINKED 0u
#define CUFLAG_IMPORT_GONE 1u

/*
 * A group's completion ring, at groups_off + id * ring_size: the scanner
 * appends the id of each grouped slot it signals (the count is in the slot's
 * state, signalled: the ring says which slots to look at) and rings the
 * group's eventfd once per pass. When the ring is full it counts an overflow
 * instead, and the client looks at every slot of the group.
 */
struct cuflag_group_ring {
	uint32_t tail;      /* daemon-written: records produced */
	uint32_t overflows; /* daemon-written: records that did not fit */
	uint8_t pad0[CUFLAG_CACHELINE - 8];
	uint32_t head;      /* client-written: records consumed */
	uint8_t pad1[CUFLAG_CACHELINE - 4];
	uint32_t slot[];    /* ring_cap slot ids */
};
_Static_assert(offsetof(struct cuflag_group_ring, head) == CUFLAG_CACHELINE, "ring head");
_Static_assert(offsetof(struct cuflag_group_ring, slot) == 2 * CUFLAG_CACHELINE, "ring slots");

/* One arm: the client asks to be told when slot's flag reaches target. */
struct cuflag_arm {
	uint32_t slot;
	uint32_t target;
};
_Static_assert(sizeof(struct cuflag_arm) == 8, "arm size");

/*
 * Layout v1: header line, daemon-written head on its own line, client-written
 * tail on its own line (no false sharing between the two writers), the queue,
 * the daemon-written slot states from a cache line, then the flags from a
 * page boundary so the client registers exactly them.
 */
#define CUFLAG_REGION_HEAD_OFF (1u * CUFLAG_CACHELINE)
#define CUFLAG_REGION_TAIL_OFF (2u * CUFLAG_CACHELINE)
#define CUFLAG_REGION_QUEUE_OFF (3u * CUFLAG_CACHELINE)
/*
 * In the tail's line, after the tail: a uint64 the client writes before each
 * tail store, its CLOCK_MONOTONIC time in ns. Only a hint: the scanner dates
 * the arms it takes by it (to learn how long work takes from when it was
 * armed, not from when a sleeping scanner got to it), reads it once per
 * queue, and keeps it between its previous look at that queue and now; 0 or
 * anything outside that is ignored (clients that do not write it).
 */
#define CUFLAG_REGION_ARM_TIME_OFF 8u

/* ------------------------------------------------------------------ */
/* The daemon page (read-only for clients: F_SEAL_FUTURE_WRITE)          */
/* ------------------------------------------------------------------ */

#define CUFLAG_DPAGE_MAGIC 0x44474c46u /* "FLGD" */

enum cuflag_scanner_state {
	CUFLAG_SCANNER_SPINNING = 0,
	CUFLAG_SCANNER_PARKED = 1,
};

struct cuflag_daemon_page {
	uint32_t magic;
	uint16_t version;
	uint16_t size;          /* bytes of this struct */
	uint64_t epoch;         /* changes at every daemon start */
	uint8_t pad0[CUFLAG_CACHELINE - 16];
	/* Own cache line: written on every park and wake, read by every arm. */
	uint32_t scanner_state; /* enum cuflag_scanner_state */
	uint8_t pad1[CUFLAG_CACHELINE - 4];
};
_Static_assert(sizeof(struct cuflag_daemon_page) == 2 * CUFLAG_CACHELINE, "dpage size");
_Static_assert(offsetof(struct cuflag_daemon_page, epoch) == 8, "dpage epoch");
_Static_assert(offsetof(struct cuflag_daemon_page, scanner_state) == CUFLAG_CACHELINE,
	       "dpage state");

#endif
