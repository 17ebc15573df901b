/* The host GEMM (host_gemm.h). A is widened to fp32 once per call (m x kp,
 * kp = k rounded up to 8, zero padded, so a k tail is an ordinary vector
 * step); W is streamed in blocks of HG_TILE_N rows, each block held in
 * L1/L2 while every row block of A passes over it, so W comes from memory
 * once whatever m is. The AVX2 functions carry target attributes,
 * so this file builds without -march=native and the CPU is asked at run
 * time. */
#include <math.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "host_gemm.h"
#include "host_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HG_X86 1
#else
#define HG_X86 0
#endif

#define HG_TILE_R 4  /* rows of A per tile at most */
#define HG_NC_MAX 8  /* rows of W (output columns) per tile at most */
/* One row of A (decode): tiles of few W rows, so W streams nearly linearly
 * (8 interleaved rows ran at 70-78% of a plain read of the same bytes, 2 to
 * 4 at 95-105%, measured over the model's 211 GEMMs a token); the prefetch
 * runs HG_PF_DIST bytes ahead into L2 in the part's own run of W. */
#define HG_NC1 4          /* W rows per one-row tile, AVX2 */
#define HG_NC1_512 2      /* the same, AVX-512 */
#define HG_PF_DIST 16384  /* prefetch distance in bytes */
#define HG_PF_HINT _MM_HINT_T1 /* into L2 */
#define HG_TILE_N 24 /* output columns per block: a multiple of every tile width (8, 6, 4, 3) */
/* byte offset of element e of a run of W rows, for the prefetch distance:
 * 2 bytes an element, 34 per 32 for q8_0 */
#define PF_OFF(e, wf) ((wf) == HG_W_Q8_0 ? (e) * HG_Q8_BYTES / HG_Q8_BLOCK : (e) * 2)

static inline float f16_to_f32(uint16_t h)
{
	const uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	uint32_t u;
	if (e == 0x1f) {
		u = s | 0x7f800000u | (m << 13);
	} else if (e) {
		u = s | ((e + 112) << 23) | (m << 13);
	} else if (m) { /* subnormal: m * 2^-24, exact in fp32 */
		float f = (float)m * (1.0f / 16777216.0f);
		memcpy(&u, &f, sizeof(u));
		u |= s;
	} else {
		u = s;
	}
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline float bf16_to_f32(uint16_t h)
{
	const uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* fp32 -> 16 bits exactly as formats/gguf.c's gguf_f32_to_f16/bf16 (the
 * device layer does not include formats/): round to nearest even, NaN
 * quiet. */
static uint16_t from_f32_1(float f, bool bf16)
{
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
	if (bf16)
		return (x & 0x7fffffff) > 0x7f800000 ? (uint16_t)((x >> 16) | 64)
		                                     : (uint16_t)((x + (0x7fff + ((x >> 16) & 1))) >> 16);
	const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	const uint32_t ax = x & 0x7fffffff;
	if (ax > 0x7f800000)
		return sign | 0x7e00;
	if (ax >= 0x47800000)
		return sign | 0x7c00;
	if (ax < 0x38800000) {
		float a;
		memcpy(&a, &ax, sizeof(a));
		return sign | (uint16_t)rintf(a * 0x1p24f);
	}
	uint32_t u = ax - ((uint32_t)(127 - 15) << 23);
	u += 0xfff + ((u >> 13) & 1);
	return sign | (uint16_t)(u >> 13);
}

static void to_f32_c(float *y, const uint16_t *x, int64_t cnt, bool bf16)
{
	if (bf16)
		for (int64_t i = 0; i < cnt; i++)
			y[i] = bf16_to_f32(x[i]);
	else
		for (int64_t i = 0; i < cnt; i++)
			y[i] = f16_to_f32(x[i]);
}

/* ---- the job ---- */

typedef struct hg_job {
	float *C;
	const float *A;     /* (m, kp) fp32, zero padded */
	const char *W;      /* (n, k) in format wf, rows wrow bytes apart */
	int64_t m, n, k, kp, wrow;
	int64_t n_tiles;
	int wf;             /* enum hg_wfmt */
	void (*cols)(const struct hg_job *j, int64_t j0, int64_t j1);
} hg_job;

/* q8_0 row r's elements [0, cnt) (cnt a multiple of 32) as fp32: q * d,
 * exact (8 + 11 significand bits) */
static void q8_to_f32_c(float *y, const char *row, int64_t cnt)
{
	for (int64_t b = 0; b < cnt / HG_Q8_BLOCK; b++) {
		const char *blk = row + b * HG_Q8_BYTES;
		uint16_t dh;
		memcpy(&dh, blk, sizeof(dh));
		const float d = f16_to_f32(dh);
		for (int i = 0; i < HG_Q8_BLOCK; i++)
			y[b * HG_Q8_BLOCK + i] = (float)(int8_t)blk[2 + i] * d;
	}
}

/* ---- portable path: W row j widened once into a k-float buffer, then each
 * row of A against it with 8 lane sums (the AVX2 path's summation order) ---- */

static float sum8(const float *s)
{
	return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

static void cols_portable(const hg_job *jb, int64_t j0, int64_t j1)
{
	float wbuf[1024 + 8];
	for (int64_t j = j0; j < j1; j++) {
		const char *w = jb->W + j * jb->wrow;
		float s[8];
		/* k in chunks of 1024 (on the stack), lanes carried across chunks */
		for (int64_t i = 0; i < jb->m; i++) {
			const float *a = jb->A + i * jb->kp;
			memset(s, 0, sizeof(s));
			for (int64_t k0 = 0; k0 < jb->k; k0 += 1024) {
				const int64_t kl = jb->k - k0 < 1024 ? jb->k - k0 : 1024;
				const int64_t kl8 = (kl + 7) & ~(int64_t)7;
				if (i == 0 || jb->k > 1024) {
					if (jb->wf == HG_W_Q8_0) /* k0 and kl: multiples of 32 */
						q8_to_f32_c(wbuf, w + k0 / HG_Q8_BLOCK * HG_Q8_BYTES, kl);
					else
						to_f32_c(wbuf, (const uint16_t *)(const void *)w + k0, kl,
						         jb->wf == HG_W_BF16);
					memset(wbuf + kl, 0, sizeof(float) * (size_t)(kl8 - kl));
				}
				for (int64_t kk = 0; kk < kl8; kk += 8)
					for (int l = 0; l < 8; l++)
						s[l] = __builtin_fmaf(a[k0 + kk + l], wbuf[kk + l], s[l]);
			}
			jb->C[i * jb->n + j] = sum8(s);
		}
	}
}

/* ---- AVX2 path ---- */

#if HG_X86
#define HG_AVX2 __attribute__((target("avx2,fma,f16c")))
#define HG_INLINE static inline __attribute__((always_inline))

HG_INLINE HG_AVX2 __m256 ld_w(const uint16_t *p, int bf16)
{
	const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
	if (bf16)
		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16));
	return _mm256_cvtph_ps(x);
}

