/* GGUF-typed GEMM weights in the GPU's planes, plain C: the layout
 * (ref.h), one row's dequantization (in the format table's operation order,
 * runtime/core/wformat.c, so a repack is checked bit for bit against the
 * file's blocks) and the GEMV, the specification of
 * templates/gemv_gguf.cu.tmpl: int8 activations (ref_quant_a8) against
 * each 32-element sub-block, the integer sums and scale products of the
 * host's gguf_a8 GEMM (runtime/device/host_gemm.h hg_gemm_gguf_a8), summed
 * over the sub-blocks in order. Not the repack (runtime/engine). */
#include <math.h>
#include <string.h>

#include "kernels/half.h"
#include "ref.h"

static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int ref_wplanes_block(int wtype)
{
	switch (wtype) {
	case REF_WT_Q4_0: case REF_WT_Q4_1: case REF_WT_Q5_0: case REF_WT_Q8_0: return 32;
	case REF_WT_Q4_K: case REF_WT_Q6_K: return 256;
	default: return 0;
	}
}

int ref_wplanes_layout(int wtype, int64_t n, int64_t k, int64_t off[REF_WPLANES])
{
	const int blk = ref_wplanes_block(wtype);
	if (!blk || n < 0 || k < 0 || k % blk)
		return REF_EINVAL;
	const int64_t nb = n * (k / 32), ns = n * (k / 256);
	for (int i = 0; i < REF_WPLANES; i++)
		off[i] = -1;
	off[0] = 0;
	switch (wtype) {
	case REF_WT_Q4_0: off[1] = 16 * nb; off[REF_WPLANES - 1] = off[1] + 2 * nb; break;
	case REF_WT_Q4_1: off[1] = 16 * nb; off[REF_WPLANES - 1] = off[1] + 4 * nb; break;
	case REF_WT_Q5_0: /* the high bits (4-byte words) before the fp16 scales */
		off[2] = 16 * nb;
		off[1] = off[2] + 4 * nb;
		off[REF_WPLANES - 1] = off[1] + 2 * nb;
		break;
	case REF_WT_Q8_0: off[1] = 32 * nb; off[REF_WPLANES - 1] = off[1] + 2 * nb; break;
	case REF_WT_Q4_K: off[1] = 16 * nb; off[REF_WPLANES - 1] = off[1] + 16 * ns; break;
	case REF_WT_Q6_K:
		off[1] = 16 * nb;
		off[2] = off[1] + 16 * ns;
		off[3] = off[2] + 8 * nb;
		off[REF_WPLANES - 1] = off[3] + 2 * ns;
		break;
	}
	return 0;
}

/* Sub-block b (32 elements) of row r: its quants q[32] (Q4: 0..15, Q5_0:
 * 0..31, Q8_0: -128..127, Q6_K: 0..63) as the planes hold them. */
static void sub_q(const uint8_t *W, int wtype, const int64_t *off, int64_t k, int64_t r, int64_t b,
                  int q[32])
{
	const int64_t nbr = k / 32, i = r * nbr + b;
	if (wtype == REF_WT_Q8_0) {
		const int64_t g = b / 32, j = b % 32, u = nbr - 32 * g < 32 ? nbr - 32 * g : 32;
		const uint8_t *row = W + r * nbr * 32 + g * 1024;
		for (int t = 0; t < 32; t++)
			q[t] = (int8_t)row[(t / 16) * u * 16 + j * 16 + t % 16];
		return;
	}
	const uint8_t *lo = W + off[0] + i * 16;
	for (int t = 0; t < 16; t++) {
		q[t] = lo[t] & 15;
		q[t + 16] = lo[t] >> 4;
	}
	if (wtype == REF_WT_Q5_0) {
		const uint32_t h = ld32(W + off[2] + i * 4);
		for (int e = 0; e < 32; e++) /* byte e % 4, bit 4 (e / 16) + (e % 16) / 4 */
			q[e] |= (int)((h >> (8 * (e % 4) + 4 * (e / 16) + (e % 16) / 4)) & 1) << 4;
	}
	if (wtype == REF_WT_Q6_K) {
		const uint8_t *hb = W + off[2] + i * 8;
		const uint32_t h[2] = {ld32(hb), ld32(hb + 4)};
		for (int e = 0; e < 32; e++) /* word e / 16, byte e % 4, bits 2 ((e % 16) / 4) */
			q[e] |= (int)((h[e / 16] >> (8 * (e % 4) + 2 * ((e % 16) / 4))) & 3) << 4;
	}
}

