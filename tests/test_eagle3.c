/* EAGLE-3 heads (runtime/model/eagle3.c, runtime/decode/eagle3_draft.c):
 *   - the C forward against a PyTorch forward written to mirror the public
 *     modeling code (tests/tools/eagle3_tiny.py, float64) on a tiny random
 *     head in the public checkpoint format: the last committed row, four
 *     chained draft steps, and two sibling rows under a tree mask; variants
 *     with vLLM's norm_before_residual and its "layers.0." tensor names.
 *     Bound: each logit is the end of D chained fp32 stages (fc, the q/k/v
 *     and o projections, attention, the MLP's two products, the LM head: 8
 *     a row, 8 more a draft step), each a dot product of length <= K =
 *     max(3H, 2H, ffn, rows) whose fp32 error is within gamma_K of its
 *     absolute sum (Higham 3.1). To first order those relative errors add
 *     up through the well-conditioned norms, so |C - ref| <= 2 D gamma_K
 *     S_i with S_i = sum_d |lm_head[i,d] norm(x)_d| from the reference;
 *     the factor 2 covers the second-order terms. A skipped q/k row
 *     permutation (the RoPE convention) misses by O(1).
 *   - exactness on a tiny target with a head whose draft ids are a
 *     non-prefix subset of the target's (q = 0 on target id 1): greedy
 *     chain and tree output equal to target-only on every 2-token prompt;
 *     chi-square at significance 1e-4 (Wilson-Hilferty critical value,
 *     tu_chi2_crit) of 3-token generations against the exact enumerated
 *     distribution at T = 1 and T = 0.6 with top-k, for the chain (x_j ~
 *     q_j, rule 1a), a top-k tree verified one-hot, sampled trees with RRS
 *     and RRSW;
 *   - SmolLM2-135M with a random head (Vd = 2048 spread over 49152 ids):
 *     greedy chain and eagle25 tree output equal to target-only;
 *   - malformed checkpoints refused with the file, field, expected and
 *     found. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "block_util.h"
#include "check.h"
#include "core/fileio.h"
#include "core/json.h"
#include "decode/eagle3_draft.h"
#include "core/tree.h"
#include "decode/tree_verify.h"
#include "eagle3_util.h"
#include "model/eagle3.h"
#include "testutil.h"

#define ALPHA 1e-4
#define PY "/usr/bin/python3"

static const rt_sampling S1 = { 1.0f, 0, 1.0f }, S2 = { 0.6f, 3, 1.0f }, GREEDY = { 0.0f, 0, 1.0f };

/* ---- the forward against PyTorch ---- */

static const json_value *jget(const json_value *o, const char *k)
{
	const json_value *v = json_get(o, k);
	if (!v)
		fail_msg("ref.json: %s missing", k);
	return v;
}

static double max_ratio = 0;

/* got (n) against a reference {"logits": [...], "abs": [...]} */
static void check_logits(const char *what, const float *got, const json_value *ref, int n, int D, int K)
{
	const json_value *lg = jget(ref, "logits"), *ab = jget(ref, "abs");
	assert_int_equal((int)lg->n, n);
	double worst = 0, g = gamma_n(K);
	for (int i = 0; i < n; i++) {
		double r = lg->items[i]->number, bound = 2.0 * D * g * ab->items[i]->number;
		double e = fabs((double)got[i] - r);
		if (!isfinite(got[i]) || e > bound)
			fail_msg("%s: logit %d = %.9g, reference %.9g, error %.3g over the bound %.3g", what, i, got[i], r, e,
			         bound);
		worst = fmax(worst, e / (g * ab->items[i]->number));
	}
	max_ratio = fmax(max_ratio, worst);
}

static bool have_torch(void)
{
	return system(PY " -c 'import torch' >/dev/null 2>&1") == 0;
}