/* 8 weights of W row `row` (format wf) from element kk on: widened, or for
 * q8_0 q * d (exact, as q8_to_f32_c) */
HG_INLINE HG_AVX2 __m256 ld_wf(const char *row, int64_t kk, int wf, __m256 d)
{
	if (wf != HG_W_Q8_0)
		return ld_w((const uint16_t *)(const void *)row + kk, wf);
	const char *blk = row + (kk >> 5) * HG_Q8_BYTES;
	const __m128i q = _mm_loadl_epi64((const __m128i *)(const void *)(blk + 2 + (kk & 31)));
	return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
}

/* q8_0 block scale d at element kk of row `row`, as fp32 */
HG_INLINE HG_AVX2 float q8_scale(const char *row, int64_t kk)
{
	return _cvtsh_ss(*(const unsigned short *)(const void *)(row + (kk >> 5) * HG_Q8_BYTES));
}

/* The prefetch of one step of a tile: the step consumes elements [e0, e0 +
 * cnt) of the run of W rows; one prefetch for each 64-byte line's worth (32
 * elements) that begins inside the range, at pf (HG_PF_DIST bytes ahead of
 * the tile, in the same linear run) */
HG_INLINE void pf_step(const char *pf, int64_t e0, int cnt, int wf)
{
	for (int64_t e = (e0 + 31) & ~(int64_t)31; e < e0 + cnt; e += 32)
		_mm_prefetch(pf + PF_OFF(e, wf), HG_PF_HINT);
}

HG_INLINE HG_AVX2 float hsum(__m256 v)
{
	/* lanes (l, l+4) first, then (l, l+2), then (l, l+1): sum8's order */
	__m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	x = _mm_add_ps(x, _mm_movehl_ps(x, x));
	x = _mm_add_ss(x, _mm_movehdup_ps(x));
	return _mm_cvtss_f32(x);
}

/* One tile: R rows of A (stride kp) by NC rows of W (stride k). R, NC and
 * bf16 are constants in each instantiation, so acc stays in registers.
 * Every output is one FMA chain over k whatever the tile's shape, so the
 * shape changes speed, never the result. */
