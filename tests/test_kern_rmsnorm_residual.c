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
	launch(k, d3((unsigned)T, 1, 1), d3(block, 1, 1), args);
	snprintf(what, sizeof(what), "%s T%d%s", k->name, T, alias ? " s=x" : "");
	for (size_t i = 0; i < n; i++)
		if (memcmp(&s[i], &sref[i], sizeof(float)))
			fail_msg("%s: s[%zu] = %.9g, x + r = %.9g", what, i, (double)s[i], (double)sref[i]);
	check_close(what, y, ref, bound, n);
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
