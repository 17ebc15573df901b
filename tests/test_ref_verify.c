/* kernels/ref/verify.c and tree_expand.c at the op level, on the kernels'
 * tree table: what the host decoder's wrappers (rt_verify_tree,
 * rt_expand_node, rt_verify_chain) do not reach.
 *   - the chain mode (REF_VERIFY_CHAIN, the verify kernel's METHOD 5) makes
 *     exactly rt_verify_chain's decisions (accepted count and final token),
 *     with a draft q and one-hot, including chains cut short by absent
 *     levels (rt_verify_chain with g = the drafted length);
 *   - a draft vocabulary prefix (ref_verify_tree_vq, Vq < V) decides as q
 *     padded by zeros does;
 *   - ref_verify's outputs (path, emitted tokens, the five counts, two of
 *     them accumulated) are rt_verify_tree's result, for every method;
 *   - ref_tree_table_check accepts every generated tree and refuses each
 *     kind of malformed table, and ref_verify / ref_tree_expand refuse them
 *     too, with a reason, writing nothing;
 *   - ref_tree_expand over one level writes exactly that level's children,
 *     each as rt_expand_node draws it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "decode/chain.h"
#include "decode/tree_verify.h"
#include "kernels/ref/ref.h"
#include "testutil.h"

static const char *const TREES[] = {"chain:1", "chain:4", "kary:2:3", "branch:3,2,1",
                                    "batch:3:2", "biseq8", "eagle25", "medusa63"};
#define N_TREES ((int)(sizeof(TREES) / sizeof(TREES[0])))

static void parse_tree(const char *spec, rt_tree *t)
{
	sw_err err;
	if (rt_tree_parse(spec, NULL, t, &err))
		fail_msg("%s: %s", spec, err.msg);
}

/* rows of V probabilities: random, some zeros */
static void random_rows(float *x, int rows, int V, uint64_t *g)
{
	tu_random_table(x, rows, V, 0.3, tu_rand(g));
}

static void test_chain_mode(void **state)
{
	(void)state;
	uint64_t g = 0x5eed0001;
	int checked = 0, cut = 0, rejected = 0;
	for (int it = 0; it < 3000; it++) {
		const int D = 1 + (int)(tu_rand(&g) % 6), V = 2 + (int)(tu_rand(&g) % 40);
		const int one_hot = tu_rand(&g) % 3 == 0;
		char spec[32];
		snprintf(spec, sizeof(spec), "chain:%d", D);
		rt_tree t;
		parse_tree(spec, &t);
		const int n = t.n;
		int32_t tb[5 * RT_TREE_MAX_NODES], tok[RT_TREE_MAX_NODES];
		float *logits = malloc(sizeof(float) * (size_t)n * V);
		float *p = malloc(sizeof(float) * (size_t)n * V), *q = malloc(sizeof(float) * (size_t)n * V);
		float *pb = malloc(sizeof(float) * V), *tmp = malloc(sizeof(float) * V);
		float *scratch = malloc(sizeof(float) * 2 * V);
		int *idx = malloc(sizeof(int) * V);
		rt_sampling s = {.temperature = (float)(0.3 + tu_uniform(&g)),
		                 .top_k = tu_rand(&g) % 3 ? 0 : 1 + (int)(tu_rand(&g) % V),
		                 .top_p = tu_rand(&g) % 3 ? 1.0f : (float)(0.5 + 0.5 * tu_uniform(&g))};
		for (int i = 0; i < n * V; i++)
			logits[i] = (float)(6 * tu_uniform(&g) - 3);
		for (int j = 0; j < n; j++)
			rt_probs(p + (size_t)j * V, logits + (size_t)j * V, V, &s, idx);
		random_rows(q, n, V, &g);
		/* drafted tokens: mostly likely under p (acceptances), some not */
		tok[0] = (int32_t)(tu_rand(&g) % V);
		for (int u = 1; u < n; u++)
			tok[u] = tu_rand(&g) % 4 ? rt_argmax(p + (size_t)(u - 1) * V, V)
			                         : (int32_t)(tu_rand(&g) % V);
		int g_len = D; /* drafted length */
		if (tu_rand(&g) % 4 == 0) {
			g_len = (int)(tu_rand(&g) % (D + 1));
			for (int u = g_len + 1; u < n; u++)
				tok[u] = -1;
			cut += g_len < D;
		}
		const uint64_t seed = tu_rand(&g);
		const uint32_t iter = (uint32_t)tu_rand(&g);
		int32_t want_fin = -1;
		const int want = rt_verify_chain(logits, &s, one_hot ? NULL : q, tok + 1, g_len, V, seed,
		                                 iter, &want_fin, pb, tmp, idx);
		rt_tree_table(&t, tb);
		int32_t path[REF_TREE_MAX_DEPTH + 1], acc[REF_TREE_MAX_DEPTH + 1], fin = -2;
		const int np = ref_verify_tree(REF_VERIFY_CHAIN, tb, n, tok, p, one_hot ? NULL : q, V,
		                               seed, iter, scratch, path, acc, &fin, NULL);
		assert_int_equal(np, want + 1);
		assert_int_equal(fin, want_fin);
		for (int i = 0; i < np; i++)
			assert_int_equal(path[i], i);
		for (int i = 0; i + 1 < np; i++)
			assert_int_equal(acc[i], 0);
		rejected += want < g_len;
		checked++;
		free(logits);
		free(p);
		free(q);
		free(pb);
		free(tmp);
		free(scratch);
		free(idx);
	}
	print_message("chain mode: %d cases (%d cut short, %d with a rejection)\n", checked, cut,
	              rejected);
	assert_true(cut > 100 && rejected > 300 && rejected < checked - 300);
}

