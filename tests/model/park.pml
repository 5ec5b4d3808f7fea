/*
 * The scanner's park against clients' arms (docs/design/state-machines.md,
 * "SPINNING and PARKED"): no arm is ever left in a queue while the scanner
 * sleeps.
 *
 * Each client: append an arm (tail++), full fence, read the scanner state,
 * write its own wake eventfd only if it read PARKED. The scanner: drain every
 * queue; with nothing left, publish PARKED, full fence, look at every queue
 * again, and only then block until some wake eventfd is readable; on waking,
 * reset the eventfds it found readable and publish SPINNING. Promela steps are
 * sequentially consistent, which is what the two full fences give the real
 * code for these four words.
 *
 * A monitor fails the run if the scanner can be blocked with no wake eventfd
 * readable, every client finished, and an arm still queued: a lost wake-up.
 * (check-model.sh also checks that the same model without the second look
 * before blocking is caught.)
 */
#define CLIENTS 2
#define ARMS 3

byte tail[CLIENTS];   /* written by client i */
byte head[CLIENTS];   /* written by the scanner */
bit wake[CLIENTS];    /* client i's wake eventfd: readable or not */
bit parked;           /* the daemon page's scanner state */
bit blocked;          /* the scanner sits in epoll_wait */
byte done;            /* clients that finished */

#define PENDING (tail[0] != head[0] || tail[1] != head[1])

proctype client(byte me)
{
	byte i = 0;
	do
	:: i < ARMS ->
		tail[me]++;           /* store tail (release) */
		                      /* full fence */
		if
		:: parked -> wake[me] = 1
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	done++
}

active proctype scanner()
{
end_scan:
	do
	:: PENDING ->
		head[0] = tail[0];
		head[1] = tail[1]
	:: else ->
		parked = 1;           /* publish PARKED */
		                      /* full fence, then look again */
		if
		:: PENDING -> parked = 0
		:: else ->
			blocked = 1;
end_park:		(wake[0] || wake[1]);  /* epoll_wait */
			blocked = 0;
			wake[0] = 0;      /* read() the eventfds that fired */
			wake[1] = 0;
			parked = 0
		fi
	od
}

active proctype monitor()
{
end_watch:
	atomic { done == CLIENTS && blocked && !wake[0] && !wake[1] && PENDING -> assert(false) }
}

init
{
	atomic {
		run client(0);
		run client(1)
	}
}
