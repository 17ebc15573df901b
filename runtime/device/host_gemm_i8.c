/* The host GEMM on int8 activations (host_gemm.h hg_gemm_q8a8): q8_0
 * weights times activations quantized per row in blocks of 32, integer dot
 * products per block, one fp32 FMA per block in a fixed order. It is not a
 * faster hg_gemm_q8: it rounds the activations to 8 bits, so it serves only
 * engines whose dtype asks for it ("q8_0_a8").
 *
 * Why: at the rows of a verified tree (26) the fp32-FMA GEMM is bound by
 * arithmetic. vpdpbusd does 64 multiply-adds an instruction against an
 * FMA's 16, but on Zen 4 it issues at half the rate (measured, one thread:
 * 1.78 G zmm vpdpbusd/s against 3.66 G zmm FMA/s), so the gain is 2x, not
 * 4x: 26 rows run near that bound (SmolLM2-135M's GEMMs of a token, one
 * thread: 29 ms with the weights in cache, 37 from memory, against about
 * 30 at that rate; 85-91 on the fp32 q8_0 path), while one row is bound by
 * the weight stream (11 ms from memory, 7 in cache). The AVX2 path
 * (maddubs, madd: five operations per 32 products) is for CPUs without
 * VNNI, for the same numbers there, not for speed: it is no faster than the
 * 16-bit path.
 *
 * Layout: lanes are output columns. A group of G columns (16 on AVX-512, 8
 * on AVX2) has its 32-byte weight blocks transposed in registers so that
 * vector j holds bytes 4j..4j+3 of every column's block; each row of A then
 * broadcasts its own 4 bytes against it, and after 8 steps every lane holds
 * its column's exact block sum. No horizontal sums; the transpose is paid
 * once per group and block, whatever the number of rows. Each group is
 * first repacked into a per-part buffer (group_pack), which is what lets
 * the weights stream.
 *
 * Repacked at bind (issue 24; hg_q8_repack, host_gemm.h): a weight that
 * only these GEMMs read is rewritten once, each whole 16-row group into
 * the transposed order itself (8 vectors a block, then the scales), and
 * hg_gemm_q8a8r reads it in place: no group_pack, no transpose (AVX-512:
 * plain loads; AVX2: each vector's half for its 8 columns; portable: the
 * byte's address). Its bytes are w + 128, so on AVX-512 the weights are
 * vpdpbusd's unsigned operand and A's int8 the signed one: the bias
 * correction is -128 sum(q) per row and block, computed once a call, not
 * -128 sum(w) per group and block (8 vpdpbusd, half a one-row GEMV's). The
 * integer sums are exact either way, and every path does the same FMAs in
 * the same order on the same values, so the bits are those of the file's
 * layout. */
#include <math.h>
#include <float.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "host_gemm.h"
#include "host_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define I8_X86 1
#else
#define I8_X86 0
#endif

typedef struct i8_job {
	float *C;             /* (m, n) */
	const uint8_t *aq;    /* (m, k) quantized A: int8, or int8 + 128 (VNNI) */
	const float *da;      /* (m, k / 32) block scales of A */
	const int32_t *zas;   /* (m, k / 32) -128 sum(q): the repacked VNNI path's chain start */
	const char *W;        /* (n, k) q8_0, rows wrow bytes apart */
	bool repacked;        /* W's rows [0, full) in whole groups repacked */
	int64_t m, n, k, nb, wrow, n_groups, full;
	char *pack;           /* vector paths: I8_PACK(nb) bytes for each part */
	void (*cols)(const struct i8_job *j, int64_t j0, int64_t j1, char *pack);
} i8_job;

/* A group of up to 16 columns repacked (group_pack): each column's nb
 * blocks of 32 q bytes one after another, then the scales, block by block
 * (16 fp16 a block); 17 x 32 bytes a block, so each part's share stays
 * 32-byte aligned */
#define I8_PACK(nb) ((size_t)(nb) * (16 * HG_Q8_BLOCK + 16 * 2))

/* A repacked group (hg_q8_repack): block b's 8 vectors at I8_RV b, vector
 * x at + 64 x (dword c: bytes 4x .. 4x + 3 of row c's q, each + 128, i.e.
 * xor 0x80: vpdpbusd's unsigned operand); the scales at I8_RV nb + 32 b +
 * 2 c, where group_pack puts them too */
#define I8_RV (16 * HG_Q8_BLOCK)

