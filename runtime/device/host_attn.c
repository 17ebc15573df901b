/* Host tree attention (host_attn.h). A job is split into parts of (KV
 * head, up to HA_ROWS_T query positions); a part holds its G * t rows'
 * scores (rows x n_keys fp32, in L2), and passes twice over the head's keys
 * in blocks of HA_KEY_BLOCK: K blocks for the scores (exact max, then
 * exp: libm's expf on the portable path, host_exp.h's on AVX2), V blocks
 * for the weighted sums. Each block is widened to fp32 once into an L1
 * buffer and read by every row; on AVX2 a row's scores take 8 keys at a
 * time (8 FMA chains in flight) and its weighted sum 64 values (8 chains),
 * each key's and each value's operations those of the 4-key / 32-value
 * steps, so the bits do not depend on the grouping. The AVX2 path with
 * head_dim a multiple of 8 and at most HA_DIRECT_T query positions (a
 * decode row) reads K/V in place instead, all KV heads of a part key after
 * key (part_direct, below): the same bits again (test_host_attn's
 * test_rows_hd64 checks rows across the two). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "host_attn.h"
#include "host_exp.h"
#include "host_gemm.h"
#include "host_pool.h"
#include "kernels/ref/ref.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HA_X86 1
#define HA_AVX2 __attribute__((target("avx2,fma,f16c"))) /* hg_path AVX2 has F16C */
#else
#define HA_X86 0
#endif

#define HA_ROWS_T 8 /* query positions per part */
#define HA_V_BLOCK 32 /* the direct path: values per accumulation of the output rows */
#ifndef HA_DIRECT_T
#define HA_DIRECT_T 1 /* the direct path up to this many query positions (a decode
                       * row; from 2 on, each row's reloads of the cache cost more
                       * than the widened copy: same bits either way) */
#endif
#ifndef HA_PF_KEYS
#define HA_PF_KEYS 8 /* the direct path: K rows prefetched ahead */
#endif

typedef struct ha_job {
	float *out;
	const uint16_t *q, *k, *v;
	const uint64_t *mask;
	int T, ctx, nb, H, KH, hd, hdp, mw, n_tc;
	int n_kg; /* the direct path: parts per query chunk, each a range of KV heads */
	int window; /* sliding window (ha_tree_attention_window), 0: none */
	bool f16, avx2; /* avx2: the AVX2 instantiation runs (any path above portable) */
	float scale;
	atomic_int rc; /* any part's failure fails the call */
} ha_job;

/* ---- dot and axpy over hdp (a multiple of 8) floats ---- */

static float dot_c(const float *a, const float *b, int n)
{
	float s[8] = {0};
	for (int i = 0; i < n; i += 8)
		for (int l = 0; l < 8; l++)
			s[l] = __builtin_fmaf(a[i + l], b[i + l], s[l]);
	return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

static void axpy_c(float *y, float p, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] = __builtin_fmaf(p, x[i], y[i]);
}

#if HA_X86
/* y[0..64) += p_j x_j over the n_j keys: eight independent FMA chains */
static inline __attribute__((always_inline)) HA_AVX2 void axpy64_avx2(float *y, const float *p,
                                                                     const float *x, int n_j, int n)
{
	__m256 a[8];
	_Pragma("GCC unroll 8")
	for (int c = 0; c < 8; c++)
		a[c] = _mm256_load_ps(y + 8 * c);
	for (int j = 0; j < n_j; j++) {
		if (p[j] == 0.0f)
			continue;
		const __m256 pj = _mm256_set1_ps(p[j]);
		const float *xr = x + (size_t)j * n;
		_Pragma("GCC unroll 8")
		for (int c = 0; c < 8; c++)
			a[c] = _mm256_fmadd_ps(pj, _mm256_load_ps(xr + 8 * c), a[c]);
	}
	_Pragma("GCC unroll 8")
	for (int c = 0; c < 8; c++)
		_mm256_store_ps(y + 8 * c, a[c]);
}

/* y += p_j x_j over the n_j keys of a block (p_j = 0 skipped: an invisible
 * key's V may hold anything); each lane one FMA chain in key order, so the
 * width a lane is taken in does not change its bits */
static inline HA_AVX2 void axpy_block_avx2(float *y, const float *p, const float *x, int n_j, int n)
{
	int i = 0;
	for (; i + 64 <= n; i += 64)
		axpy64_avx2(y + i, p, x + i, n_j, n);
	for (; i < n; i += 32) {
		const int w = n - i < 32 ? n - i : 32; /* 8, 16, 24 or 32 */
		__m256 a0 = _mm256_load_ps(y + i), a1 = a0, a2 = a0, a3 = a0;
		if (w > 8)
			a1 = _mm256_load_ps(y + i + 8);
		if (w > 16)
			a2 = _mm256_load_ps(y + i + 16);
		if (w > 24)
			a3 = _mm256_load_ps(y + i + 24);
		for (int j = 0; j < n_j; j++) {
			if (p[j] == 0.0f)
				continue;
			const __m256 pj = _mm256_set1_ps(p[j]);
			const float *xr = x + (size_t)j * n + i;
			a0 = _mm256_fmadd_ps(pj, _mm256_load_ps(xr), a0);
			if (w > 8)
				a1 = _mm256_fmadd_ps(pj, _mm256_load_ps(xr + 8), a1);
			if (w > 16)
				a2 = _mm256_fmadd_ps(pj, _mm256_load_ps(xr + 16), a2);
			if (w > 24)
				a3 = _mm256_fmadd_ps(pj, _mm256_load_ps(xr + 24), a3);
		}
		_mm256_store_ps(y + i, a0);
		if (w > 8)
			_mm256_store_ps(y + i + 8, a1);
		if (w > 16)
			_mm256_store_ps(y + i + 16, a2);
		if (w > 24)
			_mm256_store_ps(y + i + 24, a3);
	}
}
#endif

