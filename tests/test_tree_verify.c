/* Tree verification is exact: for every exact (expansion rule, method) pair,
 * the tokens a tree step emits, continued by the target to L tokens, follow
 * the target's order-1 Markov chain (Pearson chi-square at significance 1e-4,
 * critical value by Wilson-Hilferty via tu_chi2_crit, stated per line), also
 * when some nodes are absent (token -1: SpecDec++ stopped before their level,
 * or a suffix / subset of a node's children undrafted). Also: the
 * duplicate-skipping RRS bug is caught (power), greedy equals a brute-force
 * longest-match search, edge cases, and the lossy rule vs its closed form. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "kernels/philox.h"
#include "decode/chain.h"
#include "testutil.h"
#include "decode/tree_verify.h"

#define ALPHA 1e-4
#define VMAX 8
#define LMAX 3

/* Fills t from parent[] in BFS order (parent[u] < u, depths non-decreasing);
 * children ranked by id. The builder in gen/tree.c is not needed here. */
static void tree_from_parents(rt_tree *t, const int *parent, int n)
{
	memset(t, 0, sizeof(*t));
	t->n = n;
	t->words = (n + 63) / 64;
	int m = 0;
	for (int u = 0; u < n; u++) {
		t->parent[u] = parent[u];
		t->depth[u] = u ? t->depth[parent[u]] + 1 : 0;
		if (t->depth[u] > t->depth_max)
			t->depth_max = t->depth[u];
		t->child_start[u] = m;
		for (int v = u + 1; v < n; v++)
			if (parent[v] == u) {
				t->rank[v] = t->n_children[u]++;
				t->child_list[m++] = v;
			}
		for (int a = u; a >= 0; a = a ? parent[a] : -1)
			t->mask[(size_t)u * t->words + a / 64] |= 1ull << (a % 64);
	}
	for (int d = 0, u = 0; d <= t->depth_max + 1; d++) {
		while (u < n && t->depth[u] < d)
			u++;
		t->level_start[d] = u;
	}
}

/* Order-1 Markov "models": P = target table, D = draft table, row = the
 * previous token. Node u's p and q are the rows at u's own token, so p
 * depends only on the path, as for a real model. */
typedef struct world {
	int V;
	float P[VMAX * VMAX], D[VMAX * VMAX];
} world;

typedef struct tree_step {
	int32_t tok[RT_TREE_MAX_NODES];
	float p[RT_TREE_MAX_NODES * VMAX], q[RT_TREE_MAX_NODES * VMAX];
	rt_tree_result res;
} tree_step;

/* Which nodes a trial leaves undrafted (token -1), chosen from the test RNG,
 * independently of the tokens and of the verification uniforms. */
enum absent_mode {
	ABSENT_NONE = 0,
	ABSENT_PREFIX, /* per trial: a level cut (the SpecDec++ shape) or, per
	                * node, a random number of present children in rank order
	                * (exact for every method) */
	ABSENT_SUBSET, /* also random subsets of a node's children (exact for
	                * RRS, ONEHOT and GREEDY) */
};

static void mark_absent(const rt_tree *t, int mode, int32_t *tok, uint64_t *rng)
{
	if (mode == ABSENT_NONE)
		return;
	int kind = (int)(tu_rand(rng) % (mode == ABSENT_SUBSET ? 3 : 2));
	int cut = (int)(tu_rand(rng) % (uint64_t)(t->depth_max + 1));
	for (int u = 0; u < t->n; u++) {
		int k = t->n_children[u], keep = (int)(tu_rand(rng) % (uint64_t)(k + 1));
		for (int i = 0; i < k; i++) {
			int c = t->child_list[t->child_start[u] + i];
			bool gone = kind == 0 ? t->depth[c] > cut : kind == 1 ? i >= keep : tu_rand(rng) % 3 == 0;
			if (gone || tok[u] < 0) /* undrafted below an undrafted node */
				tok[c] = -1;
		}
	}
}

/* Expands t from root token r0 with the rule, leaves nodes absent by the
 * mode, verifies with the method, and writes the first L emitted tokens to
 * out, continuing from the target table with the test RNG when the step
 * emitted fewer (exact by construction). Returns the accepted draft count. */
