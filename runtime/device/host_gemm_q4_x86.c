/* The GGUF-type GEMM's vector paths (host_gemm_q4.c has the formats, the
 * portable path and the call; host_gemm.h the specification they meet bit
 * for bit): AVX2 and AVX-512 VNNI over Q4_0, Q4_1, Q4_K and Q6_K blocks as
 * the file stores them. x86 only; elsewhere this file is empty. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "host_gemm.h"
#include "host_gemm_q4_job.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define Q4_X86 1
#else
#define Q4_X86 0
#endif

#if Q4_X86
#define Q4_AVX2 __attribute__((target("avx2,fma,f16c")))
#define Q4_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma,f16c")))
/* the transposes and per-block helpers inlined whatever GCC's size
 * heuristics say: called out of line, their vectors went through the stack
 * (measured: tr15_512, tr8_512, tr4_512 were calls) */
#define Q4_INLINE inline __attribute__((always_inline))

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
	if (jb->repacked) /* restored to the file's layout (AVX2; AVX-512's last group) */
		hg_q4r_rows(jb, j, nc, cp);
	else
		memcpy(cp, jb->W + j * jb->wrow, (size_t)(nc * jb->wrow)); /* the rows are adjacent */
	for (int c = 0; c < g; c++)
		rp[c] = cp + (c < nc ? c : 0) * jb->wrow;
}

/* The weight stream: while a group is computed from its copy, the rows of
 * the group two ahead (Q4_PF_GROUPS) are prefetched into L2 a slice per
 * block, so the memory is busy under the arithmetic (the copies alone left
 * it idle there: from memory a GEMV took the time of its arithmetic plus a
 * plain read's). The group after this one is by then on its way, and its
 * copy reads L2. Measured on the decode's shapes (one thread, W from
 * memory, bench_gemm_gguf cold): one group ahead or into L1 helped less,
 * a burst at the group's start not at all. Only where bytes are read
 * from: the arithmetic and so every result bit is unchanged. */
#define Q4_PF_GROUPS 2

typedef struct q4_pf {
	const char *p;
	int64_t left, step; /* bytes still to prefetch, bytes a slice */
} q4_pf;

/* columns [j + Q4_PF_GROUPS g, + g) of the part's [.., j1), in `slices` */
static void pf_start(q4_pf *pf, const q4_job *jb, int64_t j, int64_t j1, int g, int64_t slices)
{
	const int64_t a = j + Q4_PF_GROUPS * g, e = a + g < j1 ? a + g : j1;
	pf->p = a < e ? jb->W + a * jb->wrow : jb->W; /* no pointer past W's end */
	pf->left = a < e ? (e - a) * jb->wrow : 0;
	pf->step = slices > 0 ? (pf->left + slices - 1) / slices : pf->left;
}

static inline void pf_slice(q4_pf *pf)
{
	const int64_t n = pf->step < pf->left ? pf->step : pf->left;
	for (int64_t q = 0; q < n; q += 64)
		_mm_prefetch(pf->p + q, _MM_HINT_T1);
	pf->p += n;
	pf->left -= n;
}

