/* Attention of T new queries over n_ctx cached keys plus the block's own keys
 * (causal or a tree ancestor mask). One query row at a time: scores into
 * scratch, a max-subtracted softmax, then out = sum p_j v_j as axpys into the
 * output row. fp32 throughout; no allocation. On the CPU hot path, so the
 * inner loops are written to vectorise without -ffast-math. */
#include <math.h>
#include <string.h>

#include "ref.h"

/* fp32 dot product with 8 independent partial sums: a fixed, reproducible
 * summation order that the compiler can still map onto SIMD lanes (a plain
 * serial reduction would not vectorise without reassociation). */
static inline float dot_f32(const float *a, const float *b, int n)
{
	float acc[8] = {0};
	int d = 0;

	for (; d + 8 <= n; d += 8)
		for (int l = 0; l < 8; l++)
			acc[l] += a[d + l] * b[d + l];
	float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
	for (; d < n; d++)
		s += a[d] * b[d];
	return s;
}

/* o += p * v over one head row. Blocked by 8 with restrict so that GCC's
 * -O2 (very cheap cost model: no loop versioning for aliasing) still turns
 * each block into one vector multiply-add; a plain loop stayed scalar. */
static inline void axpy_f32(float *restrict o, float p, const float *restrict v, int n)
{
	int d = 0;

	for (; d + 8 <= n; d += 8)
		for (int l = 0; l < 8; l++)
			o[d + l] += p * v[d + l];
	for (; d < n; d++)
		o[d] += p * v[d];
}

void ref_attention(float *out, const float *q, const float *k, const float *v, int T, int n_ctx,
                   int n_heads, int n_kv_heads, int head_dim, const uint64_t *mask, float *scratch)
{
	ref_attention_append(out, q, k, v, T, n_ctx, T, n_heads, n_kv_heads, head_dim, mask, scratch);
}

void ref_attention_append(float *out, const float *q, const float *k, const float *v, int T, int n_ctx,
                          int n_blk, int n_heads, int n_kv_heads, int head_dim, const uint64_t *mask,
                          float *scratch)
{
	const int group = n_heads / n_kv_heads;
	const int words = (n_blk + 63) / 64;
	const int first = n_blk - T; /* block index of query 0 */
	const size_t kv_row = (size_t)n_kv_heads * head_dim; /* stride between key slots */
	const float scale = 1.0f / sqrtf((float)head_dim);

	for (int h = 0; h < n_heads; h++) {
		const float *kh = k + (size_t)(h / group) * head_dim;
		const float *vh = v + (size_t)(h / group) * head_dim;

		for (int t = 0; t < T; t++) {
			const float *qr = q + ((size_t)t * n_heads + h) * head_dim;
			float *o = out + ((size_t)t * n_heads + h) * head_dim;
			const uint64_t *mrow = mask ? mask + (size_t)t * words : NULL;
			/* Causal: block keys after the query are never visible. */
			const int n_keys = n_ctx + (mask ? n_blk : first + t + 1);
			float m = -INFINITY;

			for (int j = 0; j < n_keys; j++) {
				int b = j - n_ctx;
				if (mrow && b >= 0 && !((mrow[b >> 6] >> (b & 63)) & 1u)) {
					scratch[j] = -INFINITY;
					continue;
				}
				float s = dot_f32(qr, kh + (size_t)j * kv_row, head_dim) * scale;
				scratch[j] = s;
				m = fmaxf(m, s);
			}
			memset(o, 0, (size_t)head_dim * sizeof(*o));
			/* A query that sees nothing (empty mask row, no context) gets zeros
			 * rather than 0/0; no valid tree produces one. */
			if (m == -INFINITY)
				continue;

			float sum = 0.0f;
			for (int j = 0; j < n_keys; j++) {
				float p = expf(scratch[j] - m); /* masked: expf(-inf) = 0 */
				sum += p;
				/* Skipping p == 0 keeps masked slots out entirely, even if
				 * their V holds inf or NaN. */
				if (p != 0.0f)
					axpy_f32(o, p, vh + (size_t)j * kv_row, head_dim);
			}
			for (int d = 0; d < head_dim; d++)
				o[d] /= sum;
		}
	}
}
