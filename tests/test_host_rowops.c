/* The host exp (runtime/device/host_exp.h) and the host row ops built on it
 * or beside it (runtime/device/host_rowops.c):
 *  - exp: hx_exp_c, hx_exp8_avx2 and hx_exp16_512 give the same bits on a
 *    sample of every float (one in 1021 bit patterns: both signs, NaNs,
 *    infinities, subnormals) and on every float in [-89, -86] and
 *    [87, 90] one in 7 (the flush and overflow edges); each result within
 *    2 ulp of the correctly rounded exp (double exp rounded to fp32) on
 *    [-87, ln FLT_MAX], exactly +0 below -87, +inf past overflow (within 2
 *    ulp of FLT_MAX where the rounded exp is the first to overflow), NaN for
 *    NaN;
 *  - hr_swiglu against kernels/ref ref_swiglu (libm expf). Bound: with exp's
 *    relative error e_m (2 ulp: 4u (1 + u), u = 2^-24) against ref's expf's
 *    e_r (1 ulp: 2u (1 + u)), 1 + exp(-g) carries at most e_m (resp. e_r)
 *    relative error (exp / (1 + exp) <= 1 damps it), and the add, divide and
 *    multiply round once each on both sides, so y / y_ref lies within
 *    [(1 - u)^3 (1 - e_r) / ((1 + u)^3 (1 + e_m)), (1 + u)^3 (1 + e_r) /
 *    ((1 - u)^3 (1 - e_m))]: |y - y_ref| <= R |y_ref|, R about 12u. Plus
 *    2^-148 (|u| + 1) where the quotient or the product is subnormal (half
 *    a subnormal ulp per rounding, each side), and, for g < -88 where exp(-g)
 *    > 2^126 may overflow on one side only, |g u| 2^-125 (both |y| are
 *    below |g u| 2^-126 there). NaN where ref is NaN, the same infinity,
 *    the same sign (g / positive * u). Cases: random g in +-20, the edges
 *    g in [-89.5, -86.5] and [86.5, 89.5], g and u awkward (NaN, +-inf,
 *    +-0, subnormals, +-1e30); n 1..37 at offsets 0..16 and 3000;
 *  - hr_swiglu's paths (portable, AVX2, AVX-512 where the CPU has them)
 *    bit for bit, on the whole array and on every sub-run (offset, length)
 *    of a window: an element's bits do not depend on n or on whether it
 *    falls in a vector or a tail (rows regions);
 *  - hr_rmsnorm_residual against kernels/ref ref_rmsnorm_residual bit for
 *    bit (NaNs compared as NaN), every path, T 1..10 and 17 rows (groups of
 *    8 and 4, short groups), dim 576 (SmolLM2), 67, 5, 3, 1 (the column tail
 *    of the 4-column transposes), rows of large and tiny magnitudes and a
 *    row with an inf or a NaN; s aliasing x (in place);
 *  - hr_rope_rotate against ref_rope bit for bit, every path: half 32 of
 *    hd 64 (SmolLM2), 8 of 20 (partial rotation), 7 and 5 of 14 (the pairs
 *    past the last group of four), positions 0, 17 and 40000, values of
 *    ordinary, large, tiny and subnormal magnitudes;
 *  - hr_softmax_temp against ref_logits_process_row within a derived bound
 *    (test_softmax's comment), every path the same bits, V 1 .. 49152 (the
 *    16-lane tails), T 0.25 .. 3, logits spread to where exp flushes,
 *    masked (-inf) logits exactly 0, a NaN logit NaN on both sides;
 *  - hr_logits_truncate (top-k, top-p) against ref_logits_process_row: the
 *    same kept tokens, values within the same bound (test_truncate). */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "device/host_exp.h"
#include "device/host_gemm.h"
#include "device/host_rowops.h"
#include "kernels/ref/ref.h"
#include "testutil.h"

#define U 0x1p-24

static uint64_t rs = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	return tu_xs32(&rs);
}

static float fbits(uint32_t b)
{
	float f;
	memcpy(&f, &b, 4);
	return f;
}

