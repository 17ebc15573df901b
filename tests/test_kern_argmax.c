/* argmax template in the emulator vs a scalar loop with rt_argmax's rule
 * (first index of the maximum): awkward widths, heavy ties, -inf entries,
 * all -inf rows, one-element rows, a vocabulary-sized row. Exact. */
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

static int loop_argmax(const float *x, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static void check(int T, int N, int block, int mode)
{
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "N", .type = GEN_PARAM_INT, .i = N},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = block},
	};
	const emu_kernel *k = load_kernel("argmax.cu.tmpl", "argmax_f32", p, 3);
	float *x = emu_alloc((size_t)T * N * sizeof(float), "x");
	int32_t *out = emu_alloc((size_t)T * sizeof(int32_t), "out");

	for (size_t i = 0; i < (size_t)T * N; i++) {
		double r = rnd();
		if (mode == 0)
			x[i] = (float)r;
		else if (mode == 1) /* five values: ties everywhere, the max repeated */
			x[i] = (float)floor((r + 1.0) * 2.5);
		else                /* mostly -inf */
			x[i] = r < 0.8 ? -INFINITY : (float)r;
	}
	if (mode == 2)
		for (int i = 0; i < N; i++)
			x[i] = -INFINITY; /* row 0 all -inf: index 0 */
	void *args[] = {&out, &x};
	launch(k, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1), args);
	for (int t = 0; t < T; t++) {
		int want = loop_argmax(x + (size_t)t * N, N);
		if (out[t] != want)
			fail_msg("%s mode %d row %d: %d (%g), want %d (%g)", k->name, mode, t, out[t],
			         out[t] >= 0 && out[t] < N ? (double)x[(size_t)t * N + out[t]] : NAN, want,
			         (double)x[(size_t)t * N + want]);
	}
	emu_free(x);
	emu_free(out);
}

static void test_argmax_shapes(void **state)
{
	static const int Ns[] = {1, 3, 33, 111, 260, 576};
	static const int Ts[] = {1, 3, 7};
	(void)state;
	for (int a = 0; a < 6; a++)
		for (int b = 0; b < 3; b++)
			for (int m = 0; m < 3; m++) {
				check(Ts[b], Ns[a], 32, m);
				check(Ts[b], Ns[a], 256, m);
			}
}

static void test_argmax_vocab(void **state)
{
	(void)state;
	check(2, 49152, 256, 0);
	check(2, 49152, 256, 1);
	check(3, 32001, 512, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_argmax_shapes),
		cmocka_unit_test(test_argmax_vocab),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
