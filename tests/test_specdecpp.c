/* SpecDec++ (ALGORITHMS.txt 6): the acceptance head against an independent
 * double-precision forward, its file format and errors; the stop rule
 * against a closed form over scripted p_hat sequences and inside the model
 * drafter; exactness of adaptive drafting (chi-square at 1e-4 against the
 * enumerated target distribution, greedy equality); the time-model identity
 * and its counting convention; monotonicity in h; and a training smoke test
 * (held-out loss below the best constant's). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "decode/acchead.h"
#include "decode/chain.h"
#include "testutil.h"

#define ALPHA 1e-4

static char tmpdir[256];

static int setup_dir(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_specdecpp.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- a minimal safetensors writer for crafted (also malformed) heads ---- */
struct st_tensor {
	const char *name;
	int nd;
	int shape[2];
	const float *data;
};

static void write_st(const char *path, const struct st_tensor *t, int n)
{
	char hdr[8192];
	size_t o = 0, off = 0;
	o += (size_t)snprintf(hdr + o, sizeof(hdr) - o, "{");
	for (int i = 0; i < n; i++) {
		size_t numel = (size_t)t[i].shape[0] * (t[i].nd == 2 ? (size_t)t[i].shape[1] : 1);
		if (t[i].nd == 2)
			o += (size_t)snprintf(hdr + o, sizeof(hdr) - o, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
			                      i ? "," : "", t[i].name, t[i].shape[0], t[i].shape[1], off, off + 4 * numel);
		else
			o += (size_t)snprintf(hdr + o, sizeof(hdr) - o, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
			                      i ? "," : "", t[i].name, t[i].shape[0], off, off + 4 * numel);
		off += 4 * numel;
	}
	o += (size_t)snprintf(hdr + o, sizeof(hdr) - o, "}");
	while (o % 8)
		hdr[o++] = ' ';
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	uint64_t len = o;
	assert_int_equal(fwrite(&len, 8, 1, f), 1); /* little-endian host (x86/arm64) */
	assert_int_equal(fwrite(hdr, 1, o, f), o);
	for (int i = 0; i < n; i++) {
		size_t numel = (size_t)t[i].shape[0] * (t[i].nd == 2 ? (size_t)t[i].shape[1] : 1);
		assert_int_equal(fwrite(t[i].data, 4, numel, f), numel);
	}
	assert_int_equal(fclose(f), 0);
}

/* The head in double precision, written from the formula, not the code. */
static double head_ref(const rt_acchead *h, const float *x)
{
	int d = h->dim;
	double *y = malloc((size_t)d * sizeof(*y)), *t = malloc((size_t)d * sizeof(*t));
	for (int i = 0; i < d; i++)
		y[i] = x[i];
	for (int l = 0; l < h->n_layers; l++) {
		for (int i = 0; i < d; i++) {
			double a = h->b[i];
			for (int j = 0; j < d; j++)
				a += (double)h->w[(size_t)i * d + j] * y[j];
			t[i] = a / (1 + exp(-a));
		}
		for (int i = 0; i < d; i++)
			y[i] += t[i];
	}
	double l0 = h->b2[0], l1 = h->b2[1];
	for (int j = 0; j < d; j++) {
		l0 += (double)h->w2[j] * y[j];
		l1 += (double)h->w2[d + j] * y[j];
	}
	free(y);
	free(t);
	double m = fmax(l0, l1);
	return exp(l1 - m) / (exp(l0 - m) + exp(l1 - m));
}

static void test_head_forward_and_roundtrip(void **state)
{
	sw_err err;
	static const int dims[] = { 1, 33, 111 }, layers[] = { 0, 1, 3 };
	for (int di = 0; di < 3; di++)
		for (int li = 0; li < 3; li++) {
			int d = dims[di], k = layers[li];
			rt_acchead *h = rt_acchead_new(d, k, &err);
			assert_non_null(h);
			rt_acchead_init_random(h, 1000 + (uint64_t)(d * 7 + k));
			float *x = malloc((size_t)d * sizeof(*x)), *scr = malloc(2 * (size_t)d * sizeof(*scr));
			uint64_t s = (uint64_t)d * 31 + (uint64_t)k;
			double worst = 0;
			for (int trial = 0; trial < 20; trial++) {
				for (int i = 0; i < d; i++)
					x[i] = (float)(4 * tu_uniform(&s) - 2);
				double pr = head_ref(h, x);
				float p = rt_acchead_prob(h, x, scr);
				assert_false(isnan(p));
				/* fp32 dot products of length d, k+1 deep, on O(1)
				 * values: relative error ~ (k+1) d 2^-24 on the logits;
				 * the sigmoid's slope is <= 1/4. 1e-4 covers d = 111,
				 * k = 3 (~3e-5) with margin. */
				double e = fabs(p - pr);
				worst = fmax(worst, e);
				assert_true(e < 1e-4);
			}
			char path[400];
			snprintf(path, sizeof(path), "%s/head_%d_%d.safetensors", tmpdir, d, k);
			assert_int_equal(rt_acchead_save(h, path, &err), 0);
			rt_acchead *g = rt_acchead_load(path, d, &err);
			if (!g)
				fail_msg("%s", err.msg);
			assert_int_equal(g->n_layers, k);
			assert_int_equal(g->dim, d);
			if (k > 0) { /* a linear head stores no block */
				assert_memory_equal(g->w, h->w, (size_t)d * d * sizeof(float));
				assert_memory_equal(g->b, h->b, (size_t)d * sizeof(float));
			}
			assert_memory_equal(g->w2, h->w2, 2 * (size_t)d * sizeof(float));
			assert_memory_equal(g->b2, h->b2, 2 * sizeof(float));
			rt_acchead_free(g);
			rt_acchead_free(h);
			free(x);
			free(scr);
			if (d == 111 && k == 3)
				printf("  head d=111 k=3: max |p - p_ref(double)| = %.2e\n", worst);
		}
}

