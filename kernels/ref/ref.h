/* Plain-C reference ops: the specification every kernel is checked against,
 * one file per op named like its template (templates/X.cu.tmpl ->
 * kernels/ref/X.c), plus the Llama forward's fp32 ops (rmsnorm, attention,
 * matmul, mlp, lm_head, add) and the sampling primitives the verify and
 * tree_expand specifications share (sample.c). Row-major; shapes in comments;
 * no allocation inside an op except where a scratch argument says otherwise.
 * GEMMs are plain loops (the fast ones are the host forward's and the host
 * backend's). This folder includes only kernels/ headers (philox.h, half.h,
 * engine_state.h, the op list ops.def) and the C library: ops that can fail
 * return a negative REF_E* code and, where a `why` argument is given (may be
 * NULL), a static string that says what was wrong; the caller words it. */
#ifndef REF_H
#define REF_H

#include <stddef.h>
#include <stdint.h>

#define REF_EINVAL (-1) /* an argument outside what the op accepts */

/* Tree limits: the tree's (runtime/core/tree.h RT_TREE_MAX_*). */
#define REF_TREE_MAX_NODES 256 /* including the root */
#define REF_TREE_MAX_DEPTH 64

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
/* The same rotation in GPT-NeoX pairing (HF rotate_half, ggml's NEOX mode,
 * Qwen2/Qwen3): pairs (x[i], x[i + rot_dim/2]), i < rot_dim/2; elements from
 * rot_dim on are left as they are. */
void ref_rope_neox(float *x, const int32_t *pos, int T, int n_heads, int head_dim, int rot_dim,
                   const float *inv_freq);

/* The Qwen and Gemma 3 families' per-head steps on one projection (T,
 * n_heads, head_dim), in place: + b (n_heads * head_dim) when b, each head
 * RMS-normalized with w (head_dim) and eps when w, then NeoX RoPE over the
 * whole head when rope, then times scale when scale != 1 (Gemma 3's query
 * scale) (kernels/ref/head_prep.c; templates/head_prep.cu.tmpl). */
void ref_head_prep(float *x, const int32_t *pos, int T, int n_heads, int head_dim, const float *b,
                   const float *w, float eps, int rope, const float *inv_freq, float scale);

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

/* y (n) = gelu_tanh(gate) * up (GeGLU, Gemma's MLP), gelu_tanh(x) = 0.5 x
 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (PyTorch's gelu 'tanh',
 * transformers' gelu_pytorch_tanh). y may alias gate or up. */
void ref_geglu_tanh(float *y, const float *gate, const float *up, size_t n);

/* y (n) = a + b. y may alias a or b. */
void ref_add(float *y, const float *a, const float *b, size_t n);

/* y (T, n_out) = x (T, n_in) @ w^T for w (n_out, n_in), each element summed
 * in fp32 in i order (runtime/model/gemm.h rt_matmul: the same by CBLAS). */
void ref_matmul(float *y, const float *x, const float *w, int T, int n_in, int n_out);

/* out (T, dim) = w_down @ (silu(w_gate @ x) * (w_up @ x)); w_gate, w_up (ffn, dim),
 * w_down (dim, ffn) as for ref_matmul; scratch 2*T*ffn floats. */
void ref_mlp_swiglu(float *out, const float *x, const float *w_gate, const float *w_up,
                    const float *w_down, int T, int dim, int ffn, float *scratch);

/* logits (T, vocab) = rmsnorm(x, norm_w, eps) @ lm_head^T; scratch T*dim floats. */
void ref_lm_head(float *logits, const float *x, const float *norm_w, const float *lm_head, int T,
                 int dim, int vocab, float eps, float *scratch);

/* y, s (T, dim): s = x + r (the next residual; s may alias x or r), then
 * y = rmsnorm(s) * w, row by row (ref_add, then ref_rmsnorm). */
void ref_rmsnorm_residual(float *y, float *s, const float *x, const float *r, const float *w, int T,
                          int dim, float eps);

/* ---- the engine's own small ops (templates embedding16, kv_store, step,
 * ngram_lookup, cast, kv_commit, tree_attention). 16-bit values are raw uint16 bits, bf16 (is_f16 0) or fp16
 * (is_f16 1), converted with kernels/half.h (round to nearest even). */

/* y (T, dim) fp32 = table[tok[t]] widened, times scale (1: exact; Gemma 3:
 * sqrt(dim)), table (n_rows, dim) of 16-bit values; ids in [n_rows, n_ids) (n_ids >= n_rows) give a zero row: the
 * padding rule of a draft whose vocabulary is a prefix of the target's.
 * Returns -1 when some id is outside [0, n_ids) (that row of y is left
 * untouched, the others are written), else 0. */
int ref_embedding16(float *y, const uint16_t *table, const int32_t *tok, int T, int dim, int n_rows,
                    int n_ids, int is_f16, float scale);

/* A block drafter's B input rows (templates/block_embed.cu.tmpl): first
 * sets blk_tok[0] = root and blk_tok[1 .. B] = -1 (B + 1 words). Then for
 * j < B, t = blk_tok[j]: j > 0 and t == -1 (masked) -> y row j = mask_embd
 * row j - 1 (mask_embd (B - 1, dim)); else y row j = tok_embd row t
 * (tok_embd (n_rows, dim)); blk_pos[j] = len + j. All widened as
 * ref_embedding16. Returns -1 when some t (not a masked -1) is outside
 * [0, n_rows) (that row untouched, the others written), else 0. */
int ref_block_embed(float *y, const uint16_t *tok_embd, const uint16_t *mask_embd, int32_t *blk_tok,
                    int32_t root, int32_t *blk_pos, int32_t len, int B, int dim, int n_rows,
                    int is_f16, int first);

