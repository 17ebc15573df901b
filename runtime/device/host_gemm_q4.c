/* The host GEMM on a GGUF file's own 4- and 6-bit weight blocks times int8
 * activations (host_gemm.h hg_gemm_gguf_a8): Q4_0, Q4_1, Q4_K and Q6_K read
 * as the file stores them, never expanded in memory; Q8_0 is hg_gemm_q8a8.
 * The activations are quantized by hg_gemm_q8a8's rule (hg_a8_quant, bias
 * 0), so a Q8_0 and a Q4 layer see the same int8 inputs.
 *
 * The Q4 types are read as 32-element sub-blocks w_t = d (q_t - z) + mn
 * with q unsigned 4-bit: Q4_0 z = 8, mn = 0; Q4_1 z = 0, mn = m; Q4_K z =
 * 0, d = d_super * sc_j, mn = -dmin * m_j (both exact in fp32: 11-bit times
 * 6-bit). Against the activation block (int8 a, scale da, exact sum asum):
 *   isum = sum q a - z asum                 (int32, exact)
 *   acc  = fmaf((float)isum, da * d, acc)   (da * d one rounding)
 *   acc  = fmaf(mn, da * (float)asum, acc)  (only where the type has mn)
 * Q6_K (w_t = d sc_h (q_t - 32), q 6-bit, sc_h int8 per 16 elements):
 *   isum = sc_0 (sum_{t<16} q a - 32 asum_0) + sc_1 (sum_{t>=16} ... - 32
 *          asum_1)                          (int32, exact, |isum| < 2^24)
 *   acc  = fmaf((float)isum, da * d, acc)
 * over the 32-blocks in order from acc = 0: every path (portable, AVX2,
 * AVX-512 VNNI) computes exactly this, so they give the same bits at every
 * row count and thread count.
 *
 * Layout: lanes are output columns, as in host_gemm_i8.c, but the vector
 * paths read the blocks in place (see "the vector paths" below: nibbles
 * split in registers, no per-group buffer); the weights are the unsigned
 * operand of vpdpbusd / maddubs (0..15, 0..63) and each row broadcasts its
 * signed bytes against them, so no bias correction is needed. The portable
 * path unpacks a group into a per-part buffer. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "host_gemm.h"
#include "host_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define Q4_X86 1
#else
#define Q4_X86 0
#endif

#define G 16 /* columns a group */
#define QB 32

typedef struct q4_job {
	float *C;            /* (m, n) */
	const int8_t *aq;    /* (m, k) quantized A */
	const float *da;     /* (m, nb) scales */
	const int32_t *zas;  /* (m, nb) -z asum, the integer sum's start; Q6_K:
	                      * (m, 2 nb), -32 asum of each 16-element half */
	const float *sa;     /* (m, nb) da * asum (types with mn) */
	const char *W;       /* (n, k) in wtype's blocks, rows wrow bytes apart */
	int wtype;
	bool has_min;
	int64_t m, n, k, nb, wrow, n_groups;
	char *pack;          /* part_bytes for each part: the portable path's
	                      * unpacked group (Q4_PACK), the vector paths' row
	                      * accumulators (64 bytes a row) */
	size_t part_bytes;
	void (*cols)(const struct q4_job *j, int64_t j0, int64_t j1, char *pack);
} q4_job;

/* A group unpacked: column c's q bytes for 32-block b at (c nb + b) 32, then
 * d[b G + c] and mn[b G + c] (fp32) */
#define Q4_PACK(nb) ((size_t)(nb) * (G * QB + 2 * G * sizeof(float)))

/* ---- the block formats (llama.cpp ggml-quants.c: block_q4_0, block_q4_1,
 * block_q4_K and get_scale_min_k4) ---- */

int64_t hg_gguf_block(int wtype)
{
	switch (wtype) {
	case HG_GGUF_Q4_0: case HG_GGUF_Q4_1: case HG_GGUF_Q8_0: return 32;
	case HG_GGUF_Q4_K: case HG_GGUF_Q6_K: return 256;
	default: return 0;
	}
}

int64_t hg_gguf_block_bytes(int wtype)
{
	switch (wtype) {
	case HG_GGUF_Q4_0: return 18;
	case HG_GGUF_Q4_1: return 20;
	case HG_GGUF_Q8_0: return HG_Q8_BYTES;
	case HG_GGUF_Q4_K: return 144;
	case HG_GGUF_Q6_K: return 210;
	default: return 0;
	}
}

const char *hg_gguf_name(int wtype)
{
	switch (wtype) {
	case HG_GGUF_Q4_0: return "q4_0";
	case HG_GGUF_Q4_1: return "q4_1";
	case HG_GGUF_Q8_0: return "q8_0";
	case HG_GGUF_Q4_K: return "q4_k";
	case HG_GGUF_Q6_K: return "q6_k";
	default: return NULL;
	}
}

static float h2f(const char *p)
{
	uint16_t h;
	float f;
	memcpy(&h, p, sizeof(h));
	hg_to_f32(&f, &h, 1, false);
	return f;
}

/* 16 bytes of packed nibbles -> 32 bytes: low nibbles first, then high
 * (elements j and j + 16 share byte j) */
static void nib32(uint8_t *q, const uint8_t *qs)
{
	for (int t = 0; t < 16; t++) {
		q[t] = qs[t] & 15;
		q[t + 16] = qs[t] >> 4;
	}
}

/* One file block (wtype's, blk) -> its 32-blocks: q (32 each, qstride
 * apart), d and mn (dstride apart): the portable path's unpacker. */
