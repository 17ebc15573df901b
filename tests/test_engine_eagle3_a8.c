/* gguf_a8 engines that draft with an EAGLE-3 head (issue 23;
 * gen/drafter_eagle3.c): the target's GEMM weights in its GGUF file's own
 * blocks (here a Q8_0 file of test_engine.c's tiny Llama), the head's GEMM
 * weights (fc, its layer's q/k/v/o/gate/up/down, its LM head over Vd)
 * quantized to Q8_0 at upload and run by the same int8 GEMM. Checked
 * against independent references:
 *  - greedy: the engine's tokens equal the same engine's target-only tokens
 *    (one row a token) and a gguf_a8 n-gram engine's, on native and emulate,
 *    graph = eager; drafts are accepted (tau > 1) on a prompt where the host
 *    fp32 head (runtime/decode/eagle3_draft.c on the dequantized target)
 *    has acceptance;
 *  - the head's drafts, every iteration: the host fp32 head whose GEMM
 *    weights went through Q8_0 (gguf_quantize + gguf_dequantize: the values
 *    the engine's blocks hold) fed the host target's features of the
 *    engine's committed tokens drafts the same chain, or the first
 *    difference is a near-tie of its logits within the int8-input + fp16
 *    bound 8 (2^-8 + 2^-11) max|logit| (test_engine_gguf.c's rule); a head
 *    whose weights are wired wrong drafts other tokens by wide margins;
 *  - n-gram first ("ngram": "1:3"): each iteration the lookup's proposal
 *    (ref_ngram_lookup_info) or that Q8_0 host head's token, both kinds
 *    occurring; tokens = the n-gram engine's = target-only;
 *  - T > 0: chi-square at significance 1e-4 of the first two tokens (RRS
 *    chain, RRSW tree; T 1 and 2) against the target's enumerated distribution
 *    (tu_seq_dist on the dequantized file: the engine's int8 activations
 *    move p by ~2^-8 relative, a chi-square shift of ~N sum p (2^-8)^2 <
 *    0.1 at N = 2000, far below what 1e-4 detects);
 *  - bad input: a head whose ffn_dim is not whole Q8_0 blocks, a block
 *    drafter and a draft model with gguf_a8 (spec refusals naming the
 *    field) and another head's weights at bind (the build's digest). The
 *    same engines on the cuda backend: tests/test_engine_gguf_cuda.c. */
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

#include "block_util.h"
#include "core/fileio.h"
#include "decode/chain.h"
#include "decode/eagle3_draft.h"
#include "device/device.h"
#include "e3_util.h"
#include "eagle3_util.h"
#include "engine/engine.h"
#include "engine_util.h"
#include "formats/gguf.h"
#include "gen/spec.h"
#include "model/eagle3.h"
#include "testutil.h"

static char g_dir[256], g_path[300], g_head[300];
static rt_model *g_t;         /* the tiny target from its Q8_0 file */
static rt_eagle3 *g_h, *g_hq; /* the head; the same with its GEMM weights through Q8_0 */

/* w (n floats, rows whole blocks of 32) := dequantize(quantize_q8_0(w)) */
static void q8_round(float *w, size_t n)
{
	void *b = malloc(n / 32 * 34);
	assert_non_null(b);
	gguf_quantize(GGML_T_Q8_0, w, n, b);
	assert_int_equal(gguf_dequantize(GGML_T_Q8_0, b, n, w), 0);
	free(b);
}

/* The head's GEMM weights through Q8_0 (in place: h owns them). */
static void head_q8_round(rt_eagle3 *h)
{
	const rt_config *c = &h->cfg.head;
	const size_t D = (size_t)c->dim, F = (size_t)c->ffn_dim, TD = (size_t)h->cfg.target_dim;
	const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
	assert_false(h->cfg.tied); /* its own LM head (not the target's embedding) */
	q8_round(h->fc, D * 3 * TD);
	q8_round(h->wq, qd * 2 * D);
	q8_round(h->wk, kvd * 2 * D);
	q8_round(h->wv, kvd * 2 * D);
	q8_round(h->wo, D * qd);
	q8_round(h->w_gate, F * D);
	q8_round(h->w_up, F * D);
	q8_round(h->w_down, D * F);
	q8_round((float *)h->lm_head, (size_t)h->cfg.draft_vocab * D);
}