static void expect_load_error(const char *path, int dim, const char *needle)
{
	sw_err err = { 0 };
	rt_acchead *h = rt_acchead_load(path, dim, &err);
	if (h)
		fail_msg("%s loaded, expected an error containing '%s'", path, needle);
	if (!strstr(err.msg, needle))
		fail_msg("error '%s' lacks '%s'", err.msg, needle);
	printf("  error as expected: %s\n", err.msg);
}

static void test_head_files(void **state)
{
	enum { D = 5 };
	float w[D * D], w_b[D * D], b[D], w2[2 * D], b2[2];
	uint64_t s = 5;
	for (int i = 0; i < D * D; i++)
		w[i] = w_b[i] = (float)tu_uniform(&s);
	w_b[7] += 1e-6f; /* an untied copy */
	for (int i = 0; i < D; i++)
		b[i] = (float)tu_uniform(&s);
	for (int i = 0; i < 2 * D; i++)
		w2[i] = (float)tu_uniform(&s);
	b2[0] = 0.1f;
	b2[1] = -0.2f;
	char p[400];
	sw_err err;

	/* prefix, k = 2 copies */
	struct st_tensor ok[] = {
		{ "acc_head.model.0.linear.weight", 2, { D, D }, w }, { "acc_head.model.0.linear.bias", 1, { D }, b },
		{ "acc_head.model.1.linear.weight", 2, { D, D }, w }, { "acc_head.model.1.linear.bias", 1, { D }, b },
		{ "acc_head.model.2.weight", 2, { 2, D }, w2 },       { "acc_head.model.2.bias", 1, { 2 }, b2 },
	};
	snprintf(p, sizeof(p), "%s/prefixed.safetensors", tmpdir);
	write_st(p, ok, 6);
	rt_acchead *h = rt_acchead_load(p, D, &err);
	if (!h)
		fail_msg("%s", err.msg);
	assert_int_equal(h->n_layers, 2);
	float x[D] = { 0.3f, -1, 2, 0.5f, 0 }, scr[2 * D];
	assert_true(fabs(rt_acchead_prob(h, x, scr) - head_ref(h, x)) < 1e-5);
	rt_acchead_free(h);

	/* a deduplicating writer keeps one copy: model.0 and the final model.3 -> k = 3 */
	struct st_tensor dedup[] = {
		{ "model.0.linear.weight", 2, { D, D }, w }, { "model.0.linear.bias", 1, { D }, b },
		{ "model.3.weight", 2, { 2, D }, w2 },       { "model.3.bias", 1, { 2 }, b2 },
	};
	snprintf(p, sizeof(p), "%s/dedup.safetensors", tmpdir);
	write_st(p, dedup, 4);
	h = rt_acchead_load(p, D, &err);
	if (!h)
		fail_msg("%s", err.msg);
	assert_int_equal(h->n_layers, 3);
	rt_acchead_free(h);

	/* k = 0: a linear head */
	snprintf(p, sizeof(p), "%s/linear.safetensors", tmpdir);
	struct st_tensor lin[] = { { "model.0.weight", 2, { 2, D }, w2 }, { "model.0.bias", 1, { 2 }, b2 } };
	write_st(p, lin, 2);
	h = rt_acchead_load(p, D, &err);
	assert_non_null(h);
	assert_int_equal(h->n_layers, 0);
	rt_acchead_free(h);

	/* untied copies */
	struct st_tensor untied[6];
	memcpy(untied, ok, sizeof(ok));
	untied[2].data = w_b;
	snprintf(p, sizeof(p), "%s/untied.safetensors", tmpdir);
	write_st(p, untied, 6);
	expect_load_error(p, D, "acc_head.model.1.linear.weight differs from acc_head.model.0.linear.weight");

	/* wrong shapes: the final layer vs the draft's hidden size, a block */
	snprintf(p, sizeof(p), "%s/ok.safetensors", tmpdir);
	write_st(p, ok, 6);
	expect_load_error(p, D + 1, "acc_head.model.2.weight has shape (2, 5), expected (2, 6)");
	struct st_tensor badblk[6];
	memcpy(badblk, ok, sizeof(ok));
	badblk[1].shape[0] = D - 1;
	snprintf(p, sizeof(p), "%s/badblk.safetensors", tmpdir);
	write_st(p, badblk, 6);
	expect_load_error(p, D, "acc_head.model.0.linear.bias has shape (4), expected (5)");
	struct st_tensor three[6];
	memcpy(three, ok, sizeof(ok));
	three[4].shape[0] = 1;
	three[4].shape[1] = 2 * D;
	snprintf(p, sizeof(p), "%s/three.safetensors", tmpdir);
	write_st(p, three, 6);
	expect_load_error(p, 0, "acc_head.model.2.weight has shape (1, 10), expected (2, 10)");

	/* missing final layer */
	snprintf(p, sizeof(p), "%s/nofinal.safetensors", tmpdir);
	write_st(p, ok, 4);
	expect_load_error(p, D, "final Linear missing: expected acc_head.model.2.weight");

	/* stray tensor, mixed prefixes, half a block */
	struct st_tensor stray[7];
	memcpy(stray, ok, sizeof(ok));
	stray[6] = (struct st_tensor){ "lm_head.weight", 1, { 2 }, b2 };
	snprintf(p, sizeof(p), "%s/stray.safetensors", tmpdir);
	write_st(p, stray, 7);
	expect_load_error(p, D, "unexpected tensor 'lm_head.weight'");
	struct st_tensor mixed[6];
	memcpy(mixed, ok, sizeof(ok));
	mixed[3].name = "model.1.linear.bias";
	snprintf(p, sizeof(p), "%s/mixed.safetensors", tmpdir);
	write_st(p, mixed, 6);
	expect_load_error(p, D, "different prefixes");
	struct st_tensor half[] = { ok[0], ok[1], ok[2], ok[4], ok[5] };
	snprintf(p, sizeof(p), "%s/half.safetensors", tmpdir);
	write_st(p, half, 5);
	expect_load_error(p, D, "acc_head.model.1.linear has its weight but not its bias");

	/* a head of the wrong width for the draft */
	rt_model *tm = tu_tiny_llama(6, 16, 1, 2, 1, 20, 9);
	rt_drafter *d = rt_drafter_model(tm, 32, &err);
	rt_acchead *h8 = rt_acchead_new(8, 1, &err);
	rt_adaptive a = { RT_ADAPT_HEAD, 0.5f, 1, 4, h8 };
	assert_int_equal(rt_drafter_set_adaptive(d, &a, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "takes hidden size 8"));
	rt_drafter *ng = rt_drafter_ngram(1, 2, &err);
	a.head = NULL;
	a.predictor = RT_ADAPT_PROXY;
	assert_int_equal(rt_drafter_set_adaptive(ng, &a, &err), SW_EINVAL);
	rt_drafter_free(ng);
	rt_acchead_free(h8);
	rt_drafter_free(d);
	rt_model_free(tm);

	/* --adaptive parsing */
	assert_int_equal(rt_adaptive_parse("0.3", &a, &err), 0);
	assert_true(a.threshold == 0.3f && a.min_len == 2 && a.max_len == 20);
	assert_int_equal(rt_adaptive_parse("0.7:1:8", &a, &err), 0);
	assert_true(a.min_len == 1 && a.max_len == 8);
	assert_int_equal(rt_adaptive_parse("1.5", &a, &err), SW_EINVAL);
	assert_int_equal(rt_adaptive_parse("0.5:3:2", &a, &err), SW_ERANGE);
	assert_int_equal(rt_adaptive_parse("0.5:3", &a, &err), SW_EINVAL);
}