HG_INLINE HG_AVX2 void tile(float *C, int64_t ldc, const float *A, int64_t kp, const char *W,
                            int64_t wrow, int64_t k, const char *pf, const int R, const int NC,
                            const int wf)
{
	/* dq: each column's block scale, broadcast once a block (q8_0 only) */
	__m256 acc[HG_TILE_R][HG_NC_MAX], w[HG_NC_MAX], dq[HG_NC_MAX];
#pragma GCC unroll 8
	for (int c = 0; c < NC; c++)
		dq[c] = _mm256_setzero_ps();
	const int64_t k8 = k & ~(int64_t)7;
#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
#pragma GCC unroll 8
		for (int c = 0; c < NC; c++)
			acc[r][c] = _mm256_setzero_ps();
	for (int64_t kk = 0; kk < k8; kk += 8) {
		if (pf) /* as in tile512 */
			pf_step(pf, kk * NC, 8 * NC, wf);
		if (wf == HG_W_Q8_0 && !(kk & 31))
#pragma GCC unroll 8
			for (int c = 0; c < NC; c++)
				dq[c] = _mm256_set1_ps(q8_scale(W + c * wrow, kk));
#pragma GCC unroll 8
		for (int c = 0; c < NC; c++)
			w[c] = ld_wf(W + c * wrow, kk, wf, dq[c]);
#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			const __m256 a = _mm256_load_ps(A + r * kp + kk);
#pragma GCC unroll 8
			for (int c = 0; c < NC; c++)
				acc[r][c] = _mm256_fmadd_ps(a, w[c], acc[r][c]);
		}
	}
	if (k8 < k) { /* the tail through a zero-padded copy (A's pad is zero too);
	               * 16-bit W only: a q8_0 k is a multiple of 32 */
		uint16_t wt[HG_NC_MAX][8];
		memset(wt, 0, sizeof(wt));
#pragma GCC unroll 8
		for (int c = 0; c < NC; c++) {
			memcpy(wt[c], W + c * wrow + k8 * 2, sizeof(uint16_t) * (size_t)(k - k8));
			w[c] = ld_w(wt[c], wf);
		}
#pragma GCC unroll 4
		for (int r = 0; r < R; r++) {
			const __m256 a = _mm256_load_ps(A + r * kp + k8);
#pragma GCC unroll 8
			for (int c = 0; c < NC; c++)
				acc[r][c] = _mm256_fmadd_ps(a, w[c], acc[r][c]);
		}
	}
#pragma GCC unroll 4
	for (int r = 0; r < R; r++)
#pragma GCC unroll 8
		for (int c = 0; c < NC; c++)
			C[r * ldc + c] = hsum(acc[r][c]);
}

typedef void (*tile_fn)(float *, int64_t, const float *, int64_t, const char *, int64_t,
                        int64_t, const char *);

#define HG_TILE_FN(R, NC, B)                                                                      \
	static HG_AVX2 void tile_##R##_##NC##_##B(float *C, int64_t ldc, const float *A, int64_t kp, \
	                                          const char *W, int64_t wrow, int64_t k,           \
	                                          const char *pf)                                   \
	{                                                                                             \
		tile(C, ldc, A, kp, W, wrow, k, pf, R, NC, B);                                            \
	}
#define HG_TILES_B(B)                                                                             \
	HG_TILE_FN(1, 1, B) HG_TILE_FN(1, 2, B) HG_TILE_FN(1, 3, B) HG_TILE_FN(1, 4, B)              \
	HG_TILE_FN(1, 5, B) HG_TILE_FN(1, 6, B) HG_TILE_FN(1, 7, B) HG_TILE_FN(1, 8, B)              \
	HG_TILE_FN(2, 1, B) HG_TILE_FN(2, 2, B) HG_TILE_FN(2, 3, B) HG_TILE_FN(2, 4, B)              \
	HG_TILE_FN(2, 5, B) HG_TILE_FN(2, 6, B)                                                       \
	HG_TILE_FN(3, 1, B) HG_TILE_FN(3, 2, B) HG_TILE_FN(3, 3, B) HG_TILE_FN(3, 4, B)              \
	HG_TILE_FN(4, 1, B) HG_TILE_FN(4, 2, B) HG_TILE_FN(4, 3, B)
HG_TILES_B(0)
HG_TILES_B(1)
HG_TILES_B(2)

