/* Block-drafted speculative decoding is exact: sequences generated with a
 * tiny random block drafter over a tiny random Llama target follow the
 * target's warped distribution, chi-square at significance 1e-4 against the
 * exact enumerated distribution (tu_seq_dist), at T = 1 and at T = 0.6 with
 * top-k / top-p, for every path: chain S = 1 (features and tokens
 * conditioning, bidirectional and causal blocks), chain S > 1 with the
 * final-Z rule, chain with the SpecDec++ stop rule, Cartesian tree top-k
 * verified one-hot, sampled trees with RRS and RRSW, chain trees with S > 1
 * through the tree decoder (the engine's rule). The draft vocabulary is
 * narrower than the target's (q = 0 on the last id), so the full-vocabulary
 * residual is exercised. One test runs the naive S > 1 rule (each token
 * verified against the pass that unmasked it; it exists only here) and shows
 * the same test rejects it, so the test is known to detect that bias.
 * Greedy: block-drafted output equals target-only output token for token. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "block_util.h"
#include "decode/acchead.h"
#include "decode/block_decode.h"
#include "decode/tree_verify.h"
#include "kernels/philox.h"
#include "testutil.h"

#define ALPHA 1e-4

static const rt_sampling S1 = { 1.0f, 0, 1.0f }, S2 = { 0.6f, 0, 1.0f };

struct setup {
	rt_model *tm;
	rt_block_drafter *bd;
	char dir[64];
};

/* Target: V tokens, width 16, 2 layers. Drafter: block B, draft vocab V-1. */
static void setup_qkvo(struct setup *S, int V, const char *cond, const char *attn, int B, double scale,
                       double qk, double vo, int window, uint64_t seed)
{
	S->tm = tu_tiny_llama(V, 16, 2, 4, 2, 24, 500 + seed);
	tbu_opts o = tbu_default(S->tm);
	o.cond = cond;
	o.attn = attn;
	o.block = B;
	o.draft_vocab = V - 1;
	o.n_taps = 2, o.taps[0] = 0, o.taps[1] = 1;
	o.window = window;
	o.scale = scale;
	o.qk_scale = qk;
	o.vo_scale = vo;
	tbu_tmpdir(S->dir);
	assert_int_equal(tbu_write(S->dir, S->tm, &o, seed), 0);
	sw_err err;
	S->bd = rt_block_drafter_load(S->dir, S->tm, &err);
	if (!S->bd)
		fail_msg("%s", err.msg);
}

static void setup(struct setup *S, int V, const char *cond, const char *attn, int B, double scale, uint64_t seed)
{
	setup_qkvo(S, V, cond, attn, B, scale, 1.0, 1.0, 4, seed);
}

static void teardown(struct setup *S)
{
	rt_block_drafter_free(S->bd);
	rt_model_free(S->tm);
	tbu_rmdir(S->dir);
}

static const int32_t PROMPT[3] = { 1, 0, 2 };

struct result {
	double chi, crit;
	int df;
	double acc_per_iter;
};

/* Runs `trials` generations of n_new tokens; tree == NULL: chain with
 * drafter d (made by the caller over tc). */
