/* The draft-length controller in running engines (ALGORITHMS.txt 12;
 * templates/draft_ctrl.cu.tmpl): it decides only how many tokens are
 * drafted, so the output stays the target's.
 * (1) SmolLM2 n-gram chain:6 fp16, greedy: with the host's cost shape the
 * controller switches drafting off and on within one request (the
 * per-iteration trace holds both 0 and k >= 1), and with the table forced
 * flat (all drafted) and prohibitive (probes only) the tokens are the same
 * engine's target-only greedy tokens, token for token.
 * (2) A tiny n-gram chain with one-hot verification at temperature 1: a
 * seeded request gives the same tokens after other requests ran (the
 * controller's state is per request) and on a freshly bound engine; the
 * measured cost table is 1 at k = 0, non-decreasing, at least the floor
 * 1 + 0.05 k, and a repetition count outside 1..31 is refused.
 * (3) Exactness at T > 0: the first two tokens of 3000 seeded requests on
 * a 12-token model through an n-gram one-hot engine with the controller,
 * chi-square against the exact enumeration (tu_seq_dist) at 1e-4. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "engine_util.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "testutil.h"

static char g_dir[256];

static const char *cache_dir(void)
{
	static char c[300];
	snprintf(c, sizeof(c), "%s/cache", g_dir);
	return c;
}

static const char *model_path(void)
{
	const char *p = getenv("SW_MODEL");
	return p ? p : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
}

static int gen_trace(rt_engine *e, const int32_t *prompt, int P, int N, bool target_only,
                     int32_t *out, int8_t *trace, rt_engine_stats *st)
{
	sw_err err = {0};
	rt_engine_run r = {.prompt = prompt, .n_prompt = P, .max_new = N, .eos = -1,
	                   .target_only = target_only, .trace = trace, .trace_cap = trace ? N : 0};
	int n = rt_engine_generate(e, &r, out, st, &err);
	if (n < 0)
		fail_msg("%s", err.msg);
	return n;
}

static void test_smollm2_switching(void **state)
{
	(void)state;
	if (access(model_path(), R_OK)) {
		print_message("real model %s missing (make model): skipped\n", model_path());
		skip();
	}
	sw_err err = {0};
	rt_model *m = rt_model_load(model_path(), &err);
	if (!m)
		fail_msg("%s", err.msg);
	char spec[2048], dir[300];
	snprintf(dir, sizeof(dir), "%s/smollm2_ctrl", g_dir);
	snprintf(spec, sizeof(spec),
	         "{\"name\": \"smollm2-ctrl\", \"target\": {\"path\": \"%s\"}, "
	         "\"draft\": {\"method\": \"ngram:1:3\"}, \"tree\": \"chain:6\", "
	         "\"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, "
	         "\"max_context\": 256, \"prefill_chunk\": 32, \"dtype\": \"fp16\", "
	         "\"archs\": [\"sm_80\"], \"control\": {\"mode\": \"cost\", \"probe\": 4, "
	         "\"cost\": [1, 1.16, 1.16, 1.47, 1.47, 1.47, 1.47]}}", model_path());
	eu_build(spec, dir, cache_dir(), false);
	/* chat-style ids: a question, then a sentence said twice (copyable) */
	static const int32_t prompt[] = {1, 9690, 198, 2683, 359, 253, 5356, 11173, 30, 2, 198, 1,
	                                 4093, 198, 504, 3575, 282, 4649, 314, 7042, 30, 504, 3575,
	                                 282, 4649, 314, 7042, 30, 504, 3575, 282, 2, 198, 1, 520,
	                                 9531, 198};
	const int P = (int)(sizeof(prompt) / sizeof(prompt[0])), N = 48;
	int32_t to[64], a[64];
	int8_t tr[64];
	rt_engine_stats st;
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, cache_dir());
	rt_engine *e = eu_bind(dir, d, m, 1);
	assert_string_equal(e->ctrl_cost_src, "spec");
	assert_int_equal(gen_trace(e, prompt, P, N, true, to, NULL, &st), N);
	static const double flat[7] = {1, 1, 1, 1, 1, 1, 1};
	static const double dear[7] = {1, 1000, 1000, 1000, 1000, 1000, 1000};
	for (int c = 0; c < 3; c++) {
		if (c == 1 && rt_engine_set_ctrl_cost(e, flat, 7, &err))
			fail_msg("%s", err.msg);
		if (c == 2 && rt_engine_set_ctrl_cost(e, dear, 7, &err))
			fail_msg("%s", err.msg);
		memset(tr, -2, sizeof(tr));
		assert_int_equal(gen_trace(e, prompt, P, N, false, a, tr, &st), N);
		int off = 0, on = 0, maxk = 0;
		char line[256] = "";
		for (int i = 0; i < st.n_iters; i++) {
			assert_true(tr[i] >= 0 && tr[i] <= 6);
			off += tr[i] == 0;
			on += tr[i] > 0;
			maxk = tr[i] > maxk ? tr[i] : maxk;
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "%d", tr[i]);
		}
		print_message("  cost table %d: %d iterations (%d drafting none, %d drafting, at most "
		              "%d): %s\n", c, st.n_iters, off, on, maxk, line);
		for (int i = 0; i < N; i++)
			if (a[i] != to[i])
				fail_msg("cost table %d: token %d is %d, target-only greedy %d", c, i, a[i],
				         to[i]);
		if (c == 0) /* switched off and on within the request */
			assert_true(off > 0 && on > 0);
		if (c == 2) /* prohibitive: the probes only, one token each */
			assert_true(maxk <= 1 && off > 0);
		/* the drafted histogram is the trace's */
		uint64_t h[7] = {0};
		for (int i = 0; i < st.n_iters; i++)
			h[tr[i]]++;
		for (int k = 0; k <= 6; k++)
			assert_int_equal(h[k], st.drafted[k]);
	}
	rt_engine_free(e);
	rt_dev_free(d);
	rt_model_free(m);
}

