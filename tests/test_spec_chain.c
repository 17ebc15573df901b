/* Chain speculative decoding is exact: the distribution of generated
 * sequences equals the target's (warped) distribution, for every drafter
 * and sampling setting, on Markov tables and tiny random Llamas. Reference:
 * the exact sequence distribution by enumeration (tu_seq_dist); test: Pearson
 * chi-square at significance 1e-4 per configuration (critical value from
 * Wilson-Hilferty, stated per call). Greedy: identical to target-only greedy
 * for every prompt enumerated. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/philox.h"
#include "decode/chain.h"
#include "testutil.h"

#define ALPHA 1e-4

static rt_drafter *make_drafter(const char *kind, const rt_model *dm, int max_ctx)
{
	sw_err err;
	rt_drafter *d = !strcmp(kind, "ngram") ? rt_drafter_ngram(1, 2, &err) : rt_drafter_model(dm, max_ctx, &err);
	assert_non_null(d);
	return d;
}

/* Samples n_trials generations of n tokens with speculative decoding and
 * chi-square-tests them against the exact target distribution. */
static void check_distribution(const rt_model *target, const rt_model *draft, const char *dkind,
                               const int32_t *prompt, int n_prompt, int n, int gamma, rt_sampling s,
                               int n_trials, const char *label)
{
	int V = target->cfg.vocab;
	size_t K = 1;
	for (int i = 0; i < n; i++)
		K *= (size_t)V;
	double *probs = malloc(K * sizeof(*probs));
	uint64_t *counts = calloc(K, sizeof(*counts));
	tu_seq_dist(target, prompt, n_prompt, n, &s, probs);
	sw_err err;
	int max_ctx = n_prompt + n + gamma + 4;
	rt_ctx *tc = rt_ctx_new(target, max_ctx, gamma + 1 < max_ctx ? gamma + 1 : max_ctx, &err);
	assert_non_null(tc);
	rt_drafter *d = make_drafter(dkind, draft, max_ctx);
	int32_t out[64];
	rt_stats st;
	uint64_t drafted = 0, accepted = 0;
	for (int t = 0; t < n_trials; t++) {
		rt_gen_cfg cfg = { .samp = s, .gamma = gamma, .seed = 0x5eed0000ull + (uint64_t)t, .max_new = n };
		rt_ctx_truncate(tc, 0);
		int got = rt_generate_spec(tc, d, prompt, n_prompt, &cfg, out, &st, &err);
		assert_int_equal(got, n);
		size_t id = 0;
		for (int i = 0; i < n; i++)
			id = id * V + (size_t)out[i];
		counts[id]++;
		drafted += st.n_drafted;
		accepted += st.n_accepted;
	}
	int df;
	double chi = tu_chi2(counts, probs, (int)K, (uint64_t)n_trials, &df);
	double crit = tu_chi2_crit(df, ALPHA);
	printf("  %-44s chi2 %8.2f  df %3d  crit(1e-4) %7.2f  acceptance %.3f\n", label, chi, df, crit,
	       drafted ? (double)accepted / drafted : 0.0);
	/* The test must be able to see something: drafts were proposed and
	 * some were accepted and some rejected, unless greedy-like. */
	assert_true(drafted > 0);
	assert_true(chi < crit);
	rt_drafter_free(d);
	rt_ctx_free(tc);
	free(probs);
	free(counts);
}

static const rt_sampling SAMPLINGS[] = {
	{ 1.0f, 0, 1.0f },
	{ 0.7f, 0, 1.0f },
	{ 1.0f, 3, 1.0f },
	{ 1.0f, 0, 0.8f },
	{ 1.3f, 4, 0.9f },
};

static void test_tables_order1(void **state)
{
	enum { V = 5 };
	float P[V * V], Q[V * V];
	tu_random_table(P, V, V, 0.15, 11);
	tu_random_table(Q, V, V, 0.25, 12); /* zeros in q: q(x) = 0 where p(x) > 0 */
	sw_err err;
	rt_model *tm = rt_model_table(V, 1, P, "target", &err), *dm = rt_model_table(V, 1, Q, "draft", &err);
	assert_non_null(tm);
	assert_non_null(dm);
	int32_t prompt[3] = { 1, 3, 1 };
	char label[128];
	for (size_t si = 0; si < sizeof(SAMPLINGS) / sizeof(SAMPLINGS[0]); si++)
		for (int gamma = 1; gamma <= 3; gamma += 2) {
			snprintf(label, sizeof(label), "table1 model T=%.1f k=%d p=%.1f g=%d", SAMPLINGS[si].temperature,
			         SAMPLINGS[si].top_k, SAMPLINGS[si].top_p, gamma);
			check_distribution(tm, dm, "model", prompt, 3, 3, gamma, SAMPLINGS[si], 20000, label);
		}
	rt_model_free(tm);
	rt_model_free(dm);
}

