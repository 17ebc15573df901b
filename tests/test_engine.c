/* The full run path: spec -> `specwright build` (plan + render, no NVRTC)
 * -> engine loaded, bound to the host backend in native mode (kernels/ref
 * ops) and emulate mode (the generated kernels in the SIMT emulator) ->
 * chunked prefill -> one captured graph replayed per iteration. Checked
 * against independent references:
 *  - greedy engines emit the host reference path's target-only greedy tokens
 *    (runtime/llama.c in fp32). The engine computes in 16 bits, so a
 *    divergence is accepted only at a near-tie: the reference's top-2 logit
 *    margin there must be below a bound derived from the dtype (below);
 *  - stochastic runs give identical tokens in native and emulate modes for
 *    the same seed: every draw is Philox keyed by (seed, iter, node, purpose)
 *    on both sides; a float-order difference between the exact native
 *    attention and the split kernel could only flip a draw whose uniform
 *    lies within ~1e-6 of a CDF boundary, which these seeds do not hit (a
 *    failure here would say which). Greedy runs: see check_greedy;
 *  - graph replay equals eager op-by-op execution;
 *  - the real model (SmolLM2-135M) engine, emulated op by op, reproduces
 *    the reference greedy tokens.
 * Plus bad input: a missing or corrupted engine, a prompt too long, a model
 * that does not match the engine. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gen/build.h"
#include "gen/render.h"
#include "engine_util.h"
#include "device/device.h"
#include "engine/engine.h"
#include "kernels/engine_state.h"
#include "core/fileio.h"
#include "formats/gguf.h"
#include "decode/sampler.h"
#include "decode/chain.h"
#include "testutil.h"

static char g_dir[256];

static const char *cache_dir(void)
{
	static char c[300];
	snprintf(c, sizeof(c), "%s/cache", g_dir);
	return c;
}

static void build_engine(const char *spec_json, const char *dir)
{
	eu_build(spec_json, dir, cache_dir(), false);
}

static rt_dev *open_dev(int mode)
{
	return eu_open_host(mode, cache_dir());
}

/* Runs the engine in dir on a fresh host device; returns the token count. */
static int run_engine(const char *dir, int mode, const rt_model *m, uint64_t seed,
                      const int32_t *prompt, int n_prompt, int max_new, bool eager, int32_t *out,
                      rt_engine_stats *st)
{
	rt_dev *d = open_dev(mode);
	rt_engine *e = eu_bind(dir, d, m, seed);
	int n = eu_generate(e, d->desc, prompt, n_prompt, max_new, eager, out, st);
	print_message("  %-30s host overhead %.2f us/iteration\n", "", st->host_overhead_us);
	rt_engine_free(e);
	rt_dev_free(d);
	return n;
}


/* Greedy engine tokens vs the reference: identical, or the first
 * divergence sits at a near-tie. Bound: every 16-bit rounding (weights, GEMM
 * inputs, K/V, attention output) has relative error <= u (2^-8 bf16, 2^-11
 * fp16: 8 and 11 significant bits); they reach a logit through normalised
 * layers, so |dlogit| stays within a small multiple of u max|logit| (the
 * measured fp16 SmolLM2 and tiny-model gaps are ~1.2 u max|logit|); 8 u
 * max|logit| leaves room and is still far below a typical top-2 margin.
 * Native and emulate differ in float order (exact vs split attention), so a
 * near-tie may also flip between them: for greedy runs each is held to the
 * reference this way, and their identity is reported, not asserted. */
static void check_greedy(const char *what, const int32_t *got, int n, const int32_t *ref,
                         const float *margin, double u, double max_logit)
{
	int k = 0;
	while (k < n && got[k] == ref[k])
		k++;
	if (k == n) {
		print_message("  %s: %d/%d tokens identical to the host reference\n", what, n, n);
		return;
	}
	double bound = 8.0 * u * max_logit;
	print_message("  %s: diverges from the reference at token %d (margin %.5f, bound %.5f)\n", what,
	              k, (double)margin[k], bound);
	if (margin[k] > bound)
		fail_msg("%s: token %d is %d, the reference's %d wins by %.5f > %.5f", what, k, got[k],
		         ref[k], (double)margin[k], bound);
}

static double max_abs_logit(const rt_model *m, const int32_t *prompt, int n)
{
	sw_err err = {0};
	const int V = m->cfg.vocab;
	rt_ctx *c = rt_ctx_new(m, n + 8, n + 8, &err);
	float *lg = malloc(sizeof(*lg) * (size_t)V);
	assert_non_null(c);
	assert_non_null(lg);
	if (rt_ctx_feed(c, prompt, n, lg, &err))
		fail_msg("%s", err.msg);
	double mx = 0;
	for (int v = 0; v < V; v++)
		mx = fmax(mx, fabs(lg[v]));
	free(lg);
	rt_ctx_free(c);
	return mx;
}

/* --- tiny synthetic model -------------------------------------------------- */

static rt_model *g_tiny;
static char g_tiny_path[300];

static int setup(void **state)
{
	eu_work_dir(g_dir, sizeof(g_dir), "test_engine");
	g_tiny = eu_tiny_model(g_dir, g_tiny_path, sizeof(g_tiny_path));
	return g_tiny ? 0 : -1;
}

static int teardown(void **state)
{
	rt_model_free(g_tiny);
	return 0;
}

static void tiny_spec(char *buf, size_t n, const char *draft, const char *tree, const char *verify,
                      const char *expand, double temp, const char *dtype)
{
	eu_tiny_spec(buf, n, g_tiny_path, draft, tree, verify, expand, temp, dtype, NULL);
}

static void tiny_prompt(int32_t *p, int n)
{
	eu_tiny_prompt(p, n);
}

/* Greedy layer-skip tree engine: native, emulate, graph and eager agree and
 * match the reference. 37 prompt tokens: two full chunks plus a tail. */
