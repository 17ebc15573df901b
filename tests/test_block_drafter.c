/* Block drafter, model side: the C forward (runtime/model/block_drafter.c)
 * against a plain double-precision reference written here on the same
 * weights, for both conditionings and both block attentions, with masks and
 * fixed tokens in the block; the target's hidden-state taps against the
 * model's own final hidden state (the last layer's tap, normed, is it) and
 * against layer-skip views (layer l's tap is the last tap of the first l+1
 * layers), with logits unchanged bit for bit when taps are on; and malformed
 * drafter files, each refused with an error naming the file, the field,
 * what was expected and what was found. */
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
#include "kernels/ref/ref.h"
#include "model/block_drafter.h"
#include "testutil.h"

/* ---- the double-precision reference ---- */

static void d_rmsnorm(double *y, const double *x, const float *w, int n, double eps)
{
	double ss = 0;
	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	double r = 1.0 / sqrt(ss / n + eps);
	for (int i = 0; i < n; i++)
		y[i] = x[i] * r * w[i];
}

/* y (n_out) = W (n_out, n_in) x */
static void d_matvec(double *y, const float *W, const double *x, int n_in, int n_out)
{
	for (int o = 0; o < n_out; o++) {
		double s = 0;
		for (int i = 0; i < n_in; i++)
			s += (double)W[(size_t)o * n_in + i] * x[i];
		y[o] = s;
	}
}

static void d_rope(double *x, int pos, int n_heads, int hd, double theta)
{
	for (int h = 0; h < n_heads; h++)
		for (int i = 0; i < hd / 2; i++) {
			double a = pos * pow(theta, -2.0 * i / hd);
			double *p = x + (size_t)h * hd + 2 * i;
			double x0 = p[0], x1 = p[1];
			p[0] = x0 * cos(a) - x1 * sin(a);
			p[1] = x0 * sin(a) + x1 * cos(a);
		}
}

