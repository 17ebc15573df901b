/* Engines that draft with an EAGLE-3 head (issue 23; gen/drafter_eagle3.c):
 * spec -> `specwright build` (plan + render, no NVRTC) -> the bounds proof
 * at load -> bound to the host backend with the head's weights from its
 * directory (public checkpoint format, tests/util/eagle3_util.c's writer
 * over the engine tests' tiny target, a draft vocabulary of Vd = 60 ids
 * spread over the target's 111: not a prefix) -> chunked prefill with the
 * taps and the head's committed rows -> per iteration the root row, the
 * head's levels, verify with the node rows, accept, the commits. Checked
 * against independent references:
 *  - greedy: the engine emits the host fp32 target-only greedy tokens and
 *    the host EAGLE-3 decoder's (runtime/decode/eagle3_draft.c, fp32: the
 *    same head on the model/ forward) token for token, in as many
 *    iterations, and every iteration's drafted tree (read from the engine
 *    after it) is the host head's from the same committed sequence: a
 *    chain, a Cartesian tree, a head with its own embedding and no maps,
 *    a one-token prompt; native and emulate; graph = eager. A chain draft
 *    may differ only at an fp16 near-tie of the host head's logits (margin
 *    <= 8 u max|logit|, u = 2^-11: test_engine.c check_greedy's bound),
 *    which is named;
 *  - exactness at T > 0: chi-square at significance 1e-4 of the first two
 *    emitted tokens against the target's enumerated distribution;
 *  - bad input: specs (no head directory, no weights file, a config of
 *    another target, q8_0, prefill_chunk 1, adaptive, the bare string), and
 *    at bind no head, a head of another shape, another head's weights (the
 *    digest the build recorded), each refused by name.
 * The planner's engines also pass the loader's bounds proof (three trees),
 * and plan each method's expansion over Vd or V and q_target where read.
 */
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

#include "decode/chain.h"
#include "decode/eagle3_draft.h"
#include "decode/tree_verify.h"
#include "device/device.h"
#include "e3_util.h"
#include "eagle3_util.h"
#include "engine/engine.h"
#include "engine/manifest.h"
#include "engine_util.h"
#include "formats/gguf.h"
#include "gen/build.h"
#include "gen/render.h"
#include "gen/spec.h"
#include "core/fileio.h"
#include "model/eagle3.h"
#include "testutil.h"

static char g_dir[256], g_tiny_path[300], g_head[300];
static rt_model *g_tiny;
static rt_eagle3 *g_h;

static int setup(void **state)
{
	(void)state;
	return e3u_fixture("test_engine_eagle3", g_dir, sizeof(g_dir), g_tiny_path, sizeof(g_tiny_path), g_head,
	                   sizeof(g_head), &g_tiny, &g_h);
}

static int teardown(void **state)
{
	(void)state;
	e3u_fixture_free(g_tiny, g_h, g_head);
	return 0;
}

static void e3_spec(char *buf, size_t n, const char *head, const char *tree, const char *verify,
                    const char *expand, double temp)
{
	e3u_spec(buf, n, "fp16", g_tiny_path, head, tree, verify, expand, temp, 192, 16);
}

/* The host EAGLE-3 decoder (fp32): a chain (tree NULL) or a static tree. */
static int host_e3(const char *tree, int gamma, const rt_sampling *s, uint64_t seed,
                   const int32_t *prompt, int n_prompt, int max_new, int32_t *out, rt_stats *st)
{
	sw_err err = {0};
	rt_tree t;
	if (tree && rt_tree_parse(tree, NULL, &t, &err))
		fail_msg("%s", err.msg);
	rt_ctx *tc = rt_ctx_new(g_tiny, 512, 64, &err);
	assert_non_null(tc);
	rt_drafter *d = rt_drafter_eagle3(g_h, tc, 8, &err);
	if (!d)
		fail_msg("%s", err.msg);
	rt_gen_cfg cfg = {.samp = *s, .gamma = gamma, .seed = seed, .max_new = max_new};
	int n;
	if (tree) {
		rt_tree_cfg tcfg = {&t, RT_EXPAND_TOPK, RT_VERIFY_GREEDY};
		n = rt_generate_tree_drafter(tc, d, &tcfg, prompt, n_prompt, &cfg, out, st, &err);
	} else {
		n = rt_generate_spec(tc, d, prompt, n_prompt, &cfg, out, st, &err);
	}
	if (n < 0)
		fail_msg("host EAGLE-3 decoding: %s", err.msg);
	rt_drafter_free(d);
	rt_ctx_free(tc);
	return n;
}