/* A draft vocabulary prefix: ref_verify_tree_vq with q rows of Vq < V
 * entries makes exactly the decisions of ref_verify_tree with those rows
 * padded by zeros to V, for every method (the chain mode with and without
 * q) and tree, drafted tokens on both sides of Vq (a token >= Vq has q = 0:
 * always rejected), absent children; Vq outside 1..V is refused. */
static void test_vocab_prefix(void **state)
{
	(void)state;
	uint64_t g = 0x5eed0005;
	int beyond = 0, accepted = 0, checked = 0;
	for (int it = 0; it < 1200; it++) {
		rt_tree t;
		parse_tree(TREES[it % N_TREES], &t);
		const int n = t.n, V = 4 + (int)(tu_rand(&g) % 40), Vq = 1 + (int)(tu_rand(&g) % (V - 1));
		const int method = it / N_TREES % 6, one_hot = method == REF_VERIFY_CHAIN && it % 3 == 0;
		if (method == REF_VERIFY_CHAIN && strncmp(TREES[it % N_TREES], "chain:", 6))
			continue;
		float *p = malloc(sizeof(float) * (size_t)n * V), *qn = malloc(sizeof(float) * (size_t)n * Vq);
		float *qp = calloc((size_t)n * V, sizeof(float));
		float *s1 = malloc(sizeof(float) * 2 * V), *s2 = malloc(sizeof(float) * 2 * V);
		int32_t tb[5 * RT_TREE_MAX_NODES], tok[RT_TREE_MAX_NODES], pa[2][RT_TREE_MAX_DEPTH + 2];
		int32_t fin[2], acc[2][RT_TREE_MAX_DEPTH + 2];
		random_rows(p, n, V, &g);
		random_rows(qn, n, Vq, &g);
		for (int u = 0; u < n; u++)
			memcpy(qp + (size_t)u * V, qn + (size_t)u * Vq, sizeof(float) * (size_t)Vq);
		for (int u = 0; u < n; u++) {
			/* mostly inside the draft's vocabulary, sometimes beyond it */
			tok[u] = (int32_t)(tu_rand(&g) % 5 ? tu_rand(&g) % Vq : tu_rand(&g) % V);
			if (u && tu_rand(&g) % 8 == 0)
				tok[u] = -1;
			beyond += tok[u] >= Vq;
		}
		if (method == REF_VERIFY_SPECHUB) /* make every present pair a SpecHub pair */
			for (int u = 0; u < n; u++) {
				const int *ch = t.child_list + t.child_start[u];
				if (t.n_children[u] != 2 || tok[ch[0]] < 0 || tok[ch[1]] < 0)
					continue;
				const float *qu = qn + (size_t)u * Vq;
				const int a = rt_argmax(qu, Vq);
				int o = (a + 1) % Vq;
				while (o != a && !(qu[o] > 0.0f))
					o = (o + 1) % Vq;
				tok[ch[0]] = o;
				tok[ch[1]] = a;
			}
		rt_tree_table(&t, tb);
		const uint64_t seed = tu_rand(&g);
		const char *why[2] = {NULL, NULL};
		const int n0 = ref_verify_tree(method, tb, n, tok, p, one_hot ? NULL : qp, V, seed,
		                               (uint32_t)it, s1, pa[0], acc[0], &fin[0], &why[0]);
		const int n1 = ref_verify_tree_vq(method, tb, n, tok, p, one_hot ? NULL : qn, V, Vq, seed,
		                                  (uint32_t)it, s2, pa[1], acc[1], &fin[1], &why[1]);
		assert_int_equal(n0, n1);
		if (n0 > 0) {
			assert_int_equal(fin[0], fin[1]);
			assert_memory_equal(pa[0], pa[1], sizeof(int32_t) * (size_t)n0);
			accepted += n0 - 1;
			checked++;
		}
		free(p);
		free(qn);
		free(qp);
		free(s1);
		free(s2);
	}
	float p1[4] = {0.25f, 0.25f, 0.25f, 0.25f}, sc[8];
	int32_t tb1[5] = {-1, 0, 0, 0, 0}, tok1[1] = {0}, path[2], f1;
	const char *why = NULL;
	assert_int_equal(ref_verify_tree_vq(REF_VERIFY_RRS, tb1, 1, tok1, p1, p1, 4, 5, 1, 0, sc, path,
	                                    NULL, &f1, &why), REF_EINVAL);
	assert_non_null(why);
	why = NULL;
	assert_int_equal(ref_verify_tree_vq(REF_VERIFY_RRS, tb1, 1, tok1, p1, p1, 4, 0, 1, 0, sc, path,
	                                    NULL, &f1, &why), REF_EINVAL);
	assert_non_null(why);
	print_message("vocabulary prefix: %d cases, %d accepted draft tokens, %d tokens beyond Vq\n",
	              checked, accepted, beyond);
	assert_true(checked > 600 && accepted > 150 && beyond > 200);
}