/* Reference logits (B, Vd) for one pass; ctx_feat (n_ctx, n_taps*dim). */
static void ref_block(const rt_block_drafter *d, const float *ctx_feat, int n_ctx, const int32_t *blk, int pos0,
                      const int32_t *win, int n_win, double *logits)
{
	const rt_bd_config *c = &d->cfg;
	int dim = c->dim, nh = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim, B = c->block;
	int qd = nh * hd, kvd = nkv * hd, R = n_win + B, ffn = c->ffn_dim;
	int S = n_ctx + R; /* keys: context then rows */
	double *x = calloc((size_t)R * dim, sizeof(double)), *h = malloc((size_t)dim * sizeof(double));
	double *Q = malloc((size_t)R * qd * sizeof(double)), *K = malloc((size_t)S * kvd * sizeof(double));
	double *Vv = malloc((size_t)S * kvd * sizeof(double)), *o = malloc((size_t)qd * sizeof(double));
	double *g = malloc((size_t)ffn * sizeof(double)), *u = malloc((size_t)ffn * sizeof(double));
	double *fused = malloc((size_t)(n_ctx + 1) * dim * sizeof(double)), *tmp = malloc((size_t)dim * sizeof(double));
	double *w = malloc((size_t)S * sizeof(double)), *att = malloc((size_t)R * qd * sizeof(double));
	for (int i = 0; i < n_ctx; i++) {
		double *fi = malloc((size_t)c->n_taps * dim * sizeof(double));
		for (int k = 0; k < c->n_taps * dim; k++)
			fi[k] = ctx_feat[(size_t)i * c->n_taps * dim + k];
		d_matvec(tmp, d->fc, fi, c->n_taps * dim, dim);
		d_rmsnorm(fused + (size_t)i * dim, tmp, d->fc_norm, dim, c->norm_eps);
		free(fi);
	}
	for (int r = 0; r < R; r++) {
		int j = r - n_win;
		const float *e = j > 0 && blk[j] < 0 ? d->mask_embd + (size_t)(j - 1) * dim
		                                     : d->tok_embd + (size_t)(j < 0 ? win[r] : blk[j < 0 ? 0 : j]) * dim;
		for (int k = 0; k < dim; k++)
			x[(size_t)r * dim + k] = e[k];
	}
	for (int l = 0; l < c->n_layers; l++) {
		const rt_layer_weights *L = &d->layers[l];
		for (int i = 0; i < n_ctx; i++) {
			d_matvec(K + (size_t)i * kvd, L->wk, fused + (size_t)i * dim, dim, kvd);
			d_matvec(Vv + (size_t)i * kvd, L->wv, fused + (size_t)i * dim, dim, kvd);
			d_rope(K + (size_t)i * kvd, i, nkv, hd, c->rope_theta);
		}
		for (int r = 0; r < R; r++) {
			int p = pos0 - n_win + r;
			d_rmsnorm(h, x + (size_t)r * dim, L->attn_norm, dim, c->norm_eps);
			d_matvec(Q + (size_t)r * qd, L->wq, h, dim, qd);
			d_matvec(K + (size_t)(n_ctx + r) * kvd, L->wk, h, dim, kvd);
			d_matvec(Vv + (size_t)(n_ctx + r) * kvd, L->wv, h, dim, kvd);
			d_rope(Q + (size_t)r * qd, p, nh, hd, c->rope_theta);
			d_rope(K + (size_t)(n_ctx + r) * kvd, p, nkv, hd, c->rope_theta);
		}
		for (int r = 0; r < R; r++)
			for (int hh = 0; hh < nh; hh++) {
				int kh = hh / (nh / nkv);
				double mx = -INFINITY, sum = 0;
				for (int s = 0; s < S; s++) {
					int kr = s - n_ctx; /* row index of a block key */
					bool vis = s < n_ctx || !(c->block_attn == RT_BD_CAUSAL && r >= n_win && kr >= n_win && kr > r);
					if (!vis) {
						w[s] = -INFINITY;
						continue;
					}
					double dot = 0;
					for (int k = 0; k < hd; k++)
						dot += Q[(size_t)r * qd + hh * hd + k] * K[(size_t)s * kvd + kh * hd + k];
					w[s] = dot / sqrt((double)hd);
					if (w[s] > mx)
						mx = w[s];
				}
				for (int s = 0; s < S; s++) {
					w[s] = w[s] == -INFINITY ? 0 : exp(w[s] - mx);
					sum += w[s];
				}
				for (int k = 0; k < hd; k++) {
					double a = 0;
					for (int s = 0; s < S; s++)
						a += w[s] * Vv[(size_t)s * kvd + kh * hd + k];
					att[(size_t)r * qd + hh * hd + k] = a / sum;
				}
			}
		for (int r = 0; r < R; r++) {
			double *xr = x + (size_t)r * dim;
			d_matvec(tmp, L->wo, att + (size_t)r * qd, qd, dim);
			for (int k = 0; k < dim; k++)
				xr[k] += tmp[k];
			d_rmsnorm(h, xr, L->ffn_norm, dim, c->norm_eps);
			d_matvec(g, L->w_gate, h, dim, ffn);
			d_matvec(u, L->w_up, h, dim, ffn);
			for (int k = 0; k < ffn; k++)
				g[k] = g[k] / (1 + exp(-g[k])) * u[k];
			d_matvec(tmp, L->w_down, g, ffn, dim);
			for (int k = 0; k < dim; k++)
				xr[k] += tmp[k];
		}
	}
	for (int j = 0; j < B; j++) {
		d_rmsnorm(h, x + (size_t)(n_win + j) * dim, d->out_norm, dim, c->norm_eps);
		d_matvec(logits + (size_t)j * c->draft_vocab, d->lm_head, h, dim, c->draft_vocab);
	}
	free(x), free(h), free(Q), free(K), free(Vv), free(o), free(g), free(u), free(fused), free(tmp), free(w),
		free(att);
}

/* ---- forward vs reference ---- */

