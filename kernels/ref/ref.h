/* Plain-C fp32 reference ops: the specification every kernel is checked
 * against. Row-major; shapes in comments; no allocation inside an op except
 * where a scratch argument says otherwise. GEMMs go through CBLAS. */
#ifndef REF_H
#define REF_H

#include <stddef.h>
#include <stdint.h>

/* y (T, dim) = table[tok[t]] for table (n_rows, dim). tok must be < n_rows
 * (caller validates); returns -1 on an out-of-range id (y then untouched),
 * else 0. */
int ref_embedding(float *y, const float *table, const int32_t *tok, int T, int dim, int n_rows);

/* y (T, dim) = x / sqrt(mean(x^2) + eps) * w. y may alias x. */
void ref_rmsnorm(float *y, const float *x, const float *w, int T, int dim, float eps);

/* Inverse frequencies for RoPE: inv_freq[i] = theta^(-2i/rot_dim), i < rot_dim/2,
 * then scaled: scaling 0 none, 1 linear (divide by factor), 2 Llama-3.1
 * (low/high freq factors, original context). */
void ref_rope_freqs(float *inv_freq, int rot_dim, float theta, int scaling, float factor,
                    float low_freq_factor, float high_freq_factor, int orig_ctx);
/* In place on x (T, n_heads, head_dim): for each head, pairs (x[2i], x[2i+1]),
 * i < rot_dim/2, rotated by angle pos[t] * inv_freq[i] (GGUF/ggml "normal" mode). */
void ref_rope(float *x, const int32_t *pos, int T, int n_heads, int head_dim, int rot_dim,
              const float *inv_freq);

/* Attention of a block of T new queries over n_ctx cached keys plus the block's
 * own T keys.
 *   q   (T, n_heads, head_dim)
 *   k,v (n_ctx + T, n_kv_heads, head_dim): slots 0..n_ctx-1 = context, slots
 *       n_ctx+j = block token j (already written by the caller)
 *   mask: NULL = causal inside the block; else T rows of (T+63)/64 uint64 words,
 *       bit j of row i set <=> block key j is visible to query i (ancestors and
 *       self). Every context key is visible to every query.
 *   out (T, n_heads, head_dim); scale 1/sqrt(head_dim); head h reads kv head
 *       h / (n_heads / n_kv_heads). scratch: at least n_ctx + T floats.
 *   A query with no visible key (only possible with a mask and n_ctx = 0)
 *   gets a zero row. K/V of invisible block slots are never read. */
void ref_attention(float *out, const float *q, const float *k, const float *v, int T, int n_ctx,
                   int n_heads, int n_kv_heads, int head_dim, const uint64_t *mask, float *scratch);

/* The same for T queries appended to a staged block: the block holds n_blk
 * entries (slots n_ctx..n_ctx+n_blk-1), the queries are its LAST T entries,
 * and mask has T rows of (n_blk+63)/64 words over all n_blk entries (NULL:
 * causal). ref_attention is the case n_blk == T. Used to draft a tree level
 * by level over the levels already staged. */
void ref_attention_append(float *out, const float *q, const float *k, const float *v, int T, int n_ctx,
                          int n_blk, int n_heads, int n_kv_heads, int head_dim, const uint64_t *mask,
                          float *scratch);

/* y (n) = silu(gate) * up, silu(x) = x / (1 + exp(-x)). y may alias gate or up. */
void ref_swiglu(float *y, const float *gate, const float *up, size_t n);

/* y (n) = a + b. y may alias a or b. */
void ref_add(float *y, const float *a, const float *b, size_t n);

/* y (T, n_out) = x (T, n_in) @ w^T for w (n_out, n_in): sgemm. */
void ref_matmul(float *y, const float *x, const float *w, int T, int n_in, int n_out);

/* out (T, dim) = w_down @ (silu(w_gate @ x) * (w_up @ x)); w_gate, w_up (ffn, dim),
 * w_down (dim, ffn) as for ref_matmul; scratch 2*T*ffn floats. */
