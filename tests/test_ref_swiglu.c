/* ref_swiglu and ref_add against double loops: odd lengths, large-magnitude
 * gates (expf overflow and underflow regimes), in-place aliasing, guard zones
 * and bounds derived from fp32 rounding. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/ref/ref.h"

#include "check.h"

/* SwiGLU bound, relative to |y|: expf within 1 ulp (2u relative), 1 + e one
 * rounding, so the denominator carries <= 3u; the division and the product
 * with up one u each: 5u first order, +1u for second-order terms. Where the
 * exact result is below the smallest normal float (gate <= -88 or so, where
 * expf(-g) overflows and silu flushes to -0) an absolute 2^-126 is allowed. */
static void check_swiglu(size_t n, double gscale, int alias)
{
	float *g = galloc(n), *u = galloc(n);
	float *y = alias == 1 ? g : alias == 2 ? u : galloc(n);
	float *g0 = malloc(n * sizeof(*g0)), *u0 = malloc(n * sizeof(*u0));
	double *ref = malloc(n * sizeof(*ref)), *bound = malloc(n * sizeof(*bound));
	char what[64];

	fill(g, n, gscale);
	fill(u, n, 2.0);
	if (n > 4) { /* the exact extremes, whatever the scale */
		g[0] = 0.0f;
		g[1] = -100.0f;
		g[2] = 100.0f;
		g[3] = -20.0f;
	}
	memcpy(g0, g, n * sizeof(*g));
	memcpy(u0, u, n * sizeof(*u));
	ref_swiglu(y, g, u, n);
	for (size_t i = 0; i < n; i++) {
		ref[i] = (double)g0[i] / (1.0 + exp(-(double)g0[i])) * u0[i];
		bound[i] = 6.0 * U32 * fabs(ref[i]) + 0x1p-126;
	}
	snprintf(what, sizeof(what), "swiglu n%zu scale%g alias%d", n, gscale, alias);
	check_close(what, y, ref, bound, n);
	gcheck(what, y, n);
	if (alias != 1)
		assert_memory_equal(g, g0, n * sizeof(*g));
	if (alias != 2)
		assert_memory_equal(u, u0, n * sizeof(*u));
	if (alias == 0)
		gfree(y);
	gfree(g);
	gfree(u);
	free(g0);
	free(u0);
	free(ref);
	free(bound);
}

static void test_swiglu(void **state)
{
	static const size_t ns[] = {1, 33, 111, 260, 1537};
	(void)state;
	for (int a = 0; a < 5; a++)
		for (int alias = 0; alias < 3; alias++) {
			check_swiglu(ns[a], 4.0, alias);
			check_swiglu(ns[a], 60.0, alias);
		}
}

/* Sum of two floats: exact in double, then one fp32 rounding: u |y|, plus
 * 2^-53 |y| for the double rounding of the reference itself. */
static void check_add(size_t n, int alias)
{
	float *a = galloc(n), *b = galloc(n);
	float *y = alias == 1 ? a : alias == 2 ? b : galloc(n);
	double *ref = malloc(n * sizeof(*ref)), *bound = malloc(n * sizeof(*bound));
	char what[48];

	fill(a, n, 1e3);
	fill(b, n, 1.0);
	for (size_t i = 0; i < n; i++) {
		ref[i] = (double)a[i] + b[i];
		bound[i] = (U32 + 0x1p-53) * fabs(ref[i]);
	}
	ref_add(y, a, b, n);
	snprintf(what, sizeof(what), "add n%zu alias%d", n, alias);
	check_close(what, y, ref, bound, n);
	gcheck(what, y, n);
	if (alias == 0)
		gfree(y);
	gfree(a);
	gfree(b);
	free(ref);
	free(bound);
}

static void test_add(void **state)
{
	static const size_t ns[] = {1, 33, 111, 260};
	(void)state;
	for (int a = 0; a < 4; a++)
		for (int alias = 0; alias < 3; alias++)
			check_add(ns[a], alias);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_swiglu),
		cmocka_unit_test(test_add),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
