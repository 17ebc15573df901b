/* verify template (fused tree verification: a block per node and
 * vocabulary slice, the last one walks) in the emulator vs
 * rt_verify_tree / rt_verify_chain on the same p, q, tokens and seed: the
 * accepted path, the final token and the counts must be identical for every
 * method, on the chain, EAGLE, Sequoia, binary-Sequoia and Medusa trees,
 * vocabularies that are not powers of two, temperatures 0 / 0.6 / 1 with and
 * without top-k / top-p; also with absent nodes (token -1: level cuts, the
 * chain cut after every depth, the root's only child, random subsets of
 * children; tokens >= V, which the kernel must take as absent without
 * reading at them); wide trees with far drafts, so that several children of
 * a node are rejected in a row (each later rejection's sums come from the
 * block of that child, which waits on its parent's and earlier siblings'
 * blocks). Also exactness of the kernel path (host expansion, kernel
 * verification) by chi-square on Markov tables, with and without a random
 * level cut, and NVRTC for sm_80 / sm_90 with zero spills. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/philox.h"
#include "decode/sampler.h"
#include "decode/chain.h"
#include "testutil.h"
#include "core/tree.h"
#include "decode/tree_verify.h"

#include "op_harness.h"
#include "kernels/verify_layout.h"
#include "kernels/ref/ref.h"
enum { M_CHAIN = 5 };

/* Vocabulary slices of the kernel in check(): 1 unless a test sets more. */
static int g_slices = 1;

/* The draft's vocabulary in check() and chi2_cut(): the first g_vq ids of
 * the target's (q = 0 beyond); 0: the target's. */
static int g_vq = 0;

static int slices_for(int method)
{
	(void)method;
	return g_slices;
}

/* Q_BY_DEPTH of verify_kernel: 0 (q row u, q (N, VQ)) unless a test sets 1
 * (row depth(u), q (depth_max, VQ)). */
static int g_qd = 0;

static const emu_kernel *verify_kernel(const rt_tree *t, int V, int method, int chain_q, int block)
{
	gen_param p[] = {OH_NAME, OH_I("N_NODES", t->n), OH_I("V", V), OH_I("VQ", g_vq ? g_vq : V),
	                 OH_I("METHOD", method), OH_I("CHAIN_Q", chain_q), OH_I("BLOCK", block),
	                 OH_I("SLICES", slices_for(method)), OH_I("Q_BY_DEPTH", g_qd)};
	return oh_load(SW_OP_verify, p, 9);
}

/* Device buffers for one tree. */
typedef struct vbuf {
	int32_t *path, *otok, *counts, *tree, *tok;
	float *p, *q, *scratch;
	uint32_t *iter;
	int32_t *sync; /* the sync words inside scratch (counters, ticket, done) */
	int n_sync;
	int grid;      /* units x slices (kernels/verify_layout.h) */
} vbuf;

static void vbuf_init(vbuf *b, const rt_tree *t, int V, int method, int block)
{
	size_t n = (size_t)t->n;
	b->path = emu_alloc(n * sizeof(int32_t), "path");
	b->otok = emu_alloc(n * sizeof(int32_t), "out_tok");
	b->counts = emu_alloc(5 * sizeof(int32_t), "counts");
	b->tree = emu_alloc(5 * n * sizeof(int32_t), "tree");
	b->tok = emu_alloc(n * sizeof(int32_t), "tok");
	b->p = emu_alloc(n * V * sizeof(float), "p");
	b->q = emu_alloc((g_qd ? (size_t)t->depth_max : n) * (g_vq ? g_vq : V) * sizeof(float), "q");
	/* the planner's size: the guard zones catch a kernel reaching past it */
	const int S = slices_for(method);
	b->scratch = emu_alloc((size_t)sw_verify_scratch_words(t->n, V, block, S, method) * 4,
	                       "scratch");
	b->sync = (int32_t *)b->scratch + sw_verify_sync_word(t->n, V, block, S, method);
	b->n_sync = (int)sw_verify_sync_count(t->n);
	b->grid = (int)sw_verify_grid(t->n, S, method);
	/* the planner's memset; the kernel resets them after */
	memset(b->sync, 0, (size_t)b->n_sync * sizeof(int32_t));
	b->iter = emu_alloc(sizeof(uint32_t), "iter");
	memset(b->counts, 0, 5 * sizeof(int32_t));
	rt_tree_table(t, b->tree);
}

static void vbuf_free(vbuf *b)
{
	emu_free(b->path);
	emu_free(b->otok);
	emu_free(b->counts);
	emu_free(b->tree);
	emu_free(b->tok);
	emu_free(b->p);
	emu_free(b->q);
	emu_free(b->scratch);
	emu_free(b->iter);
}

/* grid: one block per (unit, slice); the sync words must be back at 0 */
static void vlaunch(const emu_kernel *k, vbuf *b, uint64_t seed, int block)
{
	uint32_t *sw = kern_seed(seed);
	void *args[] = {&b->path, &b->otok, &b->counts, &b->tree, &b->tok, &b->p, &b->q, &b->scratch,
	                &sw, &b->iter};
	launch(k, d3((unsigned)b->grid, 1, 1), d3((unsigned)block, 1, 1), args);
	for (int i = 0; i < b->n_sync; i++)
		if (b->sync[i] != 0)
			fail_msg("verify left sync word %d of %d at %d, expected 0", i, b->n_sync,
			         b->sync[i]);
	emu_free(sw);
}

static int rule_for(int method)
{
	switch (method) {
	case RT_VERIFY_RRS:
	case M_CHAIN:
		return RT_EXPAND_SAMPLE;
	case RT_VERIFY_RRSW:
		return RT_EXPAND_SAMPLE_WOR;
	case RT_VERIFY_SPECHUB:
		return RT_EXPAND_SPECHUB;
	default:
		return RT_EXPAND_TOPK;
	}
}

static long g_runs, g_accepted, g_mismatch;

