/* Gemma 3 engines (gen/arch_gemma.c: embedding times sqrt(dim), (1 + w)
 * norms, per-head q/k norms, the query scale, sandwich norms, GeGLU with
 * the tanh GELU, local and global RoPE bases, tied output) against Hugging
 * Face transformers and the host reference decoder (runtime/model/gemma.c):
 * tiny random checkpoints made and saved by Gemma3ForCausalLM
 * (tests/tools/hf_tiny.py, build/venv-hf), built into fp16 engines from the
 * HF directory and run on the host backend (native: the kernels/ref ops)
 * and in the SIMT emulator (the generated kernels):
 *   gemma3-untied-free-w64-s6: 4 layers, a global layer every 2, local RoPE
 *     base 100 (global 1e6), query_pre_attn_scalar 24 under head_dim 32
 *     (a query scale of sqrt(32/24)), untied (greedy tokens that vary);
 *   gemma3-w64: 6 layers, one global (llama.cpp's fixed pattern), tied.
 * Both with sliding_window 64 at max_context 64 (the window cuts nothing:
 * no WINDOW in the plan). And the window that cuts:
 *   gemma3-untied-free-w10-s7: sliding_window 10 under a prompt of 11 and
 *     12 greedy steps, max_context 64: the local layers' attention through
 *     the tree attention template's WINDOW (gen/plan.c layer_runs), the
 *     same checks past the window (and the plan: WINDOW 10 on the sliding
 *     layers' kernels, none on the global ones, whose keys have no window
 *     entry).
 *   - logits: the prompt's last row within B_i = 2 D (2 u + gamma_K) S_i of
 *     transformers' float64 logits (test_qwen_engine.c's bound, u = 2^-11,
 *     D = 16 L + 2 stages: Gemma's layer has four more than Qwen's, the
 *     q/k norm, scale and the two post-norms);
 *   - greedy tokens equal to transformers' and the host decoder's at every
 *     step (each step's transformers top-2 margin clears 8 u max|logit|:
 *     asserted);
 *   - the same engine's graph replay equals its eager op-by-op run, and
 *     n-gram (chain) and layer-skip (eagle25 tree) speculative runs equal
 *     the target-only run, exactly, on the native host backend.
 * Plus the plan (four RMSNorm launches a layer, GeGLU, the embedding's
 * scale, per-layer RoPE tables holding the local and global frequencies)
 * and the refusals: a prefill chunk or tree larger than a window that cuts
 * (hf_tiny's default 4), a final logit softcap, a block drafter, each
 * naming the spec field, expected and found (gguf_a8 is taken: the family
 * does not refuse it; tests/test_engine_gguf_cuda.c runs it); and Gemma 3
 * by shape (models/specs/gemma3-4b-ngram.json). */
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
#include "gen/arch.h"
#include "gen/plan.h"
#include "gen/spec.h"
#include "model/ctx.h"
#include "hf_util.h"
#include "testutil.h"

static const char *const VARIANTS[] = {"gemma3-untied-free-w64-s6", "gemma3-w64", "gemma3-free",
                                       "gemma3-free-cap8-w64", "gemma3-untied-free-w10-s7"};
#define N_VARIANTS 5
#define V_WINDOW 4 /* sliding_window 10 under 11 + 12 positions: the window cuts */
#define N_RUN 2 /* the first two are built and run; the others are refused */

static char g_hf[64];   /* hf_tiny.py output */
static char g_dir[300]; /* engines and the emulator's cache */
static bool g_have;

static int setup(void **state)
{
	(void)state;
	eu_work_dir(g_dir, sizeof(g_dir), "test_gemma_engine");
	int rc = hf_make("/tmp/sw_gemmae_XXXXXX", g_hf, sizeof(g_hf), VARIANTS, N_VARIANTS);
	if (rc <= 0)
		return rc; /* 0: g_have stays false, the transformers tests skip, saying why */
	g_have = true;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (g_have)
		hf_rm_rf(g_hf, "/tmp/sw_gemmae_");
	hf_rm_rf(g_dir, "build/test_gemma_engine.");
	return 0;
}

