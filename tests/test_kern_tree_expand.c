/* tree_expand template in the emulator vs rt_expand_node: identical child
 * tokens for top-k, sampling with and without replacement and SpecHub pairs
 * on the EAGLE, Sequoia, binary-Sequoia and Medusa trees (every level), with
 * vocabularies that are not powers of two; peaky draft rows with fewer
 * tokens with q > 0 than children (absent children, -1, and absent nodes'
 * children) against ref_tree_expand. Then the whole kernel path on Markov
 * tables (V = 5, 6; also with draft rows mostly zero, so the support runs
 * out): expansion kernel level by level, verification kernel, first
 * emitted token chi-squared against the target row at 1e-4. MAPPED 1 (q over
 * a draft vocabulary, ids through a map) against ref_tree_expand_map and
 * the plain expansion of q scattered onto the target's ids.
 * NVRTC sm_80 / sm_90 with zero spills. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/philox.h"
#include "decode/sampler.h"
#include "testutil.h"
#include "core/tree.h"
#include "decode/tree_verify.h"

#include "op_harness.h"
#include "kernels/sample_layout.h"
#include "kernels/verify_layout.h"
#include "kernels/ref/ref.h"

/* Q_BY_DEPTH of the kernels expand_all loads: 0 (q row u) unless a test
 * sets 1 (row depth(u)); g_ids: the MAPPED 1 ids (NULL: MAPPED 0, the ids
 * argument is the tree table, which the kernel must not read as ids);
 * g_slices: the vocabulary slices per node (0: the planner's,
 * sw_expand_slices; else that many, at most the block). */
static int g_qd = 0;
static int32_t *g_ids = NULL;
static int g_slices = 0;

static int level_kmax(const rt_tree *t, int level)
{
	int km = 1;
	for (int u = t->level_start[level]; u < t->level_start[level + 1]; u++)
		km = t->n_children[u] > km ? t->n_children[u] : km;
	return km;
}

static int level_slices(const rt_tree *t, int V, int level, int block)
{
	const int n = t->level_start[level + 1] - t->level_start[level];
	return g_slices ? (g_slices < block ? g_slices : block) : sw_expand_slices(n, V, block);
}

static const emu_kernel *expand_kernel(const rt_tree *t, int V, int rule, int level, int block)
{
	gen_param p[] = {OH_NAME, OH_I("N_NODES", t->n), OH_I("V", V), OH_I("RULE", rule),
	                 OH_I("LEVEL_BEGIN", t->level_start[level]), OH_I("BLOCK", block),
	                 OH_I("Q_BY_DEPTH", g_qd), OH_I("MAPPED", g_ids != NULL),
	                 OH_I("SLICES", level_slices(t, V, level, block)),
	                 OH_I("KMAX", level_kmax(t, level))};
	return oh_load(SW_OP_tree_expand, p, 10);
}

/* The kernel's scratch for every level of t, as the planner sizes it
 * (kernels/sample_layout.h: the largest level's), shared by the levels like
 * the engine's: the tree's node counters at 0 (the planner's zeroed arena),
 * the records poisoned. */
static int32_t *expand_scratch(const rt_tree *t, int V, int rule, int block)
{
	int64_t w = 0;
	for (int d = 0; d < t->depth_max; d++) {
		const int n = t->level_start[d + 1] - t->level_start[d];
		const int64_t x = sw_expand_scratch_words(rule, t->n, n, level_slices(t, V, d, block),
		                                          level_kmax(t, d), block);
		w = x > w ? x : w;
	}
	int32_t *s = emu_alloc((size_t)w * sizeof(int32_t), "expand scratch");
	memset(s, 0, (size_t)t->n * sizeof(int32_t));
	return s;
}

/* Launches level d's expansion: grid SLICES x nodes; the node counters are
 * back at 0 afterwards (each merging block resets its own). */
static void expand_level(const rt_tree *t, const emu_kernel *k, int V, int d, int block,
                         int32_t *tok, float *q, int32_t *tree, uint32_t *sw, uint32_t *iter,
                         int32_t *scr)
{
	unsigned n = (unsigned)(t->level_start[d + 1] - t->level_start[d]);
	int32_t *ids = g_ids ? g_ids : tree;
	void *args[] = {&tok, &q, &tree, &sw, &iter, &ids, &scr};
	launch(k, d3((unsigned)level_slices(t, V, d, block), n, 1), d3((unsigned)block, 1, 1), args);
	for (int i = 0; i < t->n; i++)
		assert_int_equal(scr[i], 0);
}