static Q4_INLINE Q4_AVX2 __m128i ld16(const char *p)
{
	return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* AVX2: R[x] lane c = dword x of the 16 bytes at rp[c] + off, 8 columns */
static Q4_INLINE Q4_AVX2 void tr4_256(__m256i R[4], const char *const *rp, int64_t off)
{
	__m256i v[4];
#pragma GCC unroll 4
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
static Q4_INLINE Q4_AVX2 __m256i d0_256(const char *const *rp, int64_t off)
{
	__m256i v[4];
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++)
		v[g] = _mm256_inserti128_si256(_mm256_castsi128_si256(ld16(rp[g] + off)),
		                               ld16(rp[g + 4] + off), 1);
	return _mm256_unpacklo_epi64(_mm256_unpacklo_epi32(v[0], v[1]),
	                             _mm256_unpacklo_epi32(v[2], v[3]));
}

/* AVX2: R[x] lane c = dword x of the 32 bytes at rp[c] + off (tr8's
 * shuffle) */
static Q4_INLINE Q4_AVX2 void tr8_256(__m256i T[8], const char *const *rp, int64_t off)
{
	__m256i r[8], t[8], u[8];
#pragma GCC unroll 8
	for (int c = 0; c < 8; c++)
		r[c] = _mm256_loadu_si256((const __m256i *)(const void *)(rp[c] + off));
#pragma GCC unroll 4
	for (int c = 0; c < 8; c += 2) {
		t[c] = _mm256_unpacklo_epi32(r[c], r[c + 1]);
		t[c + 1] = _mm256_unpackhi_epi32(r[c], r[c + 1]);
	}
#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
		u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
		u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
	}
#pragma GCC unroll 4
	for (int x = 0; x < 4; x++) {
		T[x] = _mm256_permute2x128_si256(u[x], u[x + 4], 0x20);
		T[x + 4] = _mm256_permute2x128_si256(u[x], u[x + 4], 0x31);
	}
}

/* fp16 in the low (hi: high) half of each dword -> fp32 (exact) */
static Q4_INLINE Q4_AVX2 __m256 h2f_256(__m256i v, bool hi)
{
	v = hi ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xffff));
	v = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
	return _mm256_cvtph_ps(_mm256_castsi256_si128(v));
}

/* Q4_K's 6-bit scale (mn: min) of sub-block sb from the transposed scale
 * dwords S[1..3] (bytes 0..3, 4..7, 8..11 of scales[12]) */