static uint32_t bitsf(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	return b;
}

#if defined(__x86_64__) || defined(__i386__)
static __attribute__((target("avx2,fma"))) void exp16_avx2(const float x[16], float y[16])
{
	_mm256_storeu_ps(y, hx_exp8_avx2(_mm256_loadu_ps(x)));
	_mm256_storeu_ps(y + 8, hx_exp8_avx2(_mm256_loadu_ps(x + 8)));
}

static __attribute__((target("avx512f"))) void exp16_512(const float x[16], float y[16])
{
	_mm512_storeu_ps(y, hx_exp16_512(_mm512_loadu_ps(x)));
}
#endif

/* 16 lanes through each form; all must agree bit for bit */
static void exp_forms(const float x[16], float y[16])
{
	for (int l = 0; l < 16; l++)
		y[l] = hx_exp_c(x[l]);
#if defined(__x86_64__) || defined(__i386__)
	float v[16];
	for (int p = HG_PATH_AVX2; p <= HG_PATH_AVX512; p++) {
		if (!hg_path_available(p))
			continue;
		(p == HG_PATH_AVX2 ? exp16_avx2 : exp16_512)(x, v);
		for (int l = 0; l < 16; l++)
			if (bitsf(v[l]) != bitsf(y[l]))
				fail_msg("exp(%a): %s %a, C %a", x[l], hg_path_name(p), v[l], y[l]);
	}
#endif
}

static double worst_ulp;

static void exp_check(float x, float y)
{
	if (isnan(x)) {
		if (!isnan(y))
			fail_msg("exp(NaN) = %a", y);
		return;
	}
	if (x < -87.0f) {
		if (bitsf(y) != 0)
			fail_msg("exp(%a) = %a, expected +0 below -87", x, y);
		return;
	}
	const double t = exp((double)x);
	const float tr = (float)t;
	if (isinf(tr)) { /* overflow: +inf, or FLT_MAX's neighbourhood at the edge */
		if (!(isinf(y) && y > 0) && !(y >= FLT_MAX * (1.0f - 0x1p-22f)))
			fail_msg("exp(%a) = %a, expected +inf", x, y);
		return;
	}
	int e;
	frexpf(tr, &e);
	const double ulp = ldexp(1.0, (tr < FLT_MIN ? -125 : e) - 24);
	const double err = fabs((double)y - t) / ulp;
	worst_ulp = err > worst_ulp ? err : worst_ulp;
	if (err > 2.0)
		fail_msg("exp(%a) = %a, exact %a: %.3f ulp", x, y, t, err);
}

static void test_exp(void **state)
{
	(void)state;
	float x[16], y[16];
	long n = 0;
	int k = 0;
	/* one bit pattern in 1021, all of them */
	for (uint64_t b = 0; b <= 0xffffffffull; b += 1021) {
		x[k++] = fbits((uint32_t)b);
		if (k == 16) {
			exp_forms(x, y);
			for (int l = 0; l < 16; l++)
				exp_check(x[l], y[l]);
			n += 16, k = 0;
		}
	}
	/* the edges, one float in 7 */
	const float lo[] = {-89.0f, 87.0f}, hi[] = {-86.0f, 90.0f};
	for (int r = 0; r < 2; r++)
		for (float v = lo[r]; v < hi[r];) {
			for (int l = 0; l < 16; l++) {
				x[l] = v;
				for (int s = 0; s < 7; s++)
					v = nextafterf(v, INFINITY);
			}
			exp_forms(x, y);
			for (int l = 0; l < 16; l++)
				exp_check(x[l], y[l]);
			n += 16;
		}
	const float sp[16] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, FLT_MIN, -FLT_MIN,
	                      0x1p-149f, -0x1p-149f, 1.0f, -1.0f, 88.72283935546875f, -87.0f,
	                      -87.33654475f, 88.7228317f};
	exp_forms(sp, y);
	for (int l = 0; l < 16; l++)
		exp_check(sp[l], y[l]);
	assert_true(bitsf(y[4]) == bitsf(1.0f) && bitsf(y[5]) == bitsf(1.0f));
	assert_true(isinf(y[2]) && bitsf(y[3]) == 0);
	print_message("exp: %ld values, C / AVX2 / AVX-512 the same bits, worst %.3f ulp\n", n + 16,
	              worst_ulp);
}

