/* Drafting with an EAGLE-3 head (runtime/model/eagle3.h) on the host,
 * exactly (ALGORITHMS.txt 1a, 1c, 11):
 *   chain: step 1 from the anchor row (committed: the target's tapped states
 *     before the anchor and the anchor token), step j > 1 from the row
 *     (step j-1's output, x_{j-1}); x_j ~ q_j. q_j depends on the prefix and
 *     the drafts before j only, so the chain verifies exactly with 1a.
 *   tree (a static tree, rt_generate_tree_drafter): level by level, node u's
 *     row (its parent's output, its token) at position anchor + depth(u) - 1
 *     seeing the committed rows and its ancestors' rows; u's children drawn
 *     from q_u by the tree's rule (top-k verified one-hot at T > 0 and
 *     greedy at T = 0; sampled with RRS / RRSW using q_u).
 * q over the target's ids is the head's distribution over its Vd draft ids
 * (softmax(z / T) with the sampling's top-k / top-p applied over the draft
 * ids) scattered through d2t, 0 elsewhere; verification stays over all V
 * ids. Randomness: chain draws Philox (seed, iter, j, SW_RNG_DRAFT_SAMPLE);
 * tree children the tree decoder's keys (node u, SW_RNG_EXPAND). */
#ifndef RT_EAGLE3_DRAFT_H
#define RT_EAGLE3_DRAFT_H

#include "chain.h"
#include "model/eagle3.h"

/* A drafter over head h: sets h's taps on tc (the target context the
 * decoding loop verifies with; it must be empty) and reads the committed
 * positions' tapped states from it. max_rows: staged rows a round (the
 * chain's gamma - 1, a tree's nodes), at least 1. Proposes up to gamma
 * tokens a chain round; drafts trees through its draft_tree op. */
rt_drafter *rt_drafter_eagle3(const rt_eagle3 *h, rt_ctx *tc, int max_rows, sw_err *err);
bool rt_drafter_is_eagle3(const rt_drafter *d);

/* q (V) from draft logits lg (Vd) at sampling s: rt_probs over the Vd ids
 * scattered to d2t[i], zero elsewhere. p: Vd floats, idx: Vd ints scratch. */
void rt_eagle3_q(const rt_eagle3 *h, const float *lg, const rt_sampling *s, float *q, float *p, int *idx);

#endif
