/* The weight-format table (runtime/core/wformat.h) against what it claims:
 * the scale fields it lists for the finite scan are exactly the float fields
 * its dequantizer reads (a non-finite value planted in a listed field makes
 * the block's floats non-finite, one planted anywhere else does not); the
 * scan of the plain types agrees with isfinite() of each converted element,
 * every binary16 and bfloat16 pattern included; the host GEMMs' block sizes
 * and names are the table's. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/err.h"
#include "core/wformat.h"
#include "device/host_gemm.h"
#include "kernels/half.h"

#include "check.h"

static void st16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* A random block of f with every listed scale a finite half in (-1, 1). */
static void random_block(const sw_wformat *f, uint8_t *b)
{
	for (uint32_t i = 0; i < f->bytes; i++)
		b[i] = (uint8_t)((rnd() + 1.0) * 128.0);
	for (int s = 0; s < f->n_scales; s++) {
		if (f->scale_bytes == 4) {
			float x = (float)rnd();
			memcpy(b + f->scale_off[s], &x, 4);
		} else {
			st16(b + f->scale_off[s], sw_f32_to_f16((float)rnd()));
		}
	}
}

static bool all_finite(const float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(y[i]))
			return false;
	return true;
}

/* Whether bytes [o, o + w) overlap a listed scale field. */
static bool in_scale(const sw_wformat *f, uint32_t o, uint32_t w)
{
	for (int s = 0; s < f->n_scales; s++)
		if (o < f->scale_off[s] + f->scale_bytes && f->scale_off[s] < o + w)
			return true;
	return false;
}

static void test_scales_are_the_float_fields(void **state)
{
	int checked = 0;
	for (uint32_t t = 0; t < 64; t++) {
		const sw_wformat *f = sw_wformat_get(t);
		if (!f || f->scan != SW_WSCAN_SCALES)
			continue;
		assert_true(f->n_scales >= 1 && f->n_scales <= SW_WF_MAX_SCALES);
		for (int s = 0; s < f->n_scales; s++)
			assert_true(f->scale_off[s] + f->scale_bytes <= f->bytes);
		uint8_t blk[3][512];
		float y[3 * 256];
		for (int rep = 0; rep < 20; rep++) {
			/* three blocks; the middle one is spoiled */
			for (int k = 0; k < 3; k++)
				random_block(f, blk[k]);
			uint8_t buf[3 * 512];
			for (int k = 0; k < 3; k++)
				memcpy(buf + k * f->bytes, blk[k], f->bytes);
			assert_int_equal(sw_wformat_find_nonfinite(f, buf, 3 * (uint64_t)f->block), -1);
			if (f->dequant) {
				assert_int_equal(sw_wformat_dequant(t, buf, 3 * (uint64_t)f->block, y), 0);
				if (!all_finite(y, 3 * (size_t)f->block))
					fail_msg("%s: finite scales, yet a non-finite float", f->name);
			}
			/* a listed field: NaN or +-inf is found at the block's first
			 * element, and the dequantizer reads it as a float */
			for (int s = 0; s < f->n_scales; s++) {
				static const uint32_t bad16[] = {0x7c00, 0xfc00, 0x7e00, 0x7c01};
				static const uint32_t bad32[] = {0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001};
				uint8_t *p = buf + f->bytes + f->scale_off[s];
				uint8_t keep[4];
				memcpy(keep, p, f->scale_bytes);
				for (int v = 0; v < 4; v++) {
					if (f->scale_bytes == 4)
						memcpy(p, &bad32[v], 4);
					else
						st16(p, (uint16_t)bad16[v]);
					if (sw_wformat_find_nonfinite(f, buf, 3 * (uint64_t)f->block) != (int64_t)f->block)
						fail_msg("%s: non-finite scale %d (offset %u) not found at element %u", f->name,
						         s, f->scale_off[s], f->block);
					if (f->dequant) {
						assert_int_equal(sw_wformat_dequant(t, buf, 3 * (uint64_t)f->block, y), 0);
						if (all_finite(y + f->block, f->block))
							fail_msg("%s: scale field at offset %u is not what the dequantizer "
							         "reads as a float", f->name, f->scale_off[s]);
					}
				}
				memcpy(p, keep, f->scale_bytes);
			}
			/* any other 16-bit position: an inf pattern there is a quant,
			 * never a float (the dequantizer agrees) */
			for (uint32_t o = 0; o + 2 <= f->bytes; o++) {
				if (in_scale(f, o, 2))
					continue;
				uint8_t keep[2] = {buf[f->bytes + o], buf[f->bytes + o + 1]};
				st16(buf + f->bytes + o, 0x7c00);
				assert_int_equal(sw_wformat_find_nonfinite(f, buf, 3 * (uint64_t)f->block), -1);
				if (f->dequant) {
					assert_int_equal(sw_wformat_dequant(t, buf, 3 * (uint64_t)f->block, y), 0);
					if (!all_finite(y, 3 * (size_t)f->block))
						fail_msg("%s: bytes %u..%u hold a float the table does not list", f->name, o,
						         o + 1);
				}
				buf[f->bytes + o] = keep[0];
				buf[f->bytes + o + 1] = keep[1];
			}
		}
		checked += f->dequant != NULL;
	}
	/* Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q6_K: every block type real files need */
	assert_int_equal(checked, 7);
}