/* [bf16][R - 1][NC - 1]; the widest tile for R rows has 8, 6, 4, 3 columns:
 * 8 to 12 independent FMA chains (latency 4 x 2 pipes), 12 accumulators +
 * NC widened W vectors within the 16 ymm registers */
#define HG_ROW1(B) {tile_1_1_##B, tile_1_2_##B, tile_1_3_##B, tile_1_4_##B, tile_1_5_##B, \
                    tile_1_6_##B, tile_1_7_##B, tile_1_8_##B}
#define HG_ROW2(B) {tile_2_1_##B, tile_2_2_##B, tile_2_3_##B, tile_2_4_##B, tile_2_5_##B, \
                    tile_2_6_##B}
#define HG_ROW3(B) {tile_3_1_##B, tile_3_2_##B, tile_3_3_##B, tile_3_4_##B}
#define HG_ROW4(B) {tile_4_1_##B, tile_4_2_##B, tile_4_3_##B}
static const tile_fn tiles[3][HG_TILE_R][HG_NC_MAX] = {
	{HG_ROW1(0), HG_ROW2(0), HG_ROW3(0), HG_ROW4(0)},
	{HG_ROW1(1), HG_ROW2(1), HG_ROW3(1), HG_ROW4(1)},
	{HG_ROW1(2), HG_ROW2(2), HG_ROW3(2), HG_ROW4(2)},
};
static const int nc_max[HG_TILE_R] = {8, 4, 4, 3};

/* The prefetch pointer of a tile at column j of a part ending at column
 * j1: HG_PF_DIST bytes ahead in the part's run of W rows, or NULL where
 * that is past the part (the other thread's share, or past W) */
static const char *pf_at(const hg_job *jb, int64_t j, int64_t j1)
{
	const char *p = jb->W + j * jb->wrow + HG_PF_DIST;
	return p < jb->W + j1 * jb->wrow ? p : NULL;
}

/* columns [j0, j1) (at most HG_TILE_N): every row block over the same W
 * rows, which stay in L1/L2 meanwhile */
static void cols_avx2(const hg_job *jb, int64_t j0, int64_t j1)
{
	for (int64_t jt = j0; jt < j1; jt += HG_TILE_N) {
		const int64_t jt1 = jt + HG_TILE_N < j1 ? jt + HG_TILE_N : j1;
		for (int64_t i = 0; i < jb->m; i += HG_TILE_R) {
			const int r = jb->m - i < HG_TILE_R ? (int)(jb->m - i) : HG_TILE_R;
			const int ncm = r == 1 ? HG_NC1 : nc_max[r - 1];
			for (int64_t j = jt; j < jt1; j += ncm) {
				const int nc = jt1 - j < ncm ? (int)(jt1 - j) : ncm;
				tiles[jb->wf][r - 1][nc - 1](jb->C + i * jb->n + j, jb->n, jb->A + i * jb->kp,
				                             jb->kp, jb->W + j * jb->wrow, jb->wrow, jb->k,
				                             i ? NULL : pf_at(jb, j, j1));
			}
		}
	}
}

static HG_AVX2 void a_to_f32_avx2(float *y, const uint16_t *x, int64_t k, int64_t kp, bool bf16)
{
	int64_t i = 0;
	for (; i + 8 <= k; i += 8)
		_mm256_store_ps(y + i, ld_w(x + i, bf16));
	to_f32_c(y + i, x + i, k - i, bf16);
	for (i = k; i < kp; i++)
		y[i] = 0.0f;
}

static HG_AVX2 void to_f32_avx2(float *y, const uint16_t *x, int64_t cnt, bool bf16)
{
	int64_t i = 0;
	for (; i + 8 <= cnt; i += 8)
		_mm256_storeu_ps(y + i, ld_w(x + i, bf16));
	to_f32_c(y + i, x + i, cnt - i, bf16);
}

/* ---- AVX-512 path: 16 lanes, 32 registers, so tiles up to 4 x 6 and 8 x 3
 * (24 accumulators + the W vectors and scales): 8 rows share one widening
 * of each W vector, which is what a q8_0 tree's verify pays for. Its lanes
 * are 16, so its float order is not the 8-lane paths' (same bound shape:
 * gamma_{ceil(k/16)+4}). ---- */
#define HG_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define HG_NC512_MAX 8
#define HG_TILE_R512 8 /* rows of A per AVX-512 tile at most */

HG_INLINE HG_AVX512 __m512 ld_w16(const uint16_t *p, int bf16)
{
	const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)p);
	if (bf16)
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
	return _mm512_cvtph_ps(x);
}

