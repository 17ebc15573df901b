/* The file's GGUF blocks -> the gemv_gguf kernels' planes (wplanes.h).
 * Block sizes and the scale fields' places are the format table's
 * (core/wformat.h); where each type keeps its quants is ggml's block_*
 * structs (as core/wformat.c's dequantizers and the host GEMMs read them):
 * Q4_0 {d; qs[16]}, Q4_1 {d, m; qs[16]}, Q5_0 {d; qh[4]; qs[16]} (bit t of
 * qh: element t's bit 4), Q8_0 {d; qs[32]}, Q4_K {d, dmin,
 * scales[12]; qs[128]: 64 elements a 32 bytes, the first 32 in the low
 * nibbles}, Q6_K {ql[128]; qh[64]; scales[16]; d}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/wformat.h"
#include "device/host_pool.h"
#include "kernels/ref/ref.h"
#include "wplanes.h"

#define CHECK_PARTS 256

_Static_assert((int)REF_WT_Q4_0 == (int)SW_WT_Q4_0 && (int)REF_WT_Q4_1 == (int)SW_WT_Q4_1 &&
               (int)REF_WT_Q5_0 == (int)SW_WT_Q5_0 &&
               (int)REF_WT_Q8_0 == (int)SW_WT_Q8_0 && (int)REF_WT_Q4_K == (int)SW_WT_Q4_K &&
               (int)REF_WT_Q6_K == (int)SW_WT_Q6_K, "kernels/ref's weight types are ggml's numbers");

/* Q6_K element e (0..255) of a block: 6 bits (dequantize_row_q6_K's order) */
static int q6_elem(const uint8_t *blk, int e)
{
	const int h = e / 128, r = e % 128, l = r % 32, x = r / 32;
	const uint8_t ql = blk[64 * h + l + 32 * (x & 1)], qh = blk[128 + 32 * h + l];
	return (x >= 2 ? ql >> 4 : ql & 15) | ((qh >> (2 * x) & 3) << 4);
}

/* 32 4-bit values -> 16 bytes, element t low and t + 16 high in byte t */
static void put_nibbles(uint8_t *dst, const int *q)
{
	for (int t = 0; t < 16; t++)
		dst[t] = (uint8_t)((q[t] & 15) | (q[t + 16] & 15) << 4);
}

int rt_wplanes_repack(void *dst, const void *src, int wtype, int64_t n, int64_t k)
{
	int64_t off[REF_WPLANES];
	const sw_wformat *f = wtype >= 0 ? sw_wformat_get((uint32_t)wtype) : NULL;
	if (!f || ref_wplanes_layout(wtype, n, k, off) || (int64_t)f->block != ref_wplanes_block(wtype))
		return SW_EINVAL;
	uint8_t *out = dst;
	const uint8_t *in = src;
	const int64_t nbr = k / 32, per = f->block / 32, bpr = k / f->block; /* blocks a row */
	const int so = f->scale_off[0];
	for (int64_t r = 0; r < n; r++)
		for (int64_t c = 0; c < bpr; c++) {
			const uint8_t *blk = in + (r * bpr + c) * f->bytes;
			const int64_t s = r * bpr + c;           /* the file block (K-quants: super-block) */
			const int64_t b0 = c * per, i0 = r * nbr + b0; /* its first sub-block */
			switch (wtype) {
			case SW_WT_Q4_0:
			case SW_WT_Q4_1: {
				const int sb = wtype == SW_WT_Q4_0 ? 2 : 4; /* d, or d and m */
				memcpy(out + 16 * i0, blk + sb, 16);
				memcpy(out + off[1] + sb * i0, blk + so, (size_t)sb);
				break;
			}
			case SW_WT_Q5_0: { /* the high bits regrouped (ref.h: plane 2) */
				uint32_t qh, h = 0;
				memcpy(&qh, blk + 2, 4);
				for (int e = 0; e < 32; e++)
					h |= ((qh >> e) & 1u) << (8 * (e % 4) + 4 * (e / 16) + (e % 16) / 4);
				memcpy(out + 16 * i0, blk + 6, 16);
				memcpy(out + off[2] + 4 * i0, &h, 4);
				memcpy(out + off[1] + 2 * i0, blk + so, 2);
				break;
			}
			case SW_WT_Q8_0: {
				const int64_t g = b0 / 32, j = b0 % 32, u = nbr - 32 * g < 32 ? nbr - 32 * g : 32;
				uint8_t *row = out + r * nbr * 32 + 1024 * g;
				memcpy(row + 16 * j, blk + 2, 16);
				memcpy(row + 16 * u + 16 * j, blk + 18, 16);
				memcpy(out + off[1] + 2 * i0, blk + so, 2);
				break;
			}
			case SW_WT_Q4_K:
				memcpy(out + off[1] + 16 * s, blk, 16); /* d, dmin, scales[12] */
				for (int j = 0; j < 8; j++) {
					int q[32];
					for (int t = 0; t < 32; t++)
						q[t] = j % 2 ? blk[16 + 32 * (j / 2) + t] >> 4 : blk[16 + 32 * (j / 2) + t] & 15;
					put_nibbles(out + 16 * (i0 + j), q);
				}
				break;
			case SW_WT_Q6_K:
				memcpy(out + off[1] + 16 * s, blk + 192, 16); /* int8 scales[16] */
				memcpy(out + off[3] + 2 * s, blk + so, 2);    /* d */
				for (int j = 0; j < 8; j++) {
					int q[32];
					uint8_t *hb = out + off[2] + 8 * (i0 + j);
					for (int t = 0; t < 32; t++)
						q[t] = q6_elem(blk, 32 * j + t);
					put_nibbles(out + 16 * (i0 + j), q);
					memset(hb, 0, 8);
					for (int e = 0; e < 32; e++) /* word e / 16, byte e % 4, bits 2 ((e % 16) / 4) */
						hb[4 * (e / 16) + e % 4] |= (uint8_t)((q[e] >> 4) << (2 * ((e % 16) / 4)));
				}
				break;
			}
		}
	return 0;
}