/* s[j] = scale * q.k_j for the n keys of a block (rows of hdp floats) */
static void scores_c(float *s, const float *q, const float *kb, int n, int hdp, float scale)
{
	for (int j = 0; j < n; j++)
		s[j] = dot_c(q, kb + (size_t)j * hdp, hdp) * scale;
}

#if HA_X86
/* the four sums of (a0 a1 a2 a3), each ((l0 + l1) + (l2 + l3)) + ((l4 + l5)
 * + (l6 + l7)) of its lanes, scaled */
static inline HA_AVX2 __m128 reduce4_avx2(__m256 a0, __m256 a1, __m256 a2, __m256 a3, float scale)
{
	const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
	const __m128 t = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
	return _mm_mul_ps(t, _mm_set1_ps(scale));
}

/* scale * q.k for four keys (rows k0..k3): four independent FMA chains,
 * each reduced in the same order */
static inline __attribute__((always_inline)) HA_AVX2 __m128
score4_avx2(const float *q, const float *k0, const float *k1, const float *k2, const float *k3,
            int hdp, float scale)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	for (int d = 0; d < hdp; d += 8) {
		const __m256 x = _mm256_load_ps(q + d);
		a0 = _mm256_fmadd_ps(x, _mm256_load_ps(k0 + d), a0);
		a1 = _mm256_fmadd_ps(x, _mm256_load_ps(k1 + d), a1);
		a2 = _mm256_fmadd_ps(x, _mm256_load_ps(k2 + d), a2);
		a3 = _mm256_fmadd_ps(x, _mm256_load_ps(k3 + d), a3);
	}
	return reduce4_avx2(a0, a1, a2, a3, scale);
}

/* score4_avx2 for the eight consecutive keys k .. k + 7 (rows hdp apart):
 * eight chains in flight, each key's the same operations */
static inline __attribute__((always_inline)) HA_AVX2 void score8_avx2(float *s, const float *q,
                                                                     const float *k, int hdp,
                                                                     float scale)
{
	__m256 a[8];
	_Pragma("GCC unroll 8")
	for (int i = 0; i < 8; i++)
		a[i] = _mm256_setzero_ps();
	_Pragma("GCC unroll 8")
	for (int d = 0; d < hdp; d += 8) {
		const __m256 x = _mm256_load_ps(q + d);
		_Pragma("GCC unroll 8")
		for (int i = 0; i < 8; i++)
			a[i] = _mm256_fmadd_ps(x, _mm256_load_ps(k + (size_t)i * hdp + d), a[i]);
	}
	_mm_storeu_ps(s, reduce4_avx2(a[0], a[1], a[2], a[3], scale));
	_mm_storeu_ps(s + 4, reduce4_avx2(a[4], a[5], a[6], a[7], scale));
}

/* Eight, then four keys at a time; the last 1-3 keys of the block go
 * through the same four-key reduction (the last key repeated, the copies
 * dropped), so a key's score never depends on how many keys the block
 * holds: a tree forward sized to fewer rows (a rows region, device.h) gives
 * its rows the bits the full one gives them. */
static inline __attribute__((always_inline)) HA_AVX2 void
scores_avx2_hd(float *s, const float *q, const float *kb, int n, int hdp, float scale)
{
	int j = 0;
	for (; j + 8 <= n; j += 8)
		score8_avx2(s + j, q, kb + (size_t)j * hdp, hdp, scale);
	for (; j + 4 <= n; j += 4) {
		const float *k0 = kb + (size_t)j * hdp;
		_mm_storeu_ps(s + j, score4_avx2(q, k0, k0 + hdp, k0 + 2 * (size_t)hdp,
		                                 k0 + 3 * (size_t)hdp, hdp, scale));
	}
	if (j < n) {
		const float *kr[4];
		float t[4];
		for (int i = 0; i < 4; i++)
			kr[i] = kb + (size_t)(j + i < n ? j + i : n - 1) * hdp;
		_mm_storeu_ps(t, score4_avx2(q, kr[0], kr[1], kr[2], kr[3], hdp, scale));
		for (int i = 0; j + i < n; i++)
			s[j + i] = t[i];
	}
}

/* score4_avx2 of four keys for two query rows at once (each key's loads
 * shared; eight chains in flight), the same operations per row and key */
