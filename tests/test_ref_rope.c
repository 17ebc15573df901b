/* ref_rope_freqs and ref_rope: against a double loop on awkward shapes and
 * partial rotary dims, the closed form for rotating unit vectors, the HF
 * rotate_half convention on permuted rows (pins the pairing), and Llama-3.1
 * and linear frequency scaling against values computed independently.
 * ref_rope_neox (Qwen2/Qwen3): against HF's q * cos + rotate_half(q) * sin
 * written out in HF layout on awkward shapes and partial rotary dims (dims
 * past rot_dim untouched), and bit for bit ref_rope on permuted rows. */
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

/* inv_freq accuracy: the exact value theta^(-2i/d) (scaled) rounded to fp32 is
 * within u relative; allow 2u so a powf-based implementation (1 ulp) passes.
 * The double pow of the reference here is exact to ~1e-16. */
static void check_freqs_plain(int rot_dim, float theta)
{
	float *f = galloc((size_t)rot_dim / 2);
	double ref[128], bound[128];

	ref_rope_freqs(f, rot_dim, theta, 0, 1.0f, 1.0f, 4.0f, 8192);
	for (int i = 0; i < rot_dim / 2; i++) {
		ref[i] = pow(theta, -2.0 * i / rot_dim);
		bound[i] = 2.0 * U32 * ref[i];
	}
	check_close("rope freqs", f, ref, bound, (size_t)rot_dim / 2);
	gcheck("rope freqs", f, (size_t)rot_dim / 2);
	assert_true(f[0] == 1.0f);
	gfree(f);
}

static void test_freqs_plain(void **state)
{
	(void)state;
	check_freqs_plain(64, 100000.0f); /* SmolLM2 */
	check_freqs_plain(128, 10000.0f);
	check_freqs_plain(80, 10000.0f);
	check_freqs_plain(32, 500000.0f);
}

static void test_freqs_linear(void **state)
{
	float f[40], g[40];
	(void)state;
	ref_rope_freqs(f, 80, 10000.0f, 0, 1.0f, 0.0f, 0.0f, 0);
	ref_rope_freqs(g, 80, 10000.0f, 1, 4.0f, 0.0f, 0.0f, 0);
	for (int i = 0; i < 40; i++) {
		double r = pow(10000.0, -2.0 * i / 80) / 4.0;
		assert_true(fabs(g[i] - r) <= 2.0 * U32 * r);
		assert_true(g[i] == f[i] / 4.0f); /* a power of two: exact */
	}
}

/* Llama-3.1: theta 500000, head_dim 128, factor 8, low 1, high 4, original
 * context 8192. Known values computed once, outside this code base, with the
 * HF _compute_llama3_parameters formula in double (Python floats): index ->
 * scaled inv_freq, covering each band and both band edges. */
static void test_freqs_llama3(void **state)
{
	static const struct { int i; double v; } known[] = {
		{0, 1.0},                       /* wavelen 2pi: kept */
		{20, 0.016560440080994446},     /* kept */
		{28, 0.003211445994752591},     /* last kept (wavelen 1956 < 2048) */
		{29, 0.002166570763503359},     /* smooth 0.803621 */
		{30, 0.0013718935677611381},    /* smooth 0.592849 */
		{32, 0.0005248461609929547},    /* smooth 0.281283 */
		{34, 0.0001785078127679964},    /* smooth 0.074527 (last blended) */
		{35, 9.556212353964683e-05},    /* first divided by 8 */
		{50, 4.411534674558404e-06},
		{63, 3.068925988914511e-07},
	};
	const double theta = 500000.0, factor = 8.0, lo = 1.0, hi = 4.0, orig = 8192.0;
	float *f = galloc(64);
	double ref[64], bound[64];
	(void)state;

	ref_rope_freqs(f, 128, (float)theta, 2, (float)factor, (float)lo, (float)hi, (int)orig);
	gcheck("llama3 freqs", f, 64);
	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
		if (!(fabs(f[known[k].i] - known[k].v) <= 2.0 * U32 * known[k].v))
			fail_msg("llama3 inv_freq[%d] = %.9g, known %.9g", known[k].i, (double)f[known[k].i],
			         known[k].v);
	/* The whole table from the formula, written out here independently:
	 * wavelen = 2 pi / f; < orig/hi keep; > orig/lo divide; else blend. */
	for (int i = 0; i < 64; i++) {
		double base = pow(theta, -2.0 * i / 128), wl = 2.0 * M_PI / base, v;
		if (wl < orig / hi)
			v = base;
		else if (wl > orig / lo)
			v = base / factor;
		else {
			double s = (orig / wl - lo) / (hi - lo);
			v = (1.0 - s) * base / factor + s * base;
		}
		ref[i] = v;
		bound[i] = 2.0 * U32 * v;
	}
	check_close("llama3 freqs", f, ref, bound, 64);
	/* The scaled table stays strictly decreasing: the blend is continuous at
	 * both band edges (smooth = 1 at orig/hi, 0 at orig/lo). */
	for (int i = 1; i < 64; i++)
		assert_true(f[i] < f[i - 1]);
	gfree(f);
}

