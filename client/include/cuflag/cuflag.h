/* SPDX-License-Identifier: MIT */
/*
 * libcuflag-client: learn that GPU work has finished, from any event loop.
 *
 * A slot is a timeline: a 32-bit flag in shared memory that only moves
 * forward, plus an eventfd. cuflag_slot_arm() reserves the slot's next value
 * and tells cuflagd about it; whoever completes the work (a GPU stream through
 * cuflag_cuda_signal(), or any writer) stores that value into the flag; the
 * daemon's scanner sees the flag advance and adds the number of completions
 * to the slot's eventfd. Poll the eventfd (POLLIN), or call
 * cuflag_slot_wait() to block until a given value is reached.
 *
 * Every function returns 0 or a negative errno unless its comment says
 * otherwise. Every function may be called from several threads at once on
 * the same client and the same slot, except that cuflag_disconnect() and
 * cuflag_slot_release() must not race other calls on what they free.
 *
 * A client belongs to the process that connected it. In a child of fork(2)
 * the inherited client and its slots answer -ECHILD to every call that would
 * use the parent's connection, arm queue or eventfds (acquire, arm, wait,
 * consume, bind, reconnect, the CUDA calls); cuflag_slot_release() and
 * cuflag_disconnect() there free only the child's copies and leave the
 * parent's slots alone. The getters (fds, flag, id, epoch) still answer.
 * A child connects anew to get slots of its own.
 *
 * When the daemon restarts (an upgrade, a crash, the watchdog), the client
 * resumes by itself: the first call that finds the daemon gone connects to
 * the daemon that listens now on the same socket and hands it this client's
 * region and slots, while other threads go on. Slots keep their ids, flags
 * and eventfds, so an event loop's registrations stay valid; arms made while
 * no daemon runs wait in the region's queue for the next one; waits keep
 * looking at the flags; cuflag_slot_consume() counts every completion exactly
 * once across any restart, SIGKILL included. Only cuflag_client_fd() changes
 * (see there). Resuming needs a daemon with the same region layout (the same
 * --slots-per-client and --queue-size) and --slab memfd.
 */
#ifndef CUFLAG_CUFLAG_H
#define CUFLAG_CUFLAG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(CUFLAG_NO_VISIBILITY)
#define CUFLAG_API __attribute__((visibility("default")))
#else
#define CUFLAG_API
#endif

/** A connection to cuflagd and the region it shares with this process. */
typedef struct cuflag_client cuflag_client;
/** One completion timeline: a flag and an eventfd (or its group's). */
typedef struct cuflag_slot cuflag_slot;
/** Many slots that share one eventfd and report through a completion ring. */
typedef struct cuflag_group cuflag_group;

/** What cuflag_group_drain() hands out: a slot and its new completions. */
struct cuflag_completion {
	cuflag_slot *slot;
	uint64_t completions;
};

/** Environment variable naming the daemon's socket when no path is given. */
#define CUFLAG_SOCKET_ENV "CUFLAG_SOCKET"
/** The socket cuflagd listens on when started by systemd. */
#define CUFLAG_DEFAULT_SOCKET "/run/cuflagd/cuflagd.sock"
/** Environment variable naming the cuflagd binary the library starts as the
 *  user's own daemon, and the one that turns that start off when "0". */
#define CUFLAG_DAEMON_ENV "CUFLAGD"
#define CUFLAG_AUTOSPAWN_ENV "CUFLAG_AUTOSPAWN"
/** How long a call that needs the daemon waits for it to come back after a
 *  restart, by default (cuflag_client_set_resume_timeout()). */
#define CUFLAG_RESUME_TIMEOUT_MS 30000

