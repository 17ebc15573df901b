/* A draft model whose vocabulary is a prefix of the target's (Qwen2-0.5B's
 * 151936 ids under Qwen2-7B's 152064, here a tiny pair: V and V - 3). The
 * rule: q = 0 beyond the draft's vocabulary, and an id there the target
 * commits (padding: rare, but possible at T > 0) is embedded by the draft as
 * a zero row, in the engine (embedding16's N_IDS), the host decoder
 * (rt_model_pad_vocab) and the cuda backend (the same kernel). Checked
 * against independent references:
 *  - the host view equals the same draft with its tables padded by zero rows
 *    (a different model file, the ordinary forward), logits -inf beyond;
 *  - spec and plan accept the prefix, refuse a larger draft vocabulary and a
 *    tokenizer that differs (model, a token, more tokens), naming the file,
 *    field, expected and found; the plan's draft embedding reads V - 3 rows
 *    for V ids; a tampered engine.json with a larger draft is refused;
 *  - greedy engines (host-native and host-emulate, chain and tree) emit the
 *    fp32 target-only tokens (near-ties bounded by the dtype as in
 *    test_engine.c), as does the host decoder with the padded draft, on a
 *    target built to commit padding ids; the engine's draft logits after a
 *    context full of padding ids equal the host padded draft's, within the
 *    fp16 bound (a different rule moves them by O(1)); the same for a
 *    layer-skip draft head over VD ids (@VD), which embeds with the
 *    target's whole table;
 *  - chi-square at 1e-4 of the engine path (greedy, RRS, RRSW, SpecHub,
 *    one-hot) against the target distribution enumerated exactly, with the
 *    prompt ending in a padding id and the padding ids carrying real mass. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/fileio.h"
#include "decode/chain.h"
#include "decode/sampler.h"
#include "core/tree.h"
#include "decode/tree_verify.h"
#include "engine_util.h"
#include "formats/gguf.h"
#include "gen/plan.h"
#include "gen/render.h"
#include "gen/jit/emu_build.h"
#include "gen/spec.h"
#include "model/model_gguf.h"
#include "testutil.h"

#define V 111      /* the target's vocabulary */
#define VD (V - 3) /* the draft's: ids V - 3 .. V - 1 are the target's padding */

static char g_dir[256];
static char g_target[320], g_draft[320], g_draft_zpad[320], g_draft_full[320];
static rt_model *g_t;

static const char *cache_dir(void)
{
	static char c[300];
	snprintf(c, sizeof(c), "%s/cache", g_dir);
	return c;
}

static void must(int rc, const sw_err *err, const char *what)
{
	if (rc)
		fail_msg("%s: %s", what, err->msg);
}

/* The tiny target, its padding ids made to win: the LM head rows of ids
 * V-3..V-1 are 1.1 x those of the three tokens the unchanged model emits
 * most often from the test prompt, so wherever one of those would win (with
 * a positive logit) its padding twin wins instead. Their embeddings stay the
 * target's own random rows. */
static rt_model *padded_target(const int32_t *prompt, int P)
{
	rt_model *m = tu_tiny_llama(V, 256, 3, 4, 2, 384, 7);
	assert_non_null(m);
	int32_t out[64];
	float margin[64];
	int freq[V] = {0}, top[3] = {-1, -1, -1};
	eu_reference(m, prompt, P, 48, out, margin, NULL);
	for (int i = 0; i < 48; i++)
		freq[out[i]]++;
	for (int k = 0; k < 3; k++)
		for (int v = 0; v < VD; v++)
			if ((top[k] < 0 || freq[v] > freq[top[k]]) && v != top[0] && v != top[1])
				top[k] = v;
	const int D = m->cfg.dim;
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < D; i++)
			m->w.lm_head[(size_t)(VD + k) * D + i] = 1.1f * m->w.lm_head[(size_t)top[k] * D + i];
	return m;
}

/* The test prompt: eu_tiny_prompt's, with padding ids inside it (the
 * draft's prefill) and at its end (the root of the first tree). */
