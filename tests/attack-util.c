/* SPDX-License-Identifier: MIT */
#include "attack-util.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuflag-proto.h"
#include "cuflag/cuflag.h"
#include "fdpass.h"
#include "proto.h"
#include "percentile.h"
#include "unix-socket.h"

struct daemon_proc attack_daemon;
static int failures;

#define MARKS_MAX 256
static struct marks {
	_Atomic uint32_t n;
	struct {
		_Atomic uint64_t t;
		char what[56];
	} e[MARKS_MAX];
} *marks;

void attack_mark(const char *fmt, ...)
{
	uint32_t i = atomic_fetch_add(&marks->n, 1);
	va_list ap;

	if (i >= MARKS_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(marks->e[i].what, sizeof(marks->e[i].what), fmt, ap);
	va_end(ap);
	atomic_store(&marks->e[i].t, cuflag_now_ns());
}

/* What the attacker did within the window, against its start. */
static void print_marks(const struct window *w)
{
	uint32_t n = atomic_load(&marks->n);

	printf("  timeline of %s:\n", w->name);
	for (uint32_t i = 0; i < n && i < MARKS_MAX; i++) {
		uint64_t t = atomic_load(&marks->e[i].t);
		if (t >= w->t0 && t <= w->t1)
			printf("    +%.1f ms %s\n", (double)(t - w->t0) / 1e6, marks->e[i].what);
	}
}
static int daemon_gone;

void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stdout, "FAIL: ");
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fprintf(stdout, "\n");
	failures++;
}

/* ---------------------------------------------------------------- */
/* Processes and users                                               */
/* ---------------------------------------------------------------- */

void *shm_alloc(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	return p;
}

long raise_nofile(void)
{
	struct rlimit rl;

	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	rl.rlim_cur = rl.rlim_max;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	return rl.rlim_cur == RLIM_INFINITY ? 1L << 20 : (long)rl.rlim_cur;
}

pid_t spawn_user(uid_t uid, int nice_inc, void (*fn)(void *), void *arg)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	raise_nofile(); /* as root: the hard limit goes with the user */
	if (become_user(uid)) {
		perror("becoming the test user");
		_exit(99);
	}
	errno = 0;
	if (nice_inc && nice(nice_inc) < 0 && errno)
		perror("nice");
	fn(arg);
	_exit(0);
}

int child_wait(pid_t pid, int timeout_ms)
{
	uint64_t end = cuflag_now_ns() + (uint64_t)timeout_ms * 1000000u;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		CHECK(r == 0);
		if (cuflag_now_ns() > end)
			break;
		usleep(1000);
	}
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &st, 0) == pid);
	return -1;
}

int daemon_connect_raw(void)
{
	return cuflag_unix_connect(attack_daemon.sock, 5);
}

int is_memfd_named(int fd, const char *name)
{
	char path[64], target[128], want[128];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = 0;
	snprintf(want, sizeof(want), "/memfd:%s", name);
	return !strncmp(target, want, strlen(want));
}

/* As cuflag_send_msg(), which stops at the protocol's 64 fds. */
int send_with_fds(int sock, const void *buf, size_t len, const int *fds, unsigned n)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 253)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r;

	CHECK(n <= 253);
	if (n) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	}
	r = sendmsg(sock, &msg, MSG_NOSIGNAL);
	if (r < 0)
		return -errno;
	return (size_t)r == len ? 0 : -EMSGSIZE;
}

ssize_t recv_reply(int sock, int *status, int timeout_ms)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	int fds[CUFLAG_MSG_MAX_FDS];
	struct pollfd p = { .fd = sock, .events = POLLIN };
	unsigned nfds = 0;
	ssize_t n;

	if (poll(&p, 1, timeout_ms) != 1)
		return -ETIMEDOUT;
	n = cuflag_recv_msg(sock, buf, sizeof(buf), fds, CUFLAG_MSG_MAX_FDS, &nfds, MSG_DONTWAIT);
	if (n > 0) {
		cuflag_close_fds(fds, nfds);
		if (status && (size_t)n >= sizeof(struct cuflag_msg_hdr))
			memcpy(status, buf + offsetof(struct cuflag_msg_hdr, status), 4);
	}
	return n;
}

int hung_up(int sock, int timeout_ms)
{
	uint64_t end = cuflag_now_ns() + (uint64_t)timeout_ms * 1000000u;

	for (;;) {
		struct pollfd p = { .fd = sock, .events = POLLRDHUP };
		if (poll(&p, 1, 10) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)))
			return 1;
		if (cuflag_now_ns() > end)
			return 0;
	}
}

int hello_status(void)
{
	cuflag_client *c = NULL;
	int rc = cuflag_connect(attack_daemon.sock, &c);

	if (!rc)
		cuflag_disconnect(c);
	return rc;
}