/* A draft far from the target in check() (its logits drawn apart from the
 * target's, not near them), so that a node's children are rejected several
 * in a row; g_rej3 counts the runs where the reference rejected 3 or more
 * children of one node in a row. */
static int g_far = 0;
static long g_rej3;

/* Absent nodes in check(): none; a level cut (every node deeper than a
 * depth drawn per seed, 0 .. depth_max, is -1: the SpecDec++ shape, on a
 * chain the cut after depth 0..D); or random subsets (each child absent
 * with probability 1/3, its subtree left as drafted: unreachable). */
enum { ABS_NONE = 0, ABS_LEVELS, ABS_SUBSETS, ABS_RANGE };

/* ABS_RANGE: random subsets as ABS_SUBSETS, but with tokens >= V (V itself
 * or 0x7fffffff, the id the old tree_expand wrote for a missing child),
 * which the kernel must treat as absent without reading p, q or its
 * scratch at them; the host reference (which refuses them) then sees -1. */
static void mark_absent(const rt_tree *t, int mode, int cut, int V, int32_t *tok)
{
	for (int u = 1; u < t->n; u++)
		if ((mode == ABS_LEVELS && t->depth[u] > cut) ||
		    ((mode == ABS_SUBSETS || mode == ABS_RANGE) && rnd() < -1.0 / 3))
			tok[u] = mode != ABS_RANGE ? -1 : rnd() < 0 ? V : 0x7fffffff;
}

/* One configuration, n_seeds seeds: fresh logits per seed; p = rt_probs of
 * the target logits with s, q = rt_probs(draft logits) with the draft's own
 * sampling (temperature max(T, 0.6), no top-k/top-p, so that every rule has
 * enough support); children drawn by rt_expand_node with the method's rule. */
static void check_ex(const char *tree_spec, int method, int V, float temp, int top_k, float top_p,
                     int n_seeds, int block, int absent)
{
	rt_tree t;
	sw_err err = {0};
	if (rt_tree_parse(tree_spec, NULL, &t, &err))
		fail_msg("%s", err.msg);
	const int chain_q = method != M_CHAIN || top_k != 1; /* top_k 1 marks a one-hot chain */
	const int VQ = g_vq ? g_vq : V;
	const emu_kernel *k = verify_kernel(&t, V, method, chain_q, block);
	vbuf b;
	vbuf_init(&b, &t, V, method, block);
	size_t nv = (size_t)t.n * V;
	float *zt = malloc(nv * sizeof(float)), *zd = malloc(nv * sizeof(float));
	float *scr = malloc(2 * (size_t)V * sizeof(float)), *tmp = malloc((size_t)V * sizeof(float));
	int *idx = malloc((size_t)V * sizeof(int));
	rt_sampling s = {.temperature = temp, .top_k = method == M_CHAIN ? 0 : top_k, .top_p = top_p};
	rt_sampling sd = {.temperature = temp > 0.6f ? temp : 0.6f, .top_k = 0, .top_p = 1.0f};

	for (int sd_i = 0; sd_i < n_seeds; sd_i++) {
		uint64_t seed = 0x5eed0000ull + (uint64_t)sd_i * 7919u + (uint64_t)V;
		uint32_t iter = (uint32_t)(sd_i * 3 + 1);
		for (size_t i = 0; i < nv; i++) {
			zt[i] = (float)(3.0 * rnd());
			zd[i] = g_far ? (float)(3.0 * rnd()) : zt[i] + (float)(0.5 * rnd());
		}
		for (int u = 0; u < t.n; u++) {
			rt_probs(b.p + (size_t)u * V, zt + (size_t)u * V, V, &s, idx);
			rt_probs(b.q + (size_t)u * VQ, zd + (size_t)u * V, VQ, &sd, idx);
		}
		b.tok[0] = (int32_t)(V / 3);
		for (int u = 0; u < t.n; u++) {
			int nc = t.n_children[u];
			int32_t ct[RT_TREE_MAX_NODES];
			if (!nc)
				continue;
			/* Greedy/one-hot trees: half the time follow the target argmax so
			 * that deep acceptances happen. */
			if (rt_expand_node(rule_for(method), b.q + (size_t)u * VQ, VQ, nc, seed, iter,
			                   (uint32_t)u, ct, NULL, NULL))
				fail_msg("%s: expansion failed at node %d", tree_spec, u);
			if ((method == RT_VERIFY_GREEDY || method == RT_VERIFY_ONEHOT) && (sd_i & 1))
				ct[0] = rt_argmax(b.p + (size_t)u * V, V);
			for (int i = 0; i < nc; i++)
				b.tok[t.child_list[t.child_start[u] + i]] = ct[i];
		}
		const int cut = (sd_i / 2) % (t.depth_max + 1); /* both parities of sd_i per cut */
		mark_absent(&t, absent, cut, V, b.tok);
		*b.iter = iter;
		vlaunch(k, &b, seed, block);
		for (int u = 1; u < t.n; u++) /* what the kernel must have made of them */
			if (b.tok[u] >= V)
				b.tok[u] = -1;

		int want_acc;
		int32_t want_fin;
		int want_path[RT_TREE_MAX_DEPTH + 1];
		if (VQ < V) { /* the specification itself: q = 0 beyond VQ */
			int32_t tb[5 * RT_TREE_MAX_NODES], pa[RT_TREE_MAX_DEPTH + 2];
			rt_tree_table(&t, tb);
			const int n = ref_verify_tree_vq(method, tb, t.n, b.tok, b.p, chain_q ? b.q : NULL, V,
			                                 VQ, seed, iter, scr, pa, NULL, &want_fin, NULL);
			if (n < 1)
				fail_msg("%s: ref_verify_tree_vq refused", tree_spec);
			want_acc = n - 1;
			for (int i = 0; i < n; i++)
				want_path[i] = pa[i];
		} else if (method == M_CHAIN) {
			/* rt_verify_chain processes logits itself: the same rt_probs. */
			int g = absent == ABS_LEVELS && cut < t.n - 1 ? cut : t.n - 1; /* the drafted length */
			if (absent == ABS_SUBSETS || absent == ABS_RANGE)
				for (g = 0; g < t.n - 1 && b.tok[g + 1] >= 0;)
					g++;
			s.top_k = top_k == 1 ? 0 : top_k;
			want_acc = rt_verify_chain(zt, &s, chain_q ? b.q : NULL, b.tok + 1, g, V, seed, iter,
			                           &want_fin, scr, tmp, idx);
			for (int i = 0; i <= want_acc; i++)
				want_path[i] = i;
		} else {
			rt_tree_result res;
			if (rt_verify_tree(&t, method, b.tok, b.p, b.q, V, seed, iter, &res, scr))
				fail_msg("%s: rt_verify_tree failed", tree_spec);
			want_acc = res.n_path - 1;
			want_fin = res.final;
			memcpy(want_path, res.path, sizeof(int) * (size_t)res.n_path);
		}
		/* counts[0..2]: accepted, emitted, final token; then the path and
		 * the emitted tokens, compared once the counts agree */
		int32_t want_cnt[3] = {want_acc, want_acc + 1, want_fin}, want_p[RT_TREE_MAX_DEPTH + 1],
			want_ot[RT_TREE_MAX_DEPTH + 1];
		for (int i = 0; i <= want_acc; i++) {
			want_p[i] = want_path[i];
			want_ot[i] = i < want_acc ? b.tok[want_path[i + 1]] : want_fin;
		}
		char what[160];
		snprintf(what, sizeof(what), "%s method %d V %d T %.2f k %d p %.2f seed %d", tree_spec,
		         method, V, (double)temp, top_k, (double)top_p, sd_i);
		const kern_out outs[] = {
			{.name = "counts", .type = KERN_I32, .got = b.counts, .want = want_cnt, .n = 3},
			{.name = "path", .type = KERN_I32, .got = b.path, .want = want_p,
			 .n = (size_t)want_acc + 1},
			{.name = "out_tok", .type = KERN_I32, .got = b.otok, .want = want_ot,
			 .n = (size_t)want_acc + 1},
		};
		size_t bad = kern_mismatches(what, &outs[0]);
		if (!bad)
			bad = kern_mismatches(what, &outs[1]) + kern_mismatches(what, &outs[2]);
		g_mismatch += bad > 0;
		g_runs++;
		g_accepted += want_acc;
		/* rejections in a row: the present children before the accepted
		 * one on the path, all of them at the node the path ends at */
		int most = 0;
		for (int d = 0; d <= want_acc; d++) {
			const int u = want_path[d], *cl = t.child_list + t.child_start[u];
			int r = 0;
			for (int i = 0; i < t.n_children[u] && (d == want_acc || cl[i] != want_path[d + 1]);
			     i++)
				r += b.tok[cl[i]] >= 0;
			most = r > most ? r : most;
		}
		g_rej3 += most >= 3;
	}
	if (b.counts[3] < 0 || b.counts[4] != b.counts[3])
		fail_msg("accumulators %d %d", b.counts[3], b.counts[4]);
	free(zt);
	free(zd);
	free(scr);
	free(tmp);
	free(idx);
	vbuf_free(&b);
}