static void test_tables_order2_ngram(void **state)
{
	enum { V = 4 };
	float P[V * V * V];
	tu_random_table(P, V * V, V, 0.1, 21);
	sw_err err;
	rt_model *tm = rt_model_table(V, 2, P, "target", &err);
	assert_non_null(tm);
	/* A repetitive prompt so the n-gram drafter proposes often. */
	int32_t prompt[8] = { 0, 1, 2, 0, 1, 2, 0, 1 };
	char label[128];
	for (size_t si = 0; si < sizeof(SAMPLINGS) / sizeof(SAMPLINGS[0]); si++) {
		snprintf(label, sizeof(label), "table2 ngram T=%.1f k=%d p=%.1f g=3", SAMPLINGS[si].temperature,
		         SAMPLINGS[si].top_k, SAMPLINGS[si].top_p);
		check_distribution(tm, NULL, "ngram", prompt, 8, 4, 3, SAMPLINGS[si], 20000, label);
	}
	rt_model_free(tm);
}

static void test_tiny_llama(void **state)
{
	rt_model *tm = tu_tiny_llama(6, 16, 2, 4, 2, 24, 101);
	rt_model *dm = tu_tiny_llama(6, 16, 1, 2, 1, 20, 202);
	assert_non_null(tm);
	assert_non_null(dm);
	sw_err err;
	int first[1] = { 0 };
	rt_model *ls = rt_model_layerskip(tm, first, 1, 0, &err);
	assert_non_null(ls);
	int32_t prompt[2] = { 2, 5 };
	rt_sampling s1 = { 1.0f, 0, 1.0f }, s2 = { 0.8f, 4, 0.9f };
	check_distribution(tm, dm, "model", prompt, 2, 3, 2, s1, 20000, "tiny llama, separate draft, T=1 g=2");
	check_distribution(tm, ls, "model", prompt, 2, 3, 3, s2, 20000, "tiny llama, layer-skip, T=.8 k4 p.9 g=3");
	rt_model_free(ls);
	rt_model_free(dm);
	rt_model_free(tm);
}

/* Greedy: every prompt of length 2 over the vocabulary, 10 tokens: the
 * speculative output equals target-only greedy, for each drafter and gamma. */
static void test_greedy_equals_target(void **state)
{
	enum { V = 6 };
	float P[V * V * V], Q[V * V];
	tu_random_table(P, V * V, V, 0.0, 31);
	tu_random_table(Q, V, V, 0.0, 32);
	sw_err err;
	rt_model *tm = rt_model_table(V, 2, P, "target", &err), *dm = rt_model_table(V, 1, Q, "draft", &err);
	rt_model *lt = tu_tiny_llama(V, 16, 2, 4, 2, 24, 303);
	int first[1] = { 0 };
	rt_model *ls = rt_model_layerskip(lt, first, 1, 0, &err);
	const rt_model *targets[2] = { tm, lt }, *drafts[2] = { dm, ls };
	const char *kinds[2] = { "model", "ngram" };
	rt_sampling g = { 0.0f, 0, 1.0f };
	int checked = 0, accepted_any = 0;
	for (int ti = 0; ti < 2; ti++)
		for (int ki = 0; ki < 2; ki++)
			for (int gamma = 1; gamma <= 5; gamma += 2) {
				rt_ctx *tc = rt_ctx_new(targets[ti], 64, gamma + 1, &err);
				rt_ctx *rc = rt_ctx_new(targets[ti], 64, 8, &err);
				rt_drafter *d = make_drafter(kinds[ki], drafts[ti], 64);
				for (int a = 0; a < V; a++)
					for (int b = 0; b < V; b++) {
						int32_t prompt[2] = { a, b }, o1[16], o2[16];
						rt_gen_cfg cfg = { .samp = g, .gamma = gamma, .seed = 7, .max_new = 10 };
						rt_stats st;
						rt_ctx_truncate(tc, 0);
						rt_ctx_truncate(rc, 0);
						assert_int_equal(rt_generate_spec(tc, d, prompt, 2, &cfg, o1, &st, &err), 10);
						accepted_any += st.n_accepted > 0;
						assert_int_equal(rt_generate_target(rc, prompt, 2, &cfg, o2, &st, &err), 10);
						assert_memory_equal(o1, o2, sizeof(o1[0]) * 10);
						checked++;
					}
				rt_drafter_free(d);
				rt_ctx_free(tc);
				rt_ctx_free(rc);
			}
	assert_true(accepted_any > 0);
	printf("  %d greedy generations identical (%d with accepted drafts)\n", checked, accepted_any);
	rt_model_free(ls);
	rt_model_free(lt);
	rt_model_free(dm);
	rt_model_free(tm);
}

