/* swiglu template in the emulator vs an exact (double) silu(g) * u on awkward
 * row lengths (33, 111, 260, 576, 1536), 1 and odd row counts, vector and
 * scalar paths, including gates large enough that exp(-g) overflows; the
 * same for its GeGLU form (ACT 1, Gemma: gelu_tanh(g) * u) against the
 * double expression, then NVRTC (sm_80, sm_90, zero spills) for both. */
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
/* GeGLU's bound: t = tanhf(z) within 2 ulp, z = k (g + 0.044715 g^3)
 * within 4 u of itself and tanh' = 1 - t^2 <= 1, |z| (1 - t^2) < 0.5: 1 + t
 * errs by at most (2 + 2 + 1) u absolute; the three products 3 u relative
 * of 0.5 |g| (1 + |t|) |u| <= |g u|. So 0.5 |g u| 5 u + 3 u |g u| < 6 u |g u|,
 * taken as 8 u |g u| (|g u|, not |y|: 1 + t cancels for very negative g). */
static double geglu_d(double g, double u)
{
	return 0.5 * g * (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) * u;
}

static const emu_kernel *swiglu_kernel(int F, int block, int act)
{
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "FFN", .type = GEN_PARAM_INT, .i = F},
		{.name = "ACT", .type = GEN_PARAM_INT, .i = act},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = block},
	};
	return load_kernel("swiglu.cu.tmpl", "swiglu_f32", p, 4);
}

static void check_act(int T, int F, int block, double gscale, int act)
{
	const emu_kernel *k = swiglu_kernel(F, block, act);
	size_t n = (size_t)T * F;
	float *g = emu_alloc(n * sizeof(float), "gate"), *u = emu_alloc(n * sizeof(float), "up");
	float *y = emu_alloc(n * sizeof(float), "y");
	double *r = malloc(n * sizeof(double)), *bound = malloc(n * sizeof(double));
	char what[96];

	for (size_t i = 0; i < n; i++) {
		g[i] = (float)(rnd() * gscale);
		u[i] = (float)rnd();
		if (act) {
			r[i] = geglu_d(g[i], u[i]);
			bound[i] = 8 * U32 * fabs((double)g[i] * u[i]) + 0x1p-140;
		} else {
			r[i] = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
			bound[i] = 6 * U32 * fabs(r[i]) + 0x1p-140;
		}
	}
	int v = F % 4 == 0 ? 4 : 1;
	unsigned gx = (unsigned)((F / v + block - 1) / block);
	void *args[] = {&y, &g, &u};
	snprintf(what, sizeof(what), "%s T%d ACT %d", k->name, T, act);
	kern_out o = {.name = "y", .type = KERN_F32, .got = y, .ref = r, .bound = bound, .n = n,
	              .dims = {T, F}};
	kern_launch_expect(what, k, d3(gx, (unsigned)T, 1), d3((unsigned)block, 1, 1), args, &o, 1);
	/* In the emulator the kernel's expression and libm are ref_swiglu's
	 * (ref_geglu_tanh's). */
	float *yr = malloc(n * sizeof(float));
	(act ? ref_geglu_tanh : ref_swiglu)(yr, g, u, n);
	kern_expect_equal(what, act ? "y vs ref_geglu_tanh" : "y vs ref_swiglu", KERN_F32, y, yr, n);
	free(yr);
	emu_free(g);
	emu_free(u);
	emu_free(y);
	free(r);
	free(bound);
}

static void check(int T, int F, int block, double gscale)
{
	check_act(T, F, block, gscale, 0);
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
	const emu_kernel *k = swiglu_kernel(8, 32, 0);
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

/* GeGLU: the shapes above, gates to +-16 (tanh saturates both ways; for
 * g << 0 the product is a tiny negative, for g >> 0 g u), and the limits
 * exactly: gelu_tanh(+-100) is 100 and -0 (tanhf(-inf-ish) = -1). */
static void test_geglu(void **state)
{
	static const int Fs[] = {33, 111, 260, 576, 1536};
	(void)state;
	for (int a = 0; a < 5; a++) {
		check_act(1, Fs[a], 64, 4.0, 1);
		check_act(3, Fs[a], 256, 4.0, 1);
	}
	check_act(3, 111, 32, 16.0, 1);
	const emu_kernel *k = swiglu_kernel(8, 32, 1);
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

/* Both forms at Gemma 3 270M's FFN (2048) and the scalar path (2047). */
static void test_swiglu_nvrtc(void **state)
{
	(void)state;
	for (int act = 0; act < 2; act++)
		for (int v = 0; v < 2; v++) {
			gen_param p[] = {
				{.name = "NAME", .type = GEN_PARAM_IDENT},
				{.name = "FFN", .type = GEN_PARAM_INT, .i = v ? 2047 : 2048},
				{.name = "ACT", .type = GEN_PARAM_INT, .i = act},
				{.name = "BLOCK", .type = GEN_PARAM_INT, .i = 256},
			};
			nvrtc_check_ex("swiglu.cu.tmpl", "swiglu_f32", p, 4, false);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_swiglu_shapes),
		cmocka_unit_test(test_swiglu_large_gates),
		cmocka_unit_test(test_geglu),
		cmocka_unit_test(test_swiglu_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