static void test_tiny_reproducible(void **state)
{
	(void)state;
	char path[300], spec[2048], dir[300];
	rt_model *m = eu_tiny_model(g_dir, path, sizeof(path));
	assert_non_null(m);
	snprintf(dir, sizeof(dir), "%s/tiny_ctrl", g_dir);
	eu_tiny_spec(spec, sizeof(spec), path, "ngram:1:3", "chain:4", "onehot", "topk", 1.0, "fp16",
	             "\"control\": {\"probe\": 3, \"cost\": [1, 1.2, 1.3, 1.6, 1.7]}");
	eu_build(spec, dir, cache_dir(), false);
	int32_t pa[48], pb[48], a1[40], a2[40], a3[40], b[40];
	eu_tiny_prompt(pa, 48);
	for (int i = 0; i < 48; i++) /* a prompt of other repeats */
		pb[i] = i < 8 ? (pa[i] + 31) % EU_TINY_VOCAB : pb[i - 8 + (i % 5 == 0)];
	sw_err err = {0};
	rt_engine_stats st;
	int8_t t1[40], t2[40];
	for (int mode = 0; mode < 2; mode++) {
		rt_dev *d = eu_open_host(mode ? RT_HOST_EMULATE : RT_HOST_NATIVE, cache_dir());
		rt_engine *e = eu_bind(dir, d, m, 5);
		assert_int_equal(gen_trace(e, pa, 48, 32, false, a1, t1, &st), 32);
		const int it1 = st.n_iters;
		for (int s = 0; s < 3; s++) { /* other requests, other seeds */
			if (rt_engine_reseed(e, 77 + s, &err))
				fail_msg("%s", err.msg);
			assert_int_equal(gen_trace(e, s & 1 ? pa : pb, 48, 32, false, b, NULL, &st), 32);
		}
		if (rt_engine_reseed(e, 5, &err))
			fail_msg("%s", err.msg);
		assert_int_equal(gen_trace(e, pa, 48, 32, false, a2, t2, &st), 32);
		assert_int_equal(st.n_iters, it1);
		assert_memory_equal(t1, t2, (size_t)it1);
		assert_memory_equal(a1, a2, sizeof(a1[0]) * 32);
		if (mode == 0)
			memcpy(a3, a1, sizeof(a3));
		else /* the emulated kernels decide as the reference ops do */
			assert_memory_equal(a1, a3, sizeof(a1[0]) * 32);
		int on = 0, off = 0;
		for (int i = 0; i < it1; i++) {
			on += t1[i] > 0;
			off += t1[i] == 0;
		}
		print_message("  %s: %d iterations, %d drafting, %d not; seed 5 reproduced after 3 "
		              "other requests\n", d->desc, it1, on, off);
		assert_true(on > 0);
		if (mode == 0) { /* the measured table (CPU-time ratios, median of reps) */
			double cost[5];
			if (rt_engine_ctrl_measure(e, 5, cost, &err))
				fail_msg("%s", err.msg);
			print_message("  measured cost table: %.3f %.3f %.3f %.3f %.3f\n", cost[0], cost[1],
			              cost[2], cost[3], cost[4]);
			assert_true(cost[0] == 1.0);
			for (int k = 1; k <= 4; k++) /* more rows never cost less; the floor */
				assert_true(cost[k] >= cost[k - 1] && cost[k] >= 1.0 + 0.05 * k - 1e-12 &&
				            cost[k] <= 1000.0);
			for (int bad = 0; bad < 2; bad++) {
				sw_err e2 = {0};
				assert_int_equal(rt_engine_ctrl_measure(e, bad ? 32 : 0, cost, &e2), SW_EINVAL);
				assert_non_null(strstr(e2.msg, "repetitions, expected 1 to 31"));
			}
		}
		rt_engine_free(e);
		rt_dev_free(d);
	}
	rt_model_free(m);
}

