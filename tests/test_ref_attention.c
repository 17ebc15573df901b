/* ref_attention against a double-precision loop: GQA ratios 1/3/4/8, head
 * dims 64/128/80, n_ctx 0 and non-zero, causal (NULL) and random-tree ancestor
 * masks including T > 64 (several mask words per row), guard zones around the
 * output and the exact-size scratch, NaN rows past the last key slot (must
 * never be read), and a per-element bound derived from fp32 rounding. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/ref/ref.h"

#include "check.h"

struct attn_case {
	int T, n_ctx, n_heads, n_kv_heads, head_dim;
	int tree; /* 0: NULL (causal) mask, 1: random tree, 2: chain tree as a mask */
};

/* Random tree on T nodes (parent[i] < i, node 0 the root); mask bit j of row
 * i set iff j is i or an ancestor of i. */
static uint64_t *make_mask(int T, int kind)
{
	const int words = (T + 63) / 64;
	uint64_t *m = calloc((size_t)T * words, sizeof(*m));
	int *parent = malloc((size_t)T * sizeof(*parent));
	assert_non_null(m);
	for (int i = 0; i < T; i++) {
		parent[i] = i == 0 ? -1 : kind == 2 ? i - 1 : (int)((rnd() + 1.0) / 2.0 * i);
		for (int j = i; j >= 0; j = parent[j])
			m[(size_t)i * words + j / 64] |= 1ull << (j % 64);
	}
	free(parent);
	return m;
}

static int visible(const uint64_t *mask, int T, int i, int j)
{
	if (!mask)
		return j <= i;
	return (int)((mask[(size_t)i * ((T + 63) / 64) + j / 64] >> (j % 64)) & 1u);
}

/* The bound, per output element (t, h, d). Scores s_j = scale q.k_j carry
 * ds_j = (gamma_hd + 2u) scale sum |q k_j| (the dot, the product with scale,
 * and scale = 1/sqrtf(hd) itself rounded). The max m cancels in the
 * normalisation, but the rounding of s_j - m adds u |s_j - m| to the exponent
 * and expf one ulp (2u) relative: each p_j is off by a relative
 * E_j = ds_j + u |s_j - m| + 2u. Normalised weights then move by at most
 * w_j 2E/(1-E) (E = max_j E_j), so the output moves by 2E/(1-E) sum w_j |v_jd|.
 * Accumulating sum p_j v_jd (N axpy steps) costs gamma_{N+1} and sum p_j
 * gamma_N, both relative to sum w_j |v_jd|; the division one u. Total
 * (2E/(1-E) + gamma_{N+1} + gamma_N + u) sum w_j |v_jd|, times (1 + 2E +
 * gamma_N) for the p' vs p in that last sum. A query with no visible key
 * (possible only with a mask and n_ctx = 0) must give exactly 0. */
static void naive_attention(double *out, double *bound, const float *q, const float *k,
                            const float *v, const struct attn_case *c, const uint64_t *mask)
{
	const int T = c->T, nc = c->n_ctx, nh = c->n_heads, hd = c->head_dim;
	const int group = nh / c->n_kv_heads;
	const size_t kvr = (size_t)c->n_kv_heads * hd;
	const double scale = 1.0 / sqrt((double)hd);
	double *s = malloc((size_t)(nc + T) * sizeof(*s)), *ds = malloc((size_t)(nc + T) * sizeof(*ds));
	char *vis = malloc((size_t)(nc + T));

	for (int t = 0; t < T; t++)
		for (int h = 0; h < nh; h++) {
			const float *qr = q + ((size_t)t * nh + h) * hd;
			const int g = h / group;
			double *o = out + ((size_t)t * nh + h) * hd, *b = bound + ((size_t)t * nh + h) * hd;
			double m = -INFINITY;
			int n_vis = 0;
			for (int j = 0; j < nc + T; j++) {
				vis[j] = j < nc || visible(mask, T, t, j - nc);
				if (!vis[j])
					continue;
				double dot = 0.0, mag = 0.0;
				for (int d = 0; d < hd; d++) {
					double p = (double)qr[d] * k[(size_t)j * kvr + (size_t)g * hd + d];
					dot += p;
					mag += fabs(p);
				}
				s[j] = dot * scale;
				ds[j] = (gamma_n(hd) + 2.0 * U32) * scale * mag;
				m = fmax(m, s[j]);
				n_vis++;
			}
			for (int d = 0; d < hd; d++)
				o[d] = b[d] = 0.0;
			if (n_vis == 0)
				continue;
			double sum = 0.0, E = 0.0;
			for (int j = 0; j < nc + T; j++)
				if (vis[j]) {
					sum += exp(s[j] - m);
					E = fmax(E, ds[j] + U32 * fabs(s[j] - m) + 2.0 * U32);
				}
			const double rel = (2.0 * E / (1.0 - E) + gamma_n(n_vis + 1) + gamma_n(n_vis) + U32) *
			                   (1.0 + 2.0 * E + gamma_n(n_vis));
			for (int j = 0; j < nc + T; j++) {
				if (!vis[j])
					continue;
				double w = exp(s[j] - m) / sum;
				const float *vr = v + (size_t)j * kvr + (size_t)g * hd;
				for (int d = 0; d < hd; d++) {
					o[d] += w * vr[d];
					b[d] += rel * w * fabs((double)vr[d]);
				}
			}
		}
	free(s);
	free(ds);
	free(vis);
}

/* Runs one case; returns the output (caller frees with gfree) so that cases
 * can be compared with each other. */
