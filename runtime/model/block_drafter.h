/* Block drafters (ParallelSpec, SpecDiff/MDLM, DFlash-style): one pass over
 * the anchor (the last committed token) and B-1 trainable [MASK] rows gives
 * a draft distribution for each of the B positions after the anchor (row j
 * predicts position anchor + 1 + j). The model side only: weights, config,
 * validation and the forward pass. Drafting and exact verification live in
 * runtime/decode/block_decode.c; training in models/drafters/train/.
 *
 * Files: a directory with config.json (the family's options) and
 * model.safetensors (F32/F16/BF16):
 *   mask_embd            (block-1, dim)
 *   fc                   (dim, n_taps*dim)   features only
 *   fc_norm              (dim)               features only
 *   layers.L.attn_norm   (dim)
 *   layers.L.wq          (n_heads*head_dim, dim)     GGUF row order: RoPE on
 *   layers.L.wk, .wv     (n_kv_heads*head_dim, dim)  adjacent pairs
 *   layers.L.wo          (dim, n_heads*head_dim)
 *   layers.L.ffn_norm    (dim)
 *   layers.L.w_gate, .w_up (ffn_dim, dim); layers.L.w_down (dim, ffn_dim)
 *   out_norm             (dim)
 * The token embedding and LM head are the target's, shared and frozen; the
 * draft head covers ids [0, draft_vocab), or with "d2t": true in config.json
 * the ids a tensor d2t (draft_vocab) I64 in model.safetensors maps to, in
 * the public EAGLE-3 encoding (target id = draft id + d2t[draft id];
 * distinct, in range): its LM head is those rows of the target's, q is 0
 * elsewhere, verification stays over every id. An engine takes the map
 * too (gen/plan.c: the head's gathered rows, d2t and t2d as weights; q
 * through t2d onto the target's ids before expansion and verification).
 *
 * Conditioning:
 *   features: the target's hidden states after layers `taps` at every
 *     committed position, concatenated, fused as rmsnorm(fc @ f) * fc_norm,
 *     and seen by every drafter layer as keys/values (its own wk/wv, RoPE at
 *     the position) before the block's own. Cached for committed positions
 *     only (rt_bd_state), so a rejection needs no drafter rollback.
 *   tokens: no target state; the block rows follow a window of the last
 *     `window` committed tokens, all rows attending to all others.
 * block_attention: "bidirectional" (every block row sees every block row)
 * or "causal" (block row j sees block rows <= j). */
#ifndef RT_BLOCK_DRAFTER_H
#define RT_BLOCK_DRAFTER_H

#include <stdint.h>

#include "core/err.h"
#include "core/json.h"
#include "ctx.h"
#include "model.h"

#define RT_BD_MAX_LAYERS 4
#define RT_BD_MAX_BLOCK 64
#define RT_BD_MAX_WINDOW 256

enum rt_bd_cond { RT_BD_FEATURES = 0, RT_BD_TOKENS };
enum rt_bd_attn { RT_BD_BIDIRECTIONAL = 0, RT_BD_CAUSAL };

typedef struct rt_bd_config {
	int cond;          /* enum rt_bd_cond */
	int block;         /* B: rows per pass (anchor + B-1 masks), 2..RT_BD_MAX_BLOCK */
	int draft_vocab;   /* Vd: the draft head covers ids [0, Vd), or the map's; q = 0 elsewhere */
	bool has_map;      /* "d2t": true: a d2t tensor maps draft ids to target ids */
	int dim, vocab, target_layers; /* the target's, checked against it */
	int n_taps;
	int taps[RT_MAX_TAPS]; /* target layers tapped (features), increasing */
	int window;        /* tokens: committed tokens before the anchor */
	int block_attn;    /* enum rt_bd_attn */
	int n_layers, n_heads, n_kv_heads, head_dim, ffn_dim;
	float norm_eps, rope_theta;
} rt_bd_config;