static inline __attribute__((always_inline)) HA_AVX2 void
score4x2_avx2(float *s0, float *s1, const float *q0, const float *q1, const float *k0,
              const float *k1, const float *k2, const float *k3, int hdp, float scale)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	__m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
	_Pragma("GCC unroll 8")
	for (int d = 0; d < hdp; d += 8) {
		const __m256 x = _mm256_load_ps(q0 + d), y = _mm256_load_ps(q1 + d);
		const __m256 c0 = _mm256_load_ps(k0 + d), c1 = _mm256_load_ps(k1 + d);
		const __m256 c2 = _mm256_load_ps(k2 + d), c3 = _mm256_load_ps(k3 + d);
		a0 = _mm256_fmadd_ps(x, c0, a0);
		b0 = _mm256_fmadd_ps(y, c0, b0);
		a1 = _mm256_fmadd_ps(x, c1, a1);
		b1 = _mm256_fmadd_ps(y, c1, b1);
		a2 = _mm256_fmadd_ps(x, c2, a2);
		b2 = _mm256_fmadd_ps(y, c2, b2);
		a3 = _mm256_fmadd_ps(x, c3, a3);
		b3 = _mm256_fmadd_ps(y, c3, b3);
	}
	_mm_storeu_ps(s0, reduce4_avx2(a0, a1, a2, a3, scale));
	_mm_storeu_ps(s1, reduce4_avx2(b0, b1, b2, b3, scale));
}

/* scores_avx2_hd for two query rows (s0, q0) and (s1, q1) */
static inline __attribute__((always_inline)) HA_AVX2 void
scores2_avx2_hd(float *s0, float *s1, const float *q0, const float *q1, const float *kb, int n,
                int hdp, float scale)
{
	int j = 0;
	for (; j + 4 <= n; j += 4) {
		const float *k0 = kb + (size_t)j * hdp;
		score4x2_avx2(s0 + j, s1 + j, q0, q1, k0, k0 + hdp, k0 + 2 * (size_t)hdp,
		              k0 + 3 * (size_t)hdp, hdp, scale);
	}
	if (j < n) {
		const float *kr[4];
		float t0[4], t1[4];
		for (int i = 0; i < 4; i++)
			kr[i] = kb + (size_t)(j + i < n ? j + i : n - 1) * hdp;
		score4x2_avx2(t0, t1, q0, q1, kr[0], kr[1], kr[2], kr[3], hdp, scale);
		for (int i = 0; j + i < n; i++)
			s0[j + i] = t0[i], s1[j + i] = t1[i];
	}
}

static HA_AVX2 void scores2_avx2(float *s0, float *s1, const float *q0, const float *q1,
                                 const float *kb, int n, int hdp, float scale)
{
	if (hdp == 64)
		scores2_avx2_hd(s0, s1, q0, q1, kb, n, 64, scale);
	else
		scores2_avx2_hd(s0, s1, q0, q1, kb, n, hdp, scale);
}

static HA_AVX2 void scores_avx2(float *s, const float *q, const float *kb, int n, int hdp,
                                float scale)
{
	if (hdp == 64) /* SmolLM2's and most models' head_dim: unrolled */
		scores_avx2_hd(s, q, kb, n, 64, scale);
	else
		scores_avx2_hd(s, q, kb, n, hdp, scale);
}

static inline HA_AVX2 __m256 ld16(const uint16_t *p, bool f16)
{
	const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
	return f16 ? _mm256_cvtph_ps(x)
	           : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16));
}
#endif

/* s[j] = exp(s[j] - mx) for j < n, in place; returns their sum */
static float exp_row_c(float *s, int n, float mx)
{
	float sum = 0.0f;
	for (int j = 0; j < n; j++) {
		s[j] = expf(s[j] - mx);
		sum += s[j];
	}
	return sum;
}

#if HA_X86
/* exp(x - m) on 8 lanes: host_exp.h's exp (within 2 ulp of expf on [-87,
 * 0], where softmax works); below -87 exactly 0, as expf(-inf) is, so a
 * masked key's weight stays 0 and its V is never read; NaN propagates. */
static inline HA_AVX2 __m256 exp8_avx2(__m256 x0, __m256 m)
{
	return hx_exp8_avx2(_mm256_sub_ps(x0, m));
}

/* s[j] = exp(s[j] - mx) in place, returns their sum: key j in lane j % 8,
 * the tail padded with -inf (weight exactly +0), so the sum over a row's
 * visible keys has the same bits whatever number of masked keys follow
 * them (rows regions, as scores_avx2). */
static HA_AVX2 float exp_row_avx2(float *s, int n, float mx)
{
	const __m256 m = _mm256_set1_ps(mx);
	__m256 acc = _mm256_setzero_ps();
	int j = 0;
	for (; j + 8 <= n; j += 8) {
		const __m256 y = exp8_avx2(_mm256_loadu_ps(s + j), m);
		_mm256_storeu_ps(s + j, y);
		acc = _mm256_add_ps(acc, y);
	}
	if (j < n) {
		float t[8];
		for (int i = 0; i < 8; i++)
			t[i] = j + i < n ? s[j + i] : -INFINITY;
		const __m256 y = exp8_avx2(_mm256_loadu_ps(t), m);
		_mm256_storeu_ps(t, y);
		acc = _mm256_add_ps(acc, y);
		for (int i = 0; j + i < n; i++)
			s[j + i] = t[i];
	}
	__m128 x = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
	x = _mm_add_ps(x, _mm_movehl_ps(x, x));
	x = _mm_add_ss(x, _mm_movehdup_ps(x));
	return _mm_cvtss_f32(x);
}
#endif