/* d: the block's scale, broadcast (q8_0 only; tile512 widens it once a block) */
HG_INLINE HG_AVX512 __m512 ld_wf16(const char *row, int64_t kk, int wf, __m512 d)
{
	if (wf != HG_W_Q8_0)
		return ld_w16((const uint16_t *)(const void *)row + kk, wf);
	const char *blk = row + (kk >> 5) * HG_Q8_BYTES;
	const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(blk + 2 + (kk & 31)));
	return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
}

HG_INLINE HG_AVX512 float hsum16(__m512 v)
{
	/* lanes (l, l+8), then the 8-lane order of hsum */
	const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
	                               _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
	__m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
	x = _mm_add_ps(x, _mm_movehl_ps(x, x));
	x = _mm_add_ss(x, _mm_movehdup_ps(x));
	return _mm_cvtss_f32(x);
}

HG_INLINE HG_AVX512 void tile512(float *C, int64_t ldc, const float *A, int64_t kp,
                                  const char *W, int64_t wrow, int64_t k, const char *pf,
                                  const int R, const int NC, const int wf)
{
	__m512 acc[HG_TILE_R512][HG_NC512_MAX], w[HG_NC512_MAX], dq[HG_NC512_MAX];
#pragma GCC unroll 8
	for (int c = 0; c < NC; c++)
		dq[c] = _mm512_setzero_ps();
	const int64_t k16 = k & ~(int64_t)15;
#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
#pragma GCC unroll 8
		for (int c = 0; c < NC; c++)
			acc[r][c] = _mm512_setzero_ps();
	/* pf (the first row block's tiles, which read W from memory): the next
	 * tile's rows, contiguous after this one's, are prefetched as this one
	 * is consumed, NC * 32 bytes per step, since a tile's NC short rows
	 * look like NC streams too short for the hardware prefetcher */
	for (int64_t kk = 0; kk < k16; kk += 16) {
		if (pf)
			pf_step(pf, kk * NC, 16 * NC, wf);
		if (wf == HG_W_Q8_0 && !(kk & 31))
#pragma GCC unroll 8
			for (int c = 0; c < NC; c++)
				dq[c] = _mm512_set1_ps(q8_scale(W + c * wrow, kk));
#pragma GCC unroll 8
		for (int c = 0; c < NC; c++)
			w[c] = ld_wf16(W + c * wrow, kk, wf, dq[c]);
#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			const __m512 a = _mm512_load_ps(A + r * kp + kk);
#pragma GCC unroll 8
			for (int c = 0; c < NC; c++)
				acc[r][c] = _mm512_fmadd_ps(a, w[c], acc[r][c]);
		}
	}
	if (k16 < k) {
		uint16_t wt[HG_NC512_MAX][16];
		memset(wt, 0, sizeof(wt));
#pragma GCC unroll 8
		for (int c = 0; c < NC; c++) {
			memcpy(wt[c], W + c * wrow + k16 * 2, sizeof(uint16_t) * (size_t)(k - k16));
			w[c] = ld_w16(wt[c], wf);
		}
#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			const __m512 a = _mm512_load_ps(A + r * kp + k16);
#pragma GCC unroll 8
			for (int c = 0; c < NC; c++)
				acc[r][c] = _mm512_fmadd_ps(a, w[c], acc[r][c]);
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
#pragma GCC unroll 8
		for (int c = 0; c < NC; c++)
			C[r * ldc + c] = hsum16(acc[r][c]);
}

#define HG_T512_FN(R, NC, B)                                                                      \
	static HG_AVX512 void t512_##R##_##NC##_##B(float *C, int64_t ldc, const float *A,          \
	                                            int64_t kp, const char *W, int64_t wrow,        \
	                                            int64_t k, const char *pf)                      \
	{                                                                                             \
		tile512(C, ldc, A, kp, W, wrow, k, pf, R, NC, B);                                         \
	}