/* Every planned EAGLE-3 engine passes the loader's bounds proof. */
static void test_planned_loads(void **state)
{
	(void)state;
	static const char *const trees[] = {"chain:4", "branch:2,2,1", "eagle25"};
	for (int i = 0; i < 3; i++) {
		char spec[2048], dir[400];
		sw_err err = {0};
		snprintf(dir, sizeof(dir), "%s/load%d", g_dir, i);
		e3_spec(spec, sizeof(spec), g_head, trees[i], "greedy", "topk", 0);
		eu_build(spec, dir, eu_cache_dir(), false);
		rt_manifest *m = rt_manifest_load(dir, &err);
		if (!m)
			fail_msg("%s: %s", trees[i], err.msg);
		assert_int_equal(m->draft_kind, RT_ENGINE_DRAFT_EAGLE3);
		assert_true(m->draft_digest[0] != 0);
		print_message("  %-12s %d ops, %d buffers, %d phases: every op inside its buffers\n",
		              trees[i], m->n_ops, m->n_bufs, m->n_phases);
		rt_manifest_free(m);
	}
}

/* A kernel op's integer constant (-1: absent). */
static long long op_param(const rt_manifest *m, const rt_engine_pop *x, const char *name)
{
	const rt_kernel_info *k = x->kernel >= 0 ? &m->kernels[x->kernel] : NULL;
	for (int i = 0; k && i < k->n_params; i++)
		if (!strcmp(k->params[i].name, name))
			return k->params[i].i;
	return -1;
}

/* What each verification method's engine plans per draft level: the
 * expansion over the 60 draft ids through d2t (MAPPED 1) for top-k, the
 * race and SpecHub, over the target's 111 ids for sampling with
 * replacement; q_target (q over the target's ids) exactly where verify
 * reads q (RRS, RRSw, SpecHub; greedy and one-hot read none) or the
 * expansion does, and then verify's q is q_tgt over V (VQ 111). */
static void test_planned_expansion(void **state)
{
	(void)state;
	static const struct {
		const char *tree, *verify, *expand;
		double temp;
		int mapped, q_target;
	} cases[] = {{"branch:2,2,1", "greedy", "topk", 0, 1, 0},
	             {"branch:2,2", "onehot", "topk", 0.8, 1, 0},
	             {"chain:3", "rrs", "sample", 0.8, 0, 1},
	             {"branch:2,2", "rrsw", "sample-wor", 0.8, 1, 1},
	             {"branch:2,2", "spechub", "spechub", 0.8, 1, 1}};
	for (int i = 0; i < 5; i++) {
		char spec[2048], dir[400];
		sw_err err = {0};
		snprintf(dir, sizeof(dir), "%s/plan%d", g_dir, i);
		e3_spec(spec, sizeof(spec), g_head, cases[i].tree, cases[i].verify, cases[i].expand,
		        cases[i].temp);
		eu_build(spec, dir, eu_cache_dir(), false);
		rt_manifest *m = rt_manifest_load(dir, &err);
		if (!m)
			fail_msg("%s: %s", cases[i].verify, err.msg);
		int n_expand = 0, n_qt = 0;
		for (int j = 0; j < m->n_ops; j++) {
			const rt_engine_pop *x = &m->ops[j];
			if (!strcmp(x->op, "tree_expand")) {
				n_expand++;
				assert_int_equal(op_param(m, x, "MAPPED"), cases[i].mapped);
				assert_int_equal(op_param(m, x, "V"), cases[i].mapped ? 60 : 111);
			}
			n_qt += !strcmp(x->op, "q_target");
			if (!strcmp(x->op, "verify"))
				assert_int_equal(op_param(m, x, "VQ"), cases[i].q_target ? 111 : 60);
		}
		print_message("  %-8s %-10s: %d expansions over %s, %d q_target ops\n", cases[i].verify,
		              cases[i].expand, n_expand, cases[i].mapped ? "Vd (MAPPED)" : "V", n_qt);
		assert_true(n_expand > 0);
		assert_int_equal(n_qt, cases[i].q_target ? n_expand : 0);
		rt_manifest_free(m);
	}
}

