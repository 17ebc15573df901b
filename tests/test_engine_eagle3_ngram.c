/* EAGLE-3 engines that look for an n-gram match first (a "draft" with
 * "ngram": "MIN:MAX" and "levels": L; gen/drafter_eagle3.c, templates/
 * draft_pick.cu.tmpl): per iteration the n-gram lookup and the draft-length
 * controller propose the chain, and where they propose nothing the head
 * drafts L tokens; the head's cache takes every committed row either way.
 * Checked against independent references, on the engine tests' tiny target
 * and head (test_engine_eagle3.c's fixture):
 *  - greedy: the engine's tokens are the host fp32 target-only greedy
 *    tokens; every iteration drafted either a present prefix of
 *    ref_ngram_lookup_info's proposal over the committed tokens (all of it,
 *    and exactly when it proposed some, with the controller off) or the
 *    host fp32 head's L tokens from the same committed sequence (an fp16
 *    near-tie named, as test_engine_eagle3) then absent nodes; both kinds
 *    of iteration occur; native and emulate; graph = eager;
 *  - exactness at T > 0 (one-hot verification, top-k and sampled head
 *    expansion): chi-square at significance 1e-4 of the first two tokens
 *    after a prompt whose suffix repeats (so both drafters propose); the
 *    same seed gives the same tokens native, emulate and eager;
 *  - bad input: every spec the combination cannot honour, refused by field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "e3_util.h"
#include "eagle3_util.h"
#include "engine/engine.h"
#include "engine/manifest.h"
#include "engine_util.h"
#include "formats/gguf.h"
#include "kernels/engine_state.h"
#include "model/eagle3.h"
#include "testutil.h"

static char g_dir[256], g_tiny_path[300], g_head[300];
static rt_model *g_tiny;
static rt_eagle3 *g_h;

static int setup(void **state)
{
	(void)state;
	return e3u_fixture("test_engine_eagle3_ngram", g_dir, sizeof(g_dir), g_tiny_path, sizeof(g_tiny_path), g_head,
	                   sizeof(g_head), &g_tiny, &g_h);
}

static int teardown(void **state)
{
	(void)state;
	e3u_fixture_free(g_tiny, g_h, g_head);
	return 0;
}

typedef struct hy_case {
	const char *tree;
	int nodes, ngram_min, ngram_max, levels;
	bool ctrl_off;
	/* a fixed cost table (the lookup's 0 .. depth, then the head's 1 ..
	 * levels), else measured; and what it must make the controller do:
	 * HY_SHORT the head drafts only its first level, HY_PLAIN some
	 * iterations draft nothing */
	const char *cost;
	int expect;
} hy_case;

enum { HY_ANY = 0, HY_SHORT, HY_PLAIN };

static void hy_spec(char *buf, size_t n, const hy_case *c, const char *verify, const char *expand,
                    double temp)
{
	char extra[96], ctl[160];
	snprintf(extra, sizeof(extra), ", \"ngram\": \"%d:%d\", \"levels\": %d", c->ngram_min,
	         c->ngram_max, c->levels);
	if (c->ctrl_off)
		snprintf(ctl, sizeof(ctl), ", \"control\": {\"mode\": \"off\"}");
	else if (c->cost)
		snprintf(ctl, sizeof(ctl), ", \"control\": {\"cost\": %s}", c->cost);
	else
		ctl[0] = 0;
	e3u_spec_ex(buf, n, "fp16", g_tiny_path, g_head, c->tree, verify, expand, temp, 192, 16, extra,
	            ctl);
}

