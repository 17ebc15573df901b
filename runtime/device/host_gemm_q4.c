/* The host GEMM on a GGUF file's own 4-bit weight blocks times int8
 * activations (host_gemm.h hg_gemm_gguf_a8): Q4_0, Q4_1 and Q4_K read as
 * the file stores them, never expanded to 16 bits in memory; Q8_0 is
 * hg_gemm_q8a8. The activations are quantized by hg_gemm_q8a8's rule
 * (hg_a8_quant, bias 0), so a Q8_0 and a Q4 layer see the same int8 inputs.
 *
 * Every type is read as 32-element sub-blocks w_t = d (q_t - z) + mn with q
 * unsigned 4-bit: Q4_0 z = 8, mn = 0; Q4_1 z = 0, mn = m; Q4_K z = 0, d =
 * d_super * sc_j, mn = -dmin * m_j (both exact in fp32: 11-bit times
 * 6-bit). Against the activation block (int8 a, scale da, exact sum asum):
 *   isum = sum q a - z asum                 (int32, exact)
 *   acc  = fmaf((float)isum, da * d, acc)   (da * d one rounding)
 *   acc  = fmaf(mn, da * (float)asum, acc)  (only where the type has mn)
 * over the 32-blocks in order from acc = 0: every path (portable, AVX2,
 * AVX-512 VNNI) computes exactly this, so they give the same bits at every
 * row count and thread count.
 *
 * Layout as host_gemm_i8.c's: a group of 16 columns is unpacked (nibbles to
 * bytes, scales to fp32) into a per-part buffer, then block by block
 * transposed in registers so that lanes are columns; the weights are the
 * unsigned operand of vpdpbusd / maddubs (0..15) and each row broadcasts
 * its signed bytes against them, so no bias correction is needed. */
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
	const int32_t *zas;  /* (m, nb) -z asum, the integer sum's start */
	const float *sa;     /* (m, nb) da * asum (types with mn) */
	const char *W;       /* (n, k) in wtype's blocks, rows wrow bytes apart */
	int wtype;
	bool has_min;
	int64_t m, n, k, nb, wrow, n_groups;
	char *pack;          /* Q4_PACK(nb) bytes for each part */
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
	case HG_GGUF_Q4_K: return 256;
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

#if Q4_X86
/* group_unpack's numbers for the vector paths, in registers: nibbles split
 * 16 or 32 bytes at a time, scales by vcvtph2ps (exact, as hg_to_f32); the
 * scalar unpack cost seven times the GEMM at one row */
static __attribute__((target("avx2,f16c"))) void unpack_rows_x86(const q4_job *jb, char *pack,
                                                                  int64_t j, int nc)
{
	const int64_t nb = jb->nb, bb = hg_gguf_block_bytes(jb->wtype);
	const int wt = jb->wtype;
	uint8_t *q = (uint8_t *)pack;
	float *d = (float *)(void *)(pack + (size_t)(G * nb * QB)), *mn = d + G * nb;
	const __m128i m4 = _mm_set1_epi8(15);
	const __m256i m4y = _mm256_set1_epi8(15);
	for (int c = 0; c < nc; c++) {
		const char *row = jb->W + (j + c) * jb->wrow;
		uint8_t *qc = q + c * nb * QB;
		if (wt == HG_GGUF_Q4_0 || wt == HG_GGUF_Q4_1) {
			const int off = wt == HG_GGUF_Q4_0 ? 2 : 4;
			for (int64_t b = 0; b < nb; b++) {
				const char *blk = row + b * bb;
				uint16_t h0, h1; /* fixed sizes: one load each, no store forwarding */
				memcpy(&h0, blk, sizeof(h0));
				memcpy(&h1, blk + 2, sizeof(h1));
				d[b * G + c] = _cvtsh_ss(h0);
				mn[b * G + c] = wt == HG_GGUF_Q4_1 ? _cvtsh_ss(h1) : 0.0f;
				const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(blk + off));
				_mm_storeu_si128((__m128i *)(void *)(qc + b * QB), _mm_and_si128(v, m4));
				_mm_storeu_si128((__m128i *)(void *)(qc + b * QB + 16),
				                 _mm_and_si128(_mm_srli_epi16(v, 4), m4));
			}
			continue;
		}
		for (int64_t b = 0; b < nb; b += 8) { /* Q4_K: 8 32-blocks a block */
			const uint8_t *blk = (const uint8_t *)row + b / 8 * bb, *sc = blk + 4;
			uint16_t h[2];
			memcpy(h, blk, sizeof(h));
			const float dd = _cvtsh_ss(h[0]), dmin = _cvtsh_ss(h[1]);
			for (int jj = 0; jj < 8; jj++) {
				const int s = jj < 4 ? sc[jj] & 63 : (sc[jj + 4] & 15) | ((sc[jj - 4] >> 6) << 4);
				const int mm = jj < 4 ? sc[jj + 4] & 63 : (sc[jj + 4] >> 4) | ((sc[jj] >> 6) << 4);
				d[(b + jj) * G + c] = dd * (float)s;
				mn[(b + jj) * G + c] = -(dmin * (float)mm);
			}
			for (int x = 0; x < 4; x++) {
				const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 16 + 32 * x));
				_mm256_storeu_si256((__m256i *)(void *)(qc + (b + 2 * x) * QB), _mm256_and_si256(v, m4y));
				_mm256_storeu_si256((__m256i *)(void *)(qc + (b + 2 * x + 1) * QB),
				                    _mm256_and_si256(_mm256_srli_epi16(v, 4), m4y));
			}
		}
	}
}
#endif