/* A model saved as a Q8_0 GGUF at path and loaded back (its dequantized
 * weights: the reference's, exactly the engine's blocks). */
static rt_model *q8_model(rt_model *m, const char *path)
{
	sw_err err = {0};
	if (rt_llama_save_gguf(m, path, GGML_T_Q8_0, &err))
		fail_msg("%s: %s", path, err.msg);
	rt_model_free(m);
	rt_model *q = rt_model_load(path, &err);
	if (!q)
		fail_msg("%s", err.msg);
	return q;
}

static int setup(void **state)
{
	(void)state;
	sw_err err = {0};
	eu_work_dir(g_dir, sizeof(g_dir), "test_engine_eagle3_a8");
	snprintf(g_path, sizeof(g_path), "%s/tiny_q8.gguf", g_dir);
	g_t = q8_model(tu_tiny_llama(EU_TINY_VOCAB, 256, 3, 4, 2, 384, 7), g_path);
	snprintf(g_head, sizeof(g_head), "%s/head", g_dir);
	if (e3u_head60(g_head, g_t, 192, 5))
		return -1;
	g_h = rt_eagle3_load(g_head, g_t, &err);
	g_hq = g_h ? rt_eagle3_load(g_head, g_t, &err) : NULL;
	if (!g_hq) {
		print_message("head: %s\n", err.msg);
		return -1;
	}
	head_q8_round(g_hq);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rt_eagle3_free(g_h);
	rt_eagle3_free(g_hq);
	rt_model_free(g_t);
	te3_rmdir(g_head);
	return 0;
}

static void a8_spec(char *buf, size_t n, const char *target, const char *head, const char *tree,
                    const char *verify, const char *expand, double temp, int ctx, int chunk)
{
	e3u_spec(buf, n, "gguf_a8", target, head, tree, verify, expand, temp, ctx, chunk);
}

static uint64_t accepted(const rt_engine_stats *st)
{
	uint64_t a = 0;
	for (int i = 0; i < RT_ENGINE_MAX_DEPTH; i++)
		a += st->pos_accepted[i];
	return a;
}

/* greedy chain:4: tokens = target-only = a gguf_a8 n-gram engine's; the
 * drafts the Q8_0 host head's; accepted where the fp32 host head accepts */