static void prompt_with_padding(int32_t *p, int P)
{
	eu_tiny_prompt(p, P);
	p[4] = V - 1;
	p[9] = V - 2;
	p[P - 1] = V - 3;
}

static int setup(void **state)
{
	sw_err err = {0};
	int32_t prompt[19];
	eu_work_dir(g_dir, sizeof(g_dir), "test_vocab_prefix");
	prompt_with_padding(prompt, 19);
	g_t = padded_target(prompt, 19);
	snprintf(g_target, sizeof(g_target), "%s/target.gguf", g_dir);
	snprintf(g_draft_full, sizeof(g_draft_full), "%s/draft_full.gguf", g_dir);
	snprintf(g_draft, sizeof(g_draft), "%s/draft.gguf", g_dir);
	snprintf(g_draft_zpad, sizeof(g_draft_zpad), "%s/draft_zpad.gguf", g_dir);
	/* the draft: the target's first layer, its tables cut to VD rows */
	const int layer0 = 0;
	rt_model *ls = rt_model_layerskip(g_t, &layer0, 1, 0, &err);
	if (!ls || rt_llama_save_gguf(g_t, g_target, GGML_T_F32, &err) ||
	    rt_llama_save_gguf(ls, g_draft_full, GGML_T_F32, &err) ||
	    tu_gguf_revocab(g_draft_full, g_draft, VD, NULL, 0, NULL, &err) ||
	    tu_gguf_revocab(g_draft, g_draft_zpad, V, NULL, 0, NULL, &err)) {
		print_error("setup: %s\n", err.msg);
		return -1;
	}
	rt_model_free(ls);
	return 0;
}

static int teardown(void **state)
{
	rt_model_free(g_t);
	return 0;
}

/* --- the host decoder's rule ---------------------------------------------- */

/* rt_model_pad_vocab against the same draft with zero rows appended to its
 * embedding and LM head (tu_gguf_revocab): over a block holding every
 * padding id, its logits below VD equal that model's bit for bit (the same
 * ops on the same rows), and are -inf beyond (q = 0) where that model has
 * the zero rows' logit 0. */
static void test_host_view(void **state)
{
	sw_err err = {0};
	rt_model *d = rt_model_load(g_draft, &err), *z = rt_model_load(g_draft_zpad, &err);
	assert_non_null(d);
	assert_non_null(z);
	assert_int_equal(d->cfg.vocab, VD);
	assert_int_equal(z->cfg.vocab, V);
	rt_model *p = rt_model_pad_vocab(d, V, true, &err);
	must(!p, &err, "pad");
	assert_int_equal(p->cfg.vocab, V);
	const int32_t tok[9] = {5, V - 1, 17, V - 2, V - 3, 3, V - 1, VD - 1, V - 3};
	const int T = 9;
	float *a = malloc(sizeof(*a) * T * V), *b = malloc(sizeof(*b) * T * V);
	int32_t pos[9];
	for (int i = 0; i < T; i++)
		pos[i] = i;
	rt_ctx *ca = rt_ctx_new(p, 32, 16, &err), *cb = rt_ctx_new(z, 32, 16, &err);
	assert_non_null(ca);
	assert_non_null(cb);
	must(rt_ctx_eval(ca, tok, pos, T, NULL, a, NULL, &err), &err, "padded view");
	must(rt_ctx_eval(cb, tok, pos, T, NULL, b, NULL, &err), &err, "zero-row model");
	for (int t = 0; t < T; t++)
		for (int v = 0; v < V; v++) {
			float x = a[t * V + v], y = b[t * V + v];
			if (v < VD ? memcmp(&x, &y, 4) != 0 : !(isinf(x) && x < 0))
				fail_msg("row %d (token %d) id %d: view %g, zero-row model %g", t, tok[t], v,
				         (double)x, (double)y);
		}
	/* an id past the target's vocabulary is still an error */
	int32_t badtok = V;
	assert_int_not_equal(rt_ctx_eval(ca, &badtok, pos, 1, NULL, a, NULL, &err), 0);
	print_message("  %d rows with padding ids: view == zero-row model below %d, -inf beyond; %s\n",
	              T, VD, err.msg);
	/* a padded view is not a file to derive from, nor padded twice */
	char path[400];
	snprintf(path, sizeof(path), "%s/nope.gguf", g_dir);
	assert_int_not_equal(rt_llama_save_gguf(p, path, GGML_T_F32, &err), 0);
	assert_null(rt_model_pad_vocab(p, V + 5, false, &err));
	rt_ctx_free(ca);
	rt_ctx_free(cb);
	free(a);
	free(b);
	rt_model_free(p); /* frees d with it */
	rt_model_free(z);
}

