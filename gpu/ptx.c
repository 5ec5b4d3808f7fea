/* SPDX-License-Identifier: MIT */
/*
 * The GPU mode's kernels, as PTX written by hand and JIT-compiled by the
 * driver (cuModuleLoadDataEx): no CUDA compiler is needed to build the bench.
 *
 * cuflag_bench_gate(gate, want, timeout_ns): one thread that spins on a
 * host-mapped word until it reaches want (wrap-around compare). The load is
 * ld.volatile, which the PTX memory model treats as a relaxed load at system
 * scope, so each iteration reads host memory again. It gives up after
 * timeout_ns of %globaltimer and then stores want into the next word, so a
 * lost gate can never hang the GPU or the bench.
 *
 * cuflag_bench_noop(): the small kernel of the throughput runs.
 *
 * cuflag_busy(ns): one thread busy for ns of %globaltimer: real work of a
 * known length for the demo and the tests.
 *
 * cuflag_fault(addr): one thread loads from addr; given an address no
 * allocation covers, the context faults (what a buggy kernel does).
 */
#include "cu.h"

const char gpu_ptx[] =
	".version 6.0\n"
	".target sm_50\n"
	".address_size 64\n"
	"\n"
	".visible .entry cuflag_bench_gate(\n"
	"	.param .u64 gate,\n"
	"	.param .u32 want,\n"
	"	.param .u64 timeout_ns\n"
	")\n"
	"{\n"
	"	.reg .pred %p<3>;\n"
	"	.reg .b32 %r<4>;\n"
	"	.reg .b64 %rd<6>;\n"
	"\n"
	"	ld.param.u64 %rd1, [gate];\n"
	"	ld.param.u32 %r1, [want];\n"
	"	ld.param.u64 %rd2, [timeout_ns];\n"
	"	mov.u64 %rd3, %globaltimer;\n"
	"	add.u64 %rd4, %rd3, %rd2;\n"
	"$L_spin:\n"
	"	ld.volatile.u32 %r2, [%rd1];\n"
	"	sub.s32 %r3, %r2, %r1;\n"
	"	setp.ge.s32 %p1, %r3, 0;\n"
	"	@%p1 bra $L_done;\n"
	"	mov.u64 %rd5, %globaltimer;\n"
	"	setp.lt.u64 %p2, %rd5, %rd4;\n"
	"	@%p2 bra $L_spin;\n"
	"	st.volatile.u32 [%rd1+4], %r1;\n"
	"$L_done:\n"
	"	ret;\n"
	"}\n"
	"\n"
	".visible .entry cuflag_bench_noop()\n"
	"{\n"
	"	ret;\n"
	"}\n"
	"\n"
	".visible .entry cuflag_busy(\n"
	"	.param .u64 ns\n"
	")\n"
	"{\n"
	"	.reg .pred %p<2>;\n"
	"	.reg .b64 %rd<5>;\n"
	"\n"
	"	ld.param.u64 %rd1, [ns];\n"
	"	mov.u64 %rd2, %globaltimer;\n"
	"	add.u64 %rd3, %rd2, %rd1;\n"
	"$L_busy:\n"
	"	mov.u64 %rd4, %globaltimer;\n"
	"	setp.lt.u64 %p1, %rd4, %rd3;\n"
	"	@%p1 bra $L_busy;\n"
	"	ret;\n"
	"}\n"
	"\n"
	".visible .entry cuflag_fault(\n"
	"	.param .u64 addr\n"
	")\n"
	"{\n"
	"	.reg .b32 %r<2>;\n"
	"	.reg .b64 %rd<2>;\n"
	"\n"
	"	ld.param.u64 %rd1, [addr];\n"
	"	ld.volatile.global.u32 %r1, [%rd1];\n"
	"	st.volatile.global.u32 [%rd1+4], %r1;\n"
	"	ret;\n"
	"}\n";
