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

#include "kernels/ref/ref.h"

#include "check.h"

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
