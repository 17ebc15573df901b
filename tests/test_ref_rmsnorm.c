/* ref_rmsnorm against a double loop on awkward shapes, in place and out of
 * place, with a tiny-magnitude row where eps dominates, guard zones, and a
 * per-element bound derived from fp32 rounding. */
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

/* Bound for an fp32 RMSNorm, per element, relative to |y_i|: the sum of
 * squares carries gamma_dim; / dim and + eps one rounding each; sqrt halves
 * the relative error of its argument and adds one rounding; 1/sqrt one;
 * x * r * w two. First order: gamma_dim / 2 + (2/2 + 1 + 1 + 2) u = gamma_dim / 2
 * + 5 u; one more u covers the second-order terms. (The reference sums in
 * double, so it sits well inside this.) */
static void check_rmsnorm(int T, int dim, double xscale, float eps, int in_place)
{
	float *x = galloc((size_t)T * dim), *w = galloc((size_t)dim);
	float *y = in_place ? x : galloc((size_t)T * dim);
	float *x0 = malloc((size_t)T * dim * sizeof(*x0));
	double *ref = malloc((size_t)T * dim * sizeof(*ref));
	double *bound = malloc((size_t)T * dim * sizeof(*bound));
	char what[80];

	fill(x, (size_t)T * dim, xscale);
	for (int i = 0; i < dim; i++)
		w[i] = (float)(1.0 + 0.9 * rnd());
	memcpy(x0, x, (size_t)T * dim * sizeof(*x));
	ref_rmsnorm(y, x, w, T, dim, eps);
	for (int t = 0; t < T; t++) {
		double ss = 0.0;
		for (int i = 0; i < dim; i++)
			ss += (double)x0[(size_t)t * dim + i] * x0[(size_t)t * dim + i];
		double r = 1.0 / sqrt(ss / dim + (double)eps);
		for (int i = 0; i < dim; i++) {
			size_t j = (size_t)t * dim + i;
			ref[j] = x0[j] * r * w[i];
			bound[j] = (gamma_n(dim) / 2 + 6.0 * U32) * fabs(ref[j]);
		}
	}
	snprintf(what, sizeof(what), "rmsnorm T%d dim%d scale%g%s", T, dim, xscale,
	         in_place ? " in place" : "");
	check_close(what, y, ref, bound, (size_t)T * dim);
	gcheck(what, y, (size_t)T * dim);
	if (!in_place) {
		assert_memory_equal(x, x0, (size_t)T * dim * sizeof(*x));
		gfree(y);
	}
	gfree(x);
	gfree(w);
	free(x0);
	free(ref);
	free(bound);
}

static void test_rmsnorm_shapes(void **state)
{
	static const int dims[] = {1, 33, 111, 260, 576};
	static const int Ts[] = {1, 3, 33};
	(void)state;
	for (int a = 0; a < 5; a++)
		for (int b = 0; b < 3; b++) {
			check_rmsnorm(Ts[b], dims[a], 1.0, 1e-5f, 0);
			check_rmsnorm(Ts[b], dims[a], 1.0, 1e-5f, 1);
		}
}

/* Large and tiny rows: with |x| ~ 1e-4, mean(x^2) ~ 3e-9 is far below
 * eps = 1e-5, so a reference that dropped eps (or added it after the sqrt)
 * would be off by orders of magnitude. */
static void test_rmsnorm_scales(void **state)
{
	(void)state;
	check_rmsnorm(5, 111, 1e-4, 1e-5f, 0);
	check_rmsnorm(5, 111, 1e3, 1e-6f, 0);
	check_rmsnorm(2, 260, 30.0, 1e-5f, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rmsnorm_shapes),
		cmocka_unit_test(test_rmsnorm_scales),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
