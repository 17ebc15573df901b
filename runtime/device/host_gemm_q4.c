/* The host GEMM on a GGUF file's own 4-, 5- and 6-bit weight blocks times
 * int8 activations (host_gemm.h hg_gemm_gguf_a8): Q4_0, Q4_1, Q5_0, Q4_K and
 * Q6_K read as the file stores them, never expanded in memory; Q8_0 is
 * hg_gemm_q8a8.
 * The activations are quantized by hg_gemm_q8a8's rule (hg_a8_quant, bias
 * 0), so a Q8_0 and a Q4 layer see the same int8 inputs.
 *
 * The Q4 types are read as 32-element sub-blocks w_t = d (q_t - z) + mn
 * with q unsigned 4-bit: Q4_0 z = 8, mn = 0; Q4_1 z = 0, mn = m; Q4_K z =
 * 0, d = d_super * sc_j, mn = -dmin * m_j (both exact in fp32: 11-bit times
 * 6-bit); Q5_0 alike with q 5-bit, z = 16, mn = 0 (Gemma 3 270M's Q4_K_M
 * file keeps its rows of 640 in Q5_0: not whole K-quant super-blocks).
 * Against the activation block (int8 a, scale da, exact sum asum):
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
 * Layout: lanes are output columns, as in host_gemm_i8.c; the vector paths
 * (host_gemm_q4_x86.c) read each group's blocks as stored (a plain copy of
 * its rows) and split the nibbles in registers, no unpacked buffer; the
 * weights are the unsigned operand of vpdpbusd / maddubs (0..15, 0..63) and
 * each row broadcasts its signed bytes against them, so no bias correction
 * is needed. The portable path unpacks a group into a per-part buffer; Q5_0
 * takes it on every path (its numbers are the same; only slower). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "host_gemm.h"
#include "host_gemm_q4_job.h"
#include "host_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#define Q4_X86 1
#else
#define Q4_X86 0
#endif

#define G HG_Q4_G
#define QB HG_Q4_QB

/* A group unpacked: column c's q bytes for 32-block b at (c nb + b) 32, then
 * d[b G + c] and mn[b G + c] (fp32) */
#define Q4_PACK(nb) ((size_t)(nb) * (G * QB + 2 * G * sizeof(float)))

/* ---- the block formats (llama.cpp ggml-quants.c: block_q4_0, block_q4_1,
 * block_q4_K and get_scale_min_k4, block_q6_K) ---- */

/* The format table's row of a type this GEMM reads (repacked or not). */
static const sw_wformat *gemm_format(int wtype)
{
	if (wtype == HG_GGUF_Q4_0R || wtype == HG_GGUF_Q4_1R || wtype == HG_GGUF_Q8_0R)
		wtype &= ~HG_GGUF_REPACKED;
	const sw_wformat *f = wtype >= 0 ? sw_wformat_get((uint32_t)wtype) : NULL;
	return f && f->gemm_name ? f : NULL;
}

int64_t hg_gguf_block(int wtype)
{
	const sw_wformat *f = gemm_format(wtype);
	return f ? f->block : 0;
}

int64_t hg_gguf_block_bytes(int wtype)
{
	const sw_wformat *f = gemm_format(wtype);
	return f ? f->bytes : 0;
}

