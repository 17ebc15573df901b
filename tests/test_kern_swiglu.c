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

#include "emu.h"
#include "ref.h"
#include "render.h"

/* ---- shared by the kernel tests (each file carries its own copy so that
 * one test binary never depends on another test's code) ----
 * How a template reaches the emulator: the test renders it with gen_render
 * (the same renderer and parameter table the NVRTC path uses), gen_emu_module_build
 * compiles the rendered text as C11 with -include prelude_emu.h into a cached
 * build/gen/emu/<key>-<hash>.so, and the test dlopens it and takes
 * <key>_emu. So the tested source is byte for byte what NVRTC compiles, the
 * renderer is exercised on every shape, and no Makefile rule per template is
 * needed (a #define-and-#include scheme would test a different text). */
static const char *src_root(void)
{
	const char *r = getenv("SW_SRC_DIR");
	return r && *r ? r : ".";
}

static const emu_kernel *load_kernel(const char *tmpl, const char *op, gen_param *p, int np)
{
	char key[256], path[512], kdir[512], cache[512], sym[300];
	const char *build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
	sw_err err = {0};
	char *src = NULL;
	void *h = NULL;

	assert_int_equal(gen_key(key, sizeof(key), op, p, np), 0);
	for (int i = 0; i < np; i++)
		if (!strcmp(p[i].name, "NAME"))
			p[i].s = key;
	snprintf(path, sizeof(path), "%s/templates/%s", src_root(), tmpl);
	if (gen_render_file(path, p, np, &src, &err))
		fail_msg("%s", err.msg);
	snprintf(kdir, sizeof(kdir), "%s/kernels", src_root());
	snprintf(cache, sizeof(cache), "%s/gen/emu", build);
	if (gen_emu_module_build(src, key, kdir, cache, &h, &err))
		fail_msg("%s", err.msg);
	free(src);
	snprintf(sym, sizeof(sym), "%s_emu", key);
	const emu_kernel *k = dlsym(h, sym); /* the module stays loaded for the test's life */
	if (!k)
		fail_msg("%s: no symbol %s", key, sym);
	return k;
}

static emu_dim3 d3(unsigned x, unsigned y, unsigned z)
{
	emu_dim3 d = {x, y, z};
	return d;
}

static void launch(const emu_kernel *k, emu_dim3 g, emu_dim3 b, void **args)
{
	emu_report rep;
	if (emu_launch(k, g, b, 0, args, &rep))
		fail_msg("%s: %s", k->name, rep.msg);
}

/* fp32 unit roundoff and gamma_n = n u / (1 - n u) (Higham 3.1): a length-n
 * fp32 sum or dot product, in any order, with or without FMA, lies within
 * gamma_n * sum |terms| of the exact value. */
#define U32 0x1p-24
static inline double gamma_n(int n)
{
	return n * U32 / (1.0 - n * U32);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline double rnd(void) /* splitmix64 -> [-1, 1) */
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1p-52 - 1.0;
}

/* Every element finite and within its derived bound; then the NMSE against
 * the NMSE those bounds imply, and the max error against the max bound. The
 * guard zones are the emulator's (emu_alloc; emu_launch checks them). */
static inline void check_close(const char *what, const float *got, const double *ref,
                               const double *bound, size_t n)
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
	launch(k, d3(gx, (unsigned)T, 1), d3((unsigned)block, 1, 1), args);
	snprintf(what, sizeof(what), "%s T%d", k->name, T);
	check_close(what, y, r, bound, n);
	/* In the emulator the kernel's expression and libm are ref_swiglu's. */
	float *yr = malloc(n * sizeof(float));
	ref_swiglu(yr, g, u, n);
	assert_memory_equal(yr, y, n * sizeof(float));
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