/* avx2 is a constant in each instantiation of part_impl below, so the
 * vector helpers inline into the AVX2 copy and vanish from the portable one */
static inline void axpy_block(const ha_job *jb, const bool avx2, float *y, const float *p,
                              const float *x, int n_j)
{
#if HA_X86
	if (avx2) {
		axpy_block_avx2(y, p, x, n_j, jb->hdp);
		return;
	}
#endif
	for (int j = 0; j < n_j; j++)
		if (p[j] != 0.0f)
			axpy_c(y, p[j], x + (size_t)j * jb->hdp, jb->hdp);
}


/* keys j0 .. j0 + n - 1 of KV head kh (rows of KH * hd) into buf (n, hdp).
 * The head's slice of each cached row (hd 16-bit values, KH * hd apart) is
 * read from memory once a token, a short strided run a row: the slice
 * HA_PF_ROWS rows on is prefetched (up to the block's last row), so the
 * misses overlap instead of waiting one by one. Timing only. */
#define HA_PF_ROWS 8
#ifndef HA_PF_ROWS_ALL
#define HA_PF_ROWS_ALL 16
#endif
static void widen_block(const ha_job *jb, float *buf, const uint16_t *src, int kh, int j0, int n)
{
	const size_t kvd = (size_t)jb->KH * jb->hd, sb = (size_t)jb->hd * sizeof(*src);
	for (int j = 0; j < n; j++) {
		if (j + HA_PF_ROWS < n) {
			const char *pf = (const char *)(src + (size_t)(j0 + j + HA_PF_ROWS) * kvd +
			                                (size_t)kh * jb->hd);
			for (size_t o = 0; o < sb; o += 64)
				__builtin_prefetch(pf + o, 0, 3);
		}
		float *r = buf + (size_t)j * jb->hdp;
		hg_to_f32(r, src + (size_t)(j0 + j) * kvd + (size_t)kh * jb->hd, jb->hd, !jb->f16);
		for (int d = jb->hd; d < jb->hdp; d++)
			r[d] = 0.0f;
	}
}

#if HA_X86
/* widen_block for hd a multiple of 8 (hdp == hd), 8 values a register (the
 * same exact widening), without a call a row */
static HA_AVX2 void widen_block_avx2(const ha_job *jb, float *buf, const uint16_t *src, int kh,
                                     int j0, int n)
{
	const int hd = jb->hd;
	const size_t kvd = (size_t)jb->KH * hd, sb = (size_t)hd * sizeof(*src);
	const bool f16 = jb->f16;
	/* the first KV head's pass prefetches whole rows (every head's slice),
	 * HA_PF_ROWS_ALL rows ahead, the block's and the next block's; the
	 * others find theirs in cache. Timing only. */
	const int pfa = kh == 0 ? HA_PF_ROWS_ALL : HA_PF_ROWS;
	const size_t pf_lo = kh == 0 ? 0 : (size_t)kh * hd * sizeof(*src);
	const size_t pf_hi = kh == 0 ? kvd * sizeof(*src) : pf_lo + sb;
	for (int j = 0; j < n; j++) {
		if (kh == 0 || j + pfa < n) {
			const char *pf = (const char *)(src + (size_t)(j0 + j + pfa) * kvd);
			if (j0 + j + pfa < jb->ctx + jb->nb)
				for (size_t o = pf_lo; o < pf_hi; o += 64)
					__builtin_prefetch(pf + o, 0, 3);
		}
		const uint16_t *x = src + (size_t)(j0 + j) * kvd + (size_t)kh * hd;
		float *r = buf + (size_t)j * hd;
		for (int d = 0; d < hd; d += 8)
			_mm256_store_ps(r + d, ld16(x + d, f16));
	}
}
#endif

/* lo: the first context slot inside query t's window (0 without one) */
static bool visible(const ha_job *jb, int t, int j, int lo)
{
	const int b = j - jb->ctx;
	if (b < 0)
		return j >= lo;
	if (jb->mask)
		return (jb->mask[(size_t)t * jb->mw + (b >> 6)] >> (b & 63)) & 1u;
	return b <= jb->nb - jb->T + t;
}

#if HA_X86
/* Query t's scores s[0 .. nk): the keys it does not see set to -inf (a NaN
 * in an unseen K row overwritten, never used), and their maximum returned.
 * Context slots: [0, c0) outside the window, [c0, ctx) seen, their maximum
 * 8 lanes wide: max_ps(s, m) is s > m ? s : m as below (a NaN never wins);
 * only the sign of a zero maximum can depend on the lanes, and exp(s - m)
 * does not (exp8_avx2 of +-0 is 1). */