int clients_each(void (*fn)(const struct cuflag_msg_client_info *ci, void *arg), void *arg)
{
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hdr h;
	int sock = daemon_connect_raw(), fds[1], rc = -EPIPE;
	unsigned nfds;

	if (sock < 0)
		return sock;
	cuflag_hdr_init(&h, CUFLAG_MSG_CLIENTS, sizeof(h), 1, 0, 0);
	if (cuflag_send_msg(sock, &h, sizeof(h), NULL, 0, 0) == 0)
		for (;;) {
			struct cuflag_msg_client_info ci;
			ssize_t n = cuflag_recv_msg(sock, buf, sizeof(buf), fds, 0, &nfds, 0);
			if (n < (ssize_t)sizeof(h))
				break;
			memcpy(&h, buf, sizeof(h));
			if (h.status < 0) {
				rc = h.status;
				break;
			}
			if ((size_t)n < sizeof(h) + sizeof(ci))
				break;
			memcpy(&ci, buf + sizeof(h), sizeof(ci));
			if (!ci.client_id) {
				rc = 0;
				break;
			}
			fn(&ci, arg);
		}
	close(sock);
	return rc;
}

int wait_flag(_Atomic int *flag, int want, int ms)
{
	uint64_t end = cuflag_now_ns() + (uint64_t)ms * 1000000u;

	while (atomic_load(flag) < want) {
		if (cuflag_now_ns() > end)
			return 0;
		usleep(1000);
	}
	return 1;
}

void attacker_run(const char *name, int nice_inc, void (*fn)(void *), void *arg, int timeout_ms)
{
	if (child_wait(spawn_user(UID_ATTACKER, nice_inc, fn, arg), timeout_ms) != 0)
		fail("%s: the attacker did not finish", name);
}

/* ---------------------------------------------------------------- */
/* A TCP connection whose close lingers                              */
/* ---------------------------------------------------------------- */