static void test_tiny_greedy_tree(void **state)
{
	char spec[2048], dir[300];
	const int P = 37, N = 40;
	int32_t prompt[64], ref[64], a[64], b[64], c[64];
	float margin[64];
	rt_engine_stats st;
	snprintf(dir, sizeof(dir), "%s/tiny_eagle", g_dir);
	tiny_spec(spec, sizeof(spec), "layerskip:1", "eagle25", "greedy", "topk", 0, "fp16");
	build_engine(spec, dir);
	tiny_prompt(prompt, P);
	eu_reference(g_tiny, prompt, P, N, ref, margin, NULL);
	double mx = max_abs_logit(g_tiny, prompt, P);
	assert_int_equal(run_engine(dir, RT_HOST_NATIVE, g_tiny, 1, prompt, P, N, false, a, &st), N);
	assert_int_equal(run_engine(dir, RT_HOST_NATIVE, g_tiny, 1, prompt, P, N, true, c, &st), N);
	assert_memory_equal(a, c, sizeof(*a) * N);
	assert_int_equal(run_engine(dir, RT_HOST_EMULATE, g_tiny, 1, prompt, P, N, false, b, &st), N);
	check_greedy("tiny eagle25 fp16 native", a, N, ref, margin, ldexp(1.0, -11), mx);
	check_greedy("tiny eagle25 fp16 emulated", b, N, ref, margin, ldexp(1.0, -11), mx);
	assert_true(st.n_iters < N); /* the tree accepted something */
}

/* Prompt-lookup drafting on the device (chain tree, one-hot verification)
 * with a prompt shorter than one chunk; bf16. */
static void test_tiny_ngram_chain(void **state)
{
	char spec[2048], dir[300];
	const int P = 11, N = 24;
	int32_t prompt[64], ref[64], a[64], b[64];
	float margin[64];
	rt_engine_stats st;
	snprintf(dir, sizeof(dir), "%s/tiny_ngram", g_dir);
	tiny_spec(spec, sizeof(spec), "ngram:1:3", "chain:4", "greedy", "topk", 0, "bf16");
	build_engine(spec, dir);
	tiny_prompt(prompt, P);
	eu_reference(g_tiny, prompt, P, N, ref, margin, NULL);
	double mx = max_abs_logit(g_tiny, prompt, P);
	assert_int_equal(run_engine(dir, RT_HOST_NATIVE, g_tiny, 1, prompt, P, N, false, a, &st), N);
	assert_int_equal(run_engine(dir, RT_HOST_EMULATE, g_tiny, 1, prompt, P, N, false, b, &st), N);
	check_greedy("tiny ngram chain bf16 native", a, N, ref, margin, ldexp(1.0, -8), mx);
	check_greedy("tiny ngram chain bf16 emulated", b, N, ref, margin, ldexp(1.0, -8), mx);
}

/* q8_0 weights (GEMMs on GGUF Q8_0 blocks, the rest fp16), on a tiny model
 * saved as Q8_0: re-quantizing Q8_0 values gives them back (each block's
 * largest |q| is 127, so d and q come out the same), so the fp32 reference
 * over the file's weights computes with exactly the engine's weights and
 * only the fp16 roundings of activations, embedding and K/V remain: u =
 * 2^-11 as for fp16 engines. Native and emulated (the generated kernels
 * around the host GEMM). Then q8_0_a8 on the same file: the GEMMs also round
 * their inputs to int8 per block of 32, each within d / 2 = max|block| / 254
 * of its fp16 value, a relative error of 2^-8 of its block as for the
 * weights above, so u = 2^-8 + 2^-11. */
static void test_tiny_q8_0(void **state)
{
	char spec[2048], dir[300], path[300];
	const int P = 23, N = 32;
	int32_t prompt[64], ref[64], a[64], b[64];
	float margin[64];
	rt_engine_stats st;
	sw_err err = {0};
	snprintf(path, sizeof(path), "%s/tiny_q8.gguf", g_dir);
	if (rt_llama_save_gguf(g_tiny, path, GGML_T_Q8_0, &err))
		fail_msg("%s: %s", path, err.msg);
	rt_model *m = rt_model_load(path, &err);
	if (!m)
		fail_msg("%s", err.msg);
	snprintf(dir, sizeof(dir), "%s/tiny_q8", g_dir);
	eu_tiny_spec(spec, sizeof(spec), path, "ngram:1:3", "chain:4", "greedy", "topk", 0, "q8_0",
	             NULL);
	build_engine(spec, dir);
	tiny_prompt(prompt, P);
	eu_reference(m, prompt, P, N, ref, margin, NULL);
	double mx = max_abs_logit(m, prompt, P);
	assert_int_equal(run_engine(dir, RT_HOST_NATIVE, m, 1, prompt, P, N, false, a, &st), N);
	assert_int_equal(run_engine(dir, RT_HOST_EMULATE, m, 1, prompt, P, N, false, b, &st), N);
	check_greedy("tiny ngram chain q8_0 native", a, N, ref, margin, ldexp(1.0, -11), mx);
	check_greedy("tiny ngram chain q8_0 emulated", b, N, ref, margin, ldexp(1.0, -11), mx);
	assert_true(st.n_iters < N); /* prompt lookup accepted something */
	snprintf(dir, sizeof(dir), "%s/tiny_q8a8", g_dir);
	eu_tiny_spec(spec, sizeof(spec), path, "ngram:1:3", "chain:4", "greedy", "topk", 0, "q8_0_a8",
	             NULL);
	build_engine(spec, dir);
	assert_int_equal(run_engine(dir, RT_HOST_NATIVE, m, 1, prompt, P, N, false, a, &st), N);
	assert_int_equal(run_engine(dir, RT_HOST_EMULATE, m, 1, prompt, P, N, false, b, &st), N);
	const double u8 = ldexp(1.0, -8) + ldexp(1.0, -11);
	check_greedy("tiny ngram chain q8_0_a8 native", a, N, ref, margin, u8, mx);
	check_greedy("tiny ngram chain q8_0_a8 emulated", b, N, ref, margin, u8, mx);
	assert_true(st.n_iters < N);
	rt_model_free(m);
}

