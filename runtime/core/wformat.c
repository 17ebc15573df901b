/* The weight-format table (wformat.h): sizes as ggml defines them
 * (ggml-common.h's static asserts), the scale fields of each block as its
 * struct lays them out, and the dequantizers of the types real files need,
 * written from ggml's dequantize_row_* in its operation order. */
#include "wformat.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "kernels/half.h"

/* little-endian loads: a mapped file is unaligned in general */
static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- dequantizers of one block ------------------------------------------ */

static void deq_f32(const uint8_t *b, float *y)
{
	uint32_t u = ld32(b);
	memcpy(y, &u, sizeof(*y));
}

static void deq_f16(const uint8_t *b, float *y) { *y = sw_f16_to_f32(ld16(b)); }
static void deq_bf16(const uint8_t *b, float *y) { *y = sw_bf16_to_f32(ld16(b)); }

static void deq_q4_0(const uint8_t *b, float *y)
{
	float d = sw_f16_to_f32(ld16(b));
	const uint8_t *qs = b + 2;
	for (int j = 0; j < 16; j++) {
		y[j] = (float)((qs[j] & 0x0f) - 8) * d;
		y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
	}
}

static void deq_q4_1(const uint8_t *b, float *y)
{
	float d = sw_f16_to_f32(ld16(b)), m = sw_f16_to_f32(ld16(b + 2));
	const uint8_t *qs = b + 4;
	for (int j = 0; j < 16; j++) {
		y[j] = (float)(qs[j] & 0x0f) * d + m;
		y[j + 16] = (float)(qs[j] >> 4) * d + m;
	}
}

static void deq_q5_0(const uint8_t *b, float *y)
{
	float d = sw_f16_to_f32(ld16(b));
	uint32_t qh = ld32(b + 2);
	const uint8_t *qs = b + 6;
	for (int j = 0; j < 16; j++) {
		int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
		y[j] = (float)(((qs[j] & 0x0f) | h0) - 16) * d;
		y[j + 16] = (float)(((qs[j] >> 4) | h1) - 16) * d;
	}
}

static void deq_q5_1(const uint8_t *b, float *y)
{
	float d = sw_f16_to_f32(ld16(b)), m = sw_f16_to_f32(ld16(b + 2));
	uint32_t qh = ld32(b + 4);
	const uint8_t *qs = b + 8;
	for (int j = 0; j < 16; j++) {
		int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
		y[j] = (float)((qs[j] & 0x0f) | h0) * d + m;
		y[j + 16] = (float)((qs[j] >> 4) | h1) * d + m;
	}
}

static void deq_q8_0(const uint8_t *b, float *y)
{
	float d = sw_f16_to_f32(ld16(b));
	for (int j = 0; j < 32; j++)
		y[j] = (float)(int8_t)b[2 + j] * d;
}

/* 6-bit scale and min j of a K-quant super-block (get_scale_min_k4). */
static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
		*m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
	}
}

static void deq_q4_k(const uint8_t *b, float *y)
{
	float d = sw_f16_to_f32(ld16(b)), dmin = sw_f16_to_f32(ld16(b + 2));
	const uint8_t *sc = b + 4, *q = b + 16;
	for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
		uint8_t s, m;
		scale_min_k4(is, sc, &s, &m);
		float d1 = d * s, m1 = dmin * m;
		scale_min_k4(is + 1, sc, &s, &m);
		float d2 = d * s, m2 = dmin * m;
		for (int l = 0; l < 32; l++)
			*y++ = d1 * (q[l] & 0xf) - m1;
		for (int l = 0; l < 32; l++)
			*y++ = d2 * (q[l] >> 4) - m2;
	}
}