/* g / u inputs: c 0 ordinary, 1 the overflow and flush edges, 2 awkward */
static float pick_g(void)
{
	static const uint32_t SP[] = {0x7fc00000, 0xffc00001, 0x7f800000, 0xff800000, 0x00000000,
	                              0x80000000, 0x00000001, 0x80400000, 0x7149f2ca, 0xf149f2ca};
	switch (rnd() % 4) {
	case 0:
		return ((float)(rnd() % 3000001) - 1500000.0f) / 1e6f * 3.0f + (rnd() % 2 ? 88.0f : -88.0f);
	case 1:
		return fbits(SP[rnd() % (sizeof(SP) / sizeof(SP[0]))]);
	default:
		return ((float)(rnd() % 400001) - 200000.0f) / 1e4f;
	}
}

static float pick_u(void)
{
	static const uint32_t SP[] = {0x7fc00000, 0x7f800000, 0xff800000, 0x00000000, 0x80000000,
	                              0x00000001, 0x7149f2ca, 0x0ca00000};
	if (rnd() % 6 == 0)
		return fbits(SP[rnd() % (sizeof(SP) / sizeof(SP[0]))]);
	return ((float)(rnd() % 200001) - 100000.0f) / 3e4f;
}

static void swiglu_check(const float *g, const float *u, const float *y, const float *yr, size_t n)
{
	const double em = 4 * U * (1 + U), er = 2 * U * (1 + U);
	const double R = pow(1 + U, 3) * (1 + er) / (pow(1 - U, 3) * (1 - em)) - 1;
	for (size_t i = 0; i < n; i++) {
		const char *why = NULL;
		if (isnan(yr[i])) {
			if (!isnan(y[i]))
				why = "NaN expected";
		} else if (isnan(y[i]) || signbit(y[i]) != signbit(yr[i])) {
			why = "NaN or sign";
		} else if (isinf(yr[i])) {
			if (y[i] != yr[i])
				why = "infinity expected";
		} else {
			double b = R * fabs(yr[i]) + 0x1p-148 * (fabs(u[i]) + 1);
			if (g[i] < -88.0f)
				b += fabs((double)g[i] * u[i]) * 0x1p-125;
			if (!(fabs((double)y[i] - yr[i]) <= b) &&
			    !(isinf(y[i]) && fabs(yr[i]) * (1 + R) + b >= FLT_MAX))
				why = "outside the bound";
		}
		if (why)
			fail_msg("swiglu g %a u %a: %a, ref %a: %s", g[i], u[i], y[i], yr[i], why);
	}
}

static const int PATHS[] = {HG_PATH_PORTABLE, HG_PATH_AVX2, HG_PATH_AVX512};