static void test_exact_ngram_onehot(void **state)
{
	(void)state;
	const rt_engine_sampling set[] = {{2.5f, 0, 1.0f}, {6.0f, 0, 1.0f}};
	const int V = 12, N = 3000, K = V * V;
	sw_err err = {0};
	char mpath[300], spec[2048], dir[300];
	rt_model *m = tu_tiny_llama(V, 128, 2, 2, 1, 160, 11);
	assert_non_null(m);
	snprintf(mpath, sizeof(mpath), "%s/v12.gguf", g_dir);
	if (rt_llama_save_gguf(m, mpath, GGML_T_F32, &err))
		fail_msg("%s", err.msg);
	/* the model's own greedy continuation of 3 7 1 (it falls into a cycle),
	 * so the lookup matches and its drafts are often the likely tokens:
	 * iterations that draft, accept and reject all occur */
	int32_t prompt[24] = {3, 7, 1};
	float mg[24];
	eu_reference(m, prompt, 3, 17, prompt + 3, mg, NULL);
	const int P = 20;
	double *probs = eu_seq_dists(m, prompt, P, set, 2);
	uint64_t *counts = malloc(sizeof(*counts) * (size_t)K);
	assert_non_null(counts);
	snprintf(dir, sizeof(dir), "%s/exact_ngram", g_dir);
	snprintf(spec, sizeof(spec),
	         "{\"name\": \"v12\", \"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": "
	         "\"ngram:1:3\"}, \"tree\": \"chain:3\", \"verify\": {\"method\": \"onehot\", "
	         "\"expand\": \"topk\"}, \"sampling\": {\"temperature\": 1, \"top_k\": 0, \"top_p\": 1}, "
	         "\"max_context\": 64, \"prefill_chunk\": 8, \"dtype\": \"fp16\", "
	         "\"archs\": [\"sm_80\"], \"control\": {\"probe\": 2, \"cost\": [1, 1.3, 1.6, 1.9]}}",
	         mpath);
	eu_build(spec, dir, cache_dir(), false);
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, cache_dir());
	rt_engine *e = eu_bind(dir, d, m, 1);
	uint64_t seed = 500;
	for (int k = 0; k < 2; k++) {
		eu_pairs pr = {.prompt = prompt, .n_prompt = P, .samp = &set[k], .runs = N, .vocab = V,
		               .pad_from = -1, .seed = seed, .counts = counts};
		eu_count_pairs(e, &pr, "ngram onehot + control");
		seed = pr.seed;
		int df;
		const double chi = tu_chi2(counts, probs + (size_t)k * K, K, (uint64_t)N, &df);
		const double crit = tu_chi2_crit(df, 1e-4);
		print_message("  ngram:1:3 chain:3 onehot, controller on, T %.1f: chi2 %.1f (df %d, "
		              "critical %.1f at 1e-4), %.2f iterations per 2 tokens\n",
		              (double)set[k].temperature, chi, df, crit, (double)pr.iters / N);
		if (!(chi < crit))
			fail_msg("T %g: the output distribution is not the target's",
			         (double)set[k].temperature);
	}
	rt_engine_free(e);
	rt_dev_free(d);
	free(probs);
	free(counts);
	rt_model_free(m);
}

static int setup(void **state)
{
	(void)state;
	eu_work_dir(g_dir, sizeof(g_dir), "test_engine_ctrl");
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smollm2_switching),
		cmocka_unit_test(test_tiny_reproducible),
		cmocka_unit_test(test_exact_ngram_onehot),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