static void spec_for(char *buf, size_t n, const char *path, const char *draft, const char *tree,
                     int max_context, const char *dtype)
{
	snprintf(buf, n,
	         "{\"name\": \"gemma\", \"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": \"%s\"}, "
	         "\"tree\": \"%s\", \"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, "
	         "\"max_context\": %d, \"prefill_chunk\": 8, \"dtype\": \"%s\", "
	         "\"archs\": [\"sm_80\"]}",
	         path, draft, tree, max_context, dtype);
}

static double worst_ratio;

/* One engine on one host mode (hf_engine_check: logits and greedy tokens
 * against transformers and the host decoder; native: graph == eager,
 * speculative == target-only); a layer adds 16 roundings. */
static void run_one(const char *what, const char *edir, int mode, const rt_model *m,
                    const json_value *ref, const int32_t *prompt, int T, const int32_t *host)
{
	char cache[400];
	snprintf(cache, sizeof(cache), "%s/cache", g_dir);
	worst_ratio = fmax(worst_ratio,
	                   hf_engine_check(what, edir, cache, mode, m, ref, prompt, T, host, 16));
}

static void test_engines_vs_transformers(void **state)
{
	(void)state;
	if (!g_have) {
		printf("  %s with transformers is missing (make deps): skipped\n", hf_python());
		skip();
	}
	for (int v = 0; v < N_RUN; v++) {
		char dir[600], spec[2048], edir[700], what[128], cache[400];
		snprintf(dir, sizeof(dir), "%s/%s", g_hf, VARIANTS[v]);
		snprintf(cache, sizeof(cache), "%s/cache", g_dir);
		hf_fixture fx;
		hf_fixture_load(dir, &fx);
		const rt_model *m = fx.m;
		const json_value *ref = fx.ref;
		const int32_t *prompt = fx.prompt, *host = fx.host;
		const int T = fx.T;
		assert_int_equal(m->cfg.arch, RT_ARCH_GEMMA3);
		assert_int_equal(m->cfg.swa_window, 64);
		static const char *const drafts[][2] = {{"ngram:1:3", "chain:4"}, {"layerskip:1", "eagle25"}};
		for (int k = 0; k < 2; k++) {
			snprintf(edir, sizeof(edir), "%s/%s_%d", g_dir, VARIANTS[v], k);
			spec_for(spec, sizeof(spec), dir, drafts[k][0], drafts[k][1], 64, "fp16");
			eu_build(spec, edir, cache, false);
			snprintf(what, sizeof(what), "%s %s native", VARIANTS[v], drafts[k][0]);
			run_one(what, edir, RT_HOST_NATIVE, m, ref, prompt, T, host);
			if (k == 0) { /* the generated kernels */
				snprintf(what, sizeof(what), "%s %s emulated", VARIANTS[v], drafts[k][0]);
				run_one(what, edir, RT_HOST_EMULATE, m, ref, prompt, T, host);
			}
		}
		hf_fixture_free(&fx);
	}
	print_message("  worst logit error: %.3f of the bound\n", worst_ratio);
}

/* gemma3-untied-free-w10-s7 (layers 0 and 2 sliding, window 10): prompt 11
 * + 12 steps, so every step past the first attends through the window.
 * The plan: tree attention kernels with WINDOW 10 and without (the global
 * layers: no "_window" in their keys); engines: native and emulated greedy
 * == transformers == the host decoder, graph == eager, speculative ==
 * target-only (an n-gram chain, a layer-skip tree of 7 nodes). */
static int count_ops(const gen_plan *p, const char *op, const char *phase);