static void greedy_case(const char *tree, int gamma, int tag)
{
	enum { P = 37, N = 32 };
	int32_t prompt[P], ref[N], host[N], a[N];
	float margin[N];
	eu_tiny_prompt(prompt, P);
	eu_reference(g_tiny, prompt, P, N, ref, margin, NULL);
	const rt_sampling greedy = {0.0f, 0, 1.0f};
	char spec[2048], dir[400], what[96];
	snprintf(dir, sizeof(dir), "%s/greedy%d", g_dir, tag);
	e3_spec(spec, sizeof(spec), g_head, tree, "greedy", "topk", 0);
	eu_build(spec, dir, eu_cache_dir(), false);
	rt_stats hs;
	const bool chain = !strncmp(tree, "chain:", 6);
	assert_int_equal(host_e3(chain ? NULL : tree, gamma, &greedy, 1, prompt, P, N, host, &hs), N);
	assert_memory_equal(host, ref, sizeof(ref)); /* greedy speculation = target-only */
	for (int mode = 0; mode < 2; mode++) {
		rt_dev *d = eu_open_host(mode ? RT_HOST_EMULATE : RT_HOST_NATIVE, eu_cache_dir());
		rt_engine *e = e3u_bind(dir, d, g_tiny, g_h, 1);
		rt_engine_stats st;
		snprintf(what, sizeof(what), "%s %s", tree, mode ? "emulate" : "native");
		/* every iteration's drafts against the host head's */
		sw_err err = {0};
		rt_tree t;
		e3u_drafts cb = {.e = e, .target = g_tiny, .head = g_h, .head_name = "host head",
		                 .u = E3U_U_FP16, .gamma = gamma};
		snprintf(cb.what, sizeof(cb.what), "%s", what);
		if (!chain) {
			if (rt_tree_parse(tree, NULL, &t, &err))
				fail_msg("%s", err.msg);
			cb.t = &t;
		}
		e3u_drafts_run(&cb, prompt, P, N, a, &st);
		print_message("  %s: %d iterations, each drafting the host head's tokens (%d nodes, %d "
		              "fp16 near-ties)\n", what, cb.iters, cb.nodes, cb.ties);
		for (int i = 0; i < N; i++)
			if (a[i] != host[i])
				fail_msg("%s: token %d is %d, the host EAGLE-3 decoder's %d", what, i, a[i], host[i]);
		print_message("  %s: %d/%d tokens = host decoder = target-only; %d iterations (host "
		              "%d)\n", what, N, N, (int)st.n_iters, (int)hs.n_iters);
		assert_int_equal(st.n_iters, hs.n_iters);
		if (!mode) { /* the same iteration run op by op: the graph's tokens */
			int32_t b[N];
			assert_int_equal(eu_generate(e, "eager", prompt, P, N, true, b, &st), N);
			assert_memory_equal(a, b, sizeof(b));
		}
		rt_engine_free(e);
		rt_dev_free(d);
	}
	/* drafts were accepted (the iteration counts compare them too); the
	 * own-embedding head's are compared node by node only */
	if (tag < 2)
		assert_true(hs.n_accepted > 0);
}

/* greedy_case with the head in `dir` (loaded as h) in place of the
 * fixture's, then the fixture's back; h freed and dir removed */
static void greedy_case_head(const char *dir, rt_eagle3 *h, const char *tree, int gamma, int tag)
{
	char saved[300];
	rt_eagle3 *keep = g_h;
	snprintf(saved, sizeof(saved), "%s", g_head);
	snprintf(g_head, sizeof(g_head), "%s", dir);
	g_h = h;
	greedy_case(tree, gamma, tag);
	g_h = keep;
	snprintf(g_head, sizeof(g_head), "%s", saved);
	rt_eagle3_free(h);
	te3_rmdir(dir);
}

static void test_greedy_chain(void **state)
{
	(void)state;
	greedy_case("chain:4", 4, 0);
}

static void test_greedy_tree(void **state)
{
	(void)state;
	greedy_case("branch:2,2,1", 3, 1);
}

