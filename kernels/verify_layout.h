/* The verify kernel's scratch layout (templates/verify.cu.tmpl), shared by
 * the planner that sizes the buffer and launches the grid (gen/plan.c), the
 * executor's extent rule (runtime/engine/extent.c), gen/inspect.c's cost
 * model and the kernel tests. The kernel runs a block per (unit, slice):
 * a unit per tree node v, S = SLICES vocabulary slices each, grid N x S.
 * Unit v does node v's own work (its p's chunk sums, the residual after its
 * first present child's rejection, ...) and, for the tree methods, the
 * work of v's entry j in the child lists (v = child i of node u): the
 * residual after u's children 0..i were all rejected (SpecHub's pair: its
 * terms at i = 0, its residual R at i = 1), after waiting for the units of
 * u and of v's earlier siblings. The last block to finish walks the tree
 * over these tables. In 32-bit words:
 *   rows:   the chain mode's residual r per node (V floats)   ROWS(M) * N * V
 *   double: 3N - 1 table slots of S x (BLOCK + 1) chunk prefix sums (slot u:
 *           p_u's; slot N + u: the residual after u's first present
 *           child's rejection (the chain: its r); slot 2N + j: child-list
 *           entry j's), then 2 sums per (slot, slice) (RRSw's draft mass
 *           off R; SpecHub's q sums, its pair terms)
 *   int32:  the last positive index per (slot, slice); the argmax per
 *           (slot, slice) (greedy: of p; SpecHub: of q); which table is the
 *           chain's first choice (N); then the sync words: a completion
 *           counter per unit (N), the ticket that hands out units in order,
 *           and the done word that elects the walking block (the last).
 *           They start at 0 (the planner zeroes them every iteration) and
 *           the walking block resets them.
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

/* whether the method is one of the tree methods (RRS, RRSw, SpecHub,
 * one-hot: child-list work) */
static inline int sw_verify_is_tree(int method)
{
	return method >= 1 && method <= 4;
}

/* the launch grid: a block per (node, slice), every method */
static inline int64_t sw_verify_grid(int64_t n, int64_t slices, int method)
{
	(void)method;
	return n * slices;
}

/* the sync words: a counter per node, the ticket, the done word */
static inline int64_t sw_verify_sync_count(int64_t n)
{
	return n + 2;
}

/* words the kernel reaches (the done word is the last) */
static inline int64_t sw_verify_kernel_words(int64_t n, int64_t v, int64_t block, int64_t slices,
                                             int method)
{
	const int64_t slots = (3 * n - 1) * slices;
	return sw_verify_tab_words(n, v, method) + 2 * (slots * (block + 1) + 2 * slots) +
	       2 * slots + n + sw_verify_sync_count(n);
}

/* word offset of the first sync word (the memset covers
 * sw_verify_sync_count words from here) */
static inline int64_t sw_verify_sync_word(int64_t n, int64_t v, int64_t block, int64_t slices,
                                          int method)
{
	return sw_verify_kernel_words(n, v, block, slices, method) - sw_verify_sync_count(n);
}

/* word offset of the done word */
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
 * vocabulary entries of 4 bytes that block (unit, slice) reads or writes,
 * in units of V / slices. Node units, for a node with k children: greedy, p
 * read once (argmax). Chain: p, q read and r written, or p alone at a leaf.
 * The tree methods: p's chunk sums (1), then for a node with children the
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

/* Child-list work of the tree methods: that of child i (0-based) of a node
 * with k children, done by the child's unit. RRS, RRSw: the residual after
 * rejecting children 0..i, for i >= 1 (p, q: 2; one-hot p: 1); i = 0 is
 * the parent's node work. SpecHub's pair (k = 2): its terms (p, q: 2),
 * then R's chunk sums (2). */
static inline double sw_verify_unit_traffic(int method, int k, int i)
{
	if (!sw_verify_is_tree(method))
		return 0;
	if (method == 3 && k == 2)
		return 2;
	return i < 1 ? 0 : method == 4 ? 1.0 : 2.0;
}

/* The work a node with k children causes, in the same units: its node
 * work and its children's child-list work (gen/plan.c's bytes). */
static inline double sw_verify_work_traffic(int method, int k)
{
	double w = sw_verify_node_traffic(method, k);
	for (int i = 0; i < k; i++)
		w += sw_verify_unit_traffic(method, k, i);
	return w;
}

/* The critical path through the units, in the same units, for a tree in
 * BFS order given by its children counts (nc[0 .. n)): unit v does its node
 * work (no waiting), then its child-list work once its parent's unit and
 * its earlier siblings' units are done (when it has any), so
 *   end(v) = max(node(v), end(parent), end(earlier siblings)) + list(v).
 * The walk itself makes no vocabulary pass: it reads the tables and, for
 * the final draw, one chunk of one slice. */
static inline double sw_verify_crit_traffic(int method, const int *nc, int n)
{
	double end[256], most = 0;
	int next = 1; /* BFS: node u's children are next .. next + nc[u] - 1 */
	if (n > 256)
		n = 256;
	for (int v = 0; v < n; v++)
		end[v] = sw_verify_node_traffic(method, nc[v]);
	for (int u = 0; u < n; u++) {
		double before = end[u]; /* the parent's unit, then each sibling's */
		for (int i = 0; i < nc[u] && next + i < n; i++) {
			const int v = next + i;
			const double w = sw_verify_unit_traffic(method, nc[u], i);
			if (w > 0) {
				end[v] = (end[v] > before ? end[v] : before) + w;
				before = end[v];
			} else if (end[v] > before) {
				before = end[v];
			}
		}
		next += nc[u];
	}
	for (int v = 0; v < n; v++)
		most = end[v] > most ? end[v] : most;
	return most;
}

#endif