static void test_window_engine(void **state)
{
	(void)state;
	if (!g_have)
		skip();
	char dir[600], spec[2048], edir[700], what[160], cache[400];
	sw_err err = {0};
	snprintf(dir, sizeof(dir), "%s/%s", g_hf, VARIANTS[V_WINDOW]);
	snprintf(cache, sizeof(cache), "%s/cache", g_dir);
	hf_fixture fx;
	hf_fixture_load(dir, &fx);
	const rt_model *m = fx.m;
	const json_value *ref = fx.ref;
	const int32_t *prompt = fx.prompt, *host = fx.host;
	const int T = fx.T, N = fx.N;
	assert_int_equal(m->cfg.swa_window, 10);
	assert_true(T + N > 10 + 4); /* past the window, and more */
	assert_true(rt_config_layer_sliding(&m->cfg, 0) && !rt_config_layer_sliding(&m->cfg, 1));
	/* the plan */
	gen_spec *s = calloc(1, sizeof(*s));
	gen_plan p;
	memset(&p, 0, sizeof(p));
	assert_non_null(s);
	spec_for(spec, sizeof(spec), dir, "ngram", "chain:4", 64, "fp16");
	if (gen_spec_parse(spec, strlen(spec), "gemma.json", NULL, s, &err) || gen_plan_build(s, &p, &err))
		fail_msg("%s", err.msg);
	int n_win = 0, n_glob = 0;
	for (int i = 0; i < p.n_kernels; i++) {
		if (strcmp(p.kernels[i].tmpl, "tree_attention.cu.tmpl"))
			continue;
		long long w = -1;
		for (int j = 0; j < p.kernels[i].n_params; j++)
			if (!strcmp(p.kernels[i].params[j].name, "WINDOW"))
				w = p.kernels[i].params[j].i;
		assert_true(w == 0 || w == 10);
		assert_int_equal(strstr(p.kernels[i].uri, "_window10") != NULL, w == 10);
		assert_null(strstr(p.kernels[i].uri, "_window0"));
		n_win += w == 10;
		n_glob += w == 0;
	}
	assert_true(n_win >= 2 && n_glob >= 2); /* prefill and verify, each kind */
	/* four layers in runs 0 | 1 | 2 | 3: four attention launches a forward */
	assert_int_equal(count_ops(&p, "tree_attention", "prefill"), 8);
	gen_plan_free(&p);
	free(s);
	static const char *const drafts[][2] = {{"ngram:1:3", "chain:4"}, {"layerskip:1", "kary:2:2"}};
	for (int k = 0; k < 2; k++) {
		snprintf(edir, sizeof(edir), "%s/%s_%d", g_dir, VARIANTS[V_WINDOW], k);
		spec_for(spec, sizeof(spec), dir, drafts[k][0], drafts[k][1], 64, "fp16");
		eu_build(spec, edir, cache, false);
		snprintf(what, sizeof(what), "%s %s native", VARIANTS[V_WINDOW], drafts[k][0]);
		run_one(what, edir, RT_HOST_NATIVE, m, ref, prompt, T, host);
		if (k == 0) {
			snprintf(what, sizeof(what), "%s %s emulated", VARIANTS[V_WINDOW], drafts[k][0]);
			run_one(what, edir, RT_HOST_EMULATE, m, ref, prompt, T, host);
		}
	}
	hf_fixture_free(&fx);
}

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

static const gen_param *kparam(const gen_plan *p, const char *tmpl, const char *name)
{
	for (int i = 0; i < p->n_kernels; i++)
		if (!strcmp(p->kernels[i].tmpl, tmpl))
			for (int j = 0; j < p->kernels[i].n_params; j++)
				if (!strcmp(p->kernels[i].params[j].name, name))
					return &p->kernels[i].params[j];
	return NULL;
}

/* The plan of the untied free checkpoint: per layer (one op record with
 * repeat L) the attention norm, the post-attention norm, the MLP norm and
 * the post-MLP norm (plus the final norm); fused, one qkv_rope (the norms,
 * NeoX pairs, q's scale), with "fuse": false two head_prep launches; no
 * rope; GeGLU; the embedding's SCALE sqrt(64) = 8; q's SCALE sqrt(32/24);
 * rope_freq (L, 16) and the per-layer weights of transformers' names; the
 * rope_freq rows as the host model holds them: layer 1 (global) the
 * rope_theta 1e6 table, layer 0 (sliding) base 100. */
