/* SPDX-License-Identifier: MIT */
/*
 * Every completion counted exactly once, under each load shape the scanner's
 * idle policy must follow (daemon/policy/idle-policy.h), against the default
 * (adaptive) daemon and the spinning one: a steady rate with work in flight
 * half of each period; a burst after the scanner has parked; durations of
 * 10 us to 10 ms mixed on the same slots; and several clients with periods of
 * their own. The device is a thread that arms, waits the work's duration and
 * stores the flag; the waiter is a thread blocked in epoll over the slots'
 * eventfds. No timing is asserted but liveness (a wake within 2 s).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "cuflag-proto.h"
#include "harness.h"

#define SLOTS 8
#define MAX_INFLIGHT 64

struct shape {
	const char *name;
	unsigned n;          /* completions */
	uint64_t period_ns;  /* between arms (0: back to back) */
	uint64_t idle_ns;    /* before the first arm (the scanner parks) */
	int mixed;           /* durations 10 us .. 10 ms, else half a period */
};

struct run {
	const struct shape *sh;
	cuflag_slot *s[SLOTS];
	unsigned expect[SLOTS];
	_Atomic unsigned got_total;
	unsigned got[SLOTS];
	unsigned seed;
};

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
	while (nanosleep(&ts, &ts) < 0)
		;
}

static uint64_t duration(struct run *r)
{
	static const uint64_t mix[] = { 10000, 50000, 200000, 1000000, 3000000, 10000000 };

	if (r->sh->mixed)
		return mix[(unsigned)rand_r(&r->seed) % (sizeof(mix) / sizeof(mix[0]))];
	return r->sh->period_ns / 2;
}

/* Completions in flight, in the order they are due. */
struct flight {
	uint64_t due;
	unsigned slot;
	uint32_t target;
};

static void *device(void *arg)
{
	struct run *r = arg;
	struct flight f[MAX_INFLIGHT];
	unsigned nf = 0, armed = 0;
	uint64_t next_arm;

	sleep_ns(r->sh->idle_ns);
	next_arm = cuflag_now_ns();
	while (armed < r->sh->n || nf) {
		uint64_t now = cuflag_now_ns();
		/* Arm when it is time and there is room; one slot in flight
		 * at most once per value (timelines may hold many). */
		if (armed < r->sh->n && now >= next_arm && nf < MAX_INFLIGHT) {
			unsigned k = armed % SLOTS;
			uint32_t t;
			CHECK_RC(cuflag_slot_arm(r->s[k], &t));
			f[nf++] = (struct flight){ now + duration(r), k, t };
			r->expect[k]++;
			armed++;
			next_arm += r->sh->period_ns;
			continue;
		}
		/* Complete what is due, in arm order per slot (a stream's
		 * writes land in order). */
		for (unsigned i = 0; i < nf; i++) {
			int earlier = 0;
			for (unsigned j = 0; j < i; j++)
				earlier |= f[j].slot == f[i].slot;
			if (earlier || f[i].due > now)
				continue;
			sim_store(cuflag_slot_flag(r->s[f[i].slot]), f[i].target);
			memmove(&f[i], &f[i + 1], (nf - i - 1) * sizeof(f[0]));
			nf--;
			i--;
		}
		if (armed == r->sh->n && !nf)
			break;
		sleep_ns(2000);
	}
	return NULL;
}

static void *waiter(void *arg)
{
	struct run *r = arg;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	unsigned total = 0;

	CHECK(ep >= 0);
	for (unsigned k = 0; k < SLOTS; k++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = k };
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, cuflag_slot_fd(r->s[k]), &ev) == 0);
	}
	while (total < r->sh->n) {
		struct epoll_event ev[SLOTS];
		int n = epoll_wait(ep, ev, SLOTS, 2000);
		CHECK_MSG(n > 0, "%s: no wake within 2 s with %u of %u counted", r->sh->name,
			  total, r->sh->n);
		for (int i = 0; i < n; i++) {
			uint64_t c;
			unsigned k = ev[i].data.u32;
			if (cuflag_slot_consume(r->s[k], &c) == 0) {
				r->got[k] += (unsigned)c;
				total += (unsigned)c;
			}
		}
	}
	close(ep);
	return NULL;
}

