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

#include "ref.h"

/* ---- shared by the ref-op tests (each file carries its own copy so that one
 * test binary never depends on another test's code) ---- */

/* fp32 unit roundoff u = 2^-24 and gamma_n = n u / (1 - n u) (Higham,
 * "Accuracy and Stability of Numerical Algorithms", 3.1): a length-n fp32
 * dot product, in any summation order, with or without FMA, lies within
 * gamma_n * sum |a_i b_i| of the exact value. The references below are
 * computed in double from the same fp32 inputs, so their own error (~n 2^-53)
 * is negligible against these bounds. */
#define U32 0x1p-24
static inline double gamma_n(int n)
{
	return n * U32 / (1.0 - n * U32);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
/* splitmix64 -> uniform in [-1, 1); independent of the library's Philox. */
static inline double rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1p-52 - 1.0;
}

static inline void fill(float *x, size_t n, double scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(rnd() * scale);
}

/* Guard zones: GUARD floats of a NaN bit pattern no op produces on either
 * side of every output; any write outside the output shows up as a change. */
#define GUARD 16
static const uint32_t CANARY = 0x7fc0deadu;

static inline float *galloc(size_t n)
{
	float *b = malloc((n + 2 * GUARD) * sizeof(*b));
	assert_non_null(b);
	for (size_t i = 0; i < GUARD; i++) {
		memcpy(&b[i], &CANARY, sizeof(CANARY));
		memcpy(&b[GUARD + n + i], &CANARY, sizeof(CANARY));
	}
	return b + GUARD;
}

static inline void gcheck(const char *what, const float *p, size_t n)
{
	for (size_t i = 0; i < GUARD; i++) {
		if (memcmp(&p[-1 - (ptrdiff_t)i], &CANARY, sizeof(CANARY)) != 0)
			fail_msg("%s: guard before the buffer overwritten at -%zu", what, i + 1);
		if (memcmp(&p[n + i], &CANARY, sizeof(CANARY)) != 0)
			fail_msg("%s: guard after the buffer overwritten at +%zu", what, i);
	}
}

static inline void gfree(float *p)
{
	free(p - GUARD);
}

/* Every element finite and within its derived bound; then the NMSE, checked
 * against the NMSE those same bounds imply (sum bound^2 / sum ref^2), so the
 * summary statistic and the elementwise test cannot disagree silently. */
static inline void check_close(const char *what, const float *got, const double *ref, const double *bound,
                        size_t n)
{
	double se = 0.0, sr = 0.0, sb = 0.0, max_abs = 0.0, max_bound = 0.0;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(got[i]))
			fail_msg("%s[%zu]: %g is not finite (ref %g)", what, i, (double)got[i], ref[i]);
		double d = fabs((double)got[i] - ref[i]);
		if (!(d <= bound[i]))
			fail_msg("%s[%zu]: got %.9g ref %.9g |diff| %.3g > bound %.3g", what, i,
			         (double)got[i], ref[i], d, bound[i]);
		se += d * d;
		sr += ref[i] * ref[i];
		sb += bound[i] * bound[i];
		max_abs = fmax(max_abs, d);
		max_bound = fmax(max_bound, bound[i]);
	}
	if (sr > 0.0 && !(se / sr <= sb / sr))
		fail_msg("%s: NMSE %.3g > derived %.3g", what, se / sr, sb / sr);
	if (!(max_abs <= max_bound))
		fail_msg("%s: max |diff| %.3g > max bound %.3g", what, max_abs, max_bound);
}
/* ---- end of shared helpers ---- */

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