/* Runs the expansion of every level that has children. */
static void expand_all(const rt_tree *t, int V, int rule, int block, int32_t *tok, float *q,
                       int32_t *tree, uint64_t seed, uint32_t *iter)
{
	int32_t *scr = expand_scratch(t, V, rule, block);
	uint32_t *sw = kern_seed(seed);
	for (int d = 0; d < t->depth_max; d++)
		expand_level(t, expand_kernel(t, V, rule, d, block), V, d, block, tok, q, tree, sw, iter,
		             scr);
	emu_free(sw);
	emu_free(scr);
}

static long g_nodes, g_tokens, g_mismatch;

static void check(const char *tree_spec, int rule, int V, float temp, int n_seeds, int block)
{
	rt_tree t;
	sw_err err = {0};
	if (rt_tree_parse(tree_spec, NULL, &t, &err))
		fail_msg("%s", err.msg);
	size_t nv = (size_t)t.n * V;
	int32_t *tok = emu_alloc((size_t)t.n * sizeof(int32_t), "tok");
	int32_t *tree = emu_alloc(5 * (size_t)t.n * sizeof(int32_t), "tree");
	float *q = emu_alloc(nv * sizeof(float), "q");
	uint32_t *iter = emu_alloc(sizeof(uint32_t), "iter");
	float *z = malloc((size_t)V * sizeof(float));
	int *idx = malloc((size_t)V * sizeof(int));
	rt_sampling s = {.temperature = temp, .top_k = 0, .top_p = 1.0f};
	rt_tree_table(&t, tree);
	for (int sd = 0; sd < n_seeds; sd++) {
		uint64_t seed = 0xe4a11dull * (uint64_t)(sd + 1) + (uint64_t)V;
		*iter = (uint32_t)(sd * 5 + 2);
		for (int u = 0; u < t.n; u++) {
			for (int v = 0; v < V; v++)
				z[v] = (float)(3.0 * rnd());
			if (sd & 1) /* ties in q: top-k and the race must break them by id */
				for (int v = 0; v < V; v++)
					z[v] = floorf(z[v]);
			rt_probs(q + (size_t)u * V, z, V, &s, idx);
		}
		for (int u = 0; u < t.n; u++)
			tok[u] = -7;
		expand_all(&t, V, rule, block, tok, q, tree, seed, iter);
		for (int u = 0; u < t.n; u++) {
			int nc = t.n_children[u];
			int32_t want[RT_TREE_MAX_NODES], got[RT_TREE_MAX_NODES];
			char what[128];
			if (!nc)
				continue;
			if (u > 0 && tok[u] < 0) { /* absent (a small V ran out): absent children */
				for (int i = 0; i < nc; i++)
					want[i] = -1;
			} else if (rt_expand_node(rule, q + (size_t)u * V, V, nc, seed, *iter, (uint32_t)u,
			                          want, NULL, NULL)) {
				fail_msg("rt_expand_node failed");
			}
			for (int i = 0; i < nc; i++)
				got[i] = tok[t.child_list[t.child_start[u] + i]];
			snprintf(what, sizeof(what), "%s rule %d V %d seed %d node %d", tree_spec, rule, V, sd,
			         u);
			kern_out o = {.name = "child", .type = KERN_I32, .got = got, .want = want,
			              .n = (size_t)nc};
			g_mismatch += (long)kern_mismatches(what, &o);
			g_tokens += nc;
			g_nodes++;
		}
	}
	free(z);
	free(idx);
	emu_free(tok);
	emu_free(tree);
	emu_free(q);
	emu_free(iter);
}

static void report(const char *what)
{
	print_message("  %s: %ld nodes, %ld child tokens, %ld mismatches\n", what, g_nodes, g_tokens,
	              g_mismatch);
	assert_int_equal(g_mismatch, 0);
	g_nodes = g_tokens = g_mismatch = 0;
}

static void test_expand_rules(void **state)
{
	(void)state;
	for (int r = 0; r < 3; r++) {
		check("eagle25", r, 1000, 1.0f, 4, 128);
		check("medusa63", r, 1000, 0.6f, 2, 128);
		check("sequoia63", r, 1000, 1.0f, 2, 128);
	}
	check("biseq8", RT_EXPAND_SPECHUB, 1000, 0.6f, 4, 64);
	check("biseq16", RT_EXPAND_SPECHUB, 1000, 1.0f, 4, 64);
	report("V=1000");
	check("eagle25", RT_EXPAND_SAMPLE_WOR, 4099, 1.0f, 2, 256);
	check("biseq16", RT_EXPAND_SPECHUB, 4099, 0.6f, 2, 256);
	check("eagle25", RT_EXPAND_TOPK, 4099, 0.6f, 2, 256);
	check("chain:5", RT_EXPAND_SAMPLE, 32003, 1.0f, 1, 256);
	check("biseq8", RT_EXPAND_SPECHUB, 32003, 1.0f, 1, 256);
	report("V=4099 / 32003");
}

