/* What the Qwen family does to one projection's heads between its GEMM and
 * the KV store / attention (templates/head_prep.cu.tmpl): in place on x
 * (T, n_heads, head_dim), in this order,
 *   bias (Qwen2): x[t, :] += b (n_heads * head_dim), the projection's bias;
 *   norm (Qwen3): each head's row RMS-normalized with weights w (head_dim),
 *                 ref_rmsnorm with eps (transformers' Qwen3RMSNorm on
 *                 q_proj(x).view(..., head_dim));
 *   rope:         ref_rope_neox over the whole head (pairs (x[i], x[i + hd/2]));
 *   scale (Gemma 3's q): x *= scale, query_pre_attn_scalar^-1/2 over the
 *                 attention's own head_dim^-1/2 (runtime/model/gemma.c).
 * Each step is one of the reference ops the host forward (runtime/model/
 * qwen.c) composes the same way, so the engine and the host decoder follow
 * one specification. b / w NULL: the step is skipped; rope 0: no rotation
 * (the v projection); scale 1: no multiply. head_dim must be even when rope
 * is 1. */
#include "ref.h"

void ref_head_prep(float *x, const int32_t *pos, int T, int n_heads, int head_dim, const float *b,
                   const float *w, float eps, int rope, const float *inv_freq, float scale)
{
	const size_t row = (size_t)n_heads * head_dim;
	if (b)
		for (int t = 0; t < T; t++)
			ref_add(x + t * row, x + t * row, b, row);
	if (w)
		ref_rmsnorm(x, x, w, T * n_heads, head_dim, eps);
	if (rope)
		ref_rope_neox(x, pos, T, n_heads, head_dim, head_dim, inv_freq);
	if (scale != 1.0f)
		for (size_t i = 0; i < (size_t)T * row; i++)
			x[i] *= scale;
}