void ref_mlp_swiglu(float *out, const float *x, const float *w_gate, const float *w_up,
                    const float *w_down, int T, int dim, int ffn, float *scratch);

/* logits (T, vocab) = rmsnorm(x, norm_w, eps) @ lm_head^T; scratch T*dim floats. */
void ref_lm_head(float *logits, const float *x, const float *norm_w, const float *lm_head, int T,
                 int dim, int vocab, float eps, float *scratch);

/* ---- the engine's own small ops (templates embedding16, kv_store, step,
 * ngram_lookup). 16-bit values are raw uint16 bits, bf16 (is_f16 0) or fp16
 * (is_f16 1), converted with kernels/half.h (round to nearest even). */

/* y (T, dim) fp32 = table[tok[t]] widened, table (n_rows, dim) of 16-bit
 * values. Returns -1 when some id is outside [0, n_rows) (that row of y is
 * left untouched, the others are written), else 0. */
int ref_embedding16(float *y, const uint16_t *table, const int32_t *tok, int T, int dim, int n_rows,
                    int is_f16);

/* New K/V rows into one layer's 16-bit cache. kc, vc point at slot row0 (the
 * caller added row0 * kvd elements); k, v (rows, kvd) fp32. Row r goes to
 * kc[(len + r) * kvd ...] when len + row0 + r < max_ctx, else it is skipped
 * (never written). */
void ref_kv_store(uint16_t *kc, uint16_t *vc, const float *k, const float *v, int len, int rows,
                  int kvd, int row0, int max_ctx, int is_f16);

/* The bookkeeping step of one iteration (layout: runtime/engine_state.h;
 * the specification of templates/step.cu.tmpl, see kernels/ref/step.c):
 * mode 0 tree_prep, 1 catchup_prep, 2 iter_end. tree_table is 5 * n_nodes
 * int32 (gen_tree_table); the ring of `ring` entries follows the state
 * header; hist (max_ctx entries, mode 2 with has_hist) is never written past
 * its end. Arguments a mode does not use may be NULL. */
void ref_step(int mode, int n_nodes, int ring, int max_ctx, int has_hist, int32_t *state,
              int32_t *iter, int32_t *tree_tokens, int32_t *pos, int32_t *tokens,
              const int32_t *tree_table, int32_t *counts, const int32_t *accept_path,
              const int32_t *emitted, int32_t *hist);

/* Prompt lookup over hist[0..S) (its last token is the root), as
 * rt_drafter_ngram proposes: the longest suffix n-gram, n from max_n down to
 * min_n (n < S), that occurred earlier; its most recent earlier occurrence;
 * the up to n_draft tokens that followed it. out[0..n_draft) gets them, the
 * rest repeat the last proposed token (hist[S-1] when none). Returns how
 * many were proposed (0..n_draft). S >= 1. */
int ref_ngram_lookup(int32_t *out, const int32_t *hist, int S, int min_n, int max_n, int n_draft);

/* SpecDec++ adaptive draft length on a chain tree (node i at depth i), the
 * specification of templates/adapt.cu.tmpl (see kernels/ref/adapt.c): called
 * after draft level `level` drew node level+1's token from draft_probs row
 * level. level 0 first sets go[0..depth) = 1 and *cum = 1. Then, with
 * step = level + 1, *cum = prod_{i=1..level} draft_probs[(i-1)*V +
 * tree_tokens[i]] (computed in double, stored as float) and stop =
 * (1 - cum) > h, forced true at step >= min(max_steps, depth), false at
 * step < min_steps (rt_adaptive_stop). On stop, go[j] = 0 for j >= level
 * (go[j] gates level j+1) and tree_tokens[j] = -1 for j > level+1.
 * draft_probs: (n_nodes, V); go: depth entries. */
void ref_adapt(int level, int n_nodes, int depth, int V, int min_steps, int max_steps, float h,
               int32_t *go, float *cum, int32_t *tree_tokens, const float *draft_probs);

#endif
