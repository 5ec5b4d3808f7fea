/* SPDX-License-Identifier: MIT */
/*
 * How the examples connect: as any program should, by saying what went wrong
 * and what to do about it, since the library prints nothing itself.
 */
#ifndef CUFLAG_EXAMPLE_CONNECT_H
#define CUFLAG_EXAMPLE_CONNECT_H

#include "cuflag/cuflag.h"

/* cuflag_connect(path, out); on failure a line on stderr, as prog: the
 * socket tried, strerror() and cuflag_connect_hint(). Return: its result. */
int example_connect(const char *prog, const char *path, cuflag_client **out);

#endif