/* Peaky draft rows (q nonzero at 0, 1 or 2 ids of V = 33, a row without
 * mass, a NaN row) against trees with up to 4 children per node: every
 * rule, the kernel level by level against ref_tree_expand level by level,
 * the whole token array compared (the absent children's -1 included, and
 * the children of absent nodes, whose q rows are NaN and must not be read).
 * Also checks the support's tokens come first and no child has q = 0. */
static void check_absent(const char *tree_spec, int rule, int block, int n_seeds)
{
	rt_tree t;
	sw_err err = {0};
	if (rt_tree_parse(tree_spec, NULL, &t, &err))
		fail_msg("%s", err.msg);
	const int V = 33;
	size_t nv = (size_t)t.n * V;
	int32_t *tok = emu_alloc((size_t)t.n * sizeof(int32_t), "tok");
	int32_t *tree = emu_alloc(5 * (size_t)t.n * sizeof(int32_t), "tree");
	float *q = emu_alloc(nv * sizeof(float), "q");
	uint32_t *iter = emu_alloc(sizeof(uint32_t), "iter");
	int32_t want[RT_TREE_MAX_NODES];
	long absent = 0, absent_nodes = 0;
	uint64_t g = 0xab5e47ull + (uint64_t)rule;
	rt_tree_table(&t, tree);
	for (int sd = 0; sd < n_seeds; sd++) {
		uint64_t seed = 0x51ull * (uint64_t)(sd + 3);
		*iter = (uint32_t)sd;
		for (int u = 0; u < t.n; u++) {
			float *qu = q + (size_t)u * V;
			const int kind = (int)(tu_rand(&g) % 8); /* 0: no mass, 1: NaN, 2-3: one id, else two */
			for (int v = 0; v < V; v++)
				qu[v] = kind == 1 ? NAN : 0.0f;
			if (kind >= 2) {
				int a = (int)(tu_rand(&g) % (uint64_t)V), b = (int)(tu_rand(&g) % (uint64_t)V);
				if (kind < 4 || a == b) {
					qu[a] = 1.0f;
				} else {
					qu[a] = (float)(0.1 + 0.8 * tu_uniform(&g));
					qu[b] = 1.0f - qu[a];
				}
			}
		}
		for (int u = 0; u < t.n; u++)
			tok[u] = want[u] = -7;
		tok[0] = want[0] = 5;
		expand_all(&t, V, rule, block, tok, q, tree, seed, iter);
		for (int d = 0; d < t.depth_max; d++) {
			const int l0 = t.level_start[d], nl = t.level_start[d + 1] - l0;
			const char *why = NULL;
			if (ref_tree_expand(want, q, tree, seed, *iter, t.n, V, rule, l0, nl, &why))
				fail_msg("ref_tree_expand: %s", why);
		}
		char what[128];
		snprintf(what, sizeof(what), "%s rule %d V %d seed %d (absent children)", tree_spec, rule, V,
		         sd);
		kern_out o = {.name = "tok", .type = KERN_I32, .got = tok, .want = want, .n = (size_t)t.n};
		g_mismatch += (long)kern_mismatches(what, &o);
		for (int u = 0; u < t.n; u++) {
			const int k = t.n_children[u];
			const int32_t *ch = t.child_list + t.child_start[u];
			if (!k)
				continue;
			const bool node_absent = u > 0 && want[u] < 0;
			absent_nodes += node_absent;
			for (int i = 0; i < k; i++) {
				const int32_t y = want[ch[i]];
				if (y < 0) {
					assert_int_equal(y, -1);
					absent++;
					continue;
				}
				assert_false(node_absent);
				assert_true(y < V && q[(size_t)u * V + y] > 0.0f); /* never a q = 0 token */
				if (i > 0)
					assert_true(want[ch[i - 1]] >= 0); /* the present ones first */
				if (rule != RT_EXPAND_SAMPLE)
					for (int j = 0; j < i; j++)
						assert_int_not_equal(want[ch[j]], y);
			}
		}
		g_tokens += t.n;
		g_nodes += t.n;
	}
	print_message("  %s rule %d: %ld absent children, %ld absent nodes with children\n", tree_spec,
	              rule, absent, absent_nodes);
	assert_true(absent > 0);
	if (t.depth_max > 1)
		assert_true(absent_nodes > 0);
	emu_free(tok);
	emu_free(tree);
	emu_free(q);
	emu_free(iter);
}

