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
 *
 * logits_process: one launch of SW_LOGITS_PHASES phases, each a block per
 * (row, slice); a block's unit (phase, row, slice) is its ticket from an
 * atomic counter, phase-major, so a block waits only on units of earlier
 * tickets (templates/README.md): phase p of a row starts once the last
 * block of phase p - 1 of that row (a counter per row) has merged the
 * partials and advanced the row's stage word. First the sync words, at
 * fixed places whatever the op's rows and slices (the ops share the
 * buffer): the ticket, the done word that elects the last block (which
 * resets both), and per row (at most SW_LOGITS_MAX_ROWS) its counter and
 * stage word (its last block of the last phase resets them). Then per row:
 * its state (SW_LOGITS_STATE words), two tie tables of SLICES counts, and
 * a record per slice (SW_LOGITS_CHUNK words: its maximum and argmax, its
 * candidates' count, fixed-point mass and NaN count, its 256-bin histogram
 * of counts and masses).
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
 * per SM of an H100 (132) over the level, at least 2 * BLOCK entries a
 * slice, and at most BLOCK slices (sampling shares the BLOCK chunks of the
 * prefix out over them). */
static inline int sw_expand_slices(int64_t nodes, int64_t v, int64_t block)
{
	int64_t s = (264 + nodes - 1) / (nodes > 0 ? nodes : 1), most = v / (2 * block);
	if (s > most)
		s = most;
	if (s > block)
		s = block;
	return s < 1 ? 1 : (int)s;
}

/* logits_process: the phases (max, exp and the first histogram, seven
 * histogram levels, write), the words of a row's state and of a slice's
 * record */
#define SW_LOGITS_PHASES 10
#define SW_LOGITS_MAX_ROWS 256
#define SW_LOGITS_SYNC (2 + 2 * SW_LOGITS_MAX_ROWS)
#define SW_LOGITS_STATE 48
#define SW_LOGITS_CHUNK (8 + 4 * 256)

static inline int64_t sw_logits_row_words(int64_t slices)
{
	const int64_t w = SW_LOGITS_STATE + 2 * slices;
	return w + (w & 1) + slices * SW_LOGITS_CHUNK;
}

static inline int64_t sw_logits_scratch_words(int64_t rows, int64_t slices)
{
	return SW_LOGITS_SYNC + rows * sw_logits_row_words(slices);
}

/* The planner's slice count: about two blocks per SM of an H100 (132) in
 * each phase over the rows, at least 4 * BLOCK entries a slice, at most 32
 * slices (the merging block reads every slice's 256-bin histogram). */
static inline int sw_logits_slices(int64_t rows, int64_t v, int64_t block)
{
	int64_t s = (264 + rows - 1) / (rows > 0 ? rows : 1), most = v / (4 * block);
	if (s > most)
		s = most;
	if (s > 32)
		s = 32;
	return s < 1 ? 1 : (int)s;
}

#endif