/* Stochastic: sampling without replacement + RRSW on a binary tree, and
 * SpecHub, and RRS / RRSW with a draft head over a vocabulary prefix;
 * native and emulate emit the same tokens for the same seed, and
 * a different seed changes them (the seed reaches the kernels). */
static void test_tiny_stochastic(void **state)
{
	/* the last two: a draft head over a vocabulary prefix (q = 0 beyond) */
	static const char *const pairs[][4] = {{"biseq8", "rrsw", "sample-wor", "layerskip:0-1"},
	                                       {"biseq16", "spechub", "spechub", "layerskip:0-1"},
	                                       {"kary:3:2", "rrs", "sample", "layerskip:0-1"},
	                                       {"kary:3:2", "rrs", "sample", "layerskip:0-1@80"},
	                                       {"chain:4", "rrsw", "sample-wor", "layerskip:0-1@97"}};
	for (int t = 0; t < 5; t++) {
		char spec[2048], dir[300];
		const int P = 19, N = 32;
		int32_t prompt[64], a[64], b[64], c[64];
		rt_engine_stats st;
		snprintf(dir, sizeof(dir), "%s/tiny_stoch%d", g_dir, t);
		tiny_spec(spec, sizeof(spec), pairs[t][3], pairs[t][0], pairs[t][1], pairs[t][2], 0.8,
		          "fp16");
		build_engine(spec, dir);
		tiny_prompt(prompt, P);
		assert_int_equal(run_engine(dir, RT_HOST_NATIVE, g_tiny, 5, prompt, P, N, false, a, &st), N);
		assert_int_equal(run_engine(dir, RT_HOST_EMULATE, g_tiny, 5, prompt, P, N, false, b, &st), N);
		assert_memory_equal(a, b, sizeof(*a) * N);
		assert_int_equal(run_engine(dir, RT_HOST_NATIVE, g_tiny, 6, prompt, P, N, false, c, &st), N);
		assert_true(memcmp(a, c, sizeof(*a) * N) != 0);
	}
}

/* Run-time sampling values on ONE binding and ONE captured graph:
 *  - a greedy request (temperature 0) on each sampled engine (RRS, RRSW,
 *    SpecHub trees) emits the target-only greedy tokens of the fp32
 *    reference (near-ties bounded as check_greedy says): p is one-hot at
 *    its first argmax, so every exact method reduces to greedy;
 *  - a sampled request after it, with the first request's seed, repeats the
 *    first request's tokens (the values were rewritten, nothing stale);
 *  - the token budget is per request: 7 tokens, then 32, on the same graph;
 *  - the graph is captured by the first request only;
 *  - a greedy engine refuses a temperature, naming its verification, and
 *    serves temperature 0 with any top-k/top-p (they cannot matter there).
 * Native for every engine, emulated (the generated kernels) for RRSW. */
