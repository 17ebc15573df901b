/* The host forward's GEMMs (gemm.h). One sgemm call for every T: on this
 * 2-core machine OpenBLAS's threaded small-M path reads a 576 x 12288 fp32
 * weight at 16 GB/s for T = 1 and ~10 GB/s for T = 5, three times a
 * hand-written single-threaded weight-streaming loop (measured on an idle
 * machine; an earlier measurement under load had said the opposite). The
 * BLAS chooses the summation order, so results equal the specification's
 * loop only within the fp32 dot-product bound. The portable kit links
 * runtime/device/sgemm_portable.c's cblas_sgemm in OpenBLAS's place. */
#include <cblas.h>
#include <string.h>

#include "gemm.h"
#include "kernels/ref/ref.h"

void rt_matmul(float *y, const float *x, const float *w, int T, int n_in, int n_out)
{
	if (T <= 0 || n_out <= 0)
		return;
	if (n_in <= 0) {
		/* An empty sum; some BLAS builds reject k = 0 with lda < 1. */
		memset(y, 0, (size_t)T * n_out * sizeof(*y));
		return;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, n_out, n_in, 1.0f, x, n_in, w, n_in,
	            0.0f, y, n_out);
}

void rt_mlp_swiglu(float *out, const float *x, const float *w_gate, const float *w_up,
                   const float *w_down, int T, int dim, int ffn, float *scratch)
{
	float *g = scratch;                    /* (T, ffn) */
	float *u = scratch + (size_t)T * ffn;  /* (T, ffn) */

	rt_matmul(g, x, w_gate, T, dim, ffn);
	rt_matmul(u, x, w_up, T, dim, ffn);
	ref_swiglu(g, g, u, (size_t)T * ffn);
	rt_matmul(out, g, w_down, T, ffn, dim);
}

void rt_lm_head(float *logits, const float *x, const float *norm_w, const float *lm_head, int T,
                int dim, int vocab, float eps, float *scratch)
{
	ref_rmsnorm(scratch, x, norm_w, T, dim, eps);
	rt_matmul(logits, scratch, lm_head, T, dim, vocab);
}