static void test_greedy_chain(void **state)
{
	(void)state;
	enum { P = 37, N = 40, GAMMA = 4 };
	int32_t prompt[P], ref[N], ng[N], host[N], a[N], b[N];
	float margin[N];
	double mx;
	sw_err err = {0};
	char spec[2048], dir[400], ndir[400], what[64];
	eu_tiny_prompt(prompt, P);
	eu_reference(g_t, prompt, P, N, ref, margin, &mx);

	/* the fp32 host head on the same target: drafts it accepts */
	const rt_sampling greedy = {0.0f, 0, 1.0f};
	rt_ctx *tc = rt_ctx_new(g_t, 512, 64, &err);
	assert_non_null(tc);
	rt_drafter *hd = rt_drafter_eagle3(g_h, tc, 8, &err);
	assert_non_null(hd);
	rt_gen_cfg cfg = {.samp = greedy, .gamma = GAMMA, .seed = 1, .max_new = N};
	rt_stats hs;
	assert_int_equal(rt_generate_spec(tc, hd, prompt, P, &cfg, host, &hs, &err), N);
	rt_drafter_free(hd);
	rt_ctx_free(tc);
	assert_memory_equal(host, ref, sizeof(ref));
	assert_true(hs.n_accepted > 0);

	/* the target-only reference engine: gguf_a8 drafting n-grams */
	snprintf(ndir, sizeof(ndir), "%s/ngram", g_dir);
	eu_tiny_spec(spec, sizeof(spec), g_path, "ngram:1:3", "chain:4", "greedy", "topk", 0,
	             "gguf_a8", NULL);
	eu_build(spec, ndir, eu_cache_dir(), false);
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, eu_cache_dir());
	rt_engine *e = eu_bind(ndir, d, g_t, 1);
	rt_engine_stats st;
	assert_int_equal(eu_generate(e, "gguf_a8 n-gram", prompt, P, N, false, ng, &st), N);
	rt_engine_free(e);
	rt_dev_free(d);

	snprintf(dir, sizeof(dir), "%s/chain", g_dir);
	a8_spec(spec, sizeof(spec), g_path, g_head, "chain:4", "greedy", "topk", 0, 192, 16);
	eu_build(spec, dir, eu_cache_dir(), false);
	for (int mode = 0; mode < 2; mode++) {
		d = eu_open_host(mode ? RT_HOST_EMULATE : RT_HOST_NATIVE, eu_cache_dir());
		e = e3u_bind(dir, d, g_t, g_h, 1);
		snprintf(what, sizeof(what), "gguf_a8 + head chain:4 %s", mode ? "emulate" : "native");
		/* every iteration's chain against the Q8_0-weight host head's */
		e3u_drafts cb = {.e = e, .target = g_t, .head = g_hq, .head_name = "Q8_0 host head",
		                 .u = E3U_U_A8, .gamma = GAMMA};
		snprintf(cb.what, sizeof(cb.what), "%s", what);
		e3u_drafts_run(&cb, prompt, P, N, a, &st);
		const uint64_t acc = accepted(&st);
		print_message("  %s: %d iterations (tau %.2f, %llu drafts accepted; the fp32 host "
		              "head %d iterations, %d accepted); drafts: %d of %d nodes the Q8_0 host "
		              "head's, %d chains left at a near-tie (worst margin %.2f of the bound)\n",
		              what, st.n_iters, (double)N / st.n_iters, (unsigned long long)acc,
		              (int)hs.n_iters, (int)hs.n_accepted, cb.same, cb.nodes, cb.ties, cb.worst);
		/* most nodes agree: near-ties are rare, a miswired head differs everywhere */
		assert_true(cb.same * 4 >= cb.nodes * 3);
		assert_true(acc > 0 && st.n_iters < N); /* tau > 1: the head runs */
		for (int i = 0; i < N; i++)
			if (a[i] != ng[i])
				fail_msg("%s: token %d is %d, the gguf_a8 n-gram engine's %d", what, i, a[i],
				         ng[i]);
		eu_check_target_only(e, what, prompt, P, N, a, &st);
		if (!mode) { /* the same iterations op by op: the graph's tokens */
			assert_int_equal(eu_generate(e, "eager", prompt, P, N, true, b, &st), N);
			assert_memory_equal(a, b, sizeof(a));
		}
		rt_engine_free(e);
		rt_dev_free(d);
	}
	/* and the fp32 reference, up to a near-tie (test_engine_gguf.c's rule) */
	print_message("  %d/%d tokens = target-only = the n-gram engine's\n", N, N);
	eu_agree_prefix("gguf_a8 + head chain:4", a, ref, margin, N, 8.0 * E3U_U_A8 * mx);

	/* n-gram first (test_engine_eagle3_ngram.c): each iteration the
	 * lookup's proposal or the Q8_0 host head's token; tokens the same */
	snprintf(dir, sizeof(dir), "%s/ngram_first", g_dir);
	e3u_spec_ex(spec, sizeof(spec), "gguf_a8", g_path, g_head, "chain:4", "greedy", "topk", 0, 192,
	            16, ", \"ngram\": \"1:3\"", "");
	eu_build(spec, dir, eu_cache_dir(), false);
	d = eu_open_host(RT_HOST_NATIVE, eu_cache_dir());
	e = e3u_bind(dir, d, g_t, g_h, 1);
	e3u_drafts cb = {.e = e, .target = g_t, .head = g_hq, .head_name = "Q8_0 host head",
	                 .u = E3U_U_A8, .gamma = 1, .ngram_min = 1, .ngram_max = 3, .n_nodes = 5};
	snprintf(cb.what, sizeof(cb.what), "gguf_a8 n-gram first + head");
	e3u_drafts_run(&cb, prompt, P, N, a, &st);
	print_message("  %s: %d iterations, %d drafted by the n-gram lookup, %d by the head (%d of "
	              "%d nodes as proposed, %d near-ties)\n", cb.what, st.n_iters, cb.by_ngram,
	              cb.by_head, cb.same, cb.nodes, cb.ties);
	assert_true(cb.by_ngram > 0 && cb.by_head > 0 && st.n_iters < N);
	assert_memory_equal(a, ng, sizeof(a));
	eu_check_target_only(e, cb.what, prompt, P, N, a, &st);
	rt_engine_free(e);
	rt_dev_free(d);
}