static HA_AVX2 float mask_max_avx2(const ha_job *jb, float *s, int t, int lo, int nk)
{
	const int c0 = lo < 0 ? 0 : lo > jb->ctx ? jb->ctx : lo;
	for (int j = 0; j < c0; j++)
		s[j] = -INFINITY;
	__m256 m8 = _mm256_set1_ps(-INFINITY);
	int j = c0;
	for (; j + 8 <= jb->ctx; j += 8)
		m8 = _mm256_max_ps(_mm256_loadu_ps(s + j), m8);
	float m8s[8], m = -INFINITY;
	_mm256_storeu_ps(m8s, m8);
	for (int i = 0; i < 8; i++)
		m = m8s[i] > m ? m8s[i] : m;
	for (; j < nk; j++) {
		if (!visible(jb, t, j, lo))
			s[j] = -INFINITY;
		else
			m = s[j] > m ? s[j] : m;
	}
	return m;
}
#endif

#if HA_X86
/* o = x / sum, 8 lanes a step (the same IEEE division), n a multiple of 8 */
static HA_AVX2 void div_row_avx2(float *o, const float *x, float sum, int n)
{
	const __m256 v = _mm256_set1_ps(sum);
	for (int d = 0; d < n; d += 8)
		_mm256_storeu_ps(o + d, _mm256_div_ps(_mm256_load_ps(x + d), v));
}
#endif

/* Timing only: cache rows [a, a + n) of src (whole rows, every KV head's
 * slice), those below n_all, prefetched */
static void pf_rows(const ha_job *jb, const uint16_t *src, int a, int n, int n_all)
{
	const size_t kvd = (size_t)jb->KH * jb->hd, rb = kvd * sizeof(*src);
	const int b = a + n < n_all ? a + n : n_all;
	for (int j = a; j < b; j++)
		for (size_t o = 0; o < rb; o += 64)
			__builtin_prefetch((const char *)(src + (size_t)j * kvd) + o, 0, 3);
}

/* a block of K or V rows widened into buf (n rows of hdp) */
static inline void widen(const ha_job *jb, const bool avx2, float *buf, const uint16_t *src,
                         int kh, int j0, int n)
{
#if HA_X86
	if (avx2 && jb->hdp == jb->hd) {
		widen_block_avx2(jb, buf, src, kh, j0, n);
		return;
	}
#endif
	widen_block(jb, buf, src, kh, j0, n);
}

