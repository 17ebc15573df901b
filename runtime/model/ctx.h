/* The model interface the decoding loop uses: a model kind (Llama transformer,
 * Markov table) behind a small vtable, and a per-sequence context holding the
 * committed tokens and the KV cache. eval() runs a block of new tokens after
 * the committed context without committing them; commit() keeps a subset
 * (the accepted path) and rolls the rest back. */
#ifndef RT_CTX_H
#define RT_CTX_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model.h"

#define RT_MAX_TAPS 8

typedef struct rt_model rt_model;
typedef struct rt_ctx rt_ctx;

enum rt_model_kind {
	RT_MODEL_LLAMA = 0,
	RT_MODEL_TABLE,
};

struct rt_model_ops {
	int (*ctx_init)(rt_ctx *c, sw_err *err);
	void (*ctx_free)(rt_ctx *c);
	/* tok (T), pos (T) absolute positions, mask: NULL = causal, else T rows of
	 * (T+63)/64 words (bit j of row i: block token j visible to i, self
	 * included). logits (T, vocab); hidden (T, dim) after the final norm, or
	 * NULL. The block's state is staged, not committed. The new entries
	 * follow c->blk_off already staged ones; mask rows span all of them. */
	int (*eval)(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
	            float *logits, float *hidden, sw_err *err);
	/* Moves staged block entries keep[0..n) (keep[i] >= i, increasing) to the
	 * committed slots len..len+n-1. */
	void (*commit_kv)(rt_ctx *c, const int *keep, int n);
	void (*free)(rt_model *m);
};

struct rt_model {
	const struct rt_model_ops *ops;
	int kind;            /* enum rt_model_kind */
	char name[256];      /* file or description, for messages */
	rt_config cfg;       /* for tables: vocab, max_ctx; other fields 0 */
	rt_weights w;        /* Llama only */
	bool owns_weights;   /* false for layer-skip views */
	int n_layers_run;    /* layers the forward runs (< cfg.n_layers: layer skip) */
	int *layer_map;      /* (n_layers_run) which weight layer each run layer is */
	int vocab_limit;     /* > 0: logits only for ids < vocab_limit, the rest -inf
	                      * (a draft head over the most frequent BPE ids; exact,
	                      * since q is what the draft samples from) */
	int embd_rows;       /* > 0: rows of tok_embd and lm_head, fewer than
	                      * cfg.vocab (a draft padded to its target's
	                      * vocabulary, rt_model_pad_vocab): ids in
	                      * [embd_rows, vocab) embed as a zero row */
	struct rt_model *owned_src; /* a view's source, freed with it (or NULL) */
	float *inv_freq;     /* (head_dim/2) RoPE frequencies */
	/* table models: order-1 P[prev][next] or order-2 P[prev2][prev1][next] */
	int table_order;
	float *table;        /* (vocab^order, vocab) probabilities, rows sum to 1 */
	float *log_table;    /* log of table, -inf for zeros */
};

struct rt_ctx {
	const rt_model *m;
	int max_ctx;         /* committed + staged tokens must fit */
	int max_block;       /* largest T passed to eval */
	int len;             /* committed tokens */
	int32_t *tokens;     /* (max_ctx) committed tokens */
	int32_t *blk_tok;    /* (max_block) staged block tokens */
	int32_t *blk_pos;    /* (max_block) their positions (sliding-window attention) */
	int blk_T;           /* staged block size */
	int blk_off;         /* during eval: staged entries before this append */
	int mask_words;      /* (max_block + 63) / 64: row stride of blk_mask */
	uint64_t *blk_mask;  /* (max_block, mask_words) visibility of staged entries */
	/* Llama state */
	float *k_cache, *v_cache; /* (n_layers_run, max_ctx, n_kv_heads*head_dim) */
	float *scratch;      /* activations for one block */
	size_t scratch_floats;
	/* Set by rt_ctx_feed: eval writes logits for the last row only (V
	 * floats), sparing the LM head on every other row of a prefill. */
	bool logits_last_only;
	/* Hidden-state taps (block drafters, rt_ctx_set_taps): the residual
	 * stream after run layers tap_layers[0..n_taps) of every row eval
	 * feeds, stored like the KV cache (slot len + staged index, moved by
	 * commit), so tap_cache[0..len) always holds the committed positions.
	 * Row stride n_taps * dim. Off (NULL, 0) unless asked for. */
	int n_taps;
	int tap_layers[RT_MAX_TAPS];
	float *tap_cache;    /* (max_ctx, n_taps * dim) */
	/* counters: forward passes and tokens evaluated */
	uint64_t n_evals, n_eval_tokens;
};

