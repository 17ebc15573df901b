/* kernels/half.h against an independent model of the two formats: values
 * decoded with ldexp from the bit fields, and fp32 -> 16-bit rounding done
 * in double (frexp for the binade, the quantum 2^(e - mantissa bits) clamped
 * at the subnormal exponent, round half to even by floor and an explicit
 * tie rule, overflow where the rounded value reaches 2^(emax + 1)). Covered:
 * every fp16 and bf16 bit pattern (decode, and the round trip 16 -> 32 -> 16
 * with NaNs quieted as documented), hand-picked edge cases (ties at 1, 2048,
 * the subnormal boundary and zero, overflow, NaN, fp32 subnormals), the
 * midpoints between every pair of adjacent finite fp16 values and their
 * neighbours one fp32 ulp either side, and a strided sweep of fp32 bit
 * patterns for both formats. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/half.h"

/* print a mismatch, count 1 */
#define FAIL(...) (print_error(__VA_ARGS__), 1)

/* The two formats: mantissa bits, exponent bits, bias. */
typedef struct fmt {
	const char *name;
	int mbits, ebits, bias;
} fmt;

static const fmt F16 = {"fp16", 10, 5, 15};
static const fmt BF16 = {"bf16", 7, 8, 127};

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* The value of 16-bit pattern h, from its fields (NaN for NaN). */
static double indep_decode(const fmt *F, uint16_t h)
{
	const int emax_field = (1 << F->ebits) - 1;
	const int s = h >> 15, e = (h >> F->mbits) & emax_field, m = h & ((1 << F->mbits) - 1);
	double v;
	if (e == emax_field)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp((double)m, 1 - F->bias - F->mbits);
	else
		v = ldexp(1.0 + ldexp((double)m, -F->mbits), e - F->bias);
	return s ? -v : v;
}

/* a (finite, >= 0) rounded to the format, half to even; INFINITY when the
 * rounded value is not representable. */
static double indep_round(const fmt *F, double a)
{
	if (a == 0.0)
		return 0.0;
	const int emin = 1 - F->bias, emax = (1 << F->ebits) - 2 - F->bias;
	int e;
	(void)frexp(a, &e); /* a in [2^(e-1), 2^e) */
	int ex = e - 1 < emin ? emin : e - 1;
	const double q = ldexp(1.0, ex - F->mbits); /* the spacing at a */
	const double x = a / q;                      /* exact: a has <= 24 bits */
	const double fl = floor(x), fr = x - fl;
	double n = fl;
	if (fr > 0.5 || (fr == 0.5 && fmod(fl, 2.0) != 0.0))
		n = fl + 1.0;
	const double v = n * q;
	return v >= ldexp(1.0, emax + 1) ? INFINITY : v;
}

static uint16_t to16(const fmt *F, float f)
{
	return F == &F16 ? sw_f32_to_f16(f) : sw_f32_to_bf16(f);
}

static float from16(const fmt *F, uint16_t h)
{
	return F == &F16 ? sw_f16_to_f32(h) : sw_bf16_to_f32(h);
}

static int is_nan16(const fmt *F, uint16_t h)
{
	const int emax_field = (1 << F->ebits) - 1;
	return ((h >> F->mbits) & emax_field) == emax_field && (h & ((1 << F->mbits) - 1));
}

/* One fp32 input: the conversion equals the independent rounding (sign of
 * zero included); a NaN gives a quiet NaN of the same sign. Returns 1 on a
 * mismatch (printed), else 0. */
static int check_one(const fmt *F, float f)
{
	const uint16_t got = to16(F, f);
	const int neg = signbit(f) != 0;
	if (isnan(f)) {
		const uint16_t quiet = (uint16_t)(1u << (F->mbits - 1));
		if (is_nan16(F, got) && (got & quiet) && (got >> 15) == neg)
			return 0;
		print_error("%s: NaN %#010x -> %#06x, expected a quiet NaN of the same sign\n", F->name,
		            f32_bits(f), got);
		return 1;
	}
	double want = indep_round(F, fabs((double)f));
	want = neg ? -want : want;
	const double dec = indep_decode(F, got);
	if (!is_nan16(F, got) && memcmp(&dec, &want, sizeof(dec)) == 0)
		return 0;
	print_error("%s: %a (%#010x) -> %#06x = %a, expected %a\n", F->name, (double)f, f32_bits(f),
	            got, dec, want);
	return 1;
}

/* Every 16-bit pattern: decoding equals the field model (a NaN keeps its
 * sign and payload), and 16 -> 32 -> 16 is the identity, a NaN coming back
 * quiet with its sign (fp16: the canonical quiet payload; bf16: the payload
 * with the quiet bit set). */