static inline __attribute__((always_inline)) void part_impl(ha_job *jb, int part, const bool avx2)
{
	const int kh = part / jb->n_tc, t0 = part % jb->n_tc * HA_ROWS_T;
	const int t1 = t0 + HA_ROWS_T < jb->T ? t0 + HA_ROWS_T : jb->T;
	const int G = jb->H / jb->KH, rows = (t1 - t0) * G, hdp = jb->hdp, KB = HA_KEY_BLOCK;
	/* keys any row of the part may see: causal rows stop at their own slot */
	const int nk = jb->ctx + (jb->mask ? jb->nb : jb->nb - jb->T + t1);
	/* a sliding window: query t at position ctx + depth(t) sees context
	 * slots above ctx + depth(t) - window (kernels/ref tree_attention) */
	int lo[HA_ROWS_T];
	for (int t = t0; t < t1; t++)
		lo[t - t0] = jb->window > 0 ? jb->ctx + ref_tree_depth(jb->mask, jb->mw, jb->T, jb->nb, t) -
		                              jb->window + 1 : 0;
	float *qf = NULL, *S = NULL, *O = NULL, *kb = NULL;
	float *mx = NULL;
	if (posix_memalign((void **)&qf, 64, sizeof(float) * ((size_t)rows * hdp * 2 + (size_t)KB * hdp)) ||
	    !(S = malloc(sizeof(float) * ((size_t)rows * (nk > 0 ? nk : 1) + (size_t)rows)))) {
		free(qf);
		atomic_store(&jb->rc, SW_ENOMEM);
		return;
	}
	O = qf + (size_t)rows * hdp;
	kb = O + (size_t)rows * hdp;
	mx = S + (size_t)rows * nk;
	for (int r = 0; r < rows; r++) {
		const int t = t0 + r / G, h = kh * G + r % G;
		hg_to_f32(qf + (size_t)r * hdp, jb->q + ((size_t)t * jb->H + h) * jb->hd, jb->hd, !jb->f16);
		for (int d = jb->hd; d < hdp; d++)
			qf[(size_t)r * hdp + d] = 0.0f;
		mx[r] = -INFINITY;
	}
	/* the first KV head's part fetches the next block's whole rows (every
	 * head's slice: the other heads' parts then find them in cache) under
	 * the current block's arithmetic, a share after each row; after K's
	 * last block V's first. Timing only. */
	const bool pf = avx2 && kh == 0;
	const int pf_n = (KB + rows - 1) / rows;
	/* pass 1: scores, K block by block */
	for (int j0 = 0; j0 < nk; j0 += KB) {
		const int n = nk - j0 < KB ? nk - j0 : KB;
		widen(jb, avx2, kb, jb->k, kh, j0, n);
		for (int r = 0; r < rows; r++) {
			const int t = t0 + r / G;
			float *s = S + (size_t)r * nk + j0;
			if (pf)
				pf_rows(jb, j0 + KB < nk ? jb->k : jb->v, (j0 + KB < nk ? j0 + KB : 0) + r * pf_n,
				        pf_n, nk);
			/* every key of the block, then the invisible ones masked out (a
			 * NaN in an unseen K row is overwritten here, never used) */
#if HA_X86
			if (avx2 && r + 1 < rows) { /* two rows a call */
				scores2_avx2(s, s + nk, qf + (size_t)r * hdp, qf + (size_t)(r + 1) * hdp, kb, n,
				             hdp, jb->scale);
				r++;
				continue;
			}
			if (avx2)
				scores_avx2(s, qf + (size_t)r * hdp, kb, n, hdp, jb->scale);
			else
#endif
				scores_c(s, qf + (size_t)r * hdp, kb, n, hdp, jb->scale);
			if (avx2)
				continue; /* masked after the pass, row by row (mask_max_avx2) */
			float m = mx[r]; /* a local: s and mx may alias, as far as the compiler knows */
			for (int j = 0; j < n; j++) {
				if (!visible(jb, t, j0 + j, lo[t - t0]))
					s[j] = -INFINITY;
				else
					m = s[j] > m ? s[j] : m; /* fmaxf (NaN ignored) without the libm call */
			}
			mx[r] = m;
		}
	}
#if HA_X86
	for (int r = 0; r < rows && avx2; r++)
		mx[r] = mask_max_avx2(jb, S + (size_t)r * nk, t0 + r / G, lo[r / G], nk);
#endif
	/* softmax weights in place; the sums in O's last use below */
	memset(O, 0, sizeof(float) * (size_t)rows * hdp);
	for (int r = 0; r < rows; r++) {
		float *s = S + (size_t)r * nk, sum = 0.0f;
		if (mx[r] == -INFINITY) { /* sees nothing: zeros, as the reference */
			for (int j = 0; j < nk; j++)
				s[j] = 0.0f;
			continue;
		}
#if HA_X86
		if (avx2)
			sum = exp_row_avx2(s, nk, mx[r]);
		else
#endif
			sum = exp_row_c(s, nk, mx[r]);
		mx[r] = sum;
	}
	/* pass 2: weighted V, block by block */
	for (int j0 = 0; j0 < nk; j0 += KB) {
		const int n = nk - j0 < KB ? nk - j0 : KB;
		widen(jb, avx2, kb, jb->v, kh, j0, n);
		for (int r = 0; r < rows; r++) {
			if (pf && j0 + KB < nk)
				pf_rows(jb, jb->v, j0 + KB + r * pf_n, pf_n, nk);
			axpy_block(jb, avx2, O + (size_t)r * hdp, S + (size_t)r * nk + j0, kb, n);
		}
	}
	for (int r = 0; r < rows; r++) {
		const int t = t0 + r / G, h = kh * G + r % G;
		float *o = jb->out + ((size_t)t * jb->H + h) * jb->hd;
		const bool none = mx[r] == -INFINITY;
#if HA_X86
		if (avx2 && !none && hdp == jb->hd) {
			div_row_avx2(o, O + (size_t)r * hdp, mx[r], hdp);
			continue;
		}
#endif
		for (int d = 0; d < jb->hd; d++)
			o[d] = none ? 0.0f : O[(size_t)r * hdp + d] / mx[r];
	}
	free(qf);
	free(S);
}

#if HA_X86
/* ---- the direct path: all KV heads of a part, K and V read in place ----
 * With hd a multiple of 8 (hdp == hd) the AVX2 path reads the cache where
 * it is, 8 values widened in a register (exactly, as hg_to_f32 widens
 * them), key after key across the part's KV heads, so a part walks each
 * cached row front to back once a pass (a sequential stream the hardware
 * prefetches) instead of each head's 2 * hd-byte slice of every row,
 * widened into a buffer, once per head. Every score and every output is the
 * same FMAs in the same order on the same fp32 values as part_impl's AVX2
 * instantiation, so the same bits (an A/B harness compared the two call by
 * call, 44 shapes, fp16 and bf16, windows) whatever the part split
 * (tests/test_host_attn.c: the reference bound, and one thread against the
 * pool bit for bit). */
/* score4_avx2 on four cached 16-bit key rows */
static inline HA_AVX2 __m128 score4_direct(const float *q, const uint16_t *k0, const uint16_t *k1,
                                           const uint16_t *k2, const uint16_t *k3, int hd,
                                           float scale, bool f16)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	for (int d = 0; d < hd; d += 8) {
		const __m256 x = _mm256_load_ps(q + d);
		a0 = _mm256_fmadd_ps(x, ld16(k0 + d, f16), a0);
		a1 = _mm256_fmadd_ps(x, ld16(k1 + d, f16), a1);
		a2 = _mm256_fmadd_ps(x, ld16(k2 + d, f16), a2);
		a3 = _mm256_fmadd_ps(x, ld16(k3 + d, f16), a3);
	}
	const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
	const __m128 t = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
	return _mm_mul_ps(t, _mm_set1_ps(scale));
}