static void forward_case(const char *flags)
{
	char dir[64], cmd[512];
	tbu_tmpdir(dir);
	snprintf(cmd, sizeof(cmd), PY " tests/tools/eagle3_tiny.py %s %s", dir, flags);
	assert_int_equal(system(cmd), 0);
	/* the defaults of eagle3_tiny.py: V 37, Vd 23, H 24, ffn 40, 9 target layers */
	enum { V = 37, Vd = 23, H = 24, FFN = 40 };
	rt_model *tm = tu_tiny_llama(V, H, 9, 4, 2, 32, 7);
	sw_err err = { 0 };
	rt_eagle3 *h = rt_eagle3_load(dir, tm, &err);
	if (!h)
		fail_msg("%s", err.msg);
	assert_true(h->cfg.own_embd && h->cfg.has_d2t);
	/* eagle_config ids [1, 4, 7] are outputs of those layers: taps as is */
	assert_int_equal(h->cfg.taps[0], 1);
	assert_int_equal(h->cfg.taps[1], 4);
	assert_int_equal(h->cfg.taps[2], 7);
	char rpath[128];
	snprintf(rpath, sizeof(rpath), "%s/ref.json", dir);
	size_t n;
	char *text = sw_read_file(rpath, SW_CAP_TEXT, &n);
	assert_non_null(text);
	json_value *ref = json_parse(text, n, rpath, &err);
	assert_non_null(ref);
	const int N = (int)jget(ref, "rows")->integer;
	const json_value *jf = jget(ref, "feat"), *jt = jget(ref, "row_tok"), *js = jget(ref, "steps_tok"),
	                 *jsib = jget(ref, "sib_tok"), *jd = jget(ref, "d2t_abs");
	for (int i = 0; i < Vd; i++)
		assert_int_equal(h->d2t[i], (int32_t)jd->items[i]->integer);
	float *feat = malloc((size_t)N * 3 * H * sizeof(float));
	int32_t tok[64];
	for (size_t i = 0; i < jf->n; i++)
		feat[i] = (float)jf->items[i]->number;
	for (int i = 0; i < N; i++)
		tok[i] = (int32_t)jt->items[i]->integer;
	rt_e3_state *st = rt_e3_state_new(h, 64, 8, &err);
	assert_non_null(st);
	float hid[8][H], lg[8][Vd];
	const int K = 3 * H > FFN ? 3 * H : FFN;
	/* in two commits (rows 0..2, then the rest): the cache carries over */
	assert_int_equal(rt_e3_commit(st, feat, tok, 3, NULL, NULL, &err), 0);
	assert_int_equal(rt_e3_commit(st, feat + 3 * 3 * H, tok + 3, N - 3, hid[0], lg[0], &err), 0);
	check_logits("commit", lg[0], jget(ref, "commit"), Vd, 8, K);
	const json_value *steps = jget(ref, "steps");
	for (size_t j = 0; j < steps->n; j++) {
		int32_t t = (int32_t)js->items[j]->integer, pos = N + (int32_t)j;
		assert_int_equal(rt_e3_step(st, hid[j], &t, &pos, 1, NULL, hid[j + 1], lg[j + 1], &err), 0);
		char what[32];
		snprintf(what, sizeof(what), "step %zu", j + 1);
		check_logits(what, lg[j + 1], steps->items[j], Vd, 8 * (int)(j + 2), K);
	}
	/* siblings: the staged steps dropped, two rows at position N that see
	 * the committed rows and themselves only */
	rt_e3_truncate(st, N);
	float f2[2][H], h2[2][H], l2[2][Vd];
	memcpy(f2[0], hid[0], sizeof(f2[0]));
	memcpy(f2[1], hid[0], sizeof(f2[1]));
	int32_t t2[2] = { (int32_t)jsib->items[0]->integer, (int32_t)jsib->items[1]->integer }, p2[2] = { N, N };
	uint64_t mask[2] = { 1u, 2u };
	assert_int_equal(rt_e3_step(st, &f2[0][0], t2, p2, 2, mask, &h2[0][0], &l2[0][0], &err), 0);
	const json_value *sib = jget(ref, "siblings");
	check_logits("sibling 0", l2[0], sib->items[0], Vd, 16, K);
	check_logits("sibling 1", l2[1], sib->items[1], Vd, 16, K);
	printf("  eagle3_tiny.py %-24s: worst error %.2f gamma_K S_i (bound %d..%d)\n", flags, max_ratio, 16,
	       2 * 8 * (int)(steps->n + 1));
	rt_e3_state_free(st);
	json_free(ref);
	free(text);
	free(feat);
	rt_eagle3_free(h);
	rt_model_free(tm);
	te3_rmdir(dir);
}