/* Exact rotation in double, with the fp32 bound of an implementation that
 * forms the angle in fp32: angle error u |theta|, cos/sin 1 ulp (2u) each, two
 * products and a sum 3u relative to |x0| + |x1|, i.e. per output
 * (|x0| + |x1|) (u |theta| + 2u + 3u); +1u for second order. Dims past rot_dim
 * must be bit-identical. */
static void naive_rope(double *y, double *bound, const float *x, const int32_t *pos, int T, int nh,
                       int hd, int rd, const float *inv_freq)
{
	for (int t = 0; t < T; t++)
		for (int h = 0; h < nh; h++) {
			size_t o = ((size_t)t * nh + h) * hd;
			for (int d = 0; d < hd; d++) {
				y[o + d] = x[o + d];
				bound[o + d] = 0.0;
			}
			for (int i = 0; i < rd / 2; i++) {
				double a = (double)pos[t] * inv_freq[i];
				double x0 = x[o + 2 * i], x1 = x[o + 2 * i + 1];
				double b = (fabs(x0) + fabs(x1)) * (U32 * fabs(a) + 6.0 * U32);
				y[o + 2 * i] = x0 * cos(a) - x1 * sin(a);
				y[o + 2 * i + 1] = x0 * sin(a) + x1 * cos(a);
				bound[o + 2 * i] = bound[o + 2 * i + 1] = b;
			}
		}
}

static void test_rope_shapes(void **state)
{
	static const int cfg[][4] = { /* T, n_heads, head_dim, rot_dim */
		{1, 1, 64, 64}, {3, 9, 64, 64}, {33, 3, 128, 128}, {7, 5, 80, 80},
		{5, 3, 80, 32}, {2, 4, 128, 64}, {33, 9, 64, 64}, {1, 1, 2, 2},
	};
	(void)state;
	for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
		const int T = cfg[c][0], nh = cfg[c][1], hd = cfg[c][2], rd = cfg[c][3];
		const size_t n = (size_t)T * nh * hd;
		float *x = galloc(n), *x0 = malloc(n * sizeof(*x0)), inv_freq[64];
		int32_t *pos = malloc((size_t)T * sizeof(*pos));
		double *ref = malloc(n * sizeof(*ref)), *bound = malloc(n * sizeof(*bound));
		char what[64];

		ref_rope_freqs(inv_freq, rd, 10000.0f, 0, 1.0f, 1.0f, 4.0f, 8192);
		fill(x, n, 3.0);
		memcpy(x0, x, n * sizeof(*x));
		for (int t = 0; t < T; t++) /* 0, a tree-like repeat, then up to 4096 */
			pos[t] = t == 0 ? 0 : t == 2 ? pos[1] : (int32_t)((rnd() + 1.0) * 2048.0);
		ref_rope(x, pos, T, nh, hd, rd, inv_freq);
		naive_rope(ref, bound, x0, pos, T, nh, hd, rd, inv_freq);
		snprintf(what, sizeof(what), "rope T%d h%d hd%d rd%d", T, nh, hd, rd);
		check_close(what, x, ref, bound, n);
		gcheck(what, x, n);
		for (int t = 0; t < T; t++) /* past rot_dim, and everything at pos 0: untouched */
			for (int h = 0; h < nh; h++)
				for (int d = 0; d < hd; d++) {
					size_t j = ((size_t)t * nh + h) * hd + d;
					if ((d >= rd || pos[t] == 0) && memcmp(&x[j], &x0[j], sizeof(*x)) != 0)
						fail_msg("%s: element t%d h%d d%d changed", what, t, h, d);
				}
		gfree(x);
		free(x0);
		free(pos);
		free(ref);
		free(bound);
	}
}

/* Closed form: e_{2i} -> (cos a, sin a) in slots (2i, 2i+1) and e_{2i+1} ->
 * (-sin a, cos a), every other slot exactly 0. Pins the sign and the pairing. */