static void unpack(int wtype, const char *blk, uint8_t *q, size_t qstride, float *d, float *mn,
                   size_t dstride)
{
	if (wtype == HG_GGUF_Q4_0 || wtype == HG_GGUF_Q4_1) {
		const int off = wtype == HG_GGUF_Q4_0 ? 2 : 4;
		*d = h2f(blk);
		*mn = wtype == HG_GGUF_Q4_1 ? h2f(blk + 2) : 0.0f;
		nib32(q, (const uint8_t *)blk + off);
		return;
	}
	/* Q4_K: d, dmin (fp16), scales[12] (eight 6-bit scales and mins), qs[128]:
	 * 64 elements a 32 bytes, the first 32 in the low nibbles */
	const float dd = h2f(blk), dmin = h2f(blk + 2);
	const uint8_t *sc = (const uint8_t *)blk + 4, *qs = (const uint8_t *)blk + 16;
	for (int j = 0; j < 8; j++) {
		int s, mm;
		if (j < 4) {
			s = sc[j] & 63;
			mm = sc[j + 4] & 63;
		} else {
			s = (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4);
			mm = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
		}
		d[j * dstride] = dd * (float)s;
		mn[j * dstride] = -(dmin * (float)mm);
		const uint8_t *src = qs + 32 * (j / 2);
		uint8_t *dst = q + j * qstride;
		for (int t = 0; t < 32; t++)
			dst[t] = j % 2 ? src[t] >> 4 : src[t] & 15;
	}
}


/* Columns [j, j + nc) of W unpacked into a group's pack (the portable
 * path's); columns nc .. G - 1 zero (q 0, d 0, mn 0: finite, never stored) */
static void group_unpack(const q4_job *jb, char *pack, int64_t j, int nc)
{
	const int64_t nb = jb->nb, per = hg_gguf_block(jb->wtype) / QB;
	const int64_t bb = hg_gguf_block_bytes(jb->wtype);
	uint8_t *q = (uint8_t *)pack;
	float *d = (float *)(void *)(pack + (size_t)(G * nb * QB)), *mn = d + G * nb;
	for (int c = 0; c < nc; c++) {
		const char *row = jb->W + (j + c) * jb->wrow;
		for (int64_t b = 0; b < nb; b += per)
			unpack(jb->wtype, row + b / per * bb, q + (c * nb + b) * QB, QB, d + b * G + c,
			       mn + b * G + c, G);
	}
	if (nc < G) {
		memset(q + nc * nb * QB, 0, (size_t)((G - nc) * nb * QB));
		for (int64_t b = 0; b < nb; b++)
			for (int c = nc; c < G; c++)
				d[b * G + c] = mn[b * G + c] = 0.0f;
	}
}

/* ---- portable: the vector paths' order, one column at a time ---- */

static void cols_portable(const q4_job *jb, int64_t j0, int64_t j1, char *pack)
{
	const int64_t nb = jb->nb;
	const uint8_t *q = (const uint8_t *)pack;
	const float *d = (const float *)(const void *)(pack + (size_t)(G * nb * QB)), *mn = d + G * nb;
	for (int64_t j = j0; j < j1; j += G) {
		const int nc = j1 - j < G ? (int)(j1 - j) : G;
		group_unpack(jb, pack, j, nc);
		for (int c = 0; c < nc; c++)
			for (int64_t i = 0; i < jb->m; i++) {
				float acc = 0.0f;
				for (int64_t b = 0; b < nb; b++) {
					const int8_t *a = jb->aq + i * jb->k + b * QB;
					const uint8_t *w = q + (c * nb + b) * QB;
					int32_t isum = jb->zas[i * nb + b];
					for (int t = 0; t < QB; t++)
						isum += (int32_t)w[t] * a[t];
					const float p = jb->da[i * nb + b] * d[b * G + c];
					acc = __builtin_fmaf((float)isum, p, acc);
					if (jb->has_min)
						acc = __builtin_fmaf(mn[b * G + c], jb->sa[i * nb + b], acc);
				}
				jb->C[i * jb->n + j + c] = acc;
			}
	}
}

/* Q6_K (llama.cpp block_q6_K: ql[128] low 4 bits, qh[64] high 2 bits,
 * scales[16] int8, d fp16; dequantize_row_q6_K): element e of a 128-half
 * n, l = e % 32, is ql[64 n + l (+ 32 for e / 32 odd)]'s low (e < 64) or high
 * nibble, with bits 2 (e / 32) .. + 1 of qh[32 n + l] above, minus 32, times
 * d scales[e / 16 of the block]. 32-block b of a super-block is therefore
 * (b % 4 odd: ql's second 32 bytes of the half; b % 4 >= 2: high nibbles;
 * qh shifted by 2 (b % 4)). q6_elem: its element e, 0..63 */
static int q6_elem(const uint8_t *blk, int e)
{
	const int n = e / 128, r = e % 128, l = r % 32, x = r / 32;
	const uint8_t ql = blk[64 * n + l + 32 * (x & 1)], qh = blk[128 + 32 * n + l];
	return (x >= 2 ? ql >> 4 : ql & 15) | ((qh >> (2 * x) & 3) << 4);
}

/* Q6_K portable, column by column: q (k bytes, 0..63) and the scales
 * unpacked into the part's buffer, then every row's 32-blocks in order */
