/* The file's GGUF blocks -> the gemv_gguf kernels' planes (wplanes.h).
 * Block sizes and the scale fields' places are the format table's
 * (core/wformat.h); where each type keeps its quants is ggml's block_*
 * structs (as core/wformat.c's dequantizers and the host GEMMs read them):
 * Q4_0 {d; qs[16]}, Q4_1 {d, m; qs[16]}, Q8_0 {d; qs[32]}, Q4_K {d, dmin,
 * scales[12]; qs[128]: 64 elements a 32 bytes, the first 32 in the low
 * nibbles}, Q6_K {ql[128]; qh[64]; scales[16]; d}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/wformat.h"
#include "kernels/ref/ref.h"
#include "wplanes.h"

_Static_assert((int)REF_WT_Q4_0 == (int)SW_WT_Q4_0 && (int)REF_WT_Q4_1 == (int)SW_WT_Q4_1 &&
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

int rt_wplanes_check(const void *planes, const void *src, int wtype, int64_t n, int64_t k,
                     const char *what, sw_err *err)
{
	const sw_wformat *f = wtype >= 0 ? sw_wformat_get((uint32_t)wtype) : NULL;
	if (!f || !ref_wplanes_block(wtype) || k % f->block)
		return sw_errf(err, SW_EINVAL, "%s: type %s has no planes", what, f ? f->name : "?");
	float *a = malloc(sizeof(*a) * (size_t)(k > 0 ? 2 * k : 1));
	if (!a)
		return sw_errf(err, SW_ENOMEM, "out of memory checking %s", what);
	float *b = a + k;
	const int64_t row_bytes = k / f->block * f->bytes;
	int rc = 0;
	for (int64_t r = 0; r < n && !rc; r++) {
		if (ref_wplanes_dequant_row(a, planes, wtype, n, k, r) ||
		    sw_wformat_dequant((uint32_t)wtype, (const char *)src + r * row_bytes, (uint64_t)k, b)) {
			rc = sw_errf(err, SW_EINVAL, "%s: row %lld of %s: not dequantizable", what,
			             (long long)r, f->name);
			break;
		}
		if (memcmp(a, b, sizeof(*a) * (size_t)k))
			for (int64_t e = 0; e < k; e++)
				if (memcmp(&a[e], &b[e], sizeof(*a))) {
					rc = sw_errf(err, SW_EINVAL, "%s: the repacked %s planes give %.9g at row "
					             "%lld, element %lld, where the file's blocks give %.9g (the "
					             "planes do not hold the file's weights)", what, f->name,
					             (double)a[e], (long long)r, (long long)e, (double)b[e]);
					break;
				}
	}
	free(a);
	return rc;
}