void linger_make(struct linger_conn *l)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct linger lg = { .l_onoff = 1, .l_linger = 600 };
	socklen_t alen = sizeof(a);
	int small = 4096, fl;
	char junk[4096] = { 0 };

	l->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(l->listener >= 0);
	CHECK(setsockopt(l->listener, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) == 0);
	CHECK(bind(l->listener, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(listen(l->listener, 1) == 0);
	CHECK(getsockname(l->listener, (struct sockaddr *)&a, &alen) == 0);
	l->sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(l->sock >= 0);
	CHECK(setsockopt(l->sock, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) == 0);
	CHECK(connect(l->sock, (struct sockaddr *)&a, sizeof(a)) == 0);
	l->peer = accept4(l->listener, NULL, NULL, SOCK_CLOEXEC);
	CHECK(l->peer >= 0);
	alen = sizeof(a);
	CHECK(getsockname(l->sock, (struct sockaddr *)&a, &alen) == 0);
	l->port = ntohs(a.sin_port);
	/* Fill both buffers: the peer never reads, nothing more can go. */
	fl = fcntl(l->sock, F_GETFL);
	CHECK(fcntl(l->sock, F_SETFL, fl | O_NONBLOCK) == 0);
	while (send(l->sock, junk, sizeof(junk), MSG_NOSIGNAL) > 0)
		;
	CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
	CHECK(fcntl(l->sock, F_SETFL, fl) == 0);
	CHECK(setsockopt(l->sock, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
}

void linger_release(struct linger_conn *l)
{
	/* Closed with unread data: the peer resets, the lingering close returns. */
	if (l->peer >= 0)
		close(l->peer);
	if (l->listener >= 0)
		close(l->listener);
	l->peer = l->listener = -1;
}

/* The TCP state of our end (0 if gone), and whether a socket file still
 * owns it (an orphan's inode reads 0). */
static int tcp_state(unsigned port, int *owned)
{
	char line[512];
	FILE *f = fopen("/proc/net/tcp", "r");
	int st = 0;

	*owned = 0;
	CHECK(f != NULL);
	CHECK(fgets(line, sizeof(line), f) != NULL); /* the heading */
	while (fgets(line, sizeof(line), f)) {
		unsigned lport, state;
		unsigned long inode;
		if (sscanf(line, "%*d: %*x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &lport,
			   &state, &inode) != 3 || lport != port)
			continue;
		st = (int)state;
		*owned = inode != 0;
		break;
	}
	fclose(f);
	return st;
}

#define TCP_ESTABLISHED_ 1
#define TCP_FIN_WAIT1_ 4

int linger_lingering(const struct linger_conn *l)
{
	int owned, st = tcp_state(l->port, &owned);
	return st == TCP_FIN_WAIT1_ && owned;
}

/* Whether l's connection was reset from the other end within 500 ms (what
 * a close with lingering switched off does). */
static int peer_reset(const struct linger_conn *l)
{
	for (uint64_t end = cuflag_now_ns() + 500000000u; cuflag_now_ns() < end; usleep(2000)) {
		struct tcp_info ti;
		socklen_t len = sizeof(ti);
		/* The peer never reads (its buffer is full): only a reset closes
		 * it; a close that lingers sends nothing it could take. */
		if (getsockopt(l->peer, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
		    ti.tcpi_state == 7 /* TCP_CLOSE */)
			return 1;
	}
	return 0;
}

int linger_deliver(struct linger_conn *l, void (*sendfn)(int sock, void *arg), void *arg)
{
	for (int tries = 0; tries < 8; tries++) {
		int go[2], owned = 0, st = 0, rc;
		char c = 1;
		pid_t pid;
		uint64_t end;

		linger_make(l);
		CHECK(pipe2(go, O_CLOEXEC) == 0);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			close(go[1]);
			CHECK(read(go[0], &c, 1) == 1);
			sendfn(l->sock, arg);
			/* At once: the daemon's copy must be the last one. Had the
			 * daemon closed its copy first, this close lingers: killed. */
			close(l->sock);
			_exit(0);
		}
		close(go[0]);
		close(l->sock); /* the child's copy is the other one */
		l->sock = -1;
		CHECK(write(go[1], &c, 1) == 1);
		close(go[1]);
		rc = child_wait(pid, 300);
		/* Reset: the daemon took it and closed it without lingering (it
		 * switches lingering off on every socket a client hands over); the
		 * child's own close, had it been the last, would have lingered. */
		if (rc == 0 && peer_reset(l))
			return 1;
		/* Held open (a message in flight, a table entry) or lingering in
		 * a close: delivered. An orphan: the daemon closed it first. */
		end = cuflag_now_ns() + 500000000u;
		do {
			st = tcp_state(l->port, &owned);
			if (rc == 0 && owned && st == TCP_FIN_WAIT1_)
				return 1;
			usleep(1000);
		} while (rc == 0 && owned && cuflag_now_ns() < end);
		if (rc == 0 && owned)
			return 1;
		linger_release(l);
	}
	return 0;
}

/* ---------------------------------------------------------------- */
/* Samples                                                           */
/* ---------------------------------------------------------------- */

void samples_add(struct samples *s, uint64_t t0, uint64_t ns, int rc)
{
	uint32_t i = atomic_load(&s->n);

	if (i < SAMPLES_MAX) {
		s->v[i] = (struct sample){ .t0 = t0, .ns = ns, .rc = rc };
		atomic_store(&s->n, i + 1);
	}
}

void samples_figures(struct samples *s, uint64_t t0, uint64_t t1, struct figures *f)
{
	uint32_t n = atomic_load(&s->n);
	uint64_t inflight = atomic_load(&s->inflight_t0);
	double *v = malloc(sizeof(double) * (n + 1)); /* ms */
	unsigned k = 0;
	uint64_t worst = 0;

	CHECK(v != NULL);
	memset(f, 0, sizeof(*f));
	for (uint32_t i = 0; i < n; i++) {
		if (s->v[i].t0 < t0 || s->v[i].t0 > t1)
			continue;
		v[k++] = (double)s->v[i].ns / 1e6;
		if (s->v[i].rc)
			f->failed++;
		if (s->v[i].ns >= worst) {
			worst = s->v[i].ns;
			f->max_t0 = s->v[i].t0;
		}
	}
	/* Still waiting: it counts for what it has waited so far. */
	if (inflight && inflight <= t1) {
		uint64_t ns = cuflag_now_ns() - inflight;
		v[k++] = (double)ns / 1e6;
		if (ns >= worst)
			f->max_t0 = inflight;
	}
	f->n = k;
	if (k) {
		samples_sort(v, k);
		f->p50_ms = samples_percentile(v, k, 50);
		f->p99_ms = samples_percentile(v, k, 99);
		f->max_ms = v[k - 1];
	}
	free(v);
}

/* ---------------------------------------------------------------- */
/* The victim: one slot completed at a time                          */
/* ---------------------------------------------------------------- */

struct victim_ctl {
	_Atomic int stop, failed;
	struct samples s;
};
static struct victim_ctl *victim;
static pid_t victim_pid;

/* Handed from the waiter to the device thread. */
static struct {
	_Atomic uint32_t seq, target;
	volatile uint32_t *flag;
} dev;

/* The simulated device: stores the armed target a moment after the arm,
 * while the waiter sleeps in poll; t0 is taken just before the store. */
static void *device_main(void *arg)
{
	uint32_t done = 0;

	(void)arg;
	while (!atomic_load(&victim->stop)) {
		uint32_t seq = atomic_load(&dev.seq);
		if (seq == done) {
			usleep(50);
			continue;
		}
		usleep(100);
		atomic_store(&victim->s.inflight_t0, cuflag_now_ns());
		sim_store(dev.flag, atomic_load(&dev.target));
		done = seq;
	}
	return NULL;
}

static void victim_main(void *arg)
{
	cuflag_client *c;
	cuflag_slot *s;
	pthread_t th;
	int rc;

	(void)arg;
	rc = cuflag_connect(attack_daemon.sock, &c);
	if (!rc)
		rc = cuflag_slot_acquire(c, &s);
	if (rc) {
		fprintf(stderr, "victim: %s\n", strerror(-rc));
		atomic_store(&victim->failed, 1);
		return;
	}
	dev.flag = cuflag_slot_flag(s);
	CHECK(pthread_create(&th, NULL, device_main, NULL) == 0);
	while (!atomic_load(&victim->stop)) {
		struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
		uint64_t got = 0, t1 = 0, t0;
		uint32_t t;

		if (cuflag_slot_arm(s, &t)) {
			atomic_store(&victim->failed, 2);
			break;
		}
		atomic_store(&dev.target, t);
		atomic_fetch_add(&dev.seq, 1);
		while (!got && !atomic_load(&victim->stop)) {
			if (poll(&p, 1, 100) != 1)
				continue;
			t1 = cuflag_now_ns();
			rc = cuflag_slot_consume(s, &got);
			if (rc && rc != -EAGAIN) {
				atomic_store(&victim->failed, 3);
				break;
			}
		}
		if (!got)
			break;
		t0 = atomic_load(&victim->s.inflight_t0);
		samples_add(&victim->s, t0, t1 - t0, got == 1 ? 0 : -EPROTO);
		atomic_store(&victim->s.inflight_t0, 0);
		if (got != 1)
			atomic_store(&victim->failed, 4);
		usleep(300);
	}
	atomic_store(&victim->stop, 1);
	pthread_join(th, NULL);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
}

/* ---------------------------------------------------------------- */
/* Probes: another user's HELLO; root's cuflagctl status             */
/* ---------------------------------------------------------------- */

#define PROBE_EVERY_US 100000

struct probe_ctl {
	_Atomic int stop;
	struct samples s;
};
static struct probe_ctl *bystander, *admin;
static pid_t bystander_pid;
static pthread_t admin_thread;

/* Probe again and again until stopped, each round trip a sample. */
static void probe_loop(struct probe_ctl *p, int (*probe)(void))
{
	while (!atomic_load(&p->stop)) {
		uint64_t t0 = cuflag_now_ns();
		int rc;
		atomic_store(&p->s.inflight_t0, t0);
		rc = probe();
		samples_add(&p->s, t0, cuflag_now_ns() - t0, rc);
		atomic_store(&p->s.inflight_t0, 0);
		usleep(PROBE_EVERY_US);
	}
}

static void bystander_main(void *arg)
{
	(void)arg;
	probe_loop(bystander, hello_status);
}

/* cuflagctl status, killed after 5 s: its exit status or -ETIMEDOUT. */
static int run_ctl(void)
{
	const char *ctl = getenv("CUFLAGCTL");
	const char *argv[] = { ctl ? ctl : "cuflagctl", "--socket", attack_daemon.sock, "status",
			       NULL };
	pid_t pid = fork();
	int rc;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	rc = child_wait(pid, 5000);
	return rc < 0 ? -ETIMEDOUT : rc;
}

static void *admin_main(void *arg)
{
	(void)arg;
	probe_loop(admin, run_ctl);
	return NULL;
}

int admin_turned(int ms)
{
	uint32_t n0 = atomic_load(&admin->s.n);
	uint64_t end = cuflag_now_ns() + (uint64_t)ms * 1000000u;

	while (atomic_load(&admin->s.n) < n0 + 2) {
		if (cuflag_now_ns() > end)
			return 0;
		usleep(1000);
	}
	return 1;
}

/* ---------------------------------------------------------------- */
/* The daemon's log and watchdog                                     */
/* ---------------------------------------------------------------- */

static struct {
	pthread_t thread;
	pthread_mutex_t lock;
	_Atomic int stop;
	char buf[8 << 20];
	size_t len;
} dlog = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void *log_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&dlog.stop)) {
		struct pollfd p = { .fd = attack_daemon.log_fd, .events = POLLIN };
		char tmp[4096];
		ssize_t n;
		if (poll(&p, 1, 50) != 1)
			continue;
		n = read(attack_daemon.log_fd, tmp, sizeof(tmp));
		if (n <= 0) {
			if (n == 0)
				break;
			continue;
		}
		pthread_mutex_lock(&dlog.lock);
		if (dlog.len + (size_t)n < sizeof(dlog.buf) - 1) {
			memcpy(dlog.buf + dlog.len, tmp, (size_t)n);
			dlog.len += (size_t)n;
			dlog.buf[dlog.len] = 0;
		}
		pthread_mutex_unlock(&dlog.lock);
	}
	return NULL;
}