/* A head with its own embedding (buffer draft.tok_embd), no maps (Vd = V,
 * draft id = target id: the identity d2t/t2d bound) and vLLM's
 * norm_before_residual (eagle3_in's NORM_BEFORE_RES): the chain again. */
static void test_greedy_own_embedding(void **state)
{
	(void)state;
	char dir[300];
	sw_err err = {0};
	snprintf(dir, sizeof(dir), "%s/head_own", g_dir);
	mkdir(dir, 0755);
	te3_opts o = te3_default(g_tiny);
	o.ffn = 192;
	o.own_embd = true;
	o.no_maps = true;
	assert_int_equal(te3_write(dir, g_tiny, &o, 8), 0);
	/* and vLLM's norm_before_residual (the residual is hidden_norm(f)) */
	char cp[400];
	size_t n;
	snprintf(cp, sizeof(cp), "%s/config.json", dir);
	char *text = sw_read_file(cp, SW_CAP_CONFIG, &n);
	assert_non_null(text);
	assert_true(n > 2 && text[0] == '{');
	FILE *f = fopen(cp, "w");
	assert_non_null(f);
	fprintf(f, "{\"norm_before_residual\": true, %s", text + 1);
	fclose(f);
	free(text);
	rt_eagle3 *h = rt_eagle3_load(dir, g_tiny, &err);
	if (!h)
		fail_msg("%s", err.msg);
	assert_true(h->cfg.own_embd && !h->cfg.has_d2t && h->cfg.norm_before_residual);
	greedy_case_head(dir, h, "chain:4", 4, 2);
}

/* A head whose d2t does not ascend (draft id i -> target id (41 i + 7) mod
 * 111): the engine expands each level over the 60 draft ids through d2t
 * (tree_expand MAPPED 1), the host decoder over the 111 target ids of q
 * scattered through it; the trees again node by node (children in the
 * host's order: ties in q by target id, not by draft id). */
static void test_greedy_shuffled_map(void **state)
{
	(void)state;
	char dir[300];
	sw_err err = {0};
	int32_t used[60];
	snprintf(dir, sizeof(dir), "%s/head_shuf", g_dir);
	mkdir(dir, 0755);
	for (int i = 0; i < 60; i++)
		used[i] = (int32_t)((i * 41 + 7) % 111);
	te3_opts o = te3_default(g_tiny);
	o.draft_vocab = 60;
	o.ffn = 192;
	o.used = used;
	assert_int_equal(te3_write(dir, g_tiny, &o, 9), 0);
	rt_eagle3 *h = rt_eagle3_load(dir, g_tiny, &err);
	if (!h)
		fail_msg("%s", err.msg);
	assert_true(h->cfg.has_d2t && h->d2t[3] < h->d2t[2]); /* not ascending */
	greedy_case_head(dir, h, "branch:2,2,1", 3, 3);
}

/* A one-token prompt: nothing to draft from, so the first iteration runs
 * target-only (engine.c) and the head takes over from the second; tokens =
 * the host decoder's (which drafts nothing at first either) = target-only,
 * in as many iterations, every iteration's drafts the host head's (prompt
 * {17} meets an fp16 near-tie of the head at its fourth token, ids 49 and
 * 62 at 5.2830 and 5.2742, which also flips the iteration count; {8} meets
 * none in 20 tokens). */