static void cols_portable_q6k(const q4_job *jb, int64_t j0, int64_t j1, char *pack)
{
	const int64_t nb = jb->nb, k = jb->k;
	uint8_t *q = (uint8_t *)pack;
	int32_t *sc = (int32_t *)(void *)(pack + ((k + 63) & ~(int64_t)63));
	float *d = (float *)(sc + 2 * nb);
	for (int64_t j = j0; j < j1; j++) {
		const uint8_t *row = (const uint8_t *)jb->W + j * jb->wrow;
		for (int64_t s = 0; s < nb / 8; s++) {
			const uint8_t *blk = row + 210 * s;
			for (int e = 0; e < 256; e++)
				q[256 * s + e] = (uint8_t)q6_elem(blk, e);
			for (int h = 0; h < 16; h++)
				sc[16 * s + h] = (int8_t)blk[192 + h];
			d[s] = h2f((const char *)blk + 208);
		}
		for (int64_t i = 0; i < jb->m; i++) {
			float acc = 0.0f;
			for (int64_t b = 0; b < nb; b++) {
				const int8_t *a = jb->aq + i * k + b * QB;
				int32_t isum = 0;
				for (int h = 0; h < 2; h++) {
					int32_t s16 = jb->zas[i * 2 * nb + 2 * b + h];
					for (int t = 16 * h; t < 16 * h + 16; t++)
						s16 += (int32_t)q[b * QB + t] * a[t];
					isum += sc[2 * b + h] * s16;
				}
				acc = __builtin_fmaf((float)isum, jb->da[i * nb + b] * d[b / 8], acc);
			}
			jb->C[i * jb->n + j] = acc;
		}
	}
}

#if Q4_X86
#define Q4_AVX2 __attribute__((target("avx2,fma,f16c")))
#define Q4_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma,f16c")))

/* ---- the vector paths: lanes are columns, read in place ----
 *
 * A group's columns are read where they lie (rp[c]: column c's row of W;
 * columns past the last one repeat column 0: their lanes are computed and
 * never stored). Per 32-block the 16 bytes of nibbles of each column are
 * transposed as dwords (4 x 4 in each 128-bit lane: column 4L + g in lane L
 * of load g, so no permutation is left over), then split in registers:
 * T[x] = R[x] & 15 is elements 4x .. 4x + 3, T[x + 4] = (R[x] >> 4) & 15
 * elements 16 + 4x .. (vpsrlw crosses bytes; the mask drops what came in).
 * The scales are transposed the same way from the block's first dword
 * (Q4_0/Q4_1: d | m << 16; Q4_K once a super-block: d | dmin, 12 scale
 * bytes). Each row then broadcasts its 4 bytes against T[x]: 8 vpdpbusd
 * (maddubs on AVX2) a 32-block, as host_gemm_i8.c's VNNI path, with no
 * per-group buffer. The FMAs are the specification's, in its order. */

/* the group's g row pointers, into a copy of its rows at cp (wrow bytes
 * each, copied row after row: read where they lie, 16 rows at a time, the
 * weights would stream from memory at half the rate, as host_gemm_i8.c's
 * group_pack says; the copy stays in L1/L2) */
static void group_rows(const q4_job *jb, int64_t j, int nc, int g, const char **rp, char *cp)
{
	memcpy(cp, jb->W + j * jb->wrow, (size_t)(nc * jb->wrow)); /* the rows are adjacent */
	for (int c = 0; c < g; c++)
		rp[c] = cp + (c < nc ? c : 0) * jb->wrow;
}