static void test_swiglu(void **state)
{
	(void)state;
	const size_t N = 3000 + 64;
	float *g = malloc(4 * N), *u = malloc(4 * N), *yr = malloc(4 * N), *y0 = malloc(4 * N),
	      *y = malloc(4 * N);
	assert_true(g && u && yr && y0 && y);
	int n_paths = 0;
	for (int rep = 0; rep < 4; rep++) {
		for (size_t i = 0; i < N; i++)
			g[i] = pick_g(), u[i] = pick_u();
		ref_swiglu(yr, g, u, N);
		for (int p = 0; p < 3; p++) {
			if (!hg_path_available(PATHS[p]))
				continue;
			n_paths += rep == 0;
			memset(y, 0x55, 4 * N);
			hr_swiglu(y, g, u, N, PATHS[p]);
			swiglu_check(g, u, y, yr, N);
			if (p == 0)
				memcpy(y0, y, 4 * N);
			else
				for (size_t i = 0; i < N; i++)
					if (bitsf(y[i]) != bitsf(y0[i]))
						fail_msg("swiglu g %a u %a: %s %a (%08x), portable %a (%08x)", g[i], u[i],
						         hg_path_name(PATHS[p]), y[i], bitsf(y[i]), y0[i], bitsf(y0[i]));
			/* sub-runs: the same bits wherever an element falls */
			for (size_t off = 0; off <= 16; off++)
				for (size_t len = 1; len <= 37; len++) {
					float t[37];
					hr_swiglu(t, g + off, u + off, len, PATHS[p]);
					if (memcmp(t, y0 + off, 4 * len))
						fail_msg("swiglu %s: offset %zu length %zu differs from the whole run",
						         hg_path_name(PATHS[p]), off, len);
				}
			/* in place (y = gate), as the engine runs it */
			float *gi = malloc(4 * N);
			assert_non_null(gi);
			memcpy(gi, g, 4 * N);
			hr_swiglu(gi, gi, u, N, PATHS[p]);
			if (memcmp(gi, y0, 4 * N))
				fail_msg("swiglu %s: in place differs", hg_path_name(PATHS[p]));
			free(gi);
		}
	}
	print_message("swiglu: %d paths the same bits, within the derived bound of ref_swiglu "
	              "(%zu elements x 4)\n", n_paths, N);
	free(g), free(u), free(yr), free(y0), free(y);
}

static float pick_x(int row_kind)
{
	const float v = ((float)(rnd() % 200001) - 100000.0f) / 7919.0f;
	switch (row_kind) {
	case 1:
		return v * 3e18f; /* squares near double's fp32-product range, still exact */
	case 2:
		return v * 1e-30f; /* squares below fp32's range (exact in double) */
	default:
		return v;
	}
}

static bool same_bits(const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (bitsf(a[i]) != bitsf(b[i]) && !(isnan(a[i]) && isnan(b[i])))
			return false;
	return true;
}

static void rms_case(int T, int dim, int path, int inplace)
{
	const size_t n = (size_t)T * dim;
	float *x = malloc(4 * n), *r = malloc(4 * n), *w = malloc(4 * (size_t)dim);
	float *y = malloc(4 * n), *s = malloc(4 * n), *ry = malloc(4 * n), *rsum = malloc(4 * n);
	assert_true(x && r && w && y && s && ry && rsum);
	for (int t = 0; t < T; t++) {
		const int kind = (int)(rnd() % 5);
		for (int i = 0; i < dim; i++) {
			x[(size_t)t * dim + i] = pick_x(kind < 3 ? kind : 0);
			r[(size_t)t * dim + i] = pick_x(0);
		}
		if (kind == 3) /* one special in the row */
			x[(size_t)t * dim + rnd() % dim] = rnd() % 2 ? INFINITY : NAN;
	}
	for (int i = 0; i < dim; i++)
		w[i] = ((float)(rnd() % 2001) - 1000.0f) / 500.0f;
	memset(y, 0x55, 4 * n);
	memset(ry, 0x55, 4 * n);
	ref_rmsnorm_residual(ry, rsum, x, r, w, T, dim, 1e-5f);
	if (inplace) { /* s is x */
		memcpy(s, x, 4 * n);
		hr_rmsnorm_residual(y, s, s, r, w, T, dim, 1e-5f, path);
	} else {
		hr_rmsnorm_residual(y, s, x, r, w, T, dim, 1e-5f, path);
	}
	if (!same_bits(y, ry, n) || !same_bits(s, rsum, n))
		fail_msg("rmsnorm_residual %s T %d dim %d in place %d: differs from "
		         "ref_rmsnorm_residual", hg_path_name(path), T, dim, inplace);
	free(x), free(r), free(w), free(y), free(s), free(ry), free(rsum);
}

static void test_rmsnorm(void **state)
{
	(void)state;
	static const int DIM[] = {576, 67, 5, 3, 1};
	int n = 0;
	for (int p = 0; p < 3; p++) {
		if (!hg_path_available(PATHS[p]))
			continue;
		for (int d = 0; d < 5; d++) {
			for (int T = 1; T <= 10; T++, n++)
				rms_case(T, DIM[d], PATHS[p], T == 7);
			rms_case(17, DIM[d], PATHS[p], 0);
			n++;
		}
	}
	print_message("rmsnorm_residual: %d cases identical to ref_rmsnorm_residual\n", n);
}

