/* ref_tree_attention (kernels/ref/tree_attention.c) against an independent
 * computation: visibility from the tree's parent links (not its mask bits),
 * or the causal rule of an appended block; scores, softmax and the weighted
 * mean in double from the same widened 16-bit values, with the exact
 * 1/sqrt(head_dim).
 *
 * Bound. The op sums q.k in fp32 (each product of two 16-bit values is exact
 * in fp32): within gamma_hd sum|q_d k_d| of the exact dot; times
 * fl(1/sqrtf(hd)) (2u from the exact scale, sqrtf and the division each
 * correctly rounded) and one more rounding: score j is off by at most
 * delta_j = scale gamma_hd sum|q k| (1 + 4u) + 4u |s_j|. The softmax is in
 * double from those fp32 scores; the max cancels in the normalisation, so
 * the weights are the exact ones times e^(d_j), |d_j| <= delta_j, and the
 * weighted mean moves by at most E / (1 - E) * max_j |v_j - out| with
 * E = e^(max delta) - 1 (the mean of V under weights each off by a factor
 * within [1 - E, 1 + E]). Plus the final rounding to fp32 (u |out|) and the
 * double arithmetic (2^-40 max |v|, generous).
 * Cases: fp16 and bf16; MHA and GQA (2 and 4 query heads per KV head); head
 * dims 8, 24, 64; contexts 0, 5, 37; trees (chain, k-ary, EAGLE's preset)
 * through their ancestor masks, causal prefill and appended levels (T <
 * n_blk); sharp scores; a query that sees nothing (zeros). The scratch the
 * op is given is exactly ref_tree_attention_scratch bytes, followed by a
 * canary; the output has guard zones. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/tree.h"
#include "kernels/half.h"
#include "kernels/ref/ref.h"

#include "check.h"

typedef struct att_case {
	const char *tree;   /* NULL: causal (T == n_blk, or appended: T < n_blk) */
	int n_blk, T;       /* causal only (a tree sets both to its node count) */
	int H, KH, hd, ctx, is_f16;
	double qk_scale;    /* spread of q and k values */
	int blind_row;      /* >= 0: this query's mask row cleared (needs ctx 0) */
} att_case;

/* whether block key b is visible to query t */
static int visible(const att_case *c, const rt_tree *t, int nb, int T, int q, int b)
{
	if (!c->tree)
		return b <= nb - T + q;
	if (q == c->blind_row)
		return 0;
	for (int u = q; u >= 0; u = t->parent[u])
		if (u == b)
			return 1;
	return 0;
}

static void run_case(const att_case *c)
{
	static rt_tree t; /* large; read only when c->tree is set */
	int nb = c->n_blk, T = c->T;
	uint64_t *mask = NULL;
	int mw = 0;
	if (c->tree) {
		sw_err err;
		if (rt_tree_parse(c->tree, NULL, &t, &err))
			fail_msg("%s: %s", c->tree, err.msg);
		nb = T = t.n;
		mw = t.words;
		mask = malloc(sizeof(*mask) * (size_t)T * mw);
		memcpy(mask, t.mask, sizeof(*mask) * (size_t)T * mw);
		if (c->blind_row >= 0)
			memset(mask + (size_t)c->blind_row * mw, 0, sizeof(*mask) * (size_t)mw);
	}
	const int H = c->H, KH = c->KH, hd = c->hd, ctx = c->ctx, nk = ctx + nb, G = H / KH;
	const int kvd = KH * hd;
	const size_t nq = (size_t)T * H * hd;
	uint16_t *q = malloc(sizeof(*q) * nq), *k = malloc(sizeof(*k) * (size_t)nk * kvd),
	         *v = malloc(sizeof(*v) * (size_t)nk * kvd);
	for (size_t i = 0; i < nq; i++)
		q[i] = sw_f32_to_half((float)(c->qk_scale * rnd()), c->is_f16);
	for (size_t i = 0; i < (size_t)nk * kvd; i++) {
		k[i] = sw_f32_to_half((float)(c->qk_scale * rnd()), c->is_f16);
		v[i] = sw_f32_to_half((float)(2.0 * rnd()), c->is_f16);
	}
	const size_t sbytes = ref_tree_attention_scratch(ctx, nb, hd);
	unsigned char *scratch = malloc(sbytes + 64);
	memset(scratch + sbytes, 0xab, 64);
	float *out = galloc(nq);
	ref_tree_attention(out, q, k, v, ctx, T, nb, H, KH, hd, mask, mw, c->is_f16, scratch);
	for (int i = 0; i < 64; i++)
		assert_int_equal(scratch[sbytes + i], 0xab);

	double *ref = malloc(sizeof(*ref) * nq), *bound = malloc(sizeof(*bound) * nq);
	double *s = malloc(sizeof(*s) * (size_t)nk), *dl = malloc(sizeof(*dl) * (size_t)nk);
	int *vis = malloc(sizeof(*vis) * (size_t)nk);
	const double scale = 1.0 / sqrt((double)hd);
	for (int tq = 0; tq < T; tq++)
		for (int h = 0; h < H; h++) {
			const int kh = h / G;
			const uint16_t *qr = q + ((size_t)tq * H + h) * hd;
			double mx = -INFINITY, dmax = 0.0;
			int any = 0;
			for (int j = 0; j < nk; j++) {
				vis[j] = j < ctx || visible(c, &t, nb, T, tq, j - ctx);
				if (!vis[j])
					continue;
				const uint16_t *kr = k + (size_t)j * kvd + (size_t)kh * hd;
				double dot = 0.0, mag = 0.0;
				for (int d = 0; d < hd; d++) {
					const double p = (double)sw_half_to_f32(qr[d], c->is_f16) *
					                 sw_half_to_f32(kr[d], c->is_f16);
					dot += p;
					mag += fabs(p);
				}
				s[j] = dot * scale;
				dl[j] = scale * gamma_n(hd) * mag * (1 + 4 * U32) + 4 * U32 * fabs(s[j]);
				mx = s[j] > mx ? s[j] : mx;
				dmax = dl[j] > dmax ? dl[j] : dmax;
				any = 1;
			}
			double acc[256] = {0}, den = 0.0, vmax = 0.0;
			for (int j = 0; any && j < nk; j++) {
				if (!vis[j])
					continue;
				const double w = exp(s[j] - mx);
				const uint16_t *vr = v + (size_t)j * kvd + (size_t)kh * hd;
				den += w;
				for (int d = 0; d < hd; d++) {
					const double x = sw_half_to_f32(vr[d], c->is_f16);
					acc[d] += w * x;
					vmax = fabs(x) > vmax ? fabs(x) : vmax;
				}
			}
			const double E = expm1(dmax);
			for (int d = 0; d < hd; d++) {
				const size_t o = ((size_t)tq * H + h) * hd + d;
				ref[o] = any ? acc[d] / den : 0.0;
				double spread = 0.0; /* max_j |v_j - out| over the visible keys */
				for (int j = 0; any && j < nk; j++)
					if (vis[j]) {
						const double x = sw_half_to_f32(
						        v[(size_t)j * kvd + (size_t)kh * hd + d], c->is_f16);
						spread = fabs(x - ref[o]) > spread ? fabs(x - ref[o]) : spread;
					}
				bound[o] = any ? E / (1 - E) * spread + U32 * fabs(ref[o]) + 0x1p-40 * vmax : 0.0;
			}
		}
	char what[128];
	snprintf(what, sizeof(what), "tree_attention %s T%d nb%d H%d KH%d hd%d ctx%d %s",
	         c->tree ? c->tree : "causal", T, nb, H, KH, hd, ctx, c->is_f16 ? "f16" : "bf16");
	check_close(what, out, ref, bound, nq);
	gcheck(what, out, nq);
	if (c->blind_row >= 0)
		for (size_t i = 0; i < (size_t)H * hd; i++)
			assert_true(out[(size_t)c->blind_row * H * hd + i] == 0.0f);
	free(mask);
	free(q);
	free(k);
	free(v);
	free(scratch);
	gfree(out);
	free(ref);
	free(bound);
	free(s);
	free(dl);
	free(vis);
}

