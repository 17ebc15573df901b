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

/* ref_head_prep (kernels/ref/head_prep.c): the specification the engine's
 * head_prep kernels follow, so the host decoder and the generated engines
 * compose the same steps. */
static void qwen_qk(const rt_ctx *c, const rt_layer_weights *L, int lw, const int32_t *pos, int T,
                    float *q, float *k, float *v)
{
	(void)lw;
	const rt_config *cfg = &c->m->cfg;
	const int hd = cfg->head_dim, nh = cfg->n_heads, nkv = cfg->n_kv_heads;
	const float *inv = c->m->inv_freq;
	/* Qwen2: bq/bk/bv (rt_model_from_weights checked: all three or none);
	 * Qwen3: q_norm/k_norm, each head's row of head_dim one norm row */
	ref_head_prep(q, pos, T, nh, hd, L->bq, L->q_norm, cfg->norm_eps, 1, inv, 1.0f);
	ref_head_prep(k, pos, T, nkv, hd, L->bk, L->k_norm, cfg->norm_eps, 1, inv, 1.0f);
	if (L->bv)
		ref_head_prep(v, pos, T, nkv, hd, L->bv, NULL, cfg->norm_eps, 0, inv, 1.0f);
}

static int qwen_eval(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
                     float *logits, float *hidden, sw_err *err)
{
	static const rt_tf_family fam = { qwen_qk, NULL, NULL };
	return rt_tf_eval(c, tok, pos, T, mask, logits, hidden, &fam, err);
}

const struct rt_model_ops rt_qwen_ops = {
	/* .ctx_init  = */ rt_tf_ctx_init,
	/* .ctx_free  = */ rt_tf_ctx_free,
	/* .eval      = */ qwen_eval,
	/* .commit_kv = */ rt_tf_commit_kv,
	/* .free      = */ rt_tf_free,
};