static void check_forward(const char *cond, const char *attn, int n_layers, int block, int draft_vocab,
                          uint64_t seed)
{
	enum { V = 13, DIM = 16, NPROMPT = 9 };
	rt_model *tm = tu_tiny_llama(V, DIM, 3, 4, 2, 24, 100 + seed);
	tbu_opts o = tbu_default(tm);
	o.cond = cond;
	o.attn = attn;
	o.n_layers = n_layers;
	o.block = block;
	o.draft_vocab = draft_vocab;
	o.n_taps = 3;
	o.taps[0] = 0, o.taps[1] = 1, o.taps[2] = 2;
	char dir[64];
	tbu_tmpdir(dir);
	assert_int_equal(tbu_write(dir, tm, &o, seed), 0);
	sw_err err = { 0 };
	rt_block_drafter *d = rt_block_drafter_load(dir, tm, &err);
	if (!d)
		fail_msg("%s", err.msg);
	rt_ctx *tc = rt_ctx_new(tm, 64, 16, &err);
	assert_non_null(tc);
	if (!strcmp(cond, "features"))
		assert_int_equal(rt_ctx_set_taps(tc, d->cfg.taps, d->cfg.n_taps, &err), 0);
	int32_t prompt[NPROMPT];
	uint64_t s = seed;
	for (int i = 0; i < NPROMPT; i++)
		prompt[i] = (int32_t)(tu_rand(&s) % V);
	/* the target commits the first NPROMPT-1 tokens; the last is the anchor */
	assert_int_equal(rt_ctx_feed(tc, prompt, NPROMPT - 1, NULL, &err), 0);
	rt_bd_state *st = rt_bd_state_new(d, 64, &err);
	assert_non_null(st);
	int pos0 = NPROMPT - 1, n_win = 0;
	const int32_t *win = NULL;
	if (!strcmp(cond, "features")) {
		assert_int_equal(rt_bd_append(st, tc->tap_cache, 3, &err), 0); /* in two pieces */
		assert_int_equal(rt_bd_append(st, tc->tap_cache + (size_t)3 * d->cfg.n_taps * DIM, pos0 - 3, &err), 0);
	} else {
		n_win = d->cfg.window < pos0 ? d->cfg.window : pos0;
		win = prompt + pos0 - n_win;
	}
	int32_t blk[RT_BD_MAX_BLOCK];
	blk[0] = prompt[pos0];
	for (int j = 1; j < block; j++)
		blk[j] = j % 3 == 2 ? (int32_t)(tu_rand(&s) % V) : -1; /* some positions already fixed */
	float *lg = malloc((size_t)block * draft_vocab * sizeof(float));
	double *ref = malloc((size_t)block * draft_vocab * sizeof(double));
	assert_int_equal(rt_bd_forward(st, blk, pos0, win, n_win, lg, &err), 0);
	ref_block(d, tc->tap_cache, !strcmp(cond, "features") ? pos0 : 0, blk, pos0, win, n_win, ref);
	/* fp32 against double through <= 2 layers of width 16: each op adds a
	 * few ulps (~1e-7 relative) over sums of <= 48 terms; 1e-4 of the logit
	 * scale leaves two orders of magnitude of room and still catches any
	 * wrong index, mask or rotation (those move logits by O(1)). */
	double scale = 0, maxd = 0;
	for (int i = 0; i < block * draft_vocab; i++) {
		assert_true(isfinite(lg[i]));
		scale = fmax(scale, fabs(ref[i]));
		maxd = fmax(maxd, fabs(lg[i] - ref[i]));
	}
	printf("  %-8s %-13s layers %d B %2d Vd %2d: max |C - ref| %.2e (logit scale %.2f)\n", cond, attn, n_layers,
	       block, draft_vocab, maxd, scale);
	assert_true(scale > 0.1);
	assert_true(maxd <= 1e-4 * (1 + scale));
	free(lg);
	free(ref);
	rt_bd_state_free(st);
	rt_ctx_free(tc);
	rt_block_drafter_free(d);
	rt_model_free(tm);
	tbu_rmdir(dir);
}

static void test_forward_features(void **state)
{
	check_forward("features", "bidirectional", 1, 4, 13, 1);
	check_forward("features", "causal", 2, 6, 9, 2);
	check_forward("features", "bidirectional", 3, 8, 5, 3);
}

static void test_forward_tokens(void **state)
{
	check_forward("tokens", "bidirectional", 1, 4, 13, 4);
	check_forward("tokens", "causal", 2, 5, 7, 5);
}

/* Taps: the last layer's tap, RMS-normed with the output norm, is the
 * model's own final hidden state; layer l's tap is the last tap of a view
 * running layers 0..l. Logits with taps on equal logits without, bit for bit. */