/* Independent form of the stop rule: the stop step is the first s in
 * [min, max] with 1 - prod_{j<s} p_j > h, or max. (The product runs over all
 * earlier drafts, whether or not s >= min.) */
static int stop_closed_form(const double *p, double h, int min, int max)
{
	for (int s = 1; s <= max; s++) {
		double prod = 1.0;
		for (int j = 1; j < s; j++)
			prod *= p[j - 1];
		if (s >= min && 1.0 - prod > h)
			return s;
	}
	return max;
}

static int stop_by_rule(const rt_adaptive *a, const double *p, int max)
{
	double cum = 1.0;
	for (int step = 1;; step++)
		if (rt_adaptive_stop(a, step, max, step > 1 ? p[step - 2] : 0.123, &cum))
			return step;
}

static void test_stop_rule_scripted(void **state)
{
	uint64_t s = 77;
	double p[64];
	int hist[21] = { 0 };
	for (int trial = 0; trial < 20000; trial++) {
		int kind = trial % 4;
		for (int i = 0; i < 64; i++) {
			double u = tu_uniform(&s);
			p[i] = kind == 0 ? u : kind == 1 ? 1 - 0.1 * u * u : kind == 2 ? (u < 0.5 ? 1.0 : 0.0) : 0.9 + 0.1 * u;
		}
		rt_adaptive a = { RT_ADAPT_PROXY, (float)tu_uniform(&s), 0, 0, NULL };
		if (trial % 10 == 0)
			a.threshold = trial % 20 ? 0.0f : 1.0f;
		a.min_len = 1 + (int)(tu_uniform(&s) * 5);
		a.max_len = a.min_len + (int)(tu_uniform(&s) * 15);
		int max = trial % 7 ? a.max_len : 1 + (int)(tu_uniform(&s) * a.max_len); /* gamma clipped below */
		int got = stop_by_rule(&a, p, max);
		int want = stop_closed_form(p, a.threshold, a.min_len, max);
		if (got != want)
			fail_msg("trial %d: rule stops at %d, closed form at %d (h %g, [%d, %d], max %d)", trial, got, want,
			         a.threshold, a.min_len, a.max_len, max);
		hist[got < 20 ? got : 20]++;
	}
	printf("  20000 scripted sequences agree; stop steps 1..10:");
	for (int i = 1; i <= 10; i++)
		printf(" %d", hist[i]);
	printf("\n");
	assert_true(hist[1] > 0 && hist[2] > 0 && hist[5] > 0);
}