/* --- spec, plan, tokenizers ----------------------------------------------- */

static int spec_parse(const char *target, const char *draft, gen_spec *s, sw_err *err)
{
	char text[2048];
	snprintf(text, sizeof(text),
	         "{\"target\": {\"path\": \"%s\"}, \"draft\": \"model:%s\", \"tree\": \"chain:4\", "
	         "\"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, \"max_context\": 128, "
	         "\"dtype\": \"fp16\"}", target, draft);
	return gen_spec_parse(text, strlen(text), "vp.json", NULL, s, err);
}

static void expect_refused(const char *target, const char *draft, const char *want1,
                           const char *want2)
{
	gen_spec *s = malloc(sizeof(*s));
	sw_err err = {0};
	assert_non_null(s);
	if (!spec_parse(target, draft, s, &err))
		fail_msg("spec accepted draft %s (want \"%s\")", draft, want1);
	print_message("  refused: %s\n", err.msg);
	if (!strstr(err.msg, want1) || !strstr(err.msg, want2) || !strstr(err.msg, "vp.json"))
		fail_msg("message \"%s\" lacks \"%s\", \"%s\" or the spec's name", err.msg, want1, want2);
	/* the host decoder's own check says the same */
	rt_model *tm = rt_model_load(target, &err), *dm = rt_model_load(draft, &err);
	assert_non_null(tm);
	assert_non_null(dm);
	assert_int_not_equal(rt_draft_vocab_check(target, tm->cfg.vocab, draft, dm->cfg.vocab, &err), 0);
	if (!strstr(err.msg, want1) && !strstr(err.msg, "expected at most the target's"))
		fail_msg("rt_draft_vocab_check: \"%s\"", err.msg);
	rt_model_free(tm);
	rt_model_free(dm);
	free(s);
}

/* The plan's embedding kernels: "n_rows<R>_n_ids<I>" of the target's and
 * the draft's forwards. */
static void check_plan_embeddings(const gen_spec *s)
{
	gen_plan *p = malloc(sizeof(*p));
	sw_err err = {0};
	assert_non_null(p);
	must(gen_plan_build(s, p, &err), &err, "plan");
	int seen_t = 0, seen_d = 0;
	for (int i = 0; i < p->n_kernels; i++) {
		if (strncmp(p->kernels[i].uri, "embedding16_", 12))
			continue;
		long long rows = -1, ids = -1;
		for (int k = 0; k < p->kernels[i].n_params; k++) {
			if (!strcmp(p->kernels[i].params[k].name, "N_ROWS"))
				rows = p->kernels[i].params[k].i;
			if (!strcmp(p->kernels[i].params[k].name, "N_IDS"))
				ids = p->kernels[i].params[k].i;
		}
		assert_int_equal(ids, V);
		seen_t += rows == V;
		seen_d += rows == VD;
		print_message("  plan kernel %s\n", p->kernels[i].uri);
	}
	assert_int_equal(seen_t, 1);
	assert_int_equal(seen_d, 1);
	gen_plan_free(p);
	free(p);
}

