/* Tree attention over a 16-bit KV cache, plain C: the specification of
 * templates/tree_attention.cu.tmpl (its _part and _merge pair; the split of
 * the context and the merge are the kernel's business, the result is this).
 * Exactly: no splits, weights and the weighted sum in double. The kernel's
 * own numerics (16-bit P, fp32 accumulation, exp2) and their bound are in
 * the template's header and tests/test_kern_tree_attention.c. */
#include <math.h>
#include <string.h>

#include "kernels/half.h"
#include "ref.h"

size_t ref_tree_attention_scratch(int n_ctx, int n_blk, int head_dim)
{
	const size_t nk = (size_t)n_ctx + (size_t)n_blk, hd = (size_t)head_dim;
	return sizeof(double) * hd + sizeof(float) * (2 * nk * hd + nk + hd);
}

int ref_tree_depth(const uint64_t *mask, int mask_words, int T, int n_blk, int t)
{
	if (!mask)
		return n_blk - T + t;
	int n = 0;
	for (int w = 0; w < mask_words; w++)
		n += __builtin_popcountll(mask[(size_t)t * mask_words + w]);
	return n - 1;
}

void ref_tree_attention(float *out, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                        int n_ctx, int T, int n_blk, int n_heads, int n_kv_heads, int head_dim,
                        const uint64_t *mask, int mask_words, int is_f16, void *scratch)
{
	ref_tree_attention_window(out, q, k, v, n_ctx, T, n_blk, n_heads, n_kv_heads, head_dim, mask,
	                          mask_words, is_f16, 0, scratch);
}

void ref_tree_attention_window(float *out, const uint16_t *q, const uint16_t *k,
                               const uint16_t *v, int n_ctx, int T, int n_blk, int n_heads,
                               int n_kv_heads, int head_dim, const uint64_t *mask, int mask_words,
                               int is_f16, int window, void *scratch)
{
	const int ctx = n_ctx, nb = n_blk, H = n_heads, KH = n_kv_heads, hd = head_dim;
	const int G = H / KH, kvd = KH * hd, nk = ctx + nb;
	const float scale = 1.0f / sqrtf((float)hd);
	/* one KV head's keys and values widened once, then every query row of
	 * its GQA group */
	double *acc = scratch;
	float *kf = (float *)(acc + hd), *vf = kf + (size_t)nk * hd;
	float *sc = vf + (size_t)nk * hd, *qf = sc + nk;
	for (int kh = 0; kh < KH; kh++) {
		for (int j = 0; j < nk; j++)
			for (int d = 0; d < hd; d++) {
				kf[(size_t)j * hd + d] = sw_half_to_f32(k[(size_t)j * kvd + (size_t)kh * hd + d], is_f16);
				vf[(size_t)j * hd + d] = sw_half_to_f32(v[(size_t)j * kvd + (size_t)kh * hd + d], is_f16);
			}
		for (int t = 0; t < T; t++)
			for (int h = kh * G; h < (kh + 1) * G; h++) {
				/* context slots below lo are outside a window */
				const int lo = window > 0 ? ctx + ref_tree_depth(mask, mask_words, T, nb, t) -
				                            window + 1 : 0;
				for (int d = 0; d < hd; d++)
					qf[d] = sw_half_to_f32(q[((size_t)t * H + h) * hd + d], is_f16);
				float mx = -INFINITY;
				for (int j = 0; j < nk; j++) {
					int vis = j < ctx && j >= lo;
					if (!vis && j >= ctx) {
						const int bk = j - ctx;
						vis = mask ? (int)(mask[(size_t)t * mask_words + bk / 64] >> (bk % 64) & 1)
						           : bk <= nb - T + t;
					}
					if (!vis) {
						sc[j] = -INFINITY;
						continue;
					}
					const float *kr = kf + (size_t)j * hd;
					float s = 0.0f;
					for (int d = 0; d < hd; d++)
						s += qf[d] * kr[d];
					sc[j] = s * scale;
					mx = sc[j] > mx ? sc[j] : mx;
				}
				double den = 0.0;
				memset(acc, 0, sizeof(*acc) * (size_t)hd);
				for (int j = 0; mx > -INFINITY && j < nk; j++) {
					if (sc[j] == -INFINITY)
						continue;
					const double w = exp((double)sc[j] - mx);
					const float *vr = vf + (size_t)j * hd;
					den += w;
					for (int d = 0; d < hd; d++)
						acc[d] += w * vr[d];
				}
				float *o = out + ((size_t)t * H + h) * hd;
				for (int d = 0; d < hd; d++)
					o[d] = den > 0.0 ? (float)(acc[d] / den) : 0.0f;
			}
	}
}