static struct result run(struct setup *S, rt_ctx *tc, rt_drafter *d, const rt_tree *tree, int rule, int method,
                         rt_sampling s, int gamma, int n_new, int trials)
{
	int V = S->tm->cfg.vocab;
	size_t K = 1;
	for (int i = 0; i < n_new; i++)
		K *= (size_t)V;
	double *probs = malloc(K * sizeof(*probs));
	uint64_t *counts = calloc(K, sizeof(*counts));
	tu_seq_dist(S->tm, PROMPT, 3, n_new, &s, probs);
	uint64_t acc = 0, iters = 0;
	sw_err err;
	for (int k = 0; k < trials; k++) {
		int32_t out[16];
		rt_stats st;
		rt_gen_cfg cfg = { .samp = s, .gamma = gamma, .seed = 91000 + (uint64_t)k, .max_new = n_new };
		rt_ctx_truncate(tc, 0);
		int got;
		if (tree) {
			rt_tree_cfg tcfg = { tree, rule, method };
			got = rt_generate_tree_block(tc, d, &tcfg, PROMPT, 3, &cfg, out, &st, &err);
		} else {
			got = rt_generate_spec(tc, d, PROMPT, 3, &cfg, out, &st, &err);
		}
		if (got != n_new)
			fail_msg("generation: %s", err.msg);
		size_t id = 0;
		for (int i = 0; i < n_new; i++)
			id = id * V + (size_t)out[i];
		counts[id]++;
		acc += st.n_accepted;
		iters += st.n_iters;
	}
	struct result r;
	r.chi = tu_chi2(counts, probs, (int)K, (uint64_t)trials, &r.df);
	r.crit = tu_chi2_crit(r.df, ALPHA);
	r.acc_per_iter = (double)acc / (double)iters;
	free(probs);
	free(counts);
	return r;
}

static void check_chain(const char *cond, const char *attn, int B, int steps, rt_sampling s, int gamma,
                        const rt_adaptive *ad, uint64_t seed)
{
	enum { V = 5, N_NEW = 3, TRIALS = 20000 };
	struct setup S;
	setup(&S, V, cond, attn, B, 1.0, seed);
	sw_err err;
	rt_ctx *tc = rt_ctx_new(S.tm, 32, 16, &err);
	rt_drafter *d = rt_drafter_block(S.bd, tc, steps, &err);
	if (!d)
		fail_msg("%s", err.msg);
	if (ad)
		assert_int_equal(rt_drafter_set_adaptive(d, ad, &err), 0);
	struct result r = run(&S, tc, d, NULL, 0, 0, s, gamma, N_NEW, TRIALS);
	printf("  chain %-8s %-13s B=%d S=%d gamma=%d%s T=%.1f k=%d p=%.2f: chi2 %7.2f df %3d crit %6.2f, accepted/iter %.2f\n",
	       cond, attn, B, steps, gamma, ad ? " specdec++" : "", s.temperature, s.top_k, s.top_p, r.chi, r.df, r.crit,
	       r.acc_per_iter);
	assert_true(r.acc_per_iter > 0);
	assert_true(r.chi < r.crit);
	rt_drafter_free(d);
	rt_ctx_free(tc);
	teardown(&S);
}

static void test_chain_one_pass(void **state)
{
	check_chain("features", "bidirectional", 4, 1, S1, 3, NULL, 1);
	check_chain("features", "causal", 3, 1, S2, 4, NULL, 2); /* gamma > B: B drafts */
	check_chain("tokens", "bidirectional", 4, 1, S2, 3, NULL, 3);
	check_chain("tokens", "causal", 4, 1, S1, 2, NULL, 4);
}

static void test_chain_steps(void **state)
{
	check_chain("features", "bidirectional", 4, 2, S1, 3, NULL, 5);
	check_chain("tokens", "bidirectional", 4, 3, S2, 3, NULL, 6);
	check_chain("features", "causal", 4, 4, S2, 3, NULL, 7);
}

static void test_chain_specdecpp(void **state)
{
	rt_adaptive a = { RT_ADAPT_PROXY, 0.5f, 1, 3, NULL };
	check_chain("features", "bidirectional", 4, 1, S1, 3, &a, 8);
	check_chain("tokens", "bidirectional", 4, 2, S2, 3, &a, 9);
}

