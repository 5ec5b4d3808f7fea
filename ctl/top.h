/* SPDX-License-Identifier: MIT */
/*
 * cuflagctl top: a live view of the daemon in the manner of pw-top, one row
 * per client, a header with the daemon's rates; refreshed every second from
 * METRICS, rates from the difference between two frames.
 */
#ifndef CUFLAGCTL_TOP_H
#define CUFLAGCTL_TOP_H

/* Run until q (or, with once, print one frame). 0, or a negative errno when
 * the daemon could not be asked (said on stderr). */
int top_run(const char *socket_path, int once);

#endif