static size_t log_mark(void)
{
	size_t n;
	pthread_mutex_lock(&dlog.lock);
	n = dlog.len;
	pthread_mutex_unlock(&dlog.lock);
	return n;
}

static int log_count(size_t from, size_t to, const char *a, const char *b)
{
	int n = 0;

	pthread_mutex_lock(&dlog.lock);
	for (char *p = dlog.buf + from; p < dlog.buf + to;) {
		char *e = memchr(p, '\n', (size_t)(dlog.buf + to - p));
		if (!e)
			break;
		*e = 0;
		if (strstr(p, a) && (!b || strstr(p, b)))
			n++;
		*e = '\n';
		p = e + 1;
	}
	pthread_mutex_unlock(&dlog.lock);
	return n;
}

int window_log_count(struct window *w, const char *a, const char *b)
{
	return log_count(w->log0, w->log1 ? w->log1 : log_mark(), a, b);
}

#define PINGS_MAX 8192
static struct {
	pthread_t thread;
	int fd;
	char path[108];
	_Atomic int stop;
	_Atomic uint32_t n;
	uint64_t at[PINGS_MAX];
} wd = { .fd = -1 };

static void *watchdog_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&wd.stop)) {
		struct pollfd p = { .fd = wd.fd, .events = POLLIN };
		char msg[512];
		ssize_t n;
		if (poll(&p, 1, 50) != 1)
			continue;
		n = recv(wd.fd, msg, sizeof(msg) - 1, MSG_DONTWAIT);
		if (n <= 0)
			continue;
		msg[n] = 0;
		uint32_t i = atomic_load(&wd.n);
		if (strstr(msg, "WATCHDOG=1") && i < PINGS_MAX) {
			wd.at[i] = cuflag_now_ns();
			atomic_store(&wd.n, i + 1);
		}
	}
	return NULL;
}