static void check_tree_steps(const char *spec, int steps, int rule, int method, rt_sampling s, uint64_t seed)
{
	enum { V = 5, N_NEW = 3, TRIALS = 20000 };
	struct setup S;
	setup(&S, V, "features", "bidirectional", 4, 1.0, seed);
	sw_err err;
	rt_tree *t = malloc(sizeof(*t));
	assert_int_equal(rt_tree_parse(spec, NULL, t, &err), 0);
	rt_ctx *tc = rt_ctx_new(S.tm, 32, t->n, &err);
	rt_drafter *d = rt_drafter_block(S.bd, tc, steps, &err);
	assert_non_null(d);
	struct result r = run(&S, tc, d, t, rule, method, s, 1, N_NEW, TRIALS);
	printf("  tree  %-12s S=%d %-10s %-7s T=%.1f k=%d p=%.2f: chi2 %7.2f df %3d crit %6.2f, accepted/iter %.2f\n",
	       spec, steps, rt_expand_rule_name(rule), rt_verify_method_name(method), s.temperature, s.top_k, s.top_p,
	       r.chi, r.df, r.crit, r.acc_per_iter);
	assert_true(r.acc_per_iter > 0);
	assert_true(r.chi < r.crit);
	rt_drafter_free(d);
	rt_ctx_free(tc);
	free(t);
	teardown(&S);
}

static void check_tree(const char *spec, int rule, int method, rt_sampling s, uint64_t seed)
{
	check_tree_steps(spec, 1, rule, method, s, seed);
}

static void test_tree_cartesian(void **state)
{
	check_tree("branch:3,2,1", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, S1, 11);
	check_tree("branch:2,2", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, S2, 12);
}

static void test_tree_sampled(void **state)
{
	check_tree("branch:3,2", RT_EXPAND_SAMPLE, RT_VERIFY_RRS, S1, 13);
	check_tree("branch:2,2,2", RT_EXPAND_SAMPLE, RT_VERIFY_RRS, S2, 14);
	check_tree("branch:3,2", RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW, S1, 15);
	check_tree("branch:2,2,1", RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW, S2, 16);
}

/* The host tree decoder on a chain tree with S > 1 passes (the engine's
 * rule: unmask steps as the chain drafter, the chain's tokens drawn from
 * the fixed Z by the tree expansion, verified against Z), sampled with RRS
 * and top-k with one-hot verification, the request's top-k / top-p on Z. */
static void test_tree_chain_steps(void **state)
{
	const rt_sampling s3 = { 0.8f, 3, 0.9f };
	check_tree_steps("chain:3", 2, RT_EXPAND_SAMPLE, RT_VERIFY_RRS, S1, 17);
	check_tree_steps("chain:4", 3, RT_EXPAND_SAMPLE, RT_VERIFY_RRS, s3, 18);
	check_tree_steps("chain:4", 4, RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, S2, 19);
}

/* ---- the naive S > 1 rule, only here ---- */

struct naive_drafter {
	rt_drafter base;
	const rt_block_drafter *bd;
	rt_bd_state *st;
	int steps;
	float *lg;
	int idx[64];
};

static void naive_probs(const struct naive_drafter *n, const float *lg, const rt_sampling *s, float *q, int *idx)
{
	int Vd = n->bd->cfg.draft_vocab, V = n->bd->cfg.vocab;
	rt_probs(q, lg, Vd, s, idx);
	for (int v = Vd; v < V; v++)
		q[v] = 0;
}

/* MDLM ddpm_cache as in block_decode.c, but each token's q is the pass that
 * unmasked it (ALGORITHMS.txt 8: biased at T > 0). */