static void check(const char *tree_spec, int method, int V, float temp, int top_k, float top_p,
                  int n_seeds, int block)
{
	check_ex(tree_spec, method, V, temp, top_k, top_p, n_seeds, block, ABS_NONE);
}

static void report(const char *what)
{
	print_message("  %s: %ld runs, %ld accepted draft tokens, %ld mismatches\n", what, g_runs,
	              g_accepted, g_mismatch);
	assert_int_equal(g_mismatch, 0);
	g_runs = g_accepted = g_mismatch = 0;
}

static void test_verify_chain(void **state)
{
	(void)state;
	static const float temps[] = {0.6f, 1.0f};
	for (int a = 0; a < 2; a++) {
		check("chain:1", M_CHAIN, 1000, temps[a], 0, 1.0f, 12, 64);
		check("chain:5", M_CHAIN, 1000, temps[a], 0, 1.0f, 12, 64);
		check("chain:5", M_CHAIN, 1000, temps[a], 1, 1.0f, 8, 64);  /* one-hot draft */
		check("chain:5", M_CHAIN, 4099, temps[a], 0, 0.9f, 4, 128);
		check("chain:5", RT_VERIFY_RRS, 1000, temps[a], 20, 0.9f, 8, 64);
	}
	check("chain:5", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 8, 64);
	check("chain:5", M_CHAIN, 1000, 0.0f, 0, 1.0f, 6, 64); /* T = 0: one-hot p */
	report("chain");
}

static void test_verify_trees(void **state)
{
	(void)state;
	static const float temps[] = {0.6f, 1.0f};
	for (int a = 0; a < 2; a++) {
		check("eagle25", RT_VERIFY_RRS, 1000, temps[a], 0, 1.0f, 6, 128);
		check("eagle25", RT_VERIFY_RRSW, 1000, temps[a], 50, 0.9f, 6, 128);
		check("eagle25", RT_VERIFY_ONEHOT, 1000, temps[a], 0, 0.8f, 6, 128);
		check("sequoia63", RT_VERIFY_RRS, 1000, temps[a], 0, 1.0f, 4, 128);
		check("sequoia63", RT_VERIFY_RRSW, 1000, temps[a], 0, 0.95f, 4, 128);
		check("biseq8", RT_VERIFY_SPECHUB, 1000, temps[a], 0, 1.0f, 8, 64);
		check("biseq16", RT_VERIFY_SPECHUB, 1000, temps[a], 30, 0.9f, 8, 64);
		check("medusa63", RT_VERIFY_ONEHOT, 1000, temps[a], 0, 1.0f, 4, 128);
	}
	check("eagle25", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 6, 128);
	check("medusa63", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 6, 128);
	check("medusa63", RT_VERIFY_ONEHOT, 1000, 0.0f, 0, 1.0f, 4, 128);
	check("sequoia63", RT_VERIFY_RRS, 1000, 0.0f, 0, 1.0f, 4, 128);
	report("trees V=1000");
}

