/* Qwen2/Qwen2.5 and Qwen3 engines (gen/arch_qwen.c, templates/head_prep)
 * against Hugging Face transformers and the host reference: tiny random
 * checkpoints made and saved by Qwen2ForCausalLM / Qwen3ForCausalLM
 * (tests/tools/hf_tiny.py, build/venv-hf: untied and tied embeddings, GQA 2
 * and 4, rope theta 1e6, Qwen3 head_dim 24 != 64 / 4), built into fp16
 * engines from the HF directory and run on the host backend (native: the
 * kernels/ref ops) and, for one Qwen2 and one Qwen3 checkpoint, in the SIMT
 * emulator (the generated kernels):
 *   - logits: the root row of the first iteration (the prompt's last token)
 *     within B_i = 2 D (2 u + gamma_K) S_i of transformers' float64 logits,
 *     u = 2^-11 (fp16 weights and GEMM inputs: two roundings per dot
 *     product, one each for K/V and the attention output, all within the
 *     2 u of the stage), D = 12 L + 2 stages, gamma_K the fp32 dot product
 *     of length K, S_i = sum_d |lm_head[i, d] h_d| (test_qwen.c's bound
 *     with the 16-bit roundings added);
 *   - greedy tokens equal to transformers' and to the host decoder's (fp32,
 *     runtime/model/qwen.c) at every step whose transformers top-2 margin
 *     is above 8 u max|logit| (test_engine.c's near-tie rule for 16-bit
 *     engines: the worst-case B_i above is ~7% of S_i, wider than most
 *     margins of a random model, while the measured errors are a few u
 *     max|logit|); every step of these fixtures clears it (asserted);
 *   - n-gram (chain) and layer-skip (eagle25 tree) engines: the
 *     speculative run's tokens equal the same engine's target-only run's
 *     (rt_engine_run.target_only) exactly on the native host backend.
 * Plus the planner itself: a Qwen2 engine has bq/bk/bv, a Qwen3 engine
 * q_norm/k_norm; fused (the default), one qkv_rope a layer whose steps are
 * the family's (Qwen2 its biases, Qwen3 its norms, both NeoX pairs, Llama
 * adjacent ones); with "fuse": false three head_prep ops a layer (Qwen2),
 * two (Qwen3), or rope ops only (Llama); a shape spec with an unknown "arch" is refused naming it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "check.h"
#include "core/fileio.h"
#include "core/json.h"
#include "engine_util.h"
#include "gen/plan.h"
#include "gen/spec.h"
#include "model/ctx.h"
#include "hf_util.h"
#include "testutil.h"

static const char *const VARIANTS[] = {"qwen2", "qwen2-tied", "qwen3", "qwen3-tied-kv1"};
#define N_VARIANTS 4

static char g_hf[64];  /* hf_tiny.py output */
static char g_dir[300]; /* engines and the emulator's cache */
static bool g_have;


static int setup(void **state)
{
	(void)state;
	eu_work_dir(g_dir, sizeof(g_dir), "test_qwen_engine");
	int rc = hf_make("/tmp/sw_qweng_XXXXXX", g_hf, sizeof(g_hf), VARIANTS, N_VARIANTS);
	if (rc <= 0)
		return rc; /* 0: g_have stays false, the transformers tests skip, saying why */
	/* the drafter of the Qwen-shaped pair: one layer, another seed, the
	 * same 300-id vocabulary */
	if (hf_run(g_hf, "qwen3-s9 --layers 1"))
		return -1;
	g_have = true;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[700];
	if (g_have && !strncmp(g_hf, "/tmp/sw_qweng_", 14)) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_hf);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", g_hf);
	}
	if (!strncmp(g_dir, "build/test_qwen_engine.", 23)) { /* eu_work_dir's, engines inside */
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", g_dir);
	}
	return 0;
}


static void spec_for(char *buf, size_t n, const char *path, const char *draft, const char *tree,
                     const char *dtype)
{
	snprintf(buf, n,
	         "{\"name\": \"qwen\", \"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": \"%s\"}, "
	         "\"tree\": \"%s\", \"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, "
	         "\"max_context\": 128, \"prefill_chunk\": 8, \"dtype\": \"%s\", "
	         "\"archs\": [\"sm_80\"]}",
	         path, draft, tree, dtype);
}

