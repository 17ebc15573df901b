/* swiglu template in the emulator vs an exact (double) silu(g) * u on awkward
 * row lengths (33, 111, 260, 576, 1536), 1 and odd row counts, vector and
 * scalar paths, including gates large enough that exp(-g) overflows. */
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

/* Bound, relative to |y|: expf within 2 ulp (CUDA's documented maximum;
 * glibc is within 1), so e = exp(-g) carries 2u; 1 + e then carries at most
 * 2u e / (1 + e) + u <= 3u; the division and the product one u each: 5u,
 * one more for second-order terms. Plus 2^-140 absolute for results in the
 * subnormal range (none here: |g| <= 16). */
static void check(int T, int F, int block, double gscale)
{
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "FFN", .type = GEN_PARAM_INT, .i = F},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = block},
	};
	const emu_kernel *k = load_kernel("swiglu.cu.tmpl", "swiglu_f32", p, 3);
	size_t n = (size_t)T * F;
	float *g = emu_alloc(n * sizeof(float), "gate"), *u = emu_alloc(n * sizeof(float), "up");
	float *y = emu_alloc(n * sizeof(float), "y");
	double *r = malloc(n * sizeof(double)), *bound = malloc(n * sizeof(double));
	char what[96];

	for (size_t i = 0; i < n; i++) {
		g[i] = (float)(rnd() * gscale);
		u[i] = (float)rnd();
		r[i] = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
		bound[i] = 6 * U32 * fabs(r[i]) + 0x1p-140;
	}
	int v = F % 4 == 0 ? 4 : 1;
	unsigned gx = (unsigned)((F / v + block - 1) / block);
	void *args[] = {&y, &g, &u};
	snprintf(what, sizeof(what), "%s T%d", k->name, T);
	kern_out o = {.name = "y", .type = KERN_F32, .got = y, .ref = r, .bound = bound, .n = n,
	              .dims = {T, F}};
	kern_launch_expect(what, k, d3(gx, (unsigned)T, 1), d3((unsigned)block, 1, 1), args, &o, 1);
	/* In the emulator the kernel's expression and libm are ref_swiglu's. */
	float *yr = malloc(n * sizeof(float));
	ref_swiglu(yr, g, u, n);
	kern_expect_equal(what, "y vs ref_swiglu", KERN_F32, y, yr, n);
	free(yr);
	emu_free(g);
	emu_free(u);
	emu_free(y);
	free(r);
	free(bound);
}

static void test_swiglu_shapes(void **state)
{
	static const int Fs[] = {33, 111, 260, 576, 1536};
	static const int Ts[] = {1, 3};
	(void)state;
	for (int a = 0; a < 5; a++)
		for (int b = 0; b < 2; b++) {
			check(Ts[b], Fs[a], 64, 4.0);
			check(Ts[b], Fs[a], 256, 4.0);
		}
}

static void test_swiglu_large_gates(void **state)
{
	(void)state;
	check(3, 111, 32, 16.0);
	/* -100: exp(100) overflows fp32 to inf and silu gives -0. */
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "FFN", .type = GEN_PARAM_INT, .i = 8},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = 32},
	};
	const emu_kernel *k = load_kernel("swiglu.cu.tmpl", "swiglu_f32", p, 3);
	float *g = emu_alloc(8 * sizeof(float), "gate"), *u = emu_alloc(8 * sizeof(float), "up");
	float *y = emu_alloc(8 * sizeof(float), "y");
	for (int i = 0; i < 8; i++) {
		g[i] = i % 2 ? -100.0f : 100.0f;
		u[i] = 2.0f;
	}
	void *args[] = {&y, &g, &u};
	launch(k, d3(1, 1, 1), d3(32, 1, 1), args);
	for (int i = 0; i < 8; i++) {
		assert_true(isfinite(y[i]));
		assert_true(i % 2 ? y[i] == 0.0f : y[i] == 200.0f);
	}
	emu_free(g);
	emu_free(u);
	emu_free(y);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_swiglu_shapes),
		cmocka_unit_test(test_swiglu_large_gates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