static void test_plan(void **state)
{
	(void)state;
	if (!g_have)
		skip();
	char dir[600], spec[2048];
	sw_err err = {0};
	snprintf(dir, sizeof(dir), "%s/%s", g_hf, VARIANTS[0]);
	spec_for(spec, sizeof(spec), dir, "ngram", "chain:4", 64, "bf16");
	gen_spec *s = malloc(sizeof(*s));
	gen_plan p;
	memset(&p, 0, sizeof(p));
	assert_non_null(s);
	memset(s, 0, sizeof(*s));
	if (gen_spec_parse(spec, strlen(spec), "gemma.json", NULL, s, &err) || gen_plan_build(s, &p, &err))
		fail_msg("%s", err.msg);
	/* fused (the default): the two post-norms rmsnorm_residual in place,
	 * the other norms rmsnorm_cast, one qkv_rope with the norms, NeoX pairs
	 * and q's scale, GeGLU in swiglu_cast */
	assert_int_equal(count_ops(&p, "rmsnorm_residual", "prefill"), 2);
	assert_int_equal(count_ops(&p, "rmsnorm_cast", "prefill"), 3);
	assert_int_equal(count_ops(&p, "qkv_rope", "prefill"), 1);
	assert_int_equal(count_ops(&p, "head_prep", "prefill"), 0);
	assert_int_equal(count_ops(&p, "rope", "prefill"), 0);
	const gen_param *fa = kparam(&p, "swiglu_cast.cu.tmpl", "ACT"),
	                *fs = kparam(&p, "qkv_rope.cu.tmpl", "SCALE"),
	                *fn = kparam(&p, "qkv_rope.cu.tmpl", "NORM"),
	                *fr = kparam(&p, "qkv_rope.cu.tmpl", "ROPE");
	assert_true(fa && fs && fn && fr);
	assert_int_equal(fa->i, 1);
	assert_true(fs->f == sqrtf(32.0f / 24.0f));
	assert_int_equal(fn->i, 1);
	assert_int_equal(fr->i, 2);
	gen_plan_free(&p);
	/* "fuse": false: a launch an op */
	{
		char sp2[2100];
		snprintf(sp2, sizeof(sp2), "%.*s, \"fuse\": false}", (int)strlen(spec) - 1, spec);
		memset(s, 0, sizeof(*s));
		memset(&p, 0, sizeof(p));
		if (gen_spec_parse(sp2, strlen(sp2), "gemma.json", NULL, s, &err) ||
		    gen_plan_build(s, &p, &err))
			fail_msg("%s", err.msg);
	}
	assert_int_equal(count_ops(&p, "rmsnorm_residual", "prefill"), 5);
	assert_int_equal(count_ops(&p, "head_prep", "prefill"), 2);
	assert_int_equal(count_ops(&p, "rope", "prefill"), 0);
	const gen_param *act = kparam(&p, "swiglu.cu.tmpl", "ACT"),
	                *sc = kparam(&p, "embedding16.cu.tmpl", "SCALE");
	assert_non_null(act);
	assert_non_null(sc);
	assert_int_equal(act->i, 1);
	assert_true(sc->f == 8.0f);
	bool q_scaled = false;
	for (int i = 0; i < p.n_kernels; i++)
		if (!strcmp(p.kernels[i].tmpl, "head_prep.cu.tmpl"))
			for (int j = 0; j < p.kernels[i].n_params; j++)
				if (!strcmp(p.kernels[i].params[j].name, "SCALE") &&
				    p.kernels[i].params[j].f == sqrtf(32.0f / 24.0f))
					q_scaled = true;
	assert_true(q_scaled);
	static const char *const fields[] = {"q_norm", "k_norm", "post_attn_norm", "post_ffn_norm",
	                                     "rope_freq"};
	static const int64_t per[] = {32, 32, 64, 64, 16};
	for (int f = 0; f < 5; f++) {
		char nm[64];
		snprintf(nm, sizeof(nm), "target.%s", fields[f]);
		const int b = gen_plan_find_buf(&p, nm);
		if (b < 0)
			fail_msg("no buffer %s", nm);
		assert_int_equal(p.bufs[b].shape[0], 4);
		assert_int_equal(p.bufs[b].shape[1], per[f]);
	}
	assert_true(gen_plan_find_buf(&p, "target.lm_head") >= 0); /* untied */
	rt_model *m = rt_model_load(dir, &err);
	if (!m)
		fail_msg("%s", err.msg);
	size_t n0, n1;
	const float *f0 = rt_model_weight(m, "rope_freq", 0, &n0), *f1 = rt_model_weight(m, "rope_freq", 1, &n1);
	assert_true(f0 && f1 && n0 == 16 && n1 == 16);
	for (int i = 0; i < 16; i++) {
		const double g = pow(1e6, -2.0 * i / 32), l = pow(100.0, -2.0 * i / 32);
		if (fabs(f1[i] - g) > 1e-6 * g || fabs(f0[i] - l) > 1e-6 * l)
			fail_msg("rope_freq[%d]: layer 0 %g (base 100: %g), layer 1 %g (base 1e6: %g)", i,
			         (double)f0[i], l, (double)f1[i], g);
	}
	rt_model_free(m);
	gen_plan_free(&p);
	/* the tied checkpoint: the LM head is the embedding table */
	snprintf(dir, sizeof(dir), "%s/%s", g_hf, VARIANTS[1]);
	spec_for(spec, sizeof(spec), dir, "ngram", "chain:4", 64, "bf16");
	memset(s, 0, sizeof(*s));
	memset(&p, 0, sizeof(p));
	if (gen_spec_parse(spec, strlen(spec), "gemma.json", NULL, s, &err) || gen_plan_build(s, &p, &err))
		fail_msg("%s", err.msg);
	assert_true(gen_plan_find_buf(&p, "target.lm_head") < 0);
	gen_plan_free(&p);
	free(s);
}