static void deq_q6_k(const uint8_t *b, float *y)
{
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	float d = sw_f16_to_f32(ld16(b + 208));
	for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
		for (int l = 0; l < 32; l++) {
			int is = l / 16;
			int q1 = ((ql[l] & 0xf) | ((qh[l] >> 0 & 3) << 4)) - 32;
			int q2 = ((ql[l + 32] & 0xf) | ((qh[l] >> 2 & 3) << 4)) - 32;
			int q3 = ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
			int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
			y[l] = d * sc[is] * q1;
			y[l + 32] = d * sc[is + 2] * q2;
			y[l + 64] = d * sc[is + 4] * q3;
			y[l + 96] = d * sc[is + 6] * q4;
		}
	}
}

/* ---- the table ---------------------------------------------------------- */

/* A row: name, engines' name, type, block, bytes, scan, scales (count,
 * width, then offset and ggml's name of each), dequantizer. A type listed
 * can be size-checked at open even without a dequantizer; a type not listed
 * makes its tensor's extent unknowable, so a GGUF holding one is refused. */
#define ROW(nm, gn, t, blk, by, sc, ns, sb, o0, n0, o1, n1, dq) \
	[t] = { nm, gn, t, blk, by, sc, ns, sb, { o0, o1 }, { n0, n1 }, dq }
#define PLAIN(nm, t, by, sc, dq) ROW(nm, NULL, t, 1, by, sc, 0, 0, 0, NULL, 0, NULL, dq)
#define QUANT(nm, gn, t, blk, by, ns, sb, o0, n0, o1, n1, dq) \
	ROW(nm, gn, t, blk, by, SW_WSCAN_SCALES, ns, sb, o0, n0, o1, n1, dq)