static void test_verify_vocab(void **state)
{
	(void)state;
	check("eagle25", RT_VERIFY_RRSW, 4099, 1.0f, 0, 1.0f, 3, 256);
	check("biseq16", RT_VERIFY_SPECHUB, 4099, 0.6f, 0, 1.0f, 3, 256);
	check("sequoia63", RT_VERIFY_RRS, 4099, 0.6f, 40, 0.9f, 2, 256);
	check("medusa63", RT_VERIFY_GREEDY, 4099, 0.0f, 0, 1.0f, 2, 256);
	check("chain:5", M_CHAIN, 32003, 1.0f, 0, 1.0f, 2, 256);
	check("eagle25", RT_VERIFY_RRSW, 32003, 0.6f, 0, 0.9f, 1, 256);
	report("vocab 4099 / 32003");
}

static void test_verify_absent(void **state)
{
	(void)state;
	static const float temps[] = {0.6f, 1.0f};
	for (int a = 0; a < 2; a++) {
		check_ex("chain:1", M_CHAIN, 1000, temps[a], 0, 1.0f, 4, 64, ABS_LEVELS);
		check_ex("chain:5", M_CHAIN, 1000, temps[a], 0, 1.0f, 12, 64, ABS_LEVELS);
		check_ex("chain:5", M_CHAIN, 1000, temps[a], 1, 1.0f, 12, 64, ABS_LEVELS); /* one-hot */
		check_ex("chain:5", M_CHAIN, 1000, temps[a], 0, 1.0f, 8, 64, ABS_SUBSETS);
		for (int m = RT_VERIFY_RRS; m <= RT_VERIFY_ONEHOT; m++) {
			check_ex("chain:1", m, 1000, temps[a], 0, 1.0f, 4, 64, ABS_LEVELS);
			check_ex("chain:5", m, 1000, temps[a], 20, 0.9f, 12, 64, ABS_LEVELS);
		}
		check_ex("eagle25", RT_VERIFY_RRS, 1000, temps[a], 0, 1.0f, 8, 128, ABS_LEVELS);
		check_ex("eagle25", RT_VERIFY_RRS, 1000, temps[a], 0, 1.0f, 6, 128, ABS_SUBSETS);
		check_ex("eagle25", RT_VERIFY_RRSW, 1000, temps[a], 50, 0.9f, 8, 128, ABS_LEVELS);
		check_ex("eagle25", RT_VERIFY_RRSW, 1000, temps[a], 50, 0.9f, 6, 128, ABS_SUBSETS);
		check_ex("eagle25", RT_VERIFY_ONEHOT, 1000, temps[a], 0, 0.8f, 6, 128, ABS_SUBSETS);
		check_ex("sequoia63", RT_VERIFY_RRS, 1000, temps[a], 0, 1.0f, 6, 128, ABS_SUBSETS);
		check_ex("biseq8", RT_VERIFY_SPECHUB, 1000, temps[a], 0, 1.0f, 8, 64, ABS_LEVELS);
		check_ex("biseq16", RT_VERIFY_SPECHUB, 1000, temps[a], 30, 0.9f, 10, 64, ABS_SUBSETS);
		check_ex("medusa63", RT_VERIFY_ONEHOT, 1000, temps[a], 0, 1.0f, 6, 128, ABS_LEVELS);
	}
	check_ex("chain:1", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 4, 64, ABS_LEVELS);
	check_ex("chain:5", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 12, 64, ABS_LEVELS);
	check_ex("chain:5", M_CHAIN, 1000, 0.0f, 0, 1.0f, 12, 64, ABS_LEVELS);
	check_ex("eagle25", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 8, 128, ABS_SUBSETS);
	check_ex("medusa63", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 8, 128, ABS_LEVELS);
	check_ex("biseq16", RT_VERIFY_SPECHUB, 4099, 0.6f, 0, 1.0f, 4, 256, ABS_SUBSETS);
	report("absent nodes");
}

/* Tokens >= V: never read, taken as absent, by every method. */
static void test_verify_out_of_range(void **state)
{
	(void)state;
	check_ex("chain:5", M_CHAIN, 1000, 1.0f, 0, 1.0f, 8, 64, ABS_RANGE);
	check_ex("chain:5", M_CHAIN, 1000, 1.0f, 1, 1.0f, 8, 64, ABS_RANGE); /* one-hot */
	check_ex("eagle25", RT_VERIFY_RRS, 1000, 1.0f, 0, 1.0f, 6, 128, ABS_RANGE);
	check_ex("eagle25", RT_VERIFY_RRSW, 1000, 0.6f, 50, 0.9f, 6, 128, ABS_RANGE);
	check_ex("eagle25", RT_VERIFY_ONEHOT, 1000, 1.0f, 0, 0.8f, 6, 128, ABS_RANGE);
	check_ex("biseq16", RT_VERIFY_SPECHUB, 1000, 1.0f, 0, 1.0f, 10, 64, ABS_RANGE);
	check_ex("eagle25", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 8, 128, ABS_RANGE);
	report("tokens >= V");
}

/* Every method over vocabulary slices: 2, 3 and 7 slices (slice widths
 * that do not divide V, a last slice shorter than the others, empty slices
 * at V = 10), with and without absent nodes; the tree methods' first
 * rejection from the slices' tables, later ones from the walk's passes. */