static void test_tiny_runtime_sampling(void **state)
{
	static const char *const pairs[][3] = {{"kary:3:2", "rrs", "sample"},
	                                       {"biseq8", "rrsw", "sample-wor"},
	                                       {"biseq16", "spechub", "spechub"}};
	const rt_engine_sampling greedy = {0.0f, 0, 1.0f}, masked = {0.0f, 3, 0.5f},
	                         hot = {0.7f, 0, 1.0f};
	const int P = 19, N = 32;
	int32_t prompt[64], ref[64], a[64], b[64], g[64], s7[64];
	float margin[64];
	rt_engine_stats st;
	sw_err err = {0};
	tiny_prompt(prompt, P);
	eu_reference(g_tiny, prompt, P, N, ref, margin, NULL);
	const double mx = max_abs_logit(g_tiny, prompt, P);
	for (int t = 0; t < 3; t++)
		for (int mode = RT_HOST_NATIVE; mode <= RT_HOST_EMULATE; mode++) {
			if (mode == RT_HOST_EMULATE && t != 1)
				continue;
			char spec[2048], dir[300], what[96];
			snprintf(dir, sizeof(dir), "%s/rt_samp%d", g_dir, t);
			if (mode == RT_HOST_NATIVE) {
				tiny_spec(spec, sizeof(spec), "layerskip:0-1", pairs[t][0], pairs[t][1],
				          pairs[t][2], 0.8, "fp16");
				build_engine(spec, dir);
			}
			snprintf(what, sizeof(what), "%s %s %s", pairs[t][0], pairs[t][1],
			         mode == RT_HOST_NATIVE ? "native" : "emulated");
			rt_dev *d = open_dev(mode);
			rt_engine *e = eu_bind(dir, d, g_tiny, 5);
			int captures = 0;
			assert_int_equal(eu_generate(e, what, prompt, P, N, false, a, &st), N);
			captures += st.t_capture > 0;
			const rt_graph *graph = e->graph;
			assert_int_equal(eu_generate_samp(e, what, prompt, P, N, false, &greedy, g, &st), N);
			captures += st.t_capture > 0;
			char gw[160];
			snprintf(gw, sizeof(gw), "greedy request on %s (T 0.8 engine)", what);
			check_greedy(gw, g, N, ref, margin, ldexp(1.0, -11), mx);
			/* top-k / top-p cannot matter at temperature 0 */
			assert_int_equal(eu_generate_samp(e, what, prompt, P, 7, false, &masked, s7, &st), 7);
			captures += st.t_capture > 0;
			assert_memory_equal(s7, g, sizeof(*g) * 7);
			/* the first request again: same seed, the spec's values */
			if (rt_engine_reseed(e, 5, &err))
				fail_msg("%s", err.msg);
			assert_int_equal(eu_generate(e, what, prompt, P, N, false, b, &st), N);
			captures += st.t_capture > 0;
			assert_memory_equal(a, b, sizeof(*a) * N);
			assert_true(memcmp(a, g, sizeof(*a) * N) != 0); /* T 0.8 is not greedy here */
			assert_int_equal(captures, 1);
			assert_ptr_equal(e->graph, graph);
			rt_engine_free(e);
			rt_dev_free(d);
		}

	/* a greedy engine: temperature 0 only */
	char spec[2048], dir[300];
	snprintf(dir, sizeof(dir), "%s/rt_greedy", g_dir);
	tiny_spec(spec, sizeof(spec), "ngram:1:3", "chain:4", "greedy", "topk", 0, "fp16");
	build_engine(spec, dir);
	rt_dev *d = open_dev(RT_HOST_NATIVE);
	rt_engine *e = eu_bind(dir, d, g_tiny, 5);
	assert_false(rt_engine_samples(e));
	assert_int_equal(eu_generate(e, "ngram greedy", prompt, P, N, false, a, &st), N);
	assert_int_equal(eu_generate_samp(e, "ngram greedy", prompt, P, N, false, &masked, b, &st), N);
	assert_memory_equal(a, b, sizeof(*a) * N);
	rt_engine_run run = {.prompt = prompt, .n_prompt = P, .max_new = N, .eos = -1, .samp = &hot};
	assert_true(rt_engine_generate(e, &run, b, &st, &err) < 0);
	print_message("  greedy engine, temperature 0.7: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "temperature 0.7 cannot be honoured"));
	assert_non_null(strstr(err.msg, "greedy"));
	rt_engine_free(e);
	rt_dev_free(d);
}

/* Exactness of the engine path itself, with the sampling values set at run
 * time: ONE binding and ONE captured graph per engine serve every setting
 * below in turn (temperature, top-k, top-p and seed written between
 * requests; the graph is captured by the first request only, checked). At
 * each sampled setting the first two emitted tokens of N runs (a fresh seed
 * each) are tested against the exact target distribution at that setting,
 * enumerated by tu_seq_dist, chi-square at significance 1e-4 (a token the
 * setting masks out fails outright). Temperature 0 on these sampled engines
 * is the greedy limit: every run, whatever its seed, must emit the
 * enumeration's one sequence. A small vocabulary (12) keeps every category
 * well populated. The engine computes in fp16, a relative bias of ~1e-3 in
 * p that 3000 samples cannot resolve (the test's resolution is ~sqrt(K / N)
 * ~ 0.2 relative per category). Runs natively: the emulated kernels make
 * the same decisions (test_kern_verify, test_kern_tree_expand,
 * test_kern_adapt, test_kern_logits_process) and tokens
 * (test_tiny_stochastic). */
static void test_engine_exactness(void **state)
{
	static const char *const cfg[][5] = {
		/* tree, verify, expand, draft, extra */
		{"chain:3", "rrs", "sample", "layerskip:1", ", \"adaptive\": {\"h\": 0.5, \"min\": 1}"},
		{"biseq8", "rrsw", "sample-wor", "layerskip:1", ""},
		{"biseq8", "spechub", "spechub", "layerskip:1", ""},
		/* a draft head over the first 9 / 10 of the 12 ids (q = 0 beyond) */
		{"chain:3", "rrs", "sample", "layerskip:1@9", ""},
		{"biseq8", "rrsw", "sample-wor", "layerskip:1@10", ""},
		/* a draft head over 2 ids under 3 children per node: every node's
		 * third child is absent (the support runs out), fed to the tree
		 * forwards as token -1 */
		{"kary:3:2", "rrsw", "sample-wor", "layerskip:1@2", ""},
	};
	/* the spec's default first, then values set per request: hotter ones
	 * spread this peaky model's mass over more categories (more degrees of
	 * freedom, a sharper test), one with top-k binding, one with top-p */
	static const rt_engine_sampling set[] = {
		{1.0f, 0, 1.0f}, {2.5f, 0, 1.0f}, {3.0f, 4, 1.0f}, {0.0f, 0, 1.0f}, {2.0f, 0, 0.8f},
	};
	const int n_set = (int)(sizeof(set) / sizeof(set[0]));
	const int V = 12, N = 3000, N_GREEDY = 200, K = V * V;
	sw_err err = {0};
	char mpath[300];
	rt_model *m = tu_tiny_llama(V, 128, 2, 2, 1, 160, 11);
	assert_non_null(m);
	snprintf(mpath, sizeof(mpath), "%s/v12.gguf", g_dir);
	if (rt_llama_save_gguf(m, mpath, GGML_T_F32, &err))
		fail_msg("%s", err.msg);
	const int32_t prompt[3] = {3, 7, 1};
	double *probs = eu_seq_dists(m, prompt, 3, set, n_set);
	uint64_t *counts = malloc(sizeof(*counts) * (size_t)K);
	assert_non_null(counts);
	for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
		char spec[2048], dir[300];
		snprintf(dir, sizeof(dir), "%s/exact%zu", g_dir, c);
		snprintf(spec, sizeof(spec),
		         "{\"name\": \"v12\", \"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": "
		         "\"%s\"}, \"tree\": \"%s\", \"verify\": {\"method\": \"%s\", \"expand\": "
		         "\"%s\"}, \"sampling\": {\"temperature\": 1, \"top_k\": 0, \"top_p\": 1}, "
		         "\"max_context\": 64, \"prefill_chunk\": 8, \"dtype\": \"fp16\", "
		         "\"archs\": [\"sm_80\"]%s}",
		         mpath, cfg[c][3], cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][4]);
		build_engine(spec, dir);
		rt_engine *e = rt_engine_load(dir, &err);
		assert_non_null(e);
		rt_dev *d = open_dev(RT_HOST_NATIVE);
		if (cli_engine_bind(e, d, m, NULL, 1, &err))
			fail_msg("%s", err.msg);
		const rt_graph *graph = NULL;
		int captures = 0;
		uint64_t seed = 1000;
		for (int k = 0; k < n_set; k++) {
			const double *pk = probs + (size_t)k * K;
			const bool greedy = set[k].temperature <= 0.0f;
			char what[96];
			eu_pairs pr = {.prompt = prompt, .n_prompt = 3, .samp = k ? &set[k] : NULL,
			               .runs = greedy ? N_GREEDY : N, .vocab = V, .pad_from = -1, .seed = seed,
			               .counts = counts};
			snprintf(what, sizeof(what), "%-8s %-8s %-10s", cfg[c][0], cfg[c][1], cfg[c][2]);
			eu_count_pairs(e, &pr, what);
			seed = pr.seed;
			captures += pr.captures;
			if (!graph)
				graph = e->graph;
			if (e->graph != graph)
				fail_msg("%s: the graph changed at setting %d", cfg[c][0], k);
			if (greedy) {
				eu_check_point_mass(pk, counts, K, V, pr.runs, what);
				continue;
			}
			const int runs = pr.runs;
			int df;
			double chi = tu_chi2(counts, pk, K, (uint64_t)runs, &df),
			       crit = tu_chi2_crit(df, 1e-4);
			print_message("  %-8s %-8s %-10s %-14s%s T %.1f k %d p %.1f: chi2 %.1f (df %d, "
			              "critical %.1f at 1e-4), %.2f iterations per 2 tokens\n", cfg[c][0],
			              cfg[c][1], cfg[c][2], cfg[c][3], cfg[c][4][0] ? " adaptive" : "",
			              (double)set[k].temperature,
			              set[k].top_k, (double)set[k].top_p, chi, df, crit,
			              (double)pr.iters / runs);
			if (!(chi < crit))
				fail_msg("%s %s at T %g top-k %d top-p %g: the engine's output distribution is "
				         "not the target's", cfg[c][0], cfg[c][1], (double)set[k].temperature,
				         set[k].top_k, (double)set[k].top_p);
		}
		/* every setting on the first request's graph */
		assert_int_equal(captures, 1);
		rt_engine_free(e);
		rt_dev_free(d);
	}
	free(probs);
	free(counts);
	rt_model_free(m);
}