/* ref_verify (the op) against rt_verify_tree, every method and tree. */
static void test_op_outputs(void **state)
{
	(void)state;
	uint64_t g = 0x5eed0002;
	for (int it = 0; it < 600; it++) {
		rt_tree t;
		parse_tree(TREES[it % N_TREES], &t);
		const int n = t.n, V = 3 + (int)(tu_rand(&g) % 30), method = it / N_TREES % 5;
		float *p = malloc(sizeof(float) * (size_t)n * V), *q = malloc(sizeof(float) * (size_t)n * V);
		float *s1 = malloc(sizeof(float) * 2 * V), *s2 = malloc(sizeof(float) * 2 * V);
		int32_t tb[5 * RT_TREE_MAX_NODES], tok[RT_TREE_MAX_NODES];
		random_rows(p, n, V, &g);
		random_rows(q, n, V, &g);
		for (int u = 0; u < n; u++)
			tok[u] = (int32_t)(tu_rand(&g) % V);
		if (method == RT_VERIFY_SPECHUB) /* make every pair a SpecHub pair */
			for (int u = 0; u < n; u++) {
				if (t.n_children[u] != 2)
					continue;
				const float *qu = q + (size_t)u * V;
				const int a = rt_argmax(qu, V), *ch = t.child_list + t.child_start[u];
				int o = (a + 1) % V;
				while (!(qu[o] > 0.0f))
					o = (o + 1) % V;
				tok[ch[0]] = o;
				tok[ch[1]] = a;
			}
		const uint64_t seed = tu_rand(&g);
		const uint32_t iter = (uint32_t)it;
		rt_tree_result res;
		const int rc = rt_verify_tree(&t, method, tok, p, q, V, seed, iter, &res, s1);
		rt_tree_table(&t, tb);
		int32_t path[RT_TREE_MAX_DEPTH + 2], otok[RT_TREE_MAX_DEPTH + 2], counts[5] = {0, 0, 0, 7, 9};
		for (int i = 0; i < RT_TREE_MAX_DEPTH + 2; i++)
			path[i] = otok[i] = -99;
		const int rc2 = ref_verify(path, otok, counts, tb, tok, p, q, s2, seed, iter, n, V, V,
		                           method, NULL);
		assert_int_equal(rc != 0, rc2 != 0);
		const int m = rc ? 0 : res.n_path;
		if (rc) { /* refused: nothing written */
			assert_int_equal(path[0], -99);
			assert_int_equal(otok[0], -99);
			assert_int_equal(counts[0] + counts[1] + counts[2] + counts[3] + counts[4], 16);
		} else {
			for (int i = 0; i < m; i++)
				assert_int_equal(path[i], res.path[i]);
			assert_int_equal(path[m], -99);
			for (int i = 1; i < m; i++)
				assert_int_equal(otok[i - 1], tok[res.path[i]]);
			assert_int_equal(otok[m - 1], res.final);
			assert_int_equal(otok[m], -99);
			assert_int_equal(counts[0], m - 1);
			assert_int_equal(counts[1], m);
			assert_int_equal(counts[2], res.final);
			assert_int_equal(counts[3], 7 + m - 1);
			assert_int_equal(counts[4], 9 + m - 1);
		}
		free(p);
		free(q);
		free(s1);
		free(s2);
	}
}

