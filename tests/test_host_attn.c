/* The host tree attention (runtime/device/host_attn.c) against kernels/ref's
 * ref_attention_append on the same widened inputs: T = 1, 3, 26, 63 query
 * rows, appended to blocks (nb > T) or not, contexts 0 / 37 / 200, GQA 9:3,
 * 4:4, 6:1, head_dim 64 and 20 (not a multiple of the vector width),
 * causal and random tree masks, fp16 and bf16, both paths, one thread and
 * the pool; sliding windows (ha_tree_attention_window: the query at ctx +
 * its depth, against kernels/ref's ref_tree_attention_window) smaller and
 * larger than the context; guard zones around the output; NaN in K/V slots no query sees;
 * one thread and the pool (each splitting the work its own way) bit for bit;
 * rows (test_rows_hd64): at head_dim 64, where the AVX2 path reads one query
 * position's K/V in place (the direct path) and more positions from widened
 * blocks (8 and 4 keys a step), the first L of 10 queries over the first L
 * block entries give the first L rows of the 10-query call bit for bit, L =
 * 1..9 (rows regions: a verify of L rows), causal and tree masks, windows,
 * fp16 and bf16, one thread and the pool.
 *
 * Bound, per element d of a row: both sides compute each score within
 * gamma_hd (the reference's dot) and gamma_{hd/8+3} (8 lanes + 3 levels)
 * of scale * q.k_j, plus one rounding for the scale: together
 * Delta = max_j (gamma_hd + gamma_{hd/8+3} + 2u) * scale * sum |q k_j|. A
 * shift of every score by at most Delta moves each normalised weight by a
 * factor within exp(+-2 Delta); the exponential (expf's 1 ulp; the AVX2
 * path's polynomial, 2 ulp: 4u relative per weight, 8u once normalised),
 * the fp32 sum of weights and the fp32 accumulation of p_j v_j over n keys
 * add at most 8u + gamma_{n+4} relative on each side. So |o - o_ref| <=
 * (expm1(2 Delta) + 4 gamma_{n+4} + 16u) * sum_j p_j |v_jd|, with p from a
 * double softmax. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "device/host_attn.h"
#include "device/host_gemm.h"
#include "formats/gguf.h"
#include "kernels/ref/ref.h"

#include "check.h"

static float widen(uint16_t h, bool f16)
{
	return f16 ? gguf_f16_to_f32(h) : gguf_bf16_to_f32(h);
}

static uint16_t narrow(float f, bool f16)
{
	return f16 ? gguf_f32_to_f16(f) : gguf_f32_to_bf16(f);
}

typedef struct acase {
	int T, ctx, nb, H, KH, hd;
	int masked;    /* 0 causal, 1 random tree */
	int dead_slot; /* >= 0: a block slot no query sees, its K/V set to NaN */
	int window;    /* a sliding window (ha_tree_attention_window), 0: none */
} acase;

static bool vis(const acase *c, const uint64_t *mask, int mw, int t, int j)
{
	const int b = j - c->ctx;
	if (b < 0 && c->window) { /* the query sits at ctx + its depth */
		int depth = -1;
		for (int e = 0; e < c->nb; e++)
			depth += mask ? (int)((mask[(size_t)t * mw + e / 64] >> (e % 64)) & 1u)
			              : e <= c->nb - c->T + t;
		return c->ctx + depth - j < c->window;
	}
	if (b < 0)
		return true;
	if (mask)
		return (mask[(size_t)t * mw + b / 64] >> (b % 64)) & 1u;
	return b <= c->nb - c->T + t;
}

