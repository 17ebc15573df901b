/* What the forward passes of the Llama family share (llama.c, qwen.c; not
 * part of the model interface): the context's KV cache and scratch, the
 * embedding of a block (padded views embed ids past their table as zero
 * rows), the hidden-state taps, the final norm and LM head (a vocabulary
 * limit sets the rest to -inf), the KV commit and freeing a model, and the
 * layer loop itself (rt_tf_eval). The per-family file owns only what its
 * attention does to q, k and v after their projections. */
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
} rt_tf_scratch;
void rt_tf_scratch_at(const rt_ctx *c, int T, rt_tf_scratch *s);

/* x (T, dim) = the embedding rows of tok. */
int rt_tf_embed(const rt_ctx *c, const int32_t *tok, int T, float *x, sw_err *err);
/* The MLP half of run layer l (norm, SwiGLU, residual add) and its taps. */
void rt_tf_mlp(rt_ctx *c, const rt_layer_weights *L, int l, int T, const rt_tf_scratch *s);
/* hidden (T, dim) after the final norm, or NULL; logits as eval documents. */
void rt_tf_head(const rt_ctx *c, int T, float *x, float *h, float *logits, float *hidden);

/* What a family adds to the attention block: after q (T, n_heads*head_dim)
 * = h Wq^T, k and v (T, n_kv_heads*head_dim) = h Wk^T, h Wv^T, its own
 * biases, norms and RoPE pairing on q and k (v: biases only). */
typedef void (*rt_tf_qk_fn)(const rt_ctx *c, const rt_layer_weights *L, const int32_t *pos, int T,
                            float *q, float *k, float *v);
/* The whole forward of T rows (the eval of rt_model_ops) for a family whose
 * blocks differ from Llama's only by qk. */
int rt_tf_eval(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
               float *logits, float *hidden, rt_tf_qk_fn qk, sw_err *err);

/* The Qwen2/Qwen3 forward (qwen.c); rt_model_from_weights picks it by
 * cfg.arch. */
extern const struct rt_model_ops rt_qwen_ops;

#endif