static void greedy_case(const hy_case *c, int tag)
{
	enum { P = 37, N = 40 };
	int32_t prompt[P], ref[N], a[N], b[N];
	float margin[N];
	eu_tiny_prompt(prompt, P);
	eu_reference(g_tiny, prompt, P, N, ref, margin, NULL);
	char spec[2048], dir[400];
	snprintf(dir, sizeof(dir), "%s/greedy%d", g_dir, tag);
	hy_spec(spec, sizeof(spec), c, "greedy", "topk", 0);
	eu_build(spec, dir, eu_cache_dir(), false);
	for (int mode = 0; mode < 2; mode++) {
		rt_dev *d = eu_open_host(mode ? RT_HOST_EMULATE : RT_HOST_NATIVE, eu_cache_dir());
		rt_engine *e = e3u_bind(dir, d, g_tiny, g_h, 1);
		rt_engine_stats st;
		if (!c->ctrl_off && !c->cost) { /* measured: the head's k levels on the lookup's k */
			const int D = e->man->depth;
			assert_int_equal(rt_engine_ctrl_levels(e), c->levels);
			for (int k = 1; k <= c->levels; k++)
				if (!(e->ctrl_cost[D + k] > e->ctrl_cost[k] &&
				      e->ctrl_cost[D + k] >= e->ctrl_cost[D + k - (k > 1)]))
					fail_msg("%s: the head's %d levels cost %g, the lookup's %d tokens %g",
					         dir, k, e->ctrl_cost[D + k], k, e->ctrl_cost[k]);
		}
		e3u_drafts cb = {.e = e, .target = g_tiny, .head = g_h, .head_name = "host head",
		                 .u = E3U_U_FP16, .gamma = c->levels, .ngram_min = c->ngram_min,
		                 .ngram_max = c->ngram_max, .n_nodes = c->nodes, .ctrl_off = c->ctrl_off};
		snprintf(cb.what, sizeof(cb.what), "%s ngram %d:%d levels %d%s %s", c->tree, c->ngram_min,
		         c->ngram_max, c->levels, c->ctrl_off ? " (no controller)" : "",
		         mode ? "emulate" : "native");
		e3u_drafts_run(&cb, prompt, P, N, a, &st);
		for (int i = 0; i < N; i++)
			if (a[i] != ref[i])
				fail_msg("%s: token %d is %d, target-only's %d", cb.what, i, a[i], ref[i]);
		print_message("  %s: %d/%d tokens = target-only in %d iterations: %d drafted by the "
		              "n-gram lookup, %d by the head (%d of fewer levels; %d fp16 near-ties), %d "
		              "plain, %d tokens accepted\n", cb.what, N, N, (int)st.n_iters, cb.by_ngram,
		              cb.by_head, cb.head_short, cb.ties, cb.plain, N - (int)st.n_iters);
		if (c->expect == HY_SHORT) /* the head's second level priced out */
			assert_int_equal(cb.head_short, cb.by_head);
		if (c->expect == HY_PLAIN) /* the head priced out: plain steps, probes */
			assert_true(cb.plain > 0 && cb.by_head < cb.plain);
		if (c->ctrl_off)
			assert_int_equal(cb.plain + cb.head_short, 0);
		/* both drafters drafted, and drafts were accepted; the engine's
		 * own count (state RT_ST_HEAD) is the pick words the test read */
		assert_true(cb.by_ngram > 0 && cb.by_head > 0);
		assert_true(st.ngram_first);
		assert_int_equal(st.by_head, cb.by_head);
		assert_true(st.n_iters < N);
		if (!mode) { /* the same iterations op by op, each gate read on the host */
			assert_int_equal(eu_generate(e, "eager", prompt, P, N, true, b, &st), N);
			assert_memory_equal(a, b, sizeof(b));
		}
		rt_engine_free(e);
		rt_dev_free(d);
	}
}

static void test_greedy(void **state)
{
	(void)state;
	static const hy_case cases[] = {
		{"chain:4", 5, 1, 3, 1, false, NULL, HY_ANY},
		{"chain:4", 5, 1, 3, 2, true, NULL, HY_ANY},
		{"chain:3", 4, 2, 3, 3, false, NULL, HY_ANY},
		/* the head's one level cheap, two dear */
		{"chain:4", 5, 1, 3, 2, false, "[1, 1.2, 1.3, 1.4, 1.5, 1.02, 1000]", HY_SHORT},
		/* the head dear at every level */
		{"chain:4", 5, 1, 3, 2, false, "[1, 1.2, 1.3, 1.4, 1.5, 900, 1000]", HY_PLAIN},
	};
	for (int i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++)
		greedy_case(&cases[i], i);
}