static void rope_case(int H, int hd, int half, int32_t pos, int path)
{
	const size_t n = (size_t)H * hd;
	float *x = malloc(4 * n), *r = malloc(4 * n), f[64];
	double c[64], sn[64];
	assert_true(x && r && half <= 64);
	ref_rope_freqs(f, 2 * half, 10000.0f, 0, 1.0f, 0, 0, 0);
	for (int i = 0; i < half; i++) { /* ref_rope's angle */
		const double a = (double)pos * f[i];
		c[i] = cos(a);
		sn[i] = sin(a);
	}
	for (size_t i = 0; i < n; i++) {
		static const float MAG[] = {1.0f, 3e30f, 1e-30f, 1e-41f};
		x[i] = r[i] = ((float)(rnd() % 20001) - 10000.0f) / 1234.5f * MAG[rnd() % 7 < 4 ? 0 : rnd() % 4];
	}
	hr_rope_rotate(x, H, hd, half, c, sn, path);
	ref_rope(r, &pos, 1, H, hd, 2 * half, f);
	if (memcmp(x, r, 4 * n))
		fail_msg("rope %s H %d hd %d half %d pos %d: differs from ref_rope", hg_path_name(path), H,
		         hd, half, pos);
	free(x), free(r);
}

static void test_rope(void **state)
{
	(void)state;
	static const int32_t POS[] = {0, 17, 40000};
	int n = 0;
	for (int p = 0; p < 3; p++) {
		if (!hg_path_available(PATHS[p]))
			continue;
		for (int k = 0; k < 3; k++) {
			rope_case(9, 64, 32, POS[k], PATHS[p]);
			rope_case(3, 20, 8, POS[k], PATHS[p]);
			rope_case(2, 14, 7, POS[k], PATHS[p]);
			rope_case(2, 14, 5, POS[k], PATHS[p]);
			n += 4;
		}
	}
	print_message("rope: %d cases identical to ref_rope\n", n);
}

/* One row for the softmax and truncation checks: V logits uniform in
 * +-spread (or ties: the values 0, 1, 2), n_inf of them masked (-inf);
 * ref's probs, the path under test's, the first path's, and scratch. */
typedef struct sm_row {
	int V;
	float *l, *pr, *p, *p0;
	int *idx;
} sm_row;

static sm_row sm_row_new(int V, float spread, int n_inf, bool ties)
{
	sm_row r = {.V = V};
	r.l = malloc(sizeof(float) * (size_t)V);
	r.pr = malloc(sizeof(float) * (size_t)V);
	r.p = malloc(sizeof(float) * (size_t)V);
	r.p0 = malloc(sizeof(float) * (size_t)V);
	r.idx = malloc(sizeof(int) * (size_t)V);
	assert_true(r.l && r.pr && r.p && r.p0 && r.idx);
	for (int i = 0; i < V; i++)
		r.l[i] = ties ? (float)(int)(rnd() % 3)
		              : spread * (2.0f * (float)(rnd() >> 8) / 16777216.0f - 1.0f);
	for (int k = 0; k < n_inf && V > 1; k++)
		r.l[rnd() % (uint32_t)V] = -INFINITY;
	return r;
}

static void sm_row_free(sm_row *r)
{
	free(r->l);
	free(r->pr);
	free(r->p);
	free(r->p0);
	free(r->idx);
}

/* the path's p (the paths-th tried) against the first path's, bit for bit */
static void sm_same_paths(sm_row *r, int paths, int path, const char *what)
{
	if (paths == 1)
		memcpy(r->p0, r->p, sizeof(float) * (size_t)r->V);
	else if (memcmp(r->p0, r->p, sizeof(float) * (size_t)r->V))
		fail_msg("%s: %s differs from the portable path", what, hg_path_name(path));
}

