/* Host SwiGLU and residual RMSNorm (host_rowops.h): kernels/ref's
 * operations in its order, vectorised across elements (SwiGLU) or rows
 * (RMSNorm's sums of squares). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "host_exp.h"
#include "host_gemm.h"
#include "host_rowops.h"
#include "kernels/ref/ref.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HR_X86 1
#define HR_AVX2 __attribute__((target("avx2,fma")))
#define HR_AVX512 __attribute__((target("avx512f,avx2,fma")))
#else
#define HR_X86 0
#endif

/* ---- SwiGLU ----
 * A NaN result is written as the default quiet NaN 0x7fc00000: which NaN
 * operand an IEEE operation passes on is the instruction's choice, and the
 * compiler may commute the multiply's operands differently in each path. */

static float swiglu_1(float g, float u)
{
	const float y = g / (1.0f + hx_exp_c(-g)) * u;
	return y != y ? __builtin_nanf("") : y;
}

static void swiglu_c(float *y, const float *gate, const float *up, size_t i, size_t n)
{
	for (; i < n; i++)
		y[i] = swiglu_1(gate[i], up[i]);
}

#if HR_X86
static HR_AVX2 void swiglu_avx2(float *y, const float *gate, const float *up, size_t n)
{
	const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
	const __m256 qnan = _mm256_set1_ps(__builtin_nanf(""));
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 g = _mm256_loadu_ps(gate + i);
		const __m256 e = hx_exp8_avx2(_mm256_xor_ps(g, sign));
		const __m256 v = _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)),
		                               _mm256_loadu_ps(up + i));
		_mm256_storeu_ps(y + i, _mm256_blendv_ps(v, qnan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
	}
	swiglu_c(y, gate, up, i, n);
}

static HR_AVX512 void swiglu_512(float *y, const float *gate, const float *up, size_t n)
{
	const __m512 one = _mm512_set1_ps(1.0f);
	const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
	const __m512 qnan = _mm512_set1_ps(__builtin_nanf(""));
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		const __m512 g = _mm512_loadu_ps(gate + i);
		const __m512 e = hx_exp16_512(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(g), sign)));
		const __m512 v = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)),
		                               _mm512_loadu_ps(up + i));
		_mm512_storeu_ps(y + i, _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), qnan));
	}
	swiglu_c(y, gate, up, i, n);
}
#endif

void hr_swiglu(float *y, const float *gate, const float *up, size_t n, int path)
{
	if (path == HG_PATH_AUTO)
		path = hg_path_auto();
#if HR_X86
	if (path >= HG_PATH_AVX512 && hg_path_available(HG_PATH_AVX512)) {
		swiglu_512(y, gate, up, n);
		return;
	}
	if (path >= HG_PATH_AVX2 && hg_path_available(HG_PATH_AVX2)) {
		swiglu_avx2(y, gate, up, n);
		return;
	}
#endif
	swiglu_c(y, gate, up, 0, n);
}

/* ---- residual RMSNorm ---- */

/* ref_rmsnorm's scale from a row's sum of squares */
static float rms_scale(double ss, int dim, float eps)
{
	return (float)(1.0 / sqrt(ss / dim + (double)eps));
}

/* rows p[0..3]: each row's sum of (double)x * x, sequential in i (the
 * product is exact in double, so only the adds round, as in ref_rmsnorm) */
static void sumsq4_c(double ss[4], const float *const p[4], int dim)
{
	double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
	for (int i = 0; i < dim; i++) {
		a0 += (double)p[0][i] * p[0][i];
		a1 += (double)p[1][i] * p[1][i];
		a2 += (double)p[2][i] * p[2][i];
		a3 += (double)p[3][i] * p[3][i];
	}
	ss[0] = a0, ss[1] = a1, ss[2] = a2, ss[3] = a3;
}

#if HR_X86
/* sumsq4_c for 8 rows p[0..7]: rows 0-3 and 4-7 in the lanes of two double
 * vectors, four columns at a time transposed into them (so each lane adds
 * its row's squares in column order); the last dim % 4 columns in C */