static void test_expand_absent(void **state)
{
	(void)state;
	for (int r = 0; r < 3; r++) {
		check_absent("kary:4:3", r, 32, 6);
		check_absent("eagle25", r, 64, 4);
	}
	check_absent("kary:2:4", RT_EXPAND_SPECHUB, 32, 8);
	check_absent("biseq16", RT_EXPAND_SPECHUB, 64, 4);
	/* V = 33 is one slice at the planner's count: again over 3 and 7
	 * slices of 11 and 5 entries (slices without any q > 0, a child's
	 * candidates spread over several slices) */
	for (int sl = 3; sl <= 7; sl += 4) {
		g_slices = sl;
		for (int r = 0; r < 3; r++)
			check_absent("kary:4:3", r, 32, 3);
		check_absent("kary:2:4", RT_EXPAND_SPECHUB, 32, 4);
		g_slices = 0;
	}
	report("absent children, V=33");
}

/* The awkward vocabularies (1, 31, 4097, 151936, 262144) at several node
 * counts per level, every rule, at the planner's slice count and at others
 * (1: the one-block reduction; 5 and 64: slices of unequal and of few
 * entries; more slices than entries at V = 31): children identical to
 * rt_expand_node. The two large vocabularies run a short tree (a root of
 * 2-3 children, or 3 nodes of 2) to bound the emulator's time. */
static void test_expand_vocab(void **state)
{
	(void)state;
	static const int sl[] = {0, 1, 5, 64};
	for (int i = 0; i < 4; i++) {
		g_slices = sl[i];
		for (int r = 0; r < 3; r++) {
			check("kary:3:2", r, 1, 1.0f, 2, 32);
			check("kary:3:2", r, 31, 1.0f, 2, 32);
			check("eagle25", r, 4097, 0.6f, 1, 128);
		}
		check("biseq8", RT_EXPAND_SPECHUB, 1, 1.0f, 2, 32);
		check("biseq8", RT_EXPAND_SPECHUB, 31, 0.6f, 2, 32);
		check("biseq8", RT_EXPAND_SPECHUB, 4097, 1.0f, 1, 128);
	}
	g_slices = 0;
	report("V=1 / 31 / 4097 at 1, 5, 64 and the planner's slices");
	for (int r = 0; r < 3; r++)
		check(r == 1 ? "kary:2:2" : "kary:3:1", r, 151936, 1.0f, 1, 256);
	check("biseq8", RT_EXPAND_SPECHUB, 262144, 1.0f, 1, 256);
	check("kary:2:1", RT_EXPAND_SAMPLE_WOR, 262144, 0.6f, 1, 256);
	g_slices = 7;
	check("kary:2:1", RT_EXPAND_TOPK, 262144, 1.0f, 1, 256);
	check("kary:2:1", RT_EXPAND_SAMPLE, 151936, 1.0f, 1, 256);
	g_slices = 0;
	report("V=151936 / 262144");
}

/* The kernel path end to end on a Markov table: level by level, q rows of
 * the level's nodes come from the table at each node's token (what the
 * draft model would compute), the expansion kernel draws the children,
 * then the verification kernel walks the tree. */
/* Q_BY_DEPTH 1 (a block drafter's Cartesian tree: one q per level, q
 * (depth_max, V)): the kernel level by level against ref_tree_expand_q with
 * q_by_depth 1, the whole token array; and, independently of the by-depth
 * code, both against the by-node path on q materialised per node (row u =
 * row depth(u); leaves' rows NaN, never read): ref_tree_expand and the
 * Q_BY_DEPTH 0 kernel. Ties in q on odd seeds; a peaky level (one id, two
 * ids) on every third seed so that children run out. */