/* T > 0: one-hot verification of either drafter's proposal, the head's by
 * top-k or sampled expansion; chi-square at 1e-4 against the enumeration */
static void test_exactness(void **state)
{
	(void)state;
	static const e3u_exact_case cfg[] = {
		{"chain:3", "onehot", "topk", ", \"ngram\": \"1:2\""},
		{"chain:3", "onehot", "sample", ", \"ngram\": \"1:3\", \"levels\": 2"},
	};
	static const rt_engine_sampling set[] = {{1.0f, 0, 1.0f}, {2.0f, 5, 1.0f}};
	static const int32_t prompt[7] = {3, 7, 1, 6, 3, 7, 1}; /* "3 7 1" recurs: 6 proposed at once */
	sw_err err = {0};
	char mpath[300];
	rt_model *m = tu_tiny_llama(12, 32, 3, 2, 1, 48, 11);
	assert_non_null(m);
	snprintf(mpath, sizeof(mpath), "%s/v12.gguf", g_dir);
	if (rt_llama_save_gguf(m, mpath, GGML_T_F32, &err))
		fail_msg("%s", err.msg);
	const e3u_exact x = {.m = m, .mpath = mpath, .dtype = "fp16", .dir = g_dir,
	                     .cache_dir = eu_cache_dir(), .cases = cfg, .n_cases = 2, .set = set,
	                     .n_set = 2, .runs = 2000, .seed = 7000, .label = "ngram first: ",
	                     .prompt = prompt, .n_prompt = 7};
	e3u_exactness(&x);
	rt_model_free(m);
}

/* T > 0, one engine per mode: the same seed gives the same tokens native
 * and emulate (every draw Philox keyed by seed, iteration and node on both
 * sides; test_engine.c's rule), and the graph the eager run's; both
 * drafters drafted */
static void test_seeded(void **state)
{
	(void)state;
	enum { P = 37, N = 32 };
	const hy_case c = {"chain:4", 5, 1, 3, 2, true, NULL, HY_ANY};
	const rt_engine_sampling samp = {1.0f, 0, 1.0f};
	int32_t prompt[P], out[3][N];
	char spec[2048], dir[400];
	eu_tiny_prompt(prompt, P);
	snprintf(dir, sizeof(dir), "%s/seeded", g_dir);
	hy_spec(spec, sizeof(spec), &c, "onehot", "sample", 1.0);
	eu_build(spec, dir, eu_cache_dir(), false);
	for (int seed = 1; seed <= 2; seed++) {
		rt_engine_stats st[3];
		for (int mode = 0; mode < 2; mode++) {
			rt_dev *d = eu_open_host(mode ? RT_HOST_EMULATE : RT_HOST_NATIVE, eu_cache_dir());
			rt_engine *e = e3u_bind(dir, d, g_tiny, g_h, (uint64_t)seed);
			assert_int_equal(eu_generate_samp(e, mode ? "emulate" : "native", prompt, P, N,
			                                  false, &samp, out[mode], &st[mode]), N);
			if (!mode)
				assert_int_equal(eu_generate_samp(e, "eager", prompt, P, N, true, &samp,
				                                  out[2], &st[2]), N);
			rt_engine_free(e);
			rt_dev_free(d);
		}
		assert_memory_equal(out[0], out[1], sizeof(out[0]));
		assert_memory_equal(out[0], out[2], sizeof(out[0]));
		assert_int_equal(st[0].n_iters, st[1].n_iters);
		assert_int_equal(st[0].by_head, st[1].by_head);
		assert_true(st[0].by_head > 0 && (int)st[0].by_head < st[0].n_iters);
		print_message("  seed %d: %d tokens equal native, emulate and eager, %d iterations (the "
		              "head drafted %d)\n", seed, N, st[0].n_iters, (int)st[0].by_head);
	}
}

