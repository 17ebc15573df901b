/* An EAGLE-3 head's layer input, plain C: the specification of
 * templates/eagle3_in.cu.tmpl, the first lines of runtime/model/eagle3.c
 * row_in on the engine's layout (ALGORITHMS.txt 11): for row r,
 *   a = rmsnorm(embed(tok[r])) * input_norm,  f = feat[frow(r)],
 *   b = rmsnorm(f) * hidden_norm,
 *   x2[r] = [a ; b] as 16-bit (the q/k/v GEMMs' input, in-features 2 dim),
 *   res[r] = b with norm_before_residual, else f (fp32, the residual the
 *   attention output is added to).
 * frow(r) = feat_row[r] when feat_row is given (a draft level: node r's
 * parent's output row of the previous level), else r (the committed rows'
 * fused features). The embedding is the engine's 16-bit table; a token
 * outside [0, n_ids) (an absent tree node, -1) embeds as the zero row, so
 * its a is 0 and the row stays finite (embedding16's rule for ids past its
 * table). */
#include <stdbool.h>
#include <string.h>

#include "kernels/half.h"
#include "ref.h"

int ref_eagle3_in(uint16_t *x2, float *res, const uint16_t *embd, const int32_t *tok, const float *feat,
                  const int32_t *feat_row, const float *w_in, const float *w_hid, int rows, int dim,
                  int n_ids, int n_feat, int is_f16, int norm_before_res, float eps, float *tmp)
{
	if (rows < 1 || dim < 1 || n_ids < 1 || n_feat < 1)
		return REF_EINVAL;
	for (int r = 0; r < rows; r++) {
		const int fr = feat_row ? feat_row[r] : r;
		if (fr < 0 || fr >= n_feat)
			return REF_EINVAL;
	}
	for (int r = 0; r < rows; r++) {
		const float *f = feat + (size_t)(feat_row ? feat_row[r] : r) * dim;
		uint16_t *o = x2 + (size_t)r * 2 * dim;
		const bool in = tok[r] >= 0 && tok[r] < n_ids;
		for (int i = 0; i < dim; i++)
			tmp[i] = in ? sw_half_to_f32(embd[(size_t)tok[r] * dim + i], is_f16) : 0.0f;
		ref_rmsnorm(tmp + dim, tmp, w_in, 1, dim, eps);
		for (int i = 0; i < dim; i++)
			o[i] = sw_f32_to_half(tmp[dim + i], is_f16);
		ref_rmsnorm(tmp + dim, f, w_hid, 1, dim, eps);
		for (int i = 0; i < dim; i++)
			o[dim + i] = sw_f32_to_half(tmp[dim + i], is_f16);
		memcpy(res + (size_t)r * dim, norm_before_res ? tmp + dim : f, (size_t)dim * sizeof(float));
	}
	return 0;
}
