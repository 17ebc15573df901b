/* What the forward passes of the Llama family share (llama.c, qwen.c, gemma.c; not
 * part of the model interface): the context's KV cache and scratch, the
 * embedding of a block (padded views embed ids past their table as zero
 * rows), the hidden-state taps, the final norm and LM head (a vocabulary
 * limit sets the rest to -inf), the KV commit and freeing a model, and the
 * layer loop itself (rt_tf_eval). The per-family file owns only its hooks
 * (rt_tf_family): what its attention does to q, k and v after their
 * projections, which cached keys a query sees, and its MLP. What is data
 * rather than code rides in the config and the weights: the embedding
 * scale, the post-norms (applied where a layer has them) and the final
 * logit softcap. */
#ifndef RT_TRANSFORMER_H
#define RT_TRANSFORMER_H

#include "ctx.h"

int rt_tf_ctx_init(rt_ctx *c, sw_err *err);
void rt_tf_ctx_free(rt_ctx *c);
void rt_tf_commit_kv(rt_ctx *c, const int *keep, int n);
void rt_tf_free(rt_model *m);

/* Scratch layout of one eval of T rows (rt_tf_ctx_init sizes it). */
typedef struct rt_tf_scratch {
	float *x, *h, *o;   /* (T, dim) each: residual, normed, block output */
	float *q, *att;     /* (T, n_heads*head_dim) each */
	float *mlp;         /* (2 T, ffn_dim) */
	float *att_scratch; /* attention row scratch */
	uint64_t *mask_row; /* one mask row over the staged block (mask_words) */
} rt_tf_scratch;
void rt_tf_scratch_at(const rt_ctx *c, int T, rt_tf_scratch *s);

/* x (T, dim) = the embedding rows of tok (times cfg.embd_scale if set). */
int rt_tf_embed(const rt_ctx *c, const int32_t *tok, int T, float *x, sw_err *err);
/* hidden (T, dim) after the final norm, or NULL; logits as eval documents
 * (softcapped when cfg.final_softcap > 0). */
void rt_tf_head(const rt_ctx *c, int T, float *x, float *h, float *logits, float *hidden);

/* What a family adds to the attention block: after q (T, n_heads*head_dim)
 * = h Wq^T, k and v (T, n_kv_heads*head_dim) = h Wk^T, h Wv^T, its own
 * biases, norms and RoPE pairing on q and k (v: biases only). */
typedef void (*rt_tf_qk_fn)(const rt_ctx *c, const rt_layer_weights *L, int lw, const int32_t *pos,
                            int T, float *q, float *k, float *v);
/* out (T, n_heads*head_dim): the attention of the T new queries q over
 * weight layer lw's cache kc, vc (slots 0..len+blk_off+T) as
 * ref_attention_append documents it (mask: NULL = causal). */
typedef void (*rt_tf_attend_fn)(const rt_ctx *c, int lw, const int32_t *pos, int T, const float *q,
                                const float *kc, const float *vc, const uint64_t *mask, float *out,
                                const rt_tf_scratch *s);
/* out (T, dim) = the MLP of h (T, dim), scratch 2 T ffn floats. */
typedef void (*rt_tf_ffn_fn)(const rt_ctx *c, const rt_layer_weights *L, int T, const float *h,
                             float *out, float *scratch);
typedef struct rt_tf_family {
	rt_tf_qk_fn qk;         /* required */
	rt_tf_attend_fn attend; /* NULL: every cached key visible (ref_attention_append) */
	rt_tf_ffn_fn ffn;       /* NULL: SwiGLU (rt_mlp_swiglu) */
} rt_tf_family;
/* The whole forward of T rows (the eval of rt_model_ops): per run layer,
 * norm, q/k/v, fam->qk, attention, o (then post_attn_norm where the layer
 * has one), residual add, norm, MLP (then post_ffn_norm), residual add,
 * taps; then the head. */
int rt_tf_eval(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
               float *logits, float *hidden, const rt_tf_family *fam, sw_err *err);

/* The Qwen2/Qwen3 forward (qwen.c) and Gemma 3's (gemma.c);
 * rt_model_from_weights picks one by cfg.arch. */
extern const struct rt_model_ops rt_qwen_ops;
extern const struct rt_model_ops rt_gemma_ops;

#endif
