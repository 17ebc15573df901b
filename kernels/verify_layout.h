/* The verify kernel's scratch layout (templates/verify.cu.tmpl), shared by
 * the planner that sizes the buffer (gen/plan.c), the executor's extent rule
 * (runtime/engine/extent.c) and the kernel tests. The kernel runs a block per
 * (tree node, vocabulary slice): SLICES slices for greedy and the chain mode,
 * one (the whole vocabulary) for the tree methods, whose residual chain is
 * sequential; the last block to finish walks the tree over the small
 * per-node tables. With S = SLICES, in 32-bit words:
 *   rows:   per node its residual r (V floats; none for greedy), then for
 *           RRSw its draft copy qq (V floats)       ROWS(M) * N * V
 *   double: two sets (the node's first-choice final distribution; p) of
 *           chunk prefix sums, BLOCK + 1 per (node, slice); each child's coin
 *           numerator and denominator (N each)
 *   int32:  two sets of the last positive index per (node, slice); which
 *           rows the first choice is (0 r, 1 p), SpecHub's coin order (N
 *           each); the argmax per (node, slice); the ticket word that elects
 *           the last block (starts at 0, the last block resets it; the
 *           planner zeroes it every iteration).
 * The host specification (kernels/ref/verify.c) needs 2 V floats. */
#ifndef SW_VERIFY_LAYOUT_H
#define SW_VERIFY_LAYOUT_H

#include <stdint.h>

/* rows of V floats per node: greedy none, RRSw two (r and qq), else one */
static inline int64_t sw_verify_rows(int method)
{
	return method == 0 ? 0 : method == 2 ? 2 : 1;
}

/* whether a method may split the vocabulary (greedy, chain) */
static inline int sw_verify_sliced(int method)
{
	return method == 0 || method == 5;
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
	return sw_verify_tab_words(n, v, method) + 2 * (2 * ns * (block + 1) + 2 * n) + 2 * ns +
	       2 * n + ns + 1;
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
 * the N nodes, at least 4 * BLOCK vocabulary entries a slice; 1 for the tree
 * methods. */
static inline int sw_verify_slices(int64_t n, int64_t v, int64_t block, int method)
{
	if (!sw_verify_sliced(method))
		return 1;
	int64_t s = (264 + n - 1) / n, most = v / (4 * block);
	if (s > most)
		s = most;
	return s < 1 ? 1 : (int)s;
}

/* The traffic model (gen/plan.c's bytes, gen/inspect.c's critical path):
 * vocabulary entries of 4 bytes that block (u, slice) reads or writes, for
 * a node with k present children, in units of V / slices. Greedy: p read
 * once (argmax). Chain: p, q read and r written, or p alone at a leaf. The
 * tree methods (one slice): r = p copied (2), per child the residual's sum
 * pass (r, q) and write pass (r, q, r) (5; one-hot reads no q: 3; RRSw adds
 * the q copy (2) and the removal's two passes (3)), SpecHub's pair pass
 * (argmax q, 1 - q(a), the pair terms, the sum, the normalisation: 9), and
 * the chunk sums of the final distribution (1). */
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
	if (method == 3 && k == 2)
		return 2 + 9 + 1;
	if (method == 2)
		return 2 + 2 + 8.0 * k + 1;
	if (method == 4)
		return 2 + 3.0 * k + 1;
	return 2 + 5.0 * k + 1;
}

#endif
