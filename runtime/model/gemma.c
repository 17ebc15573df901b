/* The Gemma 3 text forward pass on the host, from the kernels/ref ops: the
 * shared layer loop (transformer.h) with Gemma's hooks, as transformers'
 * modeling_gemma3.py (Gemma3ForCausalLM) and llama.cpp's gemma3 graph
 * compute it:
 *   - q and k RMS-normalized per head (weights of head_dim) before RoPE;
 *     the query scaled by query_pre_attn_scalar^-1/2 (folded into q: the
 *     shared attention scales by head_dim^-1/2);
 *   - RoPE in NeoX pairing on rows in HF order (llama.cpp does not permute
 *     gemma3's q/k either); global layers with rope_theta (and the
 *     config's scaling), sliding layers with their own base, unscaled;
 *   - sliding layers ((l + 1) % pattern != 0): a query at position p sees
 *     the keys at positions p - window < kpos <= p (transformers' tril
 *     mask with diagonal -window, llama.cpp's LLAMA_SWA_TYPE_STANDARD);
 *   - the MLP: down(gelu_tanh(gate x) * up x) (GeGLU, GELU's tanh form).
 * What is data rides in the shared loop: the embedding times sqrt(dim),
 * the post-attention and post-MLP norms, the final logit softcap; every
 * norm weight is stored as (1 + w) by the loaders. */
#include <string.h>

#include "ctx.h"
#include "gemm.h"
#include "kernels/ref/ref.h"
#include "transformer.h"

/* ref_head_prep (kernels/ref/head_prep.c) with Gemma's steps: the norm,
 * NeoX RoPE, and on q the query scale; the engine's head_prep kernels
 * (gen/arch_gemma.c) follow the same specification. */
static void gemma_qk(const rt_ctx *c, const rt_layer_weights *L, int lw, const int32_t *pos, int T,
                     float *q, float *k, float *v)
{
	const rt_config *cfg = &c->m->cfg;
	const int hd = cfg->head_dim, nh = cfg->n_heads, nkv = cfg->n_kv_heads;
	const float *inv = c->m->inv_freq + (rt_config_layer_sliding(cfg, lw) ? hd / 2 : 0);
	(void)v;
	/* scores = (q . k) query_scalar^-1/2 = (q f . k) hd^-1/2; exactly the
	 * shared attention's scale when query_scalar is head_dim (Gemma 3 but 27B) */
	ref_head_prep(q, pos, T, nh, hd, NULL, L->q_norm, cfg->norm_eps, 1, inv,
	              rt_config_query_scale(cfg));
	ref_head_prep(k, pos, T, nkv, hd, NULL, L->k_norm, cfg->norm_eps, 1, inv, 1.0f);
}

/* Global layers: every cached key. Sliding layers: one query at a time,
 * over the context slots inside its window (slot j holds position j) and
 * the staged entries its mask row shows that are inside it; the same
 * reference attention, so a window that cuts nothing changes no bit. */
static void gemma_attend(const rt_ctx *c, int lw, const int32_t *pos, int T, const float *q,
                         const float *kc, const float *vc, const uint64_t *mask, float *out,
                         const rt_tf_scratch *s)
{
	const rt_config *cfg = &c->m->cfg;
	const int hd = cfg->head_dim, nh = cfg->n_heads, nkv = cfg->n_kv_heads;
	const size_t qd = (size_t)nh * hd, kvd = (size_t)nkv * hd;
	const int n_blk = c->blk_off + T, words = (n_blk + 63) / 64, W = cfg->swa_window;
	if (!rt_config_layer_sliding(cfg, lw)) {
		ref_attention_append(out, q, kc, vc, T, c->len, n_blk, nh, nkv, hd, mask, s->att_scratch);
		return;
	}
	for (int t = 0; t < T; t++) {
		const int p = pos[t];
		long start = (long)p - W + 1;
		if (start < 0)
			start = 0;
		if (start > c->len)
			start = c->len;
		uint64_t *row = s->mask_row;
		memcpy(row, c->blk_mask + (size_t)(c->blk_off + t) * c->mask_words,
		       (size_t)words * sizeof(*row));
		for (int b = 0; b < n_blk; b++)
			if ((long)p - c->blk_pos[b] >= W)
				row[b >> 6] &= ~(1ull << (b & 63));
		ref_attention_append(out + (size_t)t * qd, q + (size_t)t * qd, kc + (size_t)start * kvd,
		                     vc + (size_t)start * kvd, 1, c->len - (int)start, n_blk, nh, nkv, hd,
		                     row, s->att_scratch);
	}
}

static void gemma_ffn(const rt_ctx *c, const rt_layer_weights *L, int T, const float *h, float *out,
                      float *scratch)
{
	const int dim = c->m->cfg.dim, ffn = c->m->cfg.ffn_dim;
	float *gate = scratch, *up = scratch + (size_t)T * ffn;
	rt_matmul(gate, h, L->w_gate, T, dim, ffn);
	rt_matmul(up, h, L->w_up, T, dim, ffn);
	ref_geglu_tanh(gate, gate, up, (size_t)T * ffn);
	rt_matmul(out, gate, L->w_down, T, ffn, dim);
}

static int gemma_eval(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
                      float *logits, float *hidden, sw_err *err)
{
	static const rt_tf_family fam = { gemma_qk, gemma_attend, gemma_ffn };
	return rt_tf_eval(c, tok, pos, T, mask, logits, hidden, &fam, err);
}

const struct rt_model_ops rt_gemma_ops = {
	/* .ctx_init  = */ rt_tf_ctx_init,
	/* .ctx_free  = */ rt_tf_ctx_free,
	/* .eval      = */ gemma_eval,
	/* .commit_kv = */ rt_tf_commit_kv,
	/* .free      = */ rt_tf_free,
};
