/* SPDX-License-Identifier: MIT */
/*
 * The mailbox between the main thread and the scanner, both sides. The main
 * thread never touches scanner state: it submits commands (a list under a
 * mutex, flagged by one atomic the scanner reads once per pass, so that the
 * scanner takes no lock on a pass without commands), and the scanner hands
 * each back once applied (a second list, and an eventfd the main loop
 * polls). Only then does the main thread close what the scanner could still
 * have written or read.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "scanner/private.h"

/* Scanner side ----------------------------------------------------- */

/* What applying c costs a pass, in slot commands: a session's end walks
 * every slot it has pending (scanner/cmds.c del_session). */
static unsigned cmd_weight(const struct scanner_cmd *c)
{
	return c->op == SCAN_DEL_SESSION ? MAILBOX_BATCH : 1;
}

struct scanner_cmd *mailbox_take(struct scanner *sc)
{
	struct scanner_cmd *list, *last;
	unsigned n;

	pthread_mutex_lock(&sc->lock);
	list = last = sc->cmd_head;
	n = last ? cmd_weight(last) : 0;
	/* At most MAILBOX_BATCH's worth a pass: 65 536 slots freed at once
	 * made one pass that every other client's wake waited for. The rest
	 * stay here, in order, cmd_pending still set (the next pass comes at
	 * once, and arms for slots not handed over yet wait for them). */
	while (last && last->next && n + cmd_weight(last->next) <= MAILBOX_BATCH) {
		last = last->next;
		n += cmd_weight(last);
	}
	if (last && last->next) {
		sc->cmd_head = last->next;
		last->next = NULL;
	} else {
		sc->cmd_head = sc->cmd_tail = NULL;
		atomic_store_explicit(&sc->cmd_pending, 0, memory_order_release);
	}
	pthread_mutex_unlock(&sc->lock);
	return list;
}

/* Ring the main loop: commands came back, or a client was found broken. */
void mailbox_tell_main(struct scanner *sc)
{
	uint64_t one = 1;

	/* Control path only; a full counter still leaves the fd readable. */
	if (write(sc->done_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_err("scanner: cannot signal the main loop: %s", strerror(errno));
}

void mailbox_done(struct scanner *sc, struct scanner_cmd *c)
{
	int first;

	c->next = NULL;
	pthread_mutex_lock(&sc->lock);
	first = !sc->done_tail;
	if (sc->done_tail)
		sc->done_tail->next = c;
	else
		sc->done_head = c;
	sc->done_tail = c;
	pthread_mutex_unlock(&sc->lock);
	/* One ring for a list: the main loop drains the eventfd before it
	 * takes the list (scanner_take_done), so a list it has not taken yet
	 * was rung for (16 384 slots retiring at once made as many system
	 * calls in one pass). */
	if (first)
		mailbox_tell_main(sc);
}

/* Main-thread side ------------------------------------------------- */

void mailbox_kick(struct scanner *sc)
{
	uint64_t one = 1;
	if (write(sc->cmd_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_err("cannot wake the scanner: %s", strerror(errno));
}

void scanner_submit(struct scanner *sc, struct scanner_cmd *cmd)
{
	cmd->next = NULL;
	pthread_mutex_lock(&sc->lock);
	if (sc->cmd_tail)
		sc->cmd_tail->next = cmd;
	else
		sc->cmd_head = cmd;
	sc->cmd_tail = cmd;
	atomic_store_explicit(&sc->cmd_pending, 1, memory_order_release);
	pthread_mutex_unlock(&sc->lock);
	/* Same Dekker pairing as a client's arm: wake only a parked scanner. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit((_Atomic uint32_t *)&sc->dpage->scanner_state,
				 memory_order_relaxed) == CUFLAG_SCANNER_PARKED)
		mailbox_kick(sc);
}

int scanner_done_fd(const struct scanner *sc)
{
	return sc->done_efd;
}

struct scanner_cmd *scanner_take_done(struct scanner *sc)
{
	struct scanner_cmd *list;
	uint64_t v;

	if (read(sc->done_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_err("scanner done fd: %s", strerror(errno));
	pthread_mutex_lock(&sc->lock);
	list = sc->done_head;
	sc->done_head = sc->done_tail = NULL;
	pthread_mutex_unlock(&sc->lock);
	return list;
}

/* After the thread is joined: drop every command not handed back. */
void mailbox_free_all(struct scanner *sc)
{
	for (struct scanner_cmd *c = sc->cmd_head, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	for (struct scanner_cmd *c = sc->done_head, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	sc->cmd_head = sc->cmd_tail = sc->done_head = sc->done_tail = NULL;
}