static Q4_INLINE Q4_AVX2 __m256i k_scale_256(const __m256i S[4], int sb, bool mn)
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
static Q4_INLINE Q4_AVX2 void rows_avx2(const q4_job *jb, __m256 *acc, const __m256i T[8],
                                     __m256 dw, __m256 mw, int64_t b)
{
	const __m256i ones16 = _mm256_set1_epi16(1);
	const int64_t nb = jb->nb, k = jb->k;
	const int8_t *a = jb->aq + b * HG_Q4_QB;
	for (int64_t i = 0; i < jb->m; i++, a += k) {
		__m256i s16 = _mm256_setzero_si256();
#pragma GCC unroll 8
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
static Q4_INLINE Q4_AVX2 __m256i q6_t256(__m256i L0, __m256i L1, __m256i H, int x)
{
	const __m256i l = x & 1 ? L1 : L0;
	const __m256i nib = _mm256_and_si256(x >= 2 ? _mm256_srli_epi16(l, 4) : l,
	                                     _mm256_set1_epi8(15));
	const __m256i hi = 2 * x <= 4 ? _mm256_slli_epi16(H, 4 - 2 * x) : _mm256_srli_epi16(H, 2);
	return _mm256_or_si256(nib, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
}

/* int8 scale byte `at` (0..15) of the transposed scales SC, sign-extended */
static Q4_INLINE Q4_AVX2 __m256i q6_sc256(const __m256i SC[4], int at)
{
	return _mm256_srai_epi32(_mm256_slli_epi32(SC[at / 4], 24 - 8 * (at % 4)), 24);
}

/* Q6_K, every row's 32-block b against T (q 0..63): a maddubs pair at most
 * 2 x 63 x 127 = 16002, two summed in int16, then madd against the half's
 * scale (in both 16-bit halves of each dword: scale times the pair's sum,
 * int32, exact), and the -32 asum term times the scale */
static Q4_INLINE Q4_AVX2 void rows_q6_avx2(const q4_job *jb, __m256 *acc, const __m256i T[8],
                                        __m256i sc0, __m256i sc1, __m256 dw, int64_t b)
{
	const int64_t nb = jb->nb, k = jb->k;
	const int8_t *a = jb->aq + b * HG_Q4_QB;
	const __m256i lo16 = _mm256_set1_epi32(0xffff);
	const __m256i w0 = _mm256_or_si256(_mm256_and_si256(sc0, lo16), _mm256_slli_epi32(sc0, 16));
	const __m256i w1 = _mm256_or_si256(_mm256_and_si256(sc1, lo16), _mm256_slli_epi32(sc1, 16));
	for (int64_t i = 0; i < jb->m; i++, a += k) {
		__m256i p[4];
#pragma GCC unroll 4
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
#pragma GCC unroll 2
		for (int n = 0; n < 2; n++) {
			__m256i L0[8], L1[8], H[8];
			tr8_256(L0, rp, 210 * s + 64 * n);
			tr8_256(L1, rp, 210 * s + 64 * n + 32);
			tr8_256(H, rp, 210 * s + 128 + 32 * n);
#pragma GCC unroll 4
			for (int x = 0; x < 4; x++) {
				__m256i T[8];
#pragma GCC unroll 8
				for (int y = 0; y < 8; y++)
					T[y] = q6_t256(L0[y], L1[y], H[y], x);
				const int sb = 4 * n + x;
				rows_q6_avx2(jb, acc, T, q6_sc256(SC, 2 * sb), q6_sc256(SC, 2 * sb + 1), dw,
				             8 * s + sb);
			}
		}
	}
}

/* AVX2: groups of 8 columns, every row's accumulator in the part's buffer */
Q4_AVX2 void hg_q4_cols_avx2(const q4_job *jb, int64_t j0, int64_t j1, char *pack)
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
#pragma GCC unroll 4
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
#pragma GCC unroll 4
				for (int p = 0; p < 4; p++) {
					__m256i R[8], T[8];
					tr8_256(R, rp, s * bb + 16 + 32 * p);
#pragma GCC unroll 2
					for (int h = 0; h < 2; h++) {
						const int sb = 2 * p + h;
#pragma GCC unroll 8
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
static Q4_INLINE Q4_VNNI __m512i ld4_512(const char *const *rp, int g, int64_t off)
{
	__m512i v = _mm512_castsi128_si512(ld16(rp[g] + off));
	v = _mm512_inserti32x4(v, ld16(rp[g + 4] + off), 1);
	v = _mm512_inserti32x4(v, ld16(rp[g + 8] + off), 2);
	return _mm512_inserti32x4(v, ld16(rp[g + 12] + off), 3);
}

/* AVX-512: R[x] lane c = dword x of the 16 bytes at rp[c] + off */
static Q4_INLINE Q4_VNNI void tr4_512(__m512i R[4], const char *const *rp, int64_t off)
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
static Q4_INLINE Q4_VNNI __m512i d0_512(const char *const *rp, int64_t off)
{
	const __m512i v0 = ld4_512(rp, 0, off), v1 = ld4_512(rp, 1, off);
	const __m512i v2 = ld4_512(rp, 2, off), v3 = ld4_512(rp, 3, off);
	return _mm512_unpacklo_epi64(_mm512_unpacklo_epi32(v0, v1), _mm512_unpacklo_epi32(v2, v3));
}

/* AVX-512: R[x] lane c = dword x of the 32 bytes at rp[c] + off (tr16's
 * shuffle: column c in the low half of zmm c, column c + 8 in its high) */
static Q4_INLINE Q4_VNNI void tr8_512(__m512i T[8], const char *const *rp, int64_t off)
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

/* AVX-512: O[x] lane c = dword x (0..14) of the 60 bytes at rp[c] + off:
 * three Q4_1 blocks of 16 columns, scales and nibbles, from one 64-byte
 * load a column (masked to 60: nothing read past the third block) and a
 * 16 x 16 dword transpose (64 shuffles, 21 a block, where tr4_512 and
 * d0_512 take 35 a block from 16-byte pieces) */
static Q4_INLINE Q4_VNNI void tr15_512(__m512i O[16], const char *const *rp, int64_t off)
{
	__m512i r[16], t[16], u[16];
#pragma GCC unroll 16
	for (int c = 0; c < 16; c++)
		r[c] = _mm512_maskz_loadu_epi32((__mmask16)0x7fff, rp[c] + off);
	/* in each 128-bit lane L: t[2i] dwords 4L, 4L + 1 of columns 2i, 2i + 1
	 * interleaved, t[2i + 1] dwords 4L + 2, 4L + 3 */
#pragma GCC unroll 8
	for (int c = 0; c < 16; c += 2) {
		t[c] = _mm512_unpacklo_epi32(r[c], r[c + 1]);
		t[c + 1] = _mm512_unpackhi_epi32(r[c], r[c + 1]);
	}
	/* u[4 g + x], lane L: dword 4L + x of columns 4g .. 4g + 3 */
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
		u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
		u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
		u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
		u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
	}
	/* O[4L + x]: lane L of u[x], u[4 + x], u[8 + x], u[12 + x] */
#pragma GCC unroll 4
	for (int x = 0; x < 4; x++) {
		const __m512i a_lo = _mm512_shuffle_i32x4(u[x], u[4 + x], 0x44);
		const __m512i a_hi = _mm512_shuffle_i32x4(u[x], u[4 + x], 0xee);
		const __m512i b_lo = _mm512_shuffle_i32x4(u[8 + x], u[12 + x], 0x44);
		const __m512i b_hi = _mm512_shuffle_i32x4(u[8 + x], u[12 + x], 0xee);
		O[x] = _mm512_shuffle_i32x4(a_lo, b_lo, 0x88);
		O[4 + x] = _mm512_shuffle_i32x4(a_lo, b_lo, 0xdd);
		O[8 + x] = _mm512_shuffle_i32x4(a_hi, b_hi, 0x88);
		O[12 + x] = _mm512_shuffle_i32x4(a_hi, b_hi, 0xdd);
	}
}

static Q4_INLINE Q4_VNNI __m512 h2f_512(__m512i v, bool hi)
{
	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(hi ? _mm512_srli_epi32(v, 16) : v));
}

static Q4_INLINE Q4_VNNI __m512i k_scale_512(const __m512i S[4], int sb, bool mn)
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

static Q4_INLINE Q4_VNNI __m512i bcast4(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm512_set1_epi32(v);
}

/* every row's 32-block b against T (16 columns): two chains of 4 vpdpbusd
 * (exact integer sums: any order), then the specification's FMAs. acc[i]
 * starts at +0 (as `b ? acc : 0` did: fmaf(x, p, +0) is its first FMA). */
#define Q4_ROWS_BODY                                                                      \
	{                                                                                     \
		const int8_t *ai = a + i * k;                                                     \
		__m512i s0 = _mm512_dpbusd_epi32(_mm512_set1_epi32(zas[i * nb]), T[0], bcast4(ai)); \
		__m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), T[4], bcast4(ai + 16));  \
		_Pragma("GCC unroll 3") for (int x = 1; x < 4; x++) {                             \
			s0 = _mm512_dpbusd_epi32(s0, T[x], bcast4(ai + 4 * x));                       \
			s1 = _mm512_dpbusd_epi32(s1, T[x + 4], bcast4(ai + 16 + 4 * x));              \
		}                                                                                 \
		const __m512 p = _mm512_mul_ps(_mm512_set1_ps(da[i * nb]), dw);                   \
		__m512 r = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), p, acc[i]); \
		if (has_min)                                                                      \
			r = _mm512_fmadd_ps(mw, _mm512_set1_ps(sa[i * nb]), r);                       \
		acc[i] = r;                                                                       \
	}