/**
 * cuflag_connect() - connect to cuflagd and map this client's region.
 * @socket_path: the daemon's socket; NULL means $CUFLAG_SOCKET (that one
 *               and no other), else the node daemon's CUFLAG_DEFAULT_SOCKET
 *               or, when no daemon is there or this user may not use it (not
 *               in its group), the user's own daemon (below).
 * @out: the new client, on success.
 *
 * The user's own daemon listens at $XDG_RUNTIME_DIR/cuflag/cuflagd.sock, or
 * /tmp/cuflag-UID/cuflagd.sock when XDG_RUNTIME_DIR is unset; that
 * directory must be the user's, mode 0700 (made so when missing, never
 * followed through a symbolic link). When none listens there the library
 * starts one (cuflagd --user, found at $CUFLAGD, else beside this library,
 * else at its install path; processes that connect at once start one
 * between them, waiting for it at most 5 s), unless $CUFLAG_AUTOSPAWN is 0.
 * A client of the user's daemon that finds it gone (it exited when idle, or
 * was killed) starts it again when it resumes. cuflag_connect_hint() then
 * says, for any error, which sockets were tried, the binary looked for and
 * what to run.
 *
 * Return: 0, or -ENOENT / -ECONNREFUSED (no daemon there; with NULL: none
 * there nor at the user's socket, and none could be started: starting is
 * off, no binary was found, or the one started exited), -EPERM (with NULL:
 * the user's directory is a symbolic link, another user's, or open to
 * others), -ENOTSOCK (the path names a directory or a file, not the socket
 * itself, such as CUFLAG_DEFAULT_SOCKET), -EACCES (not allowed to use the
 * socket or to enter its directory: join the socket's group, cuflag where
 * systemd or the packages made it; or the daemon is another user's own,
 * cuflagd --user), -ENAMETOOLONG (path too long),
 * -EPROTONOSUPPORT (no protocol version in common), -ENODEV (the daemon runs
 * with --slab cuda-ipc and this process cannot use CUDA), -EUSERS (the daemon's
 * client limits are reached), -EBUSY (clients of this user made the daemon's
 * eventfd writes block three times within a minute of each other: the user's
 * new connections are refused for 1 s, doubling with each repeat up to 60 s),
 * -ETIMEDOUT (the daemon did not answer within 5 s), -EPROTO / -EBADMSG (the
 * daemon sent something malformed), -ENOMEM, or another errno from
 * socket(2), connect(2), memfd_create(2), fallocate(2) (the region's memory
 * is this process's, and counts against its memory limits) or mmap(2).
 * -EUSERS also when this user has more connections open than the daemon's
 * --max-connections-per-uid allows.
 */
CUFLAG_API int cuflag_connect(const char *socket_path, cuflag_client **out);

/**
 * cuflag_connect_hint() - what to do about an error of cuflag_connect(), for
 * a program to print after strerror(-@err) and the socket's path (the library
 * prints nothing itself): for -EACCES to join the socket's group, for -ENOENT
 * or -ECONNREFUSED to start cuflagd or set CUFLAG_SOCKET, for -ENOTSOCK to name
 * the socket, not its directory. After this thread's cuflag_connect(NULL)
 * failed with @err: one line naming the node daemon's socket and why it did
 * not serve, the user's socket, the binary looked for and the command that
 * fixes it.
 * Return: a sentence true of this host (static: it never changes or goes), or NULL.
 */
CUFLAG_API const char *cuflag_connect_hint(int err);

/**
 * cuflag_disconnect() - release every slot and group, unmap the region, hang up.
 * Every slot and group of @c is invalid afterwards. NULL is accepted. Synchronise the
 * streams you signalled through cuflag_cuda_signal() first: a flag write
 * still queued on a stream would land in memory that is no longer mapped.
 */
CUFLAG_API void cuflag_disconnect(cuflag_client *c);

/**
 * cuflag_slot_acquire() - get one slot from the daemon.
 * If the daemon went away, the call first resumes with the one that listens
 * now (waiting up to the client's resume timeout).
 * Return: 0, or -ENOSPC (the daemon's slots-per-client limit is reached),
 * -EDQUOT (this user holds as many slots as --max-slots-per-uid allows),
 * -EBUSY (the daemon's request-rate limit is reached; try again later),
 * -EMFILE (this process is out of fds; slots the daemon granted in that
 * reply stay counted against this client until it disconnects), -ENOMEM,
 * -ENOTCONN / -EPIPE (the daemon hung up and none came back within the
 * resume timeout), -ESTALE (the daemon that came back has another region
 * layout, or found the region emptied after it dropped this client),
 * -ETIMEDOUT (no answer within 5 s), -EPROTO / -EBADMSG (malformed reply),
 * -ECHILD (the client was connected by the parent of this process; see
 * above).
 */
