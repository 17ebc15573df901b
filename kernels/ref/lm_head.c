/* Final RMSNorm followed by the vocabulary projection. x is left untouched
 * (the caller may still need the residual stream); the normalised rows go
 * to scratch (T*dim floats). */
#include "ref.h"

void ref_lm_head(float *logits, const float *x, const float *norm_w, const float *lm_head, int T,
                 int dim, int vocab, float eps, float *scratch)
{
	ref_rmsnorm(scratch, x, norm_w, T, dim, eps);
	ref_matmul(logits, scratch, lm_head, T, dim, vocab);
}