/* One kind of corruption of a valid table; returns 0 when the tree is too
 * small for it. */
static int corrupt(int32_t *tb, int n, int kind)
{
	int32_t *par = tb, *nch = tb + n, *cst = tb + 2 * n, *cl = tb + 3 * n, *dep = tb + 4 * n;
	int u = -1; /* the first node with >= 2 children */
	for (int i = 0; i < n && u < 0; i++)
		if (nch[i] >= 2)
			u = i;
	switch (kind) {
	case 0: /* a parent after its child */
		if (n < 3)
			return 0;
		par[1] = 2;
		return 1;
	case 1: /* a child listed twice (the other one lost) */
		if (u < 0)
			return 0;
		cl[cst[u] + 1] = cl[cst[u]];
		return 1;
	case 2: /* a child outside the tree */
		if (n < 2)
			return 0;
		cl[cst[0]] = n;
		return 1;
	case 3: /* a wrong depth */
		if (n < 2)
			return 0;
		dep[n - 1] += 1;
		return 1;
	case 4: /* the root's depth */
		dep[0] = 1;
		return 1;
	case 5: /* a child list running past the table */
		cst[0] = n;
		return 1;
	case 6: /* a negative child count */
		nch[n - 1] = -1;
		return 1;
	case 7: /* a listed child naming another parent */
		if (u < 0)
			return 0;
		par[cl[cst[u] + 1]] = par[u] >= 0 ? par[u] : 0;
		return u > 0;
	case 8: /* a node missing from its parent's list (count one short) */
		if (n < 2)
			return 0;
		nch[par[n - 1]] -= 1;
		return 1;
	default:
		return 0;
	}
}

