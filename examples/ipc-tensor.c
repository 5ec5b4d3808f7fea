/* SPDX-License-Identifier: MIT */
/*
 * One process's GPU work awaited by another: a producer fills a tensor in
 * device memory it shares by CUDA IPC and signals a cuflag slot after it on
 * its stream; a consumer process, handed the IPC handle and the slot's
 * export over a Unix socket, imports the slot and reads the tensor once its
 * value is reached. Two ways to wait:
 *
 *   ipc-tensor            the consumer's epoll loop sleeps on the imported
 *                         slot's eventfd, then copies the tensor to the host;
 *   ipc-tensor --gpu-wait the consumer's stream waits on the GPU for the value
 *                         (cuflag_cuda_wait()) before its copy: no host thread
 *                         waits for the producer at all; the consumer then
 *                         waits for its own copy through a slot of its own.
 *
 * The producer sends the value as soon as the work is enqueued, behind a
 * kernel that keeps the stream busy a while: a consumer that did not wait
 * for the value would read the tensor before it is filled, and fail.
 *
 * Outside this tree, against the installed library: cu.cuX() is cuX() (and
 * "cu.h" is <cuda.h>); gpu_load() is cuInit(0) (77 where it fails);
 * gpu_dev_open() is cuDeviceGet(), cuDevicePrimaryCtxRetain() and
 * cuCtxSetCurrent(), and its busy kernel any kernel that takes a while;
 * CU_TRY checks a CUresult.
 *
 * Usage: ipc-tensor [--gpu-wait] [ROUNDS]   (the daemon: $CUFLAG_SOCKET, else
 *        cuflagd's own socket; 200 rounds)
 * Exit status: 0 when the consumer read every round's tensor whole, each
 * completion counted once; 77 without a GPU; 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cu.h"
#include "cuflag/cuflag.h"
#include "cuflag/cuflag_cuda.h"
#include "fdpass.h"

#define ELEMS (1u << 20)          /* 4 MiB of uint32 */
#define BUSY_NS 300000ull         /* the producer's stream is busy this long first */
#define TIMEOUT_MS 10000

/* What goes from the producer to the consumer, once. */
struct hello {
	CUipcMemHandle mem;
};

/* Each round: the value to wait for and the tensor's pattern. */
struct round {
	uint32_t value;
	uint32_t pattern;
};

static int fail(const char *who, const char *what, int err)
{
	fprintf(stderr, "ipc-tensor %s: FAIL %s: %s\n", who, what, strerror(err < 0 ? -err : err));
	return 1;
}

/* The consumer's eventfd loop: sleep until the imported slot reached value,
 * counting its completions (each round completes one). */
static int await_value(cuflag_slot *s, uint32_t value, uint64_t *counted)
{
	struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
	uint64_t n;
	int rc;

	while ((rc = cuflag_slot_wait(s, value, 0)) == -ETIMEDOUT) {
		if (poll(&p, 1, TIMEOUT_MS) != 1)
			return -ETIMEDOUT;
		if (cuflag_slot_consume(s, &n) == 0)
			*counted += n;
	}
	return rc;
}