/* Inside the drafter: propose() with the stop rule returns the stop step of
 * the closed form evaluated on p_hat values recomputed independently: the
 * draft's T = 1 softmax at each draft token (proxy, greedy drafting), or the
 * double-precision head on hidden states from one batched forward over the
 * drafted sequence (head). */
static void test_stop_rule_in_drafter(void **state)
{
	enum { V = 12 };
	rt_model *tm = tu_tiny_llama(V, 16, 2, 4, 2, 24, 505);
	sw_err err;
	int first[1] = { 0 };
	rt_model *dm = rt_model_layerskip(tm, first, 1, 0, &err);
	rt_acchead *head = rt_acchead_new(16, 2, &err);
	rt_acchead_init_random(head, 3);
	/* Spread p_hat over (0, 1): a random head on these hidden states sits
	 * near 0.5; scale the final layer. */
	for (int i = 0; i < 32; i++)
		head->w2[i] *= 4;
	rt_drafter *d = rt_drafter_model(dm, 128, &err);
	rt_ctx *rc = rt_ctx_new(dm, 128, 64, &err);
	float *logits = malloc((size_t)64 * V * sizeof(float)), *hid = malloc((size_t)64 * 16 * sizeof(float));
	float q[RT_MAX_GAMMA * V];
	uint64_t s = 11;
	int lens[2][9] = { { 0 } }, borderline = 0;
	for (int pred = RT_ADAPT_HEAD; pred <= RT_ADAPT_PROXY; pred++) {
		for (int trial = 0; trial < 300; trial++) {
			rt_adaptive a = { pred, (float)tu_uniform(&s), 1 + (int)(tu_uniform(&s) * 3), 0, head };
			a.max_len = a.min_len + (int)(tu_uniform(&s) * 6);
			assert_int_equal(rt_drafter_set_adaptive(d, &a, &err), 0);
			int32_t hist[16 + RT_MAX_GAMMA], tok[RT_MAX_GAMMA];
			int n_hist = 2 + (int)(tu_uniform(&s) * 8);
			for (int i = 0; i < n_hist; i++)
				hist[i] = (int32_t)(tu_uniform(&s) * V);
			rt_sampling g = { 0.0f, 0, 1.0f };
			int gamma = 8;
			int k = d->ops->propose(d, hist, n_hist, gamma, &g, 1, (uint32_t)trial, tok, q, &err);
			assert_true(k >= 1 && k <= a.max_len);
			/* p_hat(Y_1..Y_k) recomputed from ONE batched forward over
			 * hist + drafts (logits and hidden of every row) */
			int max = a.max_len < gamma ? a.max_len : gamma;
			int T = n_hist + k;
			int32_t seq[16 + RT_MAX_GAMMA], pos[16 + RT_MAX_GAMMA];
			memcpy(seq, hist, (size_t)n_hist * sizeof(*seq));
			memcpy(seq + n_hist, tok, (size_t)k * sizeof(*seq));
			for (int i = 0; i < T; i++)
				pos[i] = i;
			rt_ctx_truncate(rc, 0);
			assert_int_equal(rt_ctx_eval(rc, seq, pos, T, NULL, logits, hid, &err), 0);
			double p[RT_MAX_GAMMA];
			for (int j = 0; j < max; j++)
				p[j] = 1.0; /* beyond Y_k: never needed when the drafter is right */
			for (int j = 0; j < k; j++) {
				const float *row = logits + (size_t)(n_hist + j - 1) * V;
				assert_int_equal(rt_argmax(row, V), tok[j]); /* greedy drafts */
				double mx = row[tok[j]], z = 0;
				for (int v = 0; v < V; v++)
					z += exp((double)row[v] - mx);
				p[j] = pred == RT_ADAPT_PROXY ? 1.0 / z : head_ref(head, hid + (size_t)(n_hist + j) * 16);
			}
			/* p[j] = p_hat(Y_{j+1}) */
			int want = stop_closed_form(p, a.threshold, a.min_len, max);
			if (want != k) {
				/* fp32 batched vs single-token forwards: tolerate only a
				 * decision within 1e-5 of the threshold */
				double prod = 1;
				for (int j = 0; j < (k < want ? k : want); j++)
					prod *= p[j];
				if (fabs(1 - prod - a.threshold) > 1e-5)
					fail_msg("predictor %d trial %d: drafter stopped at %d, closed form at %d", pred, trial, k, want);
				borderline++;
			}
			lens[pred - 1][k]++;
		}
	}
	printf("  drafter stop steps (head / proxy) 1..8:");
	for (int pr = 0; pr < 2; pr++) {
		printf(" |");
		for (int i = 1; i <= 8; i++)
			printf(" %d", lens[pr][i]);
	}
	printf("  (borderline %d)\n", borderline);
	assert_true(borderline < 3);
	/* the lengths must actually vary for both predictors */
	for (int pr = 0; pr < 2; pr++) {
		int distinct = 0;
		for (int i = 1; i <= 8; i++)
			distinct += lens[pr][i] > 0;
		assert_true(distinct >= 3);
	}
	free(logits);
	free(hid);
	rt_ctx_free(rc);
	rt_drafter_free(d);
	rt_acchead_free(head);
	rt_model_free(dm);
	rt_model_free(tm);
}