static void exhaustive(const fmt *F)
{
	int bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		const float f = from16(F, (uint16_t)h);
		const double want = indep_decode(F, (uint16_t)h), got = (double)f;
		if (is_nan16(F, (uint16_t)h)) {
			const uint32_t pay = f32_bits(f) >> (23 - F->mbits) & ((1u << F->mbits) - 1);
			if (!isnan(f) || (signbit(f) != 0) != (h >> 15) || pay != (h & ((1u << F->mbits) - 1)))
				bad += FAIL("%s %#06x: decoded %#010x\n", F->name, h, f32_bits(f));
			const uint16_t back = to16(F, f);
			const uint16_t want16 = F == &F16 ? (uint16_t)((h & 0x8000) | 0x7e00)
			                                  : (uint16_t)(h | 0x40);
			if (back != want16)
				bad += FAIL("%s %#06x: round trip %#06x, expected %#06x\n", F->name, h,
				                   back, want16);
			continue;
		}
		if (memcmp(&want, &got, sizeof(got)))
			bad += FAIL("%s %#06x: decoded %a, expected %a\n", F->name, h, got, want);
		const uint16_t back = to16(F, f);
		if (back != h)
			bad += FAIL("%s %#06x: round trip %#06x\n", F->name, h, back);
	}
	assert_int_equal(bad, 0);
}

static void test_f16_exhaustive(void **state)
{
	(void)state;
	exhaustive(&F16);
}

static void test_bf16_exhaustive(void **state)
{
	(void)state;
	exhaustive(&BF16);
}

/* Hand-picked fp32 -> fp16 cases, each also checked against a literal
 * expected encoding (so the independent model is itself pinned). */
static void test_f16_edges(void **state)
{
	(void)state;
	static const struct {
		float f;
		uint16_t h;
	} cases[] = {
		{0.0f, 0x0000},
		{-0.0f, 0x8000},
		{1.0f, 0x3c00},
		{-2.0f, 0xc000},
		{1.0f + 0x1p-11f, 0x3c00},       /* tie between 1 and 1 + 2^-10: even, down */
		{1.0f + 3 * 0x1p-11f, 0x3c02},   /* tie, odd below: up */
		{1.0f + 0x1p-11f + 0x1p-23f, 0x3c01}, /* just above the tie */
		{2049.0f, 0x6800},               /* tie between 2048 and 2050: 2048 */
		{2051.0f, 0x6802},               /* tie between 2050 and 2052: 2052 */
		{65504.0f, 0x7bff},              /* the largest finite */
		{65519.996f, 0x7bff},            /* just below the overflow tie */
		{65520.0f, 0x7c00},              /* tie between 65504 and 2^16: even, inf */
		{65536.0f, 0x7c00},
		{1e30f, 0x7c00},
		{-1e30f, 0xfc00},
		{INFINITY, 0x7c00},
		{-INFINITY, 0xfc00},
		{0x1p-14f, 0x0400},              /* the smallest normal */
		{0x1p-14f - 0x1p-24f, 0x03ff},   /* the largest subnormal */
		{0x1p-14f - 0x1p-25f, 0x0400},   /* tie between them: even, the normal */
		{0x1p-24f, 0x0001},              /* the smallest subnormal */
		{0x1p-25f, 0x0000},              /* tie with zero: even, zero */
		{-0x1p-25f, 0x8000},
		{0x1.000002p-25f, 0x0001},       /* just above the tie */
		{0x1.8p-25f, 0x0001},
		{3 * 0x1p-25f, 0x0002},          /* tie between 1 and 2 ulps: 2 */
		{5 * 0x1p-25f, 0x0002},          /* tie between 2 and 3: 2 */
		{7 * 0x1p-25f, 0x0004},          /* tie between 3 and 4: 4 */
		{1e-10f, 0x0000},
		{0x1p-149f, 0x0000},             /* the smallest fp32 subnormal */
		{-0x1p-126f, 0x8000},
		{0.1f, 0x2e66},
		{3.14159265f, 0x4248},
	};
	int bad = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const uint16_t got = sw_f32_to_f16(cases[i].f);
		if (got != cases[i].h)
			bad += FAIL("fp16 case %zu: %a -> %#06x, expected %#06x\n", i,
			                   (double)cases[i].f, got, cases[i].h);
		bad += check_one(&F16, cases[i].f);
	}
	const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu,
	                         0x7fa00000u};
	for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++)
		bad += check_one(&F16, bits_f32(nans[i]));
	assert_int_equal(bad, 0);
}

