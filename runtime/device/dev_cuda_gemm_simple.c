/* dev_cuda_gemm_simple.c: the PTX of the cuda backend's diagnostic GEMM,
 * used instead of cuBLASLt when SW_CUDA_GEMM=simple (correct and slow, one
 * thread per output; kernels/gemm_simple.cuh is its source).
 *
 * Why it exists: compute-sanitizer's racecheck (2025.3.1) stops with
 * "Internal Sanitizer Error: The Sanitizer failed to handle a hardware
 * exception" in the first cuBLASLt 13 GEMM it meets on an H100 (the hardware
 * check, 2026-11-27: every racecheck run, with and without kernel filters,
 * with --racecheck-memcpy-async no, with cuBLASLt's kernels excluded; the
 * same runs under memcheck, synccheck and initcheck are clean). The check's
 * racecheck of the project's own kernels therefore runs with this GEMM in
 * cuBLASLt's place.
 *
 * gemm_simple_ptx.inc is NVRTC's output for that source (compute_80: the CUDA
 * prelude needs sm_80), written by `make gemm-simple-ptx`; test_device checks
 * it is current. Embedded so that the runtime needs no NVRTC. */
#include "dev_cuda_gemm_simple.h"

static const char gemm_simple_ptx[] =
#include "gemm_simple_ptx.inc"
	;

const char *rt_cuda_gemm_simple_ptx(void)
{
	return gemm_simple_ptx;
}
