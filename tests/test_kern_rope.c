/* rope template in the emulator vs ref_rope (adjacent pairs, inv_freq table
 * from ref_rope_freqs): two-pair (16-byte) and one-pair paths, partial
 * rotation, positions up to 5000, a derived per-element bound. */
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

/* Bound per rotated pair, against ref_rope (double inside, rounded once):
 * the kernel's angle p * f is one fp32 rounding, |da| <= |a| u; sincosf is
 * within 2 ulp on the GPU (1 in glibc), so cos and sin each err by at most
 * |a| u + 2u; the rotation x0 c - x1 s costs 3 roundings of terms bounded by
 * |x0| + |x1|; the reference's final rounding adds u |y| <= u (|x0| + |x1|).
 * Total (|a| u + 6u) (|x0| + |x1|), one more u for second-order terms. */
static void check(int T, int H, int HD, int ROT, int block)
{
	gen_param p[] = {
		{.name = "NAME", .type = GEN_PARAM_IDENT},
		{.name = "N_HEADS", .type = GEN_PARAM_INT, .i = H},
		{.name = "HEAD_DIM", .type = GEN_PARAM_INT, .i = HD},
		{.name = "ROT_DIM", .type = GEN_PARAM_INT, .i = ROT},
		{.name = "BLOCK", .type = GEN_PARAM_INT, .i = block},
	};
	const emu_kernel *k = load_kernel("rope.cu.tmpl", "rope_f32", p, 5);
	size_t n = (size_t)T * H * HD;
	float *x = emu_alloc(n * sizeof(float), "x");
	int32_t *pos = emu_alloc((size_t)T * sizeof(int32_t), "pos");
	float *freq = emu_alloc((size_t)(ROT / 2) * sizeof(float), "inv_freq");
	float *x0 = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
	double *r = malloc(n * sizeof(double)), *bound = malloc(n * sizeof(double));
	char what[96];

	ref_rope_freqs(freq, ROT, 10000.0f, 0, 1.0f, 0, 0, 0);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)rnd();
	for (int t = 0; t < T; t++)
		pos[t] = t == 0 ? 0 : (int32_t)((t * 1237) % 5001);
	memcpy(x0, x, n * sizeof(float));
	memcpy(ref, x, n * sizeof(float));
	ref_rope(ref, pos, T, H, HD, ROT, freq);
	for (int t = 0; t < T; t++)
		for (int h = 0; h < H; h++)
			for (int i = 0; i < HD; i++) {
				size_t j = ((size_t)t * H + h) * HD + i;
				size_t j0 = j - (i & 1);
				double a = (double)pos[t] * freq[i / 2 < ROT / 2 ? i / 2 : 0];
				r[j] = ref[j];
				bound[j] = i < ROT ? (fabs(a) * U32 + 7 * U32) * (fabs(x0[j0]) + fabs(x0[j0 + 1]))
				                   : 0.0;
			}
	void *args[] = {&x, &pos, &freq};
	launch(k, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1), args);
	snprintf(what, sizeof(what), "%s T%d", k->name, T);
	check_close(what, x, r, bound, n);
	emu_free(x);
	emu_free(pos);
	emu_free(freq);
	free(x0);
	free(ref);
	free(r);
	free(bound);
}

static void test_rope_shapes(void **state)
{
	(void)state;
	static const int Ts[] = {1, 3, 7};
	for (int b = 0; b < 3; b++) {
		check(Ts[b], 9, 64, 64, 128);  /* SmolLM2-135M heads, two-pair path */
		check(Ts[b], 3, 64, 32, 32);   /* partial rotation */
		check(Ts[b], 5, 36, 36, 64);   /* 36 % 4 == 0 but 9 quads: ragged */
		check(Ts[b], 3, 10, 8, 32);    /* head_dim % 4 != 0: one-pair path */
		check(Ts[b], 1, 6, 6, 32);
		check(Ts[b], 4, 12, 6, 32);    /* rot % 4 != 0 */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rope_shapes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