static int consumer(int sock, const char *path, int gpu_wait)
{
	struct hello h;
	struct gpu_dev g;
	cuflag_client *c = NULL;
	cuflag_slot *s = NULL, *own = NULL;
	CUdeviceptr tensor = 0;
	CUstream stream = NULL;
	uint32_t *host = NULL;
	uint64_t counted = 0, n;
	int fds[1] = { -1 }, rc = 1, rounds = 0;
	unsigned nfds = 0;
	struct round r;

	if (cuflag_recv_msg(sock, &h, sizeof(h), fds, 1, &nfds, 0) != (ssize_t)sizeof(h) || nfds != 1)
		return fail("consumer", "the producer's handles", EPROTO);
	if ((rc = gpu_load()) || gpu_dev_open(&g, 0)) {
		close(fds[0]);
		return rc ? rc : 1;
	}
	rc = 1;
	if ((errno = -cuflag_connect(path, &c)) || (errno = -cuflag_slot_import(c, fds[0], &s))) {
		fail("consumer", "import", errno);
		goto fail;
	}
	close(fds[0]);
	fds[0] = -1;
	/* Imported: its count starts now, so the producer starts only then. */
	r = (struct round){ 0 };
	if (send(sock, &r, sizeof(r), MSG_NOSIGNAL) != (ssize_t)sizeof(r))
		goto fail;
	CU_TRY(cu.cuIpcOpenMemHandle(&tensor, h.mem, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	CU_TRY(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	CU_TRY(cu.cuMemHostAlloc((void **)&host, ELEMS * sizeof(uint32_t), 0));
	if (gpu_wait && (errno = -cuflag_slot_acquire(c, &own))) {
		fail("consumer", "a slot for its own copy", errno);
		goto fail;
	}
	while (recv(sock, &r, sizeof(r), 0) == (ssize_t)sizeof(r)) {
		int err;
		if (gpu_wait) {
			uint32_t done;
			/* The stream waits for the producer's value, then copies. */
			if ((err = cuflag_cuda_wait(s, stream, r.value)))
				return fail("consumer", "cuflag_cuda_wait", err);
			CU_TRY(cu.cuMemcpyDtoHAsync(host, tensor, ELEMS * sizeof(uint32_t), stream));
			if ((err = cuflag_cuda_signal(own, stream, &done)) ||
			    (err = cuflag_slot_wait(own, done, TIMEOUT_MS)))
				return fail("consumer", "its copy", err);
			if (cuflag_slot_consume(s, &n) == 0)
				counted += n;
		} else {
			if ((err = await_value(s, r.value, &counted)))
				return fail("consumer", "await the value", err);
			CU_TRY(cu.cuMemcpyDtoHAsync(host, tensor, ELEMS * sizeof(uint32_t), stream));
			CU_TRY(cu.cuStreamSynchronize(stream));
		}
		for (uint32_t i = 0; i < ELEMS; i++)
			if (host[i] != r.pattern) {
				fprintf(stderr, "ipc-tensor consumer: FAIL round %d: element %u is %u, "
						"not %u: read before the producer's value\n",
					rounds, i, host[i], r.pattern);
				goto fail;
			}
		rounds++;
		if (send(sock, &r, sizeof(r), MSG_NOSIGNAL) != (ssize_t)sizeof(r))
			goto fail;
	}
	/* The producer released its slot: the import ends, every completion
	 * counted once before. */
	while ((rc = cuflag_slot_consume(s, &n)) == 0)
		counted += n;
	if (rc != -EPIPE) {
		struct pollfd p = { .fd = cuflag_slot_fd(s), .events = POLLIN };
		(void)poll(&p, 1, 1000);
		while ((rc = cuflag_slot_consume(s, &n)) == 0)
			counted += n;
	}
	if (rc != -EPIPE || counted != (uint64_t)rounds) {
		fprintf(stderr, "ipc-tensor consumer: FAIL %d rounds, %llu completions counted, %s\n",
			rounds, (unsigned long long)counted, strerror(-rc));
		rc = 1;
		goto fail;
	}
	printf("ipc-tensor consumer: %d tensors read (%s), each completion counted once\n", rounds,
	       gpu_wait ? "its stream waited on the GPU" : "awaited on its eventfd");
	rc = 0;
fail:
	if (fds[0] >= 0)
		close(fds[0]);
	if (host)
		cu.cuMemFreeHost(host);
	if (tensor)
		cu.cuIpcCloseMemHandle(tensor);
	cuflag_slot_release(own);
	cuflag_slot_release(s);
	cuflag_disconnect(c);
	return rc;
}

static int producer(int sock, const char *path, int rounds)
{
	struct gpu_dev g;
	struct hello h;
	cuflag_client *c = NULL;
	cuflag_slot *s = NULL;
	CUdeviceptr tensor = 0;
	CUstream stream = NULL;
	int rc, fd = -1, err;

	if ((rc = gpu_load()) || gpu_dev_open(&g, 0))
		return rc ? rc : 1;
	rc = 1;
	if ((err = cuflag_connect(path, &c)) || (err = cuflag_slot_acquire(c, &s)) ||
	    (err = cuflag_slot_export(s, &fd)))
		return fail("producer", "export", err);
	CU_TRY(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
	CU_TRY(cu.cuMemAlloc(&tensor, ELEMS * sizeof(uint32_t)));
	CU_TRY(cu.cuMemsetD32Async(tensor, 0, ELEMS, stream));
	CU_TRY(cu.cuStreamSynchronize(stream));
	CU_TRY(cu.cuIpcGetMemHandle(&h.mem, tensor));
	if (cuflag_send_msg(sock, &h, sizeof(h), &fd, 1, 0))
		goto fail;
	close(fd);
	fd = -1;
	{
		struct round imported;
		/* An import counts from when it is made: wait for it. */
		if (recv(sock, &imported, sizeof(imported), 0) != (ssize_t)sizeof(imported))
			goto fail;
	}
	for (int i = 0; i < rounds; i++) {
		struct round r = { .pattern = 0x1000u + (uint32_t)i };
		uint64_t busy = BUSY_NS;
		void *params[] = { &busy };
		/* The computation: a while of work, then the tensor's values. */
		if (gpu_launch1(g.busy, stream, params))
			goto fail;
		CU_TRY(cu.cuMemsetD32Async(tensor, r.pattern, ELEMS, stream));
		if ((err = cuflag_cuda_signal(s, stream, &r.value)))
			return fail("producer", "cuflag_cuda_signal", err);
		/* Sent at once: the consumer must wait for the value itself. */
		if (send(sock, &r, sizeof(r), MSG_NOSIGNAL) != (ssize_t)sizeof(r) ||
		    recv(sock, &r, sizeof(r), 0) != (ssize_t)sizeof(r))
			goto fail;
	}
	CU_TRY(cu.cuStreamSynchronize(stream));
	rc = 0;
fail:
	if (fd >= 0)
		close(fd);
	cuflag_slot_release(s); /* the consumer's import ends: -EPIPE there */
	shutdown(sock, SHUT_WR);
	{
		char b;
		(void)recv(sock, &b, 1, 0); /* until the consumer closed its side */
	}
	if (tensor)
		cu.cuMemFree(tensor);
	cuflag_disconnect(c);
	return rc;
}

int main(int argc, char **argv)
{
	int gpu_wait = argc > 1 && !strcmp(argv[1], "--gpu-wait");
	int rounds = argc > 1 + gpu_wait ? atoi(argv[1 + gpu_wait]) : 200;
	const char *path = getenv("CUFLAG_SOCKET");
	int sp[2], st, rc;
	pid_t pid;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 4 && !strcmp(argv[1], "--consumer"))
		return consumer(atoi(argv[2]), path, atoi(argv[3]));
	/* Without a GPU, say so before making a second process. */
	if ((rc = gpu_load()))
		return rc;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return fail("producer", "socketpair", errno);
	/* The consumer is another process (CUDA is used after fork only in
	 * the exec'd image: it re-executes this program). */
	pid = fork();
	if (pid < 0)
		return fail("producer", "fork", errno);
	if (pid == 0) {
		char fdarg[16];
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sp[0]);
		snprintf(fdarg, sizeof(fdarg), "%d", sp[1]);
		if (fcntl(sp[1], F_SETFD, 0) < 0)
			_exit(1);
		execl("/proc/self/exe", argv[0], "--consumer", fdarg, gpu_wait ? "1" : "0",
		      (char *)NULL);
		_exit(127);
	}
	close(sp[1]);
	rc = producer(sp[0], path, rounds);
	close(sp[0]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "ipc-tensor: FAIL the consumer did not succeed\n");
		return 1;
	}
	if (!rc)
		printf("ipc-tensor: ok\n");
	return rc;
}