/* Q4_K's 6-bit scale and min j of a super-block's scales[12] (ggml's
 * get_scale_min_k4) */
static void scale_min_k4(int j, const uint8_t *q, int *d, int *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* Sub-block b of row r read as w_t = d (q_t - z) + mn (Q4_*, Q5_0, Q8_0: z
 * 0 save Q4_0's 8 and Q5_0's 16, mn 0 save Q4_1's m and Q4_K's -dmin m_j; d
 * exact in fp32)
 * or, Q6_K, w_t = d sc_(t / 16) (q_t - 32): its d, mn and sc[2]. */
typedef struct sub_scale {
	float d, mn;
	int z, sc[2];
	float d_super; /* Q4_K: the super-block's d; Q6_K: its d */
	int s6, m6;     /* Q4_K: the 6-bit scale and min */
	float dmin;
} sub_scale;

static void sub_scales(const uint8_t *W, int wtype, const int64_t *off, int64_t k, int64_t r,
                       int64_t b, sub_scale *s)
{
	const int64_t nbr = k / 32, i = r * nbr + b, si = r * (k / 256) + b / 8;
	memset(s, 0, sizeof(*s));
	switch (wtype) {
	case REF_WT_Q4_0:
		s->d = sw_f16_to_f32(ld16(W + off[1] + 2 * i));
		s->z = 8;
		break;
	case REF_WT_Q4_1:
		s->d = sw_f16_to_f32(ld16(W + off[1] + 4 * i));
		s->mn = sw_f16_to_f32(ld16(W + off[1] + 4 * i + 2));
		break;
	case REF_WT_Q5_0:
		s->d = sw_f16_to_f32(ld16(W + off[1] + 2 * i));
		s->z = 16;
		break;
	case REF_WT_Q8_0:
		s->d = sw_f16_to_f32(ld16(W + off[1] + 2 * i));
		break;
	case REF_WT_Q4_K: {
		const uint8_t *h = W + off[1] + 16 * si;
		s->d_super = sw_f16_to_f32(ld16(h));
		s->dmin = sw_f16_to_f32(ld16(h + 2));
		scale_min_k4((int)(b % 8), h + 4, &s->s6, &s->m6);
		s->d = s->d_super * (float)s->s6;
		s->mn = -(s->dmin * (float)s->m6);
		break;
	}
	case REF_WT_Q6_K:
		s->d = s->d_super = sw_f16_to_f32(ld16(W + off[3] + 2 * si));
		s->sc[0] = (int8_t)W[off[1] + 16 * si + 2 * (b % 8)];
		s->sc[1] = (int8_t)W[off[1] + 16 * si + 2 * (b % 8) + 1];
		s->z = 32;
		break;
	}
}

int ref_wplanes_dequant_row(float *y, const void *W, int wtype, int64_t n, int64_t k, int64_t row)
{
	int64_t off[REF_WPLANES];
	if (ref_wplanes_layout(wtype, n, k, off) || row < 0 || row >= n)
		return REF_EINVAL;
	for (int64_t b = 0; b < k / 32; b++) {
		int q[32];
		sub_scale s;
		sub_q(W, wtype, off, k, row, b, q);
		sub_scales(W, wtype, off, k, row, b, &s);
		float *o = y + 32 * b;
		/* each type in wformat.c's deq_* operation order */
		switch (wtype) {
		case REF_WT_Q4_0:
			for (int t = 0; t < 32; t++)
				o[t] = (float)(q[t] - 8) * s.d;
			break;
		case REF_WT_Q4_1:
			for (int t = 0; t < 32; t++)
				o[t] = (float)q[t] * s.d + s.mn;
			break;
		case REF_WT_Q5_0:
			for (int t = 0; t < 32; t++)
				o[t] = (float)(q[t] - 16) * s.d;
			break;
		case REF_WT_Q8_0:
			for (int t = 0; t < 32; t++)
				o[t] = (float)q[t] * s.d;
			break;
		case REF_WT_Q4_K: {
			const float m1 = s.dmin * (float)s.m6;
			for (int t = 0; t < 32; t++)
				o[t] = s.d * (float)q[t] - m1;
			break;
		}
		case REF_WT_Q6_K:
			for (int t = 0; t < 32; t++)
				o[t] = s.d * (float)s.sc[t / 16] * (float)(q[t] - 32);
			break;
		}
	}
	return 0;
}

/* The GEMV, and where mag is given, per output the sum of its terms'
 * magnitudes (what a change of the summation order acts on). */
static int gemv(float *C, double *mag, const void *a8, const void *W, int M, int N, int NW, int K,
                int wtype)
{
	int64_t off[REF_WPLANES];
	if (M < 0 || N < 0 || N > NW || ref_wplanes_layout(wtype, NW, K, off))
		return REF_EINVAL;
	const int nb = K / 32;
	const int8_t *aq = a8;
	const float *da = (const float *)(const void *)((const char *)a8 + (size_t)M * K);
	const int32_t *as = (const int32_t *)(const void *)(da + (size_t)M * nb);
	for (int r = 0; r < N; r++)
		for (int m = 0; m < M; m++) {
			float acc = 0.0f;
			double sum_abs = 0.0;
			for (int b = 0; b < nb; b++) {
				const size_t ai = (size_t)m * nb + b;
				const int8_t *a = aq + ai * 32;
				const int32_t h0 = (int16_t)(uint16_t)((uint32_t)as[ai] & 0xffff);
				const int32_t h1 = (int16_t)(uint16_t)((uint32_t)as[ai] >> 16);
				int q[32];
				sub_scale s;
				sub_q(W, wtype, off, K, r, b, q);
				sub_scales(W, wtype, off, K, r, b, &s);
				int32_t p[2] = {0, 0}; /* the halves' sums of q a */
				for (int t = 0; t < 32; t++)
					p[t / 16] += q[t] * a[t];
				const int32_t isum = wtype == REF_WT_Q6_K
				                     ? s.sc[0] * (p[0] - 32 * h0) + s.sc[1] * (p[1] - 32 * h1)
				                     : p[0] + p[1] - s.z * (h0 + h1);
				const float pd = da[ai] * s.d;
				acc = fmaf((float)isum, pd, acc);
				sum_abs += fabs((double)isum * pd);
				if (wtype == REF_WT_Q4_1 || wtype == REF_WT_Q4_K) {
					const float pm = da[ai] * (float)(h0 + h1);
					acc = fmaf(s.mn, pm, acc);
					sum_abs += fabs((double)s.mn * pm);
				}
			}
			C[(size_t)m * N + r] = acc;
			if (mag)
				mag[(size_t)m * N + r] = sum_abs;
		}
	return 0;
}

int ref_gemv_gguf(float *C, const void *a8, const void *W, int M, int N, int NW, int K, int wtype)
{
	return gemv(C, NULL, a8, W, M, N, NW, K, wtype);
}

int ref_gemv_gguf_mag(float *C, double *mag, const void *a8, const void *W, int M, int N, int NW,
                      int K, int wtype)
{
	return gemv(C, mag, a8, W, M, N, NW, K, wtype);
}