static int tree_trial_absent(const rt_tree *t, int rule, int method, const world *w, int r0, uint64_t seed,
                             uint32_t iter, int L, int32_t *out, uint64_t *rng, tree_step *st, int absent)
{
	int V = w->V;
	float scratch[4 * VMAX];
	st->tok[0] = r0;
	for (int u = 0; u < t->n; u++) {
		memcpy(st->p + u * V, w->P + st->tok[u] * V, V * sizeof(float));
		memcpy(st->q + u * V, w->D + st->tok[u] * V, V * sizeof(float));
		int k = t->n_children[u];
		int32_t kids[RT_TREE_MAX_NODES];
		if (k == 0)
			continue;
		assert_int_equal(rt_expand_node(rule, st->q + u * V, V, k, seed, iter, (uint32_t)u, kids, NULL, NULL), 0);
		for (int r = 0; r < k; r++)
			st->tok[t->child_list[t->child_start[u] + r]] = kids[r];
	}
	mark_absent(t, absent, st->tok, rng);
	assert_int_equal(rt_verify_tree(t, method, st->tok, st->p, st->q, V, seed, iter, &st->res, scratch), 0);
	for (int i = 1; i < st->res.n_path; i++)
		assert_true(st->tok[st->res.path[i]] >= 0); /* an absent node is never accepted */
	int n = 0;
	for (int i = 1; i < st->res.n_path && n < L; i++)
		out[n++] = st->tok[st->res.path[i]];
	if (n < L)
		out[n++] = st->res.final;
	while (n < L)
		out[n] = rt_sample_cdf(w->P + out[n - 1] * V, V, tu_uniform(rng)), n++;
	return st->res.n_path - 1;
}

static int tree_trial(const rt_tree *t, int rule, int method, const world *w, int r0, uint64_t seed,
                      uint32_t iter, int L, int32_t *out, uint64_t *rng, tree_step *st)
{
	return tree_trial_absent(t, rule, method, w, r0, seed, iter, L, out, rng, st, ABSENT_NONE);
}

/* Exact law of L tokens after r0 under the target chain; index base V. */
static void chain_probs(const world *w, int r0, int L, double *probs)
{
	int V = w->V, K = 1;
	for (int i = 0; i < L; i++)
		K *= V;
	for (int id = 0; id < K; id++) {
		double pr = 1;
		int prev = r0;
		for (int i = L - 1, rest = id; i >= 0; i--) {
			int div = 1;
			for (int j = 0; j < i; j++)
				div *= V;
			int x = rest / div;
			rest %= div;
			pr *= w->P[prev * V + x];
			prev = x;
		}
		probs[id] = pr;
	}
}

static int seq_index(const int32_t *s, int L, int V)
{
	int id = 0;
	for (int i = 0; i < L; i++)
		id = id * V + s[i];
	return id;
}

/* Chi-square of N tree steps against the chain; returns the statistic minus
 * the critical value (< 0: consistent). */
static double check_tree_absent(const rt_tree *t, int rule, int method, const world *w, int L, int N,
                                uint64_t seed, const char *label, int absent)
{
	static tree_step st;
	int V = w->V, K = (int)pow(V, L);
	double probs[VMAX * VMAX * VMAX];
	uint64_t counts[VMAX * VMAX * VMAX] = { 0 }, rng = seed ^ 0xc0ffee, acc = 0;
	int32_t out[LMAX];
	chain_probs(w, 0, L, probs);
	for (int i = 0; i < N; i++) {
		acc += (uint64_t)tree_trial_absent(t, rule, method, w, 0, seed, (uint32_t)i, L, out, &rng, &st, absent);
		counts[seq_index(out, L, V)]++;
	}
	int df;
	double chi = tu_chi2(counts, probs, K, (uint64_t)N, &df), crit = tu_chi2_crit(df, ALPHA);
	printf("  %-40s %-11s+%-8s chi2 %7.2f df %3d crit %6.2f  accepted/step %.3f\n", label,
	       rt_expand_rule_name(rule), rt_verify_method_name(method), chi, df, crit, (double)acc / N);
	return chi - crit;
}

static double check_tree(const rt_tree *t, int rule, int method, const world *w, int L, int N,
                         uint64_t seed, const char *label)
{
	return check_tree_absent(t, rule, method, w, L, N, seed, label, ABSENT_NONE);
}

static double gauss(uint64_t *s)
{
	return sqrt(-2 * log(tu_uniform(s))) * cos(6.283185307179586 * tu_uniform(s));
}

/* Tables from logits warped by rt_probs (T 0.6, top-k 3, top-p 0.9): the
 * draft logits are the target's plus noise, flattened so that every draft
 * row keeps all 3 top-k tokens (needed for 3 distinct children) and every
 * target row at least 2 (a one-hot row would make the test blind). */
static void warped_world(world *w, int V, uint64_t seed)
{
	rt_sampling s = { .temperature = 0.6f, .top_k = 3, .top_p = 0.9f };
	float zt[VMAX], zd[VMAX];
	int idx[VMAX];
	uint64_t g = seed;
	w->V = V;
	for (int r = 0; r < V; r++) {
		int support;
		do {
			for (int v = 0; v < V; v++) {
				zt[v] = (float)gauss(&g);
				zd[v] = (float)(0.25 * zt[v] + 0.3 * gauss(&g));
			}
			rt_probs(w->P + r * V, zt, V, &s, idx);
			rt_probs(w->D + r * V, zd, V, &s, idx);
			support = 0;
			for (int v = 0; v < V; v++)
				support += (w->D[r * V + v] > 0) + 8 * (w->P[r * V + v] > 0);
		} while (support % 8 < 3 || support / 8 < 2);
	}
}

