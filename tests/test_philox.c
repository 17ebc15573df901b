/* Philox-4x32-10 and the keyed uniforms: Random123 known-answer vectors, the
 * documented counter/key layout, the open-interval guarantee of the float and
 * double conversions over edge words (and every float bucket), and chi-square
 * uniformity of the keyed draws along each counter/key axis. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "kernels/philox.h"

/* From Random123 examples/kat_vectors ("philox4x32 10" lines): ctr[4] key[2]
 * -> out[4]. Cross-checked against three independent copies of the file. */
static void test_kat(void **state)
{
	static const uint32_t kat[3][10] = {
		{0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
		 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
		{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
		 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
		{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
		 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
	};
	(void)state;
	for (int v = 0; v < 3; v++) {
		uint32_t out[4];
		philox4x32_10(&kat[v][0], &kat[v][4], out);
		for (int i = 0; i < 4; i++)
			assert_int_equal(out[i], kat[v][6 + i]);
		/* out may alias ctr */
		uint32_t io[4] = {kat[v][0], kat[v][1], kat[v][2], kat[v][3]};
		philox4x32_10(io, &kat[v][4], io);
		for (int i = 0; i < 4; i++)
			assert_int_equal(io[i], kat[v][6 + i]);
	}
}

/* The layout the CUDA kernels must reproduce: ctr = {iteration, position,
 * purpose, lane}, key = {seed lo, seed hi}; uniforms from lane 0. */
static void test_layout(void **state)
{
	const uint64_t seed = 0x0123456789abcdefull;
	(void)state;
	for (uint32_t lane = 0; lane < 3; lane++) {
		uint32_t a[4], b[4];
		const uint32_t ctr[4] = {17, 4242, SW_RNG_RESIDUAL, lane};
		const uint32_t key[2] = {0x89abcdefu, 0x01234567u};
		sw_rand_u32x4(seed, 17, 4242, SW_RNG_RESIDUAL, lane, a);
		philox4x32_10(ctr, key, b);
		for (int i = 0; i < 4; i++)
			assert_int_equal(a[i], b[i]);
		if (lane == 0) {
			assert_true(sw_uniform(seed, 17, 4242, SW_RNG_RESIDUAL) == sw_u32_to_uniform(b[0]));
			assert_true(sw_uniform_double(seed, 17, 4242, SW_RNG_RESIDUAL) ==
			            sw_u64_to_uniform_double(b[0], b[1]));
		}
	}
	/* The purposes are distinct stream selectors. */
	const uint32_t purposes[] = {SW_RNG_DRAFT_SAMPLE, SW_RNG_ACCEPT, SW_RNG_RESIDUAL, SW_RNG_BONUS,
	                             SW_RNG_TARGET_SAMPLE, SW_RNG_EXPAND, SW_RNG_SPECHUB2};
	for (int i = 0; i < 7; i++)
		for (int j = i + 1; j < 7; j++) {
			assert_int_not_equal(purposes[i], purposes[j]);
			assert_true(sw_uniform(seed, 3, 5, purposes[i]) != sw_uniform(seed, 3, 5, purposes[j]));
		}
	assert_true(SW_RNG_PURPOSE_COUNT > SW_RNG_SPECHUB2);
}

/* Strictly inside (0,1) at the extreme words, exact symmetry u(~x) = 1 - u(x),
 * and, over all 2^23 float buckets, strictly increasing and in range. */
static void test_open_interval(void **state)
{
	static const uint32_t edge[] = {0x00000000, 0x00000001, 0x000001ff, 0x00000200,
	                                0x7fffffff, 0x80000000, 0xfffffdff, 0xfffffe00,
	                                0xfffffffe, 0xffffffff};
	(void)state;
	for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
		float u = sw_u32_to_uniform(edge[i]);
		assert_true(u > 0.0f && u < 1.0f);
		assert_true(u + sw_u32_to_uniform(~edge[i]) == 1.0f);
		assert_true(logf(u) < 0.0f && isfinite(logf(u)) && isfinite(logf(1.0f - u)));
		for (size_t j = 0; j < sizeof(edge) / sizeof(edge[0]); j++) {
			double d = sw_u64_to_uniform_double(edge[i], edge[j]);
			assert_true(d > 0.0 && d < 1.0);
			assert_true(d + sw_u64_to_uniform_double(~edge[i], ~edge[j]) == 1.0);
		}
	}
	assert_true(sw_u32_to_uniform(0) == ldexpf(1.0f, -24));
	assert_true(sw_u32_to_uniform(0xffffffffu) == 1.0f - ldexpf(1.0f, -24));
	assert_true(sw_u64_to_uniform_double(0, 0) == ldexp(1.0, -53));
	assert_true(sw_u64_to_uniform_double(0xffffffffu, 0xffffffffu) == 1.0 - ldexp(1.0, -53));

	float prev = 0.0f;
	for (uint32_t k = 0; k < (1u << 23); k++) {
		float u = sw_u32_to_uniform(k << 9);
		if (!(u > prev && u < 1.0f))
			fail_msg("bucket %u: u = %a after %a", k, (double)u, (double)prev);
		prev = u;
	}
}

/* Pearson chi-square with 64 equiprobable bins over 2^16 draws (expected 1024
 * per bin, df = 63). Critical value at significance 1e-6: 131.37 (upper
 * regularised incomplete gamma Q(31.5, x/2) = 1e-6, solved numerically by
 * bisection on a continued-fraction evaluation; Wilson-Hilferty gives 131.7).
 * Inputs are fixed, so the test is deterministic; the bound says how unlikely
 * a failure would be for a good generator. */
#define CHI_BINS 64
#define CHI_DRAWS (1 << 16)
#define CHI_CRIT_1E6_DF63 131.37

enum axis { AXIS_POSITION, AXIS_ITERATION, AXIS_SEED };

static double chi_square(enum axis ax, int use_double)
{
	unsigned counts[CHI_BINS] = {0};
	for (uint32_t i = 0; i < CHI_DRAWS; i++) {
		uint64_t seed = 0x5eed5eed12345678ull;
		uint32_t it = 9, pos = 31;
		if (ax == AXIS_POSITION)
			pos = i;
		else if (ax == AXIS_ITERATION)
			it = i;
		else
			seed += (uint64_t)i << 32 | i; /* both key words move */
		double u = use_double ? sw_uniform_double(seed, it, pos, SW_RNG_ACCEPT)
		                      : (double)sw_uniform(seed, it, pos, SW_RNG_ACCEPT);
		assert_true(u > 0.0 && u < 1.0);
		counts[(int)(u * CHI_BINS)]++;
	}
	const double expect = (double)CHI_DRAWS / CHI_BINS;
	double chi = 0.0;
	for (int b = 0; b < CHI_BINS; b++)
		chi += (counts[b] - expect) * (counts[b] - expect) / expect;
	return chi;
}

static void test_chi_square(void **state)
{
	(void)state;
	for (int ax = AXIS_POSITION; ax <= AXIS_SEED; ax++)
		for (int dbl = 0; dbl < 2; dbl++) {
			double chi = chi_square((enum axis)ax, dbl);
			if (!(chi < CHI_CRIT_1E6_DF63))
				fail_msg("axis %d double %d: chi2 = %.2f >= %.2f", ax, dbl, chi,
				         CHI_CRIT_1E6_DF63);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kat),
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_open_interval),
		cmocka_unit_test(test_chi_square),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
