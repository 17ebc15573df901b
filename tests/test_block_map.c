/* Block drafters over a draft vocabulary given as a map (d2t, the public
 * EAGLE-3 encoding), not a prefix: on a tiny target of 5 ids with draft ids
 * mapped to target ids {0, 2, 3, 4} (q = 0 on id 1),
 *   - the mapped drafter's logits are the unmapped drafter's (same weights,
 *     every id) at the mapped ids, bit for bit (same LM-head rows, same
 *     dot products);
 *   - generation is exact: chi-square at significance 1e-4 (Wilson-Hilferty
 *     critical value) of 3-token generations against the exact enumerated
 *     distribution, chain S = 1 and S = 2 (the final-Z rule: the unmasked
 *     draft ids become target ids as inputs) and a sampled tree with RRS,
 *     id 1 still produced (through the residual);
 *   - greedy chain and tree output equal to target-only;
 *   - refused: an offset out of range, a missing or unannounced d2t tensor;
 *   - the planner's entry takes the map, and the weights an engine uploads
 *     for it are the gathered head rows, d2t and its inverse t2d
 *     (tests/test_engine_block.c runs such engines). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "block_util.h"
#include "decode/block_decode.h"
#include "decode/tree_verify.h"
#include "testutil.h"

#define ALPHA 1e-4
enum { V = 5, VD = 4 };
static const int32_t MAP[VD] = { 0, 2, 3, 4 };
static const int32_t PROMPT[3] = { 1, 0, 2 };
static const rt_sampling S1 = { 1.0f, 0, 1.0f }, S2 = { 0.6f, 3, 1.0f }, GREEDY = { 0.0f, 0, 1.0f };

struct setup {
	rt_model *tm;
	rt_block_drafter *bd;
	char dir[64];
};

static void setup(struct setup *S, const int32_t *map, uint64_t seed)
{
	S->tm = tu_tiny_llama(V, 16, 2, 4, 2, 24, 700 + seed);
	tbu_opts o = tbu_default(S->tm);
	o.taps[0] = 0, o.taps[1] = 1;
	o.draft_vocab = map ? VD : V;
	o.map = map;
	tbu_tmpdir(S->dir);
	assert_int_equal(tbu_write(S->dir, S->tm, &o, seed), 0);
	sw_err err = { 0 };
	S->bd = rt_block_drafter_load(S->dir, S->tm, &err);
	if (!S->bd)
		fail_msg("%s", err.msg);
}

static void teardown(struct setup *S)
{
	rt_block_drafter_free(S->bd);
	rt_model_free(S->tm);
	tbu_rmdir(S->dir);
}

static void test_logits_gathered(void **state)
{
	struct setup A, B;
	setup(&A, MAP, 1);
	setup(&B, NULL, 1); /* same seed: the same weights, every id */
	sw_err err = { 0 };
	rt_ctx *tc = rt_ctx_new(A.tm, 16, 8, &err);
	const int taps[2] = { 0, 1 };
	assert_int_equal(rt_ctx_set_taps(tc, taps, 2, &err), 0);
	assert_int_equal(rt_ctx_feed(tc, PROMPT, 2, NULL, &err), 0);
	rt_bd_state *sa = rt_bd_state_new(A.bd, 16, &err), *sb = rt_bd_state_new(B.bd, 16, &err);
	assert_int_equal(rt_bd_append(sa, tc->tap_cache, 2, &err), 0);
	assert_int_equal(rt_bd_append(sb, tc->tap_cache, 2, &err), 0);
	int32_t blk[4] = { PROMPT[2], -1, -1, -1 };
	float la[4 * VD], lb[4 * V];
	assert_int_equal(rt_bd_forward(sa, blk, 2, NULL, 0, la, &err), 0);
	assert_int_equal(rt_bd_forward(sb, blk, 2, NULL, 0, lb, &err), 0);
	for (int j = 0; j < 4; j++)
		for (int i = 0; i < VD; i++)
			assert_true(la[j * VD + i] == lb[j * V + MAP[i]]);
	for (int i = 0; i < VD; i++)
		assert_int_equal(A.bd->d2t[i], MAP[i]);
	rt_bd_state_free(sa);
	rt_bd_state_free(sb);
	rt_ctx_free(tc);
	teardown(&A);
	teardown(&B);
}