/* tile: m a constant up to Q4_MAXR, the loop unrolled so that acc stays in
 * registers; else a run-time m (unrolled, that loop measured 5% slower on
 * Q4_K) */
static Q4_INLINE Q4_VNNI void rows_vnni(const q4_job *jb, __m512 *acc, const int64_t m,
                                     const bool tile, const __m512i T[8], __m512 dw,
                                     __m512 mw, int64_t b)
{
	const int64_t nb = jb->nb, k = jb->k;
	const int8_t *a = jb->aq + b * HG_Q4_QB;
	const float *da = jb->da + b, *sa = jb->sa + b;
	const int32_t *zas = jb->zas + b;
	const bool has_min = jb->has_min;
	if (tile) {
#pragma GCC unroll 8
		for (int64_t i = 0; i < m; i++)
			Q4_ROWS_BODY
	} else {
		for (int64_t i = 0; i < m; i++)
			Q4_ROWS_BODY
	}
}

/* Q4_1, one row (the decode's GEMV): rows_vnni's arithmetic, bit for bit,
 * with the accumulator in a register (through the part's buffer, each
 * block's FMAs waited on a store and a load) and three blocks a transpose */
static Q4_VNNI __m512 q41_group_m1_vnni(const q4_job *jb, const char *const *rp, q4_pf *pf)
{
	const int64_t nb = jb->nb, bb = 20;
	const __m512i m4 = _mm512_set1_epi8(15);
	const int8_t *a = jb->aq;
	__m512 acc = _mm512_setzero_ps();
	int64_t b = 0;
	for (; b + 3 <= nb; b += 3) {
		__m512i O[16];
		tr15_512(O, rp, b * bb);
		pf_slice(pf);
		pf_slice(pf);
		pf_slice(pf);
#pragma GCC unroll 3
		for (int t3 = 0; t3 < 3; t3++) {
			const int64_t bt = b + t3;
			const int8_t *ab = a + bt * HG_Q4_QB;
			__m512i s0 = _mm512_set1_epi32(jb->zas[bt]), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
			for (int x = 0; x < 4; x++) {
				const __m512i R = O[5 * t3 + 1 + x];
				s0 = _mm512_dpbusd_epi32(s0, _mm512_and_si512(R, m4), bcast4(ab + 4 * x));
				s1 = _mm512_dpbusd_epi32(s1, _mm512_and_si512(_mm512_srli_epi16(R, 4), m4),
				                         bcast4(ab + 16 + 4 * x));
			}
			const __m512 p = _mm512_mul_ps(_mm512_set1_ps(jb->da[bt]), h2f_512(O[5 * t3], false));
			acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), p, acc);
			acc = _mm512_fmadd_ps(h2f_512(O[5 * t3], true), _mm512_set1_ps(jb->sa[bt]), acc);
		}
	}
	for (; b < nb; b++) {
		__m512i R[4], T[8];
		pf_slice(pf);
		tr4_512(R, rp, b * bb + 4);
#pragma GCC unroll 4
		for (int x = 0; x < 4; x++) {
			T[x] = _mm512_and_si512(R[x], m4);
			T[x + 4] = _mm512_and_si512(_mm512_srli_epi16(R[x], 4), m4);
		}
		const __m512i D = d0_512(rp, b * bb);
		__m512 r[1] = {acc};
		rows_vnni(jb, r, 1, true, T, h2f_512(D, false), h2f_512(D, true), b);
		acc = r[0];
	}
	return acc;
}