/* Each spec refused with its field, what was expected and what was found */
static void test_refused(void **state)
{
	(void)state;
	char spec[2048];
	static const struct {
		hy_case c;
		const char *verify, *expand;
		double temp;
		const char *want;
	} bad[] = {
		{{"branch:2,1", 4, 1, 3, 1, false, NULL, HY_ANY}, "greedy", "topk", 0,
		 "$.tree: expected a chain (ngram drafts one continuation), found \"branch:2,1\""},
		{{"chain:3", 4, 1, 3, 1, false, NULL, HY_ANY}, "rrs", "sample", 1.0,
		 "$.verify.method: expected greedy or onehot (ngram drafts have no draft distribution), "
		 "found \"rrs\""},
		{{"chain:3", 4, 1, 3, 4, false, NULL, HY_ANY}, "greedy", "topk", 0,
		 "$.draft.levels: expected at most the chain's depth (the head drafts nodes 1 .. "
		 "levels), found 4 with tree \"chain:3\" of depth 3"},
		{{"chain:3", 4, 3, 2, 1, false, NULL, HY_ANY}, "greedy", "topk", 0,
		 "$.draft.ngram: expected \"MIN:MAX\" with 1 <= MIN <= MAX <= 16, found \"3:2\""},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		hy_spec(spec, sizeof(spec), &bad[i].c, bad[i].verify, bad[i].expand, bad[i].temp);
		e3u_spec_refused(spec, bad[i].want);
	}
	e3u_spec_ex(spec, sizeof(spec), "fp16", g_tiny_path, g_head, "chain:3", "greedy", "topk", 0,
	            192, 16, ", \"levels\": 2", "");
	e3u_spec_refused(spec, "$.draft.levels: expected \"levels\" only with \"ngram\"");
	e3u_spec_ex(spec, sizeof(spec), "fp16", g_tiny_path, g_head, "chain:3", "greedy", "topk", 0,
	            192, 16, ", \"ngram\": 3", "");
	e3u_spec_refused(spec, "$.draft.ngram: expected \"MIN:MAX\" with 1 <= MIN <= MAX <= 16, "
	                 "found number");
	e3u_spec_ex(spec, sizeof(spec), "fp16", g_tiny_path, g_head, "chain:3", "greedy", "topk", 0,
	            192, 16, "", ", \"control\": {\"mode\": \"cost\"}");
	e3u_spec_refused(spec, "$.control.mode: expected \"off\" (the draft-length controller drives "
	                 "n-gram chain drafters only, $.draft.method ngram or $.draft.ngram)");
	/* a cost table without the head's levels (the lookup's 0 .. 3 only) */
	e3u_spec_ex(spec, sizeof(spec), "fp16", g_tiny_path, g_head, "chain:3", "greedy", "topk", 0,
	            192, 16, ", \"ngram\": \"1:3\", \"levels\": 2",
	            ", \"control\": {\"cost\": [1, 1.2, 1.3, 1.4]}");
	e3u_spec_refused(spec, "$.control.cost: expected an array of 1 + depth + levels entries "
	                 "(drafting 0 .. depth tokens by the lookup, then 1 .. levels by the head), "
	                 "found 4 entries where 1 + 3 + 2 = 6");
	/* "ngram" with another drafter */
	snprintf(spec, sizeof(spec),
	         "{\"name\": \"x\", \"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": "
	         "\"ngram:1:3\", \"ngram\": \"1:3\"}, \"tree\": \"chain:3\", \"verify\": {\"method\": "
	         "\"greedy\", \"expand\": \"topk\"}, \"sampling\": {\"temperature\": 0, \"top_k\": 0, "
	         "\"top_p\": 1}, \"max_context\": 192, \"prefill_chunk\": 16, \"dtype\": \"fp16\", "
	         "\"archs\": [\"sm_80\"]}", g_tiny_path);
	e3u_spec_refused(spec, "$.draft.ngram: expected \"ngram\" and \"levels\" only with method "
	                 "\"eagle3\" (an n-gram lookup before the head), found it with \"ngram:1:3\"");
	/* the n-gram method's own MIN:MAX, read by the same parser as "ngram" */
	static const char *const bad_method[] = {"ngram:4:2", "ngram:1:3x", "ngram:0:2", "ngram:1:17"};
	for (int i = 0; i < 4; i++) {
		char want[160];
		snprintf(spec, sizeof(spec),
		         "{\"name\": \"x\", \"target\": {\"path\": \"%s\"}, \"draft\": \"%s\", "
		         "\"tree\": \"chain:3\", \"verify\": {\"method\": \"greedy\", \"expand\": "
		         "\"topk\"}, \"sampling\": {\"temperature\": 0, \"top_k\": 0, \"top_p\": 1}, "
		         "\"max_context\": 192, \"prefill_chunk\": 16, \"dtype\": \"fp16\", \"archs\": "
		         "[\"sm_80\"]}", g_tiny_path, bad_method[i]);
		snprintf(want, sizeof(want), "$.draft: expected ngram or ngram:MIN:MAX with 1 <= MIN <= "
		         "MAX <= 16, found \"%s\"", bad_method[i]);
		e3u_spec_refused(spec, want);
	}
}

