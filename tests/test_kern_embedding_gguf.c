/* The token embedding from a GGUF-typed table (templates/embedding_gguf.cu.tmpl,
 * kernels/ref/embedding_gguf.c) for Q4_0, Q4_1, Q5_0, Q8_0, Q4_K and Q6_K,
 * against independent statements:
 *  - ref_embedding_gguf on the planes (rt_wplanes_repack of random file
 *    blocks) against a double-precision dequantization written here from
 *    ggml's block structs (not the format table, not the planes): Q4_0,
 *    Q5_0 and Q8_0 values are exact in fp32 (d has 11 significant bits,
 *    the quant at most 8), so equal; Q4_1's q d + m and Q4_K's d sc q -
 *    dmin m have an exact product and one rounding (u |w|), Q6_K's d sc q
 *    one rounding of its last product (u |w|); SCALE != 1 one more (so
 *    ((1 + u)^r - 1) |w| with r roundings);
 *  - the same rows against the format table's dequantization of the file's
 *    blocks (core/wformat.h, what the host decoder embeds) times the
 *    scale: bit for bit;
 *  - the kernel in the emulator against ref_embedding_gguf: bit for bit
 *    over the whole output (untouched rows keep emu_alloc's poison),
 *    *err set exactly when an id is out of range;
 * on awkward tables: ids 0 and N_ROWS - 1 always, padding ids [N_ROWS,
 * N_IDS) (zero rows), bad ids (-1, N_IDS, 2^30, INT32_MIN), DIM of 1, 3,
 * 18 (SmolLM2's 576), 20 (Gemma 3's 640) and 33 sub-blocks (not a multiple
 * of 256; Q8_0: a partial second group of 32) and 1, 5, 9 super-blocks,
 * blocks of 32 and 128 threads (a partial last round), SCALE 1, 8 and
 * sqrtf(640); then NVRTC at the tables engines gather from (SmolLM2's
 * Q8_0 576 x 49152, Gemma 3 270M's Q8_0 640 x 262144 times sqrt(640),
 * Llama-3-8B's 4096 x 128256 in each type; sm_80, sm_90, zero spills). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/wformat.h"
#include "engine/wplanes.h"
#include "formats/gguf.h"
#include "kernels/ref/ref.h"

#include "check.h"
#include "testutil.h"
#include "op_harness.h"

static const int TYPES[] = {SW_WT_Q4_0, SW_WT_Q4_1, SW_WT_Q5_0, SW_WT_Q8_0, SW_WT_Q4_K,
                           SW_WT_Q6_K};
#define N_TYPES 6

static uint32_t rbits(void)
{
	return (uint32_t)((rnd() + 1.0) * 0x1p31);
}

/* an fp16 scale in [lo, 2 lo), either sign */
static uint16_t rscale(double lo)
{
	return (uint16_t)(gguf_f32_to_f16((float)(lo * (1.5 + 0.5 * rnd()))) ^ (rnd() < 0 ? 0x8000 : 0));
}

/* One random block of type t at p: every quant and scale bit random, the
 * fp16 scales finite, of both signs */
static void enc_block(int t, uint8_t *p, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)rbits();
	uint16_t h = rscale(t == SW_WT_Q6_K ? 1.0 / 8192 : t == SW_WT_Q4_K ? 1.0 / 1024 : 1.0 / 128);
	memcpy(p + (t == SW_WT_Q6_K ? 208 : 0), &h, 2);
	if (t == SW_WT_Q4_1 || t == SW_WT_Q4_K) { /* m, dmin */
		h = rscale(1.0 / 2048);
		memcpy(p + 2, &h, 2);
	}
}

/* Element e of row r of the file's blocks, in double, from ggml's block
 * structs: Q4_0 {d; qs[16]}, Q4_1 {d, m; qs[16]}, Q5_0 {d; qh[4]; qs[16]},
 * Q8_0 {d; qs[32]}, Q4_K {d, dmin, scales[12]; qs[128]}, Q6_K {ql[128];
 * qh[64]; scales[16]; d}; element j < 16 of a 32-block in qs[j]'s low
 * nibble, j + 16 in its high one. */
