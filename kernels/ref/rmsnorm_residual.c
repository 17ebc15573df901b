/* Residual add + RMSNorm, plain C: the specification of
 * templates/rmsnorm_residual.cu.tmpl, the two fp32 reference ops row by row
 * (ref_add, then ref_rmsnorm on the sum). */
#include "ref.h"

void ref_rmsnorm_residual(float *y, float *s, const float *x, const float *r, const float *w, int T,
                          int dim, float eps)
{
	for (int t = 0; t < T; t++) {
		const size_t o = (size_t)t * dim;
		ref_add(s + o, x + o, r + o, (size_t)dim);
		ref_rmsnorm(y + o, s + o, w, 1, dim, eps);
	}
}