static int naive_propose(rt_drafter *d, const int32_t *hist, int n_hist, int gamma, const rt_sampling *s,
                         uint64_t seed, uint32_t iter, int32_t *tok, float *q, sw_err *err)
{
	struct naive_drafter *n = (struct naive_drafter *)d;
	const int B = n->bd->cfg.block, Vd = n->bd->cfg.draft_vocab, V = n->bd->cfg.vocab, S = n->steps;
	int g = gamma < B ? gamma : B, pos0 = n_hist - 1;
	int n_win = n->bd->cfg.window < pos0 ? n->bd->cfg.window : pos0;
	int32_t fixed[RT_BD_MAX_BLOCK], blk[RT_BD_MAX_BLOCK];
	for (int j = 0; j < B; j++)
		fixed[j] = -1;
	for (int i = 0; i < S; i++) {
		blk[0] = hist[pos0];
		for (int j = 1; j < B; j++)
			blk[j] = fixed[j - 1];
		int rc = rt_bd_forward(n->st, blk, pos0, hist + pos0 - n_win, n_win, n->lg, err);
		if (rc)
			return rc;
		double t = 1.0 - (double)i * (1.0 - 1e-5) / S, tn = 1.0 - (double)(i + 1) * (1.0 - 1e-5) / S;
		for (int j = 0; j < g; j++) {
			if (fixed[j] >= 0)
				continue;
			uint32_t node = 256u * (uint32_t)(i + 1) + (uint32_t)j;
			bool last = i + 1 == S;
			if (!last && sw_uniform_double(seed, iter, node, SW_RNG_DRAFT_SAMPLE) >= (t - tn) / t)
				continue;
			float *qj = q + (size_t)j * V;
			naive_probs(n, n->lg + (size_t)j * Vd, s, qj, n->idx);
			fixed[j] = rt_sample_cdf(qj, Vd, sw_uniform_double(seed, iter, node + 128, SW_RNG_DRAFT_SAMPLE));
		}
	}
	for (int j = 0; j < g; j++)
		tok[j] = fixed[j];
	return g;
}

static void naive_free(rt_drafter *d) { (void)d; }

static const struct rt_drafter_ops naive_ops = { naive_propose, naive_free, NULL };

static void test_naive_steps_fail(void **state)
{
	/* Uniform attention (wq = wk = 0) with strong values: every row's
	 * output depends on every fixed token, so the final pass's q for an
	 * early position depends on tokens fixed to its right. 200000 trials:
	 * at 20000 the bias (chi2 excess ~ 15) hides in the noise; here the
	 * statistic is about twice the critical value while the exact rule on
	 * the same drafter stays below it. */
	enum { V = 5, N_NEW = 3, TRIALS = 200000 };
	struct setup S;
	setup_qkvo(&S, V, "tokens", "bidirectional", 4, 1.0, 0.0, 5.0, 1, 21);
	sw_err err;
	rt_ctx *tc = rt_ctx_new(S.tm, 32, 16, &err);
	struct naive_drafter n = { .base = { .ops = &naive_ops, .name = "naive" }, .bd = S.bd, .steps = 2 };
	n.st = rt_bd_state_new(S.bd, 32, &err);
	n.lg = malloc((size_t)S.bd->cfg.block * S.bd->cfg.draft_vocab * sizeof(float));
	struct result r = run(&S, tc, &n.base, NULL, 0, 0, S1, 3, N_NEW, TRIALS);
	printf("  naive per-pass q, S=2, T=1: chi2 %7.2f df %3d crit %6.2f (must FAIL)\n", r.chi, r.df, r.crit);
	assert_true(r.chi > r.crit);
	/* the exact rule on the same drafter passes */
	rt_drafter *d = rt_drafter_block(S.bd, tc, 2, &err);
	struct result e = run(&S, tc, d, NULL, 0, 0, S1, 3, N_NEW, TRIALS);
	printf("  final-Z rule,  S=2, T=1: chi2 %7.2f df %3d crit %6.2f\n", e.chi, e.df, e.crit);
	assert_true(e.chi < e.crit);
	rt_drafter_free(d);
	free(n.lg);
	rt_bd_state_free(n.st);
	rt_ctx_free(tc);
	teardown(&S);
}

/* Greedy: every 2-token prompt, 10 tokens, chain (S = 1 and 3) and a
 * Cartesian tree: identical to target-only greedy decoding. */
