/* SPDX-License-Identifier: MIT */
/* The pause a spin loop makes each turn: it spares the sibling hyperthread. */
#ifndef CUFLAG_CPU_RELAX_H
#define CUFLAG_CPU_RELAX_H

static inline void cuflag_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#endif