static inline Q4_AVX2 __m128i ld16(const char *p)
{
	return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* AVX2: R[x] lane c = dword x of the 16 bytes at rp[c] + off, 8 columns */
static inline Q4_AVX2 void tr4_256(__m256i R[4], const char *const *rp, int64_t off)
{
	__m256i v[4];
	for (int g = 0; g < 4; g++)
		v[g] = _mm256_inserti128_si256(_mm256_castsi128_si256(ld16(rp[g] + off)),
		                               ld16(rp[g + 4] + off), 1);
	const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
	const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
	R[0] = _mm256_unpacklo_epi64(t0, t2);
	R[1] = _mm256_unpackhi_epi64(t0, t2);
	R[2] = _mm256_unpacklo_epi64(t1, t3);
	R[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* AVX2: the first dword of the 16 bytes at rp[c] + off, lane c (tr4_256's
 * first output: cheaper than a gather here) */
static inline Q4_AVX2 __m256i d0_256(const char *const *rp, int64_t off)
{
	__m256i v[4];
	for (int g = 0; g < 4; g++)
		v[g] = _mm256_inserti128_si256(_mm256_castsi128_si256(ld16(rp[g] + off)),
		                               ld16(rp[g + 4] + off), 1);
	return _mm256_unpacklo_epi64(_mm256_unpacklo_epi32(v[0], v[1]),
	                             _mm256_unpacklo_epi32(v[2], v[3]));
}

/* AVX2: R[x] lane c = dword x of the 32 bytes at rp[c] + off (tr8's
 * shuffle) */
static inline Q4_AVX2 void tr8_256(__m256i T[8], const char *const *rp, int64_t off)
{
	__m256i r[8], t[8], u[8];
	for (int c = 0; c < 8; c++)
		r[c] = _mm256_loadu_si256((const __m256i *)(const void *)(rp[c] + off));
	for (int c = 0; c < 8; c += 2) {
		t[c] = _mm256_unpacklo_epi32(r[c], r[c + 1]);
		t[c + 1] = _mm256_unpackhi_epi32(r[c], r[c + 1]);
	}
	for (int h = 0; h < 2; h++) {
		u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
		u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
	}
	for (int x = 0; x < 4; x++) {
		T[x] = _mm256_permute2x128_si256(u[x], u[x + 4], 0x20);
		T[x + 4] = _mm256_permute2x128_si256(u[x], u[x + 4], 0x31);
	}
}

/* fp16 in the low (hi: high) half of each dword -> fp32 (exact) */
static inline Q4_AVX2 __m256 h2f_256(__m256i v, bool hi)
{
	v = hi ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xffff));
	v = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
	return _mm256_cvtph_ps(_mm256_castsi256_si128(v));
}

/* Q4_K's 6-bit scale (mn: min) of sub-block sb from the transposed scale
 * dwords S[1..3] (bytes 0..3, 4..7, 8..11 of scales[12]) */
static inline Q4_AVX2 __m256i k_scale_256(const __m256i S[4], int sb, bool mn)
{
	const __m256i m6 = _mm256_set1_epi32(63), m4 = _mm256_set1_epi32(15);
	const __m256i lo = mn ? S[2] : S[1];
	if (sb < 4)
		return _mm256_and_si256(_mm256_srli_epi32(lo, 8 * sb), m6);
	const int s = 8 * (sb - 4);
	const __m256i l4 = _mm256_and_si256(_mm256_srli_epi32(S[3], s + (mn ? 4 : 0)), m4);
	const __m256i h2 = _mm256_and_si256(_mm256_srli_epi32(lo, s + 6), _mm256_set1_epi32(3));
	return _mm256_or_si256(l4, _mm256_slli_epi32(h2, 4));
}

/* every row's 32-block b against T (8 columns): maddubs (w 0..15 unsigned,
 * a signed: a pair at most 2 x 15 x 127 = 3810, eight summed in int16 at
 * most 30480, exact), one madd to int32, then the specification's FMAs */
static inline Q4_AVX2 void rows_avx2(const q4_job *jb, __m256 *acc, const __m256i T[8],
                                     __m256 dw, __m256 mw, int64_t b)
{
	const __m256i ones16 = _mm256_set1_epi16(1);
	const int64_t nb = jb->nb, k = jb->k;
	const int8_t *a = jb->aq + b * QB;
	for (int64_t i = 0; i < jb->m; i++, a += k) {
		__m256i s16 = _mm256_setzero_si256();
		for (int x = 0; x < 8; x++) {
			int32_t a4;
			memcpy(&a4, a + 4 * x, sizeof(a4));
			s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(T[x], _mm256_set1_epi32(a4)));
		}
		const __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(s16, ones16),
		                                      _mm256_set1_epi32(jb->zas[i * nb + b]));
		const __m256 p = _mm256_mul_ps(_mm256_set1_ps(jb->da[i * nb + b]), dw);
		__m256 r = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), p, b ? acc[i] : _mm256_setzero_ps());
		if (jb->has_min)
			r = _mm256_fmadd_ps(mw, _mm256_set1_ps(jb->sa[i * nb + b]), r);
		acc[i] = r;
	}
}

/* Q6_K's 32-block x (0..3) of a half from the transposed ql halves L0, L1
 * and qh H: nibbles (low for x < 2) | qh bits 2x, 2x + 1 at bits 4, 5 (the
 * 16-bit shifts' spill into the next byte masked off) */
static inline Q4_AVX2 __m256i q6_t256(__m256i L0, __m256i L1, __m256i H, int x)
{
	const __m256i l = x & 1 ? L1 : L0;
	const __m256i nib = _mm256_and_si256(x >= 2 ? _mm256_srli_epi16(l, 4) : l,
	                                     _mm256_set1_epi8(15));
	const __m256i hi = 2 * x <= 4 ? _mm256_slli_epi16(H, 4 - 2 * x) : _mm256_srli_epi16(H, 2);
	return _mm256_or_si256(nib, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
}

/* int8 scale byte `at` (0..15) of the transposed scales SC, sign-extended */
static inline Q4_AVX2 __m256i q6_sc256(const __m256i SC[4], int at)
{
	return _mm256_srai_epi32(_mm256_slli_epi32(SC[at / 4], 24 - 8 * (at % 4)), 24);
}

/* Q6_K, every row's 32-block b against T (q 0..63): a maddubs pair at most
 * 2 x 63 x 127 = 16002, two summed in int16, then madd against the half's
 * scale (in both 16-bit halves of each dword: scale times the pair's sum,
 * int32, exact), and the -32 asum term times the scale */
static inline Q4_AVX2 void rows_q6_avx2(const q4_job *jb, __m256 *acc, const __m256i T[8],
                                        __m256i sc0, __m256i sc1, __m256 dw, int64_t b)
{
	const int64_t nb = jb->nb, k = jb->k;
	const int8_t *a = jb->aq + b * QB;
	const __m256i lo16 = _mm256_set1_epi32(0xffff);
	const __m256i w0 = _mm256_or_si256(_mm256_and_si256(sc0, lo16), _mm256_slli_epi32(sc0, 16));
	const __m256i w1 = _mm256_or_si256(_mm256_and_si256(sc1, lo16), _mm256_slli_epi32(sc1, 16));
	for (int64_t i = 0; i < jb->m; i++, a += k) {
		__m256i p[4];
		for (int x = 0; x < 4; x++) {
			int32_t u, v;
			memcpy(&u, a + 8 * x, sizeof(u));
			memcpy(&v, a + 8 * x + 4, sizeof(v));
			p[x] = _mm256_add_epi16(_mm256_maddubs_epi16(T[2 * x], _mm256_set1_epi32(u)),
			                        _mm256_maddubs_epi16(T[2 * x + 1], _mm256_set1_epi32(v)));
		}
		const int32_t *z = jb->zas + i * 2 * nb + 2 * b;
		__m256i isum = _mm256_add_epi32(_mm256_madd_epi16(p[0], w0), _mm256_madd_epi16(p[1], w0));
		isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(p[2], w1),
		                                               _mm256_madd_epi16(p[3], w1)));
		isum = _mm256_add_epi32(isum, _mm256_add_epi32(
			_mm256_mullo_epi32(sc0, _mm256_set1_epi32(z[0])),
			_mm256_mullo_epi32(sc1, _mm256_set1_epi32(z[1]))));
		const __m256 pr = _mm256_mul_ps(_mm256_set1_ps(jb->da[i * nb + b]), dw);
		acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), pr, b ? acc[i] : _mm256_setzero_ps());
	}
}