/* The plan: the pick's word gates the head's levels, the history and the
 * controller's buffers exist, and the loader's bounds proof passes */
static void test_planned(void **state)
{
	(void)state;
	char spec[2048], dir[400];
	sw_err err = {0};
	const hy_case c = {"chain:4", 5, 1, 3, 2, false, NULL, HY_ANY};
	snprintf(dir, sizeof(dir), "%s/plan", g_dir);
	hy_spec(spec, sizeof(spec), &c, "greedy", "topk", 0);
	eu_build(spec, dir, eu_cache_dir(), false);
	rt_manifest *m = rt_manifest_load(dir, &err);
	if (!m)
		fail_msg("%s", err.msg);
	const int go = rt_manifest_buf_find(m, "e3_go");
	assert_true(go >= 0 && rt_manifest_buf_find(m, "ngram_hist") >= 0 &&
	            rt_manifest_buf_find(m, "ctrl") >= 0 && rt_manifest_buf_find(m, "ctrl_cost") >= 0);
	assert_int_equal(m->ctrl != RT_CTRL_NONE, 1);
	int gated = 0;
	for (int i = 0; i < m->n_phases; i++) {
		const bool level = !strncmp(m->phases[i].name, "draft_", 6) &&
		                   strcmp(m->phases[i].name, "draft_ngram");
		assert_int_equal(m->phases[i].gate_buf == go, level);
		if (level) /* draft_d on word d: the head drafts d + 1 levels or more */
			assert_int_equal(m->phases[i].gate_word, atoi(m->phases[i].name + 6));
		gated += level;
	}
	assert_int_equal(gated, 2); /* levels 2: draft_0, draft_1 */
	/* a word per level; the controller's head class (2 T and 2 A words and
	 * its probe interval) and the head's two costs after the lookup's */
	assert_int_equal(m->bufs[go].bytes, 2 * 4);
	assert_int_equal(m->bufs[rt_manifest_buf_find(m, "ctrl")].bytes,
	                 4 * (RT_CTRL_STATS + 2 * 3 * 4 + 2 * 2 + 1));
	assert_int_equal(m->bufs[rt_manifest_buf_find(m, "ctrl_cost")].bytes, 4 * (5 + 2));
	print_message("  %d phases, the head's %d levels gated on e3_go words 0 and 1: every op "
	              "inside its buffers\n", m->n_phases, gated);
	rt_manifest_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_planned),
		cmocka_unit_test(test_greedy),
		cmocka_unit_test(test_exactness),
		cmocka_unit_test(test_seeded),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
