/* A forward's q/k/v rows into attention's inputs, plain C: the
 * specification of templates/qkv_rope.cu.tmpl, the unfused ops it replaces
 * run one after another on a copy of each row: the family's steps on q and
 * k (ref_head_prep: bias, per-head norm, NeoX RoPE, the query scale; or
 * Llama's ref_rope on adjacent pairs), v's bias, then ref_cast of q into
 * q16 and ref_kv_store of k and v, so the fusion changes no number. */
#include <string.h>

#include "ref.h"

int ref_qkv_rope(const ref_qkv_shape *sh, uint16_t *q16, uint16_t *kc, uint16_t *vc, const float *q,
                 const float *k, const float *v, const int32_t *pos, const float *inv_freq, int len,
                 const float *bq, const float *bk, const float *bv, const float *qn,
                 const float *kn, float *tmp)
{
	const int H = sh->n_heads, KH = sh->n_kv_heads, hd = sh->head_dim;
	const int64_t qd = (int64_t)H * hd, kvd = (int64_t)KH * hd;
	if (sh->T < 0 || H < 1 || KH < 1 || hd < 1 || sh->ldq < qd || sh->ldkv < kvd ||
	    sh->rope < REF_ROPE_NONE || sh->rope > REF_ROPE_NEOX || (sh->rope && hd % 2) ||
	    (sh->rope == REF_ROPE_ADJACENT && (sh->bias || sh->norm || sh->scale != 1.0f)) ||
	    (sh->bias && sh->norm))
		return REF_EINVAL;
	float *tq = tmp, *tk = tmp + qd;
	for (int t = 0; t < sh->T; t++) {
		memcpy(tq, q + t * sh->ldq, sizeof(*tq) * (size_t)qd);
		memcpy(tk, k + t * sh->ldkv, sizeof(*tk) * (size_t)kvd);
		if (sh->rope == REF_ROPE_ADJACENT) {
			ref_rope(tq, pos + t, 1, H, hd, hd, inv_freq);
			ref_rope(tk, pos + t, 1, KH, hd, hd, inv_freq);
		} else {
			ref_head_prep(tq, pos + t, 1, H, hd, sh->bias ? bq : NULL, sh->norm ? qn : NULL,
			              sh->eps, sh->rope == REF_ROPE_NEOX, inv_freq, sh->scale);
			ref_head_prep(tk, pos + t, 1, KH, hd, sh->bias ? bk : NULL, sh->norm ? kn : NULL,
			              sh->eps, sh->rope == REF_ROPE_NEOX, inv_freq, 1.0f);
		}
		ref_cast(q16 + t * qd, tq, (size_t)qd, sh->is_f16 ? 1 : 0);
		/* v: its bias (Qwen2), in tq's room (q is already out) */
		memcpy(tq, v + t * sh->ldkv, sizeof(*tq) * (size_t)kvd);
		if (sh->bias)
			ref_add(tq, tq, bv, (size_t)kvd);
		ref_kv_store(kc + (int64_t)t * kvd, vc + (int64_t)t * kvd, tk, tq, len, 1, (int)kvd,
		             sh->row0 + t, sh->max_ctx, sh->is_f16);
	}
	return 0;
}