/* The longest stretch of [t0, t1] without a watchdog ping, in ms. */
static double watchdog_gap_ms(uint64_t t0, uint64_t t1)
{
	uint32_t n = atomic_load(&wd.n);
	uint64_t last = t0, gap = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (wd.at[i] < t0) {
			last = wd.at[i];
			continue;
		}
		if (wd.at[i] > t1)
			break;
		if (wd.at[i] - last > gap)
			gap = wd.at[i] - last;
		last = wd.at[i];
	}
	if (t1 - last > gap)
		gap = t1 - last;
	return (double)gap / 1e6;
}

/*
 * A control: a thread of the test that sleeps 1 ms again and again and
 * notes by how much it overslept. It has nothing to do with the daemon: a
 * stall it sees at the time of the victim's slowest wake is the machine's.
 */
#define STALLS_MAX 4096
static struct {
	pthread_t thread;
	_Atomic int stop;
	_Atomic uint32_t n;
	struct {
		uint64_t t0, ns;
	} e[STALLS_MAX];
} ctl_stalls;

static void *control_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&ctl_stalls.stop)) {
		uint64_t t0 = cuflag_now_ns(), late;
		usleep(1000);
		late = cuflag_now_ns() - t0;
		late = late > 1000000u ? late - 1000000u : 0;
		uint32_t i = atomic_load(&ctl_stalls.n);
		if (late > 2000000u && i < STALLS_MAX) {
			ctl_stalls.e[i].t0 = t0;
			ctl_stalls.e[i].ns = late;
			atomic_store(&ctl_stalls.n, i + 1);
		}
	}
	return NULL;
}

/* The control's longest oversleep in [t0, t1] (0 if none over 2 ms). */
static uint64_t control_worst(uint64_t t0, uint64_t t1, uint64_t *at)
{
	uint32_t n = atomic_load(&ctl_stalls.n);
	uint64_t worst = 0;

	for (uint32_t i = 0; i < n; i++)
		if (ctl_stalls.e[i].t0 >= t0 && ctl_stalls.e[i].t0 <= t1 &&
		    ctl_stalls.e[i].ns > worst) {
			worst = ctl_stalls.e[i].ns;
			*at = ctl_stalls.e[i].t0;
		}
	return worst;
}

/* ---------------------------------------------------------------- */
/* The daemon's memory cgroup                                        */
/* ---------------------------------------------------------------- */

static struct {
	char dir[600];  /* the cgroup made for the daemon, "" if none */
	char home[560]; /* ours, to move back into */
	int v2;
} cg;

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

static long read_kv_kb(const char *path, const char *key)
{
	char line[256];
	size_t kl = strlen(key);
	long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && (line[kl] == ' ' || line[kl] == ':' || line[kl] == '\t')) {
			long long x = atoll(line + kl + 1);
			v = strstr(line, "kB") ? (long)x : (long)(x / 1024);
			break;
		}
	fclose(f);
	return v;
}

static long read_num_kb(const char *path)
{
	char buf[64] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? (long)(atoll(buf) / 1024) : -1;
}

/* Make a memory cgroup beside ours and move this process in: the daemon
 * forked next is charged there for everything it maps and creates. */
static void cgroup_enter(void)
{
	char line[512], path[700];
	FILE *f = fopen("/proc/self/cgroup", "r");
	char me[32];

	cg.dir[0] = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '\n');
		if (p)
			*p = 0;
		if ((p = strstr(line, ":memory:"))) {
			snprintf(cg.home, sizeof(cg.home), "/sys/fs/cgroup/memory%s", p + 8);
			cg.v2 = 0;
			break;
		}
		if (!strncmp(line, "0::", 3) && access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
			snprintf(cg.home, sizeof(cg.home), "/sys/fs/cgroup%s", line + 3);
			cg.v2 = 1;
		}
	}
	fclose(f);
	if (!cg.home[0])
		return;
	/* v2 keeps processes in leaves only: ours has no controllers for its
	 * children, the root usually has memory on for them. */
	snprintf(cg.dir, sizeof(cg.dir), "%s/cuflagd-attack-%d", cg.v2 ? "/sys/fs/cgroup" : cg.home,
		 (int)getpid());
	snprintf(me, sizeof(me), "%d", (int)getpid());
	snprintf(path, sizeof(path), "%s/%s", cg.dir, cg.v2 ? "memory.current" : "memory.usage_in_bytes");
	if (mkdir(cg.dir, 0755) < 0 || access(path, R_OK) < 0) {
		rmdir(cg.dir);
		cg.dir[0] = 0;
		return;
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg.dir);
	if (write_str(path, me)) {
		rmdir(cg.dir);
		cg.dir[0] = 0;
	}
}

static void cgroup_leave(void)
{
	char path[700], me[32];

	if (!cg.dir[0])
		return;
	snprintf(me, sizeof(me), "%d", (int)getpid());
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg.home);
	CHECK(write_str(path, me) == 0);
}

void daemon_mem(struct daemon_mem *m)
{
	char path[700];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)attack_daemon.pid);
	m->rss_kb = read_kv_kb(path, "VmRSS:");
	m->shmem_kb = read_kv_kb(path, "RssShmem:");
	m->cg_kb = m->cg_shmem_kb = -1;
	if (!cg.dir[0])
		return;
	snprintf(path, sizeof(path), "%s/%s", cg.dir,
		 cg.v2 ? "memory.current" : "memory.usage_in_bytes");
	m->cg_kb = read_num_kb(path);
	snprintf(path, sizeof(path), "%s/memory.stat", cg.dir);
	m->cg_shmem_kb = read_kv_kb(path, "shmem");
}