static const int CHAIN3[] = { -1, 0, 1, 2 };
static const int BIN2[] = { -1, 0, 0, 1, 1, 2, 2 };
static const int WIDE4[] = { -1, 0, 0, 0, 0, 1, 1, 1 };
static const int WIDE3[] = { -1, 0, 0, 0, 1, 1, 1, 3 };
static const int MIXED[] = { -1, 0, 0, 1, 2, 2, 3 }; /* 2, 1 and 2 children */

static const struct { int rule, method; } EXACT[] = {
	{ RT_EXPAND_TOPK, RT_VERIFY_ONEHOT },      { RT_EXPAND_SAMPLE, RT_VERIFY_RRS },
	{ RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW },  { RT_EXPAND_SPECHUB, RT_VERIFY_SPECHUB },
	{ RT_EXPAND_SAMPLE, RT_VERIFY_ONEHOT },
};

static void run_exact(const world *w, const int *wide, int n_wide, const char *tag, uint64_t seed)
{
	rt_tree trees[4];
	const char *names[4] = { "chain:3", "binary depth 2", "wide", "mixed 2/1/2" };
	tree_from_parents(&trees[0], CHAIN3, 4);
	tree_from_parents(&trees[1], BIN2, 7);
	tree_from_parents(&trees[2], wide, n_wide);
	tree_from_parents(&trees[3], MIXED, 7);
	int fails = 0;
	for (size_t e = 0; e < sizeof(EXACT) / sizeof(EXACT[0]); e++)
		for (int ti = 0; ti < 4; ti++) {
			if (EXACT[e].rule == RT_EXPAND_SPECHUB && ti == 2)
				continue; /* > 2 children: not a SpecHub tree */
			char label[96];
			snprintf(label, sizeof(label), "%s %s", tag, names[ti]);
			assert_true(rt_verify_compatible(EXACT[e].rule, EXACT[e].method, false));
			fails += check_tree(&trees[ti], EXACT[e].rule, EXACT[e].method, w, 3, 150000,
			                    seed + 7919 * e + ti, label) >= 0;
		}
	assert_int_equal(fails, 0);
}

/* The same pairs with nodes absent: every method with level cuts and
 * per-node present prefixes; RRS and ONEHOT also with random subsets. */
static void run_exact_absent(const world *w, const int *wide, int n_wide, const char *tag, uint64_t seed)
{
	rt_tree trees[4];
	const char *names[4] = { "chain:3", "binary depth 2", "wide", "mixed 2/1/2" };
	tree_from_parents(&trees[0], CHAIN3, 4);
	tree_from_parents(&trees[1], BIN2, 7);
	tree_from_parents(&trees[2], wide, n_wide);
	tree_from_parents(&trees[3], MIXED, 7);
	int fails = 0;
	for (size_t e = 0; e < sizeof(EXACT) / sizeof(EXACT[0]); e++)
		for (int ti = 0; ti < 4; ti++) {
			int m = EXACT[e].method;
			if (EXACT[e].rule == RT_EXPAND_SPECHUB && ti == 2)
				continue;
			int mode = m == RT_VERIFY_RRS || m == RT_VERIFY_ONEHOT ? ABSENT_SUBSET : ABSENT_PREFIX;
			char label[96];
			snprintf(label, sizeof(label), "%s %s, absent %s", tag, names[ti],
			         mode == ABSENT_SUBSET ? "subsets" : "prefixes");
			fails += check_tree_absent(&trees[ti], EXACT[e].rule, m, w, 3, 100000, seed + 7919 * e + ti,
			                           label, mode) >= 0;
		}
	assert_int_equal(fails, 0);
}

static void test_exact_absent(void **state)
{
	world w = { .V = 5 };
	tu_random_table(w.P, 5, 5, 0.2, 11);
	tu_random_table(w.D, 5, 5, 0.0, 12);
	run_exact_absent(&w, WIDE4, 8, "V5", 300);
	warped_world(&w, 6, 21);
	run_exact_absent(&w, WIDE3, 8, "V6 warped", 400);
}

/* The root's only child absent: a leaf, so every method emits the bonus
 * from p(root) (GREEDY: its argmax) and accepts nothing. */