/* row c's block b of a repacked group g: file layout blk <-> g */
static void q8r_put(char *g, const char *blk, int c, int64_t b, int64_t nb)
{
	memcpy(g + I8_RV * nb + 32 * b + 2 * c, blk, 2);
	for (int x = 0; x < 8; x++)
		for (int t = 0; t < 4; t++)
			g[I8_RV * b + 64 * x + 4 * c + t] = (char)(blk[2 + 4 * x + t] ^ 0x80);
}

static void q8r_get(char *blk, const char *g, int c, int64_t b, int64_t nb)
{
	memcpy(blk, g + I8_RV * nb + 32 * b + 2 * c, 2);
	for (int x = 0; x < 8; x++)
		for (int t = 0; t < 4; t++)
			blk[2 + 4 * x + t] = (char)(g[I8_RV * b + 64 * x + 4 * c + t] ^ 0x80);
}

/* columns [j, j + nc) of a file-layout W as one repacked group at g
 * (columns nc .. 15: w 0, d 0; computed, never stored) */
static void group_pack_r(char *g, int nc, const char *W, int64_t j, int64_t wrow, int64_t nb)
{
	char zero[HG_Q8_BYTES] = {0};
	for (int c = 0; c < 16; c++)
		for (int64_t b = 0; b < nb; b++)
			q8r_put(g, c < nc ? W + (j + c) * wrow + b * HG_Q8_BYTES : zero, c, b, nb);
}

int hg_q8_repack(void *W, int64_t n, int64_t k)
{
	if (n < 0 || k < 0 || k % HG_Q8_BLOCK)
		return SW_EINVAL;
	const int64_t nb = k / HG_Q8_BLOCK, wrow = nb * HG_Q8_BYTES;
	char *tmp = malloc((size_t)(16 * wrow) + 1);
	if (!tmp)
		return SW_ENOMEM;
	for (int64_t j = 0; j + 16 <= n; j += 16) {
		char *g = (char *)W + j * wrow;
		memcpy(tmp, g, (size_t)(16 * wrow));
		for (int c = 0; c < 16; c++)
			for (int64_t b = 0; b < nb; b++)
				q8r_put(g, tmp + c * wrow + b * HG_Q8_BYTES, c, b, nb);
	}
	free(tmp);
	return 0;
}

/* ---- the activations: one row, GGUF Q8_0's rule with an fp32 scale ---- */

/* x: the row as fp32 (exact), a: its 16-bit bits (for inf/NaN). q: k bytes,
 * each q + bias (bias 128 for vpdpbusd's unsigned operand, else 0); d: k / 32
 * scales. Shared by every path, so every path sees the same q and d. */
static void quant_row(uint8_t *q, float *d, const float *x, const uint16_t *a, int64_t k,
                      bool bf16, int bias)
{
	const uint16_t inf_bits = bf16 ? 0x7f80 : 0x7c00;
	for (int64_t b = 0; b < k / HG_Q8_BLOCK; b++) {
		const float *xb = x + b * HG_Q8_BLOCK;
		uint8_t *qb = q + b * HG_Q8_BLOCK;
		uint16_t mx = 0;
		for (int t = 0; t < HG_Q8_BLOCK; t++) {
			const uint16_t v = a[b * HG_Q8_BLOCK + t] & 0x7fff;
			mx = v > mx ? v : mx;
		}
		float amax = 0.0f;
		for (int t = 0; t < HG_Q8_BLOCK; t++) {
			const float v = fabsf(xb[t]);
			amax = v > amax ? v : amax;
		}
		const float db = amax / 127.0f;
		if (mx >= inf_bits || !(db >= FLT_MIN)) {
			/* inf or NaN: d NaN, so every output it touches is NaN (as the
			 * 16-bit GEMM's would be); a zero block, or one so small that
			 * 1 / d would overflow (amax < 127 FLT_MIN): d 0, q 0 */
			d[b] = mx >= inf_bits ? NAN : 0.0f;
			memset(qb, bias, HG_Q8_BLOCK);
			continue;
		}
		const float id = 1.0f / db;
		for (int t = 0; t < HG_Q8_BLOCK; t++) {
			/* round to nearest even by the 1.5 * 2^23 trick: |v| <= 127.5,
			 * where adding it leaves an integer (separate statements: no
			 * contraction of the product into the add) */
			const float v = xb[t] * id;
			const float r = (v + 0x1.8p23f) - 0x1.8p23f;
			int qi = (int)r;
			qi = qi > 127 ? 127 : qi < -127 ? -127 : qi;
			qb[t] = (uint8_t)(qi + bias);
		}
		d[b] = db;
	}
}