/* ---- exactness ---- */

static void check_distribution(const rt_model *target, const rt_model *draft, const rt_adaptive *a,
                               const int32_t *prompt, int n_prompt, int n, int gamma, rt_sampling s, int n_trials,
                               const char *label)
{
	int V = target->cfg.vocab;
	size_t K = 1;
	for (int i = 0; i < n; i++)
		K *= (size_t)V;
	double *probs = malloc(K * sizeof(*probs));
	uint64_t *counts = calloc(K, sizeof(*counts));
	tu_seq_dist(target, prompt, n_prompt, n, &s, probs);
	sw_err err;
	int max_ctx = n_prompt + n + gamma + 4;
	rt_ctx *tc = rt_ctx_new(target, max_ctx, gamma + 1, &err);
	rt_drafter *d = rt_drafter_model(draft, max_ctx, &err);
	assert_non_null(d);
	assert_int_equal(rt_drafter_set_adaptive(d, a, &err), 0);
	int32_t out[64];
	rt_stats st;
	uint64_t drafted = 0, accepted = 0, iters = 0;
	for (int t = 0; t < n_trials; t++) {
		rt_gen_cfg cfg = { .samp = s, .gamma = gamma, .seed = 0xadab0000ull + (uint64_t)t, .max_new = n };
		rt_ctx_truncate(tc, 0);
		assert_int_equal(rt_generate_spec(tc, d, prompt, n_prompt, &cfg, out, &st, &err), n);
		size_t id = 0;
		for (int i = 0; i < n; i++)
			id = id * V + (size_t)out[i];
		counts[id]++;
		drafted += st.n_drafted;
		accepted += st.n_accepted;
		iters += st.n_iters;
	}
	int df;
	double chi = tu_chi2(counts, probs, (int)K, (uint64_t)n_trials, &df);
	double crit = tu_chi2_crit(df, ALPHA);
	printf("  %-46s chi2 %8.2f  df %3d  crit(1e-4) %7.2f  acceptance %.3f  drafts/round %.2f\n", label, chi, df,
	       crit, drafted ? (double)accepted / drafted : 0.0, (double)drafted / iters);
	assert_true(drafted > 0 && accepted > 0 && accepted < drafted);
	assert_true(chi < crit);
	rt_drafter_free(d);
	rt_ctx_free(tc);
	free(probs);
	free(counts);
}