static Q4_INLINE Q4_VNNI __m512i q6_t512(__m512i L0, __m512i L1, __m512i H, int x)
{
	const __m512i l = x & 1 ? L1 : L0;
	const __m512i nib = _mm512_and_si512(x >= 2 ? _mm512_srli_epi16(l, 4) : l,
	                                     _mm512_set1_epi8(15));
	const __m512i hi = 2 * x <= 4 ? _mm512_slli_epi16(H, 4 - 2 * (unsigned)x)
	                              : _mm512_srli_epi16(H, 2);
	return _mm512_or_si512(nib, _mm512_and_si512(hi, _mm512_set1_epi8(0x30)));
}

static Q4_INLINE Q4_VNNI __m512i q6_sc512(const __m512i SC[4], int at)
{
	return _mm512_srai_epi32(_mm512_slli_epi32(SC[at / 4], 24 - 8 * (unsigned)(at % 4)), 24);
}

/* Q6_K, every row's 32-block b: each half's chain of 4 vpdpbusd from -32
 * asum, times its scale (vpmulld), summed: the specification's isum (acc
 * and m as rows_vnni's) */
static Q4_INLINE Q4_VNNI void rows_q6_vnni(const q4_job *jb, __m512 *acc, const int64_t m,
                                        const __m512i T[8], __m512i sc0, __m512i sc1,
                                        __m512 dw, int64_t b)
{
	const int64_t nb = jb->nb, k = jb->k;
	const int8_t *a = jb->aq + b * HG_Q4_QB;
	const int32_t *z = jb->zas + 2 * b;
#pragma GCC unroll 8
	for (int64_t i = 0; i < m; i++) {
		const int8_t *ai = a + i * k;
		const int32_t *zi = z + i * 2 * nb;
		__m512i s0 = _mm512_dpbusd_epi32(_mm512_set1_epi32(zi[0]), T[0], bcast4(ai));
		__m512i s1 = _mm512_dpbusd_epi32(_mm512_set1_epi32(zi[1]), T[4], bcast4(ai + 16));
#pragma GCC unroll 3
		for (int x = 1; x < 4; x++) {
			s0 = _mm512_dpbusd_epi32(s0, T[x], bcast4(ai + 4 * x));
			s1 = _mm512_dpbusd_epi32(s1, T[x + 4], bcast4(ai + 16 + 4 * x));
		}
		const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(s0, sc0),
		                                      _mm512_mullo_epi32(s1, sc1));
		const __m512 p = _mm512_mul_ps(_mm512_set1_ps(jb->da[i * nb + b]), dw);
		acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), p, acc[i]);
	}
}