static void run(const acase *c, bool f16, int path, int threads)
{
	const int nk = c->ctx + c->nb, kvd = c->KH * c->hd, G = c->H / c->KH, mw = (c->nb + 63) / 64;
	const size_t nq = (size_t)c->T * c->H * c->hd, nkv = (size_t)nk * kvd;
	uint16_t *q = malloc(2 * nq), *k = malloc(2 * nkv), *v = malloc(2 * nkv);
	float *qf = malloc(4 * nq), *kf = malloc(4 * nkv), *vf = malloc(4 * nkv);
	float *ro = malloc(4 * nq), *scr = malloc(4 * (size_t)(nk + 1)), *got = galloc(nq);
	double *ref = malloc(8 * nq), *bound = malloc(8 * nq), *p = malloc(8 * (size_t)nk);
	uint64_t *mask = NULL;
	char what[128];
	assert_true(q && k && v && qf && kf && vf && ro && scr && ref && bound && p);
	for (size_t i = 0; i < nq; i++)
		qf[i] = widen(q[i] = narrow((float)(2.0 * rnd()), f16), f16);
	for (size_t i = 0; i < nkv; i++) {
		kf[i] = widen(k[i] = narrow((float)(2.0 * rnd()), f16), f16);
		vf[i] = widen(v[i] = narrow((float)rnd(), f16), f16);
	}
	if (c->masked) { /* a random tree over the block: entry i's parent is < i */
		int *par = malloc(sizeof(*par) * (size_t)c->nb);
		mask = calloc((size_t)c->T * mw, sizeof(*mask));
		assert_true(par && mask);
		for (int i = 0; i < c->nb; i++)
			par[i] = i ? (int)((rnd() + 1.0) * 0.5 * i) % i : -1;
		for (int t = 0; t < c->T; t++)
			for (int e = c->nb - c->T + t; e >= 0; e = par[e])
				if (e != c->dead_slot)
					mask[(size_t)t * mw + e / 64] |= 1ull << (e % 64);
		free(par);
	}
	if (c->dead_slot >= 0)
		for (int d = 0; d < kvd; d++) {
			const size_t i = (size_t)(c->ctx + c->dead_slot) * kvd + d;
			k[i] = v[i] = f16 ? 0x7e00 : 0x7fc0;
			kf[i] = vf[i] = NAN;
		}
	if (c->window) { /* kernels/ref's windowed tree attention on the 16-bit inputs */
		void *ws = malloc(ref_tree_attention_scratch(c->ctx, c->nb, c->hd));
		assert_non_null(ws);
		ref_tree_attention_window(ro, q, k, v, c->ctx, c->T, c->nb, c->H, c->KH, c->hd, mask, mw,
		                          f16, c->window, ws);
		free(ws);
	} else {
		ref_attention_append(ro, qf, kf, vf, c->T, c->ctx, c->nb, c->H, c->KH, c->hd, mask, scr);
	}
	const double scale = 1.0 / sqrt((double)c->hd);
	for (int t = 0; t < c->T; t++)
		for (int h = 0; h < c->H; h++) {
			const float *qr = qf + ((size_t)t * c->H + h) * c->hd;
			const size_t kvo = (size_t)(h / G) * c->hd, o = ((size_t)t * c->H + h) * c->hd;
			double mx = -INFINITY, delta = 0, den = 0;
			for (int j = 0; j < nk; j++) {
				p[j] = -INFINITY;
				if (!vis(c, mask, mw, t, j))
					continue;
				double s = 0, a = 0;
				for (int d = 0; d < c->hd; d++) {
					s += (double)qr[d] * kf[(size_t)j * kvd + kvo + d];
					a += fabs((double)qr[d] * kf[(size_t)j * kvd + kvo + d]);
				}
				p[j] = s * scale;
				mx = fmax(mx, p[j]);
				delta = fmax(delta, (gamma_n(c->hd) + gamma_n((c->hd + 7) / 8 + 3) + 2 * U32) *
				                        scale * a);
			}
			for (int j = 0; j < nk; j++)
				den += p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx);
			for (int d = 0; d < c->hd; d++) {
				double pv = 0;
				for (int j = 0; j < nk; j++)
					if (p[j] != 0)
						pv += p[j] / den * fabs((double)vf[(size_t)j * kvd + kvo + d]);
				ref[o + d] = ro[o + d];
				bound[o + d] = (expm1(2 * delta) + 4 * gamma_n(nk + 4) + 16 * U32) * pv;
			}
		}
	assert_int_equal(ha_tree_attention_window(got, q, k, v, c->T, c->ctx, c->nb, c->H, c->KH, c->hd,
	                                          mask, mw, f16, c->window, path, threads), 0);
	snprintf(what, sizeof(what), "attn %s %s T%d ctx%d nb%d H%d KH%d hd%d %s%s th%d win%d",
	         f16 ? "fp16" : "bf16", hg_path_name(path), c->T, c->ctx, c->nb, c->H, c->KH, c->hd,
	         c->masked ? "tree" : "causal", c->dead_slot >= 0 ? " dead-slot" : "", threads,
	         c->window);
	check_close(what, got, ref, bound, nq);
	gcheck(what, got, nq);
	if (threads == 0) { /* one thread: the same bits as the pool's part split */
		float *one = malloc(4 * nq);
		assert_non_null(one);
		assert_int_equal(ha_tree_attention_window(one, q, k, v, c->T, c->ctx, c->nb, c->H, c->KH,
		                                          c->hd, mask, mw, f16, c->window, path, 1), 0);
		if (memcmp(one, got, 4 * nq))
			fail_msg("%s: one thread and the pool differ", what);
		free(one);
	}
	free(q), free(k), free(v), free(qf), free(kf), free(vf), free(ro), free(scr);
	free(ref), free(bound), free(p), free(mask);
	gfree(got);
}