static void test_taps(void **state)
{
	enum { V = 11, DIM = 16, L = 4, T = 7 };
	rt_model *m = tu_tiny_llama(V, DIM, L, 4, 2, 24, 9);
	sw_err err;
	rt_ctx *a = rt_ctx_new(m, 32, 8, &err), *b = rt_ctx_new(m, 32, 8, &err);
	int taps[3] = { 0, 2, 3 };
	assert_int_equal(rt_ctx_set_taps(a, taps, 3, &err), 0);
	int32_t tok[T] = { 1, 5, 3, 9, 0, 2, 7 }, pos[T];
	for (int i = 0; i < T; i++)
		pos[i] = i;
	float la[T * V], lb[T * V], ha[T * DIM], hb[T * DIM];
	assert_int_equal(rt_ctx_eval(a, tok, pos, T, NULL, la, ha, &err), 0);
	assert_int_equal(rt_ctx_eval(b, tok, pos, T, NULL, lb, hb, &err), 0);
	assert_memory_equal(la, lb, sizeof(la));
	assert_memory_equal(ha, hb, sizeof(ha));
	int keep[T];
	for (int i = 0; i < T; i++)
		keep[i] = i;
	rt_ctx_commit(a, keep, T);
	const int row = 3 * DIM;
	for (int t = 0; t < T; t++) {
		float y[DIM];
		ref_rmsnorm(y, a->tap_cache + (size_t)t * row + 2 * DIM, m->w.out_norm, 1, DIM, m->cfg.norm_eps);
		assert_memory_equal(y, ha + (size_t)t * DIM, sizeof(y));
	}
	for (int k = 0; k < 2; k++) {
		int first[L];
		for (int i = 0; i <= taps[k]; i++)
			first[i] = i;
		rt_model *v = rt_model_layerskip(m, first, taps[k] + 1, 0, &err);
		assert_non_null(v);
		rt_ctx *c = rt_ctx_new(v, 32, 8, &err);
		float hv[T * DIM];
		assert_int_equal(rt_ctx_eval(c, tok, pos, T, NULL, NULL, hv, &err), 0);
		for (int t = 0; t < T; t++) {
			float y[DIM];
			ref_rmsnorm(y, a->tap_cache + (size_t)t * row + (size_t)k * DIM, m->w.out_norm, 1, DIM, m->cfg.norm_eps);
			assert_memory_equal(y, hv + (size_t)t * DIM, sizeof(y));
		}
		rt_ctx_free(c);
		rt_model_free(v);
	}
	/* commit moves tap rows with the kept entries: stage 3, keep {0, 2} */
	int32_t t3[3] = { 4, 6, 8 }, p3[3] = { T, T + 1, T + 1 };
	uint64_t mask[3] = { 1, 3, 5 }; /* entry 2 sees itself and entry 0 */
	assert_int_equal(rt_ctx_eval(a, t3, p3, 3, mask, NULL, NULL, &err), 0);
	float staged2[3 * DIM];
	memcpy(staged2, a->tap_cache + (size_t)(T + 2) * row, sizeof(staged2));
	int k2[2] = { 0, 2 };
	rt_ctx_commit(a, k2, 2);
	assert_memory_equal(a->tap_cache + (size_t)(T + 1) * row, staged2, sizeof(staged2));
	/* refused: a table model, a non-empty context, bad layers */
	assert_int_equal(rt_ctx_set_taps(a, taps, 3, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "empty context"));
	int bad[2] = { 2, 2 };
	assert_int_equal(rt_ctx_set_taps(b, bad, 2, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "increasing"));
	rt_ctx_free(a);
	rt_ctx_free(b);
	rt_model_free(m);
}

/* ---- malformed files ---- */

static void replace(char *s, const char *from, const char *to)
{
	char *p = strstr(s, from);
	assert_non_null(p);
	char tail[4096];
	snprintf(tail, sizeof(tail), "%s", p + strlen(from));
	sprintf(p, "%s%s", to, tail);
}

struct bad_case {
	const char *what;
	const char *from, *to;   /* config edit, or NULL */
	const char *skip, *bad, *extra;
	const char *cond;
	bool no_config;
	const char *want[4];     /* substrings of the message */
};