/* The first index whose value is not finite, by conversion (the reference). */
static int64_t first_bad(const sw_wformat *f, const uint8_t *p, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		double v;
		if (f->scan == SW_WSCAN_F32) {
			float x;
			memcpy(&x, p + 4 * i, 4);
			v = x;
		} else if (f->scan == SW_WSCAN_F64) {
			memcpy(&v, p + 8 * i, 8);
		} else {
			uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
			v = f->scan == SW_WSCAN_F16 ? sw_f16_to_f32(h) : sw_bf16_to_f32(h);
		}
		if (!isfinite(v))
			return (int64_t)i;
	}
	return -1;
}

/* Every binary16 and bfloat16 pattern alone and in every lane of a word. */
static void test_plain_exhaustive(void **state)
{
	const sw_wformat *h = sw_wformat_get(SW_WT_F16), *b = sw_wformat_get(SW_WT_BF16);
	for (uint32_t x = 0; x < 65536; x++) {
		uint8_t buf[16] = {0};
		for (int lane = 0; lane < 8; lane++) {
			memset(buf, 0, sizeof(buf));
			st16(buf + 2 * lane, (uint16_t)x);
			int64_t want = isfinite(sw_f16_to_f32((uint16_t)x)) ? -1 : lane;
			if (sw_wformat_find_nonfinite(h, buf, 8) != want)
				fail_msg("F16 0x%04x in lane %d: expected %lld", x, lane, (long long)want);
			want = isfinite(sw_bf16_to_f32((uint16_t)x)) ? -1 : lane;
			if (sw_wformat_find_nonfinite(b, buf, 8) != want)
				fail_msg("BF16 0x%04x in lane %d: expected %lld", x, lane, (long long)want);
		}
	}
	/* binary32: every exponent with edge mantissas and both signs */
	const sw_wformat *s = sw_wformat_get(SW_WT_F32);
	for (uint32_t e = 0; e < 256; e++)
		for (uint32_t m = 0; m < 4; m++)
			for (uint32_t sg = 0; sg < 2; sg++) {
				static const uint32_t ms[] = {0, 1, 0x400000, 0x7fffff};
				uint32_t u = sg << 31 | e << 23 | ms[m];
				float x, buf[3] = {1, 2, 3};
				memcpy(&x, &u, 4);
				for (int lane = 0; lane < 3; lane++) {
					float w[3] = {buf[0], buf[1], buf[2]};
					w[lane] = x;
					int64_t want = isfinite(x) ? -1 : lane;
					if (sw_wformat_find_nonfinite(s, w, 3) != want)
						fail_msg("F32 0x%08x in lane %d: expected %lld", u, lane, (long long)want);
				}
			}
}

/* Long arrays, unaligned, every length class, bad values at chunk edges,
 * against the element-by-element reference. */