static void check(const char *label, int steps, const char *tree, int rule, int method, rt_sampling s, uint64_t seed)
{
	enum { N_NEW = 3, TRIALS = 20000 };
	struct setup S;
	setup(&S, MAP, seed);
	sw_err err = { 0 };
	rt_tree t;
	if (tree)
		assert_int_equal(rt_tree_parse(tree, NULL, &t, &err), 0);
	rt_ctx *tc = rt_ctx_new(S.tm, 32, 16, &err);
	rt_drafter *d = rt_drafter_block(S.bd, tc, steps, &err);
	assert_non_null(d);
	double probs[V * V * V];
	uint64_t counts[V * V * V] = { 0 }, acc = 0, drafted = 0, id1 = 0;
	tu_seq_dist(S.tm, PROMPT, 3, N_NEW, &s, probs);
	for (int k = 0; k < TRIALS; k++) {
		int32_t out[8];
		rt_stats st;
		rt_gen_cfg cfg = { .samp = s, .gamma = 3, .seed = 5100 + (uint64_t)k, .max_new = N_NEW };
		rt_ctx_truncate(tc, 0);
		int got;
		if (tree) {
			rt_tree_cfg tcfg = { &t, rule, method };
			got = rt_generate_tree_drafter(tc, d, &tcfg, PROMPT, 3, &cfg, out, &st, &err);
		} else {
			got = rt_generate_spec(tc, d, PROMPT, 3, &cfg, out, &st, &err);
		}
		if (got != N_NEW)
			fail_msg("%s: %s", label, err.msg);
		counts[(out[0] * V + out[1]) * V + out[2]]++;
		acc += st.n_accepted;
		drafted += st.n_drafted;
		id1 += out[0] == 1 || out[1] == 1 || out[2] == 1;
	}
	int df;
	double chi = tu_chi2(counts, probs, V * V * V, TRIALS, &df), crit = tu_chi2_crit(df, ALPHA);
	printf("  %-26s T=%.1f k=%d: chi2 %7.2f df %3d crit(1e-4) %6.2f, acceptance %.3f, outputs with id 1 %llu\n", label,
	       s.temperature, s.top_k, chi, df, crit, (double)acc / (double)drafted, (unsigned long long)id1);
	assert_true(acc > 0 && acc < drafted);
	/* id 1 has q = 0: where the target gives it mass, it still comes out
	 * (through the residual) */
	double p1 = 0;
	for (int a = 0; a < V; a++)
		for (int b = 0; b < V; b++)
			for (int c = 0; c < V; c++)
				if (a == 1 || b == 1 || c == 1)
					p1 += probs[(a * V + b) * V + c];
	if (p1 * TRIALS >= 20)
		assert_true(id1 > 0);
	assert_true(chi < crit);
	rt_drafter_free(d);
	rt_ctx_free(tc);
	teardown(&S);
}

static void test_exact(void **state)
{
	check("chain S=1", 1, NULL, 0, 0, S1, 11);
	check("chain S=2 (final Z)", 2, NULL, 0, 0, S2, 12);
	check("tree branch:3,2 sample/rrs", 1, "branch:3,2", RT_EXPAND_SAMPLE, RT_VERIFY_RRS, S1, 13);
	check("tree branch:2,2 topk/onehot", 1, "branch:2,2", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, S2, 14);
}