static void check_by_depth(const char *tree_spec, int rule, int V, float temp, int n_seeds,
                           int block)
{
	rt_tree t;
	sw_err err = {0};
	if (rt_tree_parse(tree_spec, NULL, &t, &err))
		fail_msg("%s", err.msg);
	const int D = t.depth_max;
	int32_t *tok = emu_alloc((size_t)t.n * sizeof(int32_t), "tok");
	int32_t *tree = emu_alloc(5 * (size_t)t.n * sizeof(int32_t), "tree");
	float *qd = emu_alloc((size_t)D * V * sizeof(float), "q (depth rows)");
	float *qn = emu_alloc((size_t)t.n * V * sizeof(float), "q (node rows)");
	uint32_t *iter = emu_alloc(sizeof(uint32_t), "iter");
	float *z = malloc((size_t)V * sizeof(float));
	int *idx = malloc((size_t)V * sizeof(int));
	int32_t want[RT_TREE_MAX_NODES], by_node[RT_TREE_MAX_NODES];
	rt_sampling s = {.temperature = temp, .top_k = 0, .top_p = 1.0f};
	rt_tree_table(&t, tree);
	for (int sd = 0; sd < n_seeds; sd++) {
		const uint64_t seed = 0xde97ull * (uint64_t)(sd + 1) + (uint64_t)V;
		*iter = (uint32_t)(sd * 3 + 1);
		for (int d = 0; d < D; d++) {
			float *qr = qd + (size_t)d * V;
			for (int v = 0; v < V; v++)
				z[v] = (float)(3.0 * rnd());
			if (sd & 1)
				for (int v = 0; v < V; v++)
					z[v] = floorf(z[v]);
			rt_probs(qr, z, V, &s, idx);
			if (sd % 3 == 2 && d == D / 2) { /* peaky: fewer ids than children */
				memset(qr, 0, (size_t)V * sizeof(*qr));
				qr[(d * 7 + 3) % V] = 0.75f;
				qr[(d * 11 + 5) % V] = d % 2 ? 0.0f : 0.25f;
				qr[(d * 7 + 3) % V] += d % 2 ? 0.25f : 0.0f;
			}
		}
		for (int u = 0; u < t.n; u++)
			for (int v = 0; v < V; v++)
				qn[(size_t)u * V + v] = t.n_children[u] ? qd[(size_t)t.depth[u] * V + v] : NAN;
		for (int u = 0; u < t.n; u++)
			tok[u] = want[u] = by_node[u] = -7;
		tok[0] = want[0] = by_node[0] = V / 2;
		g_qd = 1;
		expand_all(&t, V, rule, block, tok, qd, tree, seed, iter);
		g_qd = 0;
		const char *why = NULL;
		if (ref_tree_expand_q(want, qd, tree, seed, *iter, t.n, V, rule, 0, t.n, 1, &why) ||
		    ref_tree_expand(by_node, qn, tree, seed, *iter, t.n, V, rule, 0, t.n, &why))
			fail_msg("ref_tree_expand: %s", why);
		char what[128];
		snprintf(what, sizeof(what), "%s rule %d V %d seed %d Q_BY_DEPTH 1", tree_spec, rule, V, sd);
		kern_out o = {.name = "tok", .type = KERN_I32, .got = tok, .want = want, .n = (size_t)t.n};
		g_mismatch += (long)kern_mismatches(what, &o);
		snprintf(what, sizeof(what), "%s rule %d V %d seed %d: by depth vs by node (ref)",
		         tree_spec, rule, V, sd);
		kern_out on = {.name = "tok", .type = KERN_I32, .got = want, .want = by_node,
		               .n = (size_t)t.n};
		g_mismatch += (long)kern_mismatches(what, &on);
		for (int u = 1; u < t.n; u++)
			tok[u] = -7;
		expand_all(&t, V, rule, block, tok, qn, tree, seed, iter);
		snprintf(what, sizeof(what), "%s rule %d V %d seed %d: Q_BY_DEPTH 0 kernel on node rows",
		         tree_spec, rule, V, sd);
		kern_out ok = {.name = "tok", .type = KERN_I32, .got = tok, .want = by_node,
		               .n = (size_t)t.n};
		g_mismatch += (long)kern_mismatches(what, &ok);
		g_tokens += t.n - 1;
		g_nodes += t.n;
	}
	free(z);
	free(idx);
	emu_free(tok);
	emu_free(tree);
	emu_free(qd);
	emu_free(qn);
	emu_free(iter);
}

static void test_expand_by_depth(void **state)
{
	(void)state;
	for (int r = 0; r < 3; r++) {
		check_by_depth("branch:3,2,2", r, 1000, 1.0f, 6, 128);
		check_by_depth("chain:5", r, 1000, 0.6f, 3, 128);
	}
	check_by_depth("branch:2,2,2", RT_EXPAND_SPECHUB, 1000, 1.0f, 6, 64);
	check_by_depth("chain:4", RT_EXPAND_SPECHUB, 333, 0.6f, 3, 64);
	check_by_depth("branch:4,2,1,1", RT_EXPAND_SAMPLE_WOR, 8192, 1.0f, 2, 256);
	report("Q_BY_DEPTH 1 (Cartesian trees, chains)");
}