/* One shape on its own connection; aborts unless exact. */
static void run_shape(const char *sock, const struct shape *sh, unsigned seed)
{
	struct run r = { .sh = sh, .seed = seed };
	cuflag_client *c;
	pthread_t td, tw;
	uint64_t extra;

	CHECK_RC(cuflag_connect(sock, &c));
	CHECK_RC(cuflag_slots_acquire(c, SLOTS, r.s));
	CHECK(pthread_create(&tw, NULL, waiter, &r) == 0);
	CHECK(pthread_create(&td, NULL, device, &r) == 0);
	pthread_join(td, NULL);
	pthread_join(tw, NULL);
	for (unsigned k = 0; k < SLOTS; k++) {
		CHECK_MSG(r.got[k] == r.expect[k], "%s: slot %u counted %u of %u", sh->name, k,
			  r.got[k], r.expect[k]);
		/* Nothing more comes later either. */
		CHECK(cuflag_slot_consume(r.s[k], &extra) == -EAGAIN);
	}
	cuflag_disconnect(c);
}

static const struct shape steady_1k = { "steady 1k/s", 400, 1000000, 0, 0 };
static const struct shape steady_10k = { "steady 10k/s", 2000, 100000, 0, 0 };
static const struct shape steady_100k = { "steady 100k/s", 10000, 10000, 0, 0 };
static const struct shape burst = { "burst after idle", 4000, 0, 300000000, 0 };
static const struct shape mixed = { "mixed 10us-10ms", 600, 200000, 0, 1 };

/* Clients with periods of their own, at once: each a process. */
static void many_clients(const char *sock)
{
	static const struct shape per[4] = {
		{ "client period 100us", 3000, 100000, 0, 0 },
		{ "client period 330us", 1000, 330000, 0, 0 },
		{ "client period 1ms", 300, 1000000, 0, 0 },
		{ "client period 3.3ms mixed", 100, 3300000, 0, 1 },
	};
	pid_t pid[4];

	for (int i = 0; i < 4; i++) {
		pid[i] = fork();
		CHECK(pid[i] >= 0);
		if (pid[i] == 0) {
			run_shape(sock, &per[i], 7u + (unsigned)i);
			_exit(0);
		}
	}
	for (int i = 0; i < 4; i++) {
		int st;
		CHECK(waitpid(pid[i], &st, 0) == pid[i]);
		CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed", per[i].name);
	}
}

static void all_shapes(const char *mode)
{
	const char *args[] = { "--scanner-mode", mode, NULL };
	const struct shape *shapes[] = { &steady_1k, &steady_10k, &steady_100k, &burst, &mixed };
	struct cuflag_msg_stats_reply st;
	struct daemon_proc d;
	int fds;

	daemon_start(&d, 0, args);
	fds = daemon_fd_count_steady(&d);
	for (unsigned i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		uint64_t t0 = cuflag_now_ns();
		run_shape(d.sock, shapes[i], 1u + i);
		printf("load shapes (%s): %s exact, %u completions in %.2f s\n", mode,
		       shapes[i]->name, shapes[i]->n, (double)(cuflag_now_ns() - t0) / 1e9);
	}
	many_clients(d.sock);
	printf("load shapes (%s): four clients with periods of their own exact\n", mode);
	daemon_stats(&d, &st);
	printf("load shapes (%s): scanner %.3f s of CPU, %llu wake-ups (%llu from sleeps), "
	       "%.2f s parked, %.2f s sleeping, %.2f s spinning, timer %.1f us late\n",
	       mode, (double)st.scanner_cpu_ns / 1e9, (unsigned long long)st.scanner_wakeups,
	       (unsigned long long)st.scanner_sleeps, (double)st.parked_ns / 1e9,
	       (double)st.sleeping_ns / 1e9, (double)st.spinning_ns / 1e9,
	       (double)st.timer_late_ns / 1e3);
	CHECK(st.scanner_mode == (strcmp(mode, "spin") ? 1u : 0u));
	/* The adaptive scanner slept and woke; the spinning one never sleeps
	 * while work is in flight that progresses. */
	if (strcmp(mode, "spin"))
		CHECK(st.scanner_sleeps > 0);
	CHECK(st.pending == 0);
	CHECK(daemon_fd_count_steady(&d) == fds);
	CHECK(daemon_stop(&d) == 0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	all_shapes("adaptive");
	all_shapes("spin");
	return 0;
}