static void test_table_check(void **state)
{
	(void)state;
	int refused_cases = 0;
	for (int ti = 0; ti < N_TREES; ti++) {
		rt_tree t;
		parse_tree(TREES[ti], &t);
		const int n = t.n, V = 5;
		int32_t tb[5 * RT_TREE_MAX_NODES], bad[5 * RT_TREE_MAX_NODES];
		rt_tree_table(&t, tb);
		const char *why = NULL;
		assert_int_equal(ref_tree_table_check(tb, n, &why), 0);
		assert_null(why);
		for (int kind = 0; kind < 9; kind++) {
			memcpy(bad, tb, sizeof(int32_t) * 5 * (size_t)n);
			if (!corrupt(bad, n, kind))
				continue;
			why = NULL;
			if (ref_tree_table_check(bad, n, &why) != REF_EINVAL || !why)
				fail_msg("%s: corruption %d accepted", TREES[ti], kind);
			/* the ops refuse it too, writing nothing */
			float *p = malloc(sizeof(float) * (size_t)n * V), *sc = malloc(sizeof(float) * 2 * V);
			int32_t tok[RT_TREE_MAX_NODES], out[RT_TREE_MAX_NODES], counts[5] = {1, 2, 3, 4, 5};
			for (int i = 0; i < n * V; i++)
				p[i] = 1.0f / V;
			for (int i = 0; i < n; i++)
				tok[i] = out[i] = 0;
			why = NULL;
			assert_int_equal(ref_verify(out, out, counts, bad, tok, p, p, sc, 1, 0, n, V,
			                            V, REF_VERIFY_RRS, &why), REF_EINVAL);
			assert_non_null(why);
			assert_int_equal(counts[0] + counts[1] + counts[2] + counts[3] + counts[4], 15);
			why = NULL;
			assert_int_equal(ref_tree_expand(tok, p, bad, 1, 0, n, V, REF_EXPAND_TOPK, 0, 1, &why),
			                 REF_EINVAL);
			assert_non_null(why);
			for (int i = 0; i < n; i++)
				assert_int_equal(tok[i], 0);
			free(p);
			free(sc);
			refused_cases++;
		}
	}
	int32_t one[5] = {-1, 0, 0, 0, 0};
	assert_int_equal(ref_tree_table_check(one, 1, NULL), 0);
	assert_int_equal(ref_tree_table_check(one, 0, NULL), REF_EINVAL);
	assert_int_equal(ref_tree_table_check(one, REF_TREE_MAX_NODES + 1, NULL), REF_EINVAL);
	print_message("%d malformed tables refused\n", refused_cases);
	assert_true(refused_cases >= 50);
}

/* ref_tree_expand over each level: the level's children as rt_expand_node
 * draws them, nothing else written; a level range past the tree refused. */
static void test_expand_levels(void **state)
{
	(void)state;
	uint64_t g = 0x5eed0003;
	for (int ti = 0; ti < N_TREES; ti++)
		for (int rule = 0; rule < 4; rule++) {
			rt_tree t;
			parse_tree(rule == RT_EXPAND_SPECHUB ? "biseq8" : TREES[ti], &t);
			const int n = t.n, V = 40;
			float *q = malloc(sizeof(float) * (size_t)n * V);
			int32_t tb[5 * RT_TREE_MAX_NODES], tok[RT_TREE_MAX_NODES];
			random_rows(q, n, V, &g);
			rt_tree_table(&t, tb);
			const uint64_t seed = tu_rand(&g);
			for (int d = 0; d < t.depth_max; d++) {
				const int l0 = t.level_start[d], nl = t.level_start[d + 1] - l0;
				for (int u = 0; u < n; u++) /* the level's own nodes present */
					tok[u] = u >= l0 && u < l0 + nl ? u % V : -7;
				assert_int_equal(ref_tree_expand(tok, q, tb, seed, 3, n, V, rule, l0, nl, NULL), 0);
				for (int u = 0; u < n; u++) /* only the level's children written */
					if (!(u > 0 && t.parent[u] >= l0 && t.parent[u] < l0 + nl))
						assert_int_equal(tok[u], u >= l0 && u < l0 + nl ? u % V : -7);
				for (int u = l0; u < l0 + nl; u++) {
					const int k = t.n_children[u];
					int32_t ch[RT_TREE_MAX_NODES];
					if (!k)
						continue;
					assert_int_equal(rt_expand_node(rule, q + (size_t)u * V, V, k, seed, 3,
					                                (uint32_t)u, ch, NULL, NULL), 0);
					for (int i = 0; i < k; i++)
						assert_int_equal(tok[t.child_list[t.child_start[u] + i]], ch[i]);
				}
			}
			const char *why = NULL;
			assert_int_equal(ref_tree_expand(tok, q, tb, seed, 3, n, V, rule, n - 1, 2, &why),
			                 REF_EINVAL);
			assert_non_null(why);
			free(q);
		}
}