static void test_spec_tokenizers(void **state)
{
	sw_err err = {0};
	char tt[400], dt[400], dbig[400], dbad[400], dmod[400], dmore[400];
	const char *toks[V + 2];
	char store[V + 2][16];
	for (int i = 0; i < V + 2; i++) {
		snprintf(store[i], sizeof(store[i]), "t%d", i);
		toks[i] = store[i];
	}
	snprintf(tt, sizeof(tt), "%s/target_tok.gguf", g_dir);
	snprintf(dt, sizeof(dt), "%s/draft_tok.gguf", g_dir);
	snprintf(dbig, sizeof(dbig), "%s/draft_big.gguf", g_dir);
	snprintf(dbad, sizeof(dbad), "%s/draft_bad.gguf", g_dir);
	snprintf(dmod, sizeof(dmod), "%s/draft_model.gguf", g_dir);
	snprintf(dmore, sizeof(dmore), "%s/draft_more.gguf", g_dir);
	must(tu_gguf_revocab(g_target, tt, V, toks, V, "gpt2", &err), &err, tt);
	must(tu_gguf_revocab(g_draft_full, dt, VD, toks, VD, "gpt2", &err), &err, dt);
	must(tu_gguf_revocab(g_draft_full, dbig, V + 1, toks, V + 1, "gpt2", &err), &err, dbig);
	must(tu_gguf_revocab(g_draft_full, dmod, VD, toks, VD, "llama", &err), &err, dmod);
	must(tu_gguf_revocab(g_draft_full, dmore, VD, toks, V + 2, "gpt2", &err), &err, dmore);
	toks[7] = "x7";
	must(tu_gguf_revocab(g_draft_full, dbad, VD, toks, VD, "gpt2", &err), &err, dbad);

	gen_spec *s = malloc(sizeof(*s));
	assert_non_null(s);
	/* the prefix, with its tokens, and without a tokenizer (a derived draft) */
	must(spec_parse(tt, dt, s, &err), &err, "prefix with tokens");
	assert_int_equal(s->draft_vocab, VD);
	assert_int_equal(s->target.cfg.vocab, V);
	check_plan_embeddings(s);
	must(spec_parse(tt, g_draft, s, &err), &err, "prefix without a tokenizer");
	must(spec_parse(g_target, g_draft_full, s, &err), &err, "the target's own vocabulary");
	assert_int_equal(s->draft_vocab, V);
	must(rt_draft_vocab_check(tt, V, dt, VD, &err), &err, "rt_draft_vocab_check");
	free(s);

	expect_refused(tt, dbig, "$.draft: expected a draft vocabulary at most the target's",
	               "112 (target 111)");
	expect_refused(tt, dbad, "tokenizer.ggml.tokens[7]: expected \"t7\"", "found \"x7\"");
	expect_refused(tt, dmod, "tokenizer.ggml.model: expected \"gpt2\"", "found \"llama\"");
	expect_refused(tt, dmore, "tokenizer.ggml.tokens: expected at most 111 tokens", "found 113");
	/* each names the draft file */
	assert_int_not_equal(rt_draft_vocab_check(tt, V, dbad, VD, &err), 0);
	assert_non_null(strstr(err.msg, dbad));
}

/* An engine.json whose draft shape claims more ids than the target's. */
static void test_manifest_refuses_larger_draft(void **state)
{
	char spec[2048], dir[400], mp[500], dm[400];
	sw_err err = {0};
	snprintf(dir, sizeof(dir), "%s/tamper", g_dir);
	snprintf(dm, sizeof(dm), "model:%s", g_draft);
	eu_tiny_spec(spec, sizeof(spec), g_target, dm, "chain:3", "greedy", "topk", 0, "fp16", NULL);
	eu_build(spec, dir, cache_dir(), false);
	snprintf(mp, sizeof(mp), "%s/engine.json", dir);
	size_t n = 0;
	char *text = sw_read_file(mp, SW_CAP_IMAGE, &n);
	assert_non_null(text);
	char *sh = strstr(text, "\"shapes\"");
	assert_non_null(sh);
	char *dr = strstr(sh, "\"draft\"");
	assert_non_null(dr);
	char *vv = strstr(dr, "\"vocab\": 108");
	assert_non_null(vv);
	memcpy(vv, "\"vocab\": 118", 12);
	FILE *f = fopen(mp, "w");
	assert_non_null(f);
	fwrite(text, 1, n, f);
	fclose(f);
	free(text);
	rt_engine *e = rt_engine_load(dir, &err);
	assert_null(e);
	print_message("  %s\n", err.msg);
	assert_non_null(strstr(err.msg, "$.shapes.draft.vocab: expected at most the target's 111"));
	assert_non_null(strstr(err.msg, "found 118"));
}