/* ---- portable path: the vector paths' order, one column at a time (C is
 * the accumulator, as there) ---- */

static void cols_portable(const i8_job *jb, int64_t j0, int64_t j1, char *pack)
{
	for (int64_t j = j0; j < j1; j++) {
		const char *w = jb->W + j * jb->wrow;
		const bool rp = jb->repacked && j < jb->full;
		const char *g = jb->W + (j & ~(int64_t)15) * jb->wrow; /* its group, repacked */
		char rb[HG_Q8_BYTES]; /* a repacked block in the file's layout */
		for (int64_t b = 0; b < jb->nb; b++) {
			const char *blk = w + b * HG_Q8_BYTES;
			if (rp) {
				q8r_get(rb, g, (int)(j & 15), b, jb->nb);
				blk = rb;
			}
			uint16_t dh;
			float dw;
			memcpy(&dh, blk, sizeof(dh));
			hg_to_f32(&dw, &dh, 1, false);
			for (int64_t r = 0; r < jb->m; r++) {
				const int8_t *a = (const int8_t *)jb->aq + r * jb->k + b * HG_Q8_BLOCK;
				int32_t isum = 0;
				for (int t = 0; t < HG_Q8_BLOCK; t++)
					isum += (int32_t)a[t] * (int8_t)blk[2 + t];
				float *c = jb->C + r * jb->n + j;
				const float p = jb->da[r * jb->nb + b] * dw;
				*c = __builtin_fmaf((float)isum, p, b ? *c : 0.0f);
			}
		}
	}
}

#if I8_X86
#define I8_AVX2 __attribute__((target("avx2,fma,f16c")))
#define I8_VNNI __attribute__((target("avx512f,avx512vnni,avx2,fma,f16c")))

/* Columns [j, j + nc) of W repacked for a group of g: q bytes at pack + (c
 * nb + b) 32, scales at pack + g nb 32 + (b g + c) 2; columns nc .. g - 1
 * zero. Read this way, in the order they lie in memory, the weights stream
 * as fast as the 16-bit path reads them (in place, a block at a time across
 * the group's 16 rows, 6.5 GB/s against 13.5 for the LM head on one
 * thread, whatever the software prefetch), the vectors' loads are aligned
 * and the scales one load, not a gather. */
static void group_pack(char *pack, int g, int nc, const char *W, int64_t j, int64_t wrow,
                       int64_t nb)
{
	char *q = pack;
	uint16_t *sc = (uint16_t *)(void *)(pack + (size_t)(g * nb * HG_Q8_BLOCK));
	for (int c = 0; c < nc; c++) {
		const char *row = W + (j + c) * wrow;
		for (int64_t b = 0; b < nb; b++) {
			memcpy(q + (c * nb + b) * HG_Q8_BLOCK, row + b * HG_Q8_BYTES + 2, HG_Q8_BLOCK);
			memcpy(&sc[b * g + c], row + b * HG_Q8_BYTES, sizeof(*sc));
		}
	}
	if (nc < g) {
		memset(q + nc * nb * HG_Q8_BLOCK, 0, (size_t)((g - nc) * nb * HG_Q8_BLOCK));
		for (int64_t b = 0; b < nb; b++)
			memset(&sc[b * g + nc], 0, sizeof(*sc) * (size_t)(g - nc));
	}
}

/* ---- AVX2: 8 columns, u8 x s8 by maddubs (|w| times a with w's sign: at
 * most 128 x 127 x 2 per pair, below int16's saturation), madd to int32 ---- */

/* (the fixed-count loops unrolled: rolled, GCC kept r, t, u, T, U in
 * stack arrays, 3x slower) */