/* AVX2 Q6_K: per super-block the scales (bytes 192..207) and d (the high
 * half of the dword at 206), per half the transposed ql and qh */
static Q4_AVX2 void q6_group_avx2(const q4_job *jb, __m256 *acc, const char *const *rp)
{
	for (int64_t s = 0; s < jb->nb / 8; s++) {
		__m256i SC[4], DQ[4];
		tr4_256(SC, rp, 210 * s + 192);
		tr4_256(DQ, rp, 210 * s + 194);
		const __m256 dw = h2f_256(DQ[3], true);
		for (int n = 0; n < 2; n++) {
			__m256i L0[8], L1[8], H[8];
			tr8_256(L0, rp, 210 * s + 64 * n);
			tr8_256(L1, rp, 210 * s + 64 * n + 32);
			tr8_256(H, rp, 210 * s + 128 + 32 * n);
			for (int x = 0; x < 4; x++) {
				__m256i T[8];
				for (int y = 0; y < 8; y++)
					T[y] = q6_t256(L0[y], L1[y], H[y], x);
				const int sb = 4 * n + x;
				rows_q6_avx2(jb, acc, T, q6_sc256(SC, 2 * sb), q6_sc256(SC, 2 * sb + 1), dw,
				             8 * s + sb);
			}
		}
	}
}

/* AVX2: groups of 8 columns, every row's accumulator on the stack */
static Q4_AVX2 void cols_avx2(const q4_job *jb, int64_t j0, int64_t j1, char *pack)
{
	const int64_t nb = jb->nb, m = jb->m, bb = hg_gguf_block_bytes(jb->wtype);
	const int wt = jb->wtype;
	const __m256i m4 = _mm256_set1_epi8(15);
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 *acc = (__m256 *)(void *)pack;
	const char *rp[8];
	for (int64_t j = j0; j < j1; j += 8) {
		const int nc = j1 - j < 8 ? (int)(j1 - j) : 8;
		const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nc),
		                                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
		group_rows(jb, j, nc, 8, rp, pack + 64 * m);
		if (wt == HG_GGUF_Q6_K) {
			q6_group_avx2(jb, acc, rp);
		} else if (wt == HG_GGUF_Q4_0 || wt == HG_GGUF_Q4_1) {
			const int64_t off = wt == HG_GGUF_Q4_0 ? 2 : 4;
			for (int64_t b = 0; b < nb; b++) {
				__m256i R[4], T[8];
				tr4_256(R, rp, b * bb + off);
				for (int x = 0; x < 4; x++) {
					T[x] = _mm256_and_si256(R[x], m4);
					T[x + 4] = _mm256_and_si256(_mm256_srli_epi16(R[x], 4), m4);
				}
				const __m256i D = d0_256(rp, b * bb);
				rows_avx2(jb, acc, T, h2f_256(D, false),
				          wt == HG_GGUF_Q4_1 ? h2f_256(D, true) : _mm256_setzero_ps(), b);
			}
		} else {
			for (int64_t s = 0; s < nb / 8; s++) {
				__m256i S[4];
				tr4_256(S, rp, s * bb);
				const __m256 dd = h2f_256(S[0], false), dmin = h2f_256(S[0], true);
				for (int p = 0; p < 4; p++) {
					__m256i R[8], T[8];
					tr8_256(R, rp, s * bb + 16 + 32 * p);
					for (int h = 0; h < 2; h++) {
						const int sb = 2 * p + h;
						for (int x = 0; x < 8; x++)
							T[x] = _mm256_and_si256(h ? _mm256_srli_epi16(R[x], 4) : R[x], m4);
						const __m256 dw = _mm256_mul_ps(
							dd, _mm256_cvtepi32_ps(k_scale_256(S, sb, false)));
						const __m256 mw = _mm256_xor_ps(_mm256_mul_ps(
							dmin, _mm256_cvtepi32_ps(k_scale_256(S, sb, true))), sign);
						rows_avx2(jb, acc, T, dw, mw, 8 * s + sb);
					}
				}
			}
		}
		for (int64_t i = 0; i < m; i++)
			_mm256_maskstore_ps(jb->C + i * jb->n + j, mask, acc[i]);
	}
}

