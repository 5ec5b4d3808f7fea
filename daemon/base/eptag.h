/* SPDX-License-Identifier: MIT */
/* What the main loop's epoll hands back: everything registered with it starts
 * with this tag, so an event names its kind before anything else is read. */
#ifndef CUFLAGD_EPTAG_H
#define CUFLAGD_EPTAG_H

enum ep_kind { EP_LISTEN = 1, EP_SIGNAL, EP_TIMER, EP_SCANNER, EP_CLIENT, EP_GUARD };

struct ep_tag {
	enum ep_kind kind;
};

#endif