static I8_AVX2 void cols_avx2(const i8_job *jb, int64_t j0, int64_t j1, char *pack)
{
	const __m256i ones16 = _mm256_set1_epi16(1);
	const int64_t nb = jb->nb;
	for (int64_t j = j0; j < j1; j += 8) {
		const int nc = j1 - j < 8 ? (int)(j1 - j) : 8;
		const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nc),
		                                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
		/* repacked (j, a multiple of 8, below full): half h of its group,
		 * the low or high 32 bytes of each vector and 8 of the 16 scales */
		const bool rp = jb->repacked && j < jb->full;
		const int h = (int)((j >> 3) & 1);
		const char *gb = jb->W + (j & ~(int64_t)15) * jb->wrow, *gv = gb + 32 * h;
		if (!rp)
			group_pack(pack, 8, nc, jb->W, j, jb->wrow, nb);
		const uint16_t *sc = (const uint16_t *)(const void *)(
			rp ? gb + I8_RV * nb + 16 * h : pack + 8 * nb * HG_Q8_BLOCK);
		const int64_t sstep = rp ? 16 : 8; /* scales a block */
		for (int64_t b = 0; b < nb; b++) {
			__m256i T[8], U[8];
			if (rp) { /* w + 128 back to w */
#pragma GCC unroll 8
				for (int x = 0; x < 8; x++)
					T[x] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(
						gv + I8_RV * b + 64 * x)), _mm256_set1_epi8((char)0x80));
			} else {
				__m256i r[8], t[8], u[8];
#pragma GCC unroll 8
				for (int c = 0; c < 8; c++)
					r[c] = _mm256_load_si256(
						(const __m256i *)(const void *)(pack + (c * nb + b) * HG_Q8_BLOCK));
				/* 8 x 8 dwords: T[x] lane c = dword x of column c's block */
#pragma GCC unroll 4
				for (int c = 0; c < 8; c += 2) {
					t[c] = _mm256_unpacklo_epi32(r[c], r[c + 1]);
					t[c + 1] = _mm256_unpackhi_epi32(r[c], r[c + 1]);
				}
#pragma GCC unroll 2
				for (int hh = 0; hh < 2; hh++) {
					u[4 * hh + 0] = _mm256_unpacklo_epi64(t[4 * hh], t[4 * hh + 2]);
					u[4 * hh + 1] = _mm256_unpackhi_epi64(t[4 * hh], t[4 * hh + 2]);
					u[4 * hh + 2] = _mm256_unpacklo_epi64(t[4 * hh + 1], t[4 * hh + 3]);
					u[4 * hh + 3] = _mm256_unpackhi_epi64(t[4 * hh + 1], t[4 * hh + 3]);
				}
#pragma GCC unroll 4
				for (int x = 0; x < 4; x++) {
					T[x] = _mm256_permute2x128_si256(u[x], u[x + 4], 0x20);
					T[x + 4] = _mm256_permute2x128_si256(u[x], u[x + 4], 0x31);
				}
			}
#pragma GCC unroll 8
			for (int x = 0; x < 8; x++)
				U[x] = _mm256_abs_epi8(T[x]);
			const __m256 dw = _mm256_cvtph_ps(
				_mm_loadu_si128((const __m128i *)(const void *)(sc + sstep * b)));
			for (int64_t i = 0; i < jb->m; i++) {
				const uint8_t *a = jb->aq + i * jb->k + b * HG_Q8_BLOCK;
				__m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 8
				for (int x = 0; x < 8; x++) {
					int32_t a4;
					memcpy(&a4, a + 4 * x, sizeof(a4));
					const __m256i s = _mm256_sign_epi8(_mm256_set1_epi32(a4), T[x]);
					acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(U[x], s),
					                                              ones16));
				}
				float *cr = jb->C + i * jb->n + j;
				const __m256 p = _mm256_mul_ps(_mm256_set1_ps(jb->da[i * nb + b]), dw);
				const __m256 prev = b ? _mm256_maskload_ps(cr, mask) : _mm256_setzero_ps();
				_mm256_maskstore_ps(cr, mask, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), p, prev));
			}
		}
	}
}

/* quant_row for fp16 A, 32 at a time in registers, the same numbers: amax
 * from the largest |bits| (fp16 magnitudes order as their bits), v = x *
 * (1 / d) in fp32, vcvtps2dq rounding to nearest even as the 1.5 * 2^23 trick
 * does. The scalar quantizer took a quarter of a 26-row call. */