/* --- the engine against the host decoder ---------------------------------- */

typedef struct batches {
	int n, last_first, count;
} batches;

static int on_batch(void *user, const int32_t *tok, int n)
{
	batches *b = user;
	b->last_first = b->count;
	b->count += n;
	return 0;
}

/* The engine's draft logits of its last iteration against the host padded
 * draft's after the same context: rows 0..depth-1 of a chain (the root
 * after the committed context, then each drafted prefix). */
static void check_draft_logits(rt_engine *e, const rt_model *view, const int32_t *ctx, int n_ctx,
                               int depth, const char *what)
{
	sw_err err = {0};
	float *got = malloc(sizeof(*got) * (size_t)depth * VD);
	int32_t tree[8];
	assert_non_null(got);
	must(e->dev->ops->download(e->dev, got, rt_engine_buf_addr(e, "draft_logits"),
	                           sizeof(*got) * (size_t)depth * VD, &err), &err, "download");
	must(e->dev->ops->download(e->dev, tree, rt_engine_buf_addr(e, "tree_tokens"),
	                           sizeof(*tree) * (size_t)(depth + 1), &err), &err, "download");
	assert_int_equal(tree[0], ctx[n_ctx - 1]); /* the root: the last committed token */
	rt_ctx *c = rt_ctx_new(view, n_ctx + depth + 4, n_ctx + depth + 4, &err);
	float *lg = malloc(sizeof(*lg) * V);
	assert_non_null(c);
	assert_non_null(lg);
	must(rt_ctx_feed(c, ctx, n_ctx, lg, &err), &err, "host draft");
	double mx = 0, worst = 0;
	for (int r = 0; r < depth; r++) {
		if (r > 0)
			must(rt_ctx_feed(c, &tree[r], 1, lg, &err), &err, "host draft");
		for (int v = 0; v < VD; v++) {
			mx = fmax(mx, fabs(lg[v]));
			worst = fmax(worst, fabs(lg[v] - got[(size_t)r * VD + v]));
		}
		for (int v = VD; v < V; v++)
			assert_true(isinf(lg[v]) && lg[v] < 0);
	}
	/* fp16: every rounding on the way is <= 2^-11 relative; through the
	 * normalised layers a logit moves by a small multiple of u max|logit|
	 * (test_engine.c measures ~1.2); 8 u max|logit| bounds it, far below
	 * the O(1) a different embedding of the padding ids would make */
	const double bound = 8.0 * ldexp(1.0, -11) * mx;
	int npad = 0;
	for (int i = 0; i < n_ctx; i++)
		npad += ctx[i] >= VD;
	print_message("  %s: draft logits after %d tokens (%d padding ids, root %d), %d rows: max "
	              "|engine - host| %.5f, bound %.5f\n", what, n_ctx, npad, ctx[n_ctx - 1], depth,
	              worst, bound);
	if (!(worst <= bound))
		fail_msg("%s: the engine's draft logits differ from the host draft's by %g > %g",
		         what, worst, bound);
	free(lg);
	free(got);
	rt_ctx_free(c);
}