static void test_forward_torch(void **state)
{
	if (!have_torch()) {
		printf("  " PY " has no torch (Debian's python3-torch): the PyTorch cross-check is skipped\n");
		skip();
	}
	forward_case("--seed 1");
	forward_case("--seed 2 --norm-before-residual");
	forward_case("--seed 3 --layer-prefix layers.0.");
}

/* ---- exactness ---- */

struct setup {
	rt_model *tm;
	rt_eagle3 *h;
	char dir[64];
};

/* Target: V ids, width 16, 4 layers. Head: Vd = V - 1 draft ids, every
 * target id but 1 (a map that is not a prefix). */
static void setup(struct setup *S, int V, uint64_t seed)
{
	S->tm = tu_tiny_llama(V, 16, 4, 4, 2, 24, 900 + seed);
	te3_opts o = te3_default(S->tm);
	int32_t used[64];
	for (int i = 0, k = 0; i < V; i++)
		if (i != 1)
			used[k++] = i;
	o.draft_vocab = V - 1;
	o.used = used;
	o.taps[0] = 0, o.taps[1] = 1, o.taps[2] = 3;
	tbu_tmpdir(S->dir);
	assert_int_equal(te3_write(S->dir, S->tm, &o, seed), 0);
	sw_err err = { 0 };
	S->h = rt_eagle3_load(S->dir, S->tm, &err);
	if (!S->h)
		fail_msg("%s", err.msg);
	assert_int_equal(S->h->d2t[1], 2);
}

static void teardown(struct setup *S)
{
	rt_eagle3_free(S->h);
	rt_model_free(S->tm);
	te3_rmdir(S->dir);
}

static const int32_t PROMPT[3] = { 1, 0, 2 };

/* trials generations of n_new tokens: chain (tree NULL) or tree; chi2 vs
 * the exact distribution. */
static void check_dist(const char *label, const char *tree, int rule, int method, rt_sampling s, int gamma,
                       uint64_t seed)
{
	enum { V = 5, N_NEW = 3, TRIALS = 20000 };
	struct setup S;
	setup(&S, V, seed);
	sw_err err = { 0 };
	rt_tree t;
	if (tree)
		assert_int_equal(rt_tree_parse(tree, NULL, &t, &err), 0);
	rt_ctx *tc = rt_ctx_new(S.tm, 32, tree ? t.n : gamma + 1, &err);
	rt_drafter *d = rt_drafter_eagle3(S.h, tc, 4, &err);
	if (!d)
		fail_msg("%s", err.msg);
	size_t K = (size_t)V * V * V;
	double probs[V * V * V];
	uint64_t counts[V * V * V] = { 0 };
	tu_seq_dist(S.tm, PROMPT, 3, N_NEW, &s, probs);
	uint64_t acc = 0, drafted = 0, q1 = 0;
	for (int k = 0; k < TRIALS; k++) {
		int32_t out[8];
		rt_stats st;
		rt_gen_cfg cfg = { .samp = s, .gamma = gamma, .seed = 71000 + (uint64_t)k, .max_new = N_NEW };
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
		q1 += out[0] == 1 || out[1] == 1 || out[2] == 1;
	}
	int df;
	double chi = tu_chi2(counts, probs, (int)K, TRIALS, &df), crit = tu_chi2_crit(df, ALPHA);
	printf("  %-34s T=%.1f k=%d: chi2 %7.2f df %3d crit(1e-4) %6.2f, acceptance %.3f, outputs with id 1 %llu\n",
	       label, s.temperature, s.top_k, chi, df, crit, (double)acc / (double)drafted, (unsigned long long)q1);
	assert_true(acc > 0 && acc < drafted); /* both outcomes exercised */
	/* id 1 has q = 0: where the target gives it mass, it still comes out
	 * (through the residual) */
	double p1 = 0;
	for (int a = 0; a < V; a++)
		for (int b = 0; b < V; b++)
			for (int c = 0; c < V; c++)
				if (a == 1 || b == 1 || c == 1)
					p1 += probs[(a * V + b) * V + c];
	if (p1 * TRIALS >= 20)
		assert_true(q1 > 0);
	assert_true(chi < crit);
	rt_drafter_free(d);
	rt_ctx_free(tc);
	teardown(&S);
}

static void test_chain_chi2(void **state)
{
	check_dist("chain gamma=3", NULL, 0, 0, S1, 3, 1);
	check_dist("chain gamma=4", NULL, 0, 0, S2, 4, 2);
}