static float *run_case(const struct attn_case *c, const uint64_t *mask, double qscale, int check)
{
	const int T = c->T, nc = c->n_ctx, nh = c->n_heads, hd = c->head_dim;
	const size_t nq = (size_t)T * nh * hd, kvr = (size_t)c->n_kv_heads * hd;
	const size_t nkv = (size_t)(nc + T + 3) * kvr; /* 3 poisoned slots past the end */
	float *q = galloc(nq), *k = galloc(nkv), *v = galloc(nkv), *out = galloc(nq);
	float *scratch = galloc((size_t)(nc + T));
	double *ref = malloc(nq * sizeof(*ref)), *bound = malloc(nq * sizeof(*bound));
	char what[96];

	fill(q, nq, qscale);
	fill(k, nkv, 1.0);
	fill(v, nkv, 1.0);
	for (size_t i = (size_t)(nc + T) * kvr; i < nkv; i++)
		k[i] = v[i] = NAN;
	ref_attention(out, q, k, v, T, nc, nh, c->n_kv_heads, hd, mask, scratch);
	snprintf(what, sizeof(what), "attention T%d ctx%d h%d kv%d hd%d mask%d", T, nc, nh,
	         c->n_kv_heads, hd, c->tree);
	gcheck(what, out, nq);
	gcheck("attention scratch", scratch, (size_t)(nc + T));
	if (check) {
		naive_attention(ref, bound, q, k, v, c, mask);
		check_close(what, out, ref, bound, nq);
	}
	gfree(q);
	gfree(k);
	gfree(v);
	gfree(scratch);
	free(ref);
	free(bound);
	return out;
}

static void test_attention_shapes(void **state)
{
	static const struct attn_case cases[] = {
		{1, 0, 4, 4, 64, 0},     /* T = 1, nothing but itself */
		{1, 37, 9, 3, 64, 0},    /* decode step, GQA 3 */
		{1, 33, 8, 8, 128, 1},   /* GQA 1 */
		{5, 0, 8, 2, 128, 1},    /* GQA 4, tree, no context */
		{7, 260, 8, 1, 80, 1},   /* GQA 8, hd 80 */
		{33, 111, 9, 3, 64, 0},
		{33, 111, 9, 3, 64, 1},
		{70, 0, 4, 1, 64, 1},    /* two mask words per row */
		{70, 33, 6, 2, 80, 0},
		{130, 5, 2, 2, 64, 1},   /* three mask words */
		{8, 1024, 9, 3, 64, 1},  /* the SmolLM2 verify shape */
		{3, 2, 3, 1, 80, 1},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t *mask = cases[i].tree ? make_mask(cases[i].T, cases[i].tree) : NULL;
		gfree(run_case(&cases[i], mask, 1.0, 1));
		free(mask);
	}
}

/* Peaked softmax: q scaled up so scores span ~100 (exp(s) would overflow
 * fp32 without the max subtraction), still within the derived bound. */
static void test_attention_large_scores(void **state)
{
	static const struct attn_case cases[] = {{5, 40, 4, 2, 64, 1}, {9, 0, 3, 3, 80, 0}};
	(void)state;
	for (size_t i = 0; i < 2; i++) {
		uint64_t *mask = cases[i].tree ? make_mask(cases[i].T, cases[i].tree) : NULL;
		gfree(run_case(&cases[i], mask, 200.0, 1));
		free(mask);
	}
}

/* A chain tree as an explicit mask is the causal mask: the result must be
 * bit-identical to the NULL-mask path (masked slots contribute exact zeros). */
static void test_attention_chain_equals_causal(void **state)
{
	(void)state;
	for (int T = 1; T <= 70; T += 23) {
		struct attn_case causal = {T, 17, 6, 2, 64, 0}, chain = {T, 17, 6, 2, 64, 2};
		uint64_t *mask = make_mask(T, 2);
		const uint64_t saved = rng_state;
		float *a = run_case(&causal, NULL, 1.0, 0);
		rng_state = saved; /* same inputs */
		float *b = run_case(&chain, mask, 1.0, 0);
		assert_memory_equal(a, b, (size_t)T * 6 * 64 * sizeof(*a));
		gfree(a);
		gfree(b);
		free(mask);
	}
}

/* A row with no visible key (no context, empty mask row) is defined as 0. */
static void test_attention_empty_row(void **state)
{
	const int T = 3, nh = 2, hd = 64;
	uint64_t mask[3] = {0x1, 0x0, 0x7}; /* row 1 sees nothing */
	float *q = galloc((size_t)T * nh * hd), *k = galloc((size_t)T * nh * hd);
	float *v = galloc((size_t)T * nh * hd), *out = galloc((size_t)T * nh * hd), scratch[3];
	(void)state;
	fill(q, (size_t)T * nh * hd, 1.0);
	fill(k, (size_t)T * nh * hd, 1.0);
	fill(v, (size_t)T * nh * hd, 1.0);
	ref_attention(out, q, k, v, T, 0, nh, nh, hd, mask, scratch);
	for (int i = 0; i < nh * hd; i++)
		assert_true(out[nh * hd + i] == 0.0f);
	for (int i = 0; i < T * nh * hd; i++)
		assert_true(isfinite(out[i]));
	/* row 0 sees only key 0: the output is v[0] up to one rounding. */
	for (int h = 0; h < nh; h++)
		for (int d = 0; d < hd; d++)
			assert_true(fabsf(out[h * hd + d] - v[h * hd + d]) <= 2.0f * (float)U32 * fabsf(v[h * hd + d]));
	gcheck("attention empty row", out, (size_t)T * nh * hd);
	gfree(q);
	gfree(k);
	gfree(v);
	gfree(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attention_shapes),
		cmocka_unit_test(test_attention_large_scores),
		cmocka_unit_test(test_attention_chain_equals_causal),
		cmocka_unit_test(test_attention_empty_row),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