/* taps[r, slot * dim + c] = h[r, c] + delta[r, c] (templates/feature_tap):
 * taps (rows, n_taps * dim), h and delta (rows, dim); the other slots are
 * not touched. */
void ref_feature_tap(float *taps, const float *h, const float *delta, int rows, int dim, int n_taps,
                     int slot);

/* The block drafter's S > 1 step (templates/block_unmask.cu.tmpl; the
 * rule of runtime/decode/block_decode.c). blk_tok (B + 1): [0] the anchor,
 * [j] for j = 1..B the token fixed at draft position j - 1 (-1: masked);
 * probs (B, VD): row j - 1 position j's processed distribution. Uniforms
 * sw_uniform_double(seed, iter, node, SW_RNG_DRAFT_SAMPLE).
 * final 0 (after pass `pass` < steps - 1): every masked position j unmasks
 * iff u(256 (pass + 1) + j - 1) < (t_i - t_{i+1}) / t_i with t_i = 1 - i (1
 * - 1e-5) / steps (double), then blk_tok[j] = ref_sample_cdf(row j - 1,
 * u(256 (pass + 1) + 128 + j - 1)) (a one-hot row at T = 0: its argmax).
 * final 1 (after the last pass): a fixed position's row becomes one-hot at
 * its token (SUBS carry-over: probs is then the fixed Z the verifier reads)
 * and every position draws its draft token, blk_tok[j] =
 * ref_sample_cdf(row j - 1, u(j - 1)) (a fixed one keeps its token).
 * REF_EINVAL (nothing written) for B outside 1..128, VD < 1, steps outside
 * 1..16, or final 0 with pass outside 0..steps - 2; else 0. */
int ref_block_unmask(int32_t *blk_tok, float *probs, int B, int VD, int pass, int steps, int final,
                     uint64_t seed, uint32_t iter);
/* ref_block_unmask over a mapped draft vocabulary: d2t (VD) gives draft
 * id i's target id (distinct, >= 0), and blk_tok[1..B] hold target ids
 * (block_embed's inputs): a drawn draft id y is written as d2t[y], and
 * FINAL's one-hot row of a fixed position with target id x is at the draft
 * id i with d2t[i] == x (none: an all-zero row, which draws -1). d2t NULL
 * is ref_block_unmask (draft id = target id). */
int ref_block_unmask_map(int32_t *blk_tok, float *probs, const int32_t *d2t, int B, int VD, int pass,
                         int steps, int final, uint64_t seed, uint32_t iter);

/* A mapped draft vocabulary's q over target ids (templates/q_target.cu.tmpl):
 * out (rows, V)[r][x] = q (rows, VD)[r][t2d[x]] where t2d[x] >= 0, else 0.
 * t2d (V): the draft id of target id x, -1 off the map. REF_EINVAL (nothing
 * written) for rows < 1, VD < 1, V < VD or a t2d entry outside [-1, VD);
 * else 0. */
int ref_q_target(float *out, const float *q, const int32_t *t2d, int rows, int VD, int V);

/* An EAGLE-3 head's layer input (templates/eagle3_in.cu.tmpl; eagle3.c
 * row_in): x2 (rows, 2 dim) 16-bit = [rmsnorm(embd[tok[r]]) * w_in ;
 * rmsnorm(f) * w_hid] with f = feat[feat_row ? feat_row[r] : r] (feat
 * (n_feat, dim) fp32); res (rows, dim) = the second half in fp32 with
 * norm_before_res, else f. embd (n_ids, dim) 16-bit (is_f16: fp16, else
 * bf16); a token outside [0, n_ids) (an absent node) embeds as zeros.
 * tmp: 2 dim floats. REF_EINVAL (nothing written) for a feature row
 * outside [0, n_feat) or sizes < 1. */
int ref_eagle3_in(uint16_t *x2, float *res, const uint16_t *embd, const int32_t *tok, const float *feat,
                  const int32_t *feat_row, const float *w_in, const float *w_hid, int rows, int dim,
                  int n_ids, int n_feat, int is_f16, int norm_before_res, float eps, float *tmp);

/* New K/V rows into one layer's 16-bit cache. kc, vc point at slot row0 (the
 * caller added row0 * kvd elements); k, v (rows, kvd) fp32. Row r goes to
 * kc[(len + r) * kvd ...] when len + row0 + r < max_ctx, else it is skipped
 * (never written). */
void ref_kv_store(uint16_t *kc, uint16_t *vc, const float *k, const float *v, int len, int rows,
                  int kvd, int row0, int max_ctx, int is_f16);

/* The bookkeeping step of one iteration (layout: kernels/engine_state.h;
 * the specification of templates/step.cu.tmpl, see kernels/ref/step.c):
 * mode 0 tree_prep, 1 catchup_prep, 2 iter_end. tree_table is 5 * n_nodes
 * int32 (rt_tree_table); the ring of `ring` entries follows the state
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
/* The same, also writing info[0] = the matched n-gram's length (0: none)
 * and info[1] = the end of its occurrence in hist (-1: none): the drafter's
 * own signal the draft-length controller reads. info may be NULL. */
int ref_ngram_lookup_info(int32_t *out, int32_t *info, const int32_t *hist, int S, int min_n,
                          int max_n, int n_draft);