/* AVX-512: the 4 loads of tr4_512, column 4L + g in 128-bit lane L of load g */
static inline Q4_VNNI __m512i ld4_512(const char *const *rp, int g, int64_t off)
{
	__m512i v = _mm512_castsi128_si512(ld16(rp[g] + off));
	v = _mm512_inserti32x4(v, ld16(rp[g + 4] + off), 1);
	v = _mm512_inserti32x4(v, ld16(rp[g + 8] + off), 2);
	return _mm512_inserti32x4(v, ld16(rp[g + 12] + off), 3);
}

/* AVX-512: R[x] lane c = dword x of the 16 bytes at rp[c] + off */
static inline Q4_VNNI void tr4_512(__m512i R[4], const char *const *rp, int64_t off)
{
	const __m512i v0 = ld4_512(rp, 0, off), v1 = ld4_512(rp, 1, off);
	const __m512i v2 = ld4_512(rp, 2, off), v3 = ld4_512(rp, 3, off);
	const __m512i t0 = _mm512_unpacklo_epi32(v0, v1), t1 = _mm512_unpackhi_epi32(v0, v1);
	const __m512i t2 = _mm512_unpacklo_epi32(v2, v3), t3 = _mm512_unpackhi_epi32(v2, v3);
	R[0] = _mm512_unpacklo_epi64(t0, t2);
	R[1] = _mm512_unpackhi_epi64(t0, t2);
	R[2] = _mm512_unpacklo_epi64(t1, t3);
	R[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* AVX-512: the first dword of the 16 bytes at rp[c] + off, lane c (a
 * gather measured slower) */
static inline Q4_VNNI __m512i d0_512(const char *const *rp, int64_t off)
{
	const __m512i v0 = ld4_512(rp, 0, off), v1 = ld4_512(rp, 1, off);
	const __m512i v2 = ld4_512(rp, 2, off), v3 = ld4_512(rp, 3, off);
	return _mm512_unpacklo_epi64(_mm512_unpacklo_epi32(v0, v1), _mm512_unpacklo_epi32(v2, v3));
}

/* AVX-512: R[x] lane c = dword x of the 32 bytes at rp[c] + off (tr16's
 * shuffle: column c in the low half of zmm c, column c + 8 in its high) */
static inline Q4_VNNI void tr8_512(__m512i T[8], const char *const *rp, int64_t off)
{
	const __m512i ix_lo = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
	const __m512i ix_hi = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
	__m512i r[8], t[8], u[8];
#pragma GCC unroll 8
	for (int c = 0; c < 8; c++)
		r[c] = _mm512_inserti64x4(
			_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(rp[c] + off))),
			_mm256_loadu_si256((const __m256i *)(const void *)(rp[c + 8] + off)), 1);
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
#pragma GCC unroll 4
	for (int x = 0; x < 4; x++) {
		T[x] = _mm512_permutex2var_epi64(u[x], ix_lo, u[x + 4]);
		T[x + 4] = _mm512_permutex2var_epi64(u[x], ix_hi, u[x + 4]);
	}
}

static inline Q4_VNNI __m512 h2f_512(__m512i v, bool hi)
{
	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(hi ? _mm512_srli_epi32(v, 16) : v));
}

static inline Q4_VNNI __m512i k_scale_512(const __m512i S[4], int sb, bool mn)
{
	const __m512i m6 = _mm512_set1_epi32(63), m4 = _mm512_set1_epi32(15);
	const __m512i lo = mn ? S[2] : S[1];
	if (sb < 4)
		return _mm512_and_si512(_mm512_srli_epi32(lo, 8 * (unsigned)sb), m6);
	const unsigned s = 8 * (unsigned)(sb - 4);
	const __m512i l4 = _mm512_and_si512(_mm512_srli_epi32(S[3], s + (mn ? 4 : 0)), m4);
	const __m512i h2 = _mm512_and_si512(_mm512_srli_epi32(lo, s + 6), _mm512_set1_epi32(3));
	return _mm512_or_si512(l4, _mm512_slli_epi32(h2, 4));
}

static inline Q4_VNNI __m512i bcast4(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm512_set1_epi32(v);
}

/* every row's 32-block b against T (16 columns): two chains of 4 vpdpbusd
 * (exact integer sums: any order), then the specification's FMAs */
static inline Q4_VNNI void rows_vnni(const q4_job *jb, __m512 *acc, const __m512i T[8],
                                     __m512 dw, __m512 mw, int64_t b)
{
	const int64_t nb = jb->nb, k = jb->k, m = jb->m;
	const int8_t *a = jb->aq + b * QB;
	const float *da = jb->da + b, *sa = jb->sa + b;
	const int32_t *zas = jb->zas + b;
	const bool has_min = jb->has_min;
	for (int64_t i = 0; i < m; i++, a += k) {
		__m512i s0 = _mm512_dpbusd_epi32(_mm512_set1_epi32(zas[i * nb]), T[0], bcast4(a));
		__m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), T[4], bcast4(a + 16));
#pragma GCC unroll 3
		for (int x = 1; x < 4; x++) {
			s0 = _mm512_dpbusd_epi32(s0, T[x], bcast4(a + 4 * x));
			s1 = _mm512_dpbusd_epi32(s1, T[x + 4], bcast4(a + 16 + 4 * x));
		}
		const __m512 p = _mm512_mul_ps(_mm512_set1_ps(da[i * nb]), dw);
		__m512 r = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), p,
		                           b ? acc[i] : _mm512_setzero_ps());
		if (has_min)
			r = _mm512_fmadd_ps(mw, _mm512_set1_ps(sa[i * nb]), r);
		acc[i] = r;
	}
}