CUFLAG_API int cuflag_slot_acquire(cuflag_client *c, cuflag_slot **out);

/**
 * cuflag_slots_acquire() - get n slots in as few round trips as possible.
 * All or nothing: on error no slot is held. Errors as cuflag_slot_acquire(),
 * and -EINVAL when n is 0.
 */
CUFLAG_API int cuflag_slots_acquire(cuflag_client *c, unsigned n, cuflag_slot **out);

/**
 * cuflag_slot_release() - give a slot back and close its eventfd.
 * The daemon reuses the slot only after its flag has reached every value
 * armed on it, so a device write still in flight cannot land in a slot that
 * another owner holds. NULL is accepted.
 */
CUFLAG_API void cuflag_slot_release(cuflag_slot *s);

/**
 * cuflag_slot_fd() - the slot's eventfd, to poll for POLLIN.
 * Its counter is the number of completions signalled and not yet consumed.
 * The fd is non-blocking; read it with cuflag_slot_consume() or read(2) of
 * 8 bytes. It stays owned by the slot: do not close it.
 * Return: the fd (>= 0), or -EOPNOTSUPP for a slot of a group: it has no
 * eventfd of its own (poll cuflag_group_fd()), -EINVAL for NULL.
 */
CUFLAG_API int cuflag_slot_fd(const cuflag_slot *s);

/**
 * cuflag_slot_flag() - host address of the slot's flag.
 * The device stores the armed target here; a CPU completer calls
 * cuflag_slot_complete(), which is an aligned 32-bit store with release
 * order: __atomic_store_n(flag, target, __ATOMIC_RELEASE). Reading it tells
 * the current value.
 * Return: the address, or NULL for NULL.
 */
CUFLAG_API volatile uint32_t *cuflag_slot_flag(const cuflag_slot *s);

/**
 * cuflag_slot_id() - the slot's index in the client's region.
 * Return: the id (>= 0), or -EINVAL for NULL.
 */
CUFLAG_API int cuflag_slot_id(const cuflag_slot *s);

/**
 * cuflag_slot_complete() - complete the work armed as @value, from the CPU:
 * store @value into the slot's flag with release order, as the device's
 * write does (what the work wrote is visible before the flag moves).
 * For completers on the host (a thread pool, a simulated device, tests).
 * Return: 0, or -EINVAL (NULL, or @value was never reserved on this slot:
 * see cuflag_slot_wait() for which values are), -EPERM (an imported slot).
 */
CUFLAG_API int cuflag_slot_complete(cuflag_slot *s, uint32_t value);

/**
 * cuflag_slot_set_data() - attach the caller's pointer to the slot, to find
 * its request again from a cuflag_completion record (or anywhere the slot is
 * at hand) without a side table. The library never looks at it; it is NULL
 * on a new slot and kept across daemon restarts.
 * Return: 0, or -EINVAL for a NULL slot.
 */
CUFLAG_API int cuflag_slot_set_data(cuflag_slot *s, void *data);

/**
 * cuflag_slot_data() - the pointer last given to cuflag_slot_set_data().
 * Return: it, or NULL (none set, or a NULL slot).
 */
CUFLAG_API void *cuflag_slot_data(const cuflag_slot *s);