#define HG_T512_B(B)                                                                              \
	HG_T512_FN(1, 1, B) HG_T512_FN(1, 2, B) HG_T512_FN(1, 3, B) HG_T512_FN(1, 4, B)              \
	HG_T512_FN(1, 5, B) HG_T512_FN(1, 6, B) HG_T512_FN(1, 7, B) HG_T512_FN(1, 8, B)              \
	HG_T512_FN(2, 1, B) HG_T512_FN(2, 2, B) HG_T512_FN(2, 3, B) HG_T512_FN(2, 4, B)              \
	HG_T512_FN(2, 5, B) HG_T512_FN(2, 6, B) HG_T512_FN(2, 7, B) HG_T512_FN(2, 8, B)              \
	HG_T512_FN(3, 1, B) HG_T512_FN(3, 2, B) HG_T512_FN(3, 3, B) HG_T512_FN(3, 4, B)              \
	HG_T512_FN(3, 5, B) HG_T512_FN(3, 6, B)                                                       \
	HG_T512_FN(4, 1, B) HG_T512_FN(4, 2, B) HG_T512_FN(4, 3, B) HG_T512_FN(4, 4, B)              \
	HG_T512_FN(4, 5, B) HG_T512_FN(4, 6, B)                                                       \
	HG_T512_FN(5, 1, B) HG_T512_FN(5, 2, B) HG_T512_FN(5, 3, B) HG_T512_FN(5, 4, B)              \
	HG_T512_FN(6, 1, B) HG_T512_FN(6, 2, B) HG_T512_FN(6, 3, B)                                  \
	HG_T512_FN(7, 1, B) HG_T512_FN(7, 2, B) HG_T512_FN(7, 3, B)                                  \
	HG_T512_FN(8, 1, B) HG_T512_FN(8, 2, B) HG_T512_FN(8, 3, B)
HG_T512_B(0)
HG_T512_B(1)
HG_T512_B(2)

#define HG_R512(R, B)                                                                             \
	{t512_##R##_1_##B, t512_##R##_2_##B, t512_##R##_3_##B, t512_##R##_4_##B, t512_##R##_5_##B, \
	 t512_##R##_6_##B}
#define HG_R512_8(R, B)                                                                           \
	{t512_##R##_1_##B, t512_##R##_2_##B, t512_##R##_3_##B, t512_##R##_4_##B, t512_##R##_5_##B, \
	 t512_##R##_6_##B, t512_##R##_7_##B, t512_##R##_8_##B}
#define HG_R512_4(R, B) {t512_##R##_1_##B, t512_##R##_2_##B, t512_##R##_3_##B, t512_##R##_4_##B}
#define HG_R512_3(R, B) {t512_##R##_1_##B, t512_##R##_2_##B, t512_##R##_3_##B}
#define HG_R512_ALL(B)                                                                            \
	{HG_R512_8(1, B), HG_R512_8(2, B), HG_R512(3, B), HG_R512(4, B), HG_R512_4(5, B),             \
	 HG_R512_3(6, B), HG_R512_3(7, B), HG_R512_3(8, B)}
static const tile_fn tiles512[3][HG_TILE_R512][HG_NC512_MAX] = {
	HG_R512_ALL(0),
	HG_R512_ALL(1),
	HG_R512_ALL(2),
};
/* 8 to 24 accumulators: enough chains for 2 FMA pipes of latency 4, and
 * with the W vectors (and q8_0 scales) within the 32 registers */
static const int nc512_max[HG_TILE_R512] = {8, 8, 6, 6, 4, 3, 3, 3};

static void cols_avx512(const hg_job *jb, int64_t j0, int64_t j1)
{
	for (int64_t jt = j0; jt < j1; jt += HG_TILE_N) {
		const int64_t jt1 = jt + HG_TILE_N < j1 ? jt + HG_TILE_N : j1;
		for (int64_t i = 0; i < jb->m; i += HG_TILE_R512) {
			const int r = jb->m - i < HG_TILE_R512 ? (int)(jb->m - i) : HG_TILE_R512;
			const int ncm = r == 1 ? HG_NC1_512 : nc512_max[r - 1];
			for (int64_t j = jt; j < jt1; j += ncm) {
				const int nc = jt1 - j < ncm ? (int)(jt1 - j) : ncm;
				tiles512[jb->wf][r - 1][nc - 1](
					jb->C + i * jb->n + j, jb->n, jb->A + i * jb->kp, jb->kp, jb->W + j * jb->wrow,
					jb->wrow, jb->k, i ? NULL : pf_at(jb, j, j1));
			}
		}
	}
}

/* fp32 -> fp16 (F16C, round to nearest even) / bf16 (integer RNE), 8 at a
 * time; NaN as formats/gguf.c writes it (fp16: sign | 0x7e00; bf16: the
 * top half | 64), so the result is gguf_f32_to_f16/bf16's bit for bit. */
static HG_AVX2 void from_f32_avx2(uint16_t *y, const float *x, int64_t cnt, bool bf16)
{
	int64_t i = 0;
	const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
	for (; i + 8 <= cnt; i += 8) {
		const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
		const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
		__m256i r;
		if (bf16) {
			const __m256i one = _mm256_set1_epi32(1);
			const __m256i hi = _mm256_srli_epi32(u, 16);
			r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
			                                                            _mm256_and_si256(hi, one))), 16);
			r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(64)), nan);
		} else {
			const __m256i h = _mm256_cvtepu16_epi32(
				_mm256_cvtps_ph(_mm256_castsi256_ps(u), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
			const __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 16),
			                                                   _mm256_set1_epi32(0x8000)),
			                                  _mm256_set1_epi32(0x7e00));
			r = _mm256_blendv_epi8(h, q, nan);
		}
		/* 32 -> 16 bits: packus works within 128-bit halves, then reorder */
		const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
		_mm_storeu_si128((__m128i *)(void *)(y + i), _mm256_castsi256_si128(p));
	}
	for (; i < cnt; i++)
		y[i] = from_f32_1(x[i], bf16);
}
#endif /* HG_X86 */