const char *hg_gguf_name(int wtype)
{
	switch (wtype) {
	case HG_GGUF_Q4_0R: return "q4_0r";
	case HG_GGUF_Q4_1R: return "q4_1r";
	case HG_GGUF_Q8_0R: return "q8_0r";
	}
	const sw_wformat *f = gemm_format(wtype);
	return f ? f->gemm_name : NULL;
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
	if (wtype == HG_GGUF_Q5_0) { /* d, qh[4] (bit t: element t's bit 4), qs[16] */
		uint32_t qh;
		memcpy(&qh, blk + 2, sizeof(qh));
		*d = h2f(blk);
		*mn = 0.0f;
		nib32(q, (const uint8_t *)blk + 6);
		for (int t = 0; t < 32; t++)
			q[t] |= (uint8_t)(((qh >> t) & 1) << 4);
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


/* ---- the repacked layout (host_gemm.h hg_gguf_repack) ----
 *
 * A whole group's block b is 16 bb bytes at (group offset) + 16 bb b: the
 * scale fields (sh bytes: Q4_1 16 dwords d | m << 16, Q4_0 16 fp16 d),
 * then dword x (0..3) of the 16 rows' nibble bytes as 4 vectors of 16
 * dwords. q4r_put and q4r_get are each other's inverse. */

/* block b of row c (0..15) of a group: file layout blk <-> repacked g */
static void q4r_put(char *g, const char *blk, int c, int64_t bb)
{
	const int sh = bb == 20 ? 64 : 32, fb = bb == 20 ? 4 : 2; /* scale bytes a row */
	memcpy(g + fb * c, blk, (size_t)fb);
	for (int x = 0; x < 4; x++)
		memcpy(g + sh + 64 * x + 4 * c, blk + fb + 4 * x, 4);
}

static void q4r_get(char *blk, const char *g, int c, int64_t bb)
{
	const int sh = bb == 20 ? 64 : 32, fb = bb == 20 ? 4 : 2;
	memcpy(blk, g + fb * c, (size_t)fb);
	for (int x = 0; x < 4; x++)
		memcpy(blk + fb + 4 * x, g + sh + 64 * x + 4 * c, 4);
}

int hg_gguf_repack(void *W, int64_t n, int64_t k, int wtype)
{
	if (wtype == HG_GGUF_Q8_0) { /* host_gemm_i8.c's layout */
		const int rc = hg_q8_repack(W, n, k);
		return rc < 0 ? rc : HG_GGUF_Q8_0R;
	}
	if ((wtype != HG_GGUF_Q4_0 && wtype != HG_GGUF_Q4_1) || n < 0 || k < 0 || k % QB)
		return SW_EINVAL;
	const int64_t bb = hg_gguf_block_bytes(wtype), nb = k / QB, wrow = nb * bb;
	char *tmp = malloc((size_t)(G * wrow) + 1);
	if (!tmp)
		return SW_ENOMEM;
	for (int64_t j = 0; j + G <= n; j += G) {
		char *g = (char *)W + j * wrow;
		memcpy(tmp, g, (size_t)(G * wrow));
		for (int c = 0; c < G; c++)
			for (int64_t b = 0; b < nb; b++)
				q4r_put(g + G * bb * b, tmp + c * wrow + b * bb, c, bb);
	}
	free(tmp);
	return wtype | HG_GGUF_REPACKED;
}

void hg_q4r_rows(const q4_job *jb, int64_t j, int nc, char *cp)
{
	const int64_t bb = hg_gguf_block_bytes(jb->wtype), wrow = jb->wrow, full = jb->n / G * G;
	for (int r = 0; r < nc; r++) {
		const int64_t row = j + r;
		char *dst = cp + r * wrow;
		if (row >= full) { /* past the whole groups: as the file has it */
			memcpy(dst, jb->W + row * wrow, (size_t)wrow);
			continue;
		}
		const char *g = jb->W + row / G * G * wrow;
		for (int64_t b = 0; b < jb->nb; b++)
			q4r_get(dst + b * bb, g + G * bb * b, (int)(row % G), bb);
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
	const int64_t full = jb->n / G * G; /* rows in whole groups */
	char rb[HG_Q4_QB];                  /* a repacked row's block restored */
	for (int c = 0; c < nc; c++) {
		const int64_t at = j + c;
		const char *row = jb->W + at * jb->wrow;
		for (int64_t b = 0; b < nb; b += per) {
			const char *blk = row + b / per * bb;
			if (jb->repacked && at < full) {
				q4r_get(rb, jb->W + at / G * G * jb->wrow + G * bb * b, (int)(at % G), bb);
				blk = rb;
			}
			unpack(jb->wtype, blk, q + (c * nb + b) * QB, QB, d + b * G + c, mn + b * G + c, G);
		}
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
	const bool repacked = wtype == HG_GGUF_Q4_0R || wtype == HG_GGUF_Q4_1R;
	if (repacked)
		wtype &= ~HG_GGUF_REPACKED;
	if (wtype == HG_GGUF_Q8_0)
		return hg_gemm_q8a8(C, A, W, m, n, k, a_bf16, path, threads);
	if (wtype == HG_GGUF_Q8_0R)
		return hg_gemm_q8a8r(C, A, W, m, n, k, a_bf16, path, threads);
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
	const bool portable = path == HG_PATH_PORTABLE || wtype == HG_GGUF_Q5_0;
	const size_t part_bytes = portable ? Q4_PACK(nb)
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
	const int z = wtype == HG_GGUF_Q4_0 ? 8 : wtype == HG_GGUF_Q5_0 ? 16 : 0;
	const bool has_min = wtype == HG_GGUF_Q4_1 || wtype == HG_GGUF_Q4_K;
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
	             .has_min = has_min, .repacked = repacked, .m = m, .n = n, .k = k, .nb = nb,
	             .wrow = wrow, .n_groups = n_groups, .pack = pack, .part_bytes = part_bytes,
	             .cols = wtype == HG_GGUF_Q6_K ? cols_portable_q6k : cols_portable};
#if Q4_X86
	if (path == HG_PATH_AVX2 && !portable)
		jb.cols = hg_q4_cols_avx2;
	else if (path == HG_PATH_AVX512 && !portable)
		jb.cols = hg_q4_cols_vnni;
#endif
	if (parts == 1)
		run_part(&jb, 0, 1);
	else
		hp_run(run_part, &jb, (int)parts);
	return 0;
}