static rt_model *load_variant(const char *variant)
{
	char dir[600];
	sw_err err = {0};
	snprintf(dir, sizeof(dir), "%s/%s", g_hf, variant);
	rt_model *m = rt_model_load(dir, &err);
	if (!m)
		fail_msg("%s: %s", dir, err.msg);
	return m;
}

/* Refused at parse, naming the file, the field, what was expected and
 * what was found. */
static void refuse(const char *variant, const char *file, int max_context, const char *dtype,
                   const char *const *want)
{
	char dir[600], spec[2048];
	sw_err err = {0};
	snprintf(dir, sizeof(dir), "%s/%s%s", g_hf, variant, file);
	spec_for(spec, sizeof(spec), dir, "ngram", "chain:4", max_context, dtype);
	gen_spec *s = malloc(sizeof(*s));
	assert_non_null(s);
	memset(s, 0, sizeof(*s));
	assert_int_not_equal(gen_spec_parse(spec, strlen(spec), "gemma.json", NULL, s, &err), 0);
	assert_true(strstr(err.msg, "gemma.json") != NULL);
	for (int i = 0; want[i]; i++)
		if (!strstr(err.msg, want[i]))
			fail_msg("message lacks '%s': %s", want[i], err.msg);
	print_message("  refused: %s\n", err.msg);
	free(s);
}

static void test_refusals(void **state)
{
	(void)state;
	if (!g_have)
		skip();
	/* a window that cuts (4 under max_context 64) under a prefill chunk of
	 * 8: the windowed attention takes a block's keys as inside it */
	static const char *const win[] = {"$.prefill_chunk", "at most 4 rows", "sliding_window",
	                                  "found 8 rows", NULL};
	refuse(VARIANTS[2], "", 64, "fp16", win);
	static const char *const cap[] = {"$.target", "final_logit_softcapping", "found "
	                                  "final_logit_softcapping 8", NULL};
	refuse(VARIANTS[3], "", 64, "fp16", cap);
	/* gguf_a8 taken by the family's check (the test GGUF's F32 GEMMs are
	 * refused before it: gen/spec.c), a block drafter refused */
	gen_spec *s = calloc(1, sizeof(*s));
	assert_non_null(s);
	rt_model *m = load_variant(VARIANTS[1]);
	const gen_arch *fa = gen_arch_of(RT_ARCH_GEMMA3);
	gen_arch_refusal r = {0};
	s->max_context = 64;
	s->dtype = GEN_DTYPE_GGUF_A8;
	assert_int_equal(fa->check(&m->cfg, "target", s, &r), 0);
	s->dtype = GEN_DTYPE_BF16;
	s->draft_kind = GEN_DRAFT_BLOCK;
	assert_int_equal(fa->check(&m->cfg, "target", s, &r), 1);
	assert_string_equal(r.key, "draft");
	assert_true(strstr(r.found, "block drafter") != NULL);
	s->draft_kind = GEN_DRAFT_LAYERSKIP;
	assert_int_equal(fa->check(&m->cfg, "target", s, &r), 0);
	/* a window that cuts under a larger tree (eagle25's 26 nodes over
	 * window 10; the same tree where the window covers max_context) */
	rt_model *mw = load_variant(VARIANTS[V_WINDOW]);
	sw_err err = {0};
	assert_int_equal(rt_tree_parse("eagle25", NULL, &s->tree, &err), 0);
	s->prefill_chunk = 8;
	s->max_context = 10;
	assert_int_equal(fa->check(&mw->cfg, "target", s, &r), 0);
	s->max_context = 64;
	assert_int_equal(fa->check(&mw->cfg, "target", s, &r), 1);
	assert_string_equal(r.key, "tree");
	assert_true(strstr(r.expected, "at most 10 rows") && strstr(r.found, "26 rows"));
	rt_model_free(mw);
	rt_model_free(m);
	free(s);
}