void hg_from_f32(uint16_t *y, const float *x, int64_t cnt, bool bf16)
{
#if HG_X86
	if (hg_path_auto() >= HG_PATH_AVX2) {
		from_f32_avx2(y, x, cnt, bf16);
		return;
	}
#endif
	for (int64_t i = 0; i < cnt; i++)
		y[i] = from_f32_1(x[i], bf16);
}

void hg_to_f32(float *y, const uint16_t *x, int64_t cnt, bool bf16)
{
#if HG_X86
	if (hg_path_auto() >= HG_PATH_AVX2) {
		to_f32_avx2(y, x, cnt, bf16);
		return;
	}
#endif
	to_f32_c(y, x, cnt, bf16);
}

#if HG_X86
/* CPUID.1:ECX.F16C (bit 29); clang's __builtin_cpu_supports has no "f16c" */
static bool has_f16c(void)
{
	unsigned a, b, c, d;
	return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
}
#endif

/* CPUID traps to the hypervisor in a VM (18 us each measured here), and every
 * GEMM and attention call checks its path: probe once per path, keep it. */
static bool path_probe(int path)
{
	switch (path) {
	case HG_PATH_AUTO:
	case HG_PATH_PORTABLE:
		return true;
	case HG_PATH_AVX2:
	case HG_PATH_AVX512:
#if HG_X86
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c() &&
		       (path == HG_PATH_AVX2 || __builtin_cpu_supports("avx512f"));
#else
		return false;
#endif
	default:
		return false;
	}
}

bool hg_path_available(int path)
{
	static atomic_int known[4] = {-1, -1, -1, -1}; /* -1 unknown, else 0/1 */
	if (path < 0 || path > 3)
		return false;
	int v = atomic_load_explicit(&known[path], memory_order_relaxed);
	if (v < 0) {
		v = path_probe(path);
		atomic_store_explicit(&known[path], v, memory_order_relaxed);
	}
	return v;
}

int hg_path_auto(void)
{
	static atomic_int cached = -1; /* the pool's workers ask too: every thread computes the same */
	int c = atomic_load_explicit(&cached, memory_order_relaxed);
	if (c < 0) {
		const char *e = getenv("SW_GEMM_PATH");
		int p = hg_path_available(HG_PATH_AVX512) ? HG_PATH_AVX512
		        : hg_path_available(HG_PATH_AVX2) ? HG_PATH_AVX2 : HG_PATH_PORTABLE;
		if (e && !strcmp(e, "portable"))
			p = HG_PATH_PORTABLE;
		else if (e && !strcmp(e, "avx2") && hg_path_available(HG_PATH_AVX2))
			p = HG_PATH_AVX2;
		atomic_store_explicit(&cached, p, memory_order_relaxed);
		c = p;
	}
	return c;
}

int64_t hg_blas_min_m(void)
{
	const char *e = getenv("SW_BLAS_MIN_M");
	if (e && *e)
		return (int64_t)strtoll(e, NULL, 10);
	return hg_path_auto() == HG_PATH_AVX512 ? HG_BLAS_MIN_M_512 : HG_BLAS_MIN_M;
}

const char *hg_path_name(int path)
{
	static const char *const names[] = {"auto", "portable", "avx2", "avx512"};
	return path >= 0 && path <= 3 ? names[path] : "?";
}

static void run_part(void *ctx, int part, int n_parts)
{
	const hg_job *jb = ctx;
	/* whole tiles per part, so tiles never straddle two threads */
	const int64_t t0 = jb->n_tiles * part / n_parts, t1 = jb->n_tiles * (part + 1) / n_parts;
	int64_t j0 = t0 * HG_TILE_N, j1 = t1 * HG_TILE_N;
	j1 = j1 < jb->n ? j1 : jb->n;
	if (j0 < j1)
		jb->cols(jb, j0, j1);
}

