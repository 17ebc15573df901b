/* Test-only Q4_K / Q6_K encoders and a mixed-type GGUF writer (kquant.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "formats/gguf.h"
#include "kquant.h"

static int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static void st16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

/* block_q4_K: d, dmin (fp16), scales[12] (8 6-bit scales and mins), qs[128];
 * w = d sc_j q - dmin m_j per 32 elements j, q in 0..15 (low nibbles of qs
 * 32-byte run r are sub-block 2r, high nibbles 2r + 1). */
void kq_quantize_q4_k(const float *x, int64_t n, void *out)
{
	uint8_t *o = out;
	for (int64_t b = 0; b < n / 256; b++, x += 256, o += 144) {
		float scale[8], mins[8], smax = 0, mmax = 0;
		for (int j = 0; j < 8; j++) {
			float lo = 0, hi = 0;
			for (int i = 0; i < 32; i++) {
				lo = fminf(lo, x[32 * j + i]);
				hi = fmaxf(hi, x[32 * j + i]);
			}
			scale[j] = (hi - lo) / 15;
			mins[j] = -lo;
			smax = fmaxf(smax, scale[j]);
			mmax = fmaxf(mmax, mins[j]);
		}
		const uint16_t dh = gguf_f32_to_f16(smax / 63), mh = gguf_f32_to_f16(mmax / 63);
		const float d = gguf_f16_to_f32(dh), dmin = gguf_f16_to_f32(mh);
		int sc[8], mn[8];
		for (int j = 0; j < 8; j++) {
			sc[j] = d > 0 ? clampi((int)lrintf(scale[j] / d), 0, 63) : 0;
			mn[j] = dmin > 0 ? clampi((int)lrintf(mins[j] / dmin), 0, 63) : 0;
		}
		st16(o, dh);
		st16(o + 2, mh);
		uint8_t *s = o + 4, *qs = o + 16;
		for (int j = 0; j < 4; j++) {
			s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
			s[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
			s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
		}
		memset(qs, 0, 128);
		for (int j = 0; j < 8; j++) {
			const float dj = d * (float)sc[j], mj = dmin * (float)mn[j];
			for (int i = 0; i < 32; i++) {
				const int q = dj > 0 ? clampi((int)lrintf((x[32 * j + i] + mj) / dj), 0, 15) : 0;
				qs[32 * (j / 2) + i] |= (uint8_t)(j % 2 ? q << 4 : q);
			}
		}
	}
}

/* block_q6_K: ql[128], qh[64], scales[16] (int8), d (fp16); w = d sc_g
 * (q - 32) per 16 elements g, q 6-bit: in each 128-element half h, element
 * e = 32 r + l (r 0..3, l 0..31) keeps its low nibble in ql[64 h + l + 32
 * (r % 2)] (r >= 2: the high nibble) and its top 2 bits at 2 r of qh[32 h + l]. */
void kq_quantize_q6_k(const float *x, int64_t n, void *out)
{
	uint8_t *o = out;
	for (int64_t b = 0; b < n / 256; b++, x += 256, o += 210) {
		float gs[16], gmax = 0;
		for (int g = 0; g < 16; g++) {
			float a = 0;
			for (int i = 0; i < 16; i++)
				a = fmaxf(a, fabsf(x[16 * g + i]));
			gs[g] = a / 31;
			gmax = fmaxf(gmax, gs[g]);
		}
		const uint16_t dh = gguf_f32_to_f16(gmax / 127);
		const float d = gguf_f16_to_f32(dh);
		uint8_t *ql = o, *qh = o + 128;
		int8_t *sc = (int8_t *)(o + 192);
		memset(o, 0, 192);
		int q[256];
		for (int g = 0; g < 16; g++) {
			sc[g] = (int8_t)(d > 0 ? clampi((int)lrintf(gs[g] / d), 0, 127) : 0);
			const float dg = d * (float)sc[g];
			for (int i = 0; i < 16; i++)
				q[16 * g + i] = 32 + (dg > 0 ? clampi((int)lrintf(x[16 * g + i] / dg), -32, 31) : 0);
		}
		for (int h = 0; h < 2; h++)
			for (int r = 0; r < 4; r++)
				for (int l = 0; l < 32; l++) {
					const int v = q[128 * h + 32 * r + l];
					ql[64 * h + l + 32 * (r % 2)] |= (uint8_t)((v & 15) << (r >= 2 ? 4 : 0));
					qh[32 * h + l] |= (uint8_t)((v >> 4) << (2 * r));
				}
		st16(o + 208, dh);
	}
}

void kq_quantize_q5_0(const float *x, int64_t n, void *out)
{
	uint8_t *o = out;
	for (int64_t b = 0; b < n / 32; b++, x += 32, o += 22) {
		float amax = 0, mx = 0;
		for (int j = 0; j < 32; j++)
			if (amax < fabsf(x[j])) {
				amax = fabsf(x[j]);
				mx = x[j];
			}
		const float d = mx / -16, id = d != 0 ? 1.0f / d : 0.0f;
		uint32_t qh = 0;
		st16(o, gguf_f32_to_f16(d));
		for (int j = 0; j < 16; j++) {
			const int x0 = clampi((int8_t)(x[j] * id + 16.5f), -128, 31);
			const int x1 = clampi((int8_t)(x[16 + j] * id + 16.5f), -128, 31);
			o[6 + j] = (uint8_t)((x0 & 15) | (x1 & 15) << 4);
			qh |= (uint32_t)((x0 & 16) >> 4) << j | (uint32_t)((x1 & 16) >> 4) << (j + 16);
		}
		memcpy(o + 2, &qh, 4);
	}
}

int kq_more_bits(int layer, int n_layers)
{
	return layer < n_layers / 8 || layer >= 7 * n_layers / 8 ||
	       (layer - n_layers / 8) % 3 == 2;
}

/* "blk.N.rest" -> N, else -1 */
static int layer_of(const char *name)
{
	int l = -1;
	return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

void kq_write_mixed(const char *src, const char *dst, kq_type_fn pick)
{
	sw_err err = {0};
	gguf_file *f = gguf_open(src, &err);
	if (!f)
		fail_msg("%s", err.msg);
	gguf_writer *w = gguf_writer_new(3, 32);
	assert_non_null(w);
	for (uint64_t i = 0; i < f->n_kv; i++)
		if (gguf_w_copy_kv(w, f, &f->kv[i], &err))
			fail_msg("%s", err.msg);
	void **bufs = calloc(f->n_tensors, sizeof(*bufs));
	assert_non_null(bufs);
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		const gguf_tensor *t = &f->tensors[i];
		char name[128];
		snprintf(name, sizeof(name), "%.*s", (int)t->name.n, t->name.p);
		const uint32_t type = t->type == GGML_T_F32 ? pick(name, layer_of(name)) : t->type;
		const uint64_t n = t->n_elems;
		float *x = malloc(sizeof(*x) * n);
		bufs[i] = malloc(n * 2 + 64); /* the widest encoding here (Q8_0) is < 2 bytes a value */
		assert_non_null(x);
		assert_non_null(bufs[i]);
		if (gguf_tensor_to_f32(f, t, x, &err))
			fail_msg("%s", err.msg);
		uint64_t nb;
		if (type == GGML_T_F32) {
			free(bufs[i]);
			bufs[i] = x;
			x = NULL;
			nb = n * 4;
		} else if (type == GGML_T_Q5_0) {
			if (n % 32)
				fail_msg("%s: %llu values, not whole 32-blocks", name, (unsigned long long)n);
			kq_quantize_q5_0(x, (int64_t)n, bufs[i]);
			nb = n / 32 * 22;
		} else if (type == GGML_T_Q4_K || type == GGML_T_Q6_K) {
			if (n % 256)
				fail_msg("%s: %llu values, not whole 256-blocks", name, (unsigned long long)n);
			(type == GGML_T_Q4_K ? kq_quantize_q4_k : kq_quantize_q6_k)(x, (int64_t)n, bufs[i]);
			nb = n / 256 * (type == GGML_T_Q4_K ? 144 : 210);
		} else {
			nb = gguf_quantize(type, x, n, bufs[i]);
			if (!nb)
				fail_msg("%s: cannot encode type %u", name, type);
		}
		free(x);
		gguf_w_tensor(w, name, type, t->n_dims, t->ne, bufs[i], nb);
	}
	if (gguf_writer_save(w, dst, &err))
		fail_msg("%s: %s", dst, err.msg);
	gguf_writer_free(w);
	for (uint64_t i = 0; i < f->n_tensors; i++)
		free(bufs[i]);
	free(bufs);
	gguf_close(f);
}
