/* The block drafter's S > 1 step, plain C: the specification of
 * templates/block_unmask.cu.tmpl, the rule of runtime/decode/block_decode.c
 * (bdr_denoise, bdr_propose) on the engine's layout: blk_tok[j] for j =
 * 1..B is block_decode's fixed[j - 1] (the token at draft position j - 1,
 * -1 while masked), probs row j - 1 its distribution from the last pass. */
#include "kernels/philox.h"
#include "ref.h"

int ref_block_unmask(int32_t *blk_tok, float *probs, int B, int VD, int pass, int steps, int final,
                     uint64_t seed, uint32_t iter)
{
	if (B < 1 || B > 128 || VD < 1 || steps < 1 || steps > 16 ||
	    (!final && (pass < 0 || pass > steps - 2)))
		return REF_EINVAL;
	/* log-linear schedule t_i = linspace(1, 1e-5, S+1): mask probability
	 * m(t) = t, so a masked position unmasks with (t_i - t_{i+1}) / t_i */
	const double t = 1.0 - (double)pass * (1.0 - 1e-5) / steps;
	const double tn = 1.0 - (double)(pass + 1) * (1.0 - 1e-5) / steps;
	const double p_unmask = (t - tn) / t;
	for (int b = 0; b < B; b++) {
		int32_t *x = blk_tok + b + 1;
		float *row = probs + (size_t)b * VD;
		if (final) {
			/* SUBS carry-over: Z one-hot at a token fixed earlier; then the
			 * draft token of position b from Z (one-hot: that token) */
			if (*x >= 0)
				for (int v = 0; v < VD; v++)
					row[v] = v == *x ? 1.0f : 0.0f;
			*x = ref_sample_cdf(row, VD,
			                    sw_uniform_double(seed, iter, (uint32_t)b, SW_RNG_DRAFT_SAMPLE));
			continue;
		}
		if (*x >= 0)
			continue;
		const uint32_t node = 256u * (uint32_t)(pass + 1) + (uint32_t)b;
		if (sw_uniform_double(seed, iter, node, SW_RNG_DRAFT_SAMPLE) >= p_unmask)
			continue;
		*x = ref_sample_cdf(row, VD, sw_uniform_double(seed, iter, node + 128, SW_RNG_DRAFT_SAMPLE));
	}
	return 0;
}