static double f16d(const uint8_t *p)
{
	return (double)gguf_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static double deq_exact(int t, const uint8_t *w, int dim, int r, int e)
{
	const sw_wformat *f = sw_wformat_get((uint32_t)t);
	const uint8_t *b = w + ((size_t)r * (dim / f->block) + e / f->block) * f->bytes;
	const int j = e % f->block;
	switch (t) {
	case SW_WT_Q4_0:
		return f16d(b) * (((j < 16 ? b[2 + j] : b[2 + j - 16] >> 4) & 15) - 8);
	case SW_WT_Q4_1:
		return f16d(b) * ((j < 16 ? b[4 + j] : b[4 + j - 16] >> 4) & 15) + f16d(b + 2);
	case SW_WT_Q5_0: {
		const uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 |
		                    (uint32_t)b[5] << 24;
		const int lo = (j < 16 ? b[6 + j] : b[6 + j - 16] >> 4) & 15;
		return f16d(b) * ((lo | (int)((qh >> j) & 1) << 4) - 16);
	}
	case SW_WT_Q8_0:
		return f16d(b) * (int8_t)b[2 + j];
	case SW_WT_Q4_K: {
		const int g = j / 32;          /* the 32-element group: scale g */
		const uint8_t *sc = b + 4;
		int s, m;
		if (g < 4) {
			s = sc[g] & 63;
			m = sc[g + 4] & 63;
		} else {
			s = (sc[g + 4] & 15) | (sc[g - 4] >> 6) << 4;
			m = (sc[g + 4] >> 4) | (sc[g] >> 6) << 4;
		}
		const uint8_t qb = b[16 + 32 * (g / 2) + j % 32]; /* 64 elements a 32 bytes */
		const int q = g % 2 ? qb >> 4 : qb & 15;
		return f16d(b) * s * q - f16d(b + 2) * m;
	}
	case SW_WT_Q6_K: { /* 128-element halves: l < 32, four quarters x */
		const int h = j / 128, x = (j % 128) / 32, l = j % 32;
		const uint8_t ql = b[64 * h + l + 32 * (x & 1)], qh = b[128 + 32 * h + l];
		const int q = ((x >= 2 ? ql >> 4 : ql & 15) | ((qh >> (2 * x)) & 3) << 4) - 32;
		return f16d(b + 208) * (int8_t)b[192 + 8 * h + l / 16 + 2 * x] * q;
	}
	}
	return NAN;
}

/* roundings between the exact value and the fp32 one, before the scale */
static int roundings(int t)
{
	return t == SW_WT_Q4_1 || t == SW_WT_Q4_K || t == SW_WT_Q6_K;
}

typedef struct ecase {
	int t, dim, T, block;
	int n_pad;    /* ids past the table: N_IDS = N_ROWS + n_pad */
	int bad;      /* put bad ids in */
	float scale;
} ecase;

#define N_ROWS 7

static void emb_begin(oh_case *c, int t, int dim, int n_rows, int n_ids, float scale, int block)
{
	oh_begin(c, SW_OP_embedding_gguf, "%s DIM%d N_ROWS%d N_IDS%d SCALE %g BLOCK%d",
	         sw_wformat_get((uint32_t)t)->name, dim, n_rows, n_ids, (double)scale, block);
	oh_pi(c, "WTYPE", t);
	oh_pi(c, "DIM", dim);
	oh_pi(c, "N_ROWS", n_rows);
	oh_pi(c, "N_IDS", n_ids);
	oh_pf(c, "SCALE", scale);
	oh_pi(c, "BLOCK", block);
}

static void emb_case(const ecase *g)
{
	const int t = g->t, dim = g->dim, T = g->T, n_ids = N_ROWS + g->n_pad;
	const sw_wformat *f = sw_wformat_get((uint32_t)t);
	oh_case c;
	emb_begin(&c, t, dim, N_ROWS, n_ids, g->scale, g->block);
	const size_t ny = (size_t)T * dim, wbytes = (size_t)sw_wformat_nbytes((uint32_t)t,
	                                                                        (uint64_t)N_ROWS * dim);
	float *y = oh_buf(&c, "y", ny, sizeof(float));
	uint8_t *W = oh_buf(&c, "table", wbytes, 1);
	int32_t *tok = oh_buf(&c, "tok", (size_t)T, sizeof(int32_t));
	int32_t *err = oh_buf(&c, "err", 1, sizeof(int32_t));
	uint8_t *blocks = oh_host(&c, wbytes);
	float *ref = oh_host(&c, ny * sizeof(float)), *host = oh_host(&c, (size_t)dim * sizeof(float));

	for (size_t i = 0; i < wbytes / (size_t)f->bytes; i++)
		enc_block(t, blocks + i * (size_t)f->bytes, (int)f->bytes);
	assert_int_equal(rt_wplanes_repack(W, blocks, t, N_ROWS, dim), 0);
	/* ids 0 and N_ROWS - 1 (the table's ends), random ones, padding ids
	 * (every third from row 1, the last padding id among them), bad ids */
	for (int i = 0; i < T; i++)
		tok[i] = (int32_t)(tu_rand(&rng_state) % N_ROWS);
	tok[0] = 0;
	tok[T - 1] = N_ROWS - 1;
	for (int i = 1; g->n_pad > 0 && i < T - 1; i += 3)
		tok[i] = i + 4 >= T ? n_ids - 1 : N_ROWS + (int32_t)(tu_rand(&rng_state) % (uint64_t)g->n_pad);
	static const int32_t bad_ids[] = {-1, 0, 1 << 30, -2147483647 - 1};
	for (int i = 2, k = 0; g->bad && i < T - 1; i += 4, k++)
		tok[i] = k % 4 == 1 ? n_ids : bad_ids[k % 4];
	*err = 0;
	memset(ref, 0xff, ny * sizeof(*ref)); /* the poison emu_alloc leaves in y */
	assert_int_equal(ref_embedding_gguf(ref, W, tok, T, dim, N_ROWS, n_ids, t, g->scale),
	                 g->bad ? 1 : 0);

	/* the reference against the double dequantization and the format table */
	const double u = 0x1p-24, rel = pow(1.0 + u, roundings(t) + (g->scale != 1.0f)) - 1.0;
	for (int i = 0; i < T; i++) {
		const float *row = ref + (size_t)i * dim;
		if (tok[i] < 0 || tok[i] >= n_ids) {
			for (int e = 0; e < dim; e++) {
				uint32_t bits;
				memcpy(&bits, &row[e], 4);
				if (bits != 0xffffffffu)
					fail_msg("%s: row %d (bad id %d) element %d written", c.what, i, tok[i], e);
			}
			continue;
		}
		if (tok[i] >= N_ROWS) {
			for (int e = 0; e < dim; e++) {
				uint32_t bits;
				memcpy(&bits, &row[e], 4);
				if (bits)
					fail_msg("%s: row %d (padding id %d) element %d has bits %08x, expected +0.0",
					         c.what, i, tok[i], e, bits);
			}
			continue;
		}
		assert_int_equal(sw_wformat_dequant((uint32_t)t, blocks + (size_t)tok[i] * (dim / f->block) *
		                                    (size_t)f->bytes, (uint64_t)dim, host), 0);
		for (int e = 0; e < dim; e++) {
			const double x = deq_exact(t, blocks, dim, tok[i], e) * (double)g->scale;
			if (!(fabs((double)row[e] - x) <= rel * fabs(x)))
				fail_msg("%s: row %d (id %d) element %d: the reference gives %.9g, the exact value "
				         "%.17g (bound %.3g)", c.what, i, tok[i], e, (double)row[e], x, rel * fabs(x));
			const float hv = g->scale != 1.0f ? host[e] * g->scale : host[e];
			if (memcmp(&hv, &row[e], 4))
				fail_msg("%s: row %d (id %d) element %d: the reference gives %a, the format "
				         "table's dequantization %a", c.what, i, tok[i], e, (double)row[e],
				         (double)hv);
		}
	}
	oh_expect(&c, "y", KERN_F32, y, ref, ny, T, dim, 0);
	oh_launch(&c, d3((unsigned)T, 1, 1), d3((unsigned)g->block, 1, 1));
	assert_int_equal(*err, g->bad);
	oh_end(&c);
}

static void test_embedding_gguf(void **state)
{
	(void)state;
	static const int sub[] = {1, 3, 18, 20, 33}, sup[] = {1, 5, 9};
	const float scales[] = {1.0f, 8.0f, sqrtf(640.0f)};
	for (int ti = 0; ti < N_TYPES; ti++) {
		const int t = TYPES[ti], blk = (int)sw_wformat_block(t);
		const int nd = blk == 32 ? 5 : 3;
		for (int d = 0; d < nd; d++) {
			const int dim = blk == 32 ? 32 * sub[d] : 256 * sup[d];
			for (int k = 0; k < 3; k++) {
				const ecase a = {t, dim, 1 + 4 * k, k == 1 ? 32 : 128, 0, 0, scales[k]};
				emb_case(&a);
				const ecase b = {t, dim, 11, k == 2 ? 32 : 128, 3, 1, scales[k]};
				emb_case(&b);
			}
		}
		print_message("  %s: DIM %s, ids 0 and V-1, padding and bad ids, SCALE 1, 8, sqrt(640): "
		              "kernel = ref bit for bit, ref = the file's values\n",
		              sw_wformat_get((uint32_t)t)->name,
		              blk == 32 ? "32, 96, 576, 640, 1056" : "256, 1280, 2304");
	}
	/* the reference refuses what it cannot lay out */
	float y[32];
	const int32_t tok = 0;
	uint8_t w[64] = {0};
	assert_int_equal(ref_embedding_gguf(y, w, &tok, 1, 32, 1, 1, SW_WT_Q5_1, 1.0f), REF_EINVAL);
	assert_int_equal(ref_embedding_gguf(y, w, &tok, 1, 32, 1, 1, SW_WT_Q4_K, 1.0f), REF_EINVAL);
	assert_int_equal(ref_embedding_gguf(y, w, &tok, 1, 32, 2, 1, SW_WT_Q8_0, 1.0f), REF_EINVAL);
}

/* the tables engines gather from */
static void test_embedding_gguf_nvrtc(void **state)
{
	(void)state;
	oh_case c;
	emb_begin(&c, SW_WT_Q8_0, 576, 49152, 49152, 1.0f, 128);
	oh_nvrtc(&c);
	oh_end(&c);
	emb_begin(&c, SW_WT_Q8_0, 640, 262144, 262144, sqrtf(640.0f), 128);
	oh_nvrtc(&c);
	oh_end(&c);
	for (int ti = 0; ti < N_TYPES; ti++) {
		emb_begin(&c, TYPES[ti], 4096, 128256, 128256, 1.0f, 128);
		oh_nvrtc(&c);
		oh_end(&c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embedding_gguf),
		cmocka_unit_test(test_embedding_gguf_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
