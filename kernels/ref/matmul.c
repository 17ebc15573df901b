/* y = x @ w^T with w stored (n_out, n_in) as in GGUF/PyTorch Linear. One
 * sgemm call for every T: on this 2-core machine OpenBLAS's threaded small-M
 * path reads a 576 x 12288 fp32 weight at 16 GB/s for T = 1 and ~10 GB/s for
 * T = 5, three times a hand-written single-threaded weight-streaming loop
 * (measured on an idle machine; an earlier measurement under load had said
 * the opposite). The BLAS chooses the summation order, so results equal a
 * naive loop only within the fp32 dot-product bound. */
#include <cblas.h>
#include <string.h>

#include "ref.h"

void ref_matmul(float *y, const float *x, const float *w, int T, int n_in, int n_out)
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
