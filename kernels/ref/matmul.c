/* y = x @ w^T with w stored (n_out, n_in) as in GGUF/PyTorch Linear. One
 * sgemm call; the BLAS chooses the summation order, so results are only
 * equal to a naive loop within the fp32 dot-product error bound. */
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