/* AVX-512 Q6_K: as q6_group_avx2, 16 columns; d from the dword at 206
 * (a 16-byte load at 208 would pass the block's end) */
static Q4_VNNI void q6_group_vnni(const q4_job *jb, __m512 *acc, const int64_t m,
                                  const char *const *rp, q4_pf *pf)
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
				pf_slice(pf);
				rows_q6_vnni(jb, acc, m, T, q6_sc512(SC, 2 * sb), q6_sc512(SC, 2 * sb + 1), dw,
				             8 * s + sb);
			}
		}
	}
}

/* AVX-512 VNNI, Q4_0 and Q4_1 (three blocks a transpose): one group's
 * blocks (columns rp[]) for m rows into acc[0 .. m), which start at +0 (as
 * `b ? acc : 0` did: fmaf(x, p, +0) is the first FMA). Inlined with m a
 * constant up to Q4_MAXR (acc in registers: the rows' FMAs wait on no
 * store and load; each block's transpose and nibble split is shared by the
 * tile's rows, which add only their vpdpbusd and FMAs) and in group_vnni
 * with a run-time m (acc in the part's buffer) */
static Q4_INLINE Q4_VNNI void group_q4_vnni(const q4_job *jb, __m512 *acc, const int64_t m,
                                            const bool tile, const char *const *rp, q4_pf *pf)
{
	const int64_t nb = jb->nb, bb = hg_gguf_block_bytes(jb->wtype);
	const int wt = jb->wtype;
	const __m512i m4 = _mm512_set1_epi8(15);
#pragma GCC unroll 8
	for (int64_t i = 0; i < m; i++)
		acc[i] = _mm512_setzero_ps();
	const int64_t off = wt == HG_GGUF_Q4_0 ? 2 : 4;
	int64_t b = 0;
	if (wt == HG_GGUF_Q4_1) /* three blocks at a time (tr15_512) */
		for (; b + 3 <= nb; b += 3) {
			__m512i O[16];
			tr15_512(O, rp, b * bb);
#pragma GCC unroll 3
			for (int t3 = 0; t3 < 3; t3++) {
				__m512i T[8];
				pf_slice(pf);
#pragma GCC unroll 4
				for (int x = 0; x < 4; x++) {
					T[x] = _mm512_and_si512(O[5 * t3 + 1 + x], m4);
					T[x + 4] = _mm512_and_si512(
						_mm512_srli_epi16(O[5 * t3 + 1 + x], 4), m4);
				}
				rows_vnni(jb, acc, m, tile, T, h2f_512(O[5 * t3], false),
				          h2f_512(O[5 * t3], true), b + t3);
			}
		}
	for (; b < nb; b++) {
		__m512i R[4], T[8];
		pf_slice(pf);
		tr4_512(R, rp, b * bb + off);
#pragma GCC unroll 4
		for (int x = 0; x < 4; x++) {
			T[x] = _mm512_and_si512(R[x], m4);
			T[x + 4] = _mm512_and_si512(_mm512_srli_epi16(R[x], 4), m4);
		}
		const __m512i D = d0_512(rp, b * bb);
		rows_vnni(jb, acc, m, tile, T, h2f_512(D, false),
		          wt == HG_GGUF_Q4_1 ? h2f_512(D, true) : _mm512_setzero_ps(), b);
	}
}