/* The calling thread's scratch (A's fp32 copy here, the quantized A in
 * host_gemm_i8.c: the two never nest on a thread), 64-aligned, grown as
 * needed and kept between calls (a few hundred KB), freed when the thread
 * exits (the key's destructor): a server's worker thread that ends must not
 * leak it. NULL when it cannot grow. */
static _Thread_local void *t_buf;
static _Thread_local size_t t_cap;
static pthread_key_t t_key;
static pthread_once_t t_once = PTHREAD_ONCE_INIT;

static void t_key_init(void)
{
	pthread_key_create(&t_key, free);
}

int64_t hg_parts(int threads, int64_t n_units, int64_t min_units)
{
	const int nt = threads > 0 ? threads : hp_threads();
	int64_t parts = nt * 4;
	if (parts > n_units / min_units)
		parts = n_units / min_units;
	return nt == 1 || parts < 1 ? 1 : parts;
}

void *hg_thread_scratch(size_t bytes)
{
	if (bytes > t_cap) {
		void *p = NULL;
		if (posix_memalign(&p, 64, bytes))
			return NULL;
		free(t_buf);
		t_buf = p;
		t_cap = bytes;
		pthread_once(&t_once, t_key_init);
		pthread_setspecific(t_key, p);
	}
	return t_buf;
}

/* C = A W^T with W in format wf (the shared body of hg_gemm16 / hg_gemm_q8) */
static int gemm(float *C, const uint16_t *A, bool a_bf16, const char *W, int wf, int64_t m,
                int64_t n, int64_t k, int path, int threads)
{
	if (path == HG_PATH_AUTO)
		path = hg_path_auto();
	if (!hg_path_available(path) || m < 0 || n < 0 || k < 0 ||
	    (wf == HG_W_Q8_0 && k % HG_Q8_BLOCK))
		return SW_EINVAL;
	if (m == 0 || n == 0)
		return 0;
	const int64_t kp = path == HG_PATH_AVX512 ? (k + 15) & ~(int64_t)15 : (k + 7) & ~(int64_t)7;
	float *a_buf = hg_thread_scratch(sizeof(float) * (size_t)(m * kp));
	if (!a_buf)
		return SW_ENOMEM;
	hg_job jb = {.C = C, .A = a_buf, .W = W, .m = m, .n = n, .k = k, .kp = kp, .wf = wf,
	             .wrow = wf == HG_W_Q8_0 ? k / HG_Q8_BLOCK * HG_Q8_BYTES : 2 * k,
	             .n_tiles = (n + HG_TILE_N - 1) / HG_TILE_N, .cols = cols_portable};
#if HG_X86
	if (path == HG_PATH_AVX2 || path == HG_PATH_AVX512) {
		jb.cols = path == HG_PATH_AVX2 ? cols_avx2 : cols_avx512;
		for (int64_t i = 0; i < m; i++)
			a_to_f32_avx2(a_buf + i * kp, A + i * k, k, kp, a_bf16);
	}
#endif
	if (path == HG_PATH_PORTABLE)
		for (int64_t i = 0; i < m; i++) {
			to_f32_c(a_buf + i * kp, A + i * k, k, a_bf16);
			memset(a_buf + i * kp + k, 0, sizeof(float) * (size_t)(kp - k));
		}
	/* none smaller than ~16 KB of W */
	const int64_t parts = hg_parts(threads, jb.n_tiles, 1 + (8192 / (k ? k : 1)) / HG_TILE_N);
	if (parts == 1)
		run_part(&jb, 0, 1);
	else
		hp_run(run_part, &jb, (int)parts);
	return 0;
}

int hg_gemm16(float *C, const uint16_t *A, const uint16_t *W, int64_t m, int64_t n, int64_t k,
              bool bf16, int path, int threads)
{
	return gemm(C, A, bf16, (const char *)(const void *)W, bf16 ? HG_W_BF16 : HG_W_F16, m, n, k,
	            path, threads);
}

int hg_gemm_q8(float *C, const uint16_t *A, const void *W, int64_t m, int64_t n, int64_t k,
               bool a_bf16, int path, int threads)
{
	return gemm(C, A, a_bf16, W, HG_W_Q8_0, m, n, k, path, threads);
}

void hg_q8_to_f32(float *y, const void *W, int64_t n, int64_t k)
{
	for (int64_t j = 0; j < n; j++)
		q8_to_f32_c(y + j * k, (const char *)W + j * (k / HG_Q8_BLOCK * HG_Q8_BYTES), k);
}