/* The draft-length controller (ALGORITHMS.txt 12; templates/draft_ctrl.cu.tmpl,
 * kernels/ref/draft_ctrl.c). tokens: the chain's n_draft drafted tokens
 * (tree_tokens + 1), the first K0 present; info: [match length, end]
 * (ngram_lookup); state: the header (reads RT_ST_NOUT and RT_ST_ROOT, writes
 * RT_ST_DRAFTED); ctrl: the per-request words of kernels/engine_state.h
 * (rt_ctrl_word), n_class classes of match length min_n, min_n + 1, ...
 * (the last one: that or longer); cost: n_draft + 1 Q16 words. First folds
 * the previous iteration's outcome into its class's counters (decayed by
 * decay / 65536; an iteration that drafted none with a match: depth 1
 * only, a quarter of a drafted outcome, accepted when the token it emitted,
 * RT_ST_ROOT, was its first proposal), then keeps the first k tokens, k in [0, K0] maximising
 * E[tokens | k] / cost[k] with alpha_j = (A_j + prior_a) / (T_j + prior_w)
 * (Q16; prior1_a, prior1_w for one-token matches, class 0 when min_n is 1),
 * k = 1 when a matched iteration would draft none and the gap-th in a row
 * did (gap: probe, doubled up to probe_max after each draft that got no
 * token accepted, back to probe after one that did; probe 0: never), and
 * marks tokens[k..n_draft) absent (-1). head > 0 (an EAGLE-3 head of head
 * levels behind the lookup): one more class, the head's (its rows after
 * the lookup's, then its probe interval), and cost has n_draft + 1 + head
 * words, cost[n_draft + k] an iteration whose head drafts k levels; the
 * head's k in [1, head] is weighed against the best of the above (prior
 * prior_a, prior_w; ties keep the earlier choice), a chosen head sets k = 0,
 * and the head probes after gap iterations without a lookup draft as the
 * lookup does (its own gap); ctrl[RT_CTRL_HEAD_K] = the head's levels. */
void ref_draft_ctrl(int n_draft, int n_class, int min_n, int head, int probe, int probe_max,
                    int32_t prior_a, int32_t prior_w, int32_t prior1_a, int32_t prior1_w,
                    int32_t decay, int32_t *ctrl, int32_t *tokens, const int32_t *info,
                    int32_t *state, const int32_t *cost);

/* The n-gram-first drafter's pick (templates/draft_pick.cu.tmpl, see
 * kernels/ref/draft_pick.c), after ngram_lookup and the draft-length
 * controller: when tree_tokens[1] is absent (-1) the head drafts hk levels,
 * hk = levels without a controller (ctrl NULL), else ctrl[RT_CTRL_HEAD_K]
 * (clamped to [0, levels]); hk = 0 when node 1 is present. go[j] = j < hk
 * for j < levels (level j's gate); when hk > 0, state[RT_ST_DRAFTED] = hk,
 * else it is left as it was; state[RT_ST_HEAD] = hk > 0. */
void ref_draft_pick(int levels, int32_t *go, const int32_t *tree_tokens, int32_t *state,
                    const int32_t *ctrl);

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

/* Dtype cast of n elements (templates/cast.cu.tmpl): mode 0 f32 -> bf16,
 * 1 f32 -> f16, 2 bf16 -> f32, 3 f16 -> f32 (kernels/half.h; a NaN stays a
 * quiet NaN where the GPU writes 0x7fff). Returns REF_EINVAL for another
 * mode (nothing written), else 0. */
int ref_cast(void *dst, const void *src, size_t n, int mode);

/* Random weights, "timing only" (templates/fill_random.cu.tmpl): element e
 * of buffer `buf` is x = fmaf(a, 2u - 1, c), u = sw_u32_to_uniform(word e % 4
 * of sw_rand_u32x4(seed, (uint32_t)(e / 4), (uint32_t)((e / 4) >> 32),
 * SW_RNG_FILL, buf)) (kernels/philox.h), so x lies in (c - a, c + a); stored
 * as mode REF_FILL_F32 (0), REF_FILL_F16 (1) or REF_FILL_BF16 (2), 16-bit
 * rounded to nearest even (kernels/half.h). REF_EINVAL for another mode. */
enum { REF_FILL_F32 = 0, REF_FILL_F16 = 1, REF_FILL_BF16 = 2 };
int ref_fill_random(void *dst, uint64_t n, int mode, uint64_t seed, uint32_t buf, float a, float c);

/* KV commit of one cache (templates/kv_commit.cu.tmpl): k, v (n_layers,
 * max_ctx, row_bytes); in every layer row *len + keep[i] moves to *len + i
 * for i < n (keep: the accepted node ids along one root-to-leaf path, BFS
 * numbers, so keep[0] = 0 and keep[i] >= i, increasing), in increasing i;
 * then *len += n. */
void ref_kv_commit(void *k, void *v, const int32_t *keep, int n, int32_t *len, int n_layers,
                   int max_ctx, size_t row_bytes);

/* Tree attention over a 16-bit KV cache, exactly (the specification of
 * templates/tree_attention.cu.tmpl, its _part and _merge together, before
 * the output's rounding to 16 bits, which is ref_cast mode 0 / 1).
 *   q (T, n_heads, head_dim), 16-bit; k, v: one layer of the cache,
 *   (n_ctx + n_blk, n_kv_heads, head_dim) rows used, 16-bit: slots 0..n_ctx-1
 *   the context, n_ctx + b block key b; the T queries are the LAST T of the
 *   n_blk block entries. Visibility of block key b to query t: mask NULL,
 *   causal (b <= n_blk - T + t); else bit b % 64 of word b / 64 of row t of
 *   mask (T rows of mask_words uint64). Context keys are always visible.
 *   out (T, n_heads, head_dim) fp32. Head h reads kv head h / (n_heads /
 *   n_kv_heads). Per (query, head): keys and values widened to fp32, scores
 *   q.k summed in fp32 in index order times the fp32 1/sqrtf(head_dim),
 *   softmax weights exp(s - max) and the weighted sum of V in double, out =
 *   acc / den rounded to fp32; a query that sees no key gets zeros.
 * scratch: ref_tree_attention_scratch(n_ctx, n_blk, head_dim) bytes,
 * 8-byte aligned (malloc's). */
size_t ref_tree_attention_scratch(int n_ctx, int n_blk, int head_dim);
void ref_tree_attention(float *out, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                        int n_ctx, int T, int n_blk, int n_heads, int n_kv_heads, int head_dim,
                        const uint64_t *mask, int mask_words, int is_f16, void *scratch);