/* MAPPED 1 (an EAGLE-3 head's expansion over its Vd draft ids through
 * d2t): q rows over VD entries, ids a map onto V > VD target ids, either a
 * random injective one (not ascending) or an ascending one. The kernel
 * level by level against ref_tree_expand_map (its specification), the whole
 * token array; and, independently of the map code, both against the plain
 * expansion over the target's ids of q scattered through the inverse map
 * (ref_q_target, then ref_tree_expand: what the host decoder draws), for
 * top-k, the race and SpecHub always and for sampling with replacement
 * when the map ascends (its inverse CDF runs in entry order). VD not a
 * multiple of the block; ties in q (odd seeds, the order between tied ids
 * is the map's, not the entries'); peaky rows (one or two ids with q > 0,
 * fewer than the children: absent children and absent subtrees). */
static void check_mapped(const char *tree_spec, int rule, int VD, int V, bool ascending,
                         int n_seeds, int block)
{
	rt_tree t;
	sw_err err = {0};
	if (rt_tree_parse(tree_spec, NULL, &t, &err))
		fail_msg("%s", err.msg);
	int32_t *tok = emu_alloc((size_t)t.n * sizeof(int32_t), "tok");
	int32_t *tree = emu_alloc(5 * (size_t)t.n * sizeof(int32_t), "tree");
	int32_t *ids = emu_alloc((size_t)VD * sizeof(int32_t), "ids");
	float *q = emu_alloc((size_t)t.n * VD * sizeof(float), "q (draft ids)");
	float *qv = malloc((size_t)t.n * V * sizeof(float));
	int32_t *t2d = malloc((size_t)V * sizeof(int32_t));
	uint32_t *iter = emu_alloc(sizeof(uint32_t), "iter");
	float *z = malloc((size_t)VD * sizeof(float));
	int *idx = malloc((size_t)VD * sizeof(int));
	int32_t want[RT_TREE_MAX_NODES], plain[RT_TREE_MAX_NODES];
	rt_sampling s = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f};
	uint64_t g = 0x3a9ull + (uint64_t)VD * 7 + (uint64_t)rule;
	long absent = 0;
	rt_tree_table(&t, tree);
	/* the map: VD distinct ids of V, shuffled or in ascending order */
	for (int v = 0; v < V; v++)
		t2d[v] = -1;
	for (int i = 0; i < VD; i++) {
		int x;
		do
			x = (int)(tu_rand(&g) % (uint64_t)V);
		while (t2d[x] >= 0);
		t2d[x] = i;
		ids[i] = x;
	}
	if (ascending)
		for (int x = 0, i = 0; x < V; x++)
			if (t2d[x] >= 0) {
				ids[i] = x;
				t2d[x] = i++;
			}
	for (int sd = 0; sd < n_seeds; sd++) {
		const uint64_t seed = 0x77ull * (uint64_t)(sd + 1) + (uint64_t)VD;
		*iter = (uint32_t)(sd * 7 + 3);
		for (int u = 0; u < t.n; u++) {
			float *qu = q + (size_t)u * VD;
			for (int v = 0; v < VD; v++)
				z[v] = (float)(3.0 * rnd());
			if (sd & 1)
				for (int v = 0; v < VD; v++)
					z[v] = floorf(z[v]);
			rt_probs(qu, z, VD, &s, idx);
			if (sd % 3 == 2 && u % 2) { /* peaky: one id (u % 4 == 1) or two */
				memset(qu, 0, (size_t)VD * sizeof(*qu));
				qu[(u * 13 + 5) % VD] = u % 4 == 1 ? 1.0f : 0.5f;
				qu[(u * 31 + 2) % VD] += u % 4 == 1 ? 0.0f : 0.5f;
			}
		}
		if (ref_q_target(qv, q, t2d, t.n, VD, V))
			fail_msg("ref_q_target refused");
		for (int u = 0; u < t.n; u++)
			tok[u] = want[u] = plain[u] = -7;
		tok[0] = want[0] = plain[0] = V - 1;
		g_ids = ids;
		expand_all(&t, VD, rule, block, tok, q, tree, seed, iter);
		g_ids = NULL;
		const char *why = NULL;
		if (ref_tree_expand_map(want, q, ids, tree, seed, *iter, t.n, VD, rule, 0, t.n, 0, &why))
			fail_msg("ref_tree_expand_map: %s", why);
		char what[160];
		snprintf(what, sizeof(what), "%s rule %d VD %d V %d %s seed %d: MAPPED kernel", tree_spec,
		         rule, VD, V, ascending ? "ascending" : "shuffled", sd);
		kern_out o = {.name = "tok", .type = KERN_I32, .got = tok, .want = want, .n = (size_t)t.n};
		g_mismatch += (long)kern_mismatches(what, &o);
		if (rule != RT_EXPAND_SAMPLE || ascending) {
			if (ref_tree_expand(plain, qv, tree, seed, *iter, t.n, V, rule, 0, t.n, &why))
				fail_msg("ref_tree_expand: %s", why);
			snprintf(what, sizeof(what), "%s rule %d VD %d V %d %s seed %d: map vs over V",
			         tree_spec, rule, VD, V, ascending ? "ascending" : "shuffled", sd);
			kern_out op = {.name = "tok", .type = KERN_I32, .got = want, .want = plain,
			               .n = (size_t)t.n};
			g_mismatch += (long)kern_mismatches(what, &op);
		}
		for (int u = 1; u < t.n; u++)
			absent += want[u] < 0;
		g_tokens += t.n - 1;
		g_nodes += t.n;
	}
	if (n_seeds >= 3 && rule != RT_EXPAND_SAMPLE)
		assert_true(absent > 0); /* the peaky rows ran out of candidates */
	free(qv);
	free(t2d);
	free(z);
	free(idx);
	emu_free(tok);
	emu_free(tree);
	emu_free(ids);
	emu_free(q);
	emu_free(iter);
}