static void test_absent_root(void **state)
{
	static tree_step st;
	float scratch[4 * VMAX];
	static const int ONE[] = { -1, 0 }, TWO[] = { -1, 0, 0 };
	rt_tree t1, t2;
	tree_from_parents(&t1, ONE, 2);
	tree_from_parents(&t2, TWO, 3);
	world w = { .V = 5 };
	tu_random_table(w.P, 5, 5, 0.2, 51);
	tu_random_table(w.D, 5, 5, 0.0, 52);
	const int r0 = 2;
	double probs[VMAX];
	for (int x = 0; x < 5; x++)
		probs[x] = w.P[r0 * 5 + x];
	for (int m = RT_VERIFY_GREEDY; m <= RT_VERIFY_ONEHOT; m++) {
		for (int ti = 0; ti < 2; ti++) {
			const rt_tree *t = ti ? &t2 : &t1;
			uint64_t counts[VMAX] = { 0 };
			const int N = 40000;
			for (uint32_t i = 0; i < (uint32_t)N; i++) {
				st.tok[0] = r0;
				for (int u = 0; u < t->n; u++) {
					memcpy(st.p + u * 5, w.P + r0 * 5, 5 * sizeof(float));
					memcpy(st.q + u * 5, w.D + r0 * 5, 5 * sizeof(float));
				}
				for (int u = 1; u < t->n; u++)
					st.tok[u] = -1;
				assert_int_equal(rt_verify_tree(t, m, st.tok, st.p, st.q, 5, 9 + 2 * (uint64_t)m + (uint64_t)ti, i,
				                                &st.res, scratch), 0);
				assert_int_equal(st.res.n_path, 1);
				assert_int_equal(st.res.accepted_sibling[0], -1);
				counts[st.res.final]++;
			}
			if (m == RT_VERIFY_GREEDY) {
				assert_int_equal(counts[rt_argmax(w.P + r0 * 5, 5)], (uint64_t)N);
				continue;
			}
			int df;
			double chi = tu_chi2(counts, probs, 5, (uint64_t)N, &df);
			printf("  root with %d absent child(ren), %-7s: bonus from p(root) chi2 %.2f df %d crit %.2f\n",
			       t->n - 1, rt_verify_method_name(m), chi, df, tu_chi2_crit(df, ALPHA));
			assert_true(chi < tu_chi2_crit(df, ALPHA));
		}
	}
}

static void test_exact_random_tables(void **state)
{
	world w = { .V = 5 };
	tu_random_table(w.P, 5, 5, 0.2, 11);
	tu_random_table(w.D, 5, 5, 0.0, 12);
	run_exact(&w, WIDE4, 8, "V5 tables", 100);
}

static void test_exact_warped(void **state)
{
	world w;
	warped_world(&w, 6, 21);
	run_exact(&w, WIDE3, 8, "V6 T0.6 k3 p0.9", 200);
}

/* Greedy: at temperature 0 (p one-hot at the argmax) every rule with GREEDY
 * verification emits exactly the target's greedy sequence, and drafts are
 * accepted along the way. */
static void test_exact_greedy(void **state)
{
	static tree_step st;
	world w = { .V = 6 };
	float z[VMAX * VMAX];
	int idx[VMAX];
	rt_sampling s0 = { .temperature = 0.0f };
	tu_random_table(z, 6, 6, 0.0, 31);
	tu_random_table(w.D, 6, 6, 0.0, 32);
	/* Make the draft lean towards the target's argmax so paths get accepted. */
	for (int r = 0; r < 6; r++) {
		rt_probs(w.P + r * 6, z + r * 6, 6, &s0, idx);
		for (int v = 0; v < 6; v++)
			w.D[r * 6 + v] = 0.5f * w.D[r * 6 + v] + 0.5f * w.P[r * 6 + v];
	}
	int32_t want[LMAX], out[LMAX];
	for (int i = 0, prev = 0; i < LMAX; i++)
		prev = want[i] = rt_argmax(w.P + prev * 6, 6);
	rt_tree t;
	tree_from_parents(&t, BIN2, 7);
	for (int rule = 0; rule <= RT_EXPAND_SPECHUB; rule++) {
		uint64_t rng = 1, acc = 0;
		assert_true(rt_verify_compatible(rule, RT_VERIFY_GREEDY, true));
		assert_false(rt_verify_compatible(rule, RT_VERIFY_GREEDY, false));
		for (int i = 0; i < 5000; i++) {
			acc += (uint64_t)tree_trial(&t, rule, RT_VERIFY_GREEDY, &w, 0, 77, (uint32_t)i, LMAX, out, &rng, &st);
			assert_memory_equal(out, want, sizeof(want));
		}
		printf("  greedy %-11s 5000 steps identical to target greedy, accepted/step %.3f\n",
		       rt_expand_rule_name(rule), acc / 5000.0);
		assert_true(acc > 0);
		/* Absent nodes only shorten the matched path. */
		acc = 0;
		for (int i = 0; i < 5000; i++) {
			acc += (uint64_t)tree_trial_absent(&t, rule, RT_VERIFY_GREEDY, &w, 0, 77, (uint32_t)i, LMAX, out,
			                                   &rng, &st, ABSENT_SUBSET);
			assert_memory_equal(out, want, sizeof(want));
		}
		printf("  greedy %-11s with absent nodes: identical, accepted/step %.3f\n", rt_expand_rule_name(rule),
		       acc / 5000.0);
		assert_true(acc > 0);
	}
}