/* The same with a sliding window (WINDOW of the template; 0: none, as
 * ref_tree_attention): query t sits at position n_ctx + depth(t), depth =
 * the number of block keys its row sees minus 1 (causal: n_blk - T + t),
 * and sees context slot j only when n_ctx + depth(t) - j < window (block
 * keys as above: the callers keep window >= n_blk). */
void ref_tree_attention_window(float *out, const uint16_t *q, const uint16_t *k,
                               const uint16_t *v, int n_ctx, int T, int n_blk, int n_heads,
                               int n_kv_heads, int head_dim, const uint64_t *mask, int mask_words,
                               int is_f16, int window, void *scratch);
/* query t's depth below the block's first key: popcount(row t) - 1, or
 * n_blk - T + t without a mask */
int ref_tree_depth(const uint64_t *mask, int mask_words, int T, int n_blk, int t);

/* ---- sampling, expansion and verification (templates argmax,
 * logits_process, tree_expand, verify). p = target, q = draft
 * distributions, both already processed (logits_process). Uniforms are
 * Philox draws (kernels/philox.h) keyed as each function says; the GPU
 * kernels reproduce the keying bit for bit. ---- */

/* First index of the maximum of x[0..n) (strict >, scanning up: ties to the
 * lower index; NaN never wins). */
int ref_argmax_row(const float *x, int n);
/* out[t] = ref_argmax_row(x + t * N, N), x (T, N). */
void ref_argmax(int32_t *out, const float *x, int T, int N);

/* idx[0 .. n) sorted by keys[idx] descending, ties by index ascending: the
 * total order logits_process truncates by (kernels/ref/logits_process.c) */
void ref_sort_desc(int *idx, int n, const float *keys);
/* probs (V) = softmax(F(logits / temp)) with F = the top-k mask (top_k > 0
 * and < V) then the top-p mask (top_p < 1) (ALGORITHMS.txt 1c); temp <= 0 or
 * NaN: one-hot at ref_argmax_row(logits). The kept set is a prefix of the total
 * order "logit descending, ties by index": top-k keeps the first top_k; top-p
 * keeps token r (in that order) while the mass before it, over the top-k
 * survivors' total, is <= top_p (the first is always kept). Weights are
 * expf((logit - max) * (1 / temp)) in fp32; sums in double; the kept
 * weights are scaled by (float)(1 / sum). idx: scratch of V ints.
 * Thread-safe (the sort's key pointer is thread-local). */
void ref_logits_process_row(float *probs, const float *logits, int V, float temp, int top_k,
                            float top_p, int *idx);
/* The op: T rows of V (templates/logits_process.cu.tmpl). */
void ref_logits_process(float *probs, const float *logits, int T, int V, float temp, int top_k,
                        float top_p, int *idx);

/* Inverse CDF over unnormalised non-negative weights w: the first i with
 * cumsum(w)[i] > u * sum(w) and w[i] > 0, sums in double in index order;
 * u in [0,1). -1 when sum(w) == 0; if rounding selects nothing, the last
 * index with w > 0. */
int ref_sample_cdf(const float *w, int V, double u);
/* Samples from norm(relu(p - q)) by ref_sample_cdf; q == NULL means one-hot
 * at q_tok. Falls back to ref_sample_cdf(p, V, u) when the residual has no
 * mass. tmp: V floats. */
int ref_sample_residual(const float *p, const float *q, int32_t q_tok, int V, double u, float *tmp);

/* The tree table the tree_expand and verify kernels read (rt_tree_table of
 * runtime/core/tree.h): 5 rows of n_nodes int32 — parent (-1 for the
 * root), n_children, child_start, child_list, depth; the children of u are
 * child_list[child_start[u] + r], r the rank. Checks it describes a tree
 * with n_nodes in 1..REF_TREE_MAX_NODES: every node u >= 1 has a parent
 * p < u, depth[p] + 1 <= REF_TREE_MAX_DEPTH, and appears exactly once in
 * p's child list; every listed child is in range and names u as its parent;
 * depth[0] = 0. 0 or REF_EINVAL (with why). */
int ref_tree_table_check(const int32_t *tree, int n_nodes, const char **why);

/* Expansion rules and verification methods (runtime/core/tree_rules.h
 * names them RT_EXPAND_* / RT_VERIFY_* with these values). */
enum ref_expand_rule {
	REF_EXPAND_TOPK = 0,   /* deterministic: child r = r-th most likely token (ties: lower id) */
	REF_EXPAND_SAMPLE,     /* i.i.d. samples from q (with replacement) */
	REF_EXPAND_SAMPLE_WOR, /* without replacement: exponential-race top-k, order = sampling order */
	REF_EXPAND_SPECHUB,    /* SpecHub pair (2 children): hub a = argmax q, ALGORITHMS.txt 4 */
};

enum ref_verify_method {
	REF_VERIFY_GREEDY = 0, /* longest path matching the target argmax (T = 0) */
	REF_VERIFY_RRS,        /* recursive rejection sampling with replacement (SpecInfer) */
	REF_VERIFY_RRSW,       /* RRS without replacement (Jeon/MCSD/Sequoia) */
	REF_VERIFY_SPECHUB,    /* SpecHub on nodes with 2 children, plain RS on 1 child */
	REF_VERIFY_ONEHOT,     /* deterministic drafts: q = one-hot per child (item 1c) */
	REF_VERIFY_CHAIN,      /* a chain with rt_verify_chain's keying (the verify kernel's METHOD 5) */
};