/* Device-side stops: EOS inside an accepted path ends the run with EOS as
 * the last token; max_new cuts mid-path; a context that cannot take another
 * tree stops with RT_STOP_CTX. */
static void test_tiny_stops(void **state)
{
	char dir[300];
	const int P = 37, N = 40;
	int32_t prompt[64], ref[64], out[256];
	float margin[64];
	rt_engine_stats st;
	sw_err err = {0};
	snprintf(dir, sizeof(dir), "%s/tiny_eagle", g_dir); /* built by test_tiny_greedy_tree */
	tiny_prompt(prompt, P);
	eu_reference(g_tiny, prompt, P, N, ref, margin, NULL);
	rt_engine *e = rt_engine_load(dir, &err);
	assert_non_null(e);
	rt_dev *d = open_dev(RT_HOST_NATIVE);
	if (cli_engine_bind(e, d, g_tiny, NULL, 1, &err))
		fail_msg("%s", err.msg);
	/* EOS = the reference's 10th token; the run ends at its first occurrence */
	int k = 9;
	for (int i = 8; i >= 0; i--)
		if (ref[i] == ref[9])
			k = i;
	rt_engine_run r = {.prompt = prompt, .n_prompt = P, .max_new = N, .eos = ref[k]};
	int n = rt_engine_generate(e, &r, out, &st, &err);
	assert_int_equal(n, k + 1);
	assert_int_equal(st.stop, RT_STOP_EOS);
	assert_memory_equal(out, ref, sizeof(*out) * (size_t)n);
	/* max_new 7: exactly 7, whatever the path lengths */
	r.eos = -1;
	r.max_new = 7;
	assert_int_equal(rt_engine_generate(e, &r, out, &st, &err), 7);
	assert_int_equal(st.stop, RT_STOP_MAXNEW);
	assert_memory_equal(out, ref, sizeof(*out) * 7);
	/* context 192, tree 25: a long request stops at the context */
	r.max_new = 250;
	n = rt_engine_generate(e, &r, out, &st, &err);
	assert_true(n > 0);
	assert_int_equal(st.stop, RT_STOP_CTX);
	assert_true(P - 1 + n + 25 > 192); /* it stopped for a reason */
	assert_true(P - 1 + n <= 192);     /* and never wrote past the cache */
	/* a graph launch after the stop emits nothing and moves no length */
	int32_t before[RT_ST_WORDS], after[RT_ST_WORDS];
	const rt_dptr sp = rt_engine_buf_addr(e, "state");
	assert_non_null(e->graph);
	if (d->ops->download(d, before, sp, sizeof(before), &err) ||
	    d->ops->graph_launch(d, e->graph, &err) || d->ops->graph_launch(d, e->graph, &err) ||
	    d->ops->download(d, after, sp, sizeof(after), &err))
		fail_msg("%s", err.msg);
	assert_int_equal(after[RT_ST_NOUT], before[RT_ST_NOUT]);
	assert_int_equal(after[RT_ST_TLEN], before[RT_ST_TLEN]);
	assert_int_equal(after[RT_ST_DLEN], before[RT_ST_DLEN]);
	assert_int_equal(after[RT_ST_STOP], RT_STOP_CTX);
	rt_engine_free(e);
	rt_dev_free(d);
}

