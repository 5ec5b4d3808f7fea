/* SPDX-License-Identifier: MIT */
/* An idle fleet (idle-fleet.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cuflag/cuflag.h"
#include "idle-fleet.h"
#include "perf.h"

#define READY_S 120 /* the fleet connects and acquires within this */

static __attribute__((noreturn)) void fleet_child(const char *sock, unsigned S, int ctl,
						  int ready)
{
	cuflag_slot **s = calloc(S, sizeof(*s));
	char b;

	/* 'c': connect and acquire; 'd': disconnect; EOF: exit. */
	for (;;) {
		unsigned char msg[2] = { 'r', 0 };
		cuflag_client *c = NULL;
		ssize_t k = read(ctl, &b, 1);
		int rc;
		if (k < 0 && errno == EINTR)
			continue;
		if (k != 1 || b != 'c')
			_exit(0);
		rc = s ? cuflag_connect(sock, &c) : -ENOMEM;
		if (!rc)
			rc = cuflag_slots_acquire(c, S, s);
		if (rc) {
			msg[0] = 'e';
			msg[1] = (unsigned char)(-rc < 255 ? -rc : 255);
		}
		if (write(ready, msg, 2) != 2)
			_exit(1);
		/* Idle, holding everything, until told otherwise. */
		do
			k = read(ctl, &b, 1);
		while (k < 0 && errno == EINTR);
		cuflag_disconnect(c);
		msg[0] = 'd';
		msg[1] = 0;
		if (k != 1 || write(ready, msg, 2) != 2)
			_exit(0);
	}
}

/* Fork the fleet while this process has no other thread; 0 or -errno. */
int fleet_spawn(struct fleet *f, unsigned n, unsigned S, const char *sock)
{
	int ready[2], err = 0;

	f->pid = calloc(n, sizeof(*f->pid));
	f->ctl = calloc(n, sizeof(*f->ctl));
	if (!f->pid || !f->ctl)
		return -ENOMEM;
	if (pipe2(ready, O_CLOEXEC) < 0)
		return -errno;
	f->ready = ready[0];
	fflush(NULL);
	for (unsigned i = 0; i < n; i++) {
		int ctl[2];
		pid_t pid;
		if (pipe2(ctl, O_CLOEXEC) < 0) {
			err = -errno;
			break;
		}
		pid = fork();
		if (pid < 0) {
			err = -errno;
			close(ctl[0]);
			close(ctl[1]);
			break;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			/* Only the parent may hold a sibling's control end, or EOF never comes. */
			for (unsigned j = 0; j < i; j++)
				close(f->ctl[j]);
			close(ctl[1]);
			close(ready[0]);
			fleet_child(sock, S, ctl[0], ready[1]);
		}
		close(ctl[0]);
		f->ctl[i] = ctl[1];
		f->pid[i] = pid;
		f->n++;
	}
	close(ready[1]);
	return err;
}

/* Read one 2-byte message from every child; 0, or the first error a child
 * reported (-errno), or -ETIMEDOUT. */
static int fleet_collect(struct fleet *f, unsigned char want)
{
	uint64_t deadline = cuflag_now_ns() + (uint64_t)READY_S * 1000000000u;
	int err = 0;

	for (unsigned i = 0; i < f->n; i++) {
		unsigned char msg[2];
		if (bench_read_full(f->ready, msg, 2, deadline))
			return -ETIMEDOUT;
		if (msg[0] != want && !err)
			err = msg[0] == 'e' && msg[1] ? -(int)msg[1] : -EPROTO;
	}
	return err;
}

/* Tell every child c (connect and acquire) or d (disconnect) and wait for all. */
int fleet_tell(struct fleet *f, char what)
{
	for (unsigned i = 0; i < f->n; i++)
		if (write(f->ctl[i], &what, 1) != 1)
			return -errno;
	return fleet_collect(f, what == 'c' ? 'r' : 'd');
}

/* Hang up every child and reap it. */
void fleet_stop(struct fleet *f)
{
	for (unsigned i = 0; i < f->n; i++)
		close(f->ctl[i]);
	for (unsigned i = 0; i < f->n; i++)
		bench_reap(f->pid[i], 0);
	safe_close(f->ready);
	free(f->pid);
	free(f->ctl);
	memset(f, 0, sizeof(*f));
	f->ready = -1;
}