static void test_tree_chi2(void **state)
{
	check_dist("tree branch:3,2 topk/onehot", "branch:3,2", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, S1, 1, 3);
	check_dist("tree branch:2,2,1 topk/onehot", "branch:2,2,1", RT_EXPAND_TOPK, RT_VERIFY_ONEHOT, S2, 1, 4);
	check_dist("tree branch:3,2 sample/rrs", "branch:3,2", RT_EXPAND_SAMPLE, RT_VERIFY_RRS, S1, 1, 5);
	check_dist("tree branch:2,2,2 sample/rrs", "branch:2,2,2", RT_EXPAND_SAMPLE, RT_VERIFY_RRS, S2, 1, 6);
	check_dist("tree branch:3,2 sample-wor/rrsw", "branch:3,2", RT_EXPAND_SAMPLE_WOR, RT_VERIFY_RRSW, S1, 1, 7);
}

/* Greedy on every 2-token prompt, 10 tokens: chain and tree equal
 * target-only, and the head gets some drafts accepted. */
static void test_greedy_tiny(void **state)
{
	enum { V = 7, N = 10 };
	struct setup S;
	setup(&S, V, 11);
	sw_err err = { 0 };
	rt_tree t;
	assert_int_equal(rt_tree_parse("branch:3,2,1", NULL, &t, &err), 0);
	uint64_t accepted[2] = { 0, 0 };
	for (int mode = 0; mode < 2; mode++) {
		rt_ctx *tc = rt_ctx_new(S.tm, 64, t.n, &err), *rc = rt_ctx_new(S.tm, 64, 8, &err);
		rt_drafter *d = rt_drafter_eagle3(S.h, tc, 2, &err); /* grows to the tree / gamma */
		assert_non_null(d);
		for (int a = 0; a < V; a++)
			for (int b = 0; b < V; b++) {
				int32_t prompt[2] = { a, b }, o1[N], o2[N];
				rt_gen_cfg cfg = { .samp = GREEDY, .gamma = 4, .seed = 3, .max_new = N };
				rt_stats st;
				rt_ctx_truncate(tc, 0);
				rt_ctx_truncate(rc, 0);
				if (mode == 1) {
					rt_tree_cfg tcfg = { &t, RT_EXPAND_TOPK, RT_VERIFY_GREEDY };
					assert_int_equal(rt_generate_tree_drafter(tc, d, &tcfg, prompt, 2, &cfg, o1, &st, &err), N);
				} else {
					assert_int_equal(rt_generate_spec(tc, d, prompt, 2, &cfg, o1, &st, &err), N);
				}
				accepted[mode] += st.n_accepted;
				assert_int_equal(rt_generate_target(rc, prompt, 2, &cfg, o2, &st, &err), N);
				assert_memory_equal(o1, o2, sizeof(o1));
			}
		rt_drafter_free(d);
		rt_ctx_free(tc);
		rt_ctx_free(rc);
	}
	printf("  greedy: %d prompts x %d tokens equal to target-only; accepted drafts: chain %llu, tree %llu\n", V * V,
	       N, (unsigned long long)accepted[0], (unsigned long long)accepted[1]);
	assert_true(accepted[0] > 0 && accepted[1] > 0);
	/* a 1-token prompt: no target state yet, nothing drafted, still exact */
	rt_ctx *tc = rt_ctx_new(S.tm, 64, t.n, &err), *rc = rt_ctx_new(S.tm, 64, 8, &err);
	rt_drafter *d = rt_drafter_eagle3(S.h, tc, 8, &err);
	int32_t one = 3, o1[N], o2[N];
	rt_gen_cfg cfg = { .samp = GREEDY, .gamma = 3, .seed = 3, .max_new = N };
	rt_stats st;
	rt_tree_cfg tcfg = { &t, RT_EXPAND_TOPK, RT_VERIFY_GREEDY };
	assert_int_equal(rt_generate_tree_drafter(tc, d, &tcfg, &one, 1, &cfg, o1, &st, &err), N);
	assert_int_equal(rt_generate_target(rc, &one, 1, &cfg, o2, &st, &err), N);
	assert_memory_equal(o1, o2, sizeof(o1));
	rt_drafter_free(d);
	rt_ctx_free(tc);
	rt_ctx_free(rc);
	teardown(&S);
}