static const acase CASES[] = {
	{1, 37, 1, 9, 3, 64, 0, -1, 0},   {1, 200, 1, 9, 3, 64, 0, -1, 0}, {3, 37, 3, 9, 3, 64, 0, -1, 0},
	{26, 200, 26, 9, 3, 64, 1, -1, 0}, {26, 37, 31, 4, 4, 20, 1, -1, 0}, {63, 0, 63, 6, 1, 64, 1, -1, 0},
	{63, 200, 70, 9, 3, 64, 0, -1, 0}, {3, 37, 4, 9, 3, 20, 1, 0, 0},   {26, 0, 26, 4, 4, 64, 0, -1, 0},
	{7, 130, 9, 6, 1, 8, 1, 1, 0},
	/* sliding windows: smaller than the context (tree, causal; GQA; a
	 * window under the block's depth), and larger than it */
	{26, 200, 26, 9, 3, 64, 1, -1, 40}, {7, 130, 9, 6, 1, 8, 0, -1, 9},
	{63, 200, 70, 9, 3, 20, 0, -1, 100}, {3, 37, 4, 4, 4, 64, 1, -1, 500},
};

static void all_cases(int path)
{
	if (!hg_path_available(path))
		skip();
	rng_state = 15;
	for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++)
		for (int f = 0; f < 2; f++)
			for (int th = 0; th <= 1; th++)
				run(&CASES[i], f, path, th);
}

static void test_portable(void **state)
{
	(void)state;
	all_cases(HG_PATH_PORTABLE);
}

static void test_avx2(void **state)
{
	(void)state;
	all_cases(HG_PATH_AVX2);
}

/* A query whose mask row is empty, with no context, gets a zero row (the
 * reference's rule), its neighbours their ordinary rows. */
static void test_empty_row(void **state)
{
	(void)state;
	const int T = 2, H = 2, hd = 16;
	uint16_t q[2 * 2 * 16], k[2 * 2 * 16], v[2 * 2 * 16];
	uint64_t mask[2] = {1, 0}; /* query 0 sees entry 0; query 1 sees nothing */
	float *out = galloc((size_t)T * H * hd);
	for (int i = 0; i < T * H * hd; i++)
		q[i] = k[i] = v[i] = gguf_f32_to_f16(0.5f);
	for (int p = HG_PATH_PORTABLE; p <= HG_PATH_AVX2; p++) {
		if (!hg_path_available(p))
			continue;
		assert_int_equal(ha_tree_attention(out, q, k, v, T, 0, T, H, H, hd, mask, 1, true, p, 1), 0);
		for (int i = 0; i < H * hd; i++) {
			assert_true(out[i] == 0.5f);
			assert_true(out[H * hd + i] == 0.0f);
		}
	}
	gcheck("attn empty row", out, (size_t)T * H * hd);
	gfree(out);
}

