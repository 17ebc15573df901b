/* The 16-bit GEMV / small-M GEMM of the GPU, plain C: the specification of
 * templates/gemv16.cu.tmpl, C (M, N) fp32 = A (M, K) W (N, K)^T with A and
 * W fp16 or bf16 (the "gemm" op's contract), in the kernel's own
 * summation order so that the kernel equals it bit for bit. Not the host
 * forward's GEMM (matmul.c, CBLAS), whose order is the library's. */
#include <math.h>

#include "kernels/half.h"
#include "ref.h"

/* The order (ref.h): chunk c holds elements 8c .. 8c+7 of a row; slot s
 * (0 <= s < 32 KS, lane s % 32 of warp s / 32 of a row group) takes chunks
 * s, s + 32 KS, s + 64 KS, ... in that order, each element by one fmaf
 * into its fp32 accumulator (from +0); C is then +0 plus the slots in
 * order, one fp32 addition each. */
static float dot(const uint16_t *a, const uint16_t *w, int K, int is_f16, int ks, double *mag)
{
	const int S = 32 * ks, NC = K / 8;
	float sum = 0.0f;
	double m = 0;
	for (int s = 0; s < S; s++) {
		float acc = 0.0f;
		for (int c = s; c < NC; c += S)
			for (int e = 0; e < 8; e++) {
				const float x = sw_half_to_f32(a[8 * c + e], is_f16);
				const float y = sw_half_to_f32(w[8 * c + e], is_f16);
				acc = fmaf(x, y, acc);
				m += fabs((double)x * (double)y);
			}
		sum += acc;
	}
	if (mag)
		*mag = m;
	return sum;
}

int ref_gemv16_mag(float *C, double *mag, const uint16_t *A, const uint16_t *W, int M, int N, int K,
                   int is_f16, int ks)
{
	if (M < 1 || N < 1 || K < 8 || K % 8 || ks < 1 || ks > 32 || (is_f16 != 0 && is_f16 != 1))
		return REF_EINVAL;
	for (int m = 0; m < M; m++)
		for (int n = 0; n < N; n++)
			C[(int64_t)m * N + n] = dot(A + (int64_t)m * K, W + (int64_t)n * K, K, is_f16, ks,
			                            mag ? &mag[(int64_t)m * N + n] : NULL);
	return 0;
}

int ref_gemv16(float *C, const uint16_t *A, const uint16_t *W, int M, int N, int K, int is_f16,
               int ks)
{
	return ref_gemv16_mag(C, NULL, A, W, M, N, K, is_f16, ks);
}
