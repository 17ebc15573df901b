/* The cuda backend's diagnostic GEMM (SW_CUDA_GEMM=simple,
 * runtime/device/dev_cuda_gemm_simple.c): cuBLASLt's problem without
 * cuBLASLt, for compute-sanitizer's racecheck, which stops in cuBLASLt 13's
 * sm_90 kernels. C (fp32, m x n, row major) = A (m x k) times W (n x k)
 * transposed; A and W fp16 or bf16 (raw uint16 bits), fp32 accumulation in k
 * order. One thread per output: grid (ceil(n / 128), m), block 128. Slow by
 * design; correct is all it needs to be. NVRTC compiles it to the PTX that
 * dev_cuda_gemm_simple.c embeds (`make gemm-simple-ptx`); the SIMT emulator
 * runs the same source for the fake driver. */
DEV float sw_gemm_simple_ld(const uint16_t *p, int is_bf16)
{
	return is_bf16 ? BF16_TO_F32(*p) : F16_TO_F32(*p);
}

DEV void sw_gemm_simple_body(float *C, const uint16_t *A, const uint16_t *W, int64_t m, int64_t n,
                             int64_t k, int is_bf16)
{
	const int64_t j = (int64_t)BID_X * BDIM_X + TID_X, i = BID_Y;
	if (j >= n || i >= m)
		return;
	const uint16_t *a = A + i * k, *w = W + j * k;
	float acc = 0.0f;
	for (int64_t t = 0; t < k; t++)
		acc += sw_gemm_simple_ld(a + t, is_bf16) * sw_gemm_simple_ld(w + t, is_bf16);
	C[i * n + j] = acc;
}

KERNEL(sw_gemm_simple_f16, (float *, C), (const uint16_t *, A), (const uint16_t *, W),
       (int64_t, m), (int64_t, n), (int64_t, k))
{
	sw_gemm_simple_body(C, A, W, m, n, k, 0);
}

KERNEL(sw_gemm_simple_bf16, (float *, C), (const uint16_t *, A), (const uint16_t *, W),
       (int64_t, m), (int64_t, n), (int64_t, k))
{
	sw_gemm_simple_body(C, A, W, m, n, k, 1);
}