static const sw_wformat formats[] = {
	PLAIN("F32", SW_WT_F32, 4, SW_WSCAN_F32, deq_f32),
	PLAIN("F16", SW_WT_F16, 2, SW_WSCAN_F16, deq_f16),
	PLAIN("BF16", SW_WT_BF16, 2, SW_WSCAN_BF16, deq_bf16),
	PLAIN("F64", SW_WT_F64, 8, SW_WSCAN_F64, NULL),
	PLAIN("I8", SW_WT_I8, 1, SW_WSCAN_NONE, NULL),
	PLAIN("I16", SW_WT_I16, 2, SW_WSCAN_NONE, NULL),
	PLAIN("I32", SW_WT_I32, 4, SW_WSCAN_NONE, NULL),
	PLAIN("I64", SW_WT_I64, 8, SW_WSCAN_NONE, NULL),
	/* {d; qs[16]}, {d, m; qs[16]}, {d; qh[4]; qs[16]}, {d, m; qh[4]; qs[16]} */
	QUANT("Q4_0", "q4_0", SW_WT_Q4_0, SW_WF_QK, 18, 1, 2, 0, "d", 0, NULL, deq_q4_0),
	QUANT("Q4_1", "q4_1", SW_WT_Q4_1, SW_WF_QK, 20, 2, 2, 0, "d", 2, "m", deq_q4_1),
	QUANT("Q5_0", "q5_0", SW_WT_Q5_0, SW_WF_QK, 22, 1, 2, 0, "d", 0, NULL, deq_q5_0),
	QUANT("Q5_1", NULL, SW_WT_Q5_1, SW_WF_QK, 24, 2, 2, 0, "d", 2, "m", deq_q5_1),
	/* {d; qs[32]}, {d, s; qs[32]} */
	QUANT("Q8_0", "q8_0", SW_WT_Q8_0, SW_WF_QK, SW_WF_Q8_0_BYTES, 1, 2, 0, "d", 0, NULL, deq_q8_0),
	QUANT("Q8_1", NULL, SW_WT_Q8_1, SW_WF_QK, 36, 2, 2, 0, "d", 2, "s", NULL),
	/* {scales[16]; qs[64]; d, dmin}, {hmask[32]; qs[64]; scales[12]; d} */
	QUANT("Q2_K", NULL, SW_WT_Q2_K, SW_WF_QK_K, 84, 2, 2, 80, "d", 82, "dmin", NULL),
	QUANT("Q3_K", NULL, SW_WT_Q3_K, SW_WF_QK_K, 110, 1, 2, 108, "d", 0, NULL, NULL),
	/* {d, dmin; scales[12]; qs[128]} (the 6-bit sub-scales are integers),
	 * {d, dmin; scales[12]; qh[32]; qs[128]} */
	QUANT("Q4_K", "q4_k", SW_WT_Q4_K, SW_WF_QK_K, 144, 2, 2, 0, "d", 2, "dmin", deq_q4_k),
	QUANT("Q5_K", NULL, SW_WT_Q5_K, SW_WF_QK_K, 176, 2, 2, 0, "d", 2, "dmin", NULL),
	/* {ql[128]; qh[64]; int8 scales[16]; d}, {float d; qs[256]; bsums[16]} */
	QUANT("Q6_K", "q6_k", SW_WT_Q6_K, SW_WF_QK_K, 210, 1, 2, 208, "d", 0, NULL, deq_q6_k),
	QUANT("Q8_K", NULL, SW_WT_Q8_K, SW_WF_QK_K, 292, 1, 4, 0, "d", 0, NULL, NULL),
	/* the i-quants: d first, save IQ1_M (its scale is spread over the
	 * top nibbles of scales[8]: nothing to read as a field) */
	QUANT("IQ2_XXS", NULL, SW_WT_IQ2_XXS, SW_WF_QK_K, 66, 1, 2, 0, "d", 0, NULL, NULL),
	QUANT("IQ2_XS", NULL, SW_WT_IQ2_XS, SW_WF_QK_K, 74, 1, 2, 0, "d", 0, NULL, NULL),
	QUANT("IQ3_XXS", NULL, SW_WT_IQ3_XXS, SW_WF_QK_K, 98, 1, 2, 0, "d", 0, NULL, NULL),
	QUANT("IQ1_S", NULL, SW_WT_IQ1_S, SW_WF_QK_K, 50, 1, 2, 0, "d", 0, NULL, NULL),
	QUANT("IQ4_NL", NULL, SW_WT_IQ4_NL, SW_WF_QK, 18, 1, 2, 0, "d", 0, NULL, NULL),
	QUANT("IQ3_S", NULL, SW_WT_IQ3_S, SW_WF_QK_K, 110, 1, 2, 0, "d", 0, NULL, NULL),
	QUANT("IQ2_S", NULL, SW_WT_IQ2_S, SW_WF_QK_K, 82, 1, 2, 0, "d", 0, NULL, NULL),
	QUANT("IQ4_XS", NULL, SW_WT_IQ4_XS, SW_WF_QK_K, 136, 1, 2, 0, "d", 0, NULL, NULL),
	ROW("IQ1_M", NULL, SW_WT_IQ1_M, SW_WF_QK_K, 56, SW_WSCAN_NONE, 0, 0, 0, NULL, 0, NULL, NULL),
	/* {qs[48]; qh[4]; d}, {qs[64]; d} */
	QUANT("TQ1_0", NULL, SW_WT_TQ1_0, SW_WF_QK_K, 54, 1, 2, 52, "d", 0, NULL, NULL),
	QUANT("TQ2_0", NULL, SW_WT_TQ2_0, SW_WF_QK_K, 66, 1, 2, 64, "d", 0, NULL, NULL),
};
#undef QUANT
#undef PLAIN
#undef ROW
#define N_FORMATS (sizeof(formats) / sizeof(formats[0]))

const sw_wformat *sw_wformat_get(uint32_t type)
{
	if (type >= N_FORMATS || !formats[type].name)
		return NULL;
	return &formats[type];
}

int64_t sw_wformat_block(int type)
{
	const sw_wformat *f = type >= 0 ? sw_wformat_get((uint32_t)type) : NULL;
	return f ? f->block : 0;
}

int64_t sw_wformat_block_bytes(int type)
{
	const sw_wformat *f = type >= 0 ? sw_wformat_get((uint32_t)type) : NULL;
	return f ? f->bytes : 0;
}