rt_ctx *rt_ctx_new(const rt_model *m, int max_ctx, int max_block, sw_err *err);
void rt_ctx_free(rt_ctx *c);
/* Asks a Llama context to keep the hidden states after run layers
 * layers[0..n) (increasing, each < n_layers_run) of every row it feeds, in
 * c->tap_cache. Only on an empty context (len 0); n = 0 turns taps off.
 * Logits, hidden states and KV are unchanged bit for bit. */
int rt_ctx_set_taps(rt_ctx *c, const int *layers, int n, sw_err *err);
int rt_ctx_eval(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
                float *logits, float *hidden, sw_err *err);
/* Appends T entries to the staged block (tree drafting, level by level):
 * mask has T rows of (blk_T + T + 63)/64 words over ALL staged entries
 * (NULL: causal over the whole staged block). rt_ctx_eval is this after
 * dropping what was staged. */
int rt_ctx_eval_append(rt_ctx *c, const int32_t *tok, const int32_t *pos, int T, const uint64_t *mask,
                       float *logits, float *hidden, sw_err *err);
/* Causal block at positions len..len+T-1, committed entirely; logits (V
 * floats, or NULL) receives the distribution after the last token. */
int rt_ctx_feed(rt_ctx *c, const int32_t *tok, int T, float *logits, sw_err *err);
void rt_ctx_commit(rt_ctx *c, const int *keep, int n);
/* Roll back to the first n committed tokens. */
void rt_ctx_truncate(rt_ctx *c, int n);

/* Loads a model file: GGUF (Llama or table), or a directory with
 * config.json + safetensors. Every tensor is scanned for non-finite values
 * first (refused naming the file and tensor; the scan's cost is said on
 * stderr, rt_load_note). */
rt_model *rt_model_load(const char *path, sw_err *err);
/* A Llama model from config and weights already in memory (takes ownership). */
rt_model *rt_model_from_weights(const rt_config *cfg, rt_weights *w, const char *name, sw_err *err);
/* Layer-skip view: layers[0..n) of m (increasing), m's final norm and LM
 * head, logits restricted to ids < vocab_limit when > 0. Shares m's weights;
 * m must outlive it. */
rt_model *rt_model_layerskip(const rt_model *m, const int *layers, int n, int vocab_limit, sw_err *err);
/* A draft whose vocabulary is a prefix of its target's (Qwen2-0.5B's 151936
 * ids under Qwen2-7B's 152064), seen over the target's ids [0, vocab): the
 * same weights, logits -inf (q = 0) from m's vocabulary on, and an id there
 * (padding the target may still commit) embedded as a zero row, the
 * engine's rule (kernels/ref/embedding16.c). Shares m's weights: with own
 * the view takes m (freed with it), else m must outlive it; on failure m
 * stays the caller's. vocab must be at least m's; m a Llama model. */
rt_model *rt_model_pad_vocab(rt_model *m, int vocab, bool own, sw_err *err);
/* Parses "N" (the first N layers) or ranges "0-11,24-29", optionally
 * followed by "@V" for a vocabulary limit. */
rt_model *rt_model_layerskip_parse(const rt_model *m, const char *spec, sw_err *err);
/* Markov table model (order 1 or 2) from a row-stochastic table, copied. */
rt_model *rt_model_table(int vocab, int order, const float *table, const char *name, sw_err *err);
void rt_model_free(rt_model *m);

static inline int rt_model_vocab(const rt_model *m) { return m->cfg.vocab; }



/* Writes m's run layers (layer-skip views included) as a Llama GGUF with
 * matrices encoded as `type` (enum ggml_dtype: F32, F16, BF16, Q8_0, Q4_0,
 * Q4_1). Used to derive a separate draft model from a target. */
int rt_llama_save_gguf(const rt_model *m, const char *path, uint32_t type, sw_err *err);
/* The general form (derive.c). With src (m's own GGUF file, which m was
 * loaded from), a tensor whose output type equals its type in src is copied
 * block for block (src's blocks for m's layer_map[l]), never decoded and
 * re-encoded; the others are encoded from m's fp32 values. Norms are f32. */
struct gguf_file;
typedef struct rt_derive_opts {
	uint32_t type;                /* the layers' matrices */
	uint32_t embd_type;           /* token_embd (and output.weight when untied) */
	const struct gguf_file *src;  /* m's source GGUF, or NULL (encode everything) */
	const struct gguf_file *tok;  /* copy its every tokenizer.* key (its tokenizer.ggml.tokens
	                               * must hold m's vocabulary), or NULL: no tokenizer */
	int *n_copied;                /* if set: tensors copied from src */
} rt_derive_opts;
int rt_llama_derive_gguf(const rt_model *m, const char *path, const rt_derive_opts *opt, sw_err *err);

/* Saves a table model as GGUF (general.architecture "markov"). */
int rt_table_save(const char *path, int vocab, int order, const float *table, sw_err *err);
#endif