/**
 * cuflag_slot_arm() - reserve the slot's next timeline value and arm it.
 * @target: receives the value; whoever completes the work stores it into
 *          the flag. Values are handed out in order, one per call.
 *
 * No system call while the daemon's scanner is awake; one eventfd write to
 * wake it when it is parked. When the arm queue is full the call waits for
 * the scanner to drain it. Without a daemon the arm waits in the queue for
 * the next one; when the queue is full then, the call resumes with the
 * daemon that comes back, waiting up to the client's resume timeout.
 * Return: 0, or -ENOTCONN (the queue was full and no daemon came back within
 * the resume timeout), -ESTALE (the daemon that came back has another region
 * layout, or found the region emptied after it dropped this client),
 * -EOPNOTSUPP (the client cannot resume: its daemon ran --slab cuda-ipc),
 * -ECHILD (the client was connected by the parent of this process), -EPERM
 * (an imported slot: its exporter arms it). A resume's errors are judged as
 * a request's: one that a later daemon could mend is -ENOTCONN.
 */
CUFLAG_API int cuflag_slot_arm(cuflag_slot *s, uint32_t *target);

/**
 * cuflag_slot_arm_many() - reserve the slot's next @n values and arm them.
 * @n: how many values, 1 to 2^30.
 * @first: receives the first of them; the values are *@first to
 *         *@first + @n - 1 (wrapping at 2^32), in order after any value
 *         reserved before.
 *
 * For work that completes many values by itself, such as a kernel signalling
 * from inside (cuflag/cuflag_device.h): it may store the values one by one
 * (each store is counted, and a store that skips values counts all of those
 * it passed), only the last one, or add one per completion. The daemon counts
 * min(flag, highest value armed) minus what it signalled before, so a writer
 * that runs ahead of the arms is counted once the arms reach it, never past
 * what was armed; arming before the writer can get there keeps the wake
 * latency of each value. For a slot of a group, one record per scanner pass
 * carries all the values that landed since the last. One arm entry whatever
 * @n, with the costs of cuflag_slot_arm().
 * Return: 0, or -EINVAL (NULL argument, @n 0 or above 2^30), -EOVERFLOW (the
 * slot would have 2^31 or more values armed and not yet signalled: the
 * daemon could not tell the last from a value behind; wait for earlier
 * values first), or an error of cuflag_slot_arm() (-ENOTCONN, -ESTALE,
 * -EOPNOTSUPP, -ECHILD, -EPERM). On error nothing is reserved.
 */
CUFLAG_API int cuflag_slot_arm_many(cuflag_slot *s, unsigned n, uint32_t *first);

/**
 * cuflag_slot_wait() - block until the flag reaches @target.
 * @timeout_ms: -1 waits for ever, 0 only checks.
 *
 * Returns at once, without a system call, when the flag has already reached
 * @target. Otherwise it sleeps until the daemon signals the slot's eventfd
 * and the flag has reached @target. It never reads the eventfd counter:
 * completions it waited for are still counted there, for
 * cuflag_slot_consume() or your event loop. Wait and consume combine freely:
 * wait answers "has this value landed", consume "how many landed since I last
 * asked".
 * If the daemon goes away, the wait goes on by checking the flag itself,
 * and resumes with the daemon once one listens again.
 *
 * The values a wait may name are the slot's starting value (its flag when
 * it was acquired, reached at once) up to the last value reserved by an arm,
 * or the 2^31 values up to that one once more were reserved. A fresh slot
 * starts at 0; a slot the daemon hands out again starts 2^30 past the last
 * value armed on it before (so a late write of the old owner's timeline is
 * never counted on the new one): starting values such as 1073741830 are
 * normal. Any other value is refused at once (-EINVAL), never waited for.
 * An imported slot (cuflag_slot_import()) takes any value of its exporter's
 * timeline: one less than 2^31 ahead of the value reached is waited for, any
 * other is reached already.
 * Return: 0, -ETIMEDOUT, -EINVAL (NULL, or @target was never armed on this slot),
 * -EPIPE (an imported slot whose exporter's slot went before @target was
 * reached), -ECHILD (the client was connected by the parent of this process), or
 * the error that ended the wait (-EIO when a device fault stopped the work
 * the slot was waiting for; see cuflag_cuda.h).
 */