/* AVX-512 VNNI, Q4_0 and Q4_1 repacked (host_gemm.h hg_gguf_repack): a
 * whole group's blocks read in place at gp, one after another (one
 * stream, no copy, no transpose): per block the scale vector and the 4
 * nibble vectors, split as group_q4_vnni splits its transposes' output,
 * and rows_vnni's arithmetic, so the same bits */
static Q4_INLINE Q4_VNNI void group_q4r_vnni(const q4_job *jb, __m512 *acc, const int64_t m,
                                             const bool tile, const char *gp, q4_pf *pf)
{
	const int64_t nb = jb->nb;
	const bool q41 = jb->wtype == HG_GGUF_Q4_1;
	const int64_t cb = q41 ? 320 : 288, sh = q41 ? 64 : 32; /* 16 blocks; scale bytes */
	const __m512i m4 = _mm512_set1_epi8(15);
#pragma GCC unroll 8
	for (int64_t i = 0; i < m; i++)
		acc[i] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++, gp += cb) {
		__m512i T[8];
		pf_slice(pf);
#pragma GCC unroll 4
		for (int x = 0; x < 4; x++) {
			const __m512i R = _mm512_loadu_si512((const void *)(gp + sh + 64 * x));
			T[x] = _mm512_and_si512(R, m4);
			T[x + 4] = _mm512_and_si512(_mm512_srli_epi16(R, 4), m4);
		}
		if (q41) {
			const __m512i D = _mm512_loadu_si512((const void *)gp);
			rows_vnni(jb, acc, m, tile, T, h2f_512(D, false), h2f_512(D, true), b);
		} else {
			const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)gp));
			rows_vnni(jb, acc, m, tile, T, dw, _mm512_setzero_ps(), b);
		}
	}
}

/* AVX-512 VNNI, one group's blocks for a run-time m (acc in the part's
 * buffer): Q4_0 and Q4_1 (group_q4_vnni), Q6_K, Q4_K */
