/* Token-tree drafting rules and verification methods on the host
 * (ALGORITHMS.txt items 1c, 2, 3, 4, 5, 9): per-node child expansion from a
 * draft distribution, and the walk that accepts a path through a drafted tree
 * exactly (output distributed as the target's warped distribution). Thin
 * wrappers over the specification the GPU kernels are checked against,
 * kernels/ref (ref_expand_node, ref_verify_tree: see kernels/ref/ref.h), with
 * the host decoder's rt_tree and error codes; the lossy chain rule is here.
 * The rules' and methods' names and exact pairs: core/tree_rules.h. */
#ifndef RT_TREE_VERIFY_H
#define RT_TREE_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tree.h"
#include "core/tree_rules.h"
#include "kernels/ref/ref.h"
#include "sampler.h"

/* Draws k children for a node from its draft distribution q (V floats, sums
 * to 1). Writes tok[0..k) in rank order. Uniform keying (the GPU kernel must
 * reproduce it bit for bit): the uniform for lane L is
 *   w = philox4x32_10(ctr = {iter, node, purpose, L}, key = seed),
 *   u = sw_u64_to_uniform_double(w[0], w[1])
 * (lane 0 is sw_uniform_double(seed, iter, node, purpose)).
 *   TOPK:       no uniforms; descending q, ties to the lower id.
 *   SAMPLE:     draw i uses lane i, purpose SW_RNG_EXPAND, then
 *               rt_sample_cdf(q, V, u) (first index with cumsum > u*sum).
 *   SAMPLE_WOR: lane v (the vocabulary id), purpose SW_RNG_EXPAND, for each v
 *               with q(v) > 0; key(v) = log(u_v) / (double)q(v); the k
 *               largest keys in descending order (ties: lower id first).
 *   SPECHUB:    lane v, purpose SW_RNG_SPECHUB2, same keys; a = rt_argmax(q);
 *               tok[0] = largest key; tok[1] = a if tok[0] != a, else the
 *               largest key among v != a.
 * A child with no candidate left (fewer tokens with q > 0 than children for
 * TOPK / SAMPLE_WOR, only the hub for SPECHUB's second, q without mass for
 * any rule) is absent: tok = -1 after the present children (never a token
 * with q = 0); rt_verify_tree skips it, which keeps the draft exact.
 * Returns 0, or SW_EINVAL when k is outside [0, 255], the rule is unknown,
 * or k > 2 for SPECHUB.
 * fscratch / iscratch: unused by the host reference (the top-k lists live in
 * a local array of RT_TREE_MAX_NODES doubles); may be NULL. */
int rt_expand_node(int rule, const float *q, int V, int k, uint64_t seed, uint32_t iter, uint32_t node,
                   int32_t *tok, float *fscratch, int *iscratch);

typedef struct rt_tree_result {
	int path[RT_TREE_MAX_DEPTH + 1]; /* accepted nodes, path[0] = 0 (root) */
	int n_path;                       /* accepted draft nodes + 1 */
	int32_t final;                    /* the residual / bonus token */
	/* Acceptance diagnostics for benchmarks: accepted_sibling[d] = rank of
	 * the child accepted at the step from depth d (d < n_path - 1); -1 at
	 * the step where the walk stopped and beyond. */
	int accepted_sibling[RT_TREE_MAX_DEPTH + 1];
} rt_tree_result;

/* Verifies a drafted tree (ref_verify_tree over rt_tree_table(t); on an
 * error *res is left as it was).
 *   tok (n):   tok[0] = root token, tok[u] = node u's token
 *   p (n, V):  the target's warped distribution after node u's path
 *   q (n, V):  the draft distribution u's children were drawn from (before
 *              any without-replacement removal); unused by GREEDY/ONEHOT
 *              (may be NULL for them)
 * Walks from the root testing children in rank order with the method's rule
 * (ALGORITHMS.txt 1c, 2, 3, 4); accepted path and final token in *res.
 * Absent nodes: a node whose token is negative was not drafted (SpecDec++
 * stopped before its level; the adapt kernel writes -1). It is never
 * tested and updates no residual or draft distribution; the present
 * children keep their rank order; a node whose children are all absent is
 * a leaf (bonus from its p; GREEDY: the path ends there, final = argmax of
 * its p); a SpecHub pair with one absent child is plain RS on the other.
 * This verifies exactly the smaller tree that was drafted, so it stays
 * exact when which nodes are present depends only on draft-side values of
 * their ancestors (whole levels, as SpecDec++ drops them). Within one
 * node, RRS needs the absent set independent of the children's tokens,
 * and RRSW / SPECHUB need the present children to be a prefix in rank
 * order (the later draws of a without-replacement sequence, or a SpecHub
 * pair's second child, are not ~ q on their own); ONEHOT takes any subset.
 * accepted_sibling still counts ranks among all children.
 * Uniform keying (all sw_uniform_double, lane 0):
 *   the accept test of child c:          (seed, iter, c, SW_RNG_ACCEPT),
 *     accepted iff q > 0 and u * q <= p in double (q, p: the method's
 *     current draft/residual values; ONEHOT: q = 1; SpecHub's second tests
 *     are u * S_ia <= ra and u * S_ai <= p(a), keyed by the child tested);
 *   the residual or bonus draw at the node u where the walk stops:
 *                                        (seed, iter, u, SW_RNG_RESIDUAL),
 *     then rt_sample_cdf over the (normalised) residual, or over p_u at a
 *     leaf. A residual with no mass falls back to the distribution it was
 *     computed from (p itself up to rounding).
 * GREEDY takes the deepest node whose whole path matches the argmax of its
 * parent's p (ties: lowest node id) and final = argmax of that node's p.
 * Returns 0 or SW_EINVAL: a token >= V, q == NULL for RRS / RRSW / SPECHUB,
 * or for SPECHUB a node with > 2 children or a 2-child node with both
 * children present that is not a SpecHub pair (exactly one child the hub
 * argmax q, the other child with q > 0), checked for every node up front.
 * scratch: 2*V floats. */
int rt_verify_tree(const rt_tree *t, int method, const int32_t *tok, const float *p, const float *q,
                   int V, uint64_t seed, uint32_t iter, rt_tree_result *res, float *scratch);

/* Lossy relaxation (Yin et al., ALGORITHMS.txt 5, whose p and q are our q
 * and p): chain verification like rt_verify_chain (same arguments, scratch
 * and uniform keying) but accepting the draft x with min(1, (p(x) + eps) /
 * q(x)) and resampling rejections from their Theorem 4 optimum, which for
 * this rule is the SD residual norm(relu(p - q)). eps <= 0 or greedy
 * sampling: exactly rt_verify_chain. Biased: each position's output is
 * within rt_lossy_tv_bound of p in total variation. Only reachable from
 * options whose name contains "lossy". */
int rt_verify_chain_lossy(const float *logits, const rt_sampling *s, const float *q, const int32_t *xd,
                          int g, int V, float eps, uint64_t seed, uint32_t iter, int32_t *final, float *p,
                          float *tmp, int *idx);

/* TV(O, p) for one position of the lossy rule, exactly:
 * O(x) = min(q(x), p(x) + eps) + P_rej norm(relu(p - q))(x),
 * P_rej = 1 - sum_x min(q(x), p(x) + eps). Equals sum_x min(eps, relu(q - p)). */
double rt_lossy_tv_bound(const float *p, const float *q, int V, float eps);

#endif