static inline Q4_VNNI __m512i q6_t512(__m512i L0, __m512i L1, __m512i H, int x)
{
	const __m512i l = x & 1 ? L1 : L0;
	const __m512i nib = _mm512_and_si512(x >= 2 ? _mm512_srli_epi16(l, 4) : l,
	                                     _mm512_set1_epi8(15));
	const __m512i hi = 2 * x <= 4 ? _mm512_slli_epi16(H, 4 - 2 * (unsigned)x)
	                              : _mm512_srli_epi16(H, 2);
	return _mm512_or_si512(nib, _mm512_and_si512(hi, _mm512_set1_epi8(0x30)));
}

static inline Q4_VNNI __m512i q6_sc512(const __m512i SC[4], int at)
{
	return _mm512_srai_epi32(_mm512_slli_epi32(SC[at / 4], 24 - 8 * (unsigned)(at % 4)), 24);
}

/* Q6_K, every row's 32-block b: each half's chain of 4 vpdpbusd from -32
 * asum, times its scale (vpmulld), summed: the specification's isum */
static inline Q4_VNNI void rows_q6_vnni(const q4_job *jb, __m512 *acc, const __m512i T[8],
                                        __m512i sc0, __m512i sc1, __m512 dw, int64_t b)
{
	const int64_t nb = jb->nb, k = jb->k, m = jb->m;
	const int8_t *a = jb->aq + b * QB;
	const int32_t *z = jb->zas + 2 * b;
	for (int64_t i = 0; i < m; i++, a += k, z += 2 * nb) {
		__m512i s0 = _mm512_dpbusd_epi32(_mm512_set1_epi32(z[0]), T[0], bcast4(a));
		__m512i s1 = _mm512_dpbusd_epi32(_mm512_set1_epi32(z[1]), T[4], bcast4(a + 16));
#pragma GCC unroll 3
		for (int x = 1; x < 4; x++) {
			s0 = _mm512_dpbusd_epi32(s0, T[x], bcast4(a + 4 * x));
			s1 = _mm512_dpbusd_epi32(s1, T[x + 4], bcast4(a + 16 + 4 * x));
		}
		const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(s0, sc0),
		                                      _mm512_mullo_epi32(s1, sc1));
		const __m512 p = _mm512_mul_ps(_mm512_set1_ps(jb->da[i * nb + b]), dw);
		acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), p, b ? acc[i] : _mm512_setzero_ps());
	}
}

/* AVX-512 Q6_K: as q6_group_avx2, 16 columns; d from the dword at 206
 * (a 16-byte load at 208 would pass the block's end) */
static Q4_VNNI void q6_group_vnni(const q4_job *jb, __m512 *acc, const char *const *rp)
{
	for (int64_t s = 0; s < jb->nb / 8; s++) {
		__m512i SC[4], DQ[4];
		tr4_512(SC, rp, 210 * s + 192);
		tr4_512(DQ, rp, 210 * s + 194);
		const __m512 dw = h2f_512(DQ[3], true);
		for (int n = 0; n < 2; n++) {
			__m512i L0[8], L1[8], H[8];
			tr8_512(L0, rp, 210 * s + 64 * n);
			tr8_512(L1, rp, 210 * s + 64 * n + 32);
			tr8_512(H, rp, 210 * s + 128 + 32 * n);
			for (int x = 0; x < 4; x++) {
				__m512i T[8];
#pragma GCC unroll 8
				for (int y = 0; y < 8; y++)
					T[y] = q6_t512(L0[y], L1[y], H[y], x);
				const int sb = 4 * n + x;
				rows_q6_vnni(jb, acc, T, q6_sc512(SC, 2 * sb), q6_sc512(SC, 2 * sb + 1), dw,
				             8 * s + sb);
			}
		}
	}
}

/* AVX-512 VNNI: groups of 16 columns, every row's accumulator in the part's
 * buffer (contiguous: C's rows are n floats apart) */
static Q4_VNNI void cols_vnni(const q4_job *jb, int64_t j0, int64_t j1, char *pack)
{
	const int64_t nb = jb->nb, m = jb->m, n = jb->n, bb = hg_gguf_block_bytes(jb->wtype);
	const int wt = jb->wtype;
	const __m512i m4 = _mm512_set1_epi8(15);
	const __m512i sign = _mm512_set1_epi32((int32_t)0x80000000u);
	__m512 *acc = (__m512 *)(void *)pack;
	const char *rp[16];
	for (int64_t j = j0; j < j1; j += 16) {
		const int nc = j1 - j < 16 ? (int)(j1 - j) : 16;
		const __mmask16 mk = (__mmask16)((1u << nc) - 1);
		group_rows(jb, j, nc, 16, rp, pack + 64 * m);
		if (wt == HG_GGUF_Q6_K) {
			q6_group_vnni(jb, acc, rp);
		} else if (wt == HG_GGUF_Q4_0 || wt == HG_GGUF_Q4_1) {
			const int64_t off = wt == HG_GGUF_Q4_0 ? 2 : 4;
			for (int64_t b = 0; b < nb; b++) {
				__m512i R[4], T[8];
				tr4_512(R, rp, b * bb + off);
#pragma GCC unroll 4
				for (int x = 0; x < 4; x++) {
					T[x] = _mm512_and_si512(R[x], m4);
					T[x + 4] = _mm512_and_si512(_mm512_srli_epi16(R[x], 4), m4);
				}
				const __m512i D = d0_512(rp, b * bb);
				rows_vnni(jb, acc, T, h2f_512(D, false),
				          wt == HG_GGUF_Q4_1 ? h2f_512(D, true) : _mm512_setzero_ps(), b);
			}
		} else {
			for (int64_t s = 0; s < nb / 8; s++) {
				__m512i S[4];
				tr4_512(S, rp, s * bb);
				const __m512 dd = h2f_512(S[0], false), dmin = h2f_512(S[0], true);
				for (int p = 0; p < 4; p++) {
					__m512i R[8], T[8];
					tr8_512(R, rp, s * bb + 16 + 32 * p);
					for (int h = 0; h < 2; h++) {
						const int sb = 2 * p + h;
#pragma GCC unroll 8
						for (int x = 0; x < 8; x++)
							T[x] = _mm512_and_si512(h ? _mm512_srli_epi16(R[x], 4) : R[x], m4);
						const __m512 dw = _mm512_mul_ps(
							dd, _mm512_cvtepi32_ps(k_scale_512(S, sb, false)));
						const __m512 mw = _mm512_castsi512_ps(_mm512_xor_si512(
							_mm512_castps_si512(_mm512_mul_ps(
								dmin, _mm512_cvtepi32_ps(k_scale_512(S, sb, true)))),
							sign));
						rows_vnni(jb, acc, T, dw, mw, 8 * s + sb);
					}
				}
			}
		}
		for (int64_t i = 0; i < m; i++)
			_mm512_mask_storeu_ps(jb->C + i * n + j, mk, acc[i]);
	}
}
#endif /* Q4_X86 */

