/* Static draft trees: the one builder every later stage uses (drafting,
 * verification, the planner, kernel templates). A tree comes from a list of
 * paths of child ranks (TensorRT-LLM/Medusa convention, root not listed), a
 * preset file, or a generated form. Nodes are numbered in BFS order with the
 * root (the last verified token) as node 0. */
#ifndef RT_TREE_H
#define RT_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define RT_TREE_MAX_NODES 256 /* including the root */
#define RT_TREE_MAX_DEPTH 64
#define RT_TREE_WORDS ((RT_TREE_MAX_NODES + 63) / 64)

typedef struct rt_tree {
	char name[64];     /* preset name or generated form, for messages and URIs */
	int n;             /* nodes including the root: T + 1 */
	int depth_max;     /* D: depth of the deepest node (root = 0) */
	int parent[RT_TREE_MAX_NODES];   /* -1 for the root */
	int depth[RT_TREE_MAX_NODES];    /* root 0 */
	int rank[RT_TREE_MAX_NODES];     /* index among its siblings (the path element); root 0 */
	int n_children[RT_TREE_MAX_NODES];
	int child_start[RT_TREE_MAX_NODES]; /* children of u: child_list[child_start[u] + r], r = rank */
	int child_list[RT_TREE_MAX_NODES];
	int level_start[RT_TREE_MAX_DEPTH + 2]; /* level d: nodes [level_start[d], level_start[d+1]) */
	int words;         /* (n + 63) / 64 */
	/* Ancestor mask, row i = nodes visible to node i: itself, its ancestors
	 * and the root. Row-major, `words` uint64 per row, bit j of word j/64. */
	uint64_t mask[RT_TREE_MAX_NODES * RT_TREE_WORDS];
} rt_tree;

/* From paths: paths[i] has lens[i] ranks (>= 0). Every proper prefix of a
 * path must itself be listed, siblings' ranks must be contiguous from 0, no
 * duplicates, at most RT_TREE_MAX_NODES - 1 paths and depth
 * RT_TREE_MAX_DEPTH. Errors quote the offending path, e.g. "[0, 5]". */
int rt_tree_from_paths(const int *const *paths, const int *lens, int n_paths, const char *name,
                       rt_tree *t, sw_err *err);

/* A tree from a spec string:
 *   chain:K             K nodes in a line
 *   kary:K:D            every node has K children, depth D
 *   branch:b1,b2,...    level d nodes each have b_d children (Medusa-style Cartesian)
 *   batch:M:L           M children of the root, each a chain of L nodes (Yin et al. Alg. 4)
 *   NAME                a preset: models/trees/NAME.json (medusa63, eagle25, sequoia63,
 *                       biseq8, biseq16)
 *   PATH.json           a file: {"name": "...", "paths": [[0], [1], [0, 0], ...]}
 * trees_dir: where presets live (NULL: "models/trees"). */
int rt_tree_parse(const char *spec, const char *trees_dir, rt_tree *t, sw_err *err);

/* A tree from the text of a tree file (the PATH.json form above, n bytes, not
 * necessarily NUL-terminated). name is the file name used in messages; the
 * tree is named by the file's "name" field, else by name without its folder
 * and ".json". Errors give the file, the JSON path ($.paths[7]), expected and
 * found. */
int rt_tree_from_json_text(const char *text, size_t n, const char *name, rt_tree *t,
                           sw_err *err);

/* The tree as the device kernels (tree_expand, verify) read it: 5 rows of n
 * int32 — parent, n_children, child_start, child_list, depth. tb holds 5*n. */
void rt_tree_table(const rt_tree *t, int32_t *tb);

static inline int rt_tree_visible(const rt_tree *t, int i, int j)
{
	return (int)(t->mask[(size_t)i * t->words + j / 64] >> (j % 64) & 1);
}

#endif