/* A tree (levels of 2 rows through the head's GEMMs): tokens = target-only,
 * drafts accepted. */
static void test_greedy_tree(void **state)
{
	(void)state;
	enum { P = 37, N = 32 };
	int32_t prompt[P], a[N];
	char spec[2048], dir[400];
	eu_tiny_prompt(prompt, P);
	snprintf(dir, sizeof(dir), "%s/tree", g_dir);
	a8_spec(spec, sizeof(spec), g_path, g_head, "branch:2,2,1", "greedy", "topk", 0, 192, 16);
	eu_build(spec, dir, eu_cache_dir(), false);
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, eu_cache_dir());
	rt_engine *e = e3u_bind(dir, d, g_t, g_h, 1);
	rt_engine_stats st;
	assert_int_equal(eu_generate(e, "gguf_a8 + head branch:2,2,1", prompt, P, N, false, a, &st), N);
	assert_true(accepted(&st) > 0 && st.n_iters < N);
	eu_check_target_only(e, "gguf_a8 + head branch:2,2,1", prompt, P, N, a, &st);
	rt_engine_free(e);
	rt_dev_free(d);
}

/* T > 0: an RRS chain and an RRSW tree at T = 1 and T = 2; a 12-id target
 * (a Q8_0 file), a head over 10 of its ids; chi-square at 1e-4 of the first
 * two tokens of N runs against the enumeration. No top-k: this target's
 * top-5 after id 7 cuts between ids 4 and 2 at logits 2.051 and 1.984, a
 * near-tie within the int8 inputs' 8 (2^-8 + 2^-11) max|logit| = 0.33, so
 * the fp32 enumeration's cut need not be the gguf_a8 target's (the engine
 * sampled a pair the enumeration gives probability 0). */
static void test_exactness(void **state)
{
	(void)state;
	static const e3u_exact_case cfg[] = {
		{"chain:3", "rrs", "sample", NULL},
		{"branch:2,2", "rrsw", "sample-wor", NULL},
	};
	static const rt_engine_sampling set[] = {{1.0f, 0, 1.0f}, {2.0f, 0, 1.0f}};
	char mpath[300];
	snprintf(mpath, sizeof(mpath), "%s/v12_q8.gguf", g_dir);
	rt_model *m = q8_model(tu_tiny_llama(12, 32, 3, 2, 1, 64, 11), mpath);
	const e3u_exact x = {.m = m, .mpath = mpath, .dtype = "gguf_a8", .dir = g_dir,
	                     .cache_dir = eu_cache_dir(), .cases = cfg, .n_cases = 2, .set = set,
	                     .n_set = 2, .runs = 2000, .seed = 7000, .label = "gguf_a8 "};
	e3u_exactness(&x);
	rt_model_free(m);
}