static void test_plain_positions(void **state)
{
	static const uint32_t types[] = {SW_WT_F32, SW_WT_F16, SW_WT_BF16, SW_WT_F64};
	static const uint64_t lens[] = {1, 2, 3, 7, 33, 111, 1023, 1024, 1025, 2049, 4096, 10007};
	uint8_t *mem = malloc(8 * 10007 + 16);
	assert_non_null(mem);
	for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
		const sw_wformat *f = sw_wformat_get(types[ti]);
		for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
			const uint64_t n = lens[li];
			for (int mis = 0; mis < 3; mis++) {
				uint8_t *p = mem + mis; /* unaligned on purpose */
				for (uint64_t i = 0; i < n; i++) {
					const double v = rnd() * 1000.0;
					if (f->scan == SW_WSCAN_F32) {
						float x = (float)v;
						memcpy(p + 4 * i, &x, 4);
					} else if (f->scan == SW_WSCAN_F64) {
						memcpy(p + 8 * i, &v, 8);
					} else {
						st16(p + 2 * i, f->scan == SW_WSCAN_F16 ? sw_f32_to_f16((float)v)
						                                      : sw_f32_to_bf16((float)v));
					}
				}
				assert_int_equal(sw_wformat_find_nonfinite(f, p, n), -1);
				const uint64_t at[] = {0, n - 1, n / 2, 511, 512, 1023, 2047, 2048, 4095};
				for (size_t a = 0; a < sizeof(at) / sizeof(at[0]); a++) {
					if (at[a] >= n)
						continue;
					uint8_t keep[8];
					uint8_t *q = p + at[a] * f->bytes;
					memcpy(keep, q, f->bytes);
					/* +inf, -inf or a NaN, in turn */
					const int kind = (int)(a % 3);
					if (f->scan == SW_WSCAN_F32) {
						float x = kind == 0 ? INFINITY : kind == 1 ? -INFINITY : NAN;
						memcpy(q, &x, 4);
					} else if (f->scan == SW_WSCAN_F64) {
						double x = kind == 0 ? INFINITY : kind == 1 ? -INFINITY : NAN;
						memcpy(q, &x, 8);
					} else {
						float x = kind == 0 ? INFINITY : kind == 1 ? -INFINITY : NAN;
						st16(q, f->scan == SW_WSCAN_F16 ? sw_f32_to_f16(x) : sw_f32_to_bf16(x));
					}
					const int64_t want = first_bad(f, p, n), got = sw_wformat_find_nonfinite(f, p, n);
					assert_int_equal(want, (int64_t)at[a]);
					if (got != want)
						fail_msg("%s, n %llu, offset %d: bad element %llu, scan says %lld", f->name,
						         (unsigned long long)n, mis, (unsigned long long)at[a], (long long)got);
					memcpy(q, keep, f->bytes);
				}
			}
		}
	}
	free(mem);
}

/* The integer types and IQ1_M are never scanned; an unknown type has no row. */
static void test_rows(void **state)
{
	int64_t minus_one = -1;
	uint8_t ones[64];
	memset(ones, 0xff, sizeof(ones));
	static const uint32_t ints[] = {SW_WT_I8, SW_WT_I16, SW_WT_I32, SW_WT_I64};
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(sw_wformat_find_nonfinite(sw_wformat_get(ints[i]), ones, 8), minus_one);
	assert_null(sw_wformat_get(4));
	assert_null(sw_wformat_get(31));
	assert_null(sw_wformat_get(1000));
	assert_int_equal(sw_wformat_block(-1), 0);
	assert_null(sw_wformat_gemm_name(-1));
	assert_int_equal(sw_wformat_nbytes(SW_WT_Q4_K, 255), 0);
	assert_int_equal(sw_wformat_nbytes(SW_WT_Q4_K, 512), 288);
	assert_int_equal(sw_wformat_dequant(SW_WT_Q5_K, ones, 256, NULL), SW_ENOTSUP);
	float y[32];
	assert_int_equal(sw_wformat_dequant(SW_WT_Q8_0, ones, 31, y), SW_EINVAL);
}

/* The host GEMMs' sizes and names are the table's (repacked: the same). */
static void test_gemm_reads_the_table(void **state)
{
	int n = 0;
	for (int t = 0; t < 64; t++) {
		const sw_wformat *f = sw_wformat_get((uint32_t)t);
		if (!f || !f->gemm_name) {
			assert_int_equal(hg_gguf_block(t), 0);
			assert_null(hg_gguf_name(t));
			continue;
		}
		n++;
		assert_int_equal(hg_gguf_block(t), f->block);
		assert_int_equal(hg_gguf_block_bytes(t), f->bytes);
		assert_string_equal(hg_gguf_name(t), f->gemm_name);
	}
	assert_int_equal(n, 6); /* Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K */
	assert_int_equal(hg_gguf_block(HG_GGUF_Q4_1R), 32);
	assert_int_equal(hg_gguf_block_bytes(HG_GGUF_Q8_0R), HG_Q8_BYTES);
	assert_string_equal(hg_gguf_name(HG_GGUF_Q4_0R), "q4_0r");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scales_are_the_float_fields),
		cmocka_unit_test(test_plain_exhaustive),
		cmocka_unit_test(test_plain_positions),
		cmocka_unit_test(test_rows),
		cmocka_unit_test(test_gemm_reads_the_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
