/* One exp for the host ops (host_attn.c's softmax, host_rowops.c's SwiGLU),
 * in three forms that compute the same IEEE operations in the same order,
 * so they give the same bits: hx_exp_c (portable C: fmaf, rintf),
 * hx_exp8_avx2 (8 lanes) and hx_exp16_512 (16 lanes, AVX-512F).
 *
 * exp(x) = 2^n p(r): n = rint(x log2e) (round to nearest even, as rintf in
 * the default rounding mode and vroundps/vrndscaleps with NEAREST_INT),
 * r = x - n c1 - n c2 (Cody-Waite: c1 + c2 = ln 2, c1 with 9 significant
 * bits so n c1 is exact, two fmaf), p Cephes' degree-7 expf polynomial
 * (Horner by fmaf, then fmaf(y, r * r, r + 1)); 2^n applied as two exact
 * powers of two, 2^(n >> 1) then 2^(n - (n >> 1)), so only the last
 * multiply rounds (a result near overflow or in the subnormals is rounded
 * once, never made an exponent pattern out of range).
 *
 * Domain: x is clamped above at 89 (exp overflows to +inf from 88.72 on,
 * +inf included); below -87 (ln FLT_MIN is -87.34) the result is exactly
 * +0 (so -inf, a masked score, gives a zero weight; SwiGLU's 1 + exp(-g) is
 * 1 there either way); NaN gives NaN. Accuracy over every float in [-87,
 * 88.72] against the double exp (a one-off exhaustive run): at most 1.26
 * ulp of the correctly rounded value; tests/test_host_rowops.c holds a
 * sample of all floats and the edges to 2 ulp, the three forms to each
 * other bit for bit. */
#ifndef SW_HOST_EXP_H
#define SW_HOST_EXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define HX_EXP_LO (-87.0f)
#define HX_EXP_HI 89.0f
#define HX_LOG2E 1.44269504088896341f
#define HX_C1 0.693359375f
#define HX_C2 (-2.12194440e-4f)
#define HX_P0 1.9875691500e-4f
#define HX_P1 1.3981999507e-3f
#define HX_P2 8.3334519073e-3f
#define HX_P3 4.1665795894e-2f
#define HX_P4 1.6666665459e-1f
#define HX_P5 5.0000001201e-1f

static inline float hx_pow2i(int32_t k) /* 2^k for k in [-126, 127] */
{
	const uint32_t b = (uint32_t)(k + 127) << 23;
	float f;
	memcpy(&f, &b, sizeof(f));
	return f;
}

static inline float hx_exp_c(float x0)
{
	if (x0 < HX_EXP_LO) /* false for NaN */
		return 0.0f;
	const float x = x0 > HX_EXP_HI ? HX_EXP_HI : x0; /* NaN stays NaN */
	const float fn = __builtin_rintf(x * HX_LOG2E);
	float r = __builtin_fmaf(-fn, HX_C1, x);
	r = __builtin_fmaf(-fn, HX_C2, r);
	float y = __builtin_fmaf(HX_P0, r, HX_P1);
	y = __builtin_fmaf(y, r, HX_P2);
	y = __builtin_fmaf(y, r, HX_P3);
	y = __builtin_fmaf(y, r, HX_P4);
	y = __builtin_fmaf(y, r, HX_P5);
	y = __builtin_fmaf(y, r * r, r + 1.0f);
	if (x != x)
		return y; /* NaN (the vector forms' integer n is garbage then; y is NaN) */
	const int32_t n = (int32_t)fn, n1 = n >> 1;
	return y * hx_pow2i(n1) * hx_pow2i(n - n1);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

static inline __attribute__((target("avx2,fma"))) __m256 hx_exp8_avx2(__m256 x0)
{
	const __m256 dead = _mm256_cmp_ps(x0, _mm256_set1_ps(HX_EXP_LO), _CMP_LT_OQ); /* not NaN */
	const __m256 x = _mm256_min_ps(_mm256_set1_ps(HX_EXP_HI), x0); /* NaN: x0 */
	const __m256 fn = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(HX_LOG2E)),
	                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(HX_C1), x);
	r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(HX_C2), r);
	__m256 y = _mm256_fmadd_ps(_mm256_set1_ps(HX_P0), r, _mm256_set1_ps(HX_P1));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(HX_P2));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(HX_P3));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(HX_P4));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(HX_P5));
	y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	const __m256i n = _mm256_cvtps_epi32(fn), n1 = _mm256_srai_epi32(n, 1);
	const __m256i b = _mm256_set1_epi32(127);
	const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, b), 23));
	const __m256 s2 = _mm256_castsi256_ps(
		_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(n, n1), b), 23));
	return _mm256_andnot_ps(dead, _mm256_mul_ps(_mm256_mul_ps(y, s1), s2));
}

static inline __attribute__((target("avx512f"))) __m512 hx_exp16_512(__m512 x0)
{
	const __mmask16 live = _mm512_cmp_ps_mask(x0, _mm512_set1_ps(HX_EXP_LO), _CMP_NLT_UQ); /* NaN too */
	const __m512 x = _mm512_min_ps(_mm512_set1_ps(HX_EXP_HI), x0); /* NaN: x0 */
	const __m512 fn = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(HX_LOG2E)),
	                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(HX_C1), x);
	r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(HX_C2), r);
	__m512 y = _mm512_fmadd_ps(_mm512_set1_ps(HX_P0), r, _mm512_set1_ps(HX_P1));
	y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(HX_P2));
	y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(HX_P3));
	y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(HX_P4));
	y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(HX_P5));
	y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
	const __m512i n = _mm512_cvtps_epi32(fn), n1 = _mm512_srai_epi32(n, 1);
	const __m512i b = _mm512_set1_epi32(127);
	const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, b), 23));
	const __m512 s2 = _mm512_castsi512_ps(
		_mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(n, n1), b), 23));
	return _mm512_maskz_mul_ps(live, _mm512_mul_ps(y, s1), s2);
}
#endif

#endif