/* The test-local RRS walker, written from ALGORITHMS.txt 2 with its own RNG,
 * optionally with the duplicate-skipping bug ("if y in seen: continue"). */
static void rrs_local(const rt_tree *t, const tree_step *st, int V, bool skip_dups, uint64_t *rng,
                      rt_tree_result *res)
{
	float r[VMAX];
	int u = 0;
	res->n_path = 1;
	for (;;) {
		int k = t->n_children[u], acc = -1;
		const float *q = st->q + u * V;
		bool seen[VMAX] = { false };
		memcpy(r, st->p + u * V, V * sizeof(float));
		for (int i = 0; i < k && acc < 0; i++) {
			int c = t->child_list[t->child_start[u] + i], y = st->tok[c];
			if (skip_dups && seen[y])
				continue;
			seen[y] = true;
			if (q[y] > 0 && tu_uniform(rng) * q[y] <= r[y]) {
				acc = c;
				break;
			}
			double sum = 0;
			for (int x = 0; x < V; x++)
				sum += fmax(0.0, (double)r[x] - q[x]);
			if (sum > 0)
				for (int x = 0; x < V; x++)
					r[x] = (float)(fmax(0.0, (double)r[x] - q[x]) / sum);
		}
		if (acc < 0) {
			res->final = rt_sample_cdf(k ? r : st->p + u * V, V, tu_uniform(rng));
			return;
		}
		res->path[res->n_path++] = u = acc;
	}
}

/* The RRS pitfall: V = 3, peaked q (0.8, 0.15, 0.05) so duplicate siblings
 * are the rule; exact enumeration (ALGORITHMS.txt 2) gives a first-token
 * error of 0.22 at the root for the skipping variant. The engine and the
 * local walker pass; the skipping walker must fail the same test. */
static void test_rrs_duplicates(void **state)
{
	static tree_step st;
	static const float q[3] = { 0.8f, 0.15f, 0.05f };
	static const float proot[3] = { 0.05f, 0.25f, 0.70f };
	static const int DUP[] = { -1, 0, 0, 0, 0, 1, 1, 2, 2 };
	world w = { .V = 3 };
	tu_random_table(w.P, 3, 3, 0.0, 41);
	memcpy(w.P, proot, sizeof(proot));
	for (int r = 0; r < 3; r++)
		memcpy(w.D + r * 3, q, sizeof(q));
	rt_tree t;
	tree_from_parents(&t, DUP, 9);
	assert_true(check_tree(&t, RT_EXPAND_SAMPLE, RT_VERIFY_RRS, &w, 2, 40000, 5, "V3 duplicate-prone") < 0);

	double probs[9], chi[2];
	chain_probs(&w, 0, 2, probs);
	for (int bug = 0; bug < 2; bug++) {
		uint64_t counts[9] = { 0 }, rng = 99 + (uint64_t)bug, dups = 0;
		int32_t out[2];
		for (int i = 0; i < 40000; i++) {
			st.tok[0] = 0;
			for (int u = 0; u < t.n; u++) {
				memcpy(st.p + u * 3, w.P + st.tok[u] * 3, sizeof(q));
				memcpy(st.q + u * 3, q, sizeof(q));
				int32_t kids[4];
				int k = t.n_children[u];
				if (k && rt_expand_node(RT_EXPAND_SAMPLE, q, 3, k, 6, (uint32_t)i, (uint32_t)u, kids, NULL, NULL) == 0)
					for (int r = 0; r < k; r++)
						st.tok[t.child_list[t.child_start[u] + r]] = kids[r];
			}
			dups += st.tok[1] == st.tok[2];
			rrs_local(&t, &st, 3, bug, &rng, &st.res);
			int n = 0;
			for (int j = 1; j < st.res.n_path && n < 2; j++)
				out[n++] = st.tok[st.res.path[j]];
			if (n < 2)
				out[n++] = st.res.final;
			if (n < 2)
				out[1] = rt_sample_cdf(w.P + out[0] * 3, 3, tu_uniform(&rng));
			counts[out[0] * 3 + out[1]]++;
		}
		int df;
		chi[bug] = tu_chi2(counts, probs, 9, 40000, &df);
		printf("  local RRS walker %-16s chi2 %9.2f df %d crit %.2f (siblings 1,2 equal in %.0f%%)\n",
		       bug ? "skipping dups" : "exact", chi[bug], df, tu_chi2_crit(df, ALPHA), dups / 400.0);
		if (bug)
			assert_true(chi[bug] > tu_chi2_crit(df, ALPHA));
		else
			assert_true(chi[bug] < tu_chi2_crit(df, ALPHA));
	}
}