static double worst_ratio;

/* One engine on one host mode (hf_engine_check: logits and greedy tokens
 * against transformers and the host decoder; native: graph == eager,
 * speculative == target-only); a layer adds 12 roundings. */
static void run_one(const char *what, const char *edir, int mode, const rt_model *m,
                    const json_value *ref, const int32_t *prompt, int T, const int32_t *host)
{
	char cache[400];
	snprintf(cache, sizeof(cache), "%s/cache", g_dir);
	worst_ratio = fmax(worst_ratio,
	                   hf_engine_check(what, edir, cache, mode, m, ref, prompt, T, host, 12));
}

static void test_engines_vs_transformers(void **state)
{
	(void)state;
	if (!g_have) {
		printf("  %s with transformers is missing (make deps): skipped\n", hf_python());
		skip();
	}
	for (int v = 0; v < N_VARIANTS; v++) {
		char dir[600], spec[2048], edir[700], what[96];
		snprintf(dir, sizeof(dir), "%s/%s", g_hf, VARIANTS[v]);
		hf_fixture fx;
		hf_fixture_load(dir, &fx);
		const rt_model *m = fx.m;
		const json_value *ref = fx.ref;
		const int32_t *prompt = fx.prompt, *host = fx.host;
		const int T = fx.T;
		static const char *const drafts[][2] = {{"ngram:1:3", "chain:4"}, {"layerskip:1", "eagle25"}};
		for (int k = 0; k < 2; k++) {
			snprintf(edir, sizeof(edir), "%s/%s_%d", g_dir, VARIANTS[v], k);
			spec_for(spec, sizeof(spec), dir, drafts[k][0], drafts[k][1], "fp16");
			char cache[400];
			snprintf(cache, sizeof(cache), "%s/cache", g_dir);
			eu_build(spec, edir, cache, false);
			snprintf(what, sizeof(what), "%s %s native", VARIANTS[v], drafts[k][0]);
			run_one(what, edir, RT_HOST_NATIVE, m, ref, prompt, T, host);
			/* the generated kernels: one Qwen2 and one Qwen3 checkpoint */
			if (k == 0 && (v == 0 || v == 3)) {
				snprintf(what, sizeof(what), "%s %s emulated", VARIANTS[v], drafts[k][0]);
				run_one(what, edir, RT_HOST_EMULATE, m, ref, prompt, T, host);
			}
		}
		hf_fixture_free(&fx);
	}
	print_message("  worst logit error: %.3f of the bound\n", worst_ratio);
}

/* engine.json states the family: a model of another one is refused at
 * binding naming both, an engine.json naming a family the runtime lacks is
 * refused at load naming the path and the value (test_engines_vs_
 * transformers' qwen2 engine; a Llama engine of an older build, without
 * the key, stays Llama: test_engine). */
static void test_family_refusals(void **state)
{
	(void)state;
	if (!g_have)
		skip();
	char edir[700], q3[600], path[2400], bad[800], cache[400];
	sw_err err = {0};
	snprintf(edir, sizeof(edir), "%s/qwen2_0", g_dir);
	snprintf(q3, sizeof(q3), "%s/qwen3", g_hf);
	snprintf(cache, sizeof(cache), "%s/cache", g_dir);
	rt_model *m = rt_model_load(q3, &err);
	if (!m)
		fail_msg("%s", err.msg);
	rt_engine *e = rt_engine_load(edir, &err);
	if (!e)
		fail_msg("%s", err.msg);
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, cache);
	assert_int_not_equal(cli_engine_bind(e, d, m, NULL, 1, &err), 0);
	if (!strstr(err.msg, "architecture qwen3") || !strstr(err.msg, "expects qwen2"))
		fail_msg("message: %s", err.msg);
	rt_engine_free(e);
	rt_dev_free(d);
	rt_model_free(m);
	/* a copy whose engine.json names another family */
	snprintf(bad, sizeof(bad), "%s/qwen2_badarch", g_dir);
	snprintf(path, sizeof(path), "rm -rf '%s' && cp -r '%s' '%s'", bad, edir, bad);
	assert_int_equal(system(path), 0);
	snprintf(path, sizeof(path), "%s/engine.json", bad);
	size_t n;
	char *t = sw_read_file(path, SW_CAP_ENGINE_JSON, &n);
	assert_non_null(t);
	char *at = strstr(t, "\"arch\": \"qwen2\"");
	assert_non_null(at);
	memcpy(at, "\"arch\": \"qwen9\"", 15);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fwrite(t, 1, n, f);
	fclose(f);
	free(t);
	eu_resum(bad);
	assert_null(rt_engine_load(bad, &err));
	if (!strstr(err.msg, "arch") || !strstr(err.msg, "qwen9") || !strstr(err.msg, "engine.json"))
		fail_msg("message: %s", err.msg);
	print_message("  refused: %s\n", err.msg);
}