/* axpy_block_avx2 over n_j cached value rows vb + j * stride */
static inline HA_AVX2 void axpy_direct(float *y, const float *p, const uint16_t *vb, size_t stride,
                                       int n_j, int n, bool f16)
{
	for (int i = 0; i < n; i += 32) {
		const int w = n - i < 32 ? n - i : 32; /* 8, 16, 24 or 32 */
		__m256 a0 = _mm256_load_ps(y + i), a1 = a0, a2 = a0, a3 = a0;
		if (w > 8)
			a1 = _mm256_load_ps(y + i + 8);
		if (w > 16)
			a2 = _mm256_load_ps(y + i + 16);
		if (w > 24)
			a3 = _mm256_load_ps(y + i + 24);
		for (int j = 0; j < n_j; j++) {
			if (p[j] == 0.0f)
				continue;
			const __m256 pj = _mm256_set1_ps(p[j]);
			const uint16_t *xr = vb + (size_t)j * stride + i;
			a0 = _mm256_fmadd_ps(pj, ld16(xr, f16), a0);
			if (w > 8)
				a1 = _mm256_fmadd_ps(pj, ld16(xr + 8, f16), a1);
			if (w > 16)
				a2 = _mm256_fmadd_ps(pj, ld16(xr + 16, f16), a2);
			if (w > 24)
				a3 = _mm256_fmadd_ps(pj, ld16(xr + 24, f16), a3);
		}
		_mm256_store_ps(y + i, a0);
		if (w > 8)
			_mm256_store_ps(y + i + 8, a1);
		if (w > 16)
			_mm256_store_ps(y + i + 16, a2);
		if (w > 24)
			_mm256_store_ps(y + i + 24, a3);
	}
}

/* Query positions [t0, t1) of KV heads [kh0, kh1): rows head by head, each
 * head's (t1 - t0) * G rows position by position (part_impl's order). */
static HA_AVX2 void part_direct(ha_job *jb, int t0, int t1, int kh0, int kh1)
{
	const int G = jb->H / jb->KH, hd = jb->hd, rh = (t1 - t0) * G, rows = rh * (kh1 - kh0);
	const size_t kvd = (size_t)jb->KH * hd;
	const bool f16 = jb->f16;
	const int nk = jb->ctx + (jb->mask ? jb->nb : jb->nb - jb->T + t1);
	int lo[HA_ROWS_T];
	for (int t = t0; t < t1; t++)
		lo[t - t0] = jb->window > 0 ? jb->ctx + ref_tree_depth(jb->mask, jb->mw, jb->T, jb->nb, t) -
		                              jb->window + 1 : 0;
	float *qf = NULL, *S = NULL;
	if (posix_memalign((void **)&qf, 64, sizeof(float) * (size_t)rows * hd * 2) ||
	    !(S = malloc(sizeof(float) * ((size_t)rows * (nk > 0 ? nk : 1) + (size_t)rows)))) {
		free(qf);
		atomic_store(&jb->rc, SW_ENOMEM);
		return;
	}
	float *O = qf + (size_t)rows * hd, *mx = S + (size_t)rows * nk;
	for (int r = 0; r < rows; r++) {
		const int kh = kh0 + r / rh, t = t0 + r % rh / G, h = kh * G + r % G;
		hg_to_f32(qf + (size_t)r * hd, jb->q + ((size_t)t * jb->H + h) * hd, hd, !f16);
		mx[r] = -INFINITY;
	}
	/* pass 1: scores, four keys at a time, every head of the part (the last
	 * 1-3 keys as scores_avx2 takes them: the last key repeated) */
	const size_t pf0 = (size_t)kh0 * hd * 2, pf1 = (size_t)kh1 * hd * 2; /* the part's bytes of a row */
	for (int j = 0; j < nk; j += 4) {
		const uint16_t *kr[4];
		for (int i = 0; i < 4; i++)
			kr[i] = jb->k + (size_t)(j + i < nk ? j + i : nk - 1) * kvd;
		/* prefetch: K rows HA_PF_KEYS on, V's rows here for pass 2 (timing only) */
		for (int i = 0; i < 4; i++) {
			if (j + i + HA_PF_KEYS < nk) {
				const char *pk = (const char *)(jb->k + (size_t)(j + i + HA_PF_KEYS) * kvd);
				for (size_t o = pf0; o < pf1; o += 64)
					__builtin_prefetch(pk + o, 0, 3);
			}
			if (j + i < nk) {
				const char *pv = (const char *)(jb->v + (size_t)(j + i) * kvd);
				for (size_t o = pf0; o < pf1; o += 64)
					__builtin_prefetch(pv + o, 0, 2);
			}
		}
		for (int kh = kh0; kh < kh1; kh++) {
			const size_t o = (size_t)kh * hd;
			for (int r = (kh - kh0) * rh; r < (kh - kh0 + 1) * rh; r++) {
				const __m128 sc = score4_direct(qf + (size_t)r * hd, kr[0] + o, kr[1] + o,
				                                kr[2] + o, kr[3] + o, hd, jb->scale, f16);
				float *s = S + (size_t)r * nk + j;
				if (j + 4 <= nk) {
					_mm_storeu_ps(s, sc);
				} else {
					float t4[4];
					_mm_storeu_ps(t4, sc);
					for (int i = 0; j + i < nk; i++)
						s[i] = t4[i];
				}
			}
		}
	}
	/* the invisible keys masked out (a NaN in an unseen K row overwritten,
	 * never used), the row maxima, then the softmax weights in place */
	for (int r = 0; r < rows; r++) {
		const int t = t0 + r % rh / G;
		float *s = S + (size_t)r * nk;
		const float m = mask_max_avx2(jb, s, t, lo[t - t0], nk);
		if (m == -INFINITY) { /* sees nothing: zeros, as the reference */
			for (int j = 0; j < nk; j++)
				s[j] = 0.0f;
			continue;
		}
		mx[r] = exp_row_avx2(s, nk, m);
	}
	/* pass 2: weighted V, HA_V_BLOCK keys at a time across the heads */
	memset(O, 0, sizeof(float) * (size_t)rows * hd);
	for (int j = 0; j < nk; j += HA_V_BLOCK) {
		const int n = nk - j < HA_V_BLOCK ? nk - j : HA_V_BLOCK;
		for (int kh = kh0; kh < kh1; kh++) {
			const uint16_t *vb = jb->v + (size_t)j * kvd + (size_t)kh * hd;
			for (int r = (kh - kh0) * rh; r < (kh - kh0 + 1) * rh; r++)
				axpy_direct(O + (size_t)r * hd, S + (size_t)r * nk + j, vb, kvd, n, hd, f16);
		}
	}
	for (int r = 0; r < rows; r++) {
		const int kh = kh0 + r / rh, t = t0 + r % rh / G, h = kh * G + r % G;
		float *o = jb->out + ((size_t)t * jb->H + h) * hd;
		const bool none = mx[r] == -INFINITY;
		for (int d = 0; d < hd; d++)
			o[d] = none ? 0.0f : O[(size_t)r * hd + d] / mx[r];
	}
	free(qf);
	free(S);
}