/* Brute force over all root-to-node paths: the deepest node whose every
 * node matches its parent's argmax, ties to the lowest id. */
static void test_greedy_longest_path(void **state)
{
	uint64_t g = 5;
	float scratch[4 * VMAX];
	for (int trial = 0; trial < 3000; trial++) {
		static tree_step st;
		int parent[40], n = 2 + (int)(tu_rand(&g) % 38), V = 2 + (int)(tu_rand(&g) % 3);
		parent[0] = -1;
		for (int u = 1; u < n; u++) /* non-decreasing parents: BFS order */
			parent[u] = u == 1 ? 0 : parent[u - 1] + (int)(tu_rand(&g) % 2 && parent[u - 1] + 1 < u);
		rt_tree t;
		tree_from_parents(&t, parent, n);
		tu_random_table(st.p, n, V, 0.3, tu_rand(&g));
		for (int u = 0; u < n; u++)
			st.tok[u] = (int32_t)(tu_rand(&g) % (uint64_t)V);
		assert_int_equal(rt_verify_tree(&t, RT_VERIFY_GREEDY, st.tok, st.p, NULL, V, 1, 0, &st.res, scratch), 0);
		int best = 0;
		for (int u = 1; u < n; u++) {
			bool ok = true;
			for (int a = u; a > 0 && ok; a = parent[a]) {
				int m = 0;
				for (int x = 1; x < V; x++)
					if (st.p[parent[a] * V + x] > st.p[parent[a] * V + m])
						m = x;
				ok = st.tok[a] == m;
			}
			if (ok && t.depth[u] > t.depth[best])
				best = u;
		}
		assert_int_equal(st.res.n_path, t.depth[best] + 1);
		assert_int_equal(st.res.path[st.res.n_path - 1], best);
		for (int i = st.res.n_path - 1; i > 0; i--)
			assert_int_equal(parent[st.res.path[i]], st.res.path[i - 1]);
		assert_int_equal(st.res.final, rt_argmax(st.p + best * V, V));
	}
}