/* Errors name the file and what was expected. */
static void test_errors(void **state)
{
	char dir[300], path[400];
	sw_err err = {0};
	snprintf(dir, sizeof(dir), "%s/nonexistent", g_dir);
	assert_null(rt_engine_load(dir, &err));
	assert_non_null(strstr(err.msg, "engine.json"));

	/* corrupted copies of a real engine.json */
	char src[400];
	snprintf(src, sizeof(src), "%s/tiny_eagle/engine.json", g_dir);
	size_t n = 0;
	char *text = sw_read_file(src, SW_CAP_IMAGE, &n);
	assert_non_null(text);
	static const char *const cases[][3] = {
		{"\"specwright-engine/1\"", "\"specwright-engine/9\"", "$.format"},
		{"\"max_context\": 192", "\"max_context\": -4", "max_context"},
		{"\"exec\": \"cublaslt\"", "\"exec\": \"magic\"", "exec \"magic\""},
		{"\"buf\": \"x16\"", "\"buf\": \"nosuch\"", "no buffer \"nosuch\""},
		{"\"dtype\": \"fp16\", \"archs\"", "\"dtype\": \"int4\", \"archs\"",
		 "$.spec.dtype: expected \"bf16\", \"fp16\", \"q8_0\", \"q8_0_a8\" or \"gguf_a8\", found "
		 "\"int4\""},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char *hit = strstr(text, cases[c][0]);
		if (!hit)
			fail_msg("engine.json lacks %s", cases[c][0]);
		snprintf(dir, sizeof(dir), "%s/bad%zu", g_dir, c);
		mkdir(dir, 0755);
		snprintf(path, sizeof(path), "%s/engine.json", dir);
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fwrite(text, 1, (size_t)(hit - text), f);
		fputs(cases[c][1], f);
		fputs(hit + strlen(cases[c][0]), f);
		fclose(f);
		memset(&err, 0, sizeof(err));
		assert_null(rt_engine_load(dir, &err));
		if (!strstr(err.msg, cases[c][2]) || !strstr(err.msg, "engine.json"))
			fail_msg("case %zu: message \"%s\" lacks \"%s\"", c, err.msg, cases[c][2]);
	}
	free(text);

	/* gguf_a8 keeps the file's types: an F32 file's GEMM weights are refused
	 * at build, naming the tensor, its type and the types taken */
	{
		char spec[2048];
		gen_spec *gs = malloc(sizeof(*gs));
		assert_non_null(gs);
		tiny_spec(spec, sizeof(spec), "ngram:1:3", "chain:4", "greedy", "topk", 0, "gguf_a8");
		memset(&err, 0, sizeof(err));
		assert_int_not_equal(gen_spec_parse(spec, strlen(spec), "gguf.json", NULL, gs, &err), 0);
		if (!strstr(err.msg, "expected GEMM weights of type Q8_0, Q4_0, Q4_1, Q5_0, Q4_K or Q6_K, found "
		                     "\"gguf_a8\" with") || !strstr(err.msg, "tensor 'blk.0.attn_q.weight' "
		                     "of type F32"))
			fail_msg("unexpected message: %s", err.msg);
		free(gs);
	}

	/* a prompt that does not fit, a model that does not match */
	snprintf(dir, sizeof(dir), "%s/tiny_eagle", g_dir);
	rt_engine *e = rt_engine_load(dir, &err);
	assert_non_null(e);
	rt_dev *d = open_dev(RT_HOST_NATIVE);
	rt_model *other = tu_tiny_llama(111, 256, 2, 4, 2, 384, 8);
	assert_int_not_equal(cli_engine_bind(e, d, other, NULL, 1, &err), 0);
	assert_non_null(strstr(err.msg, "n_layers"));
	rt_model_free(other);
	rt_engine_free(e);
	/* the same shapes with another norm_eps (baked into the kernels) */
	e = rt_engine_load(dir, &err);
	assert_non_null(e);
	rt_engine_weights w;
	if (cli_engine_weights(&w, g_tiny, "target", &err))
		fail_msg("%s", err.msg);
	w.shape.norm_eps *= 2;
	assert_int_equal(rt_engine_bind(e, d, &w, NULL, 1, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "norm_eps"));
	rt_engine_free(e);
	e = rt_engine_load(dir, &err);
	if (cli_engine_bind(e, d, g_tiny, NULL, 1, &err))
		fail_msg("%s", err.msg);
	int32_t big[200] = {0}, out[8];
	rt_engine_stats st;
	rt_engine_run r = {.prompt = big, .n_prompt = 180, .max_new = 4, .eos = -1};
	assert_int_equal(rt_engine_generate(e, &r, out, &st, &err), SW_ERANGE);
	assert_non_null(strstr(err.msg, "max_context 192"));
	big[3] = 111;
	r.n_prompt = 10;
	assert_int_equal(rt_engine_generate(e, &r, out, &st, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "outside the vocabulary"));
	rt_engine_free(e);
	rt_dev_free(d);
}

/* --- the real model ------------------------------------------------------ */

static const char *model_path(void)
{
	const char *p = getenv("SW_MODEL");
	return p ? p : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
}

/* SmolLM2-135M, layer-skip draft, EAGLE-25 tree, fp16: the whole engine
 * emulated op by op (and native) emits the reference greedy tokens. */