static void test_exact_distribution(void **state)
{
	rt_model *tm = tu_tiny_llama(6, 16, 2, 4, 2, 24, 101);
	sw_err err;
	int first[1] = { 0 };
	rt_model *ls = rt_model_layerskip(tm, first, 1, 0, &err);
	rt_model *dm = tu_tiny_llama(6, 16, 1, 2, 1, 20, 202);
	rt_acchead *head = rt_acchead_new(16, 2, &err);
	rt_acchead_init_random(head, 17);
	for (int i = 0; i < 32; i++)
		head->w2[i] *= 4;
	int32_t prompt[2] = { 2, 5 };
	rt_sampling s1 = { 1.0f, 0, 1.0f }, s2 = { 1.2f, 4, 0.95f };
	rt_adaptive ah = { RT_ADAPT_HEAD, 0.5f, 1, 3, head }, ap = { RT_ADAPT_PROXY, 0.5f, 1, 3, NULL };
	check_distribution(tm, ls, &ah, prompt, 2, 3, 3, s1, 20000, "layer-skip + head h=.5 [1,3] T=1");
	check_distribution(tm, ls, &ap, prompt, 2, 3, 3, s1, 20000, "layer-skip + proxy h=.5 [1,3] T=1");
	ah.threshold = 0.3f;
	ap.threshold = 0.7f;
	ah.min_len = ap.min_len = 2;
	check_distribution(tm, dm, &ah, prompt, 2, 3, 3, s2, 20000, "separate + head h=.3 [2,3] T=1.2 k4 p.95");
	check_distribution(tm, dm, &ap, prompt, 2, 3, 3, s2, 20000, "separate + proxy h=.7 [2,3] T=1.2 k4 p.95");
	rt_acchead_free(head);
	rt_model_free(dm);
	rt_model_free(ls);
	rt_model_free(tm);
}

static void test_greedy_equals_target(void **state)
{
	enum { V = 6 };
	sw_err err;
	rt_model *tm = tu_tiny_llama(V, 16, 2, 4, 2, 24, 303);
	int first[1] = { 0 };
	rt_model *ls = rt_model_layerskip(tm, first, 1, 0, &err);
	rt_acchead *head = rt_acchead_new(16, 1, &err);
	rt_acchead_init_random(head, 23);
	int checked = 0;
	uint64_t drafted = 0, iters = 0;
	for (int pred = RT_ADAPT_HEAD; pred <= RT_ADAPT_PROXY; pred++)
		for (int hi = 0; hi < 2; hi++) {
			rt_ctx *tc = rt_ctx_new(tm, 64, 9, &err), *rc = rt_ctx_new(tm, 64, 8, &err);
			rt_drafter *d = rt_drafter_model(ls, 64, &err);
			rt_adaptive a = { pred, hi ? 0.7f : 0.3f, 1, 8, head };
			assert_int_equal(rt_drafter_set_adaptive(d, &a, &err), 0);
			for (int x = 0; x < V; x++)
				for (int y = 0; y < V; y++) {
					int32_t prompt[2] = { x, y }, o1[16], o2[16];
					rt_gen_cfg cfg = { .samp = { 0.0f, 0, 1.0f }, .gamma = 8, .seed = 7, .max_new = 12 };
					rt_stats st;
					rt_ctx_truncate(tc, 0);
					rt_ctx_truncate(rc, 0);
					assert_int_equal(rt_generate_spec(tc, d, prompt, 2, &cfg, o1, &st, &err), 12);
					drafted += st.n_drafted;
					iters += st.n_iters;
					assert_int_equal(rt_generate_target(rc, prompt, 2, &cfg, o2, &st, &err), 12);
					assert_memory_equal(o1, o2, sizeof(o1[0]) * 12);
					checked++;
				}
			rt_drafter_free(d);
			rt_ctx_free(tc);
			rt_ctx_free(rc);
		}
	printf("  %d adaptive greedy generations identical to target-only (%.2f drafts/round)\n", checked,
	       (double)drafted / iters);
	rt_acchead_free(head);
	rt_model_free(ls);
	rt_model_free(tm);
}

/* ---- time model and monotonicity ---- */

/* runs: how many generations st sums (each may lose one token at max_new) */
static void check_time_identity(const rt_stats *st, int runs, const char *label)
{
	rt_time_model tm;
	rt_time_model_compute(st, &tm);
	/* the drafter's convention: one forward per drafted token */
	assert_int_equal(st->n_draft_calls, st->n_drafted);
	assert_true(tm.N_draft == tm.N + tm.N_discard - tm.N_target);
	/* emitted tokens: the rounds' output, the last round possibly cut by one */
	assert_true((double)st->n_tokens <= tm.N && (double)st->n_tokens + runs >= tm.N);
	double a = tm.T_total / tm.N, b = tm.T_per_token;
	printf("  %-34s N %4.0f D %.3f V %.3f  t_d %.3gs t_t %.3gs  T/N %.6g vs Eq.2.3 %.6g\n", label, tm.N, tm.D, tm.V,
	       tm.t_draft, tm.t_target, a, b);
	/* the two forms differ only by rounding: a few ulps of O(1) terms */
	assert_true(fabs(a - b) <= 1e-12 * fmax(fabs(a), 1e-9) + 1e-15);
}