CUFLAG_API int cuflag_slot_wait(cuflag_slot *s, uint32_t target, int timeout_ms);

/**
 * cuflag_slot_wait_spin() - cuflag_slot_wait() that first spins on the flag.
 * @spin_us: how long to spin (reading the flag, no system call) before it
 *           sleeps; a completion that lands within it is seen at once.
 * Return: as cuflag_slot_wait().
 */
CUFLAG_API int cuflag_slot_wait_spin(cuflag_slot *s, uint32_t target, unsigned spin_us,
				     int timeout_ms);

/**
 * cuflag_slot_consume() - the completions signalled since the last consume.
 * @completions: receives how many.
 * Non-blocking. It resets the eventfd (the doorbell) and counts from the
 * daemon's record of what it signalled, kept in the region: each completion
 * is returned exactly once, even across a daemon killed in the middle of
 * signalling (its successor may ring the eventfd again; that counts nothing).
 * Read the eventfd yourself only if you accept a count that may repeat
 * after such a restart. Several threads may consume one slot at once.
 * Finding none while the daemon is gone, it makes one resume attempt that
 * never waits behind another thread's (and none that waits at all once an
 * event loop dispatches the client: see cuflag_client_dispatch()).
 * Return: 0, -EAGAIN when none, -EPIPE (an imported slot whose exporter's
 * slot went, every completion before that consumed), -ECHILD (the client
 * was connected by the parent of this process), or an errno from read(2).
 */
CUFLAG_API int cuflag_slot_consume(cuflag_slot *s, uint64_t *completions);

/**
 * cuflag_slot_bind_eventfd() - have the daemon signal @efd instead.
 * Not for a slot of a group (-EOPNOTSUPP).
 * The daemon takes a duplicate and makes it non-blocking (the flag is shared
 * with your copy); the slot's own eventfd is closed and cuflag_slot_fd()
 * returns a duplicate of @efd that the slot owns. @efd stays yours.
 * Return: 0, -EBADF (@efd is not an eventfd), -EPERM (an imported slot),
 * or a request error as cuflag_slot_acquire() (-ECHILD included).
 */
CUFLAG_API int cuflag_slot_bind_eventfd(cuflag_slot *s, int efd);

/**
 * cuflag_client_fd() - the connection to the daemon, for an event loop to
 * learn that the daemon went away: poll it for POLLRDHUP (or EPOLLRDHUP);
 * never read or write it. Slot flags keep working without the daemon; no
 * eventfd is signalled until the client resumes (by itself, at the next call
 * that needs the daemon, or at once with cuflag_reconnect()). After a resume
 * the number is the same but the connection behind it is new: an epoll
 * registration of the old one is gone (the kernel drops it when that
 * connection closes), so register the fd again once the hang-up was seen.
 * Return: the fd (>= 0), or -EINVAL for NULL.
 */
CUFLAG_API int cuflag_client_fd(const cuflag_client *c);

/**
 * cuflag_reconnect() - resume with the daemon now, instead of at the next call.
 * Connects to the same socket and hands the daemon listening there this
 * client's region and every slot's eventfd; it continues from what the old
 * one had taken and signalled (kept in the region), so completions that
 * landed meanwhile are signalled and arms queued meanwhile are taken. Slots
 * keep their ids, flags and eventfds. Safe while other threads use the
 * client; one resume runs at a time. The library does this by itself when a
 * call finds the daemon gone: call it only to resume before that.
 * Return: 0, or -ECONNREFUSED / -ENOENT (no daemon listening yet), -EOPNOTSUPP
 * (the daemon runs --slab cuda-ipc: its flags are a CUDA allocation that died
 * with the daemon before, so a client of such a daemon connects anew),
 * -ESTALE (the daemon listening now has another region layout: other
 * --slots-per-client or --queue-size; or the region is empty: a daemon
 * without its region guard removes its pages when it drops the client;
 * connect anew), -EBUSY (the daemon
 * still serves this region: it did not go away), -EUSERS, -ENOMEM,
 * -ETIMEDOUT, -EPROTO / -EBADMSG, -ECHILD (the client was connected by the
 * parent of this process).
 */
