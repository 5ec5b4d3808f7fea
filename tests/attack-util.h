/* SPDX-License-Identifier: MIT */
/*
 * The attack suite's bench: a daemon started with a watchdog, a memory
 * cgroup of its own and its log read all along; a victim of another user
 * completing one slot at a time; a bystander user connecting; root asking
 * cuflagctl for the status; the attacker run as a user of its own. A window
 * around each attack turns what they saw into one row of figures, checked
 * against the targets every attack must meet.
 */
#ifndef CUFLAG_TEST_ATTACK_UTIL_H
#define CUFLAG_TEST_ATTACK_UTIL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

/* Ordinary users, none of them root or in an admin group. Each keeps gid 0
 * so that it can reach the test's socket (mode 0660, group root). */
#define UID_ATTACKER 60001
#define UID_VICTIM 60002
#define UID_BYSTANDER 60003

/* Targets every attack must meet. */
#define TARGET_P99_MS 5.0
#define TARGET_MAX_MS 100.0
#define TARGET_ADMIN_MS 1000.0
/* SIGTERM stops the daemon within this, even with a client's close blocked
 * in it (systemd waits 90 s before it kills; a linger lasts up to 600 s). */
#define TARGET_STOP_MS 2000
/* What the daemon is told its watchdog is (WATCHDOG_USEC): it pings at half
 * of it; a gap between two pings longer than this is a miss. */
#define WATCHDOG_MS 2000
/* An attack over in a few ms is repeated for this long, so that its window
 * holds enough wakes for a p99 (over fewer than 100 it is just the max). */
#define SUSTAIN_MS 1000
/* Daemon memory "back to baseline": within this, for allocator slack. */
#define MEM_SLACK_KB (8 * 1024)

extern struct daemon_proc attack_daemon;

/* ---- processes and users ---- */

/* Memory shared with every child forked after it (zeroed). */
void *shm_alloc(size_t size);
/*
 * Fork a child that dies with us, becomes uid (gid 0 kept, no other
 * groups), takes its open-file limit up to the hard limit, lowers its own
 * priority by nice_inc, runs fn(arg) and exits 0 (fn may exit itself).
 */
pid_t spawn_user(uid_t uid, int nice_inc, void (*fn)(void *), void *arg);
/* Run fn(arg) as the attacker (UID_ATTACKER, nice_inc) to its end, at most
 * timeout_ms; a failed check of name when it did not end with 0. */
void attacker_run(const char *name, int nice_inc, void (*fn)(void *), void *arg, int timeout_ms);
/* Wait up to ms until *flag >= want; 1 if it did. */
int wait_flag(_Atomic int *flag, int want, int ms);
/* Wait up to timeout_ms for a child; its exit status, or -1 when it had to
 * be killed. */
int child_wait(pid_t pid, int timeout_ms);
/* The soft open-file limit up to the hard one; returns the new limit. */
long raise_nofile(void);
/* A SOCK_SEQPACKET connection to the daemon with 5 s send and receive
 * timeouts; -errno when connect fails. */
int daemon_connect_raw(void);
/* Whether this process's fd is a memfd whose name starts with name. */
int is_memfd_named(int fd, const char *name);
/* Send len bytes and n fds (up to the kernel's 253) in one message. */
int send_with_fds(int sock, const void *buf, size_t len, const int *fds, unsigned n);
/* Receive one message, closing any fds it carries: its length, 0 at
 * hang-up, -errno. *status gets the header's status when it has one. */
ssize_t recv_reply(int sock, int *status, int timeout_ms);
/* HELLO on sock: the reply's status (-EPIPE when none came); hr (or NULL)
 * gets the reply's body. */
struct cuflag_msg_hello_reply;
int hello_raw(int sock, struct cuflag_msg_hello_reply *hr);
/* Whether the daemon has hung up on sock (EOF readable), waiting up to ms. */
int hung_up(int sock, int timeout_ms);
/* CLIENTS on a fresh connection, as this process's user (root sees every
 * client): fn(ci, arg) for each client listed. 0, or -errno when the list
 * did not come to its end. (CLIENTS, unlike METRICS, has the daemon walk no
 * /proc/self/fd: the dentries that walk leaves, some 900 bytes an fd, stay
 * charged to the daemon's cgroup after the fds are closed.) */