/* Tree drafting level by level (masked staged rows) gives every node the
 * q of its own path: recomputed on a fresh state as a chain of steps along
 * the path (commit, then one causal step per ancestor), the same within
 * fp32 rounding (the attention sums the same keys; 1e-5 absolute on
 * probabilities). A wrong tree mask mixes siblings' rows and misses by
 * O(0.01..1). */
static void test_tree_rows(void **state)
{
	enum { V = 9 };
	struct setup S;
	setup(&S, V, 21);
	sw_err err = { 0 };
	rt_tree t;
	assert_int_equal(rt_tree_parse("branch:3,2,2", NULL, &t, &err), 0);
	rt_ctx *tc = rt_ctx_new(S.tm, 64, t.n, &err);
	rt_drafter *d = rt_drafter_eagle3(S.h, tc, 4, &err);
	assert_non_null(d);
	static const int32_t hist[] = { 4, 1, 7, 0, 3, 8 };
	const int nh = 6;
	assert_int_equal(rt_ctx_feed(tc, hist, nh - 1, NULL, &err), 0);
	float *q = malloc((size_t)t.n * V * sizeof(float)), qr[V], p[V], hid[2][16], lg[V];
	int32_t tok[RT_TREE_MAX_NODES];
	int idx[V];
	assert_int_equal(d->ops->draft_tree(d, &t, RT_EXPAND_TOPK, &S1, &S1, 5, 0, hist, nh, tok, q, &err), 0);
	rt_e3_state *st = rt_e3_state_new(S.h, 64, 8, &err);
	double worst = 0;
	int checked = 0;
	for (int u = 0; u < t.n; u++) {
		if (!t.n_children[u])
			continue;
		int path[8], np = 0;
		for (int v = u; v > 0; v = t.parent[v])
			path[np++] = v;
		rt_e3_truncate(st, 0);
		assert_int_equal(rt_e3_commit(st, tc->tap_cache, hist + 1, nh - 1, hid[0], lg, &err), 0);
		for (int i = np - 1, k = 0; i >= 0; i--, k ^= 1) {
			int32_t pos = nh - 2 + t.depth[path[i]];
			assert_int_equal(rt_e3_step(st, hid[k], &tok[path[i]], &pos, 1, NULL, hid[k ^ 1], lg, &err), 0);
		}
		rt_eagle3_q(S.h, lg, &S1, qr, p, idx);
		for (int v = 0; v < V; v++)
			worst = fmax(worst, fabs((double)qr[v] - q[(size_t)u * V + v]));
		checked++;
	}
	printf("  tree branch:3,2,2: %d nodes' q against their paths recomputed as chains: max |dq| %.2g\n", checked,
	       worst);
	assert_true(worst < 1e-5);
	rt_e3_state_free(st);
	free(q);
	rt_drafter_free(d);
	rt_ctx_free(tc);
	teardown(&S);
}

/* ---- SmolLM2 with a random head ---- */

static const char *model_path(void)
{
	const char *p = getenv("SW_MODEL");
	return p ? p : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
}