/* Draws k children for a node from its draft distribution q (V floats, sums
 * to 1); tok[0..k) in rank order. Uniform keying: the uniform for lane L is
 *   w = philox4x32_10(ctr = {iter, node, purpose, L}, key = seed),
 *   u = sw_u64_to_uniform_double(w[0], w[1])
 * (lane 0 is sw_uniform_double(seed, iter, node, purpose)).
 *   TOPK:       no uniforms; descending q, ties to the lower id.
 *   SAMPLE:     draw i uses lane i, purpose SW_RNG_EXPAND, then
 *               ref_sample_cdf(q, V, u).
 *   SAMPLE_WOR: lane v (the vocabulary id), purpose SW_RNG_EXPAND, for each v
 *               with q(v) > 0; key(v) = log(u_v) / (double)q(v); the k
 *               largest keys in descending order (ties: lower id first).
 *   SPECHUB:    lane v, purpose SW_RNG_SPECHUB2, same keys; a =
 *               ref_argmax_row(q); tok[0] = largest key; tok[1] = a if
 *               tok[0] != a, else the largest key among v != a.
 * Absent children: where no candidate is left for child i (TOPK /
 * SAMPLE_WOR: fewer than k tokens with q > 0; SPECHUB: no token but the hub
 * a has q > 0, then tok = (a, -1); any rule: q without mass, no q > 0 at
 * all, NaN included) tok[i] = -1, after the present children, which keep
 * their draws (the same uniforms as with a full support). Verification
 * never tests an absent child, and the drafting stays exact: draws without
 * replacement from an exhausted support are just fewer children.
 * Returns 0, or REF_EINVAL when k is outside [0, REF_TREE_MAX_NODES),
 * V < 1, the rule is unknown, or k > 2 for SPECHUB. */
int ref_expand_node(int rule, const float *q, int V, int k, uint64_t seed, uint32_t iter,
                    uint32_t node, int32_t *tok, const char **why);
/* The same over a mapped draft vocabulary: q (V entries) with entry v
 * standing for the id ids[v] (a head's d2t: distinct target ids, which the
 * loader checks; NULL: ids[v] = v, ref_expand_node). Every id a rule uses
 * is ids[v]: tok holds ids, the lanes (SAMPLE_WOR, SPECHUB) are ids, ties
 * (TOPK, SAMPLE_WOR, the hub and the keys of SPECHUB) go to the lower id.
 * So TOPK, SAMPLE_WOR and SPECHUB draw exactly what ref_expand_node draws
 * from q scattered onto the ids (0 elsewhere, ref_q_target) whatever the
 * map's order; SAMPLE draws lane i's inverse CDF in entry order, the same
 * child when ids ascend. REF_EINVAL also for a negative id. */
int ref_expand_node_map(int rule, const float *q, const int32_t *ids, int V, int k, uint64_t seed,
                        uint32_t iter, uint32_t node, int32_t *tok, const char **why);

/* The op (templates/tree_expand.cu.tmpl): nodes u = level_begin ..
 * level_begin + n_level - 1 of the tree table (n_nodes) each expand into
 * their n_children[u] children with ref_expand_node(rule, q + u * V, ...,
 * node u), writing tok[child]. q (n_nodes, V). A node u > 0 whose own token
 * tok[u] is negative (absent: its parent ran out of candidates) gets absent
 * children (-1) and its q row is not read (its draft forward ran on no
 * token). 0 or REF_EINVAL (a bad table or level range, or a node's
 * expansion refused; the nodes before it are written). */
int ref_tree_expand(int32_t *tok, const float *q, const int32_t *tree, uint64_t seed, uint32_t iter,
                    int n_nodes, int V, int rule, int level_begin, int n_level, const char **why);
/* The same with the template's Q_BY_DEPTH: q_by_depth 1 expands node u
 * from q row depth(u) (the tree table's depth row) instead of row u, q
 * then (depth_max, V): a block drafter's Cartesian tree, one q per level.
 * The node's uniforms stay keyed by u. ref_tree_expand is q_by_depth 0. */
int ref_tree_expand_q(int32_t *tok, const float *q, const int32_t *tree, uint64_t seed,
                      uint32_t iter, int n_nodes, int V, int rule, int level_begin, int n_level,
                      int q_by_depth, const char **why);
/* The template's MAPPED 1: ref_tree_expand_q with ref_expand_node_map's
 * ids (V of them: q rows of V draft entries, children written as ids; a
 * node's own token, read for absence, is an id too). ids NULL is
 * ref_tree_expand_q. */
int ref_tree_expand_map(int32_t *tok, const float *q, const int32_t *ids, const int32_t *tree,
                        uint64_t seed, uint32_t iter, int n_nodes, int V, int rule,
                        int level_begin, int n_level, int q_by_depth, const char **why);