struct cuflag_msg_client_info;
int clients_each(void (*fn)(const struct cuflag_msg_client_info *ci, void *arg), void *arg);
/* cuflag_connect()'s result for a fresh client of this process's uid (the
 * client is released at once). */
int hello_status(void);

/* ---- a TCP connection whose close lingers ---- */

/*
 * A local TCP connection with SO_LINGER {1, 600}: the peer never reads, the
 * send buffer is full, so whoever drops the last reference to sock waits in
 * close() until the peer reads (never) or resets (linger_release()).
 */
struct linger_conn {
	int listener, peer, sock;
	unsigned port; /* sock's local port */
};
void linger_make(struct linger_conn *l);
/* Reset the connection from the peer's side: a close lingering on it returns. */
void linger_release(struct linger_conn *l);
/*
 * Make one and hand its only reference to the daemon: send(sock, arg) runs in
 * a child that closes its copy right after (this process closed its own
 * before). Tries again (up to 8 times) while the daemon
 * closed it before the child let go. Returns 1 once the connection is seen
 * held open or lingering in a close (the daemon's), 0 if never.
 */
int linger_deliver(struct linger_conn *l, void (*send)(int sock, void *arg), void *arg);
/* Whether a close is lingering on l's socket now (FIN_WAIT1, still owned). */
int linger_lingering(const struct linger_conn *l);

/* ---- samples: the victim's wakes, the probes' round trips ---- */

#define SAMPLES_MAX (1u << 17)
struct sample {
	uint64_t t0, ns;
	int32_t rc;
	uint32_t pad;
};
struct samples {
	_Atomic uint64_t inflight_t0; /* a sample started and not finished, or 0 */
	_Atomic uint32_t n;
	struct sample v[SAMPLES_MAX];
};
void samples_add(struct samples *s, uint64_t t0, uint64_t ns, int rc);

struct figures {
	unsigned n, failed;
	double p50_ms, p99_ms, max_ms;
	uint64_t max_t0; /* when the slowest one started */
};
/* Samples that started in [t0, t1]; one still running counts as running until now. */
void samples_figures(struct samples *s, uint64_t t0, uint64_t t1, struct figures *f);

/* ---- the bench ---- */

/*
 * Start the daemon (extra args, NULL-terminated) with a watchdog and a
 * memory cgroup where one can be made, the victim, the bystander and the
 * admin probe; wait until all of them run and take the baseline. Exits 77
 * when not root.
 */
void bench_start(const char *const *daemon_args);
/* Stop everything; SIGTERM must stop the daemon within TARGET_STOP_MS. Returns
 * the test's exit status: 0 when every check passed. */
int bench_finish(void);

struct daemon_mem {
	long rss_kb, shmem_kb;  /* /proc/PID/status: VmRSS, RssShmem */
	long cg_kb, cg_shmem_kb; /* its memory cgroup: usage, shmem (-1: none) */
};
void daemon_mem(struct daemon_mem *m);
/* Hold the daemon's cgroup to mb MiB (< 0: no limit). 0, or -errno (no
 * cgroup of its own: -ENOENT). */
int daemon_mem_limit(long mb);

/* Clients the daemon dropped so far (STATS; a failed check and 0 when it
 * does not answer). */
uint64_t daemon_dropped(void);

/* ---- one window of measurement around an attack ---- */

struct window {
	const char *name;
	uint64_t t0, t1;
	size_t log0, log1;
	uint64_t dropped0;
	int failures0; /* failed checks before it */
	int reference; /* no attack: figures printed, targets not checked */
	char outcome[256]; /* what happened to the attacker, for the table */
};
void window_open(struct window *w, const char *name);
/* End it: waits for the victim's wake in flight, then for the daemon's fds
 * and memory to come back, prints the row and checks the targets. */
void window_close(struct window *w);

/* Lines the daemon logged inside the window containing a and b (b may be NULL). */
int window_log_count(struct window *w, const char *a, const char *b);
/* Note what the attacker does now, from any process (printed with a window
 * that missed a target, to tell what the worst wake coincided with). */
void attack_mark(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Record a failed check (printed at once, fails the test at the end). */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Wait until the admin probe has answered once more (the daemon's main loop
 * turned round), up to ms. */
int admin_turned(int ms);
/* The daemon process: alive? */
int daemon_running(void);
/* Send SIGTERM and wait up to limit_ms; the time it took in ms (-1: still
 * running; it is then killed). */
double daemon_term(int limit_ms);

#endif