/* ref_tree_expand on a level whose nodes are partly absent (token -1, q row
 * NaN: never read): their children absent, the present nodes' children as
 * rt_expand_node draws them. */
static void test_expand_absent_nodes(void **state)
{
	(void)state;
	uint64_t g = 0x5eed0004;
	for (int rule = 0; rule < 4; rule++) {
		rt_tree t;
		parse_tree(rule == RT_EXPAND_SPECHUB ? "kary:2:3" : "kary:3:3", &t);
		const int n = t.n, V = 17, l0 = t.level_start[1], nl = t.level_start[2] - l0;
		float *q = malloc(sizeof(float) * (size_t)n * V);
		int32_t tb[5 * RT_TREE_MAX_NODES], tok[RT_TREE_MAX_NODES];
		random_rows(q, n, V, &g);
		rt_tree_table(&t, tb);
		int n_absent = 0;
		for (int u = 0; u < n; u++)
			tok[u] = -7;
		for (int u = l0; u < l0 + nl; u++) {
			tok[u] = (u - l0) % 2 ? -1 : u % V;
			if (tok[u] < 0)
				for (int v = 0; v < V; v++)
					q[(size_t)u * V + v] = NAN;
		}
		assert_int_equal(ref_tree_expand(tok, q, tb, 9, 4, n, V, rule, l0, nl, NULL), 0);
		for (int u = l0; u < l0 + nl; u++) {
			const int k = t.n_children[u];
			int32_t ch[RT_TREE_MAX_NODES];
			if (tok[u] >= 0)
				assert_int_equal(rt_expand_node(rule, q + (size_t)u * V, V, k, 9, 4, (uint32_t)u,
				                                ch, NULL, NULL), 0);
			for (int i = 0; i < k; i++) {
				const int32_t y = tok[t.child_list[t.child_start[u] + i]];
				if (tok[u] < 0) {
					assert_int_equal(y, -1);
					n_absent++;
				} else {
					assert_int_equal(y, ch[i]);
					assert_true(y >= 0);
				}
			}
		}
		assert_true(n_absent > 0);
		free(q);
	}
}

/* Exactness of expansion + verification in the references (the host-native
 * engine's path) where the draft's support runs out: Markov tables, draft
 * rows mostly zero (1-3 tokens with q > 0 for 3-4 children), so children
 * and whole subtrees are absent (their p and q rows NaN: never read). The
 * decode loop runs until two tokens are emitted; their joint law must be
 * P(root, x) P(x, y), chi-square at 1e-4 over the V^2 cells. */