/* Verifies a drafted tree (tree table of n_nodes, ref_tree_table_check).
 *   tok (n):   tok[0] = root token, tok[u] = node u's token
 *   p (n, V):  the target's processed distribution after node u's path
 *   q (n, V):  the draft distribution u's children were drawn from (before
 *              any without-replacement removal); unused by GREEDY/ONEHOT
 *              (may be NULL for them); CHAIN: NULL = a one-hot draft
 * Walks from the root testing children in rank order with the method's rule
 * (ALGORITHMS.txt 1c, 2, 3, 4). Writes path[0..n_path) (path[0] = 0, the
 * root), *final (the residual / bonus token), and, when acc_rank is not
 * NULL, acc_rank[d] = the rank of the child accepted at the step from depth
 * d, for d < n_path - 1. Returns n_path (accepted draft nodes + 1, at most
 * REF_TREE_MAX_DEPTH + 1) or REF_EINVAL.
 * Absent nodes: a node whose token is negative was not drafted (SpecDec++
 * stopped before its level; the adapt kernel writes -1). It is never
 * tested and updates no residual or draft distribution; the present
 * children keep their rank order; a node whose children are all absent is
 * a leaf (bonus from its p; GREEDY: the path ends there, final = argmax of
 * its p); a SpecHub pair with one absent child is plain RS on the other.
 * Uniform keying (all sw_uniform_double, lane 0):
 *   the accept test of child c:          (seed, iter, c, SW_RNG_ACCEPT),
 *     accepted iff q > 0 and u * q <= p in double (q, p: the method's
 *     current draft/residual values; ONEHOT: q = 1; SpecHub's second tests
 *     are u * S_ia <= ra and u * S_ai <= p(a), keyed by the child tested);
 *   the residual or bonus draw at the node u where the walk stops:
 *                                        (seed, iter, u, SW_RNG_RESIDUAL),
 *     then ref_sample_cdf over the (normalised) residual, or over p_u at a
 *     leaf. A residual with no mass falls back to the distribution it was
 *     computed from (p itself up to rounding).
 * GREEDY takes the deepest node whose whole path matches the argmax of its
 * parent's p (ties: lowest node id) and final = argmax of that node's p.
 * CHAIN follows first children only, keyed by the node u being left (the
 * position j of rt_verify_chain): accept child c with token y iff q_u(y) > 0
 * and u_(u, ACCEPT) * q_u(y) <= p_u(y) (q_u(y) = 1 one-hot); a rejection
 * emits ref_sample_residual(p_u, q_u, y, u_(u, RESIDUAL)); a node without
 * children, or whose first child is absent, emits ref_sample_cdf(p_u,
 * u_(u, BONUS)).
 * REF_EINVAL: an unknown method, V < 1, a bad table, a token >= V, q == NULL
 * for RRS / RRSW / SPECHUB, for SPECHUB a node with > 2 children or a
 * 2-child node with both children present that is not a SpecHub pair
 * (exactly one child the hub argmax q, the other child with q > 0), checked
 * for every node up front; or no mass to draw the final token from.
 * scratch: 2*V floats. */
int ref_verify_tree(int method, const int32_t *tree, int n_nodes, const int32_t *tok, const float *p,
                    const float *q, int V, uint64_t seed, uint32_t iter, float *scratch,
                    int32_t *path, int32_t *acc_rank, int32_t *final, const char **why);

/* ref_verify_tree with a draft whose vocabulary is the first Vq ids of the
 * target's (1 <= Vq <= V): q rows of Vq entries, q = 0 beyond, exactly the
 * same as q padded by zeros to V (REF_EINVAL for another Vq). */
int ref_verify_tree_vq(int method, const int32_t *tree, int n_nodes, const int32_t *tok,
                       const float *p, const float *q, int V, int Vq, uint64_t seed, uint32_t iter,
                       float *scratch, int32_t *path, int32_t *acc_rank, int32_t *final,
                       const char **why);
/* ref_verify_tree_vq with q_by_depth: 1 reads node u's draft distribution
 * from q row depth(u) (tree table's depth row), q (depth_max, Vq); 0 is
 * ref_verify_tree_vq. Exactly ref_verify_tree_vq on q materialised per node
 * (row u = row depth(u)). */
int ref_verify_tree_vqd(int method, const int32_t *tree, int n_nodes, const int32_t *tok,
                        const float *p, const float *q, int V, int Vq, int q_by_depth,
                        uint64_t seed, uint32_t iter, float *scratch, int32_t *path,
                        int32_t *acc_rank, int32_t *final, const char **why);

/* The op (templates/verify.cu.tmpl): ref_verify_tree_vq, then out_path[0..n)
 * = the path, out_tok[0..n) = the accepted nodes' tokens then the final
 * token, counts[0] = n - 1 (accepted draft tokens), [1] = n (emitted), [2] =
 * final, [3] += n - 1, [4] += n - 1. 0 or REF_EINVAL (outputs untouched). */
int ref_verify(int32_t *out_path, int32_t *out_tok, int32_t *counts, const int32_t *tree,
               const int32_t *tok, const float *p, const float *q, float *scratch, uint64_t seed,
               uint32_t iter, int n_nodes, int V, int Vq, int method, const char **why);
/* The verify op's input checks, in the reference's order (method, vocabulary,
 * draft vocabulary, tree table, q present where the method reads it, drafted
 * tokens in range): 0, or REF_EINVAL with *why set. */
int ref_verify_check(int method, const int32_t *tree, int n, const int32_t *tok, const float *q,
                     int V, int Vq, const char **why);
/* The verify op's outputs from an accepted path path[0..n) (node ids, path[0] = 0) and its
 * final token fin: out_path, out_tok (the n - 1 accepted drafts, then fin) and counts
 * (0: accepted, 1: emitted, 2: fin, 3 and 4: running totals of accepted). */
void ref_verify_emit(int32_t *out_path, int32_t *out_tok, int32_t *counts, const int32_t *path,
                     int n, const int32_t *tok, int32_t fin);

/* The op with the template's Q_BY_DEPTH (ref_verify_tree_vqd); ref_verify
 * is q_by_depth 0. */
int ref_verify_q(int32_t *out_path, int32_t *out_tok, int32_t *counts, const int32_t *tree,
                 const int32_t *tok, const float *p, const float *q, float *scratch, uint64_t seed,
                 uint32_t iter, int n_nodes, int V, int Vq, int method, int q_by_depth,
                 const char **why);

/* ---- GGUF-typed GEMM weights on the GPU (templates quant_a8, gemv_gguf).
 *
 * Activations: A (M, K) fp16 rounded to int8 per row and block of 32 by the
 * host's int8 GEMMs' rule (runtime/device/host_gemm.h hg_a8_quant, bias 0):
 * amax = max |a| over the block, da = amax / 127, q = rint(a * (1 / da))
 * (to nearest even, within -127..127); a block holding inf or NaN gets da =
 * NaN and q = 0, an all-zero one (or amax < 127 FLT_MIN) da = 0, q = 0.
 * The buffer a8: q (M, K) int8, then da (M, K / 32) fp32, then s (M, K /
 * 32) int32 whose low and high 16 bits are the int16 sums of q over the
 * block's elements 0..15 and 16..31. K a multiple of 32 (else REF_EINVAL). */
