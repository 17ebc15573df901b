/* Drafting with a block drafter (runtime/model/block_drafter.h) on the host,
 * exactly (ALGORITHMS.txt 1a, 1c, 7, 8):
 *   chain, S = 1 (ParallelSpec/DFlash): one pass gives q_1..q_B; x_j ~ q_j
 *     independently. Exact under the chain rule because q_j depends on no
 *     drafted token.
 *   chain, S > 1 (SpecDiff/MDLM ddpm_cache, log-linear schedule
 *     t_i = linspace(1, 1e-5, S+1)): passes 1..S-1 unmask each still-masked
 *     position with probability (t_i - t_{i+1}) / t_i and draw its token
 *     from that pass's distribution; those tokens are inputs only. The last
 *     pass's output is the fixed Z (SUBS carry-over: a position unmasked
 *     earlier is one-hot on its token) and every draft token is drawn from
 *     Z independently (option (a) of ALGORITHMS.txt 8). The naive rule (each
 *     token verified against the pass that unmasked it) is biased at T > 0
 *     and is not offered.
 *   Cartesian tree (ParallelSpec): depth d expanded from row d of one pass,
 *     by top-k (verified one-hot at T > 0, greedy at T = 0) or sampling with
 *     / without replacement (RRS / RRSW), rt_generate_tree_block; a chain
 *     tree with S > 1 expands from Z's rows (the engine's way).
 * The draft samples from softmax(z / T) over the draft vocabulary with the
 * target's top-k / top-p (q is what the tokens were drawn from; 1c), q = 0
 * beyond Vd. Randomness: Philox keyed (seed, iter, node, SW_RNG_DRAFT_SAMPLE)
 * with node j for the final draws and 256 (i + 1) + j / + 128 + j for pass
 * i's unmask coin / token: independent of the verification uniforms. */
#ifndef RT_BLOCK_DECODE_H
#define RT_BLOCK_DECODE_H

#include "acchead.h"
#include "chain.h"
#include "model/block_drafter.h"
#include "core/tree.h"

/* A chain drafter over bd. features: sets the taps on tc (the target context
 * the decoding loop verifies with; it must be empty) and reads the committed
 * positions' states from it. steps S in [1, 16]. Proposes min(gamma, B)
 * tokens per round, S drafter passes. */
rt_drafter *rt_drafter_block(const rt_block_drafter *bd, rt_ctx *tc, int steps, sw_err *err);
bool rt_drafter_is_block(const rt_drafter *d);
/* SpecDec++ stop rule on the block (proxy predictor only: q_j of the drawn
 * token, at T = 0 the softmax at T = 1): the round is cut after the first
 * step where the rule stops. Exact: the cut depends on draft values only. */
int rt_block_set_adaptive(rt_drafter *d, const rt_adaptive *a, sw_err *err);

/* Drafts a static tree: node u at depth d gets its children by `rule` from
 * q_d, the same for every node of depth d. steps = 1: one pass, q_d = row d
 * warped by the draft sampling sd. steps > 1 (chains only): the chain
 * drafter's S passes and unmask steps at the request's sampling s (same
 * keys), q_d = row d of the fixed Z (the last pass at s, one-hot on a
 * position unmasked earlier), exactly what the engine's block_unmask
 * FINAL=1 leaves for tree_expand; the tokens are then drawn by `rule` with
 * the tree decoder's keys (node u, SW_RNG_EXPAND), not the chain drafter's
 * (exact either way: q = Z, ALGORITHMS.txt 8 (a)). tok (n): tok[0] =
 * hist[n_hist-1]; q (n, V): row u = the distribution u's children were
 * drawn from. Depth must be <= B. */
int rt_block_draft_tree(rt_drafter *d, const rt_tree *t, int rule, const rt_sampling *sd, const rt_sampling *s,
                        uint64_t seed, uint32_t iter, const int32_t *hist, int n_hist, int32_t *tok, float *q,
                        sw_err *err);

const rt_block_drafter *rt_block_drafter_of(const rt_drafter *d);

/* The S > 1 rule's two pieces on given logits (the drafter pass left out),
 * as the chain drafter runs them; the engine's block_unmask kernel
 * (kernels/ref ref_block_unmask) is tested against them.
 * rt_block_unmask_step: after pass i < S - 1 with logits (B, Vd), each
 * still-masked position j (fixed[j] < 0) unmasks with its coin and takes
 * its token (greedy s: the argmax). row: Vd floats, idx: Vd ints scratch.
 * rt_block_final_draw: draft token j from the last pass's row lg (Vd): a
 * fixed one (fixed_j >= 0) keeps it and qj (V, may be NULL) is one-hot;
 * greedy s: the argmax (qj not written); else qj = the processed row, zero
 * beyond Vd, and the token its draw. idx: Vd ints. */
void rt_block_unmask_step(int i, int S, int B, int Vd, const float *logits, const rt_sampling *s,
                          uint64_t seed, uint32_t iter, int32_t *fixed, float *row, int *idx);
int32_t rt_block_final_draw(int j, int32_t fixed_j, const float *lg, int Vd, int V, const rt_sampling *s,
                            uint64_t seed, uint32_t iter, float *qj, int *idx);

/* Tree speculative decoding (rt_generate_tree, tree_decode.c) with the tree
 * drafted by block drafter d (rt_block_draft_tree: one pass, or S > 1 on a
 * chain): the host reference of a block-drafter engine. At T = 0 the
 * expansion is top-k and the verification greedy, whatever tcfg says. */
int rt_generate_tree_block(rt_ctx *tc, rt_drafter *d, const rt_tree_cfg *tcfg, const int32_t *prompt,
                           int n_prompt, const rt_gen_cfg *cfg, int32_t *out, rt_stats *st, sw_err *err);

#endif
