/* SPDX-License-Identifier: MIT */
/*
 * Wait for GPU completions in a libuv loop.
 *
 * Each slot's eventfd is watched by a uv_poll_t. When it is readable, the
 * counter says how many of that slot's armed values have landed since it
 * was last read. Here a thread plays the GPU and completes ROUNDS values on
 * each of NSLOTS slots in random order; the loop must count each slot's
 * completions exactly. The client's own work (the daemon's hang-up, resuming
 * with the next one, looking at the flags while none runs) is the library's:
 * the loop watches its dispatch fd and calls cuflag_client_dispatch() when
 * that is readable and when the library's timeout runs out.
 *
 * Usage: uv-wait [SOCKET]   (default: $CUFLAG_SOCKET, else cuflagd's own)
 * Exit status: 0 when every completion was counted exactly once.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "connect.h"
#include "cuflag/cuflag.h"
#include "sim-device.h"

#define NSLOTS 16
#define ROUNDS 200
/* A completion that has not arrived by then never will. */
#define TIMEOUT_MS 10000
/* How long the loop listens for completions nobody armed. */
#define QUIET_MS 50

struct watch {
	uv_poll_t poll;
	cuflag_slot *slot;
	uint64_t counted;
};

struct app {
	struct watch w[NSLOTS];
	cuflag_client *c;
	uv_poll_t dispatch_fd;
	uv_timer_t dispatch_timer;
	uv_timer_t timer; /* the deadline, then the quiet period */
	uint64_t remaining;
	int failed;
};

static void stop_all(struct app *a)
{
	for (unsigned i = 0; i < NSLOTS; i++)
		uv_close((uv_handle_t *)&a->w[i].poll, NULL);
	uv_close((uv_handle_t *)&a->dispatch_fd, NULL);
	uv_close((uv_handle_t *)&a->dispatch_timer, NULL);
	uv_close((uv_handle_t *)&a->timer, NULL);
}

static void on_dispatch_timer(uv_timer_t *t);

/* Let the library do what the connection needs, then wait as it says. */
static void dispatch(struct app *a)
{
	int ms, rc = cuflag_client_dispatch(a->c);

	/* While no daemon serves, the library keeps trying; the slots'
	 * eventfds ring for flags that land meanwhile. */
	if (rc && rc != -EAGAIN && rc != -ENOTCONN)
		fprintf(stderr, "uv-wait: dispatch: %s\n", strerror(-rc));
	if (cuflag_client_dispatch_timeout(a->c, &ms) == 0 && ms >= 0)
		uv_timer_start(&a->dispatch_timer, on_dispatch_timer, (uint64_t)ms, 0);
	else
		uv_timer_stop(&a->dispatch_timer);
}

static void on_dispatch_timer(uv_timer_t *t)
{
	dispatch(t->data);
}

static void on_dispatch_fd(uv_poll_t *p, int status, int events)
{
	(void)status;
	(void)events;
	dispatch(p->data);
}

static void on_quiet_over(uv_timer_t *t)
{
	stop_all(t->data);
}

static void on_deadline(uv_timer_t *t)
{
	struct app *a = t->data;

	fprintf(stderr, "uv-wait: %llu completions never arrived\n",
		(unsigned long long)a->remaining);
	a->failed = 1;
	stop_all(a);
}

static void on_readable(uv_poll_t *p, int status, int events)
{
	struct watch *w = p->data;
	struct app *a = p->loop->data;
	uint64_t done;
	int rc;

	if (status < 0) {
		fprintf(stderr, "uv-wait: poll: %s\n", uv_strerror(status));
		a->failed = 1;
		stop_all(a);
		return;
	}
	rc = cuflag_slot_consume(w->slot, &done);
	if (rc == -EAGAIN)
		return; /* someone else read it first: nothing lost */
	if (rc) {
		fprintf(stderr, "uv-wait: consume: %s\n", strerror(-rc));
		a->failed = 1;
		stop_all(a);
		return;
	}
	w->counted += done;
	/* More than was armed is reported at the end. */
	a->remaining = done > a->remaining ? 0 : a->remaining - done;
	if (a->remaining == 0 && uv_timer_get_due_in(&a->timer) > QUIET_MS) {
		/* Everything armed has landed: nothing more may be signalled. */
		uv_timer_start(&a->timer, on_quiet_over, QUIET_MS, 0);
	}
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "uv-wait: %s: %s\n", what, strerror(err));
	return 1;
}

int main(int argc, char **argv)
{
	static struct app a;
	cuflag_client *c;
	cuflag_slot *slots[NSLOTS];
	struct sim_device dev;
	uv_loop_t *loop = uv_default_loop();
	int rc;

	rc = example_connect("uv-wait", argc > 1 ? argv[1] : NULL, &c);
	if (rc)
		return 1;
	rc = cuflag_slots_acquire(c, NSLOTS, slots);
	if (rc)
		return fail("acquire", -rc);
	loop->data = &a;
	a.c = c;
	a.remaining = (uint64_t)NSLOTS * ROUNDS;
	rc = cuflag_client_dispatch_fd(c);
	if (rc < 0 || (rc = uv_poll_init(loop, &a.dispatch_fd, rc)))
		return fail("dispatch fd", -rc);
	a.dispatch_fd.data = &a;
	uv_poll_start(&a.dispatch_fd, UV_READABLE, on_dispatch_fd);
	uv_timer_init(loop, &a.dispatch_timer);
	a.dispatch_timer.data = &a;
	dispatch(&a);
	for (unsigned i = 0; i < NSLOTS; i++) {
		a.w[i].slot = slots[i];
		rc = uv_poll_init(loop, &a.w[i].poll, cuflag_slot_fd(slots[i]));
		if (rc)
			return fail("uv_poll_init", -rc);
		a.w[i].poll.data = &a.w[i];
		uv_poll_start(&a.w[i].poll, UV_READABLE, on_readable);
	}
	uv_timer_init(loop, &a.timer);
	a.timer.data = &a;
	uv_timer_start(&a.timer, on_deadline, TIMEOUT_MS, 0);

	/* Queue the work and let the device run it. */
	rc = sim_device_start(&dev, slots, NSLOTS, ROUNDS, 2);
	if (rc)
		return fail("device", -rc);
	uv_run(loop, UV_RUN_DEFAULT);
	rc = sim_device_join(&dev);
	if (rc)
		return fail("device thread", -rc);

	for (unsigned i = 0; i < NSLOTS; i++) {
		if (a.w[i].counted != ROUNDS) {
			fprintf(stderr, "uv-wait: slot %d counted %llu, expected %d\n",
				cuflag_slot_id(slots[i]), (unsigned long long)a.w[i].counted,
				ROUNDS);
			a.failed = 1;
		}
		cuflag_slot_release(slots[i]);
	}
	sim_device_free(&dev);
	cuflag_disconnect(c);
	rc = uv_loop_close(loop);
	if (rc)
		return fail("uv_loop_close", -rc);
	if (!a.failed)
		printf("uv-wait: %d slots x %d completions, each counted once\n", NSLOTS, ROUNDS);
	return a.failed;
}
