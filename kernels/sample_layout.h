/* The scratch layouts of the sampling kernels that spread a row's
 * vocabulary over many blocks (templates/tree_expand.cu.tmpl), shared by
 * the planner that sizes the buffer and picks the grid (gen/plan.c), the
 * executor's extent rule (runtime/engine/extent.c), gen/inspect.c and the
 * kernel tests, as kernels/verify_layout.h is for verify. All sizes in
 * 32-bit words; doubles sit at even word offsets.
 *
 * tree_expand: grid (SLICES, nodes of the level). Block (s, b) reduces
 * slice s of node LEVEL_BEGIN + b's q row to candidates, and the last of
 * the node's SLICES blocks to finish (a counter per node) merges them into
 * the children:
 *   counters: one int32 per node of the tree, node u's at word u (0
 *             between launches: the merging block resets its own; the
 *             levels share the buffer, so the counters sit apart from the
 *             level-sized records)
 *   top-k, the race (RULE 0, 2): per (node, slice) KMAX keys (double) and
 *             KMAX ids; SpecHub (RULE 3): the slice's two best race keys
 *             and ids, and its largest q (as a double key) and id
 *   sampling (RULE 1): per node BLOCK chunk sums (double) and BLOCK last
 *             positive indices: the chunked prefix of the one-block
 *             kernel, its chunks shared out over the slices
 * No state survives a launch but the counters at 0 (a zeroed arena: the
 * device allocators clear it). */
#ifndef SW_SAMPLE_LAYOUT_H
#define SW_SAMPLE_LAYOUT_H

#include <stdint.h>

/* candidates a slice keeps: KMAX (top-k, race), 2 + the argmax (SpecHub) */
static inline int64_t sw_expand_cands(int rule, int64_t kmax)
{
	return rule == 3 ? 3 : kmax;
}

/* word offset of the candidate (or chunk-sum) tables: after the counters
 * of the tree's n_nodes nodes */
static inline int64_t sw_expand_tab_words(int64_t n_nodes)
{
	return n_nodes + (n_nodes & 1);
}

/* words of one (node, slice) record (rules 0, 2, 3) or of one node's chunk
 * table (rule 1): doubles then int32s, an even count */
static inline int64_t sw_expand_rec_words(int rule, int64_t kmax, int64_t block)
{
	const int64_t c = rule == 1 ? block : sw_expand_cands(rule, kmax);
	return 3 * c + (c & 1);
}

/* the buffer a level of `nodes` nodes of a tree of n_nodes needs */
static inline int64_t sw_expand_scratch_words(int rule, int64_t n_nodes, int64_t nodes,
                                              int64_t slices, int64_t kmax, int64_t block)
{
	const int64_t recs = rule == 1 ? nodes : nodes * slices;
	return sw_expand_tab_words(n_nodes) + recs * sw_expand_rec_words(rule, kmax, block);
}

/* The planner's slice count for a level of `nodes` nodes: about two blocks
 * per SM of an H100 (132) over the level, at least 4 * BLOCK entries a
 * slice, and at most BLOCK slices (sampling shares the BLOCK chunks of the
 * prefix out over them). */
static inline int sw_expand_slices(int64_t nodes, int64_t v, int64_t block)
{
	int64_t s = (264 + nodes - 1) / (nodes > 0 ? nodes : 1), most = v / (4 * block);
	if (s > most)
		s = most;
	if (s > block)
		s = block;
	return s < 1 ? 1 : (int)s;
}

#endif
