/* The block drafter's S > 1 step, plain C: the specification of
 * templates/block_unmask.cu.tmpl, the rule of runtime/decode/block_decode.c
 * (bdr_denoise, bdr_propose) on the engine's layout: blk_tok[j] for j =
 * 1..B is block_decode's fixed[j - 1] (the token at draft position j - 1,
 * -1 while masked), probs row j - 1 its distribution from the last pass.
 * Over a mapped draft vocabulary (ref_block_unmask_map) blk_tok holds target
 * ids, as block_decode's blk[] (d2t of its fixed[]), and probs rows draft
 * ids. */
#include "kernels/philox.h"
#include "ref.h"

int ref_block_unmask(int32_t *blk_tok, float *probs, int B, int VD, int pass, int steps, int final,
                     uint64_t seed, uint32_t iter)
{
	return ref_block_unmask_map(blk_tok, probs, NULL, B, VD, pass, steps, final, seed, iter);
}

/* The draft id of target id x through d2t (-1: off the map). */
static int draft_id(const int32_t *d2t, int VD, int32_t x)
{
	if (!d2t)
		return x < VD ? x : -1;
	for (int i = 0; i < VD; i++)
		if (d2t[i] == x)
			return i;
	return -1;
}

int ref_block_unmask_map(int32_t *blk_tok, float *probs, const int32_t *d2t, int B, int VD, int pass,
                         int steps, int final, uint64_t seed, uint32_t iter)
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
			if (*x >= 0) {
				const int xd = draft_id(d2t, VD, *x);
				for (int v = 0; v < VD; v++)
					row[v] = v == xd ? 1.0f : 0.0f;
			}
			const int y = ref_sample_cdf(row, VD,
			                             sw_uniform_double(seed, iter, (uint32_t)b, SW_RNG_DRAFT_SAMPLE));
			*x = y >= 0 && d2t ? d2t[y] : y;
			continue;
		}
		if (*x >= 0)
			continue;
		const uint32_t node = 256u * (uint32_t)(pass + 1) + (uint32_t)b;
		if (sw_uniform_double(seed, iter, node, SW_RNG_DRAFT_SAMPLE) >= p_unmask)
			continue;
		const int y = ref_sample_cdf(row, VD, sw_uniform_double(seed, iter, node + 128, SW_RNG_DRAFT_SAMPLE));
		*x = y >= 0 && d2t ? d2t[y] : y;
	}
	return 0;
}