static HR_AVX2 void sumsq8_avx2(double ss[8], const float *const p[8], int dim)
{
	__m256d a = _mm256_setzero_pd(), b = a;
	int i = 0;
	for (; i + 4 <= dim; i += 4) {
		__m128 r0 = _mm_loadu_ps(p[0] + i), r1 = _mm_loadu_ps(p[1] + i);
		__m128 r2 = _mm_loadu_ps(p[2] + i), r3 = _mm_loadu_ps(p[3] + i);
		__m128 r4 = _mm_loadu_ps(p[4] + i), r5 = _mm_loadu_ps(p[5] + i);
		__m128 r6 = _mm_loadu_ps(p[6] + i), r7 = _mm_loadu_ps(p[7] + i);
		_MM_TRANSPOSE4_PS(r0, r1, r2, r3); /* r_c: column i + c of rows 0-3 */
		_MM_TRANSPOSE4_PS(r4, r5, r6, r7);
		const __m128 ca[4] = {r0, r1, r2, r3}, cb[4] = {r4, r5, r6, r7};
		for (int c = 0; c < 4; c++) {
			const __m256d da = _mm256_cvtps_pd(ca[c]), db = _mm256_cvtps_pd(cb[c]);
			a = _mm256_add_pd(a, _mm256_mul_pd(da, da));
			b = _mm256_add_pd(b, _mm256_mul_pd(db, db));
		}
	}
	_mm256_storeu_pd(ss, a);
	_mm256_storeu_pd(ss + 4, b);
	for (; i < dim; i++)
		for (int t = 0; t < 8; t++)
			ss[t] += (double)p[t][i] * p[t][i];
}

/* s = x + r and y = s * scale * w of one row, 8 wide (same operations) */
static HR_AVX2 void add_row_avx2(float *s, const float *x, const float *r, int dim)
{
	int i = 0;
	for (; i + 8 <= dim; i += 8)
		_mm256_storeu_ps(s + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(r + i)));
	for (; i < dim; i++)
		s[i] = x[i] + r[i];
}

static HR_AVX2 void scale_row_avx2(float *y, const float *s, float sc, const float *w, int dim)
{
	const __m256 v = _mm256_set1_ps(sc);
	int i = 0;
	for (; i + 8 <= dim; i += 8)
		_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(s + i), v),
		                                      _mm256_loadu_ps(w + i)));
	for (; i < dim; i++)
		y[i] = s[i] * sc * w[i];
}
#endif

void hr_rmsnorm_residual(float *y, float *s, const float *x, const float *r, const float *w, int T,
                         int dim, float eps, int path)
{
	if (path == HG_PATH_AUTO)
		path = hg_path_auto();
#if HR_X86
	const int avx2 = path >= HG_PATH_AVX2 && hg_path_available(HG_PATH_AVX2);
#else
	const int avx2 = 0;
#endif
	const int G = avx2 ? 8 : 4; /* rows a group */
	for (int t0 = 0; t0 < T; t0 += G) {
		const int n = T - t0 < G ? T - t0 : G;
		const float *p[8];
		double ss[8];
		for (int t = 0; t < G; t++) { /* a short group repeats its last row */
			const size_t o = (size_t)(t0 + (t < n ? t : n - 1)) * dim;
			p[t] = s + o;
		}
#if HR_X86
		if (avx2) {
			for (int t = 0; t < n; t++) {
				const size_t o = (size_t)(t0 + t) * dim;
				add_row_avx2(s + o, x + o, r + o, dim);
			}
			sumsq8_avx2(ss, p, dim);
			for (int t = 0; t < n; t++) {
				const size_t o = (size_t)(t0 + t) * dim;
				scale_row_avx2(y + o, s + o, rms_scale(ss[t], dim, eps), w, dim);
			}
			continue;
		}
#endif
		for (int t = 0; t < n; t++) {
			const size_t o = (size_t)(t0 + t) * dim;
			for (int i = 0; i < dim; i++)
				s[o + i] = x[o + i] + r[o + i];
		}
		sumsq4_c(ss, p, dim);
		for (int t = 0; t < n; t++) {
			const size_t o = (size_t)(t0 + t) * dim;
			const float sc = rms_scale(ss[t], dim, eps);
			for (int i = 0; i < dim; i++)
				y[o + i] = s[o + i] * sc * w[i];
		}
	}
}