/* the bound derived below: 16u |p_ref| + 2^-125 */
static double sm_bound(float pr)
{
	return 16 * U * (1 + U) * fabs((double)pr) + 0x1p-125;
}

/* hr_softmax_temp against ref_logits_process_row (top-k 0, top-p 1: no
 * truncation). Bound: the exp argument is the same float on both sides;
 * host_exp's exp is within 2 ulp of the correctly rounded value (4u),
 * glibc's expf within 1 (2u), so e / e_ref - 1 is within 6u (1 + u); the
 * sums (double, of positive terms) then differ by that relative amount
 * too (their own rounding, n 2^-53, is 6e-12 at n 49152), 1 / sum rounded
 * to fp32 once on each side (2u), e * r once (2u): |p - p_ref| <= 16u
 * |p_ref|, plus 2^-125 where one side's exp argument lies below -87 (host
 * exp 0, expf at most e^-87 < 2^-125, times r <= 1) or the product is
 * subnormal. -inf logits give exactly 0; the paths give the same bits. */
static void softmax_case(int V, float temp, float spread, int n_inf, bool nan)
{
	sm_row r = sm_row_new(V, spread, n_inf, false);
	float *l = r.l, *pr = r.pr, *p = r.p;
	char what[96];
	snprintf(what, sizeof(what), "softmax V %d T %g", V, temp);
	if (nan && V > 2)
		l[V / 2] = __builtin_nanf("");
	ref_logits_process_row(pr, l, V, temp, 0, 1.0f, r.idx);
	int paths = 0;
	for (int q = 0; q < 3; q++) {
		if (!hg_path_available(PATHS[q]))
			continue;
		memset(p, 0xff, sizeof(float) * (size_t)V);
		hr_softmax_temp(p, l, (size_t)V, temp, PATHS[q]);
		sm_same_paths(&r, ++paths, PATHS[q], what);
		double sum = 0;
		for (int i = 0; i < V; i++) {
			if (nan) { /* a NaN logit: NaN everywhere on both sides (the sum is NaN) */
				if (!(p[i] != p[i] && pr[i] != pr[i]))
					fail_msg("softmax with a NaN logit: p[%d] %a, ref %a", i, p[i], pr[i]);
				continue;
			}
			if (l[i] == -INFINITY && p[i] != 0.0f)
				fail_msg("softmax: masked logit %d has p %a", i, p[i]);
			const double b = sm_bound(pr[i]);
			if (!(fabs((double)p[i] - pr[i]) <= b))
				fail_msg("%s %s: p[%d] = %a (logit %a), ref %a, bound %a", what,
				         hg_path_name(PATHS[q]), i, p[i], l[i], pr[i], b);
			sum += p[i];
		}
		if (!nan && fabs(sum - 1.0) > 1e-5)
			fail_msg("%s: sums to %.9f", what, sum);
	}
	assert_true(paths >= 1);
	sm_row_free(&r);
}

static void test_softmax(void **state)
{
	(void)state;
	static const int Vs[] = {1, 7, 15, 16, 17, 33, 1000, 49152};
	static const float Ts[] = {0.25f, 0.7f, 1.0f, 3.0f};
	int n = 0;
	for (size_t v = 0; v < sizeof(Vs) / sizeof(Vs[0]); v++)
		for (size_t t = 0; t < sizeof(Ts) / sizeof(Ts[0]); t++) {
			softmax_case(Vs[v], Ts[t], 15.0f, 0, false);
			softmax_case(Vs[v], Ts[t], 200.0f, Vs[v] / 8, false); /* flushed tails, masks */
			n += 2;
		}
	softmax_case(49152, 0.7f, 10.0f, 3, true);
	print_message("softmax: %d rows within 16 ulp of ref_logits_process_row, every path the "
	              "same bits\n", n + 1);
}

/* hr_logits_truncate against ref_logits_process_row with top-k / top-p:
 * the same kept tokens (continuous random logits: no cumulative mass near
 * top-p's boundary; and a row of exact ties at the top-k boundary, kept by
 * index), each kept p within test_softmax's bound (16u |p_ref| + 2^-125:
 * the same e, sums and roundings over the kept tokens), the rest exactly 0;
 * every path the same bits. */