/* Columns [j, j + nc) of W unpacked into a group's pack; columns nc .. G - 1
 * zero (q 0, d 0, mn 0: finite, never stored). vec: the vector paths'
 * unpacker, the same numbers. */
static void group_unpack(const q4_job *jb, char *pack, int64_t j, int nc, bool vec)
{
	const int64_t nb = jb->nb, per = hg_gguf_block(jb->wtype) / QB;
	const int64_t bb = hg_gguf_block_bytes(jb->wtype);
	uint8_t *q = (uint8_t *)pack;
	float *d = (float *)(void *)(pack + (size_t)(G * nb * QB)), *mn = d + G * nb;
#if Q4_X86
	if (vec)
		unpack_rows_x86(jb, pack, j, nc);
	else
#endif
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
		group_unpack(jb, pack, j, nc, false);
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

#if Q4_X86
#define Q4_AVX2 __attribute__((target("avx2,fma,f16c")))
#define Q4_VNNI __attribute__((target("avx512f,avx512vnni,avx2,fma,f16c")))

/* 8 columns' 32-block b (columns c0 .. c0 + 7 of the pack) transposed:
 * T[x] lane c = dword x of column c0 + c's 32 bytes */
static inline Q4_AVX2 void tr8(__m256i T[8], const char *pack, int64_t nb, int64_t b, int c0)
{
	__m256i r[8], t[8], u[8];
	for (int c = 0; c < 8; c++)
		r[c] = _mm256_loadu_si256(
			(const __m256i *)(const void *)(pack + ((c0 + c) * nb + b) * QB));
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

/* AVX2: two halves of 8 columns; maddubs(w unsigned 0..15, a signed): pairs
 * at most 2 x 15 x 127, far from int16's saturation */
static Q4_AVX2 void cols_avx2(const q4_job *jb, int64_t j0, int64_t j1, char *pack)
{
	const __m256i ones16 = _mm256_set1_epi16(1);
	const int64_t nb = jb->nb;
	const float *d = (const float *)(const void *)(pack + (size_t)(G * nb * QB)), *mn = d + G * nb;
	for (int64_t j = j0; j < j1; j += G) {
		const int nc = j1 - j < G ? (int)(j1 - j) : G;
		group_unpack(jb, pack, j, nc, true);
		for (int h = 0; h * 8 < nc; h++) {
			const int hc = nc - 8 * h < 8 ? nc - 8 * h : 8;
			const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(hc),
			                                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
			for (int64_t b = 0; b < nb; b++) {
				__m256i T[8];
				tr8(T, pack, nb, b, 8 * h);
				const __m256 dw = _mm256_loadu_ps(d + b * G + 8 * h);
				const __m256 mw = _mm256_loadu_ps(mn + b * G + 8 * h);
				for (int64_t i = 0; i < jb->m; i++) {
					const int8_t *a = jb->aq + i * jb->k + b * QB;
					__m256i acc = _mm256_set1_epi32(jb->zas[i * nb + b]);
					for (int x = 0; x < 8; x++) {
						int32_t a4;
						memcpy(&a4, a + 4 * x, sizeof(a4));
						acc = _mm256_add_epi32(acc, _mm256_madd_epi16(
							_mm256_maddubs_epi16(T[x], _mm256_set1_epi32(a4)), ones16));
					}
					float *cr = jb->C + i * jb->n + j + 8 * h;
					const __m256 p = _mm256_mul_ps(_mm256_set1_ps(jb->da[i * nb + b]), dw);
					const __m256 prev = b ? _mm256_maskload_ps(cr, mask) : _mm256_setzero_ps();
					__m256 r = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), p, prev);
					if (jb->has_min)
						r = _mm256_fmadd_ps(mw, _mm256_set1_ps(jb->sa[i * nb + b]), r);
					_mm256_maskstore_ps(cr, mask, r);
				}
			}
		}
	}
}

/* 16 columns' 32-block b transposed: T[x] lane c = dword x of column c's
 * bytes (host_gemm_i8.c vnni_tr16's shuffle) */