static void test_rope_unit_vectors(void **state)
{
	const int hd = 64, nh = 2;
	float inv_freq[32], x[2 * 64];
	const int32_t pos[1] = {37};
	(void)state;
	ref_rope_freqs(inv_freq, hd, 10000.0f, 0, 1.0f, 1.0f, 4.0f, 8192);
	for (int e = 0; e < hd; e++) {
		memset(x, 0, sizeof(x));
		x[hd + e] = 1.0f; /* head 1 */
		ref_rope(x, pos, 1, nh, hd, hd, inv_freq);
		int i = e / 2;
		double a = pos[0] * (double)inv_freq[i];
		double want0 = e % 2 == 0 ? cos(a) : -sin(a);
		double want1 = e % 2 == 0 ? sin(a) : cos(a);
		double tol = U32 * fabs(a) + 6.0 * U32; /* the bound above with |x0|+|x1| = 1 */
		for (int d = 0; d < nh * hd; d++) {
			double want = d == hd + 2 * i ? want0 : d == hd + 2 * i + 1 ? want1 : 0.0;
			if (!(fabs(x[d] - want) <= (want == 0.0 ? 0.0 : tol)))
				fail_msg("unit e%d: slot %d = %.9g, want %.9g", e, d, (double)x[d], want);
		}
	}
}

/* HF Llama applies q * cos + rotate_half(q) * sin with rotate_half(x) =
 * (-x[hd/2:], x[:hd/2]) and cos/sin = cat(f, f): it pairs x[i] with x[i+hd/2].
 * The GGUF converter permutes Q/K rows with W.reshape(n_head, 2, hd/2, dim)
 * .swapaxes(1, 2), i.e. gguf[2i + c] = hf[c hd/2 + i]. So: rotate an HF-layout
 * vector the HF way, permute it, and ours must give the permuted result. */
static void test_rope_hf_rotate_half(void **state)
{
	static const int hds[] = {64, 128, 80};
	const int nh = 3, T = 4;
	const int32_t pos[4] = {0, 1, 517, 3001};
	(void)state;
	for (int k = 0; k < 3; k++) {
		const int hd = hds[k], half = hd / 2;
		const size_t n = (size_t)T * nh * hd;
		float *hf = malloc(n * sizeof(*hf)), *x = galloc(n), inv_freq[64];
		double *ref = malloc(n * sizeof(*ref)), *bound = malloc(n * sizeof(*bound));

		ref_rope_freqs(inv_freq, hd, 10000.0f, 0, 1.0f, 1.0f, 4.0f, 8192);
		fill(hf, n, 1.0);
		for (int t = 0; t < T; t++)
			for (int h = 0; h < nh; h++) {
				const float *src = hf + ((size_t)t * nh + h) * hd;
				float *dst = x + ((size_t)t * nh + h) * hd;
				double *r = ref + ((size_t)t * nh + h) * hd;
				double *b = bound + ((size_t)t * nh + h) * hd;
				for (int d = 0; d < hd; d++) { /* HF rotary, in HF layout */
					double f = inv_freq[d % half], a = pos[t] * f;
					double rot = d < half ? -(double)src[d + half] : (double)src[d - half];
					double out = src[d] * cos(a) + rot * sin(a);
					int c = d / half, i = d % half; /* HF slot d -> GGUF slot 2i + c */
					r[2 * i + c] = out;
					b[2 * i + c] = (fabs(src[d]) + fabs(rot)) * (U32 * fabs(a) + 6.0 * U32);
				}
				for (int c = 0; c < 2; c++)
					for (int i = 0; i < half; i++)
						dst[2 * i + c] = src[c * half + i];
			}
		ref_rope(x, pos, T, nh, hd, hd, inv_freq);
		check_close("rope vs HF rotate_half", x, ref, bound, n);
		gcheck("rope vs HF rotate_half", x, n);
		gfree(x);
		free(hf);
		free(ref);
		free(bound);
	}
}

/* NeoX pairing against HF's formula in HF layout, no permutation: slot d <
 * rd/2 pairs with d + rd/2, cos/sin = cat(f, f); the bound of naive_rope. */