static void test_greedy(void **state)
{
	enum { V = 7, N = 10 };
	struct setup S;
	setup(&S, V, "features", "bidirectional", 4, 1.0, 31);
	sw_err err;
	rt_sampling g = { 0.0f, 0, 1.0f };
	rt_tree t;
	assert_int_equal(rt_tree_parse("branch:3,2,1", NULL, &t, &err), 0);
	int accepted = 0;
	for (int mode = 0; mode < 3; mode++) {
		rt_ctx *tc = rt_ctx_new(S.tm, 64, t.n, &err), *rc = rt_ctx_new(S.tm, 64, 8, &err);
		rt_drafter *d = rt_drafter_block(S.bd, tc, mode == 1 ? 3 : 1, &err);
		assert_non_null(d);
		for (int a = 0; a < V; a++)
			for (int b = 0; b < V; b++) {
				int32_t prompt[2] = { a, b }, o1[N], o2[N];
				rt_gen_cfg cfg = { .samp = g, .gamma = 4, .seed = 3, .max_new = N };
				rt_stats st;
				rt_ctx_truncate(tc, 0);
				rt_ctx_truncate(rc, 0);
				if (mode == 2) {
					rt_tree_cfg tcfg = { &t, RT_EXPAND_TOPK, RT_VERIFY_GREEDY };
					assert_int_equal(rt_generate_tree_block(tc, d, &tcfg, prompt, 2, &cfg, o1, &st, &err), N);
				} else {
					assert_int_equal(rt_generate_spec(tc, d, prompt, 2, &cfg, o1, &st, &err), N);
				}
				accepted += st.n_accepted > 0;
				assert_int_equal(rt_generate_target(rc, prompt, 2, &cfg, o2, &st, &err), N);
				assert_memory_equal(o1, o2, sizeof(o1));
			}
		rt_drafter_free(d);
		rt_ctx_free(tc);
		rt_ctx_free(rc);
	}
	assert_true(accepted > 0);
	teardown(&S);
}

/* Refused: a branching tree from S > 1 passes, a tree deeper than the block. */
static void test_refused(void **state)
{
	struct setup S;
	setup(&S, 5, "features", "bidirectional", 3, 1.0, 41);
	sw_err err;
	rt_tree t;
	assert_int_equal(rt_tree_parse("branch:2,1,1,1", NULL, &t, &err), 0);
	rt_ctx *tc = rt_ctx_new(S.tm, 32, t.n, &err);
	rt_drafter *d = rt_drafter_block(S.bd, tc, 1, &err);
	rt_tree_cfg tcfg = { &t, RT_EXPAND_TOPK, RT_VERIFY_ONEHOT };
	int32_t out[4];
	rt_stats st;
	rt_gen_cfg cfg = { .samp = S1, .gamma = 1, .seed = 1, .max_new = 4 };
	assert_int_equal(rt_generate_tree_block(tc, d, &tcfg, PROMPT, 3, &cfg, out, &st, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "depth 4"));
	rt_drafter_free(d);
	rt_ctx_truncate(tc, 0);
	rt_tree t2;
	assert_int_equal(rt_tree_parse("branch:2,1", NULL, &t2, &err), 0);
	d = rt_drafter_block(S.bd, tc, 2, &err);
	tcfg.tree = &t2;
	assert_int_equal(rt_generate_tree_block(tc, d, &tcfg, PROMPT, 3, &cfg, out, &st, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "steps=2 drafts a chain"));
	rt_drafter_free(d);
	rt_ctx_truncate(tc, 0);
	assert_null(rt_drafter_block(S.bd, tc, 17, &err));
	assert_non_null(strstr(err.msg, "steps=17"));
	rt_ctx_free(tc);
	teardown(&S);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_greedy),
		cmocka_unit_test(test_chain_one_pass),
		cmocka_unit_test(test_chain_steps),
		cmocka_unit_test(test_chain_specdecpp),
		cmocka_unit_test(test_tree_cartesian),
		cmocka_unit_test(test_tree_sampled),
		cmocka_unit_test(test_tree_chain_steps),
		cmocka_unit_test(test_naive_steps_fail),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