static void test_greedy(void **state)
{
	enum { N = 8 };
	struct setup S;
	setup(&S, MAP, 21);
	sw_err err = { 0 };
	rt_tree t;
	assert_int_equal(rt_tree_parse("branch:3,2,1", NULL, &t, &err), 0);
	uint64_t accepted = 0;
	for (int mode = 0; mode < 3; mode++) {
		rt_ctx *tc = rt_ctx_new(S.tm, 64, t.n, &err), *rc = rt_ctx_new(S.tm, 64, 8, &err);
		rt_drafter *d = rt_drafter_block(S.bd, tc, mode == 1 ? 2 : 1, &err);
		for (int a = 0; a < V; a++)
			for (int b = 0; b < V; b++) {
				int32_t prompt[2] = { a, b }, o1[N], o2[N];
				rt_gen_cfg cfg = { .samp = GREEDY, .gamma = 4, .seed = 3, .max_new = N };
				rt_stats st;
				rt_ctx_truncate(tc, 0);
				rt_ctx_truncate(rc, 0);
				if (mode == 2) {
					rt_tree_cfg tcfg = { &t, RT_EXPAND_TOPK, RT_VERIFY_GREEDY };
					assert_int_equal(rt_generate_tree_drafter(tc, d, &tcfg, prompt, 2, &cfg, o1, &st, &err), N);
				} else {
					assert_int_equal(rt_generate_spec(tc, d, prompt, 2, &cfg, o1, &st, &err), N);
				}
				accepted += st.n_accepted;
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

static void refused(int map_bad, const char *extra_tensor, const char *want)
{
	rt_model *tm = tu_tiny_llama(V, 16, 2, 4, 2, 24, 9);
	tbu_opts o = tbu_default(tm);
	o.draft_vocab = VD;
	o.map = extra_tensor ? NULL : MAP;
	o.map_bad = map_bad;
	o.extra_tensor = extra_tensor;
	char dir[64];
	tbu_tmpdir(dir);
	assert_int_equal(tbu_write(dir, tm, &o, 1), 0);
	sw_err err = { 0 };
	rt_block_drafter *bd = rt_block_drafter_load(dir, tm, &err);
	assert_null(bd);
	if (!strstr(err.msg, want))
		fail_msg("error \"%s\" lacks \"%s\"", err.msg, want);
	printf("  refused: %s\n", err.msg);
	tbu_rmdir(dir);
	rt_model_free(tm);
}

static void test_refused(void **state)
{
	refused(1, NULL, "tensor d2t[0]: expected an offset to a target id in [0, 5), found -1 (target id -1)");
	refused(2, NULL, "tensor d2t: missing (expected shape [4], I64");
	refused(0, "d2t", "tensor d2t: not expected");
}

/* The planner's entry takes a map (the engine drafts through it), and the
 * weights an engine uploads for it (rt_bd_weight): the head's rows d2t[i]
 * of the target's, d2t, and t2d its inverse with -1 off the map. */
static void test_engine_weights(void **state)
{
	struct setup S;
	setup(&S, MAP, 31);
	rt_bd_config c;
	sw_err err = { 0 };
	assert_int_equal(rt_bd_config_load(S.dir, &S.tm->cfg, "t", &c, &err), 0);
	assert_true(c.has_map);
	assert_int_equal(c.draft_vocab, VD);
	size_t n = 0;
	const float *d2t = rt_bd_weight(S.bd, "d2t", -1, &n);
	assert_non_null(d2t);
	assert_int_equal(n, VD);
	for (int i = 0; i < VD; i++)
		assert_true(d2t[i] == (float)MAP[i]);
	const float *t2d = rt_bd_weight(S.bd, "t2d", -1, &n);
	assert_non_null(t2d);
	assert_int_equal(n, V);
	for (int x = 0; x < V; x++) {
		int want = -1;
		for (int i = 0; i < VD; i++)
			want = MAP[i] == x ? i : want;
		assert_true(t2d[x] == (float)want);
	}
	const int D = S.tm->cfg.dim;
	const float *lm = rt_bd_weight(S.bd, "lm_head", -1, &n);
	assert_non_null(lm);
	assert_int_equal(n, (size_t)VD * D);
	for (int i = 0; i < VD; i++)
		assert_memory_equal(lm + (size_t)i * D, S.tm->w.lm_head + (size_t)MAP[i] * D, (size_t)D * sizeof(float));
	teardown(&S);
	/* unmapped: none of the three (the engine uses the target's head) */
	setup(&S, NULL, 32);
	assert_null(rt_bd_weight(S.bd, "d2t", -1, &n));
	assert_null(rt_bd_weight(S.bd, "t2d", -1, &n));
	assert_null(rt_bd_weight(S.bd, "lm_head", -1, &n));
	teardown(&S);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_logits_gathered),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_engine_weights),
		cmocka_unit_test(test_greedy),
		cmocka_unit_test(test_exact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
