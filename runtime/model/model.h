/* Models as the decoding loop sees them: a config (shapes), weights
 * (read-only, fp32 after dequantization) and a per-sequence context (KV cache
 * plus the committed tokens). Two kinds share one interface: transformers of
 * the Llama family (Llama, Qwen2/Qwen2.5, Qwen3, Gemma 3: rt_config.arch) and Markov
 * "table" models used by exactness tests. */
#ifndef RT_MODEL_H
#define RT_MODEL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/wformat.h"

enum rt_rope_scaling {
	RT_ROPE_SCALING_NONE = 0,
	RT_ROPE_SCALING_LINEAR,  /* position / factor */
	RT_ROPE_SCALING_LLAMA3,  /* Llama-3.1 frequency-dependent scaling */
};

/* The transformer family, which decides the forward pass (llama.c, qwen.c,
 * gemma.c).
 * Zero is Llama, so a config built field by field stays one. */
enum rt_arch {
	RT_ARCH_LLAMA = 0, /* no biases; RoPE on adjacent pairs (GGUF row order) */
	RT_ARCH_QWEN2,     /* q/k/v biases; RoPE on (x[i], x[i + hd/2]) (NeoX) */
	RT_ARCH_QWEN3,     /* per-head RMSNorm of q and k before RoPE (NeoX) */
	RT_ARCH_GEMMA3,    /* Gemma 3 text: scaled embedding, pre/post norms, GeGLU,
	                    * q/k norms, sliding-window layers (NeoX RoPE) */
};

/* "llama", "qwen2", "qwen3", "gemma3" (llama.cpp's general.architecture). */
const char *rt_arch_name(int arch);

typedef struct rt_config {
	int arch;         /* enum rt_arch */
	int n_layers;
	int dim;          /* model width */
	int n_heads;
	int n_kv_heads;   /* GQA: n_heads % n_kv_heads == 0 */
	int head_dim;     /* usually dim / n_heads */
	int ffn_dim;
	int vocab;
	int max_ctx;      /* trained context length */
	float rope_theta;
	int rope_scaling; /* enum rt_rope_scaling */
	float rope_factor;
	float rope_low_freq_factor, rope_high_freq_factor; /* LLAMA3 only */
	int rope_orig_ctx;                                  /* LLAMA3 only */
	float norm_eps;
	bool tied_embd;   /* lm_head == tok_embd */
	int bos_id, eos_id; /* -1 when absent */
	/* Gemma 3 only (zero for the other families). Norm weights are stored
	 * as (1 + w) already (llama.cpp's converter does so; the HF loader adds
	 * the 1), so every RMSNorm is the plain one. */
	float embd_scale;    /* embedding rows times this (sqrt(dim) in the model's dtype) */
	float query_scalar;  /* queries scaled by query_scalar^-1/2 (query_pre_attn_scalar) */
	int swa_window;      /* sliding layers see keys with qpos - kpos < swa_window */
	int swa_pattern;     /* layer l is global iff (l + 1) % swa_pattern == 0 */
	float rope_theta_local; /* RoPE base of the sliding layers (no scaling) */
	float final_softcap; /* > 0: logits = cap tanh(logits / cap) */
} rt_config;

/* Layer l of a Gemma 3 config attends through a sliding window. */
static inline bool rt_config_layer_sliding(const rt_config *c, int l)
{
	return c->swa_window > 0 && c->swa_pattern > 0 && (l + 1) % c->swa_pattern != 0;
}
/* Gemma 3's factor on q after RoPE: the scores' query_scalar^-1/2 over the
 * attention's own head_dim^-1/2, sqrt(head_dim / query_scalar) in fp32
 * (1 when query_scalar is head_dim or unset). */
static inline float rt_config_query_scale(const rt_config *c)
{
	return c->query_scalar > 0 && c->query_scalar != (float)c->head_dim
	       ? sqrtf((float)c->head_dim / c->query_scalar) : 1.0f;
}
/* Floats of rt_model.inv_freq: head_dim/2, and for Gemma 3 the sliding
 * layers' frequencies after the global ones. */