/* A Qwen-shaped draft pair: the 3-layer Qwen3 target drafted by a 1-layer
 * Qwen3 of the same vocabulary (another transformers checkpoint).
 * Greedy: the engine's speculative tokens equal its target-only tokens
 * (native, exactly) and transformers' greedy continuation; the host
 * decoder's `run --draft model:DIR` prints the same. Sampling (rrs at
 * T 0.7 and 1.5): the first and the second emitted token's frequencies
 * over 4000 requests against the target's exact distributions (tu_seq_dist
 * on the host fp32 model), Pearson chi-square at level 1e-4 (categories
 * with expected count < 5 pooled); the draft differs from the target, so
 * rejections happen and the residual distribution is exercised. */
static void cli_out(const char *args, char *out, size_t cap)
{
	char cmd[4200 + 512];
	const char *b = getenv("BUILD");
	snprintf(cmd, sizeof(cmd), "%s/specwright %s 2>/dev/null", b && b[0] ? b : "build", args);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	size_t n = fread(out, 1, cap - 1, f);
	out[n] = 0;
	if (pclose(f) != 0)
		fail_msg("%s: non-zero exit", cmd);
}

static void test_draft_pair(void **state)
{
	(void)state;
	if (!g_have)
		skip();
	char tdir[600], ddir[600], p[700], spec[2048], edir[700], cache[400], args[4096];
	char ids[512] = "", want[1024] = "", got[2048];
	size_t n;
	sw_err err = {0};
	snprintf(tdir, sizeof(tdir), "%s/qwen3", g_hf);
	snprintf(ddir, sizeof(ddir), "%s/qwen3-s9", g_hf);
	snprintf(cache, sizeof(cache), "%s/cache", g_dir);
	snprintf(p, sizeof(p), "%s/ref.json", tdir);
	char *text = sw_read_file(p, SW_CAP_TEXT, &n);
	assert_non_null(text);
	json_value *ref = json_parse(text, n, p, &err);
	if (!ref)
		fail_msg("%s", err.msg);
	const json_value *jp = hf_jget(ref, "prompt"), *jg = hf_jget(ref, "greedy");
	const int T = (int)jp->n, N = (int)jg->n;
	int32_t prompt[64], out[64], tonly[64];
	for (int t = 0; t < T; t++)
		prompt[t] = (int32_t)jp->items[t]->integer;
	rt_model *m = rt_model_load(tdir, &err), *dm = rt_model_load(ddir, &err);
	if (!m || !dm)
		fail_msg("%s", err.msg);
	assert_int_equal(dm->cfg.vocab, m->cfg.vocab);
	assert_int_equal(dm->cfg.n_layers, 1);

	/* greedy engine: speculative == target-only == transformers */
	snprintf(edir, sizeof(edir), "%s/pair_greedy", g_dir);
	snprintf(spec, sizeof(spec),
	         "{\"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": \"model\", \"path\": "
	         "\"%s\"}, \"tree\": \"chain:4\", \"verify\": {\"method\": \"greedy\", "
	         "\"expand\": \"topk\"}, \"max_context\": 128, \"prefill_chunk\": 8, "
	         "\"dtype\": \"fp16\", \"archs\": [\"sm_80\"]}", tdir, ddir);
	eu_build(spec, edir, cache, false);
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, cache);
	rt_engine *e = rt_engine_load(edir, &err);
	assert_non_null(e);
	if (cli_engine_bind(e, d, m, dm, 1, &err))
		fail_msg("%s", err.msg);
	rt_engine_stats st;
	assert_int_equal(eu_generate(e, "qwen3 pair greedy", prompt, T, N, false, out, &st), N);
	const int iters = st.n_iters;
	rt_engine_run r = {.prompt = prompt, .n_prompt = T, .max_new = N, .eos = -1,
	                   .target_only = true};
	if (rt_engine_generate(e, &r, tonly, &st, &err) != N)
		fail_msg("target-only: %s", err.msg);
	for (int j = 0; j < N; j++) {
		if (out[j] != tonly[j])
			fail_msg("pair: token %d: speculative %d, target-only %d", j, out[j], tonly[j]);
		if (out[j] != (int32_t)jg->items[j]->integer)
			fail_msg("pair: token %d: %d, transformers %d", j, out[j],
			         (int)jg->items[j]->integer);
	}
	print_message("  qwen3 drafted by a 1-layer qwen3: %d/%d greedy == target-only == "
	              "transformers, %d iterations\n", N, N, iters);
	rt_engine_free(e);

	/* the host decoder's model drafter */
	size_t a = 0, b = 0;
	for (int i = 0; i < T; i++)
		a += (size_t)snprintf(ids + a, sizeof(ids) - a, "%s%d", i ? " " : "", prompt[i]);
	for (int i = 0; i < N; i++)
		b += (size_t)snprintf(want + b, sizeof(want) - b, "<%d>", (int)jg->items[i]->integer);
	snprintf(args, sizeof(args), "run %s --tokenizer %s/model.gguf --draft model:%s --ids \"%s\" "
	         "-n %d --no-chat --ctx 256", tdir, tdir, ddir, ids, N);
	cli_out(args, got, sizeof(got));
	if (strncmp(got, want, strlen(want)))
		fail_msg("specwright %s:\n  printed %s\n  expected %s", args, got, want);

	/* sampling: rrs over the pair, two temperatures */
	snprintf(edir, sizeof(edir), "%s/pair_rrs", g_dir);
	snprintf(spec, sizeof(spec),
	         "{\"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": \"model\", \"path\": "
	         "\"%s\"}, \"tree\": \"chain:3\", \"verify\": {\"method\": \"rrs\", "
	         "\"expand\": \"sample\"}, \"sampling\": {\"temperature\": 1, \"top_k\": 0, "
	         "\"top_p\": 1}, \"max_context\": 64, \"prefill_chunk\": 8, \"dtype\": \"fp16\", "
	         "\"archs\": [\"sm_80\"]}", tdir, ddir);
	eu_build(spec, edir, cache, false);
	e = rt_engine_load(edir, &err);
	assert_non_null(e);
	if (cli_engine_bind(e, d, m, dm, 1, &err))
		fail_msg("%s", err.msg);
	static const rt_engine_sampling set[] = {{0.7f, 0, 1.0f}, {1.5f, 0, 1.0f}};
	const int V = m->cfg.vocab, K = V * V, RUNS = 4000;
	const int32_t sp[3] = {17, 250, 3};
	double *probs = eu_seq_dists(m, sp, 3, set, 2);
	uint64_t *counts = malloc(sizeof(*counts) * (size_t)K), *c1 = malloc(sizeof(*c1) * V * 2);
	double *p1 = malloc(sizeof(*p1) * V * 2);
	assert_true(counts && c1 && p1);
	uint64_t seed = 500;
	for (int k = 0; k < 2; k++) {
		eu_pairs pr = {.prompt = sp, .n_prompt = 3, .samp = &set[k], .runs = RUNS, .vocab = V,
		               .pad_from = -1, .seed = seed, .counts = counts};
		eu_count_pairs(e, &pr, "qwen3 pair rrs");
		seed = pr.seed;
		/* marginals of the first and the second token */
		memset(c1, 0, sizeof(*c1) * V * 2);
		memset(p1, 0, sizeof(*p1) * V * 2);
		for (int i = 0; i < V; i++)
			for (int j = 0; j < V; j++) {
				c1[i] += counts[(size_t)i * V + j];
				c1[V + j] += counts[(size_t)i * V + j];
				p1[i] += probs[(size_t)k * K + (size_t)i * V + j];
				p1[V + j] += probs[(size_t)k * K + (size_t)i * V + j];
			}
		for (int w = 0; w < 2; w++) {
			int df;
			const double chi = tu_chi2(c1 + w * V, p1 + w * V, V, (uint64_t)RUNS, &df),
			             crit = tu_chi2_crit(df, 1e-4);
			print_message("  qwen3 pair rrs T %.1f, token %d: chi2 %.1f (df %d, critical %.1f at "
			              "1e-4), %.2f iterations per 2 tokens\n", (double)set[k].temperature,
			              w + 1, chi, df, crit, (double)pr.iters / RUNS);
			assert_true(df >= 20); /* a spread distribution, not a pooled handful */
			if (!(chi < crit))
				fail_msg("qwen3 pair rrs at T %g: token %d's distribution is not the target's",
				         (double)set[k].temperature, w + 1);
		}
	}
	free(counts);
	free(c1);
	free(p1);
	free(probs);
	rt_engine_free(e);
	rt_dev_free(d);
	rt_model_free(dm);
	rt_model_free(m);
	json_free(ref);
	free(text);
}

