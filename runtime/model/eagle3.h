/* EAGLE-3 heads (Li et al. 2025; ALGORITHMS.txt 11): one Llama decoder layer
 * over [input_layernorm(embed(token)) ; hidden_norm(feature)], autoregressive
 * over the draft steps, with its own final norm and LM head over Vd draft ids
 * mapped to target ids by d2t. The model side only: loading the public
 * checkpoint format, the head's committed-position cache and its forward on
 * the host. Drafting and verification: runtime/decode/eagle3_draft.c.
 *
 * Files (the public layout, as SafeAILab/EAGLE, SpecForge, SGLang and vLLM
 * read it): a directory with config.json and model.safetensors.
 *   config.json: a Llama config ("model_type": "llama", architectures
 *     "LlamaForCausalLMEagle3" or "Eagle3LlamaForCausalLM" when present) with
 *     num_hidden_layers 1, vocab_size = the target's, draft_vocab_size (Vd;
 *     default vocab_size), target_hidden_size (default hidden_size),
 *     norm_before_residual (vLLM; default false), and the tapped layers:
 *     eagle_config.eagle_aux_hidden_state_layer_ids (SpecForge / SGLang: the
 *     OUTPUT of target layer i, SGLang captures the input of layer i + 1),
 *     or a top-level eagle_aux_hidden_state_layer_ids (vLLM / speculators:
 *     the INPUT of layer i, the output of layer i - 1), else the default of
 *     EAGLE, SGLang and vLLM: the inputs of layers 2, L/2 and L-3 (outputs of
 *     1, L/2 - 1, L - 4; SpecForge's default). Stored here as the layers whose
 *     output is tapped (rt_ctx_set_taps' convention).
 *   model.safetensors (F32/F16/BF16; d2t I64, t2d BOOL; a matrix may be I8
 *   with NAME_scale (rows, G) beside it, each row's G groups of codes times
 *   their scale: models/drafters' packed heads); the layer under
 *   "midlayer." (EAGLE, SpecForge, SGLang) or "layers.0." (vLLM's name):
 *     fc.weight                               (dim, 3*target_dim)
 *     midlayer.input_layernorm.weight          (dim)   on the embedding
 *     midlayer.hidden_norm.weight              (dim)   on the feature
 *     midlayer.self_attn.q_proj.weight         (n_heads*head_dim, 2*dim)
 *     midlayer.self_attn.k_proj/v_proj.weight  (n_kv_heads*head_dim, 2*dim)
 *     midlayer.self_attn.o_proj.weight         (dim, n_heads*head_dim)
 *     midlayer.post_attention_layernorm.weight (dim)
 *     midlayer.mlp.gate_proj/up_proj.weight    (ffn, dim); down_proj (dim, ffn)
 *     norm.weight (dim); lm_head.weight (Vd, dim) (absent when tied)
 *     d2t (Vd) I64: target id = draft id + d2t[draft id] (absent: identity)
 *     t2d (vocab) BOOL: whether a target id is draftable (optional; checked)
 *     embed_tokens.weight (vocab, dim) optional: else the target's embedding
 *   q_proj/k_proj rows are permuted from HF's rotate_half order to the
 *   adjacent-pair order of kernels/ref ref_rope at load (model.h).
 *
 * Rows. Row i of the head pairs the target's tapped states at position i
 * with the token at position i + 1 (EAGLE's input_ids[:, 1:]), RoPE position
 * i; its output predicts position i + 2. With the target holding positions
 * [0, n) and the anchor token x_n emitted, the committed rows are 0..n-1:
 * all computable from committed positions only, and each row's K/V depends
 * on its own inputs alone (one layer), so it never changes. Row n-1's
 * output gives q_1 and the feature of draft step 2: (that output, x_1) at
 * position n, and so on; those rows are staged and dropped. */
#ifndef RT_EAGLE3_H
#define RT_EAGLE3_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "ctx.h"
#include "model.h"

#define RT_E3_TAPS 3

typedef struct rt_e3_config {
	rt_config head;      /* the head's layer: dim, n_heads, n_kv_heads, head_dim,
	                      * ffn_dim, vocab (= the target's), norm_eps, rope */
	int draft_vocab;     /* Vd */
	int target_dim;      /* width of each tapped state */
	int target_layers;   /* the target's, checked */
	int taps[RT_E3_TAPS]; /* target layers whose output is tapped, increasing */
	bool norm_before_residual; /* residual = hidden_norm(feature), not the feature */
	bool own_embd;       /* embed_tokens.weight in the file */
	bool has_d2t;        /* d2t in the file (else draft id = target id) */
	bool tied;           /* lm_head = the embedding (Vd = vocab) */
} rt_e3_config;

