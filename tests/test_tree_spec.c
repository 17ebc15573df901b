/* Tree speculative decoding end to end (drafting level by level, one masked
 * target forward, verification, KV commit) is exact: generated sequences
 * follow the target's warped distribution for every exact (expansion rule,
 * verification method) pair, on trees from the presets and generated forms,
 * with Markov-table target and draft. Chi-square at significance 1e-4 against
 * the exact enumerated distribution; greedy tree decoding equals target-only
 * greedy decoding for every prompt enumerated. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decode/chain.h"
#include "testutil.h"
#include "core/tree.h"
#include "decode/tree_verify.h"

#define ALPHA 1e-4

static void check_tree_q(const char *tree_spec, int rule, int method, rt_sampling s, int V, int n_new,
                         int trials, double q_zero)
{
	sw_err err;
	rt_tree *t = malloc(sizeof(*t));
	assert_int_equal(rt_tree_parse(tree_spec, NULL, t, &err), 0);
	float *P = malloc((size_t)V * V * V * sizeof(float)), *Q = malloc((size_t)V * V * sizeof(float));
	tu_random_table(P, V * V, V, 0.15, 1000 + (uint64_t)V);
	/* q_zero > 0: draft rows with fewer tokens with q > 0 than children, so
	 * top-k / WOR / SpecHub run out of candidates: absent children (and
	 * subtrees), fed to the forwards as token 0 and skipped by verification */
	tu_random_table(Q, V, V, q_zero, 2000 + (uint64_t)V);
	rt_model *tm = rt_model_table(V, 2, P, "target", &err), *dm = rt_model_table(V, 1, Q, "draft", &err);
	assert_non_null(tm);
	assert_non_null(dm);
	int32_t prompt[3] = { 1, 0, 2 };
	size_t K = 1;
	for (int i = 0; i < n_new; i++)
		K *= (size_t)V;
	double *probs = malloc(K * sizeof(*probs));
	uint64_t *counts = calloc(K, sizeof(*counts));
	tu_seq_dist(tm, prompt, 3, n_new, &s, probs);
	int max_ctx = 3 + n_new + t->n + 4;
	rt_ctx *tc = rt_ctx_new(tm, max_ctx, t->n, &err);
	assert_non_null(tc);
	rt_tree_cfg tcfg = { t, rule, method };
	uint64_t acc = 0, iters = 0, drafted = 0;
	for (int k = 0; k < trials; k++) {
		int32_t out[16];
		rt_stats st;
		rt_gen_cfg cfg = { .samp = s, .gamma = 1, .seed = 77000 + (uint64_t)k, .max_new = n_new };
		rt_ctx_truncate(tc, 0);
		int got = rt_generate_tree(tc, dm, &tcfg, prompt, 3, &cfg, out, &st, &err);
		if (got != n_new)
			fail_msg("%s: %s", tree_spec, err.msg);
		size_t id = 0;
		for (int i = 0; i < n_new; i++)
			id = id * V + (size_t)out[i];
		counts[id]++;
		acc += st.n_accepted;
		iters += st.n_iters;
		drafted += st.n_drafted;
	}
	/* n_drafted counts the nodes proposed: absent ones (q_zero > 0 runs
	 * rows out of candidates) are not, so fewer than every node */
	assert_true(acc <= drafted && drafted <= iters * (uint64_t)(t->n - 1));
	if (q_zero > 0 && rule != RT_EXPAND_SAMPLE)
		assert_true(drafted < iters * (uint64_t)(t->n - 1));
	int df;
	double chi = tu_chi2(counts, probs, (int)K, (uint64_t)trials, &df), crit = tu_chi2_crit(df, ALPHA);
	printf("  %-10s %-10s %-8s T=%.1f k=%d p=%.2f V=%d q zeros %.1f: chi2 %7.2f df %3d crit %6.2f, accepted/iter %.2f\n",
	       tree_spec, rt_expand_rule_name(rule), rt_verify_method_name(method), s.temperature, s.top_k, s.top_p,
	       V, q_zero, chi, df, crit, (double)acc / iters);
	assert_true(acc > 0);
	assert_true(chi < crit);
	rt_ctx_free(tc);
	rt_model_free(tm);
	rt_model_free(dm);
	free(probs);
	free(counts);
	free(P);
	free(Q);
	free(t);
}

static void check_tree(const char *tree_spec, int rule, int method, rt_sampling s, int V, int n_new,
                       int trials)
{
	check_tree_q(tree_spec, rule, method, s, V, n_new, trials, 0.0);
}

static const rt_sampling S1 = { 1.0f, 0, 1.0f }, S2 = { 0.6f, 4, 0.9f };

static void test_rrs(void **state)
{
	check_tree("kary:3:2", RT_EXPAND_SAMPLE, RT_VERIFY_RRS, S1, 5, 3, 20000);
	check_tree("batch:3:2", RT_EXPAND_SAMPLE, RT_VERIFY_RRS, S2, 5, 3, 20000);
	check_tree("sequoia63", RT_EXPAND_SAMPLE, RT_VERIFY_RRS, S1, 6, 2, 20000);
}