int hello_raw(int sock, struct cuflag_msg_hello_reply *hr)
{
	struct {
		struct cuflag_msg_hdr h;
		struct cuflag_msg_hello b;
	} m = { .b = { .version_min = CUFLAG_PROTO_VERSION,
		       .version_max = CUFLAG_PROTO_VERSION } };
	uint8_t buf[CUFLAG_MSG_MAX];
	struct cuflag_msg_hdr h;
	int fds[4];
	unsigned nfds = 0;
	ssize_t n;

	cuflag_hdr_init(&m.h, CUFLAG_MSG_HELLO, sizeof(m), 1, 0, 0);
	if (send_with_fds(sock, &m, sizeof(m), NULL, 0))
		return -EPIPE;
	n = cuflag_recv_msg(sock, buf, sizeof(buf), fds, 4, &nfds, 0);
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	if (n < (ssize_t)sizeof(h))
		return -EPIPE;
	memcpy(&h, buf, sizeof(h));
	if (h.status)
		return h.status;
	if (hr) {
		if ((size_t)n < sizeof(h) + sizeof(*hr))
			return -EPIPE;
		memcpy(hr, buf + sizeof(h), sizeof(*hr));
	}
	return 0;
}

int daemon_mem_limit(long mb)
{
	char path[700], v[32];

	if (!cg.dir[0])
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%s", cg.dir,
		 cg.v2 ? "memory.max" : "memory.limit_in_bytes");
	if (mb < 0)
		snprintf(v, sizeof(v), "%s", cg.v2 ? "max" : "-1");
	else
		snprintf(v, sizeof(v), "%ld", mb * 1024 * 1024);
	return write_str(path, v);
}

/* ---------------------------------------------------------------- */
/* The bench                                                         */
/* ---------------------------------------------------------------- */

static struct {
	int fds;
	struct daemon_mem mem;
} base;

uint64_t daemon_dropped(void)
{
	struct cuflag_msg_stats_reply st;
	int rc = daemon_proc_stats(&attack_daemon, &st);

	if (rc) {
		fail("STATS not answered within 5 s: %s", strerror(-rc));
		return 0;
	}
	return st.dropped;
}

int daemon_running(void)
{
	return !daemon_gone && kill(attack_daemon.pid, 0) == 0;
}

double daemon_term(int limit_ms)
{
	uint64_t t0 = cuflag_now_ns();
	double ms;
	int st;

	if (daemon_gone)
		return 0;
	st = daemon_proc_stop(&attack_daemon, limit_ms);
	ms = (double)(cuflag_now_ns() - t0) / 1e6;
	daemon_gone = 1;
	CHECK(st >= 0);
	if (ms > limit_ms)
		return -1;
	if (cuflag_exit_code(st) != 0)
		fail("the daemon exited with status %d", cuflag_exit_code(st));
	return ms;
}

static int fds_back(void *arg)
{
	(void)arg;
	return daemon_fd_count(&attack_daemon) <= base.fds;
}

static int pinged(void *arg)
{
	(void)arg;
	return atomic_load(&wd.n) > 0;
}

static int warmed_up(void *arg)
{
	(void)arg;
	return atomic_load(&victim->s.n) >= 300 && atomic_load(&bystander->s.n) >= 3 &&
	       atomic_load(&admin->s.n) >= 3;
}

static void victim_init(void *arg)
{
	(void)arg;
	victim_main(NULL);
}

static void bystander_init(void *arg)
{
	(void)arg;
	bystander_main(NULL);
}