/* Rows [r0, r1) of a check: the first whose planes and blocks differ (or
 * do not dequantize), or -1; a and b: k floats each. */
static int64_t first_bad_row(const void *planes, const void *src, const sw_wformat *f, int wtype,
                             int64_t n, int64_t k, int64_t r0, int64_t r1, float *a, float *b)
{
	const int64_t row_bytes = k / f->block * f->bytes;
	for (int64_t r = r0; r < r1; r++)
		if (ref_wplanes_dequant_row(a, planes, wtype, n, k, r) ||
		    sw_wformat_dequant((uint32_t)wtype, (const char *)src + r * row_bytes, (uint64_t)k, b) ||
		    memcmp(a, b, sizeof(*a) * (size_t)k))
			return r;
	return -1;
}

typedef struct check_job {
	const void *planes, *src;
	const sw_wformat *f;
	int wtype;
	int64_t n, k;
	int64_t bad[CHECK_PARTS]; /* each part's first bad row, -1, or -2: out of memory */
} check_job;

static void check_part(void *ctx, int part, int n_parts)
{
	check_job *j = ctx;
	const int64_t r0 = j->n * part / n_parts, r1 = j->n * (part + 1) / n_parts;
	float *a = malloc(sizeof(*a) * (size_t)(2 * j->k));
	j->bad[part] = a ? first_bad_row(j->planes, j->src, j->f, j->wtype, j->n, j->k, r0, r1, a,
	                                 a + j->k)
	                 : -2;
	free(a);
}

int rt_wplanes_check(const void *planes, const void *src, int wtype, int64_t n, int64_t k,
                     const char *what, sw_err *err)
{
	const sw_wformat *f = wtype >= 0 ? sw_wformat_get((uint32_t)wtype) : NULL;
	if (!f || !ref_wplanes_block(wtype) || k <= 0 || k % f->block)
		return sw_errf(err, SW_EINVAL, "%s: type %s has no planes", what, f ? f->name : "?");
	/* rows in parts over the host's thread pool: a check dequantizes the
	 * whole model twice (an 8B Q4_K_M file ~8 G elements) */
	check_job j = {.planes = planes, .src = src, .f = f, .wtype = wtype, .n = n, .k = k};
	int parts = hp_threads() * 2;
	parts = parts > CHECK_PARTS ? CHECK_PARTS : parts;
	parts = n < parts ? (int)(n > 0 ? n : 1) : parts;
	hp_run(check_part, &j, parts);
	int64_t bad = -1;
	for (int p = 0; p < parts; p++) {
		if (j.bad[p] == -2)
			return sw_errf(err, SW_ENOMEM, "out of memory checking %s", what);
		if (j.bad[p] >= 0 && (bad < 0 || j.bad[p] < bad))
			bad = j.bad[p];
	}
	if (bad < 0)
		return 0;
	/* the first bad row again, element by element, for the message */
	float *a = malloc(sizeof(*a) * (size_t)(2 * k));
	if (!a)
		return sw_errf(err, SW_ENOMEM, "out of memory checking %s", what);
	float *b = a + k;
	const int64_t row_bytes = k / f->block * f->bytes;
	int rc;
	if (ref_wplanes_dequant_row(a, planes, wtype, n, k, bad) ||
	    sw_wformat_dequant((uint32_t)wtype, (const char *)src + bad * row_bytes, (uint64_t)k, b)) {
		rc = sw_errf(err, SW_EINVAL, "%s: row %lld of %s: not dequantizable", what,
		             (long long)bad, f->name);
	} else {
		int64_t e = 0;
		while (e < k && !memcmp(&a[e], &b[e], sizeof(*a)))
			e++;
		rc = sw_errf(err, SW_EINVAL, "%s: the repacked %s planes give %.9g at row %lld, element "
		             "%lld, where the file's blocks give %.9g (the planes do not hold the file's "
		             "weights)", what, f->name, (double)a[e < k ? e : 0], (long long)bad,
		             (long long)e, (double)b[e < k ? e : 0]);
	}
	free(a);
	return rc;
}
