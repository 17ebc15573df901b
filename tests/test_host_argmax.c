/* The host argmax (runtime/device/host_argmax.c) against kernels/ref's
 * ref_argmax_row, the rule every path must return exactly, on every path
 * the CPU has: lengths 1 .. 100 (every vector tail) and 49152 (SmolLM2's
 * vocabulary), values drawn from a small set so that ties are common (-0
 * and +0, +-inf, NaN, repeated finite values), NaN at index 0, rows of NaN,
 * of -inf and of zeros of both signs, the maximum in the last element; and
 * the rule itself stated independently (the first index of the largest
 * non-NaN value, 0 when x[0] is NaN) on the same rows. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "device/host_argmax.h"
#include "device/host_gemm.h"
#include "kernels/ref/ref.h"
#include "testutil.h"

static uint64_t rs = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	return tu_xs32(&rs);
}

/* the rule, written out: first index of the largest non-NaN value */
static int rule(const float *x, int n)
{
	if (n < 1 || isnan(x[0]))
		return 0;
	float mx = x[0];
	for (int i = 1; i < n; i++)
		if (!isnan(x[i]) && x[i] > mx)
			mx = x[i];
	for (int i = 0; i < n; i++)
		if (x[i] == mx)
			return i;
	return -1;
}

static void check_row(const float *x, int n)
{
	const int want = ref_argmax_row(x, n);
	assert_int_equal(rule(x, n), want);
	const int paths[] = {HG_PATH_PORTABLE, HG_PATH_AVX2, HG_PATH_AVX512, HG_PATH_AUTO};
	for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++)
		if (hg_path_available(paths[p]))
			assert_int_equal(hg_argmax_row(x, n, paths[p]), want);
}

static float pick(int kind)
{
	static const float set[] = {0.0f, -0.0f, 1.5f, -2.0f, 7.25f, 7.25f, -INFINITY, INFINITY};
	switch (kind) {
	case 0: return set[rnd() % 8];
	case 1: return set[rnd() % 6]; /* finite only */
	case 2: return rnd() % 7 ? set[rnd() % 6] : NAN;
	default: return (float)((int)(rnd() % 2001) - 1000) / 8.0f; /* many values, some ties */
	}
}

static void test_random_rows(void **state)
{
	(void)state;
	float *x = malloc(sizeof(*x) * 49152);
	assert_non_null(x);
	for (int n = 1; n <= 100; n++)
		for (int rep = 0; rep < 40; rep++) {
			const int kind = rep % 4;
			for (int i = 0; i < n; i++)
				x[i] = pick(kind);
			if (rep % 5 == 4) /* the largest value last (the tail) */
				x[n - 1] = 1e30f;
			if (rep % 9 == 8)
				x[0] = NAN;
			check_row(x, n);
		}
	for (int rep = 0; rep < 8; rep++) {
		for (int i = 0; i < 49152; i++)
			x[i] = pick(3);
		if (rep & 1)
			x[rnd() % 49152] = 500.0f; /* a unique maximum anywhere */
		check_row(x, 49152);
	}
	free(x);
}

static void test_special_rows(void **state)
{
	(void)state;
	float x[67];
	for (int n = 1; n <= 67; n++) {
		for (int i = 0; i < n; i++)
			x[i] = NAN;
		check_row(x, n);
		for (int i = 0; i < n; i++)
			x[i] = -INFINITY;
		check_row(x, n);
		for (int i = 0; i < n; i++)
			x[i] = i % 3 ? 0.0f : -0.0f; /* -0 first: ref keeps index 0 */
		check_row(x, n);
		for (int i = 0; i < n; i++)
			x[i] = i ? NAN : -INFINITY; /* only x[0] is a number */
		check_row(x, n);
		if (n > 1) {
			x[n - 1] = -1.0f; /* -inf, NaN ..., -1 */
			check_row(x, n);
		}
	}
	assert_int_equal(hg_argmax_row(x, 0, HG_PATH_AUTO), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_rows),
		cmocka_unit_test(test_special_rows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