static void test_edges(void **state)
{
	static tree_step st;
	float scratch[4 * VMAX];
	rt_tree t1, t3;
	static const int ONE[] = { -1, 0 }, THREE[] = { -1, 0, 0, 0 };
	tree_from_parents(&t1, ONE, 2);
	tree_from_parents(&t3, THREE, 4);
	/* q(y) = 0 rejects, also when p(y) = 0 (u*0 <= 0 must not accept); with
	 * p == q the residual has no mass and the final token falls back to p. */
	static const float pq[4] = { 0.5f, 0.3f, 0.2f, 0.0f };
	uint64_t counts[4] = { 0 };
	for (int m = RT_VERIFY_RRS; m <= RT_VERIFY_SPECHUB; m++)
		for (uint32_t i = 0; i < 3000; i++) {
			st.tok[0] = 0, st.tok[1] = 3;
			for (int u = 0; u < 4; u++) {
				memcpy(st.p + 4 * u, pq, sizeof(pq));
				memcpy(st.q + 4 * u, pq, sizeof(pq));
			}
			assert_int_equal(rt_verify_tree(&t1, m, st.tok, st.p, st.q, 4, 3, i, &st.res, scratch), 0);
			assert_int_equal(st.res.n_path, 1);
			assert_true(st.res.final >= 0 && st.res.final < 3);
			counts[st.res.final]++;
		}
	double probs[4] = { 0.5, 0.3, 0.2, 0.0 };
	int df;
	double chi = tu_chi2(counts, probs, 4, 9000, &df);
	printf("  zero-mass residual falls back to p: chi2 %.2f df %d crit %.2f\n", chi, df, tu_chi2_crit(df, ALPHA));
	assert_true(chi < tu_chi2_crit(df, ALPHA));

	/* SpecHub: 3 children, or a pair without the hub, is refused. */
	st.tok[1] = 0, st.tok[2] = 1, st.tok[3] = 2;
	assert_int_equal(rt_verify_tree(&t3, RT_VERIFY_SPECHUB, st.tok, st.p, st.q, 4, 1, 0, &st.res, scratch), SW_EINVAL);
	rt_tree t2;
	static const int TWO[] = { -1, 0, 0 };
	tree_from_parents(&t2, TWO, 3);
	st.tok[1] = 1, st.tok[2] = 2;
	assert_int_equal(rt_verify_tree(&t2, RT_VERIFY_SPECHUB, st.tok, st.p, st.q, 4, 1, 0, &st.res, scratch), SW_EINVAL);
	st.tok[1] = 1, st.tok[2] = 0;
	assert_int_equal(rt_verify_tree(&t2, RT_VERIFY_SPECHUB, st.tok, st.p, st.q, 4, 1, 0, &st.res, scratch), 0);
	st.tok[1] = 7;
	assert_int_equal(rt_verify_tree(&t2, RT_VERIFY_RRS, st.tok, st.p, st.q, 4, 1, 0, &st.res, scratch), SW_EINVAL);
	/* Absent children (token < 0) are accepted; tokens >= V stay an error.
	 * A SpecHub pair with one absent child is plain RS on the other, hub or
	 * not; more than 2 children stays refused even with some absent. */
	for (int m = RT_VERIFY_GREEDY; m <= RT_VERIFY_ONEHOT; m++) {
		st.tok[1] = 4, st.tok[2] = -1;
		assert_int_equal(rt_verify_tree(&t2, m, st.tok, st.p, st.q, 4, 1, 0, &st.res, scratch), SW_EINVAL);
		static const int32_t ok_pairs[][2] = { { 1, -1 }, { -1, 1 }, { 0, -1 }, { -1, 0 }, { -1, -1 }, { -5, 2 } };
		for (int i = 0; i < 6; i++) {
			st.tok[1] = ok_pairs[i][0], st.tok[2] = ok_pairs[i][1];
			assert_int_equal(rt_verify_tree(&t2, m, st.tok, st.p, st.q, 4, 1, 0, &st.res, scratch), 0);
			assert_true(st.res.n_path == 1 || st.tok[st.res.path[1]] >= 0);
		}
	}
	st.tok[1] = 0, st.tok[2] = 1, st.tok[3] = -1;
	assert_int_equal(rt_verify_tree(&t3, RT_VERIFY_SPECHUB, st.tok, st.p, st.q, 4, 1, 0, &st.res, scratch), SW_EINVAL);

	/* More distinct children than tokens with q > 0: the support's tokens
	 * first (top-k: by q; the race: distinct, a permutation of it), then
	 * absent (-1); SpecHub on a one-hot q is (hub, absent); a q without
	 * mass gives no children; > 2 SpecHub children stays refused. */
	int32_t kids[8];
	assert_int_equal(rt_expand_node(RT_EXPAND_SAMPLE_WOR, pq, 4, 4, 1, 0, 0, kids, NULL, NULL), 0);
	assert_true(kids[0] >= 0 && kids[0] < 3 && kids[1] >= 0 && kids[1] < 3 && kids[2] >= 0 && kids[2] < 3);
	assert_true(kids[0] != kids[1] && kids[1] != kids[2] && kids[0] != kids[2]);
	assert_int_equal(kids[3], -1);
	assert_int_equal(rt_expand_node(RT_EXPAND_TOPK, pq, 4, 4, 1, 0, 0, kids, NULL, NULL), 0);
	assert_int_equal(kids[0], 0), assert_int_equal(kids[1], 1), assert_int_equal(kids[2], 2);
	assert_int_equal(kids[3], -1);
	assert_int_equal(rt_expand_node(RT_EXPAND_SPECHUB, pq, 4, 3, 1, 0, 0, kids, NULL, NULL), SW_EINVAL);
	assert_int_equal(rt_expand_node(RT_EXPAND_SAMPLE, pq, 4, 6, 1, 0, 0, kids, NULL, NULL), 0);
	static const float onehot[3] = { 0.0f, 1.0f, 0.0f }, none[3] = { 0.0f, 0.0f, 0.0f };
	assert_int_equal(rt_expand_node(RT_EXPAND_SPECHUB, onehot, 3, 2, 1, 0, 0, kids, NULL, NULL), 0);
	assert_int_equal(kids[0], 1), assert_int_equal(kids[1], -1);
	for (int rule = RT_EXPAND_TOPK; rule <= RT_EXPAND_SPECHUB; rule++) {
		assert_int_equal(rt_expand_node(rule, none, 3, 2, 1, 0, 0, kids, NULL, NULL), 0);
		assert_int_equal(kids[0], -1), assert_int_equal(kids[1], -1);
	}

	/* Compatibility table. */
	assert_false(rt_verify_compatible(RT_EXPAND_TOPK, RT_VERIFY_RRS, false));
	assert_false(rt_verify_compatible(RT_EXPAND_TOPK, RT_VERIFY_RRSW, false));
	assert_false(rt_verify_compatible(RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRS, false));
	assert_false(rt_verify_compatible(RT_EXPAND_SAMPLE, RT_VERIFY_RRSW, false));
	assert_false(rt_verify_compatible(RT_EXPAND_SAMPLE, RT_VERIFY_SPECHUB, false));
	assert_false(rt_verify_compatible(RT_EXPAND_SPECHUB, RT_VERIFY_RRS, false));
	assert_false(rt_verify_compatible(RT_EXPAND_TOPK, RT_VERIFY_GREEDY, false));
	assert_true(rt_verify_compatible(RT_EXPAND_TOPK, RT_VERIFY_GREEDY, true));
	assert_true(rt_verify_compatible(RT_EXPAND_SAMPLE_WOR, RT_VERIFY_ONEHOT, false));
	assert_false(rt_verify_compatible(9, RT_VERIFY_RRS, false));
	for (int r = 0; r < 4; r++)
		assert_int_equal(rt_expand_rule_parse(rt_expand_rule_name(r)), r);
	for (int m = 0; m < 5; m++)
		assert_int_equal(rt_verify_method_parse(rt_verify_method_name(m)), m);
	assert_int_equal(rt_verify_method_parse("rrs-w"), -1);
}