/* the first L queries over the first L entries of a tree of M (a rows
 * region) against the M-query call, bit for bit */
static void rows_case(int M, int ctx, int H, int KH, bool f16, int masked, int window, int path,
                      int threads)
{
	const int hd = 64, kvd = KH * hd, mw = (M + 63) / 64;
	const size_t nq = (size_t)M * H * hd, nkv = (size_t)(ctx + M) * kvd;
	uint16_t *q = malloc(2 * nq), *k = malloc(2 * nkv), *v = malloc(2 * nkv);
	float *full = malloc(4 * nq), *part = malloc(4 * nq);
	uint64_t *mask = NULL;
	assert_true(q && k && v && full && part);
	for (size_t i = 0; i < nq; i++)
		q[i] = narrow((float)(2.0 * rnd()), f16);
	for (size_t i = 0; i < nkv; i++)
		k[i] = narrow((float)(2.0 * rnd()), f16), v[i] = narrow((float)rnd(), f16);
	if (masked) { /* a random tree in BFS order: a row sees its ancestors and itself */
		mask = calloc((size_t)M * mw, sizeof(*mask));
		assert_non_null(mask);
		for (int i = 0; i < M; i++) {
			const int par = i ? (int)((rnd() + 1.0) * 0.5 * i) % i : -1;
			if (par >= 0)
				memcpy(mask + (size_t)i * mw, mask + (size_t)par * mw, sizeof(*mask) * mw);
			mask[(size_t)i * mw + i / 64] |= 1ull << (i % 64);
		}
	}
	assert_int_equal(ha_tree_attention_window(full, q, k, v, M, ctx, M, H, KH, hd, mask, mw, f16,
	                                          window, path, threads), 0);
	for (int L = 1; L < M; L++) {
		assert_int_equal(ha_tree_attention_window(part, q, k, v, L, ctx, L, H, KH, hd, mask, mw,
		                                          f16, window, path, threads), 0);
		if (memcmp(part, full, 4 * (size_t)L * H * hd))
			fail_msg("attn rows %s %s ctx %d H %d KH %d %s win %d th %d: L %d differs from the "
			         "first rows of M %d", f16 ? "fp16" : "bf16", hg_path_name(path), ctx, H, KH,
			         masked ? "tree" : "causal", window, threads, L, M);
	}
	free(q), free(k), free(v), free(full), free(part), free(mask);
}

static void test_rows_hd64(void **state)
{
	(void)state;
	rng_state = 23;
	int n = 0;
	for (int path = HG_PATH_PORTABLE; path <= HG_PATH_AVX2; path++) {
		if (!hg_path_available(path))
			continue;
		for (int f = 0; f < 2; f++)
			for (int th = 0; th <= 1; th++) {
				rows_case(10, 117, 9, 3, f, 0, 0, path, th); /* SmolLM2's heads, a chain */
				rows_case(10, 37, 9, 3, f, 1, 0, path, th);  /* a tree */
				rows_case(10, 130, 4, 4, f, 1, 40, path, th); /* a window */
				rows_case(10, 0, 6, 1, f, 0, 0, path, th);   /* no context */
				n += 4;
			}
	}
	print_message("attn rows: %d cases, every L of 1..9 the first rows of 10 bit for bit\n", n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows_hd64),
		cmocka_unit_test(test_portable),
		cmocka_unit_test(test_avx2),
		cmocka_unit_test(test_empty_row),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