/* ---- the call ---- */

static void run_part(void *ctx, int part, int n_parts)
{
	const q4_job *jb = ctx;
	const int64_t g0 = jb->n_groups * part / n_parts, g1 = jb->n_groups * (part + 1) / n_parts;
	const int64_t j0 = G * g0, j1 = G * g1 < jb->n ? G * g1 : jb->n;
	if (j0 < j1)
		jb->cols(jb, j0, j1, jb->pack + jb->part_bytes * (size_t)part);
}

int hg_gemm_gguf_a8(float *C, const uint16_t *A, const void *W, int64_t m, int64_t n, int64_t k,
                    int wtype, bool a_bf16, int path, int threads)
{
	if (wtype == HG_GGUF_Q8_0)
		return hg_gemm_q8a8(C, A, W, m, n, k, a_bf16, path, threads);
	const int64_t blk = hg_gguf_block(wtype);
	if (path == HG_PATH_AUTO)
		path = hg_i8_path_auto();
	if (!blk || !hg_i8_path_available(path) || m < 0 || n < 0 || k < 0 || k % blk)
		return SW_EINVAL;
	if (m == 0 || n == 0)
		return 0;
	if (k == 0) {
		memset(C, 0, sizeof(*C) * (size_t)(m * n));
		return 0;
	}
	const int64_t nb = k / QB, wrow = k / blk * hg_gguf_block_bytes(wtype);
	const int64_t n_groups = (n + G - 1) / G;
	const int64_t parts = hg_parts(threads, n_groups, 1 + (16384 / wrow) / G);
	/* aq (m k), the packs (one a part, 64-aligned), da, sa (m nb floats
	 * each), zas (m nb int32), the fp32 row (k) */
	const size_t q_bytes = ((size_t)(m * k) + 63) & ~(size_t)63;
	const size_t part_bytes = path == HG_PATH_PORTABLE ? Q4_PACK(nb)
	                          : 64 * (size_t)m + (((size_t)(G * wrow) + 63) & ~(size_t)63);
	const size_t pack_bytes = part_bytes * (size_t)parts; /* multiples of 64 */
	const size_t need = q_bytes + pack_bytes + sizeof(float) * (size_t)(4 * m * nb + k);
	char *s_buf = hg_thread_scratch(need);
	if (!s_buf)
		return SW_ENOMEM;
	int8_t *aq = (int8_t *)s_buf;
	char *pack = s_buf + q_bytes;
	float *da = (float *)(void *)(s_buf + q_bytes + pack_bytes), *sa = da + m * nb;
	int32_t *zas = (int32_t *)(void *)(sa + m * nb);
	float *xrow = (float *)(void *)(zas + 2 * m * nb);
	const int z = wtype == HG_GGUF_Q4_0 ? 8 : 0;
	const bool has_min = wtype != HG_GGUF_Q4_0 && wtype != HG_GGUF_Q6_K;
	hg_a8_quant((uint8_t *)aq, da, xrow, A, m, k, a_bf16, 0, path);
	for (int64_t i = 0; i < m * nb; i++) {
		int32_t s = 0;
		for (int t = 0; t < QB; t++)
			s += aq[i * QB + t];
		zas[i] = -z * s;
		sa[i] = da[i] * (float)s;
	}
	if (wtype == HG_GGUF_Q6_K) /* -32 asum a 16-element half */
		for (int64_t i = 0; i < 2 * m * nb; i++) {
			int32_t s = 0;
			for (int t = 0; t < QB / 2; t++)
				s += aq[i * QB / 2 + t];
			zas[i] = -32 * s;
		}
	q4_job jb = {.C = C, .aq = aq, .da = da, .zas = zas, .sa = sa, .W = W, .wtype = wtype,
	             .has_min = has_min, .m = m, .n = n, .k = k, .nb = nb, .wrow = wrow,
	             .n_groups = n_groups, .pack = pack, .part_bytes = part_bytes,
	             .cols = wtype == HG_GGUF_Q6_K ? cols_portable_q6k : cols_portable};
#if Q4_X86
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