/* ---- RoPE rotation of one position's heads ---- */

static void rotate_c(float *p, const double *c, const double *sn, int i, int half)
{
	for (; i < half; i++) {
		const double x0 = p[2 * i], x1 = p[2 * i + 1];
		p[2 * i] = (float)(x0 * c[i] - x1 * sn[i]);
		p[2 * i + 1] = (float)(x0 * sn[i] + x1 * c[i]);
	}
}

#if HR_X86
/* four pairs a step: the pairs' x0 and x1 split into double lanes (in the
 * order pair 0, 2 | 1, 3 that unpack gives, c and s permuted alike), the
 * same multiplies, subtract and add (no FMA), rounded to fp32 as the cast */
static HR_AVX2 void rotate_avx2(float *p, const double *c, const double *sn, int half)
{
	int i = 0;
	for (; i + 4 <= half; i += 4) {
		const __m256 v = _mm256_loadu_ps(p + 2 * i);
		const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
		const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
		const __m256d x0 = _mm256_unpacklo_pd(lo, hi), x1 = _mm256_unpackhi_pd(lo, hi);
		const __m256d cc = _mm256_permute4x64_pd(_mm256_loadu_pd(c + i), 0xd8); /* 0 2 1 3 */
		const __m256d ss = _mm256_permute4x64_pd(_mm256_loadu_pd(sn + i), 0xd8);
		const __m256d r0 = _mm256_sub_pd(_mm256_mul_pd(x0, cc), _mm256_mul_pd(x1, ss));
		const __m256d r1 = _mm256_add_pd(_mm256_mul_pd(x0, ss), _mm256_mul_pd(x1, cc));
		const __m128 a = _mm256_cvtpd_ps(_mm256_unpacklo_pd(r0, r1)); /* pairs 0, 1 */
		const __m128 b = _mm256_cvtpd_ps(_mm256_unpackhi_pd(r0, r1)); /* pairs 2, 3 */
		_mm256_storeu_ps(p + 2 * i, _mm256_insertf128_ps(_mm256_castps128_ps256(a), b, 1));
	}
	rotate_c(p, c, sn, i, half);
}
#endif

void hr_rope_rotate(float *x, int H, int hd, int half, const double *c, const double *s, int path)
{
	if (path == HG_PATH_AUTO)
		path = hg_path_auto();
#if HR_X86
	if (path >= HG_PATH_AVX2 && hg_path_available(HG_PATH_AVX2)) {
		for (int h = 0; h < H; h++)
			rotate_avx2(x + (size_t)h * hd, c, s, half);
		return;
	}
#endif
	for (int h = 0; h < H; h++)
		rotate_c(x + (size_t)h * hd, c, s, 0, half);
}

/* ---- softmax at a temperature, top-k and top-p ----
 * ref_logits_process_row's operations: the max (NaN skipped, as its `>`),
 * e_i = exp((l_i - max) * (1 / T)) by host_exp.h's exp, their sum in double,
 * p_i = e_i * (float)(1 / sum). The sum is 16 double partial sums, element
 * i into lane i mod 16, each lane in element order, then lanes 0 .. 15 added
 * in order: one order for every path, so every path gives the same bits.
 * With top-k / top-p (hr_logits_truncate) only the sorted prefix the
 * truncation can keep is sorted (see there). */

#define HR_SM_LANES 16

static void exp_tail_c(float *p, const float *l, size_t i, size_t n, float mx, float inv_t,
                       double acc[HR_SM_LANES])
{
	for (; i < n; i++) {
		const float e = hx_exp_c((l[i] - mx) * inv_t);
		p[i] = e;
		acc[i % HR_SM_LANES] += e;
	}
}

static void scale_c(float *p, size_t i, size_t n, float r)
{
	for (; i < n; i++)
		p[i] *= r;
}