/* A draft whose vocabulary is not the target's (nor a prefix of it: the
 * ids beyond a prefix are padded, runtime/model/model_gguf.h): refused at
 * build naming both sizes. */
static void test_draft_vocab_refused(void **state)
{
	(void)state;
	static const char spec[] =
		"{\"target\": {\"shape\": {\"arch\": \"qwen3\", \"n_layers\": 3, \"dim\": 64, "
		"\"n_heads\": 4, \"n_kv_heads\": 2, \"head_dim\": 24, \"ffn_dim\": 96, \"vocab\": 300}}, "
		"\"draft\": {\"method\": \"model\", \"shape\": {\"arch\": \"qwen3\", \"n_layers\": 1, "
		"\"dim\": 64, \"n_heads\": 4, \"n_kv_heads\": 2, \"head_dim\": 24, \"ffn_dim\": 96, "
		"\"vocab\": 512}}, \"tree\": \"chain:4\", \"verify\": {\"method\": \"greedy\", "
		"\"expand\": \"topk\"}, \"max_context\": 64, \"dtype\": \"bf16\"}";
	gen_spec *s = malloc(sizeof(*s));
	sw_err err = {0};
	assert_non_null(s);
	memset(s, 0, sizeof(*s));
	assert_int_not_equal(gen_spec_parse(spec, strlen(spec), "pair.json", NULL, s, &err), 0);
	if (!strstr(err.msg, "300") || !strstr(err.msg, "512") || !strstr(err.msg, "vocabulary"))
		fail_msg("message: %s", err.msg);
	print_message("  refused: %s\n", err.msg);
	free(s);
}