CUFLAG_API int cuflag_reconnect(cuflag_client *c);

/**
 * cuflag_client_set_resume_timeout() - how long a call that finds the daemon
 * gone waits for one to come back before it fails.
 * @timeout_ms: -1 waits for ever; the default is CUFLAG_RESUME_TIMEOUT_MS,
 *              long enough for any systemctl restart. Waits are not bounded
 *              by it: they look at the flags meanwhile.
 * Return: 0, or -EINVAL.
 */
CUFLAG_API int cuflag_client_set_resume_timeout(cuflag_client *c, int timeout_ms);

/**
 * DOC: driving a client from an event loop
 *
 * A program with an event loop (epoll, libuv, asyncio, tokio) lets the loop
 * wait and the library decide, as libwayland's prepare_read/dispatch does:
 * it watches the fd of cuflag_client_dispatch_fd() for readability, and
 * calls cuflag_client_dispatch() when that fd is readable and when the
 * timeout of cuflag_client_dispatch_timeout() runs out (asking for the
 * timeout again after each call). Nothing else: the library notices the
 * daemon's hang-up, resumes with the daemon that listens next (attempts
 * spaced, none waiting for an answer: the loop waits on it through the same
 * fd), and, while no daemon runs, looks at the flags itself and rings the
 * eventfd of a slot (or of its group) whose flag moved, so that the loop's
 * waits on slot and group eventfds wake and find the value landed. A slot
 * signalled from CUDA with work outstanding is probed for a device fault at
 * the timeouts too (once the client signalled from CUDA, the timeout is at
 * most 100 ms); a fault rings its eventfd and its waits see -EIO.
 * Once cuflag_client_dispatch_fd() was called, cuflag_slot_consume() and
 * cuflag_group_drain() that find the daemon gone never wait for a resume
 * attempt either: they take one step of the dispatcher's.
 * Blocking calls from other threads keep resuming by themselves; the
 * dispatcher follows any resume, whoever made it.
 */

/**
 * cuflag_client_dispatch_fd() - the fd an event loop waits on for
 * readability before it calls cuflag_client_dispatch().
 * An epoll instance owned by the client (never close it, nor read it); the
 * same fd for the client's life, whatever the resumes. Made on the first
 * call.
 * Return: the fd (>= 0), or -EINVAL (NULL), -ECHILD (the client was
 * connected by the parent of this process), -EMFILE / -ENFILE / -ENOMEM
 * (making the epoll).
 */
CUFLAG_API int cuflag_client_dispatch_fd(cuflag_client *c);

/**
 * cuflag_client_dispatch() - do what the client's connection needs, without
 * blocking: notice a hang-up, make or finish a resume attempt, look at the
 * flags while the daemon is away, probe CUDA slots for faults. Call it when
 * the fd of cuflag_client_dispatch_fd() is readable, when the timeout of
 * cuflag_client_dispatch_timeout() runs out, and before a wait starts. Any
 * thread may call it; it never waits behind another thread's resume.
 * Return: 0 (a daemon serves the client), or, while none does (call again
 * as said; the library keeps trying): -EAGAIN (a resume is under way),
 * -ENOTCONN (none came back within the client's resume timeout: calls that
 * need the daemon give up now; waits go on with the flags), -ESTALE (the
 * daemon that listens has another region layout), -EPROTONOSUPPORT (it
 * speaks another protocol version), -EOPNOTSUPP (the daemon ran --slab
 * cuda-ipc: no resume can mend it); or -EINVAL (NULL), -ECHILD, and the
 * errors of cuflag_client_dispatch_fd().
 */
CUFLAG_API int cuflag_client_dispatch(cuflag_client *c);