static I8_VNNI void quant_row_f16_512(uint8_t *q, float *d, const uint16_t *a, int64_t k,
                                      int bias)
{
	const __m512i mag = _mm512_set1_epi32(0x7fff);
	const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
	const __m512i vb = _mm512_set1_epi32(bias);
	for (int64_t b = 0; b < k / HG_Q8_BLOCK; b++) {
		const __m256i h0 = _mm256_loadu_si256((const __m256i *)(const void *)(a + 32 * b));
		const __m256i h1 = _mm256_loadu_si256((const __m256i *)(const void *)(a + 32 * b + 16));
		const int mx = _mm512_reduce_max_epi32(
			_mm512_max_epi32(_mm512_and_si512(_mm512_cvtepu16_epi32(h0), mag),
			                 _mm512_and_si512(_mm512_cvtepu16_epi32(h1), mag)));
		const float db = _cvtsh_ss((unsigned short)mx) / 127.0f;
		if (mx >= 0x7c00 || !(db >= FLT_MIN)) { /* as quant_row */
			d[b] = mx >= 0x7c00 ? NAN : 0.0f;
			memset(q + 32 * b, bias, HG_Q8_BLOCK);
			continue;
		}
		const __m512 id = _mm512_set1_ps(1.0f / db);
		__m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_cvtph_ps(h0), id));
		__m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_cvtph_ps(h1), id));
		q0 = _mm512_add_epi32(_mm512_max_epi32(_mm512_min_epi32(q0, hi), lo), vb);
		q1 = _mm512_add_epi32(_mm512_max_epi32(_mm512_min_epi32(q1, hi), lo), vb);
		_mm_storeu_si128((__m128i *)(void *)(q + 32 * b), _mm512_cvtepi32_epi8(q0));
		_mm_storeu_si128((__m128i *)(void *)(q + 32 * b + 16), _mm512_cvtepi32_epi8(q1));
		d[b] = db;
	}
}

/* ---- AVX-512 VNNI: 16 columns; vpdpbusd takes A + 128 (unsigned) and W
 * (signed), so each lane's sum is the dot product + 128 sum(w), taken off
 * after (sum(w) by vpdpbusd against ones, once per group and block) ---- */

/* 16 columns' block b transposed, from group_pack's layout: T[x] lane c =
 * dword x of column c's 32 q bytes; *dw: their scales. */
/* (inlined whatever GCC's size heuristics say: called out of line, from
 * the register tiles' copies, T went through the stack) */
#define I8_INLINE inline __attribute__((always_inline))

static I8_INLINE I8_VNNI void vnni_tr16(__m512i T[8], __m512 *dw, const char *pack, int64_t nb,
                                        int64_t b)
{
	const __m512i ix_lo = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
	const __m512i ix_hi = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
	__m512i r[8], t[8], u[8];
	*dw = _mm512_cvtph_ps(_mm256_load_si256(
		(const __m256i *)(const void *)(pack + 16 * nb * HG_Q8_BLOCK + 32 * b)));
	/* zmm c: column c's block in the low half, column c + 8's high */
#pragma GCC unroll 8
	for (int c = 0; c < 8; c++)
		r[c] = _mm512_inserti64x4(
			_mm512_castsi256_si512(_mm256_load_si256(
				(const __m256i *)(const void *)(pack + (c * nb + b) * HG_Q8_BLOCK))),
			_mm256_load_si256(
				(const __m256i *)(const void *)(pack + ((c + 8) * nb + b) * HG_Q8_BLOCK)),
			1);
#pragma GCC unroll 4
	for (int c = 0; c < 8; c += 2) {
		t[c] = _mm512_unpacklo_epi32(r[c], r[c + 1]);
		t[c + 1] = _mm512_unpackhi_epi32(r[c], r[c + 1]);
	}
#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
		u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
	}
	/* 128-bit lanes (a0, b0, a2, b2) and (a1, b1, a3, b3) of u[x], u[x + 4] */
#pragma GCC unroll 4
	for (int x = 0; x < 4; x++) {
		T[x] = _mm512_permutex2var_epi64(u[x], ix_lo, u[x + 4]);
		T[x + 4] = _mm512_permutex2var_epi64(u[x], ix_hi, u[x + 4]);
	}
}

/* the same T and *dw from a repacked group at g (hg_q8_repack), in place.
 * pin: T held in registers (an empty asm makes each an opaque value);
 * else GCC may reload T[x] from W at every row, which at 2 and 3 rows it
 * did (1536 x 576 in cache, 2 / 3 rows: 21.2 / 30.1 us, pinned 15.0 /
 * 17.4; pinned from 4 rows on too, up to 4% slower there, so only below) */
static I8_INLINE I8_VNNI void vnni_ld16(__m512i T[8], __m512 *dw, const char *g, int64_t nb,
                                        int64_t b, const bool pin)
{
	*dw = _mm512_cvtph_ps(_mm256_loadu_si256(
		(const __m256i *)(const void *)(g + I8_RV * nb + 32 * b)));
#pragma GCC unroll 8
	for (int x = 0; x < 8; x++) {
		T[x] = _mm512_loadu_si512((const void *)(g + I8_RV * b + 64 * x));
		if (pin)
			__asm__("" : "+v"(T[x]));
	}
}

static I8_INLINE I8_VNNI __m512i bcast4(const uint8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm512_set1_epi32(v);
}