static void test_verify_slices(void **state)
{
	(void)state;
	static const int sl[] = {2, 3, 7};
	for (int i = 0; i < 3; i++) {
		g_slices = sl[i];
		check("chain:5", M_CHAIN, 1000, 1.0f, 0, 1.0f, 8, 64);
		check("chain:5", M_CHAIN, 4099, 0.6f, 0, 0.9f, 4, 128);
		check("chain:5", M_CHAIN, 1000, 0.6f, 1, 1.0f, 6, 64); /* one-hot draft */
		check("chain:5", M_CHAIN, 10, 1.0f, 0, 1.0f, 12, 64);
		check("chain:5", M_CHAIN, 1000, 0.0f, 0, 1.0f, 4, 64); /* T = 0: one-hot p */
		check_ex("chain:5", M_CHAIN, 1000, 0.6f, 0, 1.0f, 8, 64, ABS_LEVELS);
		check("eagle25", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 6, 128);
		check("medusa63", RT_VERIFY_GREEDY, 4099, 0.0f, 0, 1.0f, 2, 256);
		check("chain:5", RT_VERIFY_GREEDY, 10, 0.0f, 0, 1.0f, 6, 64);
		check_ex("eagle25", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 6, 128, ABS_SUBSETS);
		check("eagle25", RT_VERIFY_RRS, 1000, 0.6f, 0, 1.0f, 4, 64);
		check("eagle25", RT_VERIFY_RRSW, 1000, 1.0f, 50, 0.9f, 4, 64);
		check_ex("eagle25", RT_VERIFY_ONEHOT, 1000, 0.6f, 0, 0.8f, 4, 64, ABS_SUBSETS);
		check("biseq16", RT_VERIFY_SPECHUB, 1000, 1.0f, 30, 0.9f, 4, 64);
		check_ex("sequoia63", RT_VERIFY_RRSW, 10, 1.0f, 0, 1.0f, 4, 64, ABS_SUBSETS);
		check("sequoia63", RT_VERIFY_RRS, 10, 0.6f, 0, 1.0f, 4, 64);
		check_ex("biseq16", RT_VERIFY_SPECHUB, 10, 1.0f, 0, 1.0f, 4, 64, ABS_LEVELS);
		check("medusa63", RT_VERIFY_ONEHOT, 4099, 0.6f, 0, 1.0f, 2, 128);
	}
	g_slices = 1;
	report("vocabulary slices 2 / 3 / 7");
}

/* Wide trees (8 and 13 children at a node, 4 under each of 6) with a draft
 * far from the target: several rejections in a row at one node, each a
 * child-list unit waiting on the ones before; 1 and 7 slices; V = 10
 * (RRSw drafts 8 of the 10 ids, so residuals run out of mass; RRS repeats
 * tokens) and awkward V; absent children among them. The reference must
 * have rejected 3 or more children in a row in some runs. */
static void test_verify_wide(void **state)
{
	(void)state;
	static const int sl[] = {1, 7};
	g_far = 1;
	g_rej3 = 0;
	for (int i = 0; i < 2; i++) {
		g_slices = sl[i];
		check("branch:8,2", RT_VERIFY_RRS, 1000, 1.0f, 0, 1.0f, 4, 64);
		check("branch:8,2", RT_VERIFY_RRSW, 1000, 1.0f, 0, 1.0f, 4, 64);
		check("branch:8,2", RT_VERIFY_ONEHOT, 1000, 0.6f, 0, 1.0f, 4, 64);
		check("branch:6,4", RT_VERIFY_RRSW, 111, 0.6f, 0, 0.9f, 4, 64);
		check("branch:8,2", RT_VERIFY_RRSW, 10, 1.0f, 0, 1.0f, 6, 64);
		check("branch:8,2", RT_VERIFY_RRS, 10, 1.0f, 0, 1.0f, 6, 64);
		check_ex("sequoia63", RT_VERIFY_RRSW, 260, 1.0f, 0, 1.0f, 3, 64, ABS_SUBSETS);
		check_ex("branch:8,2", RT_VERIFY_ONEHOT, 33, 1.0f, 0, 1.0f, 4, 64, ABS_SUBSETS);
		check("biseq16", RT_VERIFY_SPECHUB, 260, 1.0f, 0, 1.0f, 4, 64);
	}
	g_slices = 1;
	g_far = 0;
	print_message("  %ld runs with 3 or more rejections in a row at one node\n", g_rej3);
	assert_true(g_rej3 > 0);
	report("wide trees, far drafts");
}

/* A tree table that lists a node's children out of ascending id order
 * (valid for the host specification, but a later child's block would wait
 * on a block holding a later ticket): the kernel traps instead of waiting,
 * for the tree methods; greedy never waits and takes it. */
static void test_verify_child_order(void **state)
{
	(void)state;
	rt_tree t;
	sw_err err = {0};
	assert_int_equal(rt_tree_parse("branch:3,2", NULL, &t, &err), 0);
	const int V = 100, B = 64;
	for (int m = RT_VERIFY_GREEDY; m <= RT_VERIFY_ONEHOT; m++) {
		if (m == RT_VERIFY_SPECHUB)
			continue;
		const emu_kernel *k = verify_kernel(&t, V, m, 1, B);
		vbuf b;
		vbuf_init(&b, &t, V, m, B);
		for (size_t i = 0; i < (size_t)t.n * V; i++)
			b.p[i] = b.q[i] = 1.0f / V;
		b.tok[0] = 0;
		for (int u = 1; u < t.n; u++)
			b.tok[u] = u;
		/* the root's children 1, 2, 3 listed as 3, 2, 1 */
		int32_t *cl = b.tree + 3 * t.n + t.child_start[0];
		const int32_t c0 = cl[0];
		cl[0] = cl[2];
		cl[2] = c0;
		*b.iter = 1;
		uint32_t *sw = kern_seed(7);
		void *args[] = {&b.path, &b.otok, &b.counts, &b.tree, &b.tok, &b.p, &b.q, &b.scratch,
		                &sw, &b.iter};
		emu_report rep;
		const int rc = emu_launch(k, d3((unsigned)b.grid, 1, 1), d3(B, 1, 1), 0, args, &rep);
		print_message("  method %d: %s\n", m, rc ? rep.msg : "ran");
		if (m == RT_VERIFY_GREEDY)
			assert_int_equal(rc, 0);
		else
			assert_int_equal(rc, EMU_EINVAL);
		emu_free(sw);
		vbuf_free(&b);
	}
}