static void test_expand_mapped(void **state)
{
	(void)state;
	for (int r = 0; r < 3; r++) {
		check_mapped("eagle25", r, 1000, 3001, false, 4, 128);
		check_mapped("eagle25", r, 333, 1000, true, 4, 64);
		check_mapped("kary:4:3", r, 97, 300, false, 6, 32);
	}
	check_mapped("biseq16", RT_EXPAND_SPECHUB, 1000, 3001, false, 4, 64);
	check_mapped("biseq8", RT_EXPAND_SPECHUB, 333, 1000, true, 4, 64);
	check_mapped("kary:2:4", RT_EXPAND_SPECHUB, 97, 300, false, 6, 32);
	check_mapped("chain:3", RT_EXPAND_TOPK, 4099, 49152, false, 2, 256);
	report("MAPPED 1 (draft ids through a map)");
}

static void chi2_one(const char *tree_spec, int rule, int method, int V, int n, double q_zero)
{
	rt_tree t;
	sw_err err = {0};
	if (rt_tree_parse(tree_spec, NULL, &t, &err))
		fail_msg("%s", err.msg);
	const int B = 64;
	gen_param vp[] = {OH_NAME, OH_I("N_NODES", t.n), OH_I("V", V), OH_I("VQ", V),
	                  OH_I("METHOD", method), OH_I("CHAIN_Q", 1), OH_I("BLOCK", B),
	                  OH_I("SLICES", 1), OH_I("Q_BY_DEPTH", 0)};
	const emu_kernel *vk = oh_load(SW_OP_verify, vp, 9);
	const emu_kernel *ek[RT_TREE_MAX_DEPTH];
	for (int d = 0; d < t.depth_max; d++)
		ek[d] = expand_kernel(&t, V, rule, d, B);
	size_t nv = (size_t)t.n * V;
	int32_t *path = emu_alloc((size_t)t.n * sizeof(int32_t), "path");
	int32_t *otok = emu_alloc((size_t)t.n * sizeof(int32_t), "otok");
	int32_t *counts = emu_alloc(5 * sizeof(int32_t), "counts");
	int32_t *tree = emu_alloc(5 * (size_t)t.n * sizeof(int32_t), "tree");
	int32_t *tok = emu_alloc((size_t)t.n * sizeof(int32_t), "tok");
	float *p = emu_alloc(nv * sizeof(float), "p");
	float *q = emu_alloc(nv * sizeof(float), "q");
	/* the planner's size (kernels/verify_layout.h), its sync words at 0 */
	float *scratch = emu_alloc((size_t)sw_verify_scratch_words(t.n, V, B, 1, method) * 4, "scratch");
	memset((int32_t *)scratch + sw_verify_sync_word(t.n, V, B, 1, method), 0,
	       (size_t)sw_verify_sync_count(t.n) * sizeof(int32_t));
	uint32_t *iter = emu_alloc(sizeof(uint32_t), "iter");
	float *P = malloc((size_t)V * V * sizeof(float)), *Q = malloc((size_t)V * V * sizeof(float));
	rt_tree_table(&t, tree);
	memset(counts, 0, 5 * sizeof(int32_t));
	tu_random_table(P, V, V, 0.2, 101u + (uint64_t)rule);
	tu_random_table(Q, V, V, q_zero, 202u + (uint64_t)rule);
	uint64_t hist[8] = {0};
	long n_absent = 0;
	const int root = 2;
	uint32_t *seed = kern_seed(4242);
	int32_t *scr = expand_scratch(&t, V, rule, B);
	for (int it = 0; it < n; it++) {
		*iter = (uint32_t)it;
		tok[0] = root;
		for (int d = 0; d <= t.depth_max; d++) {
			for (int u = t.level_start[d]; u < t.level_start[d + 1]; u++) {
				if (tok[u] < 0) { /* absent: rows nobody may read */
					for (int v = 0; v < V; v++)
						p[(size_t)u * V + v] = q[(size_t)u * V + v] = NAN;
					n_absent++;
					continue;
				}
				memcpy(p + (size_t)u * V, P + (size_t)tok[u] * V, (size_t)V * sizeof(float));
				memcpy(q + (size_t)u * V, Q + (size_t)tok[u] * V, (size_t)V * sizeof(float));
			}
			if (d == t.depth_max)
				break;
			expand_level(&t, ek[d], V, d, B, tok, q, tree, seed, iter, scr);
		}
		void *va[] = {&path, &otok, &counts, &tree, &tok, &p, &q, &scratch, &seed, &iter};
		launch(vk, d3((unsigned)sw_verify_grid(t.n, 1, method), 1, 1), d3(B, 1, 1), va);
		hist[otok[0]]++;
	}
	double probs[8];
	for (int x = 0; x < V; x++)
		probs[x] = P[(size_t)root * V + x];
	int df;
	double chi = tu_chi2(hist, probs, V, (uint64_t)n, &df);
	double crit = tu_chi2_crit(df, 1e-4);
	print_message("  %-8s rule %d method %d V %d q zeros %.1f: chi2 %.2f (df %d, crit %.2f at "
	              "1e-4), %.2f accepted, %.2f absent nodes per iteration\n", tree_spec, rule, method,
	              V, q_zero, chi, df, crit, (double)counts[3] / n, (double)n_absent / n);
	if (q_zero > 0.0 && rule != RT_EXPAND_SAMPLE)
		assert_true(n_absent > 0); /* the support did run out */
	if (!(chi < crit))
		fail_msg("%s: chi2 %.2f >= %.2f", tree_spec, chi, crit);
	free(P);
	free(Q);
	emu_free(path);
	emu_free(otok);
	emu_free(counts);
	emu_free(tree);
	emu_free(tok);
	emu_free(p);
	emu_free(q);
	emu_free(scratch);
	emu_free(seed);
	emu_free(scr);
	emu_free(iter);
}