/* acc + the 4-byte dot products of w (T[x]) and a (bcast4): rp, w + 128
 * unsigned against a signed; else w signed against a + 128 unsigned */
static I8_INLINE I8_VNNI __m512i dp_vnni(__m512i acc, __m512i w, __m512i a, const bool rp)
{
	return rp ? _mm512_dpbusd_epi32(acc, w, a) : _mm512_dpbusd_epi32(acc, a, w);
}

/* rows of A per pass over a group: their accumulators, a contiguous tile
 * on the stack (C's rows are n floats apart: at the LM head's n, every row
 * of a group's 64 bytes falls in the same L1 set) */
#define I8_ROWS 64

/* the rows of the group two ahead, prefetched into L2 a slice a block, so
 * the weight stream runs under the arithmetic (host_gemm_q4_x86.c's q4_pf:
 * measured there and here, one thread, W from memory) */
typedef struct i8_pf {
	const char *p;
	int64_t left, step;
} i8_pf;

/* Rows [i0, i0 + mr) of A against the group at src, block after block,
 * into acc[0 .. mr). rp: a group in the repacked layout (vnni_ld16; w +
 * 128 against A's signed q, each row's chain starting at -128 sum(q)),
 * else group_pack's buffer (vnni_tr16; A's q + 128 against w, the chain
 * starting at -128 sum(w), by vpdpbusd against ones per group and block).
 * Both integer sums are exactly sum(q w), so the FMAs see the same values
 * in the same order. Inlined with mr a constant up to I8_MAXR (acc in
 * registers: the FMAs wait on no store and load) and with a run-time mr
 * (acc on the stack), rp a constant. */
static I8_INLINE I8_VNNI void group_vnni(const i8_job *jb, __m512 *acc, const int64_t mr,
                                         int64_t i0, const char *src, const bool rp, i8_pf *pf)
{
	const int64_t nb = jb->nb, k = jb->k;
	const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
#pragma GCC unroll 8
	for (int64_t i = 0; i < mr; i++)
		acc[i] = _mm512_setzero_ps(); /* fmaf(x, p, +0): the first block's FMA */
	for (int64_t b = 0; b < nb; b++) {
		__m512i T[8];
		__m512 dw;
		const int64_t pn = pf->step < pf->left ? pf->step : pf->left;
		for (int64_t q = 0; q < pn; q += 64)
			_mm_prefetch(pf->p + q, _MM_HINT_T1);
		pf->p += pn;
		pf->left -= pn;
		__m512i ncorr = zero;
		if (rp) {
			vnni_ld16(T, &dw, src, nb, b, mr < 4);
		} else {
			vnni_tr16(T, &dw, src, nb, b);
			__m512i sw0 = _mm512_dpbusd_epi32(zero, ones, T[0]);
			__m512i sw1 = _mm512_dpbusd_epi32(zero, ones, T[4]);
#pragma GCC unroll 3
			for (int x = 1; x < 4; x++) {
				sw0 = _mm512_dpbusd_epi32(sw0, ones, T[x]);
				sw1 = _mm512_dpbusd_epi32(sw1, ones, T[x + 4]);
			}
			/* -128 sum(w): where one of each row's two chains starts */
			ncorr = _mm512_sub_epi32(zero, _mm512_slli_epi32(_mm512_add_epi32(sw0, sw1), 7));
		}
		const uint8_t *a0 = jb->aq + i0 * k + b * HG_Q8_BLOCK;
		const float *d0 = jb->da + i0 * nb + b;
#pragma GCC unroll 8
		for (int64_t i = 0; i < mr; i++) {
			const uint8_t *a = a0 + i * k;
			/* two chains of 4 (integer sums: any order is exact) */
			__m512i s0 = dp_vnni(rp ? _mm512_set1_epi32(jb->zas[(i0 + i) * nb + b]) : ncorr,
			                     T[0], bcast4(a), rp);
			__m512i s1 = dp_vnni(zero, T[4], bcast4(a + 16), rp);
#pragma GCC unroll 3
			for (int x = 1; x < 4; x++) {
				s0 = dp_vnni(s0, T[x], bcast4(a + 4 * x), rp);
				s1 = dp_vnni(s1, T[x + 4], bcast4(a + 16 + 4 * x), rp);
			}
			const __m512i isum = _mm512_add_epi32(s0, s1);
			const __m512 p = _mm512_mul_ps(_mm512_set1_ps(d0[i * nb]), dw);
			acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), p, acc[i]);
		}
	}
}