/**
 * cuflag_client_dispatch_timeout() - how long the loop may wait on the fd
 * of cuflag_client_dispatch_fd() before it calls cuflag_client_dispatch().
 * @timeout_ms: receives the milliseconds (0: call it now), or -1 when only
 *              the fd's readiness calls for it (a daemon serves, and the
 *              client never signalled from CUDA); poll(2) and
 *              epoll_wait(2) take it as it is.
 * Return: 0, or -EINVAL (NULL), -ECHILD.
 */
CUFLAG_API int cuflag_client_dispatch_timeout(cuflag_client *c, int *timeout_ms);

/**
 * cuflag_group_create() - a group: one eventfd and one completion ring for
 * many slots, instead of an eventfd per slot.
 *
 * The daemon's scanner appends each grouped slot it signals to the group's
 * ring (in the client's region) and rings the group's eventfd once per pass,
 * however many of its slots completed; the daemon holds one fd per group, not
 * one per slot. Several threads may drain one group; a client may have as
 * many groups as the daemon's --groups-per-client allows. Groups survive a
 * daemon restart like slots do.
 * Return: 0, or -ENOSPC (all of the client's groups are made), -EMFILE,
 * -ENOMEM, -ECHILD, or a request error as cuflag_slot_acquire().
 */
CUFLAG_API int cuflag_group_create(cuflag_client *c, cuflag_group **out);

/**
 * cuflag_group_destroy() - close the group and its eventfd. Its slots must
 * have been released first: while one is held the group is left whole and
 * usable (-EBUSY), to be destroyed once they are. NULL is accepted (0).
 * Return: 0, or -EBUSY (a slot of the group is still held).
 */
CUFLAG_API int cuflag_group_destroy(cuflag_group *g);

/**
 * cuflag_group_fd() - the group's eventfd: POLLIN while completions wait in
 * its ring. Read it only through cuflag_group_drain(). It stays the group's.
 * Return: the fd (>= 0), or -EINVAL for NULL.
 */
CUFLAG_API int cuflag_group_fd(const cuflag_group *g);

/**
 * cuflag_group_slot_acquire() - get a slot of the group from the daemon.
 * The slot has no eventfd of its own; arm, cuflag_cuda_signal(), wait,
 * wait_spin and consume work on it as on any slot (a wait sleeps on the
 * group's eventfd).
 * Return: as cuflag_slot_acquire(), and -EINVAL for a NULL argument.
 */
CUFLAG_API int cuflag_group_slot_acquire(cuflag_group *g, cuflag_slot **out);

/**
 * cuflag_group_slots_acquire() - n slots of the group in as few round trips
 * as possible; all or nothing. Errors as cuflag_group_slot_acquire(), and
 * -EINVAL when n is 0.
 */
CUFLAG_API int cuflag_group_slots_acquire(cuflag_group *g, unsigned n, cuflag_slot **out);

/**
 * cuflag_group_drain() - the group's slots that completed, with how many
 * times each, since they were last drained or consumed.
 * @out: room for @max records.
 *
 * Non-blocking. Each completion is returned exactly once (the counts come from
 * the daemon's record, as for cuflag_slot_consume(); the ring only says which
 * slots to look at), also when the ring overflowed (then every slot of the
 * group is looked at) and across a daemon restart. A slot may appear in
 * several records of one drain only if it completed again meanwhile. When
 * more than @max records wait, the group's fd stays readable.
 * Return: the number of records filled (0 when none), or -EINVAL, -ECHILD.
 */
CUFLAG_API int cuflag_group_drain(cuflag_group *g, struct cuflag_completion *out,
				  unsigned max);

/*
 * Completions across processes. A slot exported as an fd (a capability:
 * whoever holds it may watch, whatever its uid) is imported by any client of
 * the node, alone or into a group; the imported slot is the importer's own
 * (it counts against the importer's quotas, never the exporter's), watches
 * the exporter's timeline and nothing else, and can neither arm nor complete.
 * Exports and imports survive a daemon restart: the library hands them to
 * the new daemon when it resumes, and every importer's count stays exact.
 */

