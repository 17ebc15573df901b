/* kernels/gemm_simple.cuh built for the SIMT emulator: the cuda backend's
 * diagnostic GEMM (SW_CUDA_GEMM=simple) as the fake driver runs it
 * (test_device; the fake libcuda.so.1 of the GPU check's dry run). */
#include "gemm_simple_emu.h"

#include "kernels/prelude_emu.h"

#include "kernels/gemm_simple.cuh"

void gemm_simple_emu_register(void (*reg)(const char *name, const emu_kernel *k))
{
	reg("sw_gemm_simple_f16", &sw_gemm_simple_f16_emu);
	reg("sw_gemm_simple_bf16", &sw_gemm_simple_bf16_emu);
}