typedef struct rt_block_drafter {
	char name[256];     /* the directory, for messages */
	rt_bd_config cfg;
	float *mask_embd;   /* (block-1, dim) */
	float *fc;          /* (dim, n_taps*dim) features only */
	float *fc_norm;     /* (dim) features only */
	rt_layer_weights layers[RT_BD_MAX_LAYERS];
	float *out_norm;    /* (dim) */
	const float *tok_embd; /* (vocab, dim) the target's */
	const float *lm_head;  /* (Vd, dim) rows d2t[0..Vd) of the target's (its own
	                        * array when mapped, else the target's first rows) */
	int32_t *d2t;       /* (Vd) target id of each draft id (identity without a map) */
	float *d2t_f, *t2d_f; /* mapped only: (Vd) d2t and (vocab) its inverse (-1 off the
	                       * map) as floats, an engine's i32 weights "d2t", "t2d" */
	float *inv_freq;    /* (head_dim/2) */
	void *arena;        /* owns every array above but the target's */
} rt_block_drafter;

/* Loads dir/config.json and dir/model.safetensors and checks them against
 * the target (width, vocabulary, layer count, taps) and the config against
 * the tensors' shapes. Errors name the file, the field or tensor, what was
 * expected and what was found. The target must outlive the drafter. */
rt_block_drafter *rt_block_drafter_load(const char *dir, const rt_model *target, sw_err *err);
void rt_block_drafter_free(rt_block_drafter *d);
/* dir/config.json alone, checked against a target of shape tcfg (named
 * tname in messages): what a planner needs, no weights read. */
int rt_bd_config_load(const char *dir, const rt_config *tcfg, const char *tname, rt_bd_config *c, sw_err *err);
/* A drafter's shape without files (an engine spec's "shape", at JSON path
 * `path` of `file`): config.json's keys but format, version, target and
 * training; the target is tcfg. Same checks, errors name file and path. */
int rt_bd_config_shape(const json_value *shape, const char *file, const char *path, const rt_config *tcfg,
                       rt_bd_config *c, sw_err *err);
/* The drafter's own weight `field` (layer l for the per-layer ones, else
 * -1) by its safetensors name without "layers.L.": mask_embd, fc, fc_norm,
 * out_norm, attn_norm, wq, ..., w_down (mapped: also lm_head, the gathered
 * rows (Vd, dim), and d2t, t2d as floats); NULL if it has none. *n: floats. */
const float *rt_bd_weight(const rt_block_drafter *d, const char *field, int layer, size_t *n);

/* Per-sequence drafter state: the fused context's keys and values per layer
 * for committed positions [0, len) (features), plus scratch for one pass. */
typedef struct rt_bd_state {
	const rt_block_drafter *d;
	int max_ctx;
	int len;            /* positions with cached context K/V */
	float *k_cache, *v_cache; /* (n_layers, max_ctx + max_rows, kv_dim) */
	float *scratch;
	int max_rows;       /* window + block */
	unsigned long long n_fwd; /* forwards (the step a message names) */
} rt_bd_state;

rt_bd_state *rt_bd_state_new(const rt_block_drafter *d, int max_ctx, sw_err *err);
void rt_bd_state_free(rt_bd_state *s);
/* Features: appends positions len..len+n-1 from their tapped target states
 * feat (n, n_taps*dim), rows of stride n_taps*dim (rt_ctx tap_cache). */
int rt_bd_append(rt_bd_state *s, const float *feat, int n, sw_err *err);
static inline void rt_bd_truncate(rt_bd_state *s, int n) { if (n < s->len) s->len = n < 0 ? 0 : n; }

/* One drafter pass. blk (B): blk[0] = the anchor token at position pos0,
 * blk[j] (j >= 1) = a token already fixed at position pos0 + j, or -1 for
 * [MASK] (a first pass: all -1). features: the context is cached positions
 * [0, len) and len must equal pos0. tokens: win (n_win <= window) holds the
 * committed tokens at positions pos0-n_win..pos0-1. logits (B, Vd): row j is
 * the draft's logits for position pos0 + 1 + j over ids [0, Vd). */
int rt_bd_forward(rt_bd_state *s, const int32_t *blk, int pos0, const int32_t *win, int n_win, float *logits,
                  sw_err *err);

#endif