static void ref_chi2_absent(const char *spec, int rule, int method, int V, double q_zero, int n)
{
	rt_tree t;
	parse_tree(spec, &t);
	const int N = t.n;
	int32_t tb[5 * RT_TREE_MAX_NODES], tok[RT_TREE_MAX_NODES], path[REF_TREE_MAX_DEPTH + 1];
	float *P = malloc(sizeof(float) * (size_t)V * V), *Q = malloc(sizeof(float) * (size_t)V * V);
	float *p = malloc(sizeof(float) * (size_t)N * V), *q = malloc(sizeof(float) * (size_t)N * V);
	float *scr = malloc(sizeof(float) * 2 * (size_t)V);
	uint64_t *hist = calloc((size_t)V * V, sizeof(uint64_t));
	double *probs = malloc(sizeof(double) * (size_t)V * V);
	rt_tree_table(&t, tb);
	tu_random_table(P, V, V, 0.2, 303u + (uint64_t)rule);
	tu_random_table(Q, V, V, q_zero, 404u + (uint64_t)rule);
	const int root = 1;
	uint32_t iter = 0;
	long n_absent = 0;
	for (int s = 0; s < n; s++) {
		int32_t out[2 * REF_TREE_MAX_DEPTH + 4];
		int n_out = 0;
		tok[0] = root;
		while (n_out < 2) {
			for (int d = 0; d <= t.depth_max; d++) {
				const int l0 = t.level_start[d], nl = t.level_start[d + 1] - l0;
				for (int u = l0; u < l0 + nl; u++) {
					for (int v = 0; v < V; v++) {
						p[(size_t)u * V + v] = tok[u] < 0 ? NAN : P[(size_t)tok[u] * V + v];
						q[(size_t)u * V + v] = tok[u] < 0 ? NAN : Q[(size_t)tok[u] * V + v];
					}
					n_absent += tok[u] < 0;
				}
				if (d < t.depth_max)
					assert_int_equal(ref_tree_expand(tok, q, tb, 77, iter, N, V, rule, l0, nl, NULL),
					                 0);
			}
			int32_t fin;
			const char *why = NULL;
			const int np = ref_verify_tree(method, tb, N, tok, p, q, V, 77, iter, scr, path, NULL,
			                               &fin, &why);
			if (np < 1)
				fail_msg("%s: ref_verify_tree: %s", spec, why);
			for (int i = 1; i < np; i++)
				out[n_out++] = tok[path[i]];
			out[n_out++] = fin;
			tok[0] = fin;
			iter++;
		}
		hist[(size_t)out[0] * V + out[1]]++;
	}
	for (int x = 0; x < V; x++)
		for (int y = 0; y < V; y++)
			probs[x * V + y] = (double)P[root * V + x] * P[(size_t)x * V + y];
	int df;
	const double chi = tu_chi2(hist, probs, V * V, (uint64_t)n, &df), crit = tu_chi2_crit(df, 1e-4);
	print_message("  %-8s rule %d method %d V %d q zeros %.1f: chi2 %.2f (df %d, crit %.2f at 1e-4), "
	              "%.2f absent nodes per iteration\n", spec, rule, method, V, q_zero, chi, df, crit,
	              (double)n_absent / iter);
	assert_true(n_absent > 0);
	if (!(chi < crit))
		fail_msg("%s: chi2 %.2f >= %.2f", spec, chi, crit);
	free(P);
	free(Q);
	free(p);
	free(q);
	free(scr);
	free(hist);
	free(probs);
}

static void test_expand_verify_exact_absent(void **state)
{
	(void)state;
	ref_chi2_absent("kary:4:2", RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW, 5, 0.6, 40000);
	ref_chi2_absent("eagle25", RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW, 6, 0.5, 30000);
	ref_chi2_absent("kary:2:3", RT_EXPAND_SPECHUB, RT_VERIFY_SPECHUB, 5, 0.7, 40000);
	ref_chi2_absent("biseq16", RT_EXPAND_SPECHUB, RT_VERIFY_SPECHUB, 6, 0.6, 30000);
	ref_chi2_absent("kary:4:2", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, 5, 0.6, 40000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chain_mode),
		cmocka_unit_test(test_op_outputs),
		cmocka_unit_test(test_vocab_prefix),
		cmocka_unit_test(test_table_check),
		cmocka_unit_test(test_expand_levels),
		cmocka_unit_test(test_expand_absent_nodes),
		cmocka_unit_test(test_expand_verify_exact_absent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