static void test_one_token_prompt(void **state)
{
	(void)state;
	enum { N = 20 };
	const int32_t prompt[1] = {8};
	const int NP = 1;
	const rt_sampling greedy = {0.0f, 0, 1.0f};
	int32_t ref[N], host[N], a[N];
	float margin[N];
	eu_reference(g_tiny, prompt, NP, N, ref, margin, NULL);
	rt_stats hs;
	assert_int_equal(host_e3(NULL, 4, &greedy, 1, prompt, NP, N, host, &hs), N);
	assert_memory_equal(host, ref, sizeof(ref));
	char spec[2048], dir[400];
	snprintf(dir, sizeof(dir), "%s/one", g_dir);
	e3_spec(spec, sizeof(spec), g_head, "chain:4", "greedy", "topk", 0);
	eu_build(spec, dir, eu_cache_dir(), false);
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, eu_cache_dir());
	rt_engine *e = e3u_bind(dir, d, g_tiny, g_h, 1);
	rt_engine_stats st;
	for (int rep = 0; rep < 2; rep++) { /* the second after a longer request */
		e3u_drafts cb = {.e = e, .target = g_tiny, .head = g_h, .head_name = "host head",
		                 .u = E3U_U_FP16, .gamma = 4};
		snprintf(cb.what, sizeof(cb.what), "one-token prompt");
		e3u_drafts_run(&cb, prompt, NP, N, a, &st);
		assert_memory_equal(a, host, sizeof(host));
		assert_int_equal(st.n_iters, hs.n_iters);
		print_message("  one-token prompt: %d/%d tokens = host decoder = target-only, %d "
		              "iterations (host %d), every iteration's %d drafts the host head's\n", N, N,
		              (int)st.n_iters, (int)hs.n_iters, cb.nodes);
		int32_t p2[37], o2[8];
		eu_tiny_prompt(p2, 37);
		assert_int_equal(eu_generate(e, "37-token prompt", p2, 37, 8, false, o2, &st), 8);
	}
	rt_engine_free(e);
	rt_dev_free(d);
}

/* Exactness of the engine path at T > 0: a sampled chain (RRS), a sampled
 * tree (RRSW, without replacement) and a top-k tree verified one-hot, at T
 * = 1 and T = 2 with top-k 5; a 12-id target, a head over 10 of its ids
 * (not a prefix: q = 0 on ids 0 and 2). First two tokens of N runs (a fresh
 * seed each) against tu_seq_dist's enumeration, chi-square at significance
 * 1e-4 (tu_chi2_crit); the graph captured once per engine. */
static void test_exactness(void **state)
{
	(void)state;
	static const e3u_exact_case cfg[] = {
		{"chain:3", "rrs", "sample", NULL},
		{"branch:2,2", "rrsw", "sample-wor", NULL},
		{"branch:2,2", "onehot", "topk", NULL},
	};
	static const rt_engine_sampling set[] = {{1.0f, 0, 1.0f}, {2.0f, 5, 1.0f}};
	sw_err err = {0};
	char mpath[300];
	rt_model *m = tu_tiny_llama(12, 32, 3, 2, 1, 48, 11); /* T = 1: 6 at 0.91 */
	assert_non_null(m);
	snprintf(mpath, sizeof(mpath), "%s/v12.gguf", g_dir);
	if (rt_llama_save_gguf(m, mpath, GGML_T_F32, &err))
		fail_msg("%s", err.msg);
	const e3u_exact x = {.m = m, .mpath = mpath, .dtype = "fp16", .dir = g_dir,
	                     .cache_dir = eu_cache_dir(), .cases = cfg, .n_cases = 3, .set = set,
	                     .n_set = 2, .runs = 2000, .seed = 5000, .label = ""};
	e3u_exactness(&x);
	rt_model_free(m);
}

/* Bad input, each refused with the file, the field, what was expected and
 * what was found: specs (the head's directory, its files, what an EAGLE-3
 * engine cannot do), and at bind a head other than the engine's (its
 * shape, its weights: the build's digest), or none. */
