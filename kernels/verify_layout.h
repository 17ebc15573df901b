/* The verify kernel's scratch layout (templates/verify.cu.tmpl), shared by
 * the planner that sizes the buffer (gen/plan.c), the executor's extent rule
 * (runtime/engine/extent.c) and the kernel tests. The kernel runs one block
 * per tree node (its vocabulary-wide preprocessing), and the last block to
 * finish walks the tree over the small per-node tables. In 32-bit words:
 *   rows:   per node its residual r (V floats; none for greedy), then for
 *           RRSw its draft copy qq (V floats)       ROWS(M) * N * V
 *   double: chunk prefix sums of each node's final distribution (BLOCK + 1
 *           per node), each child's coin numerator and denominator (N each)
 *   int32:  each node's last positive index, which distribution its final
 *           draw uses (0 r, 1 p), SpecHub's coin order, the argmax (N each),
 *           and the ticket word that elects the last block (starts at 0, the
 *           last block resets it; the planner zeroes it every iteration).
 * The host specification (kernels/ref/verify.c) needs 2 V floats. */
#ifndef SW_VERIFY_LAYOUT_H
#define SW_VERIFY_LAYOUT_H

#include <stdint.h>

/* rows of V floats per node: greedy none, RRSw two (r and qq), else one */
static inline int64_t sw_verify_rows(int method)
{
	return method == 0 ? 0 : method == 2 ? 2 : 1;
}

/* word offset of the double tables (even: the rows region is N * V * rows
 * words, rounded up to an even count) */
static inline int64_t sw_verify_tab_words(int64_t n, int64_t v, int method)
{
	int64_t w = sw_verify_rows(method) * n * v;
	return w + (w & 1);
}

/* words the kernel reaches (the ticket word is the last) */
static inline int64_t sw_verify_kernel_words(int64_t n, int64_t v, int64_t block, int method)
{
	return sw_verify_tab_words(n, v, method) + 2 * (n * (block + 1) + 2 * n) + 4 * n + 1;
}

/* word offset of the ticket word */
static inline int64_t sw_verify_done_word(int64_t n, int64_t v, int64_t block, int method)
{
	return sw_verify_kernel_words(n, v, block, method) - 1;
}

/* the buffer: the kernel's words or the host specification's 2 V floats */
static inline int64_t sw_verify_scratch_words(int64_t n, int64_t v, int64_t block, int method)
{
	int64_t k = sw_verify_kernel_words(n, v, block, method);
	return k > 2 * v ? k : 2 * v;
}

#endif