/* A draft whose vocabulary is a prefix of the target's (VQ < V, q = 0
 * beyond): every method against ref_verify_tree_vq, with the target argmax
 * beyond VQ in half the greedy / one-hot trees (a drafted token the draft
 * cannot produce: rejected); awkward VQ (V - 1, V - 128, about V / 2). */
static void test_verify_vocab_prefix(void **state)
{
	(void)state;
	static const float temps[] = {0.6f, 1.0f};
	for (int a = 0; a < 2; a++) {
		g_vq = 999;
		check("chain:5", M_CHAIN, 1000, temps[a], 0, 1.0f, 8, 64);
		check("chain:5", M_CHAIN, 1000, temps[a], 1, 1.0f, 6, 64); /* one-hot draft */
		check("eagle25", RT_VERIFY_RRS, 1000, temps[a], 0, 1.0f, 6, 128);
		check("eagle25", RT_VERIFY_ONEHOT, 1000, temps[a], 0, 1.0f, 6, 128);
		g_vq = 872;
		check("eagle25", RT_VERIFY_RRSW, 1000, temps[a], 50, 0.9f, 6, 128);
		check("biseq16", RT_VERIFY_SPECHUB, 1000, temps[a], 0, 1.0f, 8, 64);
		check_ex("eagle25", RT_VERIFY_RRS, 1000, temps[a], 0, 1.0f, 6, 128, ABS_SUBSETS);
		g_vq = 2053;
		check("sequoia63", RT_VERIFY_RRS, 4099, temps[a], 0, 0.9f, 2, 256);
		g_slices = 3;
		check_ex("chain:5", M_CHAIN, 4099, temps[a], 0, 1.0f, 4, 128, ABS_LEVELS);
		g_slices = 1;
	}
	g_vq = 500;
	check("eagle25", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 8, 128);
	g_slices = 3;
	check("medusa63", RT_VERIFY_GREEDY, 1000, 0.0f, 0, 1.0f, 4, 128);
	g_slices = 1;
	g_vq = 0;
	report("draft vocabulary prefix");
}

/* Exactness of the kernel path: a Markov table (V = 5 or 6), root token
 * fixed, children by the host expansion rule, verification by the kernel;
 * the first emitted token must follow the target row p(. | root). With
 * cut, every node deeper than a depth drawn per run (0 .. depth_max, from
 * the test RNG) is absent. */
/* Q_BY_DEPTH 1 (a block drafter's Cartesian tree: one q per level, q
 * (depth_max, VQ)): per seed, fresh p rows and depth rows; the children
 * drawn by ref_tree_expand_q by depth with the method's rule (greedy and
 * one-hot: on odd seeds each node's first child replaced by p's argmax, so
 * deep paths are accepted); the kernel against ref_verify_q with
 * q_by_depth 1 (counts, path, emitted tokens); and, independently of the
 * by-depth code, ref_verify_q by depth against the by-node ref_verify on q
 * materialised per node (row u = row depth(u)). VQ < V: a draft vocabulary
 * prefix. */
static void check_by_depth(const char *tree_spec, int method, int V, int VQ, float temp,
                           int n_seeds, int block)
{
	rt_tree t;
	sw_err err = {0};
	if (rt_tree_parse(tree_spec, NULL, &t, &err))
		fail_msg("%s", err.msg);
	g_qd = 1;
	g_vq = VQ < V ? VQ : 0;
	const emu_kernel *k = verify_kernel(&t, V, method, 1, block);
	vbuf b;
	vbuf_init(&b, &t, V, method, block); /* q: depth_max rows */
	g_qd = 0;
	const int D = t.depth_max;
	float *z = malloc((size_t)V * sizeof(float)), *scr = malloc(2 * (size_t)V * sizeof(float));
	float *qn = malloc((size_t)t.n * VQ * sizeof(float));
	float *zl = malloc((size_t)(D + 1) * V * sizeof(float));
	int *idx = malloc((size_t)V * sizeof(int));
	int32_t tb[5 * RT_TREE_MAX_NODES];
	rt_sampling s = {.temperature = temp, .top_k = 0, .top_p = 1.0f};
	rt_sampling sd = {.temperature = temp > 0.6f ? temp : 0.6f, .top_k = 0, .top_p = 1.0f};
	rt_tree_table(&t, tb);
	for (int sd_i = 0; sd_i < n_seeds; sd_i++) {
		const uint64_t seed = 0xb10cull * (uint64_t)(sd_i + 1) + (uint64_t)V;
		const uint32_t iter = (uint32_t)(sd_i * 5 + 3);
		/* level logits; p of a node at depth d close to them (acceptances) */
		for (size_t i = 0; i < (size_t)(D + 1) * V; i++)
			zl[i] = (float)(4.0 * rnd());
		for (int d = 0; d < D; d++)
			rt_probs(b.q + (size_t)d * VQ, zl + (size_t)d * V, VQ, &sd, idx);
		for (int u = 0; u < t.n; u++) {
			for (int v = 0; v < V; v++)
				z[v] = zl[(size_t)t.depth[u] * V + v] + (float)(0.7 * rnd());
			rt_probs(b.p + (size_t)u * V, z, V, &s, idx);
		}
		for (int u = 0; u < t.n; u++)
			for (int v = 0; v < VQ; v++)
				qn[(size_t)u * VQ + v] = t.n_children[u] ? b.q[(size_t)t.depth[u] * VQ + v] : NAN;
		const char *why = NULL;
		b.tok[0] = V / 3;
		if (ref_tree_expand_q(b.tok, b.q, tb, seed, iter, t.n, VQ, rule_for(method), 0, t.n, 1,
		                      &why))
			fail_msg("%s: ref_tree_expand_q: %s", tree_spec, why);
		if ((method == RT_VERIFY_GREEDY || method == RT_VERIFY_ONEHOT) && (sd_i & 1))
			for (int u = 0; u < t.n; u++)
				if (t.n_children[u])
					b.tok[t.child_list[t.child_start[u]]] = rt_argmax(b.p + (size_t)u * V, V);
		*b.iter = iter;
		memset(b.counts, 0, 5 * sizeof(int32_t));
		vlaunch(k, &b, seed, block);

		int32_t w_path[RT_TREE_MAX_NODES], w_tok[RT_TREE_MAX_NODES], w_cnt[5] = {0};
		int32_t n_path[RT_TREE_MAX_NODES], n_tok[RT_TREE_MAX_NODES], n_cnt[5] = {0};
		if (ref_verify_q(w_path, w_tok, w_cnt, tb, b.tok, b.p, b.q, scr, seed, iter, t.n, V, VQ,
		                 method, 1, &why) ||
		    ref_verify(n_path, n_tok, n_cnt, tb, b.tok, b.p, qn, scr, seed, iter, t.n, V, VQ, method,
		               &why))
			fail_msg("%s method %d: ref_verify: %s", tree_spec, method, why);
		char what[160];
		snprintf(what, sizeof(what), "%s method %d V %d VQ %d T %.2f seed %d Q_BY_DEPTH 1",
		         tree_spec, method, V, VQ, (double)temp, sd_i);
		const int n = w_cnt[1];
		const kern_out outs[] = {
			{.name = "counts", .type = KERN_I32, .got = b.counts, .want = w_cnt, .n = 5},
			{.name = "path", .type = KERN_I32, .got = b.path, .want = w_path, .n = (size_t)n},
			{.name = "out_tok", .type = KERN_I32, .got = b.otok, .want = w_tok, .n = (size_t)n},
			/* by depth == by node, both references */
			{.name = "counts (by node)", .type = KERN_I32, .got = w_cnt, .want = n_cnt, .n = 5},
			{.name = "path (by node)", .type = KERN_I32, .got = w_path, .want = n_path,
			 .n = (size_t)n},
			{.name = "out_tok (by node)", .type = KERN_I32, .got = w_tok, .want = n_tok,
			 .n = (size_t)n},
		};
		size_t bad = kern_mismatches(what, &outs[0]) + kern_mismatches(what, &outs[3]);
		if (!bad)
			for (int i = 1; i < 6; i++)
				bad += i == 3 ? 0 : kern_mismatches(what, &outs[i]);
		g_mismatch += bad > 0;
		g_runs++;
		g_accepted += w_cnt[0];
	}
	g_vq = 0;
	free(z);
	free(zl);
	free(scr);
	free(qn);
	free(idx);
	vbuf_free(&b);
}