/* Gemma 3 by shape (no weights: planning, inspect's projection, random
 * weights): models/specs/gemma3-4b-ngram.json plans Gemma-3-4B's engine
 * (34 layers, head_dim 256, GeGLU, the embedding times sqrt(2560), rope
 * tables per layer, tied); at max_context 2048, past sliding_window 1024,
 * the local layers' attention windowed; a Gemma key under another family is refused naming it. */
static void test_shape(void **state)
{
	(void)state;
	sw_err err = {0};
	gen_spec *s = calloc(1, sizeof(*s));
	gen_plan p;
	memset(&p, 0, sizeof(p));
	assert_non_null(s);
	if (gen_spec_load("models/specs/gemma3-4b-ngram.json", NULL, s, &err) ||
	    gen_plan_build(s, &p, &err))
		fail_msg("%s", err.msg);
	const rt_config *c = &s->target.cfg;
	assert_int_equal(c->arch, RT_ARCH_GEMMA3);
	assert_int_equal(c->swa_window, 1024);
	assert_true(c->tied_embd);
	assert_true(c->embd_scale == sqrtf(2560.0f));
	assert_true(c->query_scalar == 256.0f && c->rope_theta_local == 10000.0f);
	const int b = gen_plan_find_buf(&p, "target.rope_freq");
	assert_true(b >= 0);
	assert_int_equal(p.bufs[b].shape[0], 34);
	assert_int_equal(p.bufs[b].shape[1], 128);
	assert_true(gen_plan_find_buf(&p, "target.lm_head") < 0);
	/* the fused layer: the post-norms in place, the rest rmsnorm_cast */
	assert_int_equal(count_ops(&p, "rmsnorm_residual", "prefill"), 2);
	assert_int_equal(count_ops(&p, "rmsnorm_cast", "prefill"), 3);
	const gen_param *act = kparam(&p, "swiglu_cast.cu.tmpl", "ACT");
	assert_true(act && act->i == 1);
	gen_plan_free(&p);
	/* the same shape at max_context 2048: the local layers through WINDOW
	 * 1024, in runs (five local, one global; 34 layers: 11 runs, a part
	 * and a merge each) */
	size_t n;
	char *t = sw_read_file("models/specs/gemma3-4b-ngram.json", SW_CAP_TEXT, &n);
	assert_non_null(t);
	char *at = strstr(t, "\"max_context\": 1024");
	assert_non_null(at);
	memcpy(at, "\"max_context\": 2048", 19);
	memset(s, 0, sizeof(*s));
	memset(&p, 0, sizeof(p));
	if (gen_spec_parse(t, n, "g4b.json", NULL, s, &err) || gen_plan_build(s, &p, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(count_ops(&p, "tree_attention", "prefill"), 22);
	const gen_param *wp = kparam(&p, "tree_attention.cu.tmpl", "WINDOW");
	assert_non_null(wp);
	bool has_win = false;
	for (int i = 0; i < p.n_kernels; i++)
		has_win |= strstr(p.kernels[i].uri, "_window1024") != NULL;
	assert_true(has_win);
	gen_plan_free(&p);
	free(t);
	/* a Gemma key under Qwen3 */
	static const char bad[] =
		"{\"target\": {\"shape\": {\"arch\": \"qwen3\", \"n_layers\": 2, \"dim\": 64, "
		"\"n_heads\": 4, \"ffn_dim\": 96, \"vocab\": 300, \"sliding_window\": 64}}, \"draft\": "
		"\"ngram\", \"tree\": \"chain:4\", \"verify\": {\"method\": \"greedy\", \"expand\": "
		"\"topk\"}, \"max_context\": 64, \"dtype\": \"bf16\"}";
	memset(s, 0, sizeof(*s));
	assert_int_not_equal(gen_spec_parse(bad, strlen(bad), "bad.json", NULL, s, &err), 0);
	if (!strstr(err.msg, "sliding_window") || !strstr(err.msg, "gemma3") || !strstr(err.msg, "qwen3"))
		fail_msg("message: %s", err.msg);
	print_message("  refused: %s\n", err.msg);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_engines_vs_transformers),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_window_engine),
		cmocka_unit_test(test_shape),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