static void truncate_case(int V, float temp, int top_k, float top_p, float spread, bool ties)
{
	sm_row r = sm_row_new(V, spread, V / 16, ties);
	float *l = r.l, *pr = r.pr, *p = r.p;
	char what[96];
	snprintf(what, sizeof(what), "truncate V %d T %g k %d p %g", V, temp, top_k, top_p);
	ref_logits_process_row(pr, l, V, temp, top_k, top_p, r.idx);
	/* kept: p above 2^-125 (ref's expf leaves e in (0, 2^-125] where host
	 * exp flushes an argument below -87 to 0: such tokens may be kept by
	 * ref alone, with that weight) */
	int paths = 0, kept_ref = 0;
	for (int i = 0; i < V; i++)
		kept_ref += pr[i] > 0x1p-125f;
	for (int q = 0; q < 3; q++) {
		if (!hg_path_available(PATHS[q]))
			continue;
		memset(p, 0xff, sizeof(float) * (size_t)V);
		const int n_kept = hr_logits_truncate(p, l, V, temp, top_k, top_p, r.idx, PATHS[q]);
		int kept = 0, pos = 0;
		for (int i = 0; i < V; i++) {
			kept += p[i] > 0x1p-125f;
			pos += p[i] > 0.0f;
		}
		assert_int_equal(n_kept, pos);
		sm_same_paths(&r, ++paths, PATHS[q], what);
		if (kept != kept_ref)
			fail_msg("%s %s: kept %d, ref %d", what, hg_path_name(PATHS[q]), kept, kept_ref);
		for (int i = 0; i < V; i++) {
			if ((p[i] > 0x1p-125f) != (pr[i] > 0x1p-125f) || p[i] < 0.0f || p[i] != p[i])
				fail_msg("%s %s: token %d (logit %a) p %a, ref %a", what, hg_path_name(PATHS[q]),
				         i, l[i], p[i], pr[i]);
			const double b = sm_bound(pr[i]);
			if (!(fabs((double)p[i] - pr[i]) <= b))
				fail_msg("%s %s: p[%d] = %a, ref %a, bound %a", what, hg_path_name(PATHS[q]), i,
				         p[i], pr[i], b);
		}
	}
	assert_true(paths >= 1);
	sm_row_free(&r);
}

static void test_truncate(void **state)
{
	(void)state;
	static const struct { int k; float p; } kp[] = {
		{0, 0.9f}, {40, 1.0f}, {40, 0.9f}, {1, 1.0f}, {0, 0.3f}, {0, 0.999f}, {5000, 0.95f},
		{0, 0.0f}};
	static const int Vs[] = {1, 17, 1000, 49152};
	static const float Ts[] = {0.7f, 1.0f, 2.5f};
	int n = 0;
	for (size_t v = 0; v < sizeof(Vs) / sizeof(Vs[0]); v++)
		for (size_t t = 0; t < sizeof(Ts) / sizeof(Ts[0]); t++)
			for (size_t c = 0; c < sizeof(kp) / sizeof(kp[0]); c++) {
				truncate_case(Vs[v], Ts[t], kp[c].k, kp[c].p, 12.0f, false);
				truncate_case(Vs[v], Ts[t], kp[c].k, kp[c].p, 200.0f, false);
				n += 2;
			}
	/* exact ties at the top-k boundary (three logit values): kept by index */
	for (int k = 1; k <= 300; k += 37) {
		truncate_case(1000, 1.0f, k, 1.0f, 0, true);
		n++;
	}
	print_message("truncate: %d rows keep ref_logits_process_row's tokens, values within 16 ulp, "
	              "every path the same bits\n", n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exp),
		cmocka_unit_test(test_swiglu),
		cmocka_unit_test(test_rmsnorm),
		cmocka_unit_test(test_rope),
		cmocka_unit_test(test_softmax),
		cmocka_unit_test(test_truncate),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
