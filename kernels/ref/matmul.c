/* y = x @ w^T with w stored (n_out, n_in) as in GGUF/PyTorch Linear.
 * Large T: one sgemm call. Small T (decode and verification blocks): a
 * weight-streaming loop that reads each weight row once and dots it with all
 * T activation rows while it sits in L1. OpenBLAS packs the whole weight
 * matrix on every sgemm call, which for T <= 8 roughly doubles the memory
 * traffic of an already bandwidth-bound op. Either way the summation order
 * differs from a naive loop, so results agree within the fp32 dot-product
 * bound only. */
#include <cblas.h>
#include <string.h>

#include "ref.h"

#define SMALL_T 8
#define LANES 8 /* partial sums per dot: one vector register, a fixed order */

/* Two weight rows at a time share every activation load; T is a compile-time
 * constant in each instantiation so the 2*T accumulators live in registers. */
static inline __attribute__((always_inline)) void
matmul_small_t(float *restrict y, const float *restrict x, const float *restrict w, const int T,
               int n_in, int n_out)
{
	int k_main = n_in / LANES * LANES;
	int n = 0;
	for (; n + 2 <= n_out; n += 2) {
		const float *restrict w0 = w + (size_t)n * n_in, *restrict w1 = w0 + n_in;
		float a0[SMALL_T][LANES] = { { 0 } }, a1[SMALL_T][LANES] = { { 0 } };
		for (int k = 0; k < k_main; k += LANES)
			for (int t = 0; t < T; t++) {
				const float *restrict xr = x + (size_t)t * n_in + k;
				for (int l = 0; l < LANES; l++) {
					a0[t][l] += w0[k + l] * xr[l];
					a1[t][l] += w1[k + l] * xr[l];
				}
			}
		for (int t = 0; t < T; t++) {
			float s0 = 0.0f, s1 = 0.0f;
			for (int l = 0; l < LANES; l++) {
				s0 += a0[t][l];
				s1 += a1[t][l];
			}
			for (int k = k_main; k < n_in; k++) {
				s0 += w0[k] * x[(size_t)t * n_in + k];
				s1 += w1[k] * x[(size_t)t * n_in + k];
			}
			y[(size_t)t * n_out + n] = s0;
			y[(size_t)t * n_out + n + 1] = s1;
		}
	}
	for (; n < n_out; n++) {
		const float *restrict wr = w + (size_t)n * n_in;
		for (int t = 0; t < T; t++) {
			float s = 0.0f;
			for (int k = 0; k < n_in; k++)
				s += wr[k] * x[(size_t)t * n_in + k];
			y[(size_t)t * n_out + n] = s;
		}
	}
}

static void matmul_small(float *y, const float *x, const float *w, int T, int n_in, int n_out)
{
	switch (T) {
#define CASE(t) case t: matmul_small_t(y, x, w, t, n_in, n_out); break;
	CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8)
#undef CASE
	}
}

void ref_matmul(float *y, const float *x, const float *w, int T, int n_in, int n_out)
{
	if (T <= 0 || n_out <= 0)
		return;
	if (n_in <= 0) {
		/* An empty sum; some BLAS builds reject k = 0 with lda < 1. */
		memset(y, 0, (size_t)T * n_out * sizeof(*y));
		return;
	}
	if (T <= SMALL_T) {
		matmul_small(y, x, w, T, n_in, n_out);
		return;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, n_out, n_in, 1.0f, x, n_in, w, n_in,
	            0.0f, y, n_out);
}
