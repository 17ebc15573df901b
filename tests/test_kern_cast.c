/* cast template in the emulator: f32 -> bf16/f16 against gguf's round-to-
 * nearest-even conversions (special values, ties, the f16 overflow edge,
 * subnormals, random), bf16/f16 -> f32 over all 65536 bit patterns; NaN ->
 * 0x7fff as CUDA's __float2bfloat16_rn / __float2half_rn (gguf keeps a
 * payload, so NaN is checked separately). Exact: bound zero. */
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

#include "gguf.h"

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

static const emu_kernel *kern(int N, int mode)
{
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "N", .type = GEN_PARAM_INT, .i = N},
		{.name = "MODE", .type = GEN_PARAM_INT, .i = mode},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = 128},
	};
	return load_kernel("cast.cu.tmpl", "cast", p, 4);
}

static unsigned grid_for(int N)
{
	int v = N % 8 == 0 ? 8 : 1;
	return (unsigned)((N / v + 127) / 128);
}

static float bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static void check_down(int N, int mode)
{
	const emu_kernel *k = kern(N, mode);
	float *x = emu_alloc((size_t)N * sizeof(float), "x");
	uint16_t *y = emu_alloc((size_t)N * sizeof(uint16_t), "y");
	static const uint32_t special[] = {
		0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
		0x477fe000u, /* 65504, f16 max */
		0x477fefffu, /* just below the f16 overflow tie: 65504 */
		0x477ff000u, /* 65520: tie, rounds to even = inf */
		0x33000000u, /* 2^-25: f16 tie to 0 */
		0x33000001u, /* just above: smallest f16 subnormal */
		0x387fc000u, /* f16 subnormal range */
		0x3f808000u, /* bf16 tie, even stays */
		0x3f818000u, /* bf16 tie, odd rounds up */
		0x7f7fffffu, /* FLT_MAX: bf16 rounds to inf */
		0x00000001u, /* fp32 denormal */
	};
	const int ns = (int)(sizeof(special) / sizeof(special[0]));

	for (int i = 0; i < N; i++) {
		if (i < ns)
			x[i] = bits(special[i]);
		else if (i % 3 == 0)
			x[i] = (float)(rnd() * 70000.0);
		else if (i % 3 == 1)
			x[i] = (float)(rnd() * 1e-6);
		else
			x[i] = (float)rnd();
	}
	void *args[] = {&y, &x};
	launch(k, d3(grid_for(N), 1, 1), d3(128, 1, 1), args);
	for (int i = 0; i < N; i++) {
		uint16_t want = isnan(x[i]) ? 0x7fffu : mode == 0 ? gguf_f32_to_bf16(x[i]) : gguf_f32_to_f16(x[i]);
		if (y[i] != want)
			fail_msg("%s [%d] %a: 0x%04x, want 0x%04x", k->name, i, (double)x[i], y[i], want);
	}
	emu_free(x);
	emu_free(y);
}

static void check_up(int N, int mode)
{
	const emu_kernel *k = kern(N, mode);
	uint16_t *x = emu_alloc((size_t)N * sizeof(uint16_t), "x");
	float *y = emu_alloc((size_t)N * sizeof(float), "y");

	for (int i = 0; i < N; i++)
		x[i] = (uint16_t)(N == 65536 ? (unsigned)i : ((unsigned)i * 40503u) & 0xffffu);
	void *args[] = {&y, &x};
	launch(k, d3(grid_for(N), 1, 1), d3(128, 1, 1), args);
	for (int i = 0; i < N; i++) {
		float want = mode == 2 ? gguf_bf16_to_f32(x[i]) : gguf_f16_to_f32(x[i]);
		if (memcmp(&y[i], &want, sizeof(float)))
			fail_msg("%s [%d] 0x%04x: %a, want %a", k->name, i, x[i], (double)y[i], (double)want);
	}
	emu_free(x);
	emu_free(y);
}

static void test_cast_down(void **state)
{
	static const int Ns[] = {1, 17, 33, 111, 260, 576, 4096};
	(void)state;
	for (int a = 0; a < 7; a++) {
		check_down(Ns[a], 0);
		check_down(Ns[a], 1);
	}
}

static void test_cast_up(void **state)
{
	static const int Ns[] = {1, 33, 111, 260, 576, 65536};
	(void)state;
	for (int a = 0; a < 6; a++) {
		check_up(Ns[a], 2);
		check_up(Ns[a], 3);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cast_down),
		cmocka_unit_test(test_cast_up),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