static void test_smollm2_greedy(void **state)
{
	if (access(model_path(), R_OK))
		fail_msg("real model %s missing: run `make model`", model_path());
	sw_err err = { 0 };
	rt_model *m = rt_model_load(model_path(), &err);
	assert_non_null(m);
	char dir[64];
	tbu_tmpdir(dir);
	te3_opts o = te3_default(m);
	o.draft_vocab = 2048; /* ids 0, 24, 48, ... */
	o.ffn = 1536;
	o.taps[0] = 1, o.taps[1] = 14, o.taps[2] = 26; /* SpecForge's default for 30 layers */
	assert_int_equal(te3_write(dir, m, &o, 5), 0);
	rt_eagle3 *h = rt_eagle3_load(dir, m, &err);
	if (!h)
		fail_msg("%s", err.msg);
	assert_int_equal(h->d2t[100], 2400);
	rt_tree t;
	assert_int_equal(rt_tree_parse("eagle25", NULL, &t, &err), 0);
	enum { N = 16 };
	static const int32_t prompt[] = { 1, 9690, 198, 19556, 601, 260, 1345, 282, 253, 1789, 28, 30 };
	const int np = (int)(sizeof(prompt) / sizeof(prompt[0]));
	rt_ctx *tc = rt_ctx_new(m, 128, t.n, &err), *rc = rt_ctx_new(m, 128, 16, &err);
	int32_t ref[N], out[N];
	rt_gen_cfg cfg = { .samp = GREEDY, .gamma = 4, .seed = 1, .max_new = N };
	rt_stats st;
	assert_int_equal(rt_generate_target(rc, prompt, np, &cfg, ref, &st, &err), N);
	rt_drafter *d = rt_drafter_eagle3(h, tc, 4, &err);
	assert_non_null(d);
	assert_int_equal(rt_generate_spec(tc, d, prompt, np, &cfg, out, &st, &err), N);
	assert_memory_equal(out, ref, sizeof(ref));
	uint64_t drafted = st.n_drafted;
	rt_ctx_truncate(tc, 0);
	rt_tree_cfg tcfg = { &t, RT_EXPAND_TOPK, RT_VERIFY_GREEDY };
	assert_int_equal(rt_generate_tree_drafter(tc, d, &tcfg, prompt, np, &cfg, out, &st, &err), N);
	assert_memory_equal(out, ref, sizeof(ref));
	printf("  SmolLM2 + random head (Vd 2048): chain (%llu drafted) and eagle25 (%llu drafted) equal target-only for %d tokens\n",
	       (unsigned long long)drafted, (unsigned long long)st.n_drafted, N);
	assert_true(drafted > 0 && st.n_drafted > 0);
	rt_drafter_free(d);
	rt_ctx_free(tc);
	rt_ctx_free(rc);
	rt_eagle3_free(h);
	te3_rmdir(dir);
	rt_model_free(m);
}

/* ---- refusals ---- */

static void refused(const rt_model *tm, const te3_opts *o, const char *const *want)
{
	char dir[64];
	tbu_tmpdir(dir);
	assert_int_equal(te3_write(dir, tm, o, 3), 0);
	sw_err err = { 0 };
	rt_eagle3 *h = rt_eagle3_load(dir, tm, &err);
	if (h)
		fail_msg("loaded a malformed head (expected an error with \"%s\")", want[0]);
	assert_int_not_equal(err.code, 0);
	for (const char *const *w = want; *w; w++)
		if (!strstr(err.msg, *w))
			fail_msg("error \"%s\" lacks \"%s\"", err.msg, *w);
	printf("  refused: %s\n", err.msg);
	te3_rmdir(dir);
}

#define REFUSED(o, ...)                                                   \
	do {                                                              \
		static const char *const w_[] = { __VA_ARGS__, NULL };    \
		refused(tm, &(o), w_);                                    \
	} while (0)

static void cfg_text(char *out, size_t n, const char *arch, int H, int layers, int V, int Vd, const char *extra)
{
	snprintf(out, n,
	         "{\"architectures\": [\"%s\"], \"model_type\": \"llama\", \"hidden_size\": %d, \"intermediate_size\": 32,"
	         " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_hidden_layers\": %d, \"vocab_size\": %d,"
	         " \"draft_vocab_size\": %d%s}",
	         arch, H, layers, V, Vd, extra);
}