static void test_verify_by_depth(void **state)
{
	(void)state;
	static const int methods[] = {RT_VERIFY_GREEDY, RT_VERIFY_RRS, RT_VERIFY_RRSW,
	                              RT_VERIFY_ONEHOT};
	for (int i = 0; i < 4; i++) {
		check_by_depth("branch:3,2,2", methods[i], 1000, 1000, 0.8f, 8, 64);
		check_by_depth("branch:3,2,2", methods[i], 1000, 700, 1.0f, 6, 64);
		check_by_depth("chain:5", methods[i], 777, 777, 0.8f, 6, 64);
	}
	check_by_depth("branch:2,2,2", RT_VERIFY_SPECHUB, 1000, 1000, 0.8f, 8, 64);
	check_by_depth("branch:2,2,2", RT_VERIFY_SPECHUB, 1000, 600, 1.0f, 6, 64);
	check_by_depth("chain:5", M_CHAIN, 1000, 1000, 0.8f, 8, 64);
	check_by_depth("chain:5", M_CHAIN, 1000, 513, 1.0f, 8, 64);
	report("Q_BY_DEPTH 1 (Cartesian trees, chains; VQ = V and VQ < V)");
}

static void chi2_cut(const char *tree_spec, int method, int V, int n, bool cut)
{
	rt_tree t;
	sw_err err = {0};
	if (rt_tree_parse(tree_spec, NULL, &t, &err))
		fail_msg("%s", err.msg);
	const emu_kernel *k = verify_kernel(&t, V, method, 1, 64);
	const int VQ = g_vq ? g_vq : V;
	vbuf b;
	vbuf_init(&b, &t, V, method, 64);
	float *P = malloc((size_t)V * V * sizeof(float)), *Q = malloc((size_t)V * V * sizeof(float));
	tu_random_table(P, V, V, 0.2, 11u + (uint64_t)method);
	tu_random_table(Q, V, V, 0.0, 23u + (uint64_t)method);
	uint64_t counts[8] = {0};
	const int root = 1;
	for (int it = 0; it < n; it++) {
		uint64_t seed = 77;
		uint32_t iter = (uint32_t)it;
		b.tok[0] = root;
		for (int u = 0; u < t.n; u++) {
			memcpy(b.p + (size_t)u * V, P + (size_t)b.tok[u] * V, (size_t)V * sizeof(float));
			/* a narrower draft: its row's first VQ entries, renormalised */
			float *qu = b.q + (size_t)u * VQ;
			double qs = 0;
			for (int x = 0; x < VQ; x++)
				qs += Q[(size_t)b.tok[u] * V + x];
			for (int x = 0; x < VQ; x++)
				qu[x] = VQ < V ? (float)(Q[(size_t)b.tok[u] * V + x] / qs) : Q[(size_t)b.tok[u] * V + x];
			int nc = t.n_children[u];
			int32_t ct[RT_TREE_MAX_NODES];
			if (!nc)
				continue;
			if (rt_expand_node(rule_for(method), qu, VQ, nc, seed, iter, (uint32_t)u, ct, NULL, NULL))
				fail_msg("expansion failed");
			for (int i = 0; i < nc; i++)
				b.tok[t.child_list[t.child_start[u] + i]] = ct[i];
		}
		if (cut)
			mark_absent(&t, ABS_LEVELS, (int)((rnd() + 1.0) * 0.5 * (t.depth_max + 1)), V, b.tok);
		*b.iter = iter;
		vlaunch(k, &b, seed, 64);
		counts[b.otok[0]]++;
	}
	double probs[8];
	for (int x = 0; x < V; x++)
		probs[x] = P[(size_t)root * V + x];
	int df;
	double chi = tu_chi2(counts, probs, V, (uint64_t)n, &df);
	double crit = tu_chi2_crit(df, 1e-4);
	print_message("  %-8s method %d V %d VQ %d%s: chi2 %.2f (df %d, crit %.2f at 1e-4)\n", tree_spec,
	              method, V, VQ, cut ? ", level cut" : "", chi, df, crit);
	if (!(chi < crit))
		fail_msg("%s method %d: chi2 %.2f >= %.2f", tree_spec, method, chi, crit);
	free(P);
	free(Q);
	vbuf_free(&b);
}