static inline int rt_config_inv_freq_len(const rt_config *c)
{
	return c->arch == RT_ARCH_GEMMA3 ? c->head_dim : c->head_dim / 2;
}

/* Llama: Q and K projections are stored in the GGUF (llama.cpp) row order,
 * where RoPE rotates adjacent pairs (x[2i], x[2i+1]). The safetensors loader
 * permutes HF rows (rotate_half convention) into this order at load time, so
 * exactly one RoPE convention exists in the engine for Llama.
 * Qwen2/Qwen3: rows stay in HF order in both formats (llama.cpp's converter
 * does not permute them and runs NeoX RoPE), and the forward rotates
 * (x[i], x[i + hd/2]) (ref_rope_neox). */
typedef struct rt_layer_weights {
	float *attn_norm; /* (dim) */
	float *wq;        /* (n_heads*head_dim, dim) row-major: out x in */
	float *wk;        /* (n_kv_heads*head_dim, dim) */
	float *wv;        /* (n_kv_heads*head_dim, dim) */
	float *wo;        /* (dim, n_heads*head_dim) */
	float *ffn_norm;  /* (dim) */
	float *w_gate;    /* (ffn_dim, dim) */
	float *w_up;      /* (ffn_dim, dim) */
	float *w_down;    /* (dim, ffn_dim) */
	float *bq;        /* (n_heads*head_dim): Qwen2 only, else NULL */
	float *bk;        /* (n_kv_heads*head_dim): Qwen2 only */
	float *bv;        /* (n_kv_heads*head_dim): Qwen2 only */
	float *q_norm;    /* (head_dim): Qwen3 and Gemma 3, RMSNorm of each q head */
	float *k_norm;    /* (head_dim): Qwen3 and Gemma 3 */
	float *post_attn_norm; /* (dim): Gemma 3 only, on the attention output before the residual add */
	float *post_ffn_norm;  /* (dim): Gemma 3 only, on the MLP output */
} rt_layer_weights;

typedef struct rt_weights {
	float *tok_embd;  /* (vocab, dim) */
	rt_layer_weights *layers; /* (n_layers) */
	float *out_norm;  /* (dim) */
	float *lm_head;   /* (vocab, dim); == tok_embd when tied */
	void *arena;      /* owner of every array above (one allocation) */
	size_t arena_bytes;
} rt_weights;

void rt_weights_free(rt_weights *w);
/* A weight array by the engine's field name (tok_embd, out_norm, lm_head,
 * inv_freq; per layer l: attn_norm, ffn_norm, wq, wk, wv, wo, w_gate, w_up,
 * w_down, and where the family has them bq, bk, bv, q_norm, k_norm,
 * post_attn_norm, post_ffn_norm) and its
 * element count (0 for an array the model lacks); NULL for an unknown field or a layered
 * one asked without a valid layer. Used by the engine binding and by the
 * weights digest at build time, so both read the same arrays. */
struct rt_model;
const float *rt_model_weight(const struct rt_model *m, const char *field, int l, size_t *n);

/* Says on stderr what a loader's finite scan of name covered and cost
 * ("specwright: NAME: scanned 98.9 MB (272 tensors) for non-finite values
 * in 12.3 ms"): every loader's one line when a model or drafter is loaded. */
void rt_load_note(const char *name, const sw_wscan_cost *c);

/* The first non-finite value among rows x n logits at ld apart (columns
 * [0, n) of each row): 0, or SW_EINVAL naming who (the model or head),
 * the op that wrote them, the step, the row, the token id and the value. */
int rt_logits_check(const float *logits, int rows, int n, size_t ld, const char *who, const char *op,
                    unsigned long long step, const int32_t *pos, sw_err *err);

#endif