static void test_time_model_and_monotone(void **state)
{
	enum { V = 16 };
	sw_err err;
	rt_model *tm = tu_tiny_llama(V, 16, 3, 4, 2, 24, 606);
	int first[2] = { 0, 1 };
	rt_model *ls = rt_model_layerskip(tm, first, 2, 0, &err);
	rt_acchead *head = rt_acchead_new(16, 1, &err);
	rt_acchead_init_random(head, 29);
	for (int i = 0; i < 32; i++)
		head->w2[i] *= 4;
	rt_ctx *tc = rt_ctx_new(tm, 256, 17, &err);
	rt_drafter *d = rt_drafter_model(ls, 256, &err);
	static const float hs[] = { 0.1f, 0.4f, 0.7f, 0.95f };
	rt_sampling s = { 1.0f, 0, 1.0f };
	int32_t out[128];
	for (int pred = RT_ADAPT_OFF; pred <= RT_ADAPT_PROXY; pred++) {
		double prev = 0;
		for (int hi = 0; hi < 4; hi++) {
			rt_adaptive a = { pred, hs[hi], 1, 16, head };
			assert_int_equal(rt_drafter_set_adaptive(d, &a, &err), 0);
			rt_stats tot;
			memset(&tot, 0, sizeof(tot));
			for (int seed = 0; seed < 24; seed++) {
				int32_t prompt[3] = { seed % V, (seed * 7) % V, 3 };
				rt_gen_cfg cfg = { .samp = s, .gamma = pred == RT_ADAPT_OFF ? 4 : 16, .seed = 4000 + (uint64_t)seed,
				                   .max_new = 100 };
				rt_stats st;
				rt_ctx_truncate(tc, 0);
				assert_int_equal(rt_generate_spec(tc, d, prompt, 3, &cfg, out, &st, &err), 100);
				assert_int_equal(st.n_draft_calls, st.n_drafted);
				tot.n_tokens += st.n_tokens;
				tot.n_target_calls += st.n_target_calls;
				tot.n_draft_calls += st.n_draft_calls;
				tot.n_drafted += st.n_drafted;
				tot.n_accepted += st.n_accepted;
				tot.n_iters += st.n_iters;
				tot.t_draft += st.t_draft;
				tot.t_target += st.t_target;
				if (seed == 0 && (hi == 1 || pred == RT_ADAPT_OFF)) {
					char label[64];
					snprintf(label, sizeof(label), "%s h=%.1f (one run)",
					         pred == RT_ADAPT_OFF ? "fixed g=4" : pred == RT_ADAPT_HEAD ? "head" : "proxy", hs[hi]);
					check_time_identity(&st, 1, label);
				}
			}
			double mean = (double)tot.n_drafted / tot.n_iters;
			printf("  %-6s h=%.2f: %.3f drafts/round, D %.3f, V %.3f\n",
			       pred == RT_ADAPT_OFF ? "fixed" : pred == RT_ADAPT_HEAD ? "head" : "proxy", hs[hi], mean,
			       (double)(tot.n_drafted - tot.n_accepted) / tot.n_tokens, (double)tot.n_target_calls / tot.n_tokens);
			check_time_identity(&tot, 24, "  (all 24 runs)");
			if (pred == RT_ADAPT_OFF)
				break;
			/* lower h: fewer drafts on average */
			assert_true(mean > prev);
			prev = mean;
		}
	}
	/* pathwise: same history, same uniforms -> the drafted length is
	 * non-decreasing in h (the drafted tokens do not depend on h) */
	uint64_t r = 3;
	int32_t tok[16];
	float q[16 * V];
	for (int pred = RT_ADAPT_HEAD; pred <= RT_ADAPT_PROXY; pred++)
		for (int trial = 0; trial < 200; trial++) {
			int32_t hist[8];
			for (int i = 0; i < 8; i++)
				hist[i] = (int32_t)(tu_uniform(&r) * V);
			int prevk = 0;
			for (int hi = 0; hi < 4; hi++) {
				rt_adaptive a = { pred, hs[hi], 1, 16, head };
				assert_int_equal(rt_drafter_set_adaptive(d, &a, &err), 0);
				int k = d->ops->propose(d, hist, 8, 16, &s, 5, (uint32_t)trial, tok, q, &err);
				assert_true(k >= prevk);
				prevk = k;
			}
		}
	rt_drafter_free(d);
	rt_ctx_free(tc);
	rt_acchead_free(head);
	rt_model_free(ls);
	rt_model_free(tm);
}