/* The planner's per-family ops and weights, from shape specs. */
static int count_ops(const gen_plan *p, const char *op, const char *phase)
{
	int n = 0;
	for (int ph = 0; ph < p->n_phases; ph++) {
		if (strcmp(p->phases[ph].name, phase))
			continue;
		for (int i = p->phases[ph].first_op; i < p->phases[ph].first_op + p->phases[ph].n_ops; i++)
			if (!strcmp(p->ops[i].op, op))
				n++;
	}
	return n;
}

/* fuse false: "fuse": false, the family's ops a launch each */
static void plan_shape(const char *arch, bool fuse, gen_plan *p, gen_spec *s)
{
	char spec[1024];
	sw_err err = {0};
	snprintf(spec, sizeof(spec),
	         "{\"target\": {\"shape\": {\"arch\": \"%s\", \"n_layers\": 2, \"dim\": 64, "
	         "\"n_heads\": 4, \"n_kv_heads\": 2, \"head_dim\": 24, \"ffn_dim\": 96, \"vocab\": 300, "
	         "\"rope_theta\": 1000000}}, \"draft\": \"ngram\", \"tree\": \"chain:4\", "
	         "\"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, \"max_context\": 64, "
	         "\"dtype\": \"bf16\"%s}", arch, fuse ? "" : ", \"fuse\": false");
	memset(s, 0, sizeof(*s));
	if (gen_spec_parse(spec, strlen(spec), "spec.json", NULL, s, &err))
		fail_msg("%s: %s", arch, err.msg);
	if (gen_plan_build(s, p, &err))
		fail_msg("%s: %s", arch, err.msg);
}