const char *sw_wformat_gemm_name(int type)
{
	const sw_wformat *f = type >= 0 ? sw_wformat_get((uint32_t)type) : NULL;
	return f ? f->gemm_name : NULL;
}

uint64_t sw_wformat_nbytes(uint32_t type, uint64_t n)
{
	const sw_wformat *f = sw_wformat_get(type);
	uint64_t r;
	if (!f || n % f->block || __builtin_mul_overflow(n / f->block, (uint64_t)f->bytes, &r))
		return 0;
	return r;
}

int sw_wformat_dequant(uint32_t type, const void *src, uint64_t n, float *out)
{
	const uint8_t *p = src;
	const sw_wformat *f = sw_wformat_get(type);
	if (!f || !f->dequant)
		return SW_ENOTSUP;
	if (n % f->block)
		return SW_EINVAL;
	/* the plain types element by element without a call each */
	switch (type) {
	case SW_WT_F32:
		memcpy(out, src, n * sizeof(*out));
		return 0;
	case SW_WT_F16:
		for (uint64_t i = 0; i < n; i++)
			out[i] = sw_f16_to_f32(ld16(p + 2 * i));
		return 0;
	case SW_WT_BF16:
		for (uint64_t i = 0; i < n; i++)
			out[i] = sw_bf16_to_f32(ld16(p + 2 * i));
		return 0;
	}
	for (uint64_t i = 0; i < n / f->block; i++)
		f->dequant(p + i * f->bytes, out + i * f->block);
	return 0;
}

/* ---- the finite scan ---------------------------------------------------- */

/* An IEEE value is not finite when its exponent bits are all ones. Masked,
 * plus one unit of the exponent, that carries into the lane's sign bit and
 * only then: (e & mask) + unit has bit `top` set. Eight bytes at a time, the
 * lanes never carry into each other (the sum stays below 2^(lane bits)). */
struct lanes {
	uint64_t mask, unit, top;
	unsigned el; /* bytes per element */
};

static const struct lanes LANES_F32 = {0x7f8000007f800000u, 0x0080000000800000u, 0x8000000080000000u, 4};
static const struct lanes LANES_F16 = {0x7c007c007c007c00u, 0x0400040004000400u, 0x8000800080008000u, 2};
static const struct lanes LANES_BF16 = {0x7f807f807f807f80u, 0x0080008000800080u, 0x8000800080008000u, 2};
static const struct lanes LANES_F64 = {0x7ff0000000000000u, 0x0010000000000000u, 0x8000000000000000u, 8};

/* One element at p (el bytes, little-endian), the same test. */
static bool el_bad(const struct lanes *l, const uint8_t *p)
{
	uint64_t w = 0;
	for (unsigned i = 0; i < l->el; i++)
		w |= (uint64_t)p[i] << (8 * i);
	const uint64_t m = l->el == 8 ? ~0ull : (1ull << (8 * l->el)) - 1;
	return ((w & l->mask & m) + (l->unit & m)) & l->top & m;
}

/* Chunks of CHUNK bytes are tested with one branch; a hit is then found
 * element by element within its chunk. */
#define CHUNK 4096

/* 32 bytes as four 8-byte words: GCC's generic vectors, one AVX2 register
 * (two SSE ones) where the target has them, plain words elsewhere. */
typedef uint64_t u64x4 __attribute__((vector_size(32)));

