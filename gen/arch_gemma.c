/* The Gemma 3 family in the planner (arch.h), as runtime/model/gemma.c runs
 * it on the host (and transformers' Gemma3ForCausalLM):
 *   - q and k: per-head RMSNorm (q_norm, k_norm; head_dim each), NeoX RoPE,
 *     and on q the query scale sqrt(head_dim / query_pre_attn_scalar)
 *     (ref_head_prep's SCALE), one templates/head_prep.cu.tmpl launch each;
 *   - RoPE bases: global layers rope_theta, sliding layers their own
 *     (rope_local_base_freq): the family weight rope_freq holds each
 *     layer's head_dim / 2 frequencies (rt_model_weight "rope_freq");
 *   - the embedding times sqrt(dim) (cfg.embd_scale; embedding16 SCALE);
 *   - RMSNorms on the attention's and the MLP's outputs before their
 *     residual adds (post_attn_norm, post_ffn_norm: the sandwich norms);
 *   - GeGLU with the tanh GELU (swiglu.cu.tmpl ACT 1);
 *   - every norm weight is (1 + w) as the loaders store it, so the plain
 *     RMSNorm kernels apply; the output is tied (the LM head is the
 *     embedding table, gen/plan.c gp_model_bufs).
 * Sliding layers attend through the tree attention template's WINDOW
 * (gen/plan.c layer_runs: a run of layers per window; none where the
 * window covers max_context); the template takes a block's own keys as
 * inside the window, so check refuses a prefill chunk or tree larger than
 * sliding_window when the window cuts (max_context above it). Also refused: a final
 * logit softcap (Gemma 2's; Gemma 3 has none) and a drafter that embeds
 * tokens without the scale (gen_drafter.embd_unscaled: a block drafter).
 * gguf_a8 runs as on the other families: the GEMMs are the same ops on the
 * file's blocks (Gemma 3 270M's Q4_K_M file: Q5_0 and Q8_0 where rows of 640
 * are no whole K-quant super-block, Q4_K and Q6_K elsewhere, a Q8_0 tied
 * head), the norms, RoPE tables and GeGLU the loaded model's fp32 weights
 * and the fp32 kernels'; bind reads the blocks alone from the file
 * (runtime/engine/weights_gguf.h rt_engine_gguf_open_raw). */
#include <stdio.h>

#include "arch.h"
#include "drafter.h"
#include "spec.h"

enum { W_QN = 0, W_KN, W_POST_ATTN, W_POST_FFN, W_FREQ };

static int gemma_weights(const rt_config *cfg, gen_arch_weight *out)
{
	const int64_t hd = cfg->head_dim;
	out[W_QN] = (gen_arch_weight){"q_norm", hd};
	out[W_KN] = (gen_arch_weight){"k_norm", hd};
	out[W_POST_ATTN] = (gen_arch_weight){"post_attn_norm", cfg->dim};
	out[W_POST_FFN] = (gen_arch_weight){"post_ffn_norm", cfg->dim};
	out[W_FREQ] = (gen_arch_weight){"rope_freq", hd / 2};
	return 5;
}

static int gemma_qkv_ops(const rt_config *cfg, int64_t rows, gen_arch_op *out)
{
	out[0] = gen_arch_head_op("qk_q", cfg, GEN_QKV_Q, rows, 0, 1, 1, -1, W_QN,
	                          rt_config_query_scale(cfg), W_FREQ);
	out[1] = gen_arch_head_op("qk_k", cfg, GEN_QKV_K, rows, 0, 1, 1, -1, W_KN, 1.0f, W_FREQ);
	return 2;
}

static void gemma_block(const rt_config *cfg, gen_arch_block *out)
{
	*out = (gen_arch_block){.embd_scale = cfg->embd_scale > 0 ? cfg->embd_scale : 1.0f,
	                        .act = 1, .post_attn = W_POST_ATTN, .post_ffn = W_POST_FFN};
}

static bool any_sliding(const rt_config *cfg)
{
	for (int l = 0; l < cfg->n_layers; l++)
		if (rt_config_layer_sliding(cfg, l))
			return true;
	return false;
}

static int gemma_check(const rt_config *cfg, const char *role, const gen_spec *s,
                       gen_arch_refusal *r)
{
	if (cfg->final_softcap > 0) {
		r->key = role;
		snprintf(r->expected, sizeof(r->expected), "a gemma3 %s without final_logit_softcapping "
		         "(the engine's LM head does not cap logits)", role);
		snprintf(r->found, sizeof(r->found), "final_logit_softcapping %g",
		         (double)cfg->final_softcap);
		return 1;
	}
	const int blk = s->prefill_chunk > s->tree.n ? s->prefill_chunk : s->tree.n;
	if (any_sliding(cfg) && s->max_context > cfg->swa_window && blk > cfg->swa_window) {
		r->key = s->prefill_chunk > s->tree.n ? "prefill_chunk" : "tree";
		snprintf(r->expected, sizeof(r->expected), "at most %d rows, the gemma3 %s's "
		         "sliding_window, with a max_context above it (the windowed attention takes "
		         "every key of its block as inside the window)", cfg->swa_window, role);
		snprintf(r->found, sizeof(r->found), "%d rows", blk);
		return 1;
	}
	const gen_drafter *dr = gen_drafter_of(s->draft_kind);
	if (dr && dr->embd_unscaled) {
		r->key = "draft";
		snprintf(r->expected, sizeof(r->expected), "an ngram, layerskip or model draft with a "
		         "gemma3 %s", role);
		snprintf(r->found, sizeof(r->found), "%s", dr->noun);
		return 1;
	}
	return 0;
}

const gen_arch gen_arch_gemma = {"gemma3", gemma_weights, gemma_qkv_ops, gemma_block, gemma_check};