static float max_c(const float *l, size_t i, size_t n, float mx)
{
	for (; i < n; i++)
		if (l[i] > mx)
			mx = l[i];
	return mx;
}

static double lanes_sum(const double acc[HR_SM_LANES])
{
	double s = 0;
	for (int j = 0; j < HR_SM_LANES; j++)
		s += acc[j];
	return s;
}

/* p = the unnormalised e; returns their sum */
#if HR_X86
static HR_AVX2 double exp_row_avx2(float *p, const float *l, size_t n, float inv_t)
{
	size_t i = 0;
	__m256 m = _mm256_set1_ps(-INFINITY);
	for (; i + 8 <= n; i += 8)
		m = _mm256_max_ps(_mm256_loadu_ps(l + i), m); /* NaN in l: m kept */
	float mv[8];
	_mm256_storeu_ps(mv, m);
	const float mx = max_c(l, i, n, max_c(mv, 0, 8, -INFINITY));
	const __m256 vm = _mm256_set1_ps(mx), vt = _mm256_set1_ps(inv_t);
	__m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
	for (i = 0; i + HR_SM_LANES <= n; i += HR_SM_LANES) {
		const __m256 e0 = hx_exp8_avx2(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(l + i), vm), vt));
		const __m256 e1 = hx_exp8_avx2(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(l + i + 8), vm),
		                                             vt));
		_mm256_storeu_ps(p + i, e0);
		_mm256_storeu_ps(p + i + 8, e1);
		a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e0)));
		a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(e0, 1)));
		a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(e1)));
		a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(e1, 1)));
	}
	double acc[HR_SM_LANES];
	_mm256_storeu_pd(acc, a0);
	_mm256_storeu_pd(acc + 4, a1);
	_mm256_storeu_pd(acc + 8, a2);
	_mm256_storeu_pd(acc + 12, a3);
	exp_tail_c(p, l, i, n, mx, inv_t, acc);
	return lanes_sum(acc);
}

static HR_AVX2 void scale_avx2(float *p, size_t n, float r)
{
	const __m256 vr = _mm256_set1_ps(r);
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(p + i, _mm256_mul_ps(_mm256_loadu_ps(p + i), vr));
	scale_c(p, i, n, r);
}

static HR_AVX512 double exp_row_512(float *p, const float *l, size_t n, float inv_t)
{
	size_t i = 0;
	__m512 m = _mm512_set1_ps(-INFINITY);
	for (; i + 16 <= n; i += 16)
		m = _mm512_max_ps(_mm512_loadu_ps(l + i), m); /* NaN in l: m kept */
	float mv[16];
	_mm512_storeu_ps(mv, m);
	const float mx = max_c(l, i, n, max_c(mv, 0, 16, -INFINITY));
	const __m512 vm = _mm512_set1_ps(mx), vt = _mm512_set1_ps(inv_t);
	__m512d a0 = _mm512_setzero_pd(), a1 = a0;
	for (i = 0; i + HR_SM_LANES <= n; i += HR_SM_LANES) {
		const __m512 e = hx_exp16_512(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(l + i), vm), vt));
		_mm512_storeu_ps(p + i, e);
		a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
		a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(
			_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
	}
	double acc[HR_SM_LANES];
	_mm512_storeu_pd(acc, a0);
	_mm512_storeu_pd(acc + 8, a1);
	exp_tail_c(p, l, i, n, mx, inv_t, acc);
	return lanes_sum(acc);
}

static HR_AVX512 void scale_512(float *p, size_t n, float r)
{
	const __m512 vr = _mm512_set1_ps(r);
	size_t i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(p + i, _mm512_mul_ps(_mm512_loadu_ps(p + i), vr));
	scale_c(p, i, n, r);
}
#endif

static double exp_row(float *p, const float *l, size_t n, float inv_t, int path)
{
#if HR_X86
	if (path >= HG_PATH_AVX512 && hg_path_available(HG_PATH_AVX512))
		return exp_row_512(p, l, n, inv_t);
	if (path >= HG_PATH_AVX2 && hg_path_available(HG_PATH_AVX2))
		return exp_row_avx2(p, l, n, inv_t);
#endif
	double acc[HR_SM_LANES] = {0};
	exp_tail_c(p, l, 0, n, max_c(l, 0, n, -INFINITY), inv_t, acc);
	return lanes_sum(acc);
}