static void test_plan_families(void **state)
{
	(void)state;
	static const char *const archs[] = {"llama", "qwen2", "qwen3"};
	/* ops per layer in the prefill (repeat 2 each, one op record) */
	static const int head_prep[] = {0, 3, 2}, rope[] = {2, 0, 0};
	static const char *const bufs[][3] = {{NULL, NULL, NULL}, {"target.bq", "target.bk", "target.bv"},
	                                      {"target.q_norm", "target.k_norm", NULL}};
	static const int64_t per[][3] = {{0, 0, 0}, {96, 48, 48}, {24, 24, 0}};
	for (int k = 0; k < 6; k++) {
		/* fused (the default): one qkv_rope op whose steps are the
		 * family's (BIAS Qwen2, NORM Qwen3, ROPE 1 adjacent / 2 NeoX) */
		const int a = k % 3;
		const bool fuse = k < 3;
		gen_spec *s = malloc(sizeof(*s));
		gen_plan p;
		memset(&p, 0, sizeof(p));
		assert_non_null(s);
		plan_shape(archs[a], fuse, &p, s);
		assert_int_equal(s->target.cfg.arch, a);
		assert_int_equal(count_ops(&p, "head_prep", "prefill"), fuse ? 0 : head_prep[a]);
		assert_int_equal(count_ops(&p, "rope", "prefill"), fuse ? 0 : rope[a]);
		assert_int_equal(count_ops(&p, "qkv_rope", "prefill"), fuse ? 1 : 0);
		for (int i = 0; fuse && i < p.n_kernels; i++) {
			if (strcmp(p.kernels[i].tmpl, "qkv_rope.cu.tmpl"))
				continue;
			static const char *const ks[] = {"BIAS", "NORM", "ROPE"};
			const int64_t want[] = {a == 1, a == 2, a ? 2 : 1};
			for (int j = 0; j < 3; j++) {
				bool found = false;
				for (int q = 0; q < p.kernels[i].n_params; q++)
					if (!strcmp(p.kernels[i].params[q].name, ks[j])) {
						found = true;
						if (p.kernels[i].params[q].i != want[j])
							fail_msg("%s: qkv_rope %s %lld, expected %lld", archs[a], ks[j],
							         (long long)p.kernels[i].params[q].i, (long long)want[j]);
					}
				assert_true(found);
			}
		}
		for (int b = 0; b < 3; b++) {
			if (!bufs[a][b])
				continue;
			const int i = gen_plan_find_buf(&p, bufs[a][b]);
			assert_true(i >= 0);
			assert_int_equal(p.bufs[i].shape[0], 2);
			assert_int_equal(p.bufs[i].shape[1], per[a][b]);
		}
		assert_true(gen_plan_find_buf(&p, "target.bq") < 0 || a == 1);
		assert_true(gen_plan_find_buf(&p, "target.q_norm") < 0 || a == 2);
		gen_plan_free(&p);
		free(s);
	}
	/* an unknown family: refused, naming the path, the choices and the value */
	static const char bad[] =
		"{\"target\": {\"shape\": {\"arch\": \"gemma2\", \"n_layers\": 2, \"dim\": 64, "
		"\"n_heads\": 4, \"ffn_dim\": 96, \"vocab\": 300}}, \"draft\": \"ngram\", \"tree\": "
		"\"chain:4\", \"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, "
		"\"max_context\": 64, \"dtype\": \"bf16\"}";
	gen_spec *s = malloc(sizeof(*s));
	sw_err err = {0};
	assert_non_null(s);
	memset(s, 0, sizeof(*s));
	assert_int_not_equal(gen_spec_parse(bad, strlen(bad), "bad.json", NULL, s, &err), 0);
	if (!strstr(err.msg, "bad.json") || !strstr(err.msg, "arch") || !strstr(err.msg, "qwen3") ||
	    !strstr(err.msg, "gemma2"))
		fail_msg("message: %s", err.msg);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_families),
		cmocka_unit_test(test_engines_vs_transformers),
		cmocka_unit_test(test_family_refusals),
		cmocka_unit_test(test_draft_pair),
		cmocka_unit_test(test_draft_vocab_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