/**
 * cuflag_slot_export() - an fd that names @s, for another process to import.
 * @fd: set to the new fd (close-on-exec).
 *
 * Pass it over a Unix socket (SCM_RIGHTS) or by fork(2). Any number of
 * exports may be made; each gives a new fd for the same handle (a sealed
 * memfd this library makes of what the daemon offers: its memory is this
 * process's). Closing it changes nothing for the slot; when the slot is
 * released (or its client disconnects, exits or is dropped) every import of
 * it ends (-EPIPE there). Each slot exported counts against the user's fd
 * quota until the client disconnects, released or not.
 * Return: 0, -EINVAL (NULL), -EPERM (@s was imported), -ECHILD (in a child
 * of fork), -EMFILE or -ENFILE (no fd left, here or in the daemon), -EDQUOT
 * (the user's fd quota, slots exported by this client included), -ENOMEM,
 * -ENOTCONN (no daemon came back in time), or another negative errno of the
 * connection.
 */
CUFLAG_API int cuflag_slot_export(cuflag_slot *s, int *fd);

/**
 * cuflag_slot_import() - a slot of @c that watches the slot @fd names.
 * @fd: an fd from cuflag_slot_export(), in this or another process; the
 *      caller may close it afterwards (the library keeps its own copy).
 * @out: set to the new slot.
 *
 * The new slot's eventfd (cuflag_slot_fd()) becomes readable each time the
 * exporter's slot completes an armed value; cuflag_slot_consume() returns
 * how many completed since the last consume, counted from the import and
 * exactly once (every importer has its own count, the exporter's is not
 * taken); cuflag_slot_wait() waits for a value of the exporter's timeline
 * (any value within 2^31 ahead of the one reached: the exporter tells the
 * importer which, as its arm returned it); cuflag_slot_flag() reads the
 * value reached, written by the daemon only. cuflag_slot_arm(),
 * cuflag_slot_arm_many(), cuflag_slot_complete(),
 * cuflag_slot_bind_eventfd(), cuflag_slot_export() and the CUDA calls that
 * signal (cuflag_cuda_signal(), cuflag_cuda_launched(),
 * cuflag_cuda_slot_devptr()) return -EPERM on it. When the exporter's slot
 * goes, the eventfd becomes readable, and once the completions before it are
 * consumed, consume and wait return -EPIPE (within a second). Release it
 * with cuflag_slot_release().
 * Return: 0, -EINVAL (NULL, or @fd is not a live handle of this daemon's:
 * another file, or the exporter's slot is gone), -EXDEV (@fd is a handle of
 * another daemon's: the node daemon's and a user's own, or two users' own,
 * share no exports; connect both processes to the same daemon), -EBADF (@fd
 * is not open),
 * -ENOSPC (the client holds slots-per-client slots), -EDQUOT (the user's
 * fd quota, or 64 imports of that slot or 1024 of the user's held already),
 * -EMFILE (the user's share of fds), -ECHILD, -ENOMEM, -ENOTCONN, or another
 * negative errno of the connection.
 */
CUFLAG_API int cuflag_slot_import(cuflag_client *c, int fd, cuflag_slot **out);

/**
 * cuflag_group_slot_import() - cuflag_slot_import() into group @g: the
 * group's fd rings for it, as for its other slots, so thousands of watches
 * share one fd. When the exporter's slot goes, cuflag_group_drain() hands
 * out one record for it with completions 0 (after those still to count),
 * and its consume and wait return -EPIPE.
 * Return: as cuflag_slot_import(), and -EINVAL for a NULL @g.
 */
CUFLAG_API int cuflag_group_slot_import(cuflag_group *g, int fd, cuflag_slot **out);

/**
 * cuflag_client_epoch() - the daemon's epoch: it changes at every daemon start.
 * Return: the epoch, or 0 for NULL.
 */
CUFLAG_API uint64_t cuflag_client_epoch(const cuflag_client *c);

/** cuflag_version() - the library's version, "MAJOR.MINOR.PATCH". */
CUFLAG_API const char *cuflag_version(void);

#ifdef __cplusplus
}
#endif

#endif