static void test_real_model_engine(void **state)
{
	if (access(model_path(), R_OK)) {
		print_message("real model %s missing (make model): skipped\n", model_path());
		skip();
	}
	sw_err err = {0};
	rt_model *m = rt_model_load(model_path(), &err);
	if (!m)
		fail_msg("%s", err.msg);
	char spec[2048], dir[300];
	snprintf(dir, sizeof(dir), "%s/smollm2", g_dir);
	snprintf(spec, sizeof(spec),
	         "{\"name\": \"smollm2-test\", \"target\": {\"path\": \"%s\"}, "
	         "\"draft\": {\"method\": \"layerskip:0-14,22-29\"}, \"tree\": \"eagle25\", "
	         "\"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, "
	         "\"max_context\": 128, \"prefill_chunk\": 16, \"dtype\": \"fp16\", "
	         "\"archs\": [\"sm_80\"]}", model_path());
	build_engine(spec, dir);
	/* "The capital of France is" style prompt, ids from the model's tokenizer
	 * would need the tokenizer; a fixed id sequence is as good a prompt */
	static const int32_t prompt[] = {1, 504, 3575, 282, 4649, 314, 2, 198, 1, 9690, 198,
	                                 504, 3575, 282, 4649, 314, 253};
	const int P = (int)(sizeof(prompt) / sizeof(prompt[0])), N = 12;
	int32_t ref[32], a[32], b[32];
	float margin[32];
	rt_engine_stats st;
	eu_reference(m, prompt, P, N, ref, margin, NULL);
	double mx = max_abs_logit(m, prompt, P);
	assert_int_equal(run_engine(dir, RT_HOST_NATIVE, m, 1, prompt, P, N, false, a, &st), N);
	check_greedy("SmolLM2 native", a, N, ref, margin, ldexp(1.0, -11), mx);
	assert_int_equal(run_engine(dir, RT_HOST_EMULATE, m, 1, prompt, P, N, false, b, &st), N);
	check_greedy("SmolLM2 emulated", b, N, ref, margin, ldexp(1.0, -11), mx);
	/* q8_0 from the Q4_1 file's weights: re-quantized, each weight within
	 * d / 2 = max|block| / 254 of the reference's, a relative error of at
	 * most 2^-8 of its block (bf16's u), plus fp16's 2^-11 elsewhere;
	 * q8_0_a8: the same weights, and every GEMM input rounded to int8 per
	 * block of 32 (each within max|block| / 254: 2^-8 again); gguf_a8: the
	 * file's own Q4_1 and Q8_0 blocks, which are the reference's weights
	 * exactly, so only the int8 GEMM inputs (2^-8) and fp16 (2^-11) */
	static const struct { const char *dtype; double u; } q8s[] = {
		{ "q8_0", 0x1p-8 + 0x1p-11 }, { "q8_0_a8", 0x1p-7 + 0x1p-11 },
		{ "gguf_a8", 0x1p-8 + 0x1p-11 } };
	for (size_t i = 0; i < sizeof(q8s) / sizeof(q8s[0]); i++) {
		char what[64];
		snprintf(dir, sizeof(dir), "%s/smollm2_%s", g_dir, q8s[i].dtype);
		snprintf(spec, sizeof(spec),
		         "{\"name\": \"smollm2-%s\", \"target\": {\"path\": \"%s\"}, "
		         "\"draft\": {\"method\": \"ngram:1:3\"}, \"tree\": \"chain:6\", "
		         "\"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, "
		         "\"max_context\": 128, \"prefill_chunk\": 16, \"dtype\": \"%s\", "
		         "\"archs\": [\"sm_80\"]}", q8s[i].dtype, model_path(), q8s[i].dtype);
		build_engine(spec, dir);
		assert_int_equal(run_engine(dir, RT_HOST_NATIVE, m, 1, prompt, P, N, false, a, &st), N);
		snprintf(what, sizeof(what), "SmolLM2 %s native", q8s[i].dtype);
		check_greedy(what, a, N, ref, margin, q8s[i].u, mx);
	}
	rt_model_free(m);
}

/* Rows regions and target-only decoding (issue 15; device.h rows_begin):
 * on the host the tree forward runs on the nodes up to the last present
 * one, and target-only decoding (rt_engine_run.target_only) on one row.
 * (1) The forward of every row count L = 1 .. n_nodes gives its L rows the
 * bits the full forward gives them (logits and the target's p), with every
 * node present; (2) greedy target-only tokens equal the speculative run's
 * exactly (same rows, same bits) on an n-gram chain (fp16, q8_0, q8_0_a8; undrafted
 * nodes absent) and a layer-skip eagle25 tree, and both hold to the fp32
 * reference (check_greedy); target-only takes one iteration a token. */
