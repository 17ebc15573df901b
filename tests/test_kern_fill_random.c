/* fill_random template (random weights, timing only) in the emulator against
 * kernels/ref/fill_random.c, exactly (bit patterns), on awkward lengths (1,
 * 3, 5, 4k+1, one past a block's groups) for f32, fp16 and bf16 outputs, with
 * guard zones, and with a grid smaller than the groups (the grid-stride
 * loop). The reference is checked independently: element e is rebuilt from
 * philox4x32_10 (the known-answer-tested block function, test_philox) with
 * the counter written out by hand, every value lies in (c - a, c + a), the
 * mean and variance of 2^16 draws match the uniform law's (1/2 and 1/12 of
 * the unit interval) within 6 standard errors, and a seed, a buffer or the
 * element change the bits. NVRTC sm_80/sm_90: zero spills. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/emu.h"
#include "kernels/half.h"
#include "kernels/philox.h"
#include "kernels/ref/ref.h"

#include "kern_util.h"

enum { BLOCK = 64 };

static gen_param g_p[] = {
	{.name = "NAME", .type = GEN_PARAM_IDENT},
	{.name = "BLOCK", .type = GEN_PARAM_INT, .i = BLOCK},
};

static const emu_kernel *kern(void)
{
	return load_kernel_ex("fill_random.cu.tmpl", "fill_random", g_p, 2, true);
}

static uint32_t fbits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static void check(uint64_t n, int mode, uint64_t seed, uint32_t buf, float a, float c, unsigned grid)
{
	const size_t es = mode == REF_FILL_F32 ? 4 : 2;
	void *y = emu_alloc(n * es, "y");
	void *want = malloc(n * es);
	assert_non_null(want);
	assert_int_equal(ref_fill_random(want, n, mode, seed, buf, a, c), 0);
	uint64_t vn = n, vseed = seed, vbuf = buf, vmode = (uint64_t)mode, va = fbits(a), vc = fbits(c);
	void *args[] = {&y, &vn, &vseed, &vbuf, &vmode, &va, &vc};
	char what[96];
	snprintf(what, sizeof(what), "fill_random n %llu mode %d grid %u", (unsigned long long)n, mode, grid);
	kern_out o = {.name = "y", .type = mode == REF_FILL_F32 ? KERN_F32 : KERN_U16, .got = y,
	              .want = want, .n = (size_t)n};
	kern_launch_expect(what, kern(), d3(grid, 1, 1), d3(BLOCK, 1, 1), args, &o, 1);
	emu_free(y);
	free(want);
}

static void test_emulator_equals_ref(void **state)
{
	(void)state;
	static const uint64_t lens[] = {1, 3, 5, 4 * 97 + 1, 4 * BLOCK + 1, 4 * BLOCK * 3 - 2};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (int mode = 0; mode < 3; mode++) {
			const uint64_t groups = (lens[i] + 3) / 4;
			const unsigned full = (unsigned)((groups + BLOCK - 1) / BLOCK);
			check(lens[i], mode, 0x123456789abcdefull, (uint32_t)(7 + i), 0.0441941738f, 0.0f, full);
			check(lens[i], mode, 42, 3, 0.0625f, 1.0f, 1); /* one block strides over all */
		}
}

static void test_ref_independent(void **state)
{
	(void)state;
	enum { N = 1 << 16 };
	float *x = malloc(N * sizeof(float));
	uint16_t *h = malloc(N * sizeof(uint16_t)), *b = malloc(N * sizeof(uint16_t));
	assert_non_null(x);
	assert_non_null(h);
	assert_non_null(b);
	const uint64_t seed = 0xfeedface12345ull;
	const float a = 0.25f, c = -0.5f;
	assert_int_equal(ref_fill_random(x, N, REF_FILL_F32, seed, 9, a, c), 0);
	assert_int_equal(ref_fill_random(h, N, REF_FILL_F16, seed, 9, a, c), 0);
	assert_int_equal(ref_fill_random(b, N, REF_FILL_BF16, seed, 9, a, c), 0);
	/* element e from the block function, counter by hand */
	static const uint64_t es[] = {0, 1, 3, 4, 5, 4099, N - 1};
	for (size_t i = 0; i < sizeof(es) / sizeof(es[0]); i++) {
		const uint64_t e = es[i];
		const uint32_t ctr[4] = {(uint32_t)(e / 4), (uint32_t)((e / 4) >> 32), 8u, 9u};
		const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
		uint32_t w[4];
		philox4x32_10(ctr, key, w);
		const double u = ((double)(w[e % 4] >> 9) * 2.0 + 1.0) / 16777216.0; /* (2k+1) 2^-24 */
		const double want = c + a * (2.0 * u - 1.0); /* one rounding: fmaf */
		assert_true(x[e] == (float)want);
		assert_int_equal(h[e], sw_f32_to_half(x[e], 1));
		assert_int_equal(b[e], sw_f32_to_half(x[e], 0));
	}
	double s = 0, s2 = 0;
	for (int i = 0; i < N; i++) {
		assert_true(x[i] > c - a && x[i] < c + a);
		const double v = (x[i] - (c - a)) / (2.0 * a); /* in (0, 1) */
		s += v;
		s2 += v * v;
	}
	const double mean = s / N, var = s2 / N - mean * mean;
	/* standard errors of the mean and of the variance of U(0,1) */
	assert_true(fabs(mean - 0.5) < 6.0 * sqrt(1.0 / 12.0 / N));
	assert_true(fabs(var - 1.0 / 12.0) < 6.0 * sqrt((1.0 / 80.0 - 1.0 / 144.0) / N));
	/* another seed, buffer or element: other bits */
	float y[8], z[8];
	assert_int_equal(ref_fill_random(y, 8, REF_FILL_F32, seed + 1, 9, a, c), 0);
	assert_int_equal(ref_fill_random(z, 8, REF_FILL_F32, seed, 10, a, c), 0);
	assert_memory_not_equal(y, x, sizeof(y));
	assert_memory_not_equal(z, x, sizeof(z));
	assert_true(x[0] != x[1] && x[1] != x[4]);
	assert_int_equal(ref_fill_random(y, 8, 3, seed, 9, a, c), REF_EINVAL);
	free(x);
	free(h);
	free(b);
}

static void test_nvrtc(void **state)
{
	(void)state;
	nvrtc_check_ex("fill_random.cu.tmpl", "fill_random", g_p, 2, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_emulator_equals_ref),
		cmocka_unit_test(test_ref_independent),
		cmocka_unit_test(test_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
