/* dev_cuda_gemm_simple.h: the PTX of the diagnostic GEMM (SW_CUDA_GEMM=simple;
 * dev_cuda_gemm_simple.c says why it exists). */
#ifndef SW_DEV_CUDA_GEMM_SIMPLE_H
#define SW_DEV_CUDA_GEMM_SIMPLE_H

#define RT_CUDA_GEMM_SIMPLE_F16 "sw_gemm_simple_f16"
#define RT_CUDA_GEMM_SIMPLE_BF16 "sw_gemm_simple_bf16"
#define RT_CUDA_GEMM_SIMPLE_BLOCK 128 /* threads per block: n / 128 blocks by m */

/* entries sw_gemm_simple_f16 and sw_gemm_simple_bf16 (float *C, const
 * uint16_t *A, const uint16_t *W, int64_t m, int64_t n, int64_t k):
 * kernels/gemm_simple.cuh */
const char *rt_cuda_gemm_simple_ptx(void);

#endif