/* The real model (when present): counts and time model on a short greedy run. */
static void test_time_model_real(void **state)
{
	const char *path = getenv("SW_MODEL") ? getenv("SW_MODEL") : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
	if (access(path, R_OK)) {
		printf("  %s not present, skipped\n", path);
		skip();
	}
	sw_err err;
	rt_model *tm = rt_model_load(path, &err);
	assert_non_null(tm);
	rt_model *ls = rt_model_layerskip_parse(tm, "0-14,22-29", &err);
	assert_non_null(ls);
	rt_ctx *tc = rt_ctx_new(tm, 256, 32, &err);
	rt_drafter *d = rt_drafter_model(ls, 256, &err);
	rt_adaptive a = { RT_ADAPT_PROXY, 0.5f, 1, 8, NULL };
	assert_int_equal(rt_drafter_set_adaptive(d, &a, &err), 0);
	int32_t prompt[6] = { 504, 2365, 282, 4649, 314, 253 }, out[32];
	rt_gen_cfg cfg = { .samp = { 0.0f, 0, 1.0f }, .gamma = 8, .seed = 1, .max_new = 16 };
	rt_stats st;
	assert_int_equal(rt_generate_spec(tc, d, prompt, 6, &cfg, out, &st, &err), 16);
	check_time_identity(&st, 1, "SmolLM2 layerskip proxy h=.5");
	rt_drafter_free(d);
	rt_ctx_free(tc);
	rt_model_free(ls);
	rt_model_free(tm);
}

/* ---- training ---- */

static void test_train_smoke(void **state)
{
	enum { V = 24 };
	sw_err err;
	rt_model *tm = tu_tiny_llama(V, 16, 3, 4, 2, 32, 707);
	int first[1] = { 0 };
	rt_model *ls = rt_model_layerskip(tm, first, 1, 0, &err);
	/* a corpus the target itself finds plausible: its own samples */
	enum { NC = 3000 };
	int32_t *corpus = malloc(NC * sizeof(*corpus));
	rt_ctx *c = rt_ctx_new(tm, 4096, 64, &err);
	float lg[V], pr[V];
	int idx[V];
	uint64_t s = 1;
	rt_sampling s1 = { 1.0f, 0, 1.0f };
	corpus[0] = 1;
	for (int i = 1; i < NC; i++) {
		assert_int_equal(rt_ctx_feed(c, &corpus[i - 1], 1, lg, &err), 0);
		rt_probs(pr, lg, V, &s1, idx);
		corpus[i] = rt_sample_cdf(pr, V, tu_uniform(&s));
	}
	rt_ctx_free(c);
	for (int weighted = 0; weighted < 2; weighted++) {
		rt_acchead_train_cfg cfg;
		rt_acchead_train_defaults(&cfg);
		cfg.n_tokens = 3000;
		cfg.n_layers = 2;
		cfg.ctx_len = 8;
		cfg.cont_len = 24;
		cfg.epochs = 30;
		cfg.lr = 3e-3f;
		cfg.w_rej = weighted ? 6.0f : 1.0f;
		rt_acchead *h = NULL;
		rt_acchead_train_report rep;
		int rc = rt_acchead_train(tm, ls, corpus, NC, &cfg, &h, &rep, &err);
		if (rc)
			fail_msg("%s", err.msg);
		printf("  w_rej %.0f: %d train / %d held out, mean label %.3f; train loss %.4f -> %.4f; held out: "
		       "weighted loss %.4f vs const %.4f, BCE %.4f vs mean-label const %.4f\n",
		       cfg.w_rej, rep.n_train, rep.n_test, rep.mean_label, rep.train_loss_first, rep.train_loss_last,
		       rep.test_loss, rep.test_loss_const, rep.test_bce, rep.test_bce_const);
		if (weighted)
			assert_true(rep.test_loss < rep.test_loss_const);
		else
			assert_true(rep.test_bce < rep.test_bce_const); /* with w_rej = 1 the two losses coincide */
		assert_true(rep.train_loss_last < rep.train_loss_first);
		char path[400];
		snprintf(path, sizeof(path), "%s/trained.safetensors", tmpdir);
		assert_int_equal(rt_acchead_save(h, path, &err), 0);
		rt_acchead *g = rt_acchead_load(path, 16, &err);
		assert_non_null(g);
		rt_acchead_free(g);
		rt_acchead_free(h);
	}
	free(corpus);
	rt_model_free(ls);
	rt_model_free(tm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head_forward_and_roundtrip),
		cmocka_unit_test(test_head_files),
		cmocka_unit_test(test_stop_rule_scripted),
		cmocka_unit_test(test_stop_rule_in_drafter),
		cmocka_unit_test(test_greedy_equals_target),
		cmocka_unit_test(test_exact_distribution),
		cmocka_unit_test(test_time_model_and_monotone),
		cmocka_unit_test(test_time_model_real),
		cmocka_unit_test(test_train_smoke),
	};
	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