static void test_bf16_edges(void **state)
{
	(void)state;
	static const struct {
		float f;
		uint16_t h;
	} cases[] = {
		{0.0f, 0x0000},
		{-0.0f, 0x8000},
		{1.0f, 0x3f80},
		{1.0f + 0x1p-8f, 0x3f80},           /* tie, even below: down */
		{1.0f + 3 * 0x1p-8f, 0x3f82},       /* tie, odd below: up */
		{1.0f + 0x1p-8f + 0x1p-20f, 0x3f81},
		{0x1.fep127f, 0x7f7f},              /* the largest finite bf16 */
		{0x1.ffp127f, 0x7f80},              /* tie with 2^128: even, inf */
		{0x1.fefffep127f, 0x7f7f},
		{0x1.fffffep127f, 0x7f80},
		{INFINITY, 0x7f80},
		{-INFINITY, 0xff80},
		{0x1p-133f, 0x0001},                /* the smallest bf16 subnormal */
		{0x1p-134f, 0x0000},                /* tie with zero */
		{0x1.8p-134f, 0x0001},
		{3 * 0x1p-134f, 0x0002},            /* tie between 1 and 2 */
		{0x1p-149f, 0x0000},
		{0x1p-126f, 0x0080},                /* the smallest normal */
	};
	int bad = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const uint16_t got = sw_f32_to_bf16(cases[i].f);
		if (got != cases[i].h)
			bad += FAIL("bf16 case %zu: %a -> %#06x, expected %#06x\n", i,
			                   (double)cases[i].f, got, cases[i].h);
		bad += check_one(&BF16, cases[i].f);
	}
	const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu,
	                         0x7fa00000u};
	for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++)
		bad += check_one(&BF16, bits_f32(nans[i]));
	assert_int_equal(bad, 0);
}

/* Every tie between adjacent finite fp16 values (and the overflow tie past
 * 65504), both signs, and the fp32 neighbours on either side of each. */
static void test_f16_all_ties(void **state)
{
	(void)state;
	int bad = 0;
	for (uint32_t h = 0; h < 0x7c00; h++) {
		const double a = indep_decode(&F16, (uint16_t)h);
		const double b = h + 1 < 0x7c00 ? indep_decode(&F16, (uint16_t)(h + 1)) : 65536.0;
		const float mid = (float)((a + b) / 2); /* exact: 12 significant bits at most */
		assert_true((double)mid == (a + b) / 2);
		const float probe[] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
		for (int i = 0; i < 3; i++) {
			bad += check_one(&F16, probe[i]);
			bad += check_one(&F16, -probe[i]);
		}
	}
	assert_int_equal(bad, 0);
}

/* A strided sweep of fp32 patterns (a prime stride, so every exponent and
 * many mantissa residues are hit), both formats. */
static void test_sweep(void **state)
{
	(void)state;
	int bad = 0;
	for (uint64_t u = 0; u < (1ull << 32) && bad < 20; u += 1021) {
		const float f = bits_f32((uint32_t)u);
		bad += check_one(&F16, f);
		bad += check_one(&BF16, f);
	}
	assert_int_equal(bad, 0);
}

/* The is_f16 dispatchers pick the right format. */
static void test_dispatch(void **state)
{
	(void)state;
	const float xs[] = {1.0f / 3.0f, -1234.5f, 0x1p-20f, 70000.0f};
	for (size_t i = 0; i < sizeof(xs) / sizeof(xs[0]); i++) {
		assert_int_equal(sw_f32_to_half(xs[i], 1), sw_f32_to_f16(xs[i]));
		assert_int_equal(sw_f32_to_half(xs[i], 0), sw_f32_to_bf16(xs[i]));
	}
	for (uint32_t h = 0; h < 65536; h += 97) {
		const float a = sw_half_to_f32((uint16_t)h, 1), b = sw_f16_to_f32((uint16_t)h);
		const float c = sw_half_to_f32((uint16_t)h, 0), d = sw_bf16_to_f32((uint16_t)h);
		assert_memory_equal(&a, &b, sizeof(a));
		assert_memory_equal(&c, &d, sizeof(c));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f16_exhaustive),
		cmocka_unit_test(test_bf16_exhaustive),
		cmocka_unit_test(test_f16_edges),
		cmocka_unit_test(test_bf16_edges),
		cmocka_unit_test(test_f16_all_ties),
		cmocka_unit_test(test_sweep),
		cmocka_unit_test(test_dispatch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
