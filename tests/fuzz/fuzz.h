/* SPDX-License-Identifier: MIT */
/*
 * What the fuzz harnesses share: the libFuzzer entry point each one defines
 * and the tests' CHECK, alive in every build. A protocol error is a pass;
 * a crash or a broken invariant aborts.
 */
#ifndef CUFLAG_FUZZ_H
#define CUFLAG_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "../test-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