static Q4_INLINE Q4_VNNI void group_vnni(const q4_job *jb, __m512 *acc, const int64_t m,
                                         const char *const *rp, q4_pf *pf)
{
	const int64_t nb = jb->nb, bb = hg_gguf_block_bytes(jb->wtype);
	const int wt = jb->wtype;
	const __m512i m4 = _mm512_set1_epi8(15);
	const __m512i sign = _mm512_set1_epi32((int32_t)0x80000000u);
#pragma GCC unroll 8
	for (int64_t i = 0; i < m; i++)
		acc[i] = _mm512_setzero_ps();
	if (wt == HG_GGUF_Q6_K) {
		q6_group_vnni(jb, acc, m, rp, pf);
	} else if (wt == HG_GGUF_Q4_0 || wt == HG_GGUF_Q4_1) {
		group_q4_vnni(jb, acc, m, false, rp, pf);
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
					pf_slice(pf);
					rows_vnni(jb, acc, m, false, T, dw, mw, 8 * s + sb);
				}
			}
		}
	}
}

/* row counts up to Q4_MAXR (a chain verify of up to 7 drafted tokens, the
 * decode) keep their accumulators in registers (group_vnni with m a
 * constant); more rows go through the part's buffer */
#define Q4_MAXR 8

/* group_vnni's register tile of M rows, then the group's M rows of C */
#define Q4_TILE(M)                                                                 \
	case M: {                                                                      \
		__m512 a[M];                                                               \
		if (gp)                                                                    \
			group_q4r_vnni(jb, a, M, true, gp, &pf);                               \
		else                                                                       \
			group_q4_vnni(jb, a, M, true, rp, &pf);                                \
		_Pragma("GCC unroll 8") for (int i = 0; i < M; i++)                        \
			_mm512_mask_storeu_ps(jb->C + i * n + j, mk, a[i]);                     \
		break;                                                                     \
	}

/* AVX-512 VNNI: groups of 16 columns, each group's rows at once (C's rows
 * are n floats apart; beyond Q4_MAXR rows their accumulators are
 * contiguous in the part's buffer) */
Q4_VNNI void hg_q4_cols_vnni(const q4_job *jb, int64_t j0, int64_t j1, char *pack)
{
	const int64_t nb = jb->nb, m = jb->m, n = jb->n;
	const int wt = jb->wtype;
	__m512 *acc = (__m512 *)(void *)pack;
	const char *rp[16];
	q4_pf pf;
	for (int64_t j = j0; j < j1; j += 16) {
		const int nc = j1 - j < 16 ? (int)(j1 - j) : 16;
		const __mmask16 mk = (__mmask16)((1u << nc) - 1);
		/* a repacked whole group is read in place (j is a multiple of 16:
		 * the parts split at groups) */
		const char *gp = jb->repacked && nc == 16 ? jb->W + j * jb->wrow : NULL;
		if (!gp)
			group_rows(jb, j, nc, 16, rp, pack + 64 * m);
		pf_start(&pf, jb, j, j1, 16, nb);
		if (wt == HG_GGUF_Q4_1 && m == 1 && !gp) {
			_mm512_mask_storeu_ps(jb->C + j, mk, q41_group_m1_vnni(jb, rp, &pf));
			continue;
		}
		/* Q4_K's and Q6_K's blocks hold more vectors live (scales, two or
		 * three transposed 32-byte runs): a register tile spilled there
		 * and measured slower (Q4_K 1536 x 512, 7 rows: 53 -> 69 us) */
		switch (wt == HG_GGUF_Q4_0 || wt == HG_GGUF_Q4_1 ? m : 0) {
		Q4_TILE(1)
		Q4_TILE(2)
		Q4_TILE(3)
		Q4_TILE(4)
		Q4_TILE(5)
		Q4_TILE(6)
		Q4_TILE(7)
		Q4_TILE(8)
		default:
			if (gp)
				group_q4r_vnni(jb, acc, m, false, gp, &pf);
			else
				group_vnni(jb, acc, m, rp, &pf);
			for (int64_t i = 0; i < m; i++)
				_mm512_mask_storeu_ps(jb->C + i * n + j, mk, acc[i]);
		}
	}
}
#endif /* Q4_X86 */