static void test_refused(void **state)
{
	(void)state;
	char spec[2048], bad[300], cfg[400];
	e3_spec(spec, sizeof(spec), "/nonexistent", "chain:4", "greedy", "topk", 0);
	e3u_spec_refused(spec, "$.draft.path: expected an EAGLE-3 head directory (config.json, "
	                 "model.safetensors), found \"/nonexistent\"");
	/* a directory with a config and no weights file */
	snprintf(bad, sizeof(bad), "%s/bad_head", g_dir);
	mkdir(bad, 0755);
	snprintf(cfg, sizeof(cfg), "%s/config.json", g_head);
	size_t n;
	char *text = sw_read_file(cfg, SW_CAP_CONFIG, &n);
	assert_non_null(text);
	snprintf(cfg, sizeof(cfg), "%s/config.json", bad);
	FILE *f = fopen(cfg, "w");
	assert_non_null(f);
	fwrite(text, 1, n, f);
	fclose(f);
	e3_spec(spec, sizeof(spec), bad, "chain:4", "greedy", "topk", 0);
	e3u_spec_refused(spec, "bad_head/model.safetensors");
	/* a config for another target: its vocabulary */
	char *v = strstr(text, "\"vocab_size\": 111");
	assert_non_null(v);
	memcpy(v, "\"vocab_size\": 112", 17);
	f = fopen(cfg, "w");
	assert_non_null(f);
	fwrite(text, 1, n, f);
	fclose(f);
	free(text);
	e3u_spec_refused(spec, "bad_head/config.json: $.vocab_size: expected 111 (the vocabulary of the "
	                 "target");
	unlink(cfg);
	rmdir(bad);
	/* what an EAGLE-3 engine cannot do */
	e3_spec(spec, sizeof(spec), g_head, "chain:4", "greedy", "topk", 0);
	char *dt = strstr(spec, "\"fp16\"");
	memcpy(dt, "\"q8_0\"", 6);
	e3u_spec_refused(spec, "$.dtype: expected \"bf16\", \"fp16\" or \"gguf_a8\" with an EAGLE-3 "
	                 "head, found \"q8_0\"");
	e3u_spec(spec, sizeof(spec), "fp16", g_tiny_path, g_head, "chain:4", "greedy", "topk", 0, 192,
	         1);
	e3u_spec_refused(spec, "$.prefill_chunk: expected at least 2 with an EAGLE-3 head");
	e3_spec(spec, sizeof(spec), g_head, "chain:4", "greedy", "topk", 0);
	char adapt[2100];
	snprintf(adapt, sizeof(adapt), "%.*s, \"adaptive\": {\"h\": 0.3}}", (int)strlen(spec) - 1,
	         spec);
	e3u_spec_refused(adapt, "$.adaptive: expected a chain tree drafted by a model");
	char *dm = strstr(spec, "{\"method\": \"eagle3\"");
	char str[2100];
	snprintf(str, sizeof(str), "%.*s\"eagle3\"%s", (int)(dm - spec), spec,
	         strstr(dm, "}") + 1);
	e3u_spec_refused(str, "$.draft: expected {\"method\": \"eagle3\", \"path\": DIR}");

	/* at bind: no head, a head of another shape, another head's weights */
	char dir[400];
	snprintf(dir, sizeof(dir), "%s/greedy0", g_dir);
	e3_spec(spec, sizeof(spec), g_head, "chain:4", "greedy", "topk", 0);
	eu_build(spec, dir, eu_cache_dir(), false);
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, eu_cache_dir());
	sw_err err = {0};
	rt_engine_weights tw;
	rt_engine *e = rt_engine_load(dir, &err);
	assert_non_null(e);
	assert_int_equal(cli_engine_weights(&tw, g_tiny, "target", &err), 0);
	assert_int_not_equal(rt_engine_bind(e, d, &tw, NULL, 1, &err), 0);
	print_message("  refused: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "the engine drafts with an EAGLE-3 head: give its weights"));
	rt_engine_free(e);
	static const struct {
		int ffn;
		uint64_t seed;
		const char *want;
	} other[] = {{64, 5, "draft ffn_dim 64, engine"}, {192, 6, "draft weights digest"}};
	for (int i = 0; i < 2; i++) {
		char odir[300];
		snprintf(odir, sizeof(odir), "%s/other_head%d", g_dir, i);
		assert_int_equal(e3u_head60(odir, g_tiny, other[i].ffn, other[i].seed), 0);
		rt_eagle3 *h = rt_eagle3_load(odir, g_tiny, &err);
		assert_non_null(h);
		e = rt_engine_load(dir, &err);
		assert_non_null(e);
		assert_int_not_equal(cli_engine_bind_eagle3(e, d, g_tiny, h, 1, &err), 0);
		print_message("  refused: %s\n", err.msg);
		if (!strstr(err.msg, other[i].want))
			fail_msg("message \"%s\" lacks \"%s\"", err.msg, other[i].want);
		rt_engine_free(e);
		rt_eagle3_free(h);
		te3_rmdir(odir);
	}
	rt_dev_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_planned_loads),
		cmocka_unit_test(test_planned_expansion),
		cmocka_unit_test(test_greedy_chain),
		cmocka_unit_test(test_greedy_tree),
		cmocka_unit_test(test_greedy_own_embedding),
		cmocka_unit_test(test_greedy_shuffled_map),
		cmocka_unit_test(test_one_token_prompt),
		cmocka_unit_test(test_exactness),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