/* part: query chunk part % n_tc, head range part / n_tc of n_kg */
static HA_AVX2 void run_part_direct(void *ctx, int part, int n_parts)
{
	ha_job *jb = ctx;
	const int kg = part / jb->n_tc, t0 = part % jb->n_tc * HA_ROWS_T;
	const int t1 = t0 + HA_ROWS_T < jb->T ? t0 + HA_ROWS_T : jb->T;
	part_direct(jb, t0, t1, kg * jb->KH / jb->n_kg, (kg + 1) * jb->KH / jb->n_kg);
}
#endif

static void run_part_c(void *ctx, int part, int n_parts)
{
	part_impl(ctx, part, false);
}

#if HA_X86
static HA_AVX2 void run_part_avx2(void *ctx, int part, int n_parts)
{
	part_impl(ctx, part, true);
}
#endif

int ha_tree_attention(float *out, const uint16_t *q, const uint16_t *k, const uint16_t *v, int T,
                      int ctx, int nb, int H, int KH, int hd, const uint64_t *mask, int mw, bool f16,
                      int path, int threads)
{
	return ha_tree_attention_window(out, q, k, v, T, ctx, nb, H, KH, hd, mask, mw, f16, 0, path,
	                                threads);
}

int ha_tree_attention_window(float *out, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                             int T, int ctx, int nb, int H, int KH, int hd, const uint64_t *mask,
                             int mw, bool f16, int window, int path, int threads)
{
	if (path == HG_PATH_AUTO)
		path = hg_path_auto();
	if (!hg_path_available(path) || T < 0 || ctx < 0 || nb < T || KH < 1 || H % KH || hd < 1 ||
	    (mask && mw < (nb + 63) / 64) || window < 0)
		return SW_EINVAL;
	if (T == 0 || H == 0)
		return 0;
	ha_job jb = {.out = out, .q = q, .k = k, .v = v, .mask = mask, .T = T, .ctx = ctx, .nb = nb,
	             .H = H, .KH = KH, .hd = hd, .hdp = (hd + 7) & ~7, .mw = mw, .window = window, .f16 = f16,
	             .avx2 = path >= HG_PATH_AVX2, /* AVX-512 machines run the AVX2 code here */ .scale = 1.0f / sqrtf((float)hd),
	             .n_tc = (T + HA_ROWS_T - 1) / HA_ROWS_T};
	int parts = KH * jb.n_tc;
	hp_fn run = run_part_c;
#if HA_X86
	if (jb.avx2)
		run = run_part_avx2;
	if (jb.avx2 && jb.hdp == hd && T <= HA_DIRECT_T) { /* KV heads split only across threads */
		const int th = threads == 1 ? 1 : hp_threads();
		jb.n_kg = th < KH ? th : KH;
		parts = jb.n_kg * jb.n_tc;
		run = run_part_direct;
	}
#endif
	if (threads == 1 || parts == 1)
		for (int p = 0; p < parts; p++)
			run(&jb, p, parts);
	else
		hp_run(run, &jb, parts);
	return atomic_load(&jb.rc);
}