static void test_engine_greedy(void **state)
{
	enum { P = 19, N = 40 };
	/* the separate draft on a chain and a tree; and a layer-skip draft head
	 * over the same VD ids, whose embedding is the target's whole table
	 * (before N_IDS its forward read N_ROWS = VD and left the rows of the
	 * ids beyond untouched, away from the host decoder) */
	static const char *const trees[] = {"chain:4", "eagle25", "chain:4"};
	sw_err err = {0};
	int32_t prompt[P], ref[N + 8];
	float margin[N + 8];
	double mx;
	prompt_with_padding(prompt, P);
	eu_reference(g_t, prompt, P, N, ref, margin, &mx);
	int npad = 0;
	for (int i = 0; i < N; i++)
		npad += ref[i] >= VD;
	print_message("  the target commits %d padding ids in %d greedy tokens\n", npad, N);
	assert_true(npad >= 2);
	const double bound = 8.0 * ldexp(1.0, -11) * mx;
	rt_model *dm = rt_model_load(g_draft, &err);
	assert_non_null(dm);
	rt_model *pad = rt_model_pad_vocab(dm, V, false, &err);
	assert_non_null(pad);
	const int layer0 = 0;
	rt_model *ls = rt_model_layerskip(g_t, &layer0, 1, VD, &err);
	assert_non_null(ls);
	for (int t = 0; t < 3; t++) {
		char spec[2048], dir[400], dmeth[400], what[96];
		const bool skip = t == 2;
		const rt_model *view = skip ? ls : pad;
		snprintf(dir, sizeof(dir), "%s/greedy%d", g_dir, t);
		if (skip)
			snprintf(dmeth, sizeof(dmeth), "layerskip:1@%d", VD); /* layer 0 */
		else
			snprintf(dmeth, sizeof(dmeth), "model:%s", g_draft);
		eu_tiny_spec(spec, sizeof(spec), g_target, dmeth, trees[t], "greedy", "topk", 0, "fp16",
		             NULL);
		eu_build(spec, dir, cache_dir(), false);

		/* the host decoder with the padded draft, same tree */
		rt_tree tree;
		must(rt_tree_parse(trees[t], NULL, &tree, &err), &err, "tree");
		rt_ctx *tc = rt_ctx_new(g_t, 192, 64, &err);
		assert_non_null(tc);
		rt_tree_cfg tcfg = {.tree = &tree, .rule = RT_EXPAND_TOPK, .method = RT_VERIFY_GREEDY};
		rt_gen_cfg cfg = {.samp = {0.0f, 0, 1.0f}, .gamma = 1, .seed = 1, .max_new = N};
		int32_t host[N + 8];
		rt_stats hst;
		memset(&hst, 0, sizeof(hst));
		assert_int_equal(rt_generate_tree(tc, view, &tcfg, prompt, P, &cfg, host, &hst, &err), N);
		rt_ctx_free(tc);
		snprintf(what, sizeof(what), "host decoder, %s%s", trees[t], skip ? " layerskip" : "");
		assert_int_equal(eu_agree_prefix(what, host, ref, margin, N, 0.0), N);
		print_message("  %-34s %llu iterations, %llu of %llu drafts accepted\n", "",
		              (unsigned long long)hst.n_iters, (unsigned long long)hst.n_accepted,
		              (unsigned long long)hst.n_drafted);

		for (int mode = RT_HOST_NATIVE; mode <= RT_HOST_EMULATE; mode++) {
			const rt_dev_opts o = {.cache_dir = cache_dir(), .emu_compile = gen_emu_module_build};
			rt_dev *d = rt_dev_host_new(mode, &o, &err);
			assert_non_null(d);
			rt_engine *e = rt_engine_load(dir, &err);
			assert_non_null(e);
			must(cli_engine_bind(e, d, g_t, skip ? NULL : dm, 1, &err), &err, "bind");
			int32_t out[N + 64];
			batches b = {0};
			rt_engine_stats st;
			rt_engine_run run = {.prompt = prompt, .n_prompt = P, .max_new = N, .eos = -1,
			                     .on_tokens = on_batch, .cb_user = &b};
			int n = rt_engine_generate(e, &run, out, &st, &err);
			must(n < 0, &err, "generate");
			assert_true(n >= N);
			snprintf(what, sizeof(what), "engine %s%s, %.40s", trees[t], skip ? " layerskip" : "",
			         d->desc);
			int k = eu_agree_prefix(what, out, ref, margin, N, bound);
			int kpad = 0;
			for (int i = 0; i < k; i++)
				kpad += out[i] >= VD;
			print_message("  %-34s %d iterations (tau %.2f), %d padding ids committed\n", "",
			              st.n_iters, (double)n / st.n_iters, kpad);
			assert_true(kpad >= 2);
			if (t != 1 && k == N) {
				/* the draft's input side directly: its last tree's logits */
				int32_t ctx[P + N + 64];
				memcpy(ctx, prompt, sizeof(*prompt) * P);
				memcpy(ctx + P, out, sizeof(*out) * (size_t)b.last_first);
				check_draft_logits(e, view, ctx, P + b.last_first, 4, what);
			}
			rt_engine_free(e);
			rt_dev_free(d);
		}
	}
	rt_model_free(ls);
	rt_model_free(pad);
	rt_model_free(dm);
}