static void test_refused(void **state)
{
	rt_model *tm = tu_tiny_llama(11, 16, 4, 4, 2, 24, 5);
	te3_opts base = te3_default(tm), o;
	base.ffn = 32;
	char cfg[1024];
	const char *taps = ", \"eagle_config\": {\"eagle_aux_hidden_state_layer_ids\": [0, 1, 3]}";

	o = base, o.skip_tensor = "midlayer.self_attn.k_proj.weight";
	REFUSED(o, "model.safetensors: tensor midlayer.self_attn.k_proj.weight: missing", "expected shape [8, 32]");
	o = base, o.bad_tensor = "fc.weight";
	REFUSED(o, "tensor fc.weight: expected shape [16, 48], found [17, 48]");
	o = base, o.bad_tensor = "lm_head.weight";
	REFUSED(o, "tensor lm_head.weight: expected shape [11, 16], found [12, 16]");
	o = base, o.extra_tensor = "midlayer.self_attn.q_proj.bias";
	REFUSED(o, "tensor midlayer.self_attn.q_proj.bias: not part of an EAGLE-3 head");
	o = base, o.d2t_bad = 1;
	REFUSED(o, "tensor d2t[0]: expected an offset to a target id in [0, 11), found 16");
	o = base, o.draft_vocab = 6, o.d2t_bad = 2;
	REFUSED(o, "tensor d2t[1]: expected distinct target ids, found target id 0 twice");
	o = base, o.d2t_bad = 3;
	REFUSED(o, "tensor d2t: expected dtype I64", "found F32");
	o = base, o.draft_vocab = 6, o.t2d_bad = true;
	REFUSED(o, "tensor t2d[0]: expected true", "found false");
	/* config against the target */
	o = base, cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", 16, 1, 12, 11, taps), o.config_override = cfg;
	REFUSED(o, "config.json: $.vocab_size: expected 11", "found 12");
	o = base, cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", 24, 1, 11, 11, taps), o.config_override = cfg;
	REFUSED(o, "config.json: $.hidden_size: expected 16 (the width of the target", "found 24");
	o = base, cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", 16, 1, 11, 11,
	                   ", \"target_hidden_size\": 20, \"eagle_config\": {\"eagle_aux_hidden_state_layer_ids\": [0, 1, 3]}"),
	    o.config_override = cfg;
	REFUSED(o, "$.target_hidden_size: expected 16", "found 20");
	o = base, cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", 16, 2, 11, 11, taps), o.config_override = cfg;
	REFUSED(o, "$.num_hidden_layers: expected 1", "found 2");
	o = base, cfg_text(cfg, sizeof(cfg), "LlamaForCausalLM", 16, 1, 11, 11, taps), o.config_override = cfg;
	REFUSED(o, "$.architectures: expected [\"LlamaForCausalLMEagle3\"]", "found \"LlamaForCausalLM\"");
	o = base, cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", 16, 1, 11, 12, taps), o.config_override = cfg;
	REFUSED(o, "$.draft_vocab_size", "[1, 11]", "12");
	o = base, cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", 16, 1, 11, 11,
	                   ", \"eagle_config\": {\"eagle_aux_hidden_state_layer_ids\": [0, 1, 4]}"),
	    o.config_override = cfg;
	REFUSED(o, "$.eagle_config.eagle_aux_hidden_state_layer_ids[2]", "[0, 3]", "4");
	o = base, cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", 16, 1, 11, 11,
	                   ", \"eagle_config\": {\"eagle_aux_hidden_state_layer_ids\": [2, 1, 3]}"),
	    o.config_override = cfg;
	REFUSED(o, "eagle_aux_hidden_state_layer_ids[1]: expected a layer above the previous one (2), found 1");
	/* vLLM's convention: id i is the input of layer i; 0 (the embedding) is not tapped */
	o = base, cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", 16, 1, 11, 11,
	                   ", \"eagle_aux_hidden_state_layer_ids\": [0, 2, 4]"),
	    o.config_override = cfg;
	REFUSED(o, "$.eagle_aux_hidden_state_layer_ids[0]", "[1, 4]", "the embedding, is not tapped");
	o = base, cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", 16, 1, 11, 11, ""), o.config_override = cfg;
	REFUSED(o, "eagle_aux_hidden_state_layer_ids: absent", "at least 8 layers; the target has 4");
	o = base, cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", 16, 1, 11, 11,
	                   ", \"bias\": true, \"eagle_config\": {\"eagle_aux_hidden_state_layer_ids\": [0, 1, 3]}"),
	    o.config_override = cfg;
	REFUSED(o, "$.bias: expected false", "found true");
	/* a directory without the files */
	sw_err err = { 0 };
	assert_null(rt_eagle3_load("/nonexistent/eagle3", tm, &err));
	assert_non_null(strstr(err.msg, "/nonexistent/eagle3/config.json: cannot read the EAGLE-3 head's config"));
	/* the vLLM ids, accepted: [2, 3, 4] are the outputs of 1, 2, 3 */
	{
		char dir[64];
		tbu_tmpdir(dir);
		o = base, cfg_text(cfg, sizeof(cfg), "Eagle3LlamaForCausalLM", 16, 1, 11, 11,
		                   ", \"eagle_aux_hidden_state_layer_ids\": [2, 3, 4]"),
		    o.config_override = cfg;
		assert_int_equal(te3_write(dir, tm, &o, 3), 0);
		rt_eagle3 *h = rt_eagle3_load(dir, tm, &err);
		if (!h)
			fail_msg("%s", err.msg);
		assert_int_equal(h->cfg.taps[0], 1);
		assert_int_equal(h->cfg.taps[2], 3);
		rt_eagle3_free(h);
		/* without d2t/t2d: draft id = target id (vLLM's rule) */
		o = base, o.no_maps = true, o.draft_vocab = 5;
		assert_int_equal(te3_write(dir, tm, &o, 3), 0);
		h = rt_eagle3_load(dir, tm, &err);
		assert_non_null(h);
		assert_int_equal(h->d2t[4], 4);
		rt_eagle3_free(h);
		te3_rmdir(dir);
	}
	rt_model_free(tm);
}

