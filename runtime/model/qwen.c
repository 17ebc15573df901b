/* The Qwen2/Qwen2.5 and Qwen3 forward pass on the host, from the kernels/ref
 * ops: Llama's block (transformer.h) with the attention of the Qwen family,
 * as transformers' modeling_qwen2.py / modeling_qwen3.py and llama.cpp's
 * qwen2/qwen3 graphs compute it:
 *   Qwen2: q, k, v = x W^T + b (biases on the three input projections only);
 *   Qwen3: no biases; q and k RMS-normalized per head (weights of head_dim,
 *          the model's rms_norm_eps) before RoPE; head_dim may differ from
 *          dim / n_heads.
 * RoPE in NeoX pairing (ref_rope_neox) on rows in HF order, which is also
 * llama.cpp's GGUF order for these architectures. */
#include <stdlib.h>

#include "ctx.h"
#include "kernels/ref/ref.h"
#include "transformer.h"

/* y (T, n) += b (n) on every row */
static void add_bias(float *y, const float *b, int T, int n)
{
	for (int t = 0; t < T; t++)
		ref_add(y + (size_t)t * n, y + (size_t)t * n, b, (size_t)n);
}

static int qwen_eval(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
                     float *logits, float *hidden, sw_err *err)
{
	const rt_model *m = c->m;
	const rt_config *cfg = &m->cfg;
	const rt_weights *w = &m->w;
	const int dim = cfg->dim, hd = cfg->head_dim, nh = cfg->n_heads, nkv = cfg->n_kv_heads;
	const int qd = nh * hd, kvd = nkv * hd;
	rt_tf_scratch s;
	rt_tf_scratch_at(c, T, &s);

	if (rt_tf_embed(c, tok, T, s.x, err))
		return err->code;
	for (int l = 0; l < m->n_layers_run; l++) {
		const rt_layer_weights *L = &w->layers[m->layer_map[l]];
		float *kc = c->k_cache + (size_t)l * c->max_ctx * kvd;
		float *vc = c->v_cache + (size_t)l * c->max_ctx * kvd;
		size_t first = (size_t)c->len + c->blk_off; /* slot of the first new entry */
		float *kb = kc + first * kvd, *vb = vc + first * kvd;

		ref_rmsnorm(s.h, s.x, L->attn_norm, T, dim, cfg->norm_eps);
		ref_matmul(s.q, s.h, L->wq, T, dim, qd);
		ref_matmul(kb, s.h, L->wk, T, dim, kvd);
		ref_matmul(vb, s.h, L->wv, T, dim, kvd);
		if (L->bq) { /* Qwen2 (rt_model_from_weights checked: all three or none) */
			add_bias(s.q, L->bq, T, qd);
			add_bias(kb, L->bk, T, kvd);
			add_bias(vb, L->bv, T, kvd);
		}
		if (L->q_norm) { /* Qwen3: each head's row of head_dim is one norm row */
			ref_rmsnorm(s.q, s.q, L->q_norm, T * nh, hd, cfg->norm_eps);
			ref_rmsnorm(kb, kb, L->k_norm, T * nkv, hd, cfg->norm_eps);
		}
		ref_rope_neox(s.q, pos, T, nh, hd, hd, m->inv_freq);
		ref_rope_neox(kb, pos, T, nkv, hd, hd, m->inv_freq);
		ref_attention_append(s.att, s.q, kc, vc, T, c->len, c->blk_off + T, nh, nkv, hd, mask,
		                     s.att_scratch);
		ref_matmul(s.o, s.att, L->wo, T, qd, dim);
		ref_add(s.x, s.x, s.o, (size_t)T * dim);
		rt_tf_mlp(c, L, l, T, &s);
	}
	rt_tf_head(c, T, s.x, s.h, logits, hidden);
	return 0;
}

const struct rt_model_ops rt_qwen_ops = {
	/* .ctx_init  = */ rt_tf_ctx_init,
	/* .ctx_free  = */ rt_tf_ctx_free,
	/* .eval      = */ qwen_eval,
	/* .commit_kv = */ rt_tf_commit_kv,
	/* .free      = */ rt_tf_free,
};
