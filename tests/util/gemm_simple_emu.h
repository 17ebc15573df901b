/* The diagnostic GEMM's kernels (kernels/gemm_simple.cuh) for the emulator. */
#ifndef SW_TEST_GEMM_SIMPLE_EMU_H
#define SW_TEST_GEMM_SIMPLE_EMU_H

#include "kernels/emu.h"

/* reg(entry, kernel) for sw_gemm_simple_f16 and sw_gemm_simple_bf16
 * (fake_cuda_register) */
void gemm_simple_emu_register(void (*reg)(const char *name, const emu_kernel *k));

#endif