/* A head by shape (config.json alone: rt_e3_config_shape, for shape-only
 * engines) reads the config as rt_e3_config_load does and infers the
 * public heads' tensors: its result equals rt_e3_config_load's on a head
 * te3_write writes with those tensors (d2t/t2d where Vd < V; its own
 * embedding where the width differs), and a bad config is refused alike. */
static void test_config_shape(void **state)
{
	rt_model *tm = tu_tiny_llama(11, 16, 4, 4, 2, 24, 5);
	te3_opts base = te3_default(tm), o;
	base.ffn = 32;
	char dir[64], cfg[1024], p[128];
	sw_err err = { 0 };
	const char *taps = ", \"eagle_config\": {\"eagle_aux_hidden_state_layer_ids\": [0, 1, 3]}";
	const char *wide = ", \"target_hidden_size\": 16, \"eagle_config\": {\"eagle_aux_hidden_state_layer_ids\": [0, 1, 3]}";
	const struct { int H, Vd; const char *extra; bool own, maps; } cases[] = {
		{ 16, 6, taps, false, true }, { 16, 11, taps, false, false }, { 24, 6, wide, true, true },
	};
	tbu_tmpdir(dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		o = base, o.draft_vocab = cases[i].Vd, o.own_embd = cases[i].own, o.no_maps = !cases[i].maps;
		cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", cases[i].H, 1, 11, cases[i].Vd, cases[i].extra);
		o.config_override = cfg;
		assert_int_equal(te3_write(dir, tm, &o, 3), 0);
		rt_e3_config full, shape;
		if (rt_e3_config_load(dir, &tm->cfg, tm->name, &full, &err))
			fail_msg("case %zu: %s", i, err.msg);
		snprintf(p, sizeof(p), "%s/model.safetensors", dir);
		assert_int_equal(unlink(p), 0);
		if (rt_e3_config_shape(dir, &tm->cfg, tm->name, &shape, &err))
			fail_msg("case %zu (shape): %s", i, err.msg);
		assert_int_equal(shape.own_embd, full.own_embd);
		assert_int_equal(shape.has_d2t, full.has_d2t);
		assert_int_equal(shape.own_embd, cases[i].own);
		assert_int_equal(shape.has_d2t, cases[i].maps);
		assert_int_equal(shape.draft_vocab, full.draft_vocab);
		assert_int_equal(shape.head.dim, full.head.dim);
		assert_int_equal(shape.head.head_dim, full.head.head_dim);
		assert_int_equal(shape.target_dim, full.target_dim);
		assert_memory_equal(shape.taps, full.taps, sizeof(full.taps));
	}
	cfg_text(cfg, sizeof(cfg), "LlamaForCausalLMEagle3", 16, 1, 12, 11, taps);
	o = base, o.config_override = cfg;
	assert_int_equal(te3_write(dir, tm, &o, 3), 0);
	assert_int_not_equal(rt_e3_config_shape(dir, &tm->cfg, tm->name, &(rt_e3_config){ 0 }, &err), 0);
	assert_non_null(strstr(err.msg, "config.json: $.vocab_size: expected 11"));
	te3_rmdir(dir);
	rt_model_free(tm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_config_shape),
		cmocka_unit_test(test_forward_torch),
		cmocka_unit_test(test_greedy_tiny),
		cmocka_unit_test(test_tree_rows),
		cmocka_unit_test(test_chain_chi2),
		cmocka_unit_test(test_tree_chi2),
		cmocka_unit_test(test_smollm2_greedy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