static void test_expand_exact(void **state)
{
	(void)state;
	chi2_one("eagle25", RT_EXPAND_SAMPLE, RT_VERIFY_RRS, 5, 2000, 0.0);
	chi2_one("eagle25", RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW, 5, 2000, 0.0);
	chi2_one("biseq16", RT_EXPAND_SPECHUB, RT_VERIFY_SPECHUB, 6, 2000, 0.0);
	chi2_one("eagle25", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, 6, 2000, 0.0);
	/* peaky drafts: most Q rows have 1-3 tokens with q > 0, fewer than the
	 * children asked for, so children (and whole subtrees) are absent */
	chi2_one("kary:4:2", RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW, 5, 2000, 0.6);
	chi2_one("biseq16", RT_EXPAND_SPECHUB, RT_VERIFY_SPECHUB, 6, 2000, 0.7);
	chi2_one("kary:4:2", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, 5, 2000, 0.6);
}

static void test_expand_nvrtc(void **state)
{
	(void)state;
	rt_tree t;
	sw_err err = {0};
	assert_int_equal(rt_tree_parse("sequoia63", NULL, &t, &err), 0);
	for (int r = 0; r < 8; r++) {
		const int V = r < 4 ? 32003 : 4099;
		gen_param p[] = {OH_NAME, OH_I("N_NODES", t.n), OH_I("V", V),
		                 OH_I("RULE", r % 4), OH_I("LEVEL_BEGIN", t.level_start[1]),
		                 OH_I("BLOCK", 256), OH_I("Q_BY_DEPTH", 0), OH_I("MAPPED", r >= 4),
		                 OH_I("SLICES", level_slices(&t, V, 1, 256)),
		                 OH_I("KMAX", level_kmax(&t, 1))};
		oh_nvrtc_p(SW_OP_tree_expand, p, 10);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expand_rules),
		cmocka_unit_test(test_expand_absent),
		cmocka_unit_test(test_expand_vocab),
		cmocka_unit_test(test_expand_by_depth),
		cmocka_unit_test(test_expand_mapped),
		cmocka_unit_test(test_expand_exact),
		cmocka_unit_test(test_expand_nvrtc),
	};
	/* e.g. CMOCKA_FILTER='*by_depth' (as test_kern_tree_attention.c) */
	if (getenv("CMOCKA_FILTER") && *getenv("CMOCKA_FILTER"))
		cmocka_set_test_filter(getenv("CMOCKA_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