/* One lossy step (g = 1, draft x ~ q from the test RNG): the first emitted
 * token follows O = min(q, p + eps) + P_rej norm(relu(p - q)) (our letters;
 * Yin et al. swap p and q), computed here independently; TV(O, p) equals
 * rt_lossy_tv_bound and Theorem 4's sum_x min(eps, relu(q - p)). */
static void test_lossy(void **state)
{
	enum { V = 6, N = 200000 };
	float logits[2 * V], q[V], p[V], tmp[V];
	int idx[V];
	rt_sampling s = { .temperature = 1.0f, .top_k = 0, .top_p = 1.0f };
	uint64_t g = 8;
	for (int v = 0; v < 2 * V; v++)
		logits[v] = (float)(1.2 * gauss(&g));
	rt_probs(p, logits, V, &s, idx);
	tu_random_table(q, 1, V, 0.0, 9);
	static const float EPS[] = { 0.0f, 0.05f, 0.2f };
	for (int e = 0; e < 3; e++) {
		float eps = EPS[e];
		double o[V], acc = 0, z = 0, tv = 0, thm4 = 0;
		for (int x = 0; x < V; x++) {
			acc += fmin(q[x], (double)p[x] + eps);
			z += fmax(0.0, (double)p[x] - q[x]);
			thm4 += fmin(eps, fmax(0.0, (double)q[x] - p[x]));
		}
		for (int x = 0; x < V; x++) {
			o[x] = fmin(q[x], (double)p[x] + eps) + (1 - acc) * fmax(0.0, (double)p[x] - q[x]) / z;
			tv += 0.5 * fabs(o[x] - p[x]);
		}
		double bound = rt_lossy_tv_bound(p, q, V, eps);
		assert_true(fabs(bound - tv) < 1e-6 && fabs(bound - thm4) < 1e-6);
		uint64_t counts[V] = { 0 }, rng = 10 + e;
		for (uint32_t i = 0; i < N; i++) {
			int32_t xd = rt_sample_cdf(q, V, tu_uniform(&rng)), fin;
			float pbuf[V];
			int n = rt_verify_chain_lossy(logits, &s, q, &xd, 1, V, eps, 4, i, &fin, pbuf, tmp, idx);
			counts[n == 1 ? xd : fin]++;
		}
		int df;
		double chi = tu_chi2(counts, o, V, N, &df);
		printf("  lossy eps %.2f: TV(O,p) %.5f = bound %.5f = Thm4 %.5f; chi2 vs O %.2f df %d crit %.2f\n", eps, tv,
		       bound, thm4, chi, df, tu_chi2_crit(df, ALPHA));
		assert_true(chi < tu_chi2_crit(df, ALPHA));
		/* Power: the bias is visible, the same samples against p fail. */
		double pd[V];
		for (int x = 0; x < V; x++)
			pd[x] = p[x];
		double chi_p = tu_chi2(counts, pd, V, N, &df);
		printf("    same samples vs p: chi2 %.2f (crit %.2f)\n", chi_p, tu_chi2_crit(df, ALPHA));
		if (e == 2)
			assert_true(chi_p > tu_chi2_crit(df, ALPHA));
		if (e == 0)
			assert_true(bound < 1e-6); /* 0 up to float rounding of p and q */
		else
			assert_true(bound > 0.01);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_greedy_longest_path),
		cmocka_unit_test(test_exact_greedy),
		cmocka_unit_test(test_rrs_duplicates),
		cmocka_unit_test(test_exact_random_tables),
		cmocka_unit_test(test_exact_warped),
		cmocka_unit_test(test_absent_root),
		cmocka_unit_test(test_exact_absent),
		cmocka_unit_test(test_lossy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