static void test_refused(void **state)
{
	(void)state;
	char spec[2048], dir[300], want[1000];
	sw_err err = {0};
	/* a head whose ffn_dim (w_down's k) is not whole Q8_0 blocks */
	snprintf(dir, sizeof(dir), "%s/head_ffn200", g_dir);
	assert_int_equal(e3u_head60(dir, g_t, 200, 5), 0);
	a8_spec(spec, sizeof(spec), g_path, dir, "chain:4", "greedy", "topk", 0, 192, 16);
	/* the spec's head path, made absolute against the current directory
	 * (gen/spec.c: an engine records where its weights are) */
	char cwd[300];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(want, sizeof(want), "$.dtype: expected an EAGLE-3 head whose dim, ffn_dim, n_heads "
	         "x head_dim and 3 x the target's width (fc) are multiples of 32 (its GEMM weights "
	         "in Q8_0 blocks), found \"gguf_a8\" with the head %s%s%s's 256, 200, 256 and 768",
	         dir[0] == '/' ? "" : cwd, dir[0] == '/' ? "" : "/", dir);
	e3u_spec_refused(spec, want);
	/* the same head in fp16 builds (only gguf_a8 needs the blocks) */
	char *dt = strstr(spec, "\"gguf_a8\"");
	assert_non_null(dt);
	memmove(dt + 6, dt + 9, strlen(dt + 9) + 1);
	memcpy(dt, "\"fp16\"", 6);
	gen_spec *sp = malloc(sizeof(*sp));
	assert_non_null(sp);
	if (gen_spec_parse(spec, strlen(spec), "t.json", NULL, sp, &err))
		fail_msg("fp16 with an ffn 200 head: %s", err.msg);
	free(sp);
	te3_rmdir(dir);

	/* a block drafter and a draft model stay refused with gguf_a8 */
	char bdir[300];
	snprintf(bdir, sizeof(bdir), "%s/block", g_dir);
	mkdir(bdir, 0755);
	tbu_opts bo = tbu_default(g_t);
	assert_int_equal(tbu_write(bdir, g_t, &bo, 3), 0);
	snprintf(spec, sizeof(spec),
	         "{\"name\": \"blk\", \"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": "
	         "\"block\", \"path\": \"%s\"}, \"tree\": \"chain:3\", \"verify\": {\"method\": "
	         "\"greedy\", \"expand\": \"topk\"}, \"max_context\": 192, \"prefill_chunk\": 16, "
	         "\"dtype\": \"gguf_a8\", \"archs\": [\"sm_80\"]}", g_path, bdir);
	e3u_spec_refused(spec, "$.dtype: expected an n-gram, layer-skip or EAGLE-3 draft with \"gguf_a8\" "
	                 "(the target's weights in the file's blocks, an EAGLE-3 head's in Q8_0), found a "
	                 "draft block drafter");
	tbu_rmdir(bdir);
	char model[400];
	snprintf(model, sizeof(model), "model:%s", g_path);
	eu_tiny_spec(spec, sizeof(spec), g_path, model, "chain:3", "greedy", "topk", 0, "gguf_a8",
	             NULL);
	e3u_spec_refused(spec, "$.dtype: expected an n-gram, layer-skip or EAGLE-3 draft with \"gguf_a8\" "
	                 "(the target's weights in the file's blocks, an EAGLE-3 head's in Q8_0), found a "
	                 "draft model");

	/* at bind: another head's weights (same shapes), refused by the digest */
	char edir[400], odir[300];
	snprintf(edir, sizeof(edir), "%s/bind", g_dir);
	a8_spec(spec, sizeof(spec), g_path, g_head, "chain:4", "greedy", "topk", 0, 192, 16);
	eu_build(spec, edir, eu_cache_dir(), false);
	snprintf(odir, sizeof(odir), "%s/other_head", g_dir);
	assert_int_equal(e3u_head60(odir, g_t, 192, 6), 0);
	rt_eagle3 *oh = rt_eagle3_load(odir, g_t, &err);
	assert_non_null(oh);
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, eu_cache_dir());
	rt_engine *e = rt_engine_load(edir, &err);
	assert_non_null(e);
	assert_int_not_equal(cli_engine_bind_eagle3(e, d, g_t, oh, 1, &err), 0);
	print_message("  refused: %s\n", err.msg);
	if (!strstr(err.msg, "draft weights digest"))
		fail_msg("message \"%s\" lacks \"draft weights digest\"", err.msg);
	rt_engine_free(e);
	rt_dev_free(d);
	rt_eagle3_free(oh);
	te3_rmdir(odir);

	/* (the cuda backend runs these engines: tests/test_engine_gguf_cuda.c) */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_greedy_chain),
		cmocka_unit_test(test_greedy_tree),
		cmocka_unit_test(test_exactness),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