static void scale_row(float *p, size_t n, float r, int path)
{
#if HR_X86
	if (path >= HG_PATH_AVX512 && hg_path_available(HG_PATH_AVX512)) {
		scale_512(p, n, r);
		return;
	}
	if (path >= HG_PATH_AVX2 && hg_path_available(HG_PATH_AVX2)) {
		scale_avx2(p, n, r);
		return;
	}
#endif
	scale_c(p, 0, n, r);
}

void hr_softmax_temp(float *probs, const float *logits, size_t n, float temp, int path)
{
	if (path == HG_PATH_AUTO)
		path = hg_path_auto();
	const double s = exp_row(probs, logits, n, 1.0f / temp, path);
	scale_row(probs, n, (float)(1.0 / s), path);
}

int hr_logits_truncate(float *probs, const float *logits, int n, float temp, int top_k,
                       float top_p, int *idx, int path)
{
	if (path == HG_PATH_AUTO)
		path = hg_path_auto();
	const double total = exp_row(probs, logits, (size_t)n, 1.0f / temp, path);
	int n_pos = 0;
	for (int i = 0; i < n; i++)
		n_pos += probs[i] > 0.0f;
	const int kk = top_k > 0 && top_k < n_pos ? top_k : n_pos; /* ref's keep after top-k */
	/* the tokens ref's sort puts first are those with the largest e (exp
	 * is monotone in the logit: a token with e >= tau precedes every token
	 * with e < tau), so {e >= tau} is a prefix of ref's order: sort it
	 * alone, for tau = 2^-4, 2^-8, .. (the max has e = 1) down to every
	 * positive e, until it holds the kk tokens top-k keeps and, with top-p,
	 * the point where ref's walk stops */
	static const float taus[] = {0x1p-4f, 0x1p-8f, 0x1p-12f, 0x1p-16f, 0x1p-24f, 0x1p-40f,
	                             0x1p-70f, 0x1p-100f, 0.0f};
	/* the prefix must hold top-k's kk tokens, except where top-p alone
	 * truncates (its walk says when the prefix is long enough) */
	const int need = top_p < 1.0f && kk == n_pos ? 1 : kk;
	int keep = 0;
	double ks = 0;
	for (size_t t = 0; t < sizeof(taus) / sizeof(taus[0]); t++) {
		const float tau = taus[t];
		int m = 0;
		for (int i = 0; i < n; i++)
			if (probs[i] > 0.0f && probs[i] >= tau)
				idx[m++] = i;
		const bool all = m == n_pos;
		if (m < need && !all)
			continue;
		ref_sort_desc(idx, m, logits); /* ref's order: by logit, ties by index */
		keep = m < kk ? m : kk;
		if (!(top_p < 1.0f))
			break;
		/* ref: ks over the top-k survivors (every positive e without top-k:
		 * the total), keep token r while the mass before it is <= top_p */
		double kt = 0;
		if (kk < n_pos)
			for (int r = 0; r < keep; r++)
				kt += probs[idx[r]];
		else
			kt = total;
		double c = 0;
		int r;
		for (r = 0; r < keep; r++) {
			if (r > 0 && c / kt > top_p)
				break;
			c += probs[idx[r]];
		}
		if (r < keep || keep == kk || all) { /* the walk stopped inside the prefix */
			keep = r;
			break;
		}
	}
	for (int r = 0; r < keep; r++)
		ks += probs[idx[r]];
	/* the kept values (marked by their sign: every e is >= 0), then 0 for
	 * the other positive e (ref zeroes those it sorted; a NaN stays) */
	const float inv = (float)(1.0 / ks);
	for (int r = 0; r < keep; r++)
		probs[idx[r]] = -(probs[idx[r]] * inv);
	for (int i = 0; i < n; i++)
		probs[i] = probs[i] < 0.0f ? -probs[i] : probs[i] > 0.0f ? 0.0f : probs[i];
	return keep;
}