void bench_start(const char *const *daemon_args)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char usec[32];

	if (geteuid() != 0) {
		printf("SKIP: the attack suite needs root (it runs each party as a user of its "
		       "own)\n");
		exit(77);
	}
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IONBF, 0);
	CHECK(daemon_proc_dir(&attack_daemon, "cuflag-attack") == 0);
	/* The users reach the socket, list nothing. */
	CHECK(chmod(attack_daemon.dir, 0711) == 0);

	/* Our own service manager's end: the daemon's READY and WATCHDOG=1. */
	snprintf(wd.path, sizeof(wd.path), "%s/notify", attack_daemon.dir);
	wd.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(wd.fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", wd.path);
	CHECK(bind(wd.fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(pthread_create(&wd.thread, NULL, watchdog_main, NULL) == 0);
	snprintf(usec, sizeof(usec), "%llu", (unsigned long long)WATCHDOG_MS * 1000);
	setenv("NOTIFY_SOCKET", wd.path, 1);
	setenv("WATCHDOG_USEC", usec, 1);
	unsetenv("WATCHDOG_PID");

	cgroup_enter();
	daemon_start_in(&attack_daemon, 1, daemon_args);
	cgroup_leave();
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	CHECK(pthread_create(&dlog.thread, NULL, log_main, NULL) == 0);

	marks = shm_alloc(sizeof(*marks));
	victim = shm_alloc(sizeof(*victim));
	bystander = shm_alloc(sizeof(*bystander));
	admin = shm_alloc(sizeof(*admin));
	victim_pid = spawn_user(UID_VICTIM, 0, victim_init, NULL);
	bystander_pid = spawn_user(UID_BYSTANDER, 0, bystander_init, NULL);
	CHECK(pthread_create(&admin_thread, NULL, admin_main, NULL) == 0);
	CHECK(pthread_create(&ctl_stalls.thread, NULL, control_main, NULL) == 0);
	if (!wait_until(warmed_up, NULL, 10000)) {
		fprintf(stderr, "the victim or a probe did not start (victim failed: %d, %u "
				"samples)\n",
			atomic_load(&victim->failed), atomic_load(&victim->s.n));
		abort();
	}
	/* The probes come and go: the fewest fds seen is the daemon's own. */
	base.fds = daemon_fd_count(&attack_daemon);
	for (int i = 0; i < 50; i++) {
		int n = daemon_fd_count(&attack_daemon);
		if (n < base.fds)
			base.fds = n;
		usleep(2000);
	}
	daemon_mem(&base.mem);
	/* The first ping comes half a watchdog period after the start. */
	wait_until(pinged, NULL, WATCHDOG_MS + 500);
	if (atomic_load(&wd.n) == 0)
		printf("note: no watchdog ping seen (built without libsystemd?): watchdog not "
		       "checked\n");
	printf("| attack | victim wakes | p50 ms | p99 ms | max ms | admin status max ms | "
	       "other user's HELLO max ms | watchdog longest gap ms, misses | daemon fds "
	       "before/after | daemon RSS MB before/after | daemon cgroup MB before/after "
	       "(shmem) | attacker |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
}

static int stopped(void *arg)
{
	return waitpid(*(pid_t *)arg, NULL, WNOHANG) == *(pid_t *)arg;
}

int bench_finish(void)
{
	double ms;

	atomic_store(&victim->stop, 1);
	atomic_store(&bystander->stop, 1);
	atomic_store(&admin->stop, 1);
	if (!wait_until(stopped, &victim_pid, 3000))
		child_wait(victim_pid, 0);
	if (!wait_until(stopped, &bystander_pid, 6000))
		child_wait(bystander_pid, 0);
	pthread_join(admin_thread, NULL);
	atomic_store(&ctl_stalls.stop, 1);
	pthread_join(ctl_stalls.thread, NULL);
	if (atomic_load(&victim->failed))
		fail("the victim failed (step %d)", atomic_load(&victim->failed));
	if (daemon_running()) {
		ms = daemon_term(TARGET_STOP_MS);
		if (ms < 0)
			fail("SIGTERM did not stop the daemon within %d ms", TARGET_STOP_MS);
	}
	atomic_store(&dlog.stop, 1);
	atomic_store(&wd.stop, 1);
	pthread_join(dlog.thread, NULL);
	pthread_join(wd.thread, NULL);
	close(wd.fd);
	unlink(wd.path);
	daemon_proc_remove(&attack_daemon);
	if (cg.dir[0])
		for (int i = 0; i < 100 && rmdir(cg.dir) < 0; i++)
			usleep(10000);
	if (failures) {
		size_t from = dlog.len > 6000 ? dlog.len - 6000 : 0;
		printf("daemon log (tail):\n%s\n", dlog.buf + from);
		printf("%d check(s) failed\n", failures);
		return 1;
	}
	printf("every target met\n");
	return 0;
}

/* ---------------------------------------------------------------- */
/* Windows                                                           */
/* ---------------------------------------------------------------- */

void window_open(struct window *w, const char *name)
{
	memset(w, 0, sizeof(*w));
	w->name = name;
	w->dropped0 = daemon_dropped();
	w->failures0 = failures;
	w->log0 = log_mark();
	w->t0 = cuflag_now_ns();
}

static int victim_passed(void *arg)
{
	uint64_t t1 = *(uint64_t *)arg;
	uint32_t n = atomic_load(&victim->s.n);
	return atomic_load(&victim->stop) || (n && victim->s.v[n - 1].t0 > t1);
}

static int started_since(struct samples *s, uint64_t t0)
{
	uint32_t n = atomic_load(&s->n);
	uint64_t inflight = atomic_load(&s->inflight_t0);
	return (n && s->v[n - 1].t0 >= t0) || (inflight && inflight >= t0);
}

/* A p99 of fewer wakes than this is only the slowest one. */
#define WINDOW_MIN_WAKES 200

/* Whether the victim has made WINDOW_MIN_WAKES wakes since t0. */
static int victim_counted(void *arg)
{
	uint64_t t0 = *(uint64_t *)arg;
	uint32_t n = atomic_load(&victim->s.n), k = 0;

	for (uint32_t i = n; i-- > 0 && victim->s.v[i].t0 >= t0 && k < WINDOW_MIN_WAKES;)
		k++;
	return k >= WINDOW_MIN_WAKES || atomic_load(&victim->stop);
}

static int probed(void *arg)
{
	uint64_t t0 = *(uint64_t *)arg;
	return started_since(&admin->s, t0) && started_since(&bystander->s, t0);
}

static int mem_back(void *arg)
{
	struct daemon_mem *m = arg;

	daemon_mem(m);
	return m->rss_kb <= base.mem.rss_kb + MEM_SLACK_KB &&
	       (m->cg_kb < 0 || m->cg_kb <= base.mem.cg_kb + MEM_SLACK_KB);
}

static void mb(char *out, size_t cap, long kb)
{
	if (kb < 0)
		snprintf(out, cap, "n/a");
	else
		snprintf(out, cap, "%.1f", (double)kb / 1024);
}

void window_close(struct window *w)
{
	struct figures v, ad, by;
	struct daemon_mem m = { 0 };
	char r0[16], r1[16], c0[16], c1[16], s0[16], s1[16];
	double gap;
	int misses, fds_after;

	/* Every probe has had a go within the window, however short the attack,
	 * and the victim has woken often enough for its p99 to be one. */
	wait_until(probed, &w->t0, 3000);
	wait_until(victim_counted, &w->t0, 3000);
	w->t1 = cuflag_now_ns();
	/* The wake in flight at the end belongs to the attack: let it land
	 * (counted as it stands if it has not within 2 s). */
	wait_until(victim_passed, &w->t1, 2000);
	samples_figures(&victim->s, w->t0, w->t1, &v);
	samples_figures(&admin->s, w->t0, w->t1, &ad);
	samples_figures(&bystander->s, w->t0, w->t1, &by);
	gap = watchdog_gap_ms(w->t0, w->t1);
	w->log1 = log_mark();
	misses = window_log_count(w, "watchdog not pinged", NULL);

	if (daemon_running()) {
		wait_until(fds_back, NULL, 5000);
		fds_after = daemon_fd_count(&attack_daemon);
		wait_until(mem_back, &m, 5000);
	} else {
		fds_after = -1;
	}
	mb(r0, sizeof(r0), base.mem.rss_kb);
	mb(r1, sizeof(r1), m.rss_kb);
	mb(c0, sizeof(c0), base.mem.cg_kb);
	mb(c1, sizeof(c1), m.cg_kb);
	mb(s0, sizeof(s0), base.mem.cg_shmem_kb);
	mb(s1, sizeof(s1), m.cg_shmem_kb);
	printf("| %s | %u | %.3f | %.3f | %.1f | %.0f%s | %.0f%s | %.0f, %d | %d / %d | %s / %s | "
	       "%s (%s) / %s (%s) | %s |\n",
	       w->name, v.n, v.p50_ms, v.p99_ms, v.max_ms, ad.max_ms,
	       ad.failed ? " (failed)" : "", by.max_ms, by.failed ? " (refused)" : "",
	       atomic_load(&wd.n) ? gap : 0.0, misses, base.fds, fds_after, r0, r1, c0, s0, c1,
	       s1, w->outcome[0] ? w->outcome : "-");

	if (v.n == 0)
		fail("%s: the victim completed nothing", w->name);
	if (w->reference)
		return;
	if (v.p99_ms > TARGET_P99_MS)
		fail("%s: victim p99 %.3f ms > %.0f ms", w->name, v.p99_ms, TARGET_P99_MS);
	if (v.max_ms > TARGET_MAX_MS)
		fail("%s: victim max %.1f ms > %.0f ms (from +%.1f ms)", w->name, v.max_ms,
		     TARGET_MAX_MS, (double)(v.max_t0 - w->t0) / 1e6);
	if (ad.n == 0 || ad.max_ms > TARGET_ADMIN_MS || ad.failed)
		fail("%s: root's cuflagctl status: max %.0f ms, %u of %u failed (target: every "
		     "one within %.0f ms)",
		     w->name, ad.max_ms, ad.failed, ad.n, TARGET_ADMIN_MS);
	if (by.max_ms > TARGET_ADMIN_MS || by.failed)
		fail("%s: another user's connect+HELLO: max %.0f ms, %u of %u refused", w->name,
		     by.max_ms, by.failed, by.n);
	if (atomic_load(&wd.n) && (gap > WATCHDOG_MS || misses))
		fail("%s: watchdog: %.0f ms without a ping (limit %d), %d 'not pinged' lines",
		     w->name, gap, WATCHDOG_MS, misses);
	if (fds_after >= 0 && fds_after > base.fds)
		fail("%s: the daemon holds %d fds, %d before", w->name, fds_after, base.fds);
	if (fds_after >= 0 && m.rss_kb > base.mem.rss_kb + MEM_SLACK_KB)
		fail("%s: daemon RSS %ld kB, %ld kB before", w->name, m.rss_kb, base.mem.rss_kb);
	if (fds_after >= 0 && m.cg_kb >= 0 && m.cg_kb > base.mem.cg_kb + MEM_SLACK_KB)
		fail("%s: the daemon's cgroup holds %ld kB (shmem %ld kB), %ld kB before", w->name,
		     m.cg_kb, m.cg_shmem_kb, base.mem.cg_kb);
	if (failures > w->failures0 || getenv("ATTACK_VERBOSE")) {
		uint64_t at = 0, stall = control_worst(w->t0, w->t1, &at);
		printf("  victim's slowest wake from +%.1f ms\n", (double)(v.max_t0 - w->t0) / 1e6);
		if (stall)
			printf("  a control thread of the test (sleeping 1 ms at a time, nothing to "
			       "do with the daemon) overslept by up to %.1f ms (from +%.1f ms)\n",
			       (double)stall / 1e6, (double)(at - w->t0) / 1e6);
		print_marks(w);
	}
}