static void chi2_one(const char *tree_spec, int method, int V, int n)
{
	chi2_cut(tree_spec, method, V, n, false);
}

static void test_verify_exact(void **state)
{
	(void)state;
	chi2_one("eagle25", RT_VERIFY_RRS, 5, 3000);
	chi2_one("eagle25", RT_VERIFY_RRSW, 5, 3000);
	chi2_one("biseq8", RT_VERIFY_SPECHUB, 6, 3000);
	chi2_one("chain:5", M_CHAIN, 6, 3000);
	chi2_cut("eagle25", RT_VERIFY_RRS, 5, 3000, true);
	chi2_cut("eagle25", RT_VERIFY_RRSW, 5, 3000, true);
	chi2_cut("eagle25", RT_VERIFY_ONEHOT, 5, 3000, true);
	chi2_cut("biseq8", RT_VERIFY_SPECHUB, 6, 3000, true);
	chi2_cut("chain:5", M_CHAIN, 6, 3000, true);
	g_slices = 3; /* two entries a slice */
	chi2_cut("chain:5", M_CHAIN, 6, 3000, true);
	chi2_cut("sequoia63", RT_VERIFY_RRS, 6, 2000, false); /* 13 children at the root */
	chi2_cut("eagle25", RT_VERIFY_RRSW, 6, 3000, true);
	chi2_cut("biseq8", RT_VERIFY_SPECHUB, 6, 3000, true);
	g_slices = 1;
	g_vq = 4; /* a draft over the first 4 or 5 of the 5 or 6 ids */
	chi2_cut("eagle25", RT_VERIFY_RRS, 5, 3000, true);
	chi2_cut("eagle25", RT_VERIFY_RRSW, 5, 3000, false);
	chi2_cut("chain:5", M_CHAIN, 6, 3000, true);
	g_vq = 5;
	chi2_cut("biseq8", RT_VERIFY_SPECHUB, 6, 3000, false);
	g_vq = 0;
}

static void test_verify_nvrtc(void **state)
{
	(void)state;
	static const char *trees[] = {"chain:5", "eagle25", "sequoia63", "biseq16", "medusa63"};
	static const int methods[] = {M_CHAIN, RT_VERIFY_RRSW, RT_VERIFY_RRS, RT_VERIFY_SPECHUB,
	                              RT_VERIFY_GREEDY};
	for (int i = 0; i < 5; i++) {
		rt_tree t;
		sw_err err = {0};
		if (rt_tree_parse(trees[i], NULL, &t, &err))
			fail_msg("%s", err.msg);
		gen_param p[] = {OH_NAME, OH_I("N_NODES", t.n), OH_I("V", 32003), OH_I("VQ", 32000),
		                 OH_I("METHOD", methods[i]), OH_I("CHAIN_Q", 1), OH_I("BLOCK", 512),
		                 OH_I("SLICES", i == 0 || i == 4 ? 5 : 3), OH_I("Q_BY_DEPTH", 0)};
		oh_nvrtc_p(SW_OP_verify, p, 9);
	}
	rt_tree t;
	sw_err err = {0};
	assert_int_equal(rt_tree_parse("medusa63", NULL, &t, &err), 0);
	gen_param p[] = {OH_NAME, OH_I("N_NODES", t.n), OH_I("V", 128256), OH_I("VQ", 128256),
	                 OH_I("METHOD", RT_VERIFY_ONEHOT), OH_I("CHAIN_Q", 1), OH_I("BLOCK", 256),
	                 OH_I("SLICES", 5), OH_I("Q_BY_DEPTH", 0)};
	oh_nvrtc_p(SW_OP_verify, p, 9);
	/* Qwen2-7B's padded vocabulary with Qwen2-0.5B's as the draft's */
	gen_param pg[] = {OH_NAME, OH_I("N_NODES", t.n), OH_I("V", 152064), OH_I("VQ", 151936),
	                  OH_I("METHOD", RT_VERIFY_RRSW), OH_I("CHAIN_Q", 1), OH_I("BLOCK", 256),
	                  OH_I("SLICES", 5), OH_I("Q_BY_DEPTH", 0)};
	oh_nvrtc_p(SW_OP_verify, pg, 9);
	gen_param pc[] = {OH_NAME, OH_I("N_NODES", 6), OH_I("V", 152064), OH_I("VQ", 151936),
	                  OH_I("METHOD", M_CHAIN), OH_I("CHAIN_Q", 1), OH_I("BLOCK", 256),
	                  OH_I("SLICES", 44), OH_I("Q_BY_DEPTH", 0)};
	oh_nvrtc_p(SW_OP_verify, pc, 9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verify_chain),
		cmocka_unit_test(test_verify_trees),
		cmocka_unit_test(test_verify_vocab),
		cmocka_unit_test(test_verify_absent),
		cmocka_unit_test(test_verify_out_of_range),
		cmocka_unit_test(test_verify_slices),
		cmocka_unit_test(test_verify_wide),
		cmocka_unit_test(test_verify_child_order),
		cmocka_unit_test(test_verify_vocab_prefix),
		cmocka_unit_test(test_verify_by_depth),
		cmocka_unit_test(test_verify_exact),
		cmocka_unit_test(test_verify_nvrtc),
	};
	if (getenv("CMOCKA_FILTER"))
		cmocka_set_test_filter(getenv("CMOCKA_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