static void rows_engine(const char *name, const char *spec, const rt_model *m, double u)
{
	char dir[300];
	const int P = 29, N = 32;
	int32_t prompt[64], ref[64], a[64], b[64];
	float margin[64];
	rt_engine_stats st;
	sw_err err = {0};
	snprintf(dir, sizeof(dir), "%s/rows_%s", g_dir, name);
	build_engine(spec, dir);
	tiny_prompt(prompt, P);
	eu_reference(m, prompt, P, N, ref, margin, NULL);
	double mx = max_abs_logit(m, prompt, P);
	rt_dev *d = open_dev(RT_HOST_NATIVE);
	rt_engine *e = eu_bind(dir, d, m, 1);
	assert_int_equal(eu_generate(e, name, prompt, P, N, false, a, &st), N);
	/* drafts were verified (rows beyond the root present): what the
	 * equality below needs. Whether the tiny model accepts any depends on
	 * the GEMM path the build took (q8_0_a8 accepts none without
	 * -march=native, as make asan builds) */
	assert_true(st.pos_tried[0] > 0);
	print_message("  %s: %llu of %llu first drafts accepted\n", name,
	              (unsigned long long)st.pos_accepted[0], (unsigned long long)st.pos_tried[0]);
	rt_engine_run r = {.prompt = prompt, .n_prompt = P, .max_new = N, .eos = -1,
	                   .target_only = true};
	if (rt_engine_generate(e, &r, b, &st, &err) != N)
		fail_msg("%s target-only: %s", name, err.msg);
	assert_int_equal(st.n_iters, N);
	for (int i = 0; i < N; i++)
		if (a[i] != b[i])
			fail_msg("%s: token %d: speculative %d, target-only %d", name, i, a[i], b[i]);
	check_greedy(name, a, N, ref, margin, u, mx);
	print_message("  %s: target-only == speculative, %d/%d tokens\n", name, N, N);

	/* (1): the forward after that run, every node present */
	const int ph = rt_manifest_phase_find(e->man, "verify"), nn = e->man->n_nodes;
	const int V = e->man->tcfg.vocab;
	assert_true(ph >= 0 && e->man->phases[ph].rows == nn);
	const rt_dptr tok = rt_engine_buf_addr(e, "tree_tokens");
	const float *lg = (const float *)(uintptr_t)rt_engine_buf_addr(e, "logits");
	const float *pr = (const float *)(uintptr_t)rt_engine_buf_addr(e, "probs");
	assert_true(tok && lg && pr);
	int32_t *tt = (int32_t *)(uintptr_t)tok;
	for (int i = 0; i < nn; i++)
		tt[i] = (7 + 13 * i) % V;
	float *full = malloc(sizeof(*full) * (size_t)nn * V * 2);
	assert_non_null(full);
	for (int L = nn; L >= 1; L--) {
		int rc = L < nn ? d->ops->rows_begin(d, tok, nn, L, &err) : 0;
		for (int i = e->ph_ops[ph].first; !rc && i < e->ph_ops[ph].first + e->ph_ops[ph].n; i++)
			rc = d->ops->launch(d, &e->ops[i], &err);
		if (!rc && L < nn)
			rc = d->ops->rows_end(d, &err);
		if (rc)
			fail_msg("%s: forward at %d rows: %s", name, L, err.msg);
		if (L == nn) {
			memcpy(full, lg, sizeof(*full) * (size_t)nn * V);
			memcpy(full + (size_t)nn * V, pr, sizeof(*full) * (size_t)nn * V);
			continue;
		}
		if (memcmp(full, lg, sizeof(*full) * (size_t)L * V) ||
		    memcmp(full + (size_t)nn * V, pr, sizeof(*full) * (size_t)L * V))
			fail_msg("%s: the forward at %d of %d rows differs from the full one in its rows",
			         name, L, nn);
	}
	print_message("  %s: forward at 1..%d rows == the full forward's rows, bit for bit\n", name,
	              nn - 1);
	free(full);
	rt_engine_free(e);
	rt_dev_free(d);
}

static void test_tiny_rows(void **state)
{
	char spec[2048], path[300];
	sw_err err = {0};
	tiny_spec(spec, sizeof(spec), "ngram:1:3", "chain:4", "greedy", "topk", 0, "fp16");
	rows_engine("ngram fp16", spec, g_tiny, ldexp(1.0, -11));
	tiny_spec(spec, sizeof(spec), "layerskip:1", "eagle25", "greedy", "topk", 0, "fp16");
	rows_engine("eagle25 fp16", spec, g_tiny, ldexp(1.0, -11));
	snprintf(path, sizeof(path), "%s/rows_q8.gguf", g_dir);
	if (rt_llama_save_gguf(g_tiny, path, GGML_T_Q8_0, &err))
		fail_msg("%s: %s", path, err.msg);
	rt_model *m = rt_model_load(path, &err);
	if (!m)
		fail_msg("%s", err.msg);
	eu_tiny_spec(spec, sizeof(spec), path, "ngram:1:3", "chain:6", "greedy", "topk", 0, "q8_0",
	             NULL);
	rows_engine("ngram q8_0", spec, m, ldexp(1.0, -11));
	eu_tiny_spec(spec, sizeof(spec), path, "ngram:1:3", "chain:6", "greedy", "topk", 0, "q8_0_a8",
	             NULL);
	rows_engine("ngram q8_0_a8", spec, m, ldexp(1.0, -8) + ldexp(1.0, -11));
	rt_model_free(m);
	/* gguf_a8 on Q4_0 and Q4_1 files: the file's blocks are the reference's
	 * weights, so int8 inputs and fp16 only */
	static const struct { uint32_t type; const char *name; } q4s[] = {
		{GGML_T_Q4_0, "q4_0"}, {GGML_T_Q4_1, "q4_1"}};
	for (size_t i = 0; i < sizeof(q4s) / sizeof(q4s[0]); i++) {
		char name[48];
		snprintf(path, sizeof(path), "%s/rows_%s.gguf", g_dir, q4s[i].name);
		if (rt_llama_save_gguf(g_tiny, path, q4s[i].type, &err))
			fail_msg("%s: %s", path, err.msg);
		if (!(m = rt_model_load(path, &err)))
			fail_msg("%s", err.msg);
		eu_tiny_spec(spec, sizeof(spec), path, "ngram:1:3", "chain:6", "greedy", "topk", 0,
		             "gguf_a8", NULL);
		snprintf(name, sizeof(name), "ngram gguf_a8 %s", q4s[i].name);
		rows_engine(name, spec, m, ldexp(1.0, -8) + ldexp(1.0, -11));
		rt_model_free(m);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiny_greedy_tree),
		cmocka_unit_test(test_tiny_ngram_chain),
		cmocka_unit_test(test_tiny_q8_0),
		cmocka_unit_test(test_tiny_stochastic),
		cmocka_unit_test(test_tiny_stops),
		cmocka_unit_test(test_tiny_runtime_sampling),
		cmocka_unit_test(test_engine_exactness),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_real_model_engine),
		cmocka_unit_test(test_tiny_rows),
	};
	/* e.g. CMOCKA_FILTER='test_tiny_*' (as test_kern_tree_attention.c) */
	if (getenv("CMOCKA_FILTER") && *getenv("CMOCKA_FILTER"))
		cmocka_set_test_filter(getenv("CMOCKA_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