static void test_rope_neox_shapes(void **state)
{
	static const int cfg[][4] = { /* T, n_heads, head_dim, rot_dim */
		{1, 1, 64, 64}, {3, 9, 64, 64}, {33, 3, 128, 128}, {7, 5, 80, 80},
		{5, 3, 80, 32}, {2, 4, 128, 64}, {4, 7, 24, 24}, {1, 1, 2, 2},
	};
	(void)state;
	for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
		const int T = cfg[c][0], nh = cfg[c][1], hd = cfg[c][2], rd = cfg[c][3], half = rd / 2;
		const size_t n = (size_t)T * nh * hd;
		float *x = galloc(n), *x0 = malloc(n * sizeof(*x0)), inv_freq[64];
		int32_t *pos = malloc((size_t)T * sizeof(*pos));
		double *ref = malloc(n * sizeof(*ref)), *bound = malloc(n * sizeof(*bound));
		char what[64];

		ref_rope_freqs(inv_freq, rd, 1000000.0f, 0, 1.0f, 1.0f, 4.0f, 8192);
		fill(x, n, 3.0);
		memcpy(x0, x, n * sizeof(*x));
		for (int t = 0; t < T; t++)
			pos[t] = t == 0 ? 0 : t == 2 ? pos[1] : (int32_t)((rnd() + 1.0) * 2048.0);
		for (int t = 0; t < T; t++)
			for (int h = 0; h < nh; h++) {
				size_t o = ((size_t)t * nh + h) * hd;
				for (int d = 0; d < hd; d++) {
					if (d >= rd) {
						ref[o + d] = x0[o + d];
						bound[o + d] = 0.0;
						continue;
					}
					double a = (double)pos[t] * inv_freq[d % half];
					double rot = d < half ? -(double)x0[o + d + half] : (double)x0[o + d - half];
					ref[o + d] = x0[o + d] * cos(a) + rot * sin(a);
					bound[o + d] = (fabs(x0[o + d]) + fabs(rot)) * (U32 * fabs(a) + 6.0 * U32);
				}
			}
		ref_rope_neox(x, pos, T, nh, hd, rd, inv_freq);
		snprintf(what, sizeof(what), "rope neox T%d h%d hd%d rd%d", T, nh, hd, rd);
		check_close(what, x, ref, bound, n);
		gcheck(what, x, n);
		for (int t = 0; t < T; t++)
			for (int h = 0; h < nh; h++)
				for (int d = 0; d < hd; d++) {
					size_t j = ((size_t)t * nh + h) * hd + d;
					if ((d >= rd || pos[t] == 0) && memcmp(&x[j], &x0[j], sizeof(*x)) != 0)
						fail_msg("%s: element t%d h%d d%d changed", what, t, h, d);
				}
		gfree(x);
		free(x0);
		free(pos);
		free(ref);
		free(bound);
	}
}

/* The two modes differ in the pairing only: NeoX on x equals, bit for bit,
 * the normal mode on x's rows permuted as the GGUF Llama converter does
 * (gguf[2i + c] = hf[c hd/2 + i]), permuted back. */
static void test_rope_neox_is_permuted_normal(void **state)
{
	const int T = 5, nh = 3, hd = 48, half = hd / 2;
	const int32_t pos[5] = {0, 3, 3, 999, 4095};
	const size_t n = (size_t)T * nh * hd;
	float x[5 * 3 * 48], y[5 * 3 * 48], inv_freq[24];
	(void)state;
	ref_rope_freqs(inv_freq, hd, 1000000.0f, 0, 1.0f, 1.0f, 4.0f, 8192);
	fill(x, n, 2.0);
	for (size_t r = 0; r < n / hd; r++)
		for (int c = 0; c < 2; c++)
			for (int i = 0; i < half; i++)
				y[r * hd + 2 * i + c] = x[r * hd + c * half + i];
	ref_rope_neox(x, pos, T, nh, hd, hd, inv_freq);
	ref_rope(y, pos, T, nh, hd, hd, inv_freq);
	for (size_t r = 0; r < n / hd; r++)
		for (int c = 0; c < 2; c++)
			for (int i = 0; i < half; i++)
				if (memcmp(&y[r * hd + 2 * i + c], &x[r * hd + c * half + i], sizeof(float)))
					fail_msg("row %zu slot %d: neox %.9g, permuted normal %.9g", r, c * half + i,
					         (double)x[r * hd + c * half + i], (double)y[r * hd + 2 * i + c]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_freqs_plain),
		cmocka_unit_test(test_freqs_linear),
		cmocka_unit_test(test_freqs_llama3),
		cmocka_unit_test(test_rope_shapes),
		cmocka_unit_test(test_rope_unit_vectors),
		cmocka_unit_test(test_rope_hf_rotate_half),
		cmocka_unit_test(test_rope_neox_shapes),
		cmocka_unit_test(test_rope_neox_is_permuted_normal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