#define REF_A8_QK 32
int ref_quant_a8(void *a8, const uint16_t *A, int M, int K);

/* ---- a layer's small ops fused with their neighbours (issue 37): each is
 * the composition of the references above that the unfused ops run, so an
 * engine's numbers do not depend on the fusion. */

/* Residual add + RMSNorm into the next GEMM's 16-bit input
 * (templates/rmsnorm_cast.cu.tmpl): s = x + r, y = rmsnorm(s) * w rounded to
 * bf16 (is_f16 0) or fp16 (is_f16 1), row by row (ref_rmsnorm_residual,
 * then ref_cast); with a8 non-NULL also ref_quant_a8 of the fp16 rows (T,
 * dim) into a8 (dim a multiple of 32, else REF_EINVAL, nothing written).
 * tmp: dim floats. s may alias x or r. */
int ref_rmsnorm_cast(uint16_t *y, float *s, const float *x, const float *r, const float *w,
                     void *a8, int T, int dim, float eps, int is_f16, float *tmp);

/* SwiGLU (act 0) or GeGLU (act 1) into the next GEMM's 16-bit input
 * (templates/swiglu_cast.cu.tmpl): y (T, ffn) = act(gate) * up rounded to
 * bf16 / fp16 (ref_swiglu or ref_geglu_tanh, then ref_cast); row t of
 * gate and of up at t * ld floats (ld = ffn, or 2 ffn where one GEMM wrote
 * both: up = gate + ffn); with a8 non-NULL also ref_quant_a8 of y (ffn a
 * multiple of 32, else REF_EINVAL, nothing written). tmp: ffn floats. */
int ref_swiglu_cast(uint16_t *y, const float *gate, const float *up, void *a8, int T, int ffn,
                    int ld, int act, int is_f16, float *tmp);

/* The q/k/v rows of a forward into attention's inputs
 * (templates/qkv_rope.cu.tmpl): the family's per-head steps on q and k
 * (bias, per-head RMSNorm, RoPE: ref_head_prep; or Llama's adjacent-pair
 * ref_rope), q times scale, then q rounded to 16 bits into q16 (T,
 * n_heads * head_dim) and k, v (v: + its bias) stored as ref_kv_store
 * stores them (kc, vc at slot row0; rows at len + row0 + t >= max_ctx
 * skipped). q, k, v: row t at t * ldq, t * ldkv floats (one GEMM's q|k|v
 * rows: ldq = ldkv = (n_heads + 2 n_kv_heads) head_dim). */
enum { REF_ROPE_NONE = 0, REF_ROPE_ADJACENT = 1, REF_ROPE_NEOX = 2 };
typedef struct ref_qkv_shape {
	int T, n_heads, n_kv_heads, head_dim;
	int64_t ldq, ldkv;
	int row0, max_ctx, is_f16;
	int bias;    /* bq, bk, bv added (Qwen2) */
	int norm;    /* q and k heads RMS-normalized with qn, kn (head_dim each) and eps */
	int rope;    /* REF_ROPE_*: adjacent needs bias 0, norm 0, scale 1 */
	float eps, scale;
} ref_qkv_shape;
/* tmp: (n_heads + n_kv_heads) head_dim floats. REF_EINVAL (nothing
 * written) for a shape the steps do not take (an odd head_dim with rope,
 * adjacent pairs with a bias, norm or scale, a bias with a norm: the
 * kernel takes one weight argument a projection). */
int ref_qkv_rope(const ref_qkv_shape *sh, uint16_t *q16, uint16_t *kc, uint16_t *vc, const float *q,
                 const float *k, const float *v, const int32_t *pos, const float *inv_freq, int len,
                 const float *bq, const float *bk, const float *bv, const float *qn,
                 const float *kn, float *tmp);

/* Weight types, ggml's numbers (runtime/core/wformat.h SW_WT_*). */
enum { REF_WT_Q4_0 = 2, REF_WT_Q4_1 = 3, REF_WT_Q5_0 = 6, REF_WT_Q8_0 = 8, REF_WT_Q4_K = 12,
       REF_WT_Q6_K = 14 };

/* The planes: W (n, k) of one of these types, repacked at load from the
 * file's blocks (runtime/engine/weights_gguf.h rt_wplanes_repack) into the
 * same number of bytes, scales and quants apart so that a warp's lanes read
 * consecutive 16-byte lines (lane j: 32-element sub-block j of a group of
 * 32). nb = n k / 32 sub-blocks, ns = n k / 256 super-blocks (K-quants);
 * sub-block i = r (k / 32) + b of row r, super-block s = r (k / 256) + b / 8.
 * Plane 0, the quants, at 0:
 *   Q4_0, Q4_1, Q5_0, Q4_K, Q6_K: 16 bytes a sub-block at 16 i; byte t
 *     holds element t's low 4 bits in its low nibble, element t + 16's in
 *     its high (the file's Q4_0/Q4_1/Q5_0 qs as they are; Q4_K's and Q6_K's
 *     moved there from their 64- and 128-element groups);
 *   Q8_0: row r's 32 bytes a sub-block in groups g of 32 sub-blocks (u =
 *     min(32, k / 32 - 32 g) of them): element t of sub-block b = 32 g + j
 *     at r (k / 32) 32 + 1024 g + 16 u (t / 16) + 16 j + t % 16.
 * Plane 1, the scales, at off[1] = 16 nb (Q8_0: 32 nb):
 *   Q4_0, Q8_0: fp16 d at 2 i; Q4_1: fp16 d, m at 4 i; Q5_0 (at off[1] =
 *     20 nb, after its plane 2): fp16 d at 2 i;
 *   Q4_K: the file block's first 16 bytes (d, dmin, scales[12]) at 16 s;
 *   Q6_K: the file's int8 scales[16] at 16 s.
 * Q6_K's plane 2 at off[2] = off[1] + 16 ns, the high 2 bits: 8 bytes at
 * 8 i, two little-endian words; word x, byte j, bits 2 t .. 2 t + 1 =
 * element 16 x + 4 t + j's bits 4..5; plane 3 at off[3] = off[2] + 8 nb:
 * fp16 d at 2 s. Q5_0's plane 2 at off[2] = 16 nb, each element's bit 4:
 * a little-endian word at 4 i, byte j, bit x (0..3) = element 4 x + j's,
 * bit 4 + x = element 16 + 4 x + j's (so that (h >> x) & 0x01010101 is
 * the high bits of the bytes of the quants' word x). off[REF_WPLANES - 1]
 * is the end (the file's bytes).
 * Weights: Q4_0 d (q - 8), Q4_1 d q + m, Q5_0 d (q - 16), Q8_0 d q, Q4_K d sc_j q - dmin m_j
 * (j = b % 8), Q6_K d sc_(t / 16) (q - 32), each dequantized in the format
 * table's operation order (runtime/core/wformat.c), so that a repack's
 * planes give the file's values bit for bit. */
