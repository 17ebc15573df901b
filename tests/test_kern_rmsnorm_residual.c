/* rmsnorm_residual template in the emulator vs ref_add + ref_rmsnorm on awkward
 * shapes (dims 33, 111, 260, 576; 1, 3 and 7 rows; blocks of 32 and 256;
 * out of place and s aliasing x), with guard zones and derived bounds. */
#include <dlfcn.h>
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
#include "kernels/ref/ref.h"
#include "gen/render.h"

#include "kern_util.h"

/* s = x + r is one correctly rounded fp32 add on both sides: bit-equal.
 * y: the bound of test_ref_rmsnorm.c against an exact (double) value: the
 * fp32 sum of squares carries gamma_dim (any order, the block tree too);
 * / dim and + eps one rounding each; sqrt halves the relative error of its
 * argument and adds one; 1/sqrt one; s * scale * w two. First order
 * gamma_dim / 2 + 5u; one more u for second-order terms. */
static void check(int T, int dim, unsigned block, int alias)
{
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "DIM", .type = GEN_PARAM_INT, .i = dim},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = block},
		{.name = "EPS", .type = GEN_PARAM_FLOAT, .f = 1e-5f},
	};
	const emu_kernel *k = load_kernel("rmsnorm_residual.cu.tmpl", "rmsnorm_residual_f32", p, 4);
	size_t n = (size_t)T * dim;
	float *x = emu_alloc(n * sizeof(float), "x"), *r = emu_alloc(n * sizeof(float), "r");
	float *w = emu_alloc((size_t)dim * sizeof(float), "w");
	float *y = emu_alloc(n * sizeof(float), "y");
	float *s = alias ? x : emu_alloc(n * sizeof(float), "s");
	float *sref = malloc(n * sizeof(float));
	double *ref = malloc(n * sizeof(double)), *bound = malloc(n * sizeof(double));
	char what[96];

	for (size_t i = 0; i < n; i++) {
		x[i] = (float)(rnd() * 2.0);
		r[i] = (float)rnd();
	}
	for (int i = 0; i < dim; i++)
		w[i] = (float)(1.0 + 0.9 * rnd());
	ref_add(sref, x, r, n);
	for (int t = 0; t < T; t++) {
		double ss = 0.0;
		for (int i = 0; i < dim; i++)
			ss += (double)sref[(size_t)t * dim + i] * sref[(size_t)t * dim + i];
		double sc = 1.0 / sqrt(ss / dim + 1e-5);
		for (int i = 0; i < dim; i++) {
			size_t j = (size_t)t * dim + i;
			ref[j] = sref[j] * sc * w[i];
			bound[j] = (gamma_n(dim) / 2 + 6.0 * U32) * fabs(ref[j]);
		}
	}
	void *args[] = {&y, &s, &x, &r, &w};
	snprintf(what, sizeof(what), "%s T%d%s", k->name, T, alias ? " s=x" : "");
	const kern_out outs[] = {
		{.name = "s = x + r", .type = KERN_F32, .got = s, .want = sref, .n = n, .dims = {T, dim}},
		{.name = "y", .type = KERN_F32, .got = y, .ref = ref, .bound = bound, .n = n, .dims = {T, dim}},
	};
	kern_launch_expect(what, k, d3((unsigned)T, 1, 1), d3(block, 1, 1), args, outs, 2);
	/* The float ref itself must sit inside the same bound. */
	ref_rmsnorm(sref, sref, w, T, dim, 1e-5f);
	check_close("ref_rmsnorm", sref, ref, bound, n);
	emu_free(x);
	emu_free(r);
	emu_free(w);
	emu_free(y);
	if (!alias)
		emu_free(s);
	free(sref);
	free(ref);
	free(bound);
}

static void test_rmsnorm_residual_shapes(void **state)
{
	static const int dims[] = {33, 111, 260, 576};
	static const int Ts[] = {1, 3, 7};
	static const unsigned blocks[] = {32, 256};
	(void)state;
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 3; b++)
			for (int c = 0; c < 2; c++)
				check(Ts[b], dims[a], blocks[c], 0);
}

static void test_rmsnorm_residual_alias(void **state)
{
	(void)state;
	check(5, 576, 128, 1);
	check(3, 111, 64, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rmsnorm_residual_shapes),
		cmocka_unit_test(test_rmsnorm_residual_alias),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