/* --- exactness of the engine path ----------------------------------------- */

/* The first two emitted tokens of N runs (a fresh seed each) against the
 * target's exact two-token distribution (tu_seq_dist), chi-square at 1e-4;
 * temperature 0 on every engine must give the enumeration's one sequence.
 * V = 12 ids, the draft the target itself cut to 9. Two prompts: one ending
 * in padding id 10 (the first tree's root is a zero row on the draft's
 * side; a padding first token makes the second iteration's root one too;
 * the draft's q after a zero row is far from p, so it tests rejection and
 * the residual), and one with 10 inside it (the draft's prefill), where the
 * draft is often accepted; at the spec's temperature 1 and at 2.5 set per
 * request. */
static void test_engine_exactness(void **state)
{
	enum { V12 = 12, VD12 = 9, K = V12 * V12, N = 2000, N_GREEDY = 200, N_CASES = 4 };
	static const char *const cfg[][5] = {
		/* tree, verify, expand, extra, temperature */
		{"chain:3", "greedy", "topk", "", "0"},
		{"chain:3", "rrs", "sample", ", \"adaptive\": {\"h\": 0.5, \"min\": 1}", "1"},
		{"biseq8", "rrsw", "sample-wor", "", "1"},
		{"biseq8", "spechub", "spechub", "", "1"},
		{"kary:3:2", "onehot", "topk", "", "1"},
	};
	static const int32_t prompts[2][3] = {{3, 7, 10}, {3, 10, 7}};
	static const struct {
		int prompt;
		rt_engine_sampling samp;
	} cases[N_CASES] = {{0, {1.0f, 0, 1.0f}}, {1, {1.0f, 0, 1.0f}}, {0, {0.0f, 0, 1.0f}},
	                    {1, {0.0f, 0, 1.0f}}};
	sw_err err = {0};
	char tpath[400], dpath[400];
	rt_model *m = tu_tiny_llama(V12, 128, 2, 2, 1, 160, 11);
	assert_non_null(m);
	snprintf(tpath, sizeof(tpath), "%s/v12.gguf", g_dir);
	snprintf(dpath, sizeof(dpath), "%s/v12_v9.gguf", g_dir);
	must(rt_llama_save_gguf(m, tpath, GGML_T_F32, &err) ||
	     tu_gguf_revocab(tpath, dpath, VD12, NULL, 0, NULL, &err), &err, "v12 files");
	rt_model *dm = rt_model_load(dpath, &err);
	assert_non_null(dm);
	double *probs = malloc(sizeof(*probs) * K * N_CASES);
	uint64_t *counts = malloc(sizeof(*counts) * K);
	assert_non_null(probs);
	assert_non_null(counts);
	for (int k = 0; k < N_CASES; k++) {
		const rt_engine_sampling *c = &cases[k].samp;
		rt_sampling samp = {c->temperature, c->top_k, c->top_p};
		tu_seq_dist(m, prompts[cases[k].prompt], 3, 2, &samp, probs + (size_t)k * K);
		double pad = 0;
		for (int i = 0; i < K; i++)
			pad += (i / V12 >= VD12 || i % V12 >= VD12) ? probs[(size_t)k * K + i] : 0.0;
		print_message("  prompt %d, T %.1f: P(a padding id among the two tokens) = %.4f\n",
		              cases[k].prompt, (double)c->temperature, pad);
		if (c->temperature > 0 && cases[k].prompt == 0)
			assert_true(pad > 0.1); /* padding ids are committed, not only prompted */
	}
	for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
		char spec[2048], dir[400];
		snprintf(dir, sizeof(dir), "%s/exact%zu", g_dir, c);
		snprintf(spec, sizeof(spec),
		         "{\"name\": \"v12\", \"target\": {\"path\": \"%s\"}, \"draft\": \"model:%s\", "
		         "\"tree\": \"%s\", \"verify\": {\"method\": \"%s\", \"expand\": \"%s\"}, "
		         "\"sampling\": {\"temperature\": %s, \"top_k\": 0, \"top_p\": 1}, "
		         "\"max_context\": 64, \"prefill_chunk\": 8, \"dtype\": \"fp16\", "
		         "\"archs\": [\"sm_80\"]%s}",
		         tpath, dpath, cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][4], cfg[c][3]);
		eu_build(spec, dir, cache_dir(), false);
		rt_engine *e = rt_engine_load(dir, &err);
		assert_non_null(e);
		rt_dev *d = rt_dev_host_new(RT_HOST_NATIVE, &(rt_dev_opts){0}, &err);
		assert_non_null(d);
		must(cli_engine_bind(e, d, m, dm, 1, &err), &err, "bind");
		const bool greedy_engine = !strcmp(cfg[c][1], "greedy");
		uint64_t seed = 1000;
		for (int k = 0; k < N_CASES; k++) {
			const double *pk = probs + (size_t)k * K;
			const rt_engine_sampling *samp = &cases[k].samp;
			const bool greedy = samp->temperature <= 0.0f;
			if (greedy_engine && !greedy)
				continue;
			char what[96];
			eu_pairs pr = {.prompt = prompts[cases[k].prompt], .n_prompt = 3, .samp = samp,
			               .runs = greedy ? N_GREEDY : N, .vocab = V12, .pad_from = VD12,
			               .seed = seed, .counts = counts};
			snprintf(what, sizeof(what), "%-8s %-8s %-10s prompt %d", cfg[c][0], cfg[c][1],
			         cfg[c][2], cases[k].prompt);
			eu_count_pairs(e, &pr, what);
			seed = pr.seed;
			if (greedy) {
				eu_check_point_mass(pk, counts, K, V12, pr.runs, what);
				continue;
			}
			int df;
			double chi = tu_chi2(counts, pk, K, (uint64_t)pr.runs, &df),
			       crit = tu_chi2_crit(df, 1e-4);
			print_message("  %s%s T %.1f: chi2 %.1f (df %d, critical %.1f at 1e-4), %d of %d "
			              "runs with a padding first token, %.2f iterations per 2 tokens\n", what,
			              cfg[c][3][0] ? " adaptive" : "", (double)samp->temperature, chi, df,
			              crit, pr.pad_first, pr.runs, (double)pr.iters / pr.runs);
			if (!(chi < crit))
				fail_msg("%s at T %g: the engine's output distribution is not the target's", what,
				         (double)samp->temperature);
		}
		rt_engine_free(e);
		rt_dev_free(d);
	}
	free(probs);
	free(counts);
	rt_model_free(dm);
	rt_model_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_view),
		cmocka_unit_test(test_spec_tokenizers),
		cmocka_unit_test(test_manifest_refuses_larger_draft),
		cmocka_unit_test(test_engine_greedy),
		cmocka_unit_test(test_engine_exactness),
	};
	/* e.g. CMOCKA_FILTER='*greedy' (as test_kern_tree_attention.c) */
	if (getenv("CMOCKA_FILTER") && *getenv("CMOCKA_FILTER"))
		cmocka_set_test_filter(getenv("CMOCKA_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