/* up to I8_MAXR rows (the decode, a chain verify of up to 7 drafted
 * tokens): one register tile */
#define I8_MAXR 8

#define I8_TILE(M)                                                                 \
	case M: {                                                                      \
		__m512 a[M];                                                               \
		group_vnni(jb, a, M, 0, src, rp, pf);                                      \
		_Pragma("GCC unroll 8") for (int i = 0; i < M; i++)                        \
			_mm512_mask_storeu_ps(jb->C + i * n + j, mk, a[i]);                     \
		break;                                                                     \
	}

/* columns [j, j + 16) (mk: those < n) from src, every row of A; rp a
 * constant at each call (group_vnni) */
static I8_INLINE I8_VNNI void tiles_vnni(const i8_job *jb, int64_t j, __mmask16 mk,
                                         const char *src, const bool rp, i8_pf *pf,
                                         __m512 *acc)
{
	const int64_t m = jb->m, n = jb->n;
	switch (m) {
	I8_TILE(1)
	I8_TILE(2)
	I8_TILE(3)
	I8_TILE(4)
	I8_TILE(5)
	I8_TILE(6)
	I8_TILE(7)
	I8_TILE(8)
	default:
		for (int64_t i0 = 0; i0 < m; i0 += I8_ROWS) {
			const int64_t mr = m - i0 < I8_ROWS ? m - i0 : I8_ROWS;
			group_vnni(jb, acc, mr, i0, src, rp, pf);
			for (int64_t i = 0; i < mr; i++)
				_mm512_mask_storeu_ps(jb->C + (i0 + i) * n + j, mk, acc[i]);
		}
	}
}

static I8_VNNI void cols_vnni(const i8_job *jb, int64_t j0, int64_t j1, char *pack)
{
	const int64_t nb = jb->nb, wrow = jb->wrow;
	const char *const W = jb->W;
	__m512 acc[I8_ROWS];
	for (int64_t j = j0; j < j1; j += 16) {
		const int nc = j1 - j < 16 ? (int)(j1 - j) : 16;
		const __mmask16 mk = (__mmask16)((1u << nc) - 1);
		const int64_t pa = j + 2 * 16, pe = pa + 16 < j1 ? pa + 16 : j1;
		i8_pf pf = {.p = pa < pe ? W + pa * wrow : W, /* no pointer past W's end */
		            .left = pa < pe ? (pe - pa) * wrow : 0};
		pf.step = (pf.left + nb - 1) / nb;
		if (jb->repacked) { /* a whole group read in place; past them, repacked here */
			if (j >= jb->full)
				group_pack_r(pack, nc, W, j, wrow, nb);
			tiles_vnni(jb, j, mk, j < jb->full ? W + j * wrow : pack, true, &pf, acc);
			continue;
		}
		group_pack(pack, 16, nc, W, j, wrow, nb);
		tiles_vnni(jb, j, mk, pack, false, &pf, acc);
	}
}
#endif /* I8_X86 */

/* ---- paths ---- */

static bool vnni_probe(void)
{
#if I8_X86
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512vnni");
#else
	return false;
#endif
}

bool hg_i8_path_available(int path)
{
	static atomic_int vnni = -1; /* CPUID traps in a VM: asked once (host_gemm.c) */
	if (path != HG_PATH_AVX512)
		return hg_path_available(path);
	int v = atomic_load_explicit(&vnni, memory_order_relaxed);
	if (v < 0) {
		v = vnni_probe();
		atomic_store_explicit(&vnni, v, memory_order_relaxed);
	}
	return v && hg_path_available(HG_PATH_AVX512);
}

int hg_i8_path_auto(void)
{
	const int p = hg_path_auto();
	return p == HG_PATH_AVX512 && !hg_i8_path_available(p) ? HG_PATH_AVX2 : p;
}

/* ---- the call ---- */

void hg_a8_quant(uint8_t *aq, float *da, float *xrow, const uint16_t *A, int64_t m, int64_t k,
                 bool a_bf16, int bias, int path)
{
	const int64_t nb = k / HG_Q8_BLOCK;
	for (int64_t i = 0; i < m; i++) {
#if I8_X86
		if (path == HG_PATH_AVX512 && !a_bf16 && hg_i8_path_available(path)) {
			quant_row_f16_512(aq + i * k, da + i * nb, A + i * k, k, bias);
			continue;
		}
#endif
		hg_to_f32(xrow, A + i * k, k, a_bf16);
		quant_row(aq + i * k, da + i * nb, xrow, A + i * k, k, a_bf16, bias);
	}
}