static void test_rrsw(void **state)
{
	check_tree("kary:3:2", RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW, S1, 5, 3, 20000);
	check_tree("eagle25", RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW, S2, 6, 3, 20000);
}

static void test_topk_onehot(void **state)
{
	check_tree("chain:3", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, S1, 5, 3, 20000);
	check_tree("eagle25", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, S2, 6, 3, 20000);
	check_tree("medusa63", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, S1, 11, 2, 20000);
}

static void test_spechub(void **state)
{
	check_tree("biseq8", RT_EXPAND_SPECHUB, RT_VERIFY_SPECHUB, S1, 5, 3, 20000);
	check_tree("biseq16", RT_EXPAND_SPECHUB, RT_VERIFY_SPECHUB, S2, 5, 3, 20000);
}

/* Peaky drafts (most q rows with 1-2 tokens with q > 0): absent children. */
static void test_support_runs_out(void **state)
{
	check_tree_q("kary:3:2", RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW, S1, 5, 3, 20000, 0.6);
	check_tree_q("biseq8", RT_EXPAND_SPECHUB, RT_VERIFY_SPECHUB, S1, 5, 3, 20000, 0.7);
	check_tree_q("eagle25", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, S2, 6, 2, 20000, 0.6);
}

/* Greedy: every 2-token prompt, 8 tokens, each tree: identical to target-only. */
static void test_greedy(void **state)
{
	enum { V = 7 };
	float P[V * V * V], Q[V * V];
	tu_random_table(P, V * V, V, 0.0, 5);
	tu_random_table(Q, V, V, 0.0, 6);
	sw_err err;
	rt_model *tm = rt_model_table(V, 2, P, "t", &err), *dm = rt_model_table(V, 1, Q, "d", &err);
	const char *trees[] = { "chain:4", "kary:2:3", "eagle25", "biseq16" };
	rt_sampling g = { 0.0f, 0, 1.0f };
	int accepted = 0;
	for (size_t ti = 0; ti < sizeof(trees) / sizeof(trees[0]); ti++) {
		rt_tree *t = malloc(sizeof(*t));
		assert_int_equal(rt_tree_parse(trees[ti], NULL, t, &err), 0);
		rt_ctx *tc = rt_ctx_new(tm, 64, t->n, &err), *rc = rt_ctx_new(tm, 64, 8, &err);
		rt_tree_cfg tcfg = { t, RT_EXPAND_TOPK, RT_VERIFY_GREEDY };
		for (int a = 0; a < V; a++)
			for (int b = 0; b < V; b++) {
				int32_t prompt[2] = { a, b }, o1[8], o2[8];
				rt_gen_cfg cfg = { .samp = g, .gamma = 1, .seed = 3, .max_new = 8 };
				rt_stats st;
				rt_ctx_truncate(tc, 0);
				rt_ctx_truncate(rc, 0);
				assert_int_equal(rt_generate_tree(tc, dm, &tcfg, prompt, 2, &cfg, o1, &st, &err), 8);
				accepted += st.n_accepted > 0;
				assert_int_equal(rt_generate_target(rc, prompt, 2, &cfg, o2, &st, &err), 8);
				assert_memory_equal(o1, o2, sizeof(o1));
			}
		rt_ctx_free(tc);
		rt_ctx_free(rc);
		free(t);
	}
	assert_true(accepted > 0);
	rt_model_free(tm);
	rt_model_free(dm);
}

/* Inexact pairs are refused, not run. */
static void test_incompatible(void **state)
{
	enum { V = 5 };
	float P[V * V];
	tu_random_table(P, V, V, 0.0, 8);
	sw_err err;
	rt_model *m = rt_model_table(V, 1, P, "t", &err);
	rt_tree t;
	assert_int_equal(rt_tree_parse("kary:2:2", NULL, &t, &err), 0);
	rt_ctx *tc = rt_ctx_new(m, 32, t.n, &err);
	rt_tree_cfg tcfg = { &t, RT_EXPAND_TOPK, RT_VERIFY_RRS };
	int32_t prompt[1] = { 0 }, out[4];
	rt_stats st;
	rt_gen_cfg cfg = { .samp = S1, .gamma = 1, .seed = 1, .max_new = 4 };
	assert_int_equal(rt_generate_tree(tc, m, &tcfg, prompt, 1, &cfg, out, &st, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "not exact"));
	rt_ctx_free(tc);
	rt_model_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_incompatible),
		cmocka_unit_test(test_greedy),
		cmocka_unit_test(test_rrs),
		cmocka_unit_test(test_rrsw),
		cmocka_unit_test(test_topk_onehot),
		cmocka_unit_test(test_spechub),
		cmocka_unit_test(test_support_runs_out),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