/* The first position's acceptance rate equals 1 - TV(p, q) (ALGORITHMS.txt
 * 1a), checked with a two-sided z-test at 1e-4. */
static void test_acceptance_rate_closed_form(void **state)
{
	enum { V = 7 };
	float P[V * V], Q[V * V];
	tu_random_table(P, V, V, 0.2, 41);
	tu_random_table(Q, V, V, 0.2, 42);
	sw_err err;
	rt_model *tm = rt_model_table(V, 1, P, "t", &err), *dm = rt_model_table(V, 1, Q, "d", &err);
	int last = 3;
	double overlap = 0;
	for (int v = 0; v < V; v++)
		overlap += fmin(P[last * V + v], Q[last * V + v]);
	rt_ctx *tc = rt_ctx_new(tm, 16, 2, &err);
	rt_drafter *d = make_drafter("model", dm, 16);
	int N = 40000, acc = 0;
	for (int t = 0; t < N; t++) {
		int32_t prompt[1] = { last }, out[2];
		rt_gen_cfg cfg = { .samp = { 1.0f, 0, 1.0f }, .gamma = 1, .seed = 900 + (uint64_t)t, .max_new = 1 };
		rt_stats st;
		rt_ctx_truncate(tc, 0);
		assert_int_equal(rt_generate_spec(tc, d, prompt, 1, &cfg, out, &st, &err), 1);
		acc += (int)st.pos_accepted[0];
	}
	double rate = (double)acc / N, se = sqrt(overlap * (1 - overlap) / N);
	double z = fabs(rate - overlap) / se, zc = tu_norm_quantile(ALPHA / 2);
	printf("  acceptance %.4f vs 1-TV %.4f (z %.2f, crit %.2f)\n", rate, overlap, z, zc);
	assert_true(z < zc);
	rt_drafter_free(d);
	rt_ctx_free(tc);
	rt_model_free(tm);
	rt_model_free(dm);
}

/* Direct checks of rt_verify_chain's edge rules. */
static void test_verify_edges(void **state)
{
	enum { V = 4 };
	float logits[3 * V], q[2 * V], p[V], tmp[V];
	int idx[V];
	rt_sampling s = { 1.0f, 0, 1.0f };
	/* p = (0.5, 0.5, 0, 0) at every row; a draft token with q(x) = 0 must
	 * be rejected whatever the uniform, and the residual then follows p. */
	for (int r = 0; r < 3; r++)
		for (int v = 0; v < V; v++)
			logits[r * V + v] = v < 2 ? 0.0f : -INFINITY;
	for (int v = 0; v < 2 * V; v++)
		q[v] = 0.25f;
	q[2] = 0.0f; /* row 0: q(2) = 0 */
	int32_t xd[2] = { 2, 0 }, fin;
	for (uint64_t seed = 0; seed < 200; seed++) {
		int n = rt_verify_chain(logits, &s, q, xd, 2, V, seed, 0, &fin, p, tmp, idx);
		assert_int_equal(n, 0);
		assert_true(fin == 0 || fin == 1);
	}
	/* p(x) = 0 < q(x): always rejected; the residual excludes x. */
	xd[0] = 3;
	q[2] = 0.25f;
	for (uint64_t seed = 0; seed < 200; seed++) {
		int n = rt_verify_chain(logits, &s, q, xd, 2, V, seed, 0, &fin, p, tmp, idx);
		assert_int_equal(n, 0);
		assert_true(fin == 0 || fin == 1);
	}
	/* Deterministic draft (q == NULL): accepted with probability p(x); on
	 * rejection the residual is p without x. */
	int acc = 0;
	xd[0] = 1;
	for (uint64_t seed = 0; seed < 4000; seed++) {
		int n = rt_verify_chain(logits, &s, NULL, xd, 1, V, seed, 0, &fin, p, tmp, idx);
		if (n == 0)
			assert_int_equal(fin, 0);
		acc += n;
	}
	/* binomial(4000, 0.5): |acc - 2000| < 4.4 sd (sd 31.6) at ~1e-5 */
	assert_true(abs(acc - 2000) < 139);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verify_edges),
		cmocka_unit_test(test_greedy_equals_target),
		cmocka_unit_test(test_acceptance_rate_closed_form),
		cmocka_unit_test(test_tables_order1),
		cmocka_unit_test(test_tables_order2_ngram),
		cmocka_unit_test(test_tiny_llama),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