static void run_part(void *ctx, int part, int n_parts)
{
	const i8_job *jb = ctx;
	const int64_t g0 = jb->n_groups * part / n_parts, g1 = jb->n_groups * (part + 1) / n_parts;
	const int64_t j0 = 16 * g0, j1 = 16 * g1 < jb->n ? 16 * g1 : jb->n;
	if (j0 < j1)
		jb->cols(jb, j0, j1, jb->pack ? jb->pack + I8_PACK(jb->nb) * (size_t)part : NULL);
}

/* hg_gemm_q8a8 (repacked: hg_gemm_q8a8r) */
static int q8a8_call(float *C, const uint16_t *A, const void *W, int64_t m, int64_t n, int64_t k,
                     bool a_bf16, int path, int threads, bool repacked)
{
	if (path == HG_PATH_AUTO)
		path = hg_i8_path_auto();
	if (!hg_i8_path_available(path) || m < 0 || n < 0 || k < 0 || k % HG_Q8_BLOCK)
		return SW_EINVAL;
	if (m == 0 || n == 0)
		return 0;
	if (k == 0) { /* no blocks: every sum is the empty one */
		memset(C, 0, sizeof(*C) * (size_t)(m * n));
		return 0;
	}
	const int64_t nb = k / HG_Q8_BLOCK, wrow = nb * HG_Q8_BYTES, n_groups = (n + 15) / 16;
	/* none under ~16 KB of W */
	const int64_t parts = hg_parts(threads, n_groups, 1 + (16384 / wrow) / 16);
	/* aq (m k bytes), then the vector paths' packed groups (one a part),
	 * da (m nb floats), zas (m nb int32) and the fp32 row (k), 64-aligned */
	const size_t q_bytes = ((size_t)(m * k) + 63) & ~(size_t)63;
	const size_t pack_bytes = path == HG_PATH_PORTABLE ? 0 : I8_PACK(nb) * (size_t)parts;
	const size_t need = q_bytes + pack_bytes + sizeof(float) * (size_t)(2 * m * nb + k);
	char *s_buf = hg_thread_scratch(need); /* the calling thread's, as hg_gemm16's */
	if (!s_buf)
		return SW_ENOMEM;
	uint8_t *aq = (uint8_t *)s_buf;
	char *pack = pack_bytes ? s_buf + q_bytes : NULL;
	float *da = (float *)(void *)(s_buf + q_bytes + pack_bytes);
	int32_t *zas = (int32_t *)(void *)(da + m * nb);
	float *xrow = (float *)(void *)(zas + m * nb);
	/* A + 128 where vpdpbusd takes it unsigned (AVX-512 on the file's
	 * layout); the repacked layout's w is the unsigned operand instead */
	const bool a_biased = path == HG_PATH_AVX512 && !repacked;
	hg_a8_quant(aq, da, xrow, A, m, k, a_bf16, a_biased ? 128 : 0, path);
	if (path == HG_PATH_AVX512 && repacked)
		for (int64_t i = 0; i < m * nb; i++) {
			int32_t sq = 0;
			for (int t = 0; t < HG_Q8_BLOCK; t++)
				sq += (int8_t)aq[i * HG_Q8_BLOCK + t];
			zas[i] = -128 * sq;
		}
	i8_job jb = {.C = C, .aq = aq, .da = da, .zas = zas, .W = W, .m = m, .n = n, .k = k,
	             .nb = nb,
	             .wrow = wrow, .n_groups = n_groups, .pack = pack, .cols = cols_portable,
	             .repacked = repacked, .full = n / 16 * 16};
#if I8_X86
	if (path == HG_PATH_AVX2)
		jb.cols = cols_avx2;
	else if (path == HG_PATH_AVX512)
		jb.cols = cols_vnni;
#endif
	if (parts == 1)
		run_part(&jb, 0, 1);
	else
		hp_run(run_part, &jb, (int)parts);
	return 0;
}

int hg_gemm_q8a8(float *C, const uint16_t *A, const void *W, int64_t m, int64_t n, int64_t k,
                 bool a_bf16, int path, int threads)
{
	return q8a8_call(C, A, W, m, n, k, a_bf16, path, threads, false);
}

int hg_gemm_q8a8r(float *C, const uint16_t *A, const void *W, int64_t m, int64_t n, int64_t k,
                  bool a_bf16, int path, int threads)
{
	return q8a8_call(C, A, W, m, n, k, a_bf16, path, threads, true);
}