static void test_trees(void **state)
{
	(void)state;
	static const char *const trees[] = {"chain:4", "kary:2:3", "eagle25"};
	rng_state = 0x7a11;
	for (int ti = 0; ti < 3; ti++)
		for (int f16 = 0; f16 < 2; f16++)
			for (int ctx_i = 0; ctx_i < 3; ctx_i++) {
				const int ctxs[] = {0, 5, 37};
				att_case c = {.tree = trees[ti], .H = 4, .KH = 2, .hd = 24, .ctx = ctxs[ctx_i],
				              .is_f16 = f16, .qk_scale = 1.0, .blind_row = -1};
				run_case(&c);
			}
}

static void test_heads_and_dims(void **state)
{
	(void)state;
	static const int hk[][2] = {{2, 2}, {4, 2}, {4, 1}};
	static const int dims[] = {8, 24, 64};
	rng_state = 0x7a12;
	for (int i = 0; i < 3; i++)
		for (int d = 0; d < 3; d++) {
			att_case c = {.tree = "kary:2:2", .H = hk[i][0], .KH = hk[i][1], .hd = dims[d],
			              .ctx = 5, .is_f16 = (i + d) % 2, .qk_scale = 1.0, .blind_row = -1};
			run_case(&c);
		}
}

static void test_causal(void **state)
{
	(void)state;
	rng_state = 0x7a13;
	for (int f16 = 0; f16 < 2; f16++) {
		att_case prefill = {.n_blk = 9, .T = 9, .H = 4, .KH = 1, .hd = 64, .ctx = 0,
		                    .is_f16 = f16, .qk_scale = 1.0, .blind_row = -1};
		run_case(&prefill);
		prefill.ctx = 37;
		run_case(&prefill);
		att_case append = {.n_blk = 7, .T = 3, .H = 2, .KH = 2, .hd = 24, .ctx = 5,
		                   .is_f16 = f16, .qk_scale = 1.0, .blind_row = -1};
		run_case(&append);
	}
}

/* sharp softmax (scores in the tens) and a query that sees no key */
static void test_sharp_and_blind(void **state)
{
	(void)state;
	rng_state = 0x7a14;
	att_case sharp = {.tree = "kary:2:3", .H = 4, .KH = 2, .hd = 64, .ctx = 37, .is_f16 = 0,
	                  .qk_scale = 3.0, .blind_row = -1};
	run_case(&sharp);
	sharp.is_f16 = 1;
	run_case(&sharp);
	att_case blind = {.tree = "chain:4", .H = 2, .KH = 1, .hd = 8, .ctx = 0, .is_f16 = 1,
	                  .qk_scale = 1.0, .blind_row = 2};
	run_case(&blind);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trees),
		cmocka_unit_test(test_heads_and_dims),
		cmocka_unit_test(test_causal),
		cmocka_unit_test(test_sharp_and_blind),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