static inline Q4_VNNI void tr16(__m512i T[8], const char *pack, int64_t nb, int64_t b)
{
	const __m512i ix_lo = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
	const __m512i ix_hi = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
	__m512i r[8], t[8], u[8];
#pragma GCC unroll 8
	for (int c = 0; c < 8; c++)
		r[c] = _mm512_inserti64x4(
			_mm512_castsi256_si512(_mm256_load_si256(
				(const __m256i *)(const void *)(pack + (c * nb + b) * QB))),
			_mm256_load_si256((const __m256i *)(const void *)(pack + ((c + 8) * nb + b) * QB)),
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
#pragma GCC unroll 4
	for (int x = 0; x < 4; x++) {
		T[x] = _mm512_permutex2var_epi64(u[x], ix_lo, u[x + 4]);
		T[x + 4] = _mm512_permutex2var_epi64(u[x], ix_hi, u[x + 4]);
	}
}

static inline Q4_VNNI __m512i bcast4(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm512_set1_epi32(v);
}

#define Q4_ROWS 64 /* rows a pass over a group: their accumulators on the stack */

static Q4_VNNI void cols_vnni(const q4_job *jb, int64_t j0, int64_t j1, char *pack)
{
	const int64_t nb = jb->nb, m = jb->m, k = jb->k, n = jb->n;
	const int8_t *const aq = jb->aq;
	const float *const da = jb->da, *const sa = jb->sa;
	const int32_t *const zas = jb->zas;
	const bool has_min = jb->has_min;
	const float *d = (const float *)(const void *)(pack + (size_t)(G * nb * QB)), *mn = d + G * nb;
	__m512 acc[Q4_ROWS];
	for (int64_t j = j0; j < j1; j += G) {
		const int nc = j1 - j < G ? (int)(j1 - j) : G;
		const __mmask16 mk = (__mmask16)((1u << nc) - 1);
		group_unpack(jb, pack, j, nc, true);
		for (int64_t i0 = 0; i0 < m; i0 += Q4_ROWS) {
			const int64_t mr = m - i0 < Q4_ROWS ? m - i0 : Q4_ROWS;
			for (int64_t b = 0; b < nb; b++) {
				__m512i T[8];
				tr16(T, pack, nb, b);
				const __m512 dw = _mm512_loadu_ps(d + b * G), mw = _mm512_loadu_ps(mn + b * G);
				const int8_t *a = aq + i0 * k + b * QB;
				const int64_t o = i0 * nb + b;
				for (int64_t i = 0; i < mr; i++, a += k) {
					__m512i s0 = _mm512_dpbusd_epi32(_mm512_set1_epi32(zas[o + i * nb]), T[0],
					                                 bcast4(a));
					__m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), T[4], bcast4(a + 16));
#pragma GCC unroll 3
					for (int x = 1; x < 4; x++) {
						s0 = _mm512_dpbusd_epi32(s0, T[x], bcast4(a + 4 * x));
						s1 = _mm512_dpbusd_epi32(s1, T[x + 4], bcast4(a + 16 + 4 * x));
					}
					const __m512 p = _mm512_mul_ps(_mm512_set1_ps(da[o + i * nb]), dw);
					__m512 r = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), p,
					                           b ? acc[i] : _mm512_setzero_ps());
					if (has_min)
						r = _mm512_fmadd_ps(mw, _mm512_set1_ps(sa[o + i * nb]), r);
					acc[i] = r;
				}
			}
			for (int64_t i = 0; i < mr; i++)
				_mm512_mask_storeu_ps(jb->C + (i0 + i) * n + j, mk, acc[i]);
		}
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
		jb->cols(jb, j0, j1, jb->pack + Q4_PACK(jb->nb) * (size_t)part);
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
	const size_t pack_bytes = (Q4_PACK(nb) * (size_t)parts + 63) & ~(size_t)63;
	const size_t need = q_bytes + pack_bytes + sizeof(float) * (size_t)(3 * m * nb + k);
	char *s_buf = hg_thread_scratch(need);
	if (!s_buf)
		return SW_ENOMEM;
	int8_t *aq = (int8_t *)s_buf;
	char *pack = s_buf + q_bytes;
	float *da = (float *)(void *)(s_buf + q_bytes + pack_bytes), *sa = da + m * nb;
	int32_t *zas = (int32_t *)(void *)(sa + m * nb);
	float *xrow = (float *)(void *)(zas + m * nb);
	const int z = wtype == HG_GGUF_Q4_0 ? 8 : 0;
	const bool has_min = wtype != HG_GGUF_Q4_0;
	hg_a8_quant((uint8_t *)aq, da, xrow, A, m, k, a_bf16, 0, path);
	for (int64_t i = 0; i < m * nb; i++) {
		int32_t s = 0;
		for (int t = 0; t < QB; t++)
			s += aq[i * QB + t];
		zas[i] = -z * s;
		sa[i] = da[i] * (float)s;
	}
	q4_job jb = {.C = C, .aq = aq, .da = da, .zas = zas, .sa = sa, .W = W, .wtype = wtype,
	             .has_min = has_min, .m = m, .n = n, .k = k, .nb = nb, .wrow = wrow,
	             .n_groups = n_groups, .pack = pack, .cols = cols_portable};
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
