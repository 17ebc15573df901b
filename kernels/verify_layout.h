/* The verify kernel's scratch layout (templates/verify.cu.tmpl), shared by
 * the planner that sizes the buffer (gen/plan.c), the executor's extent rule
 * (runtime/engine/extent.c) and the kernel tests. The kernel runs a block per
 * (tree node, vocabulary slice), SLICES slices for every method; the last
 * block to finish walks the tree over the small per-(node, slice) tables,
 * with a few vocabulary passes of its own for the tree methods (a node's
 * second and later rejections, SpecHub's pair terms and residual). With
 * S = SLICES, in 32-bit words:
 *   rows:   the chain mode's residual r per node (V floats)   ROWS(M) * N * V
 *   double: two sets of chunk prefix sums, BLOCK + 1 per (node, slice) (the
 *           first-choice final distribution: the chain's r, a tree node's
 *           residual after its first rejection; p); two sums per (node,
 *           slice) (RRSw's draft mass off R; SpecHub's q mass with and
 *           without the slice's maximum); the walk's two tables of BLOCK + 1
 *   int32:  two sets of the last positive index per (node, slice); the
 *           argmax per (node, slice) (greedy: of p; SpecHub: of q); which
 *           set is the chain's first choice (N); the walk's rejected tokens
 *           R (N); the walk tables' last positive indices (2); the ticket
 *           word that elects the last block (starts at 0, the last block
 *           resets it; the planner zeroes it every iteration).
 * The host specification (kernels/ref/verify.c) needs 2 V floats. */
#ifndef SW_VERIFY_LAYOUT_H
#define SW_VERIFY_LAYOUT_H

#include <stdint.h>

/* rows of V floats per node: the chain mode one (its r), else none */
static inline int64_t sw_verify_rows(int method)
{
	return method == 5 ? 1 : 0;
}

/* word offset of the double tables (even) */
static inline int64_t sw_verify_tab_words(int64_t n, int64_t v, int method)
{
	int64_t w = sw_verify_rows(method) * n * v;
	return w + (w & 1);
}

/* words the kernel reaches (the ticket word is the last) */
static inline int64_t sw_verify_kernel_words(int64_t n, int64_t v, int64_t block, int64_t slices,
                                             int method)
{
	const int64_t ns = n * slices;
	return sw_verify_tab_words(n, v, method) +
	       2 * (2 * ns * (block + 1) + 2 * ns + 2 * (block + 1)) + 3 * ns + 2 * n + 2 + 1;
}

/* word offset of the ticket word */
static inline int64_t sw_verify_done_word(int64_t n, int64_t v, int64_t block, int64_t slices,
                                          int method)
{
	return sw_verify_kernel_words(n, v, block, slices, method) - 1;
}

/* the buffer: the kernel's words or the host specification's 2 V floats */
static inline int64_t sw_verify_scratch_words(int64_t n, int64_t v, int64_t block, int64_t slices,
                                              int method)
{
	int64_t k = sw_verify_kernel_words(n, v, block, slices, method);
	return k > 2 * v ? k : 2 * v;
}

/* The planner's slice count: about two blocks per SM of an H100 (132) over
 * the N nodes, at least 4 * BLOCK vocabulary entries a slice. */
static inline int sw_verify_slices(int64_t n, int64_t v, int64_t block, int method)
{
	(void)method;
	int64_t s = (264 + n - 1) / n, most = v / (4 * block);
	if (s > most)
		s = most;
	return s < 1 ? 1 : (int)s;
}

/* The traffic model (gen/plan.c's bytes, gen/inspect.c's critical path):
 * vocabulary entries of 4 bytes that block (u, slice) reads or writes, for
 * a node with k present children, in units of V / slices. Greedy: p read
 * once (argmax). Chain: p, q read and r written, or p alone at a leaf. The
 * tree methods: p's chunk sums (1), then for a node with children the
 * residual after its first rejection (p, q: 2; one-hot p: 1), or SpecHub's
 * pair (q's argmax, then q's two sums: 2). */
static inline double sw_verify_node_traffic(int method, int k)
{
	switch (method) {
	case 0:
		return 1;
	case 5:
		return k > 0 ? 3 : 1;
	default:
		break;
	}
	if (k == 0)
		return 1;
	return method == 4 ? 2 : 3;
}

/* The tree methods' walk: vocabulary passes of the walking block alone, in
 * entries of 4 bytes per V, at a node with k present children where the
 * walk rejects j of them (j <= k): every rejection after the first reads p
 * and q once (one-hot p: 1); all k rejected, the final draw reads one chunk
 * more. SpecHub's pair: its terms (p, q: 2) after the first coin fails, R's
 * chunk sums (2) after both. */
static inline double sw_verify_walk_traffic(int method, int k, int j)
{
	if (method == 0 || method == 5)
		return 0;
	if (method == 3 && k == 2)
		return j >= 2 ? 4 : j == 1 ? 2 : 0;
	return j < 2 ? 0 : (j - 1) * (method == 4 ? 1.0 : 2.0);
}

#endif