static void test_malformed(void **state)
{
	enum { V = 13, DIM = 16 };
	rt_model *tm = tu_tiny_llama(V, DIM, 3, 4, 2, 24, 7);
	static const struct bad_case cases[] = {
		{ "width", "\"dim\": 16", "\"dim\": 24", 0, 0, 0, 0, 0,
		  { "config.json", "$.target.dim", "expected 16", "found 24" } },
		{ "vocab", "\"vocab\": 13", "\"vocab\": 49152", 0, 0, 0, 0, 0,
		  { "config.json", "$.target.vocab", "expected 13", "found 49152" } },
		{ "layers", "\"n_layers\": 3}", "\"n_layers\": 30}", 0, 0, 0, 0, 0,
		  { "config.json", "$.target.n_layers", "expected 3", "found 30" } },
		{ "draft vocab", "\"draft_vocab\": 13", "\"draft_vocab\": 14", 0, 0, 0, 0, 0,
		  { "config.json", "$.draft_vocab", "14" } },
		{ "tap", "[0, 2]", "[0, 3]", 0, 0, 0, 0, 0, { "config.json", "$.taps[1]", "3" } },
		{ "tap order", "[0, 2]", "[2, 0]", 0, 0, 0, 0, 0, { "config.json", "$.taps[1]", "above the previous tap 2", "found 0" } },
		{ "conditioning", "\"features\"", "\"diffusion\"", 0, 0, 0, 0, 0,
		  { "config.json", "$.conditioning", "expected \"features\" or \"tokens\"", "found \"diffusion\"" } },
		{ "attention", "\"bidirectional\"", "\"sideways\"", 0, 0, 0, 0, 0,
		  { "config.json", "$.block_attention", "found \"sideways\"" } },
		{ "format", "specwright-block-drafter", "eagle", 0, 0, 0, 0, 0,
		  { "config.json", "$.format", "found \"eagle\"" } },
		{ "unknown field", "\"window\"", "\"windw\"", 0, 0, 0, 0, 0, { "config.json", "windw" } },
		{ "block", "\"block\": 4", "\"block\": 1", 0, 0, 0, 0, 0, { "config.json", "$.block" } },
		{ "heads", "\"n_kv_heads\": 2", "\"n_kv_heads\": 3", 0, 0, 0, 0, 0, { "config.json", "n_kv_heads" } },
		{ "json", "}\n", "", 0, 0, 0, 0, 0, { "config.json" } },
		{ "shape", 0, 0, 0, "layers.0.wk", 0, 0, 0,
		  { "model.safetensors", "layers.0.wk", "expected shape [8, 16]", "found [9, 16]" } },
		{ "fc shape", 0, 0, 0, "fc", 0, 0, 0, { "model.safetensors", "fc", "expected shape [16, 32]", "found [17, 32]" } },
		{ "missing", 0, 0, "layers.0.w_up", 0, 0, 0, 0, { "model.safetensors", "layers.0.w_up", "missing", "[32, 16]" } },
		{ "extra", 0, 0, 0, 0, "layers.1.wq", 0, 0, { "model.safetensors", "layers.1.wq", "not expected" } },
		{ "tokens with fc", "\"features\"", "\"tokens\"", 0, 0, 0, "features", 0, { "model.safetensors", "fc", "not expected" } },
		{ "no config", 0, 0, 0, 0, 0, 0, true, { "config.json", "cannot read" } },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad_case *bc = &cases[i];
		tbu_opts o = tbu_default(tm);
		o.draft_vocab = V;
		o.n_taps = 2, o.taps[0] = 0, o.taps[1] = 2;
		char cfg[4096], dir[64];
		tbu_config_text(tm, &o, cfg, sizeof(cfg));
		if (bc->from)
			replace(cfg, bc->from, bc->to);
		o.config_override = cfg;
		o.skip_tensor = bc->skip;
		o.bad_tensor = bc->bad;
		o.extra_tensor = bc->extra;
		tbu_tmpdir(dir);
		assert_int_equal(tbu_write(dir, tm, &o, 3), 0);
		if (bc->no_config) {
			char p[128];
			snprintf(p, sizeof(p), "%s/config.json", dir);
			unlink(p);
		}
		sw_err err = { 0 };
		rt_block_drafter *d = rt_block_drafter_load(dir, tm, &err);
		printf("  %-15s -> %s\n", bc->what, err.msg);
		if (d)
			fail_msg("case %s: a malformed drafter was accepted", bc->what);
		assert_true(err.code < 0);
		for (int k = 0; k < 4 && bc->want[k]; k++)
			if (!strstr(err.msg, bc->want[k]))
				fail_msg("case %s: message lacks \"%s\": %s", bc->what, bc->want[k], err.msg);
		tbu_rmdir(dir);
	}
	/* and the unmodified file loads */
	tbu_opts o = tbu_default(tm);
	char dir[64];
	tbu_tmpdir(dir);
	assert_int_equal(tbu_write(dir, tm, &o, 3), 0);
	sw_err err;
	rt_block_drafter *d = rt_block_drafter_load(dir, tm, &err);
	assert_non_null(d);
	rt_block_drafter_free(d);
	/* a table target has no embedding to share */
	float P[V * V];
	tu_random_table(P, V, V, 0.0, 1);
	rt_model *tab = rt_model_table(V, 1, P, "table", &err);
	assert_null(rt_block_drafter_load(dir, tab, &err));
	assert_non_null(strstr(err.msg, "transformer"));
	rt_model_free(tab);
	tbu_rmdir(dir);
	rt_model_free(tm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_taps),
		cmocka_unit_test(test_forward_features),
		cmocka_unit_test(test_forward_tokens),
		cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
