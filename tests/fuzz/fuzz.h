/* SPDX-License-Identifier: MIT */
/*
 * What the fuzz harnesses share: the libFuzzer entry point each one defines
 * and a check that stays alive in every build. A protocol error is a pass;
 * a crash or a broken invariant aborts.
 */
#ifndef CUFLAG_FUZZ_H
#define CUFLAG_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__,         \
				__LINE__, #cond);                                          \
			abort();                                                           \
		}                                                                          \
	} while (0)

#endif