#define REF_WPLANES 5
/* Elements of one block of wtype's file format (32 or 256); 0 for a type
 * without planes. */
int ref_wplanes_block(int wtype);
/* The planes' offsets (off[REF_WPLANES - 1] the end; -1 where a type has no
 * such plane); REF_EINVAL for another type or k not whole blocks. */
int ref_wplanes_layout(int wtype, int64_t n, int64_t k, int64_t off[REF_WPLANES]);
/* Row row of W's planes dequantized into y (k floats). */
int ref_wplanes_dequant_row(float *y, const void *W, int wtype, int64_t n, int64_t k, int64_t row);
/* C (M, N) fp32 = the int8 rows a8 (ref_quant_a8 of A (M, K)) times the
 * first N rows of W (NW, K) in its planes: per output, over the sub-blocks b in order from acc = 0,
 *   isum = sum q a - z asum        (Q4_0 z 8, Q5_0 z 16; Q4_1, Q8_0, Q4_K z 0)
 *   acc  = fmaf((float)isum, da_b * d, acc)           (da_b * d one rounding)
 *   acc  = fmaf(mn, da_b * (float)asum, acc)          (Q4_1 m, Q4_K -dmin m_j)
 * Q6_K: isum = sc_0 (sum_(t<16) q a - 32 asum_0) + sc_1 (sum_(t>=16) ... -
 * 32 asum_1), acc = fmaf((float)isum, da_b * d, acc). These are the host
 * GEMM's integers, products and order (hg_gemm_gguf_a8 on the file's
 * blocks gives these bits). REF_EINVAL for a bad type or shape. */
int ref_gemv_gguf(float *C, const void *a8, const void *W, int M, int N, int NW, int K, int wtype);
/* The same, and mag (M, N): each output's sum over its terms of |(float)isum
 * (da_b d)| (+ |mn (da_b asum)|), in double: what another summation order
 * (the kernel's) changes the result by at most gamma_depth times. */
int ref_gemv_gguf_mag(float *C, double *mag, const void *a8, const void *W, int M, int N, int NW,
                      int K, int wtype);

/* The token embedding from a GGUF-typed table (templates/embedding_gguf):
 * y (T, dim) fp32 = row tok[t] of W (n_rows, dim) in wtype's planes,
 * dequantized as ref_wplanes_dequant_row (the file's values), then times
 * scale when scale != 1 (Gemma 3: sqrt(dim); one fp32 multiply). Ids in
 * [n_rows, n_ids) give a zero row and an id outside [0, n_ids) leaves its
 * row untouched, as ref_embedding16. REF_EINVAL (nothing written) for a
 * type without planes, dim not whole blocks or n_ids < n_rows; 1 when
 * some id was outside [0, n_ids) (the other rows written); else 0. */
int ref_embedding_gguf(float *y, const void *W, const int32_t *tok, int T, int dim, int n_rows,
                       int n_ids, int wtype, float scale);

/* ---- 16-bit GEMM weights on the GPU (template gemv16): C (M, N) fp32 =
 * A (M, K) W (N, K)^T, A and W fp16 (is_f16 1) or bf16 (0) bits, K a
 * multiple of 8, in the kernel's fixed order: chunk c is elements 8c ..
 * 8c+7; slot s of the 32 ks slots (lane s % 32 of warp s / 32 of the K
 * split) sums chunks s, s + 32 ks, ... in order, each element one
 * acc = fmaf(a, w, acc) from +0; the output is +0 plus the slots in order
 * (fp32 additions). Every product is exact in fp32 (two 11- or 8-bit
 * significands), so each step is one rounding: depth ceil(K / (256 ks)) 8
 * + 32 ks against sum |a w|. REF_EINVAL for M, N < 1, K not a positive
 * multiple of 8, ks outside 1..32. */
int ref_gemv16(float *C, const uint16_t *A, const uint16_t *W, int M, int N, int K, int is_f16,
               int ks);
/* The same, and mag (M, N): sum |a w| of each output in double. */
int ref_gemv16_mag(float *C, double *mag, const uint16_t *A, const uint16_t *W, int M, int N, int K,
                   int is_f16, int ks);

/* Each row of kernels/ops.def names the function above that specifies its
 * op: a row whose ref is not declared here does not compile. */
#define SW_OP(name, n_args, philox, ref, planned) \
	_Static_assert(sizeof(&ref) != 0, "kernels/ops.def: " #name "'s specification " #ref);
#include "kernels/ops.def"
#undef SW_OP

#endif