typedef struct rt_eagle3 {
	char name[256];       /* the directory, for messages */
	rt_e3_config cfg;
	float *fc;            /* (dim, 3*target_dim) */
	float *input_norm;    /* (dim) input_layernorm, on the embedding */
	float *hidden_norm;   /* (dim) on the feature */
	float *wq;            /* (n_heads*head_dim, 2*dim) adjacent-pair RoPE order */
	float *wk, *wv;       /* (n_kv_heads*head_dim, 2*dim) */
	float *wo;            /* (dim, n_heads*head_dim) */
	float *post_norm;     /* (dim) post_attention_layernorm */
	float *w_gate, *w_up; /* (ffn, dim) */
	float *w_down;        /* (dim, ffn) */
	float *out_norm;      /* (dim) norm */
	const float *lm_head; /* (Vd, dim) */
	const float *tok_embd; /* (vocab, dim) own or the target's */
	int32_t *d2t;         /* (Vd) the target id of each draft id (absolute) */
	float *inv_freq;      /* (head_dim/2) */
	float *map_f;         /* (Vd + vocab): d2t's target ids, then each target id's draft
	                       * id or -1 (t2d), as floats: the engine's maps */
	void *arena;          /* owns every array above but a target's */
} rt_eagle3;

/* Loads dir/config.json and dir/model.safetensors and checks them against
 * the target (a Llama model: width, vocabulary, layer count) and the config
 * against the tensors. Errors name the file, the field or tensor, what was
 * expected and what was found. The target must outlive the head (its
 * embedding is shared unless the file has its own). */
rt_eagle3 *rt_eagle3_load(const char *dir, const rt_model *target, sw_err *err);
/* dir/config.json checked against a target's shapes tcfg (named tname in
 * messages) as rt_eagle3_load checks it, and the names in
 * model.safetensors' header (own_embd, has_d2t): what the engine planner
 * needs (gen/spec.c), no tensor data read. 0 or an error naming the file,
 * the field, what was expected and what was found. */
int rt_e3_config_load(const char *dir, const rt_config *tcfg, const char *tname, rt_e3_config *c, sw_err *err);
/* A head by its shape alone (a shape-only engine timed with random
 * weights): dir/config.json checked as rt_e3_config_load checks it, the
 * tensors those of the public heads: the target's embedding when the widths
 * agree (else embed_tokens.weight), d2t/t2d when draft_vocab_size < vocab. */
int rt_e3_config_shape(const char *dir, const rt_config *tcfg, const char *tname, rt_e3_config *c, sw_err *err);
/* The engine's buffer field (gen/drafter_eagle3.c's draft.* names: tok_embd,
 * fc, in_norm, hid_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down,
 * out_norm, lm_head, d2t, t2d, inv_freq) as the n floats bind uploads, or
 * NULL (*n = 0) for another name. */
const float *rt_e3_weight(const rt_eagle3 *h, const char *field, size_t *n);
void rt_eagle3_free(rt_eagle3 *h);

/* Per-sequence state: K/V of the committed rows [0, len), then blk_T staged
 * draft rows; scratch for max_rows rows a call. */
typedef struct rt_e3_state {
	const rt_eagle3 *h;
	int max_ctx;   /* committed rows */
	int max_rows;  /* staged rows */
	int len;       /* committed rows */
	int blk_T;     /* staged rows after them */
	float *k_cache, *v_cache; /* (max_ctx + max_rows, kv_dim) */
	float *scratch;
	unsigned long long n_fwd; /* forwards that gave logits (the step a message names) */
} rt_e3_state;

rt_e3_state *rt_e3_state_new(const rt_eagle3 *h, int max_ctx, int max_rows, sw_err *err);
void rt_e3_state_free(rt_e3_state *s);
/* Keeps the first n committed rows and drops the staged ones. */
void rt_e3_truncate(rt_e3_state *s, int n);

/* Commits rows len..len+n-1 (dropping staged rows first): feat (n,
 * 3*target_dim) the target's tapped states at those positions (stride
 * 3*target_dim: rt_ctx tap_cache rows), tok (n) the tokens one position
 * later. hidden (dim) and logits (Vd), when non-NULL (n >= 1), get the last
 * row's output before the final norm and its draft logits. */
int rt_e3_commit(rt_e3_state *s, const float *feat, const int32_t *tok, int n, float *hidden, float *logits,
                 sw_err *err);

/* Stages R draft rows after the staged ones: row r's feature feat[r] (dim:
 * a previous row's output before the final norm), its token tok[r] (a target
 * id), RoPE position pos[r]. mask: R rows of (blk_T + R + 63)/64 words over
 * every staged row, these included (bit j: staged row j visible; NULL:
 * causal); every committed row is visible. hidden (R, dim) and logits (R,
 * Vd) get the rows' outputs; hidden may alias feat (every feature is read
 * before any output is written). */
int rt_e3_step(rt_e3_state *s, const float *feat, const int32_t *tok, const int32_t *pos, int R,
               const uint64_t *mask, float *hidden, float *logits, sw_err *err);

#endif