static int64_t scan_lanes(const struct lanes *l, const uint8_t *p, uint64_t n)
{
	const uint64_t nbytes = n * l->el;
	const u64x4 mask = {l->mask, l->mask, l->mask, l->mask}, unit = {l->unit, l->unit, l->unit, l->unit};
	uint64_t off = 0;
	while (off < nbytes) {
		const uint64_t len = nbytes - off < CHUNK ? nbytes - off : CHUNK;
		uint64_t acc = 0, i = 0;
		u64x4 acc4 = {0, 0, 0, 0};
		for (; i + 32 <= len; i += 32) {
			u64x4 w;
			memcpy(&w, p + off + i, sizeof(w));
			acc4 |= (w & mask) + unit;
		}
		acc = acc4[0] | acc4[1] | acc4[2] | acc4[3];
		for (; i + 8 <= len; i += 8) {
			uint64_t w;
			memcpy(&w, p + off + i, sizeof(w));
			acc |= (w & l->mask) + l->unit;
		}
		bool hit = acc & l->top;
		for (; !hit && i < len; i += l->el) /* the tail: < 8 bytes */
			hit = el_bad(l, p + off + i);
		if (hit)
			for (uint64_t j = 0; j < len; j += l->el)
				if (el_bad(l, p + off + j))
					return (int64_t)((off + j) / l->el);
		off += len;
	}
	return -1;
}

static int64_t scan_scales(const sw_wformat *f, const uint8_t *p, uint64_t n)
{
	const uint64_t nb = n / f->block;
	for (uint64_t b = 0; b < nb; b++) {
		const uint8_t *q = p + b * f->bytes;
		uint32_t acc = 0;
		for (int s = 0; s < f->n_scales; s++)
			acc |= f->scale_bytes == 4 ? ((ld32(q + f->scale_off[s]) & 0x7f800000u) + 0x00800000u) >> 16
			                           : (ld16(q + f->scale_off[s]) & 0x7c00u) + 0x0400u;
		if (acc & 0x8000u)
			return (int64_t)(b * f->block);
	}
	return -1;
}

int64_t sw_wformat_find_nonfinite(const sw_wformat *f, const void *data, uint64_t n)
{
	switch (f->scan) {
	case SW_WSCAN_F32: return scan_lanes(&LANES_F32, data, n);
	case SW_WSCAN_F16: return scan_lanes(&LANES_F16, data, n);
	case SW_WSCAN_BF16: return scan_lanes(&LANES_BF16, data, n);
	case SW_WSCAN_F64: return scan_lanes(&LANES_F64, data, n);
	case SW_WSCAN_SCALES: return scan_scales(f, data, n);
	default: return -1;
	}
}

/* The value at p of an IEEE type of el bytes, widened to double. */
static double plain_value(int scan, const uint8_t *p)
{
	switch (scan) {
	case SW_WSCAN_F32: {
		uint32_t u = ld32(p);
		float x;
		memcpy(&x, &u, sizeof(x));
		return x;
	}
	case SW_WSCAN_F16: return sw_f16_to_f32(ld16(p));
	case SW_WSCAN_BF16: return sw_bf16_to_f32(ld16(p));
	default: {
		uint64_t u = (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
		double x;
		memcpy(&x, &u, sizeof(x));
		return x;
	}
	}
}

void sw_wformat_describe(const sw_wformat *f, const void *data, int64_t i, char *buf, size_t n)
{
	const uint8_t *p = data;
	if (f->scan != SW_WSCAN_SCALES) {
		snprintf(buf, n, "element %lld is %g", (long long)i,
		         plain_value(f->scan, p + (uint64_t)i * f->bytes));
		return;
	}
	const uint64_t b = (uint64_t)i / f->block;
	const uint8_t *q = p + b * f->bytes;
	for (int s = 0; s < f->n_scales; s++) {
		const double v = f->scale_bytes == 4 ? plain_value(SW_WSCAN_F32, q + f->scale_off[s])
		                                     : sw_f16_to_f32(ld16(q + f->scale_off[s]));
		if (isfinite(v))
			continue;
		snprintf(buf, n, "block %llu (elements %llu..%llu): scale %s is %g", (unsigned long long)b,
		         (unsigned long long)(b * f->block), (unsigned long long)(b * f->block + f->block - 1),
		         f->scale_name[s], v);
		return;
	}
	snprintf(buf, n, "block %llu: every scale finite", (unsigned long long)b);
}
