/* Residual add + RMSNorm into the next GEMM's 16-bit input, plain C: the
 * specification of templates/rmsnorm_cast.cu.tmpl, the unfused ops it
 * replaces run one after another (ref_rmsnorm_residual, ref_cast, and for a
 * gguf_a8 engine ref_quant_a8 of the fp16 rows), so the fusion changes no
 * number. */
#include "kernels/half.h"
#include "ref.h"

int ref_rmsnorm_cast(uint16_t *y, float *s, const float *x, const float *r, const float *w,
                     void *a8, int T, int dim, float eps, int is_f16, float *tmp)
{
	if (T < 0 || dim < 1 || (a8 && dim % REF_A8_QK))
		return REF_EINVAL;
	for (int t = 0; t < T; t++) {
		const size_t o = (size_t)t * dim;
		ref_rmsnorm_residual(tmp, s + o, x + o, r + o, w, 1, dim, eps);
		ref_cast(y + o, tmp, (size_t)dim, is_f16 ? 1 : 0);
	}
	return a8 ? ref_quant_a8(a8, y, T, dim) : 0;
}
