/* logits_process template in the emulator vs rt_probs (runtime/sampler.c):
 * greedy, temperature, top-k, top-p and both, on vocabularies that are not
 * powers of two, with heavy ties and -inf entries. The kept set must be
 * identical; probabilities agree within the bound derived at check_row.
 * Also compiles every variant with NVRTC for sm_80 and sm_90 (zero spills). */
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
#include "nvrtc.h"
#include "render.h"
#include "sampler.h"

/* ---- shared by the kernel tests (each file carries its own copy) ---- */
static const char *src_root(void)
{
	const char *r = getenv("SW_SRC_DIR");
	return r && *r ? r : ".";
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	long n;
	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
	    (s = malloc((size_t)n + 1)) && fread(s, 1, (size_t)n, f) == (size_t)n)
		s[n] = 0;
	fclose(f);
	return s;
}

/* Renders tmpl with p (NAME set to the key); *key_out gets the key. */
static char *render(const char *tmpl, const char *op, gen_param *p, int np, char *key, size_t nkey)
{
	char path[512];
	sw_err err = {0};
	char *src = NULL;
	assert_int_equal(gen_key(key, nkey, op, p, np), 0);
	for (int i = 0; i < np; i++)
		if (!strcmp(p[i].name, "NAME"))
			p[i].s = key;
	snprintf(path, sizeof(path), "%s/templates/%s", src_root(), tmpl);
	if (gen_render_file(path, p, np, &src, &err))
		fail_msg("%s", err.msg);
	return src;
}

static const emu_kernel *load_kernel(const char *tmpl, const char *op, gen_param *p, int np)
{
	char key[256], kdir[512], cache[512], sym[300];
	const char *build = getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build";
	sw_err err = {0};
	void *h = NULL;
	char *src = render(tmpl, op, p, np, key, sizeof(key));
	snprintf(kdir, sizeof(kdir), "%s/kernels", src_root());
	snprintf(cache, sizeof(cache), "%s/gen/emu", build);
	if (gen_emu_module_build(src, key, kdir, cache, &h, &err))
		fail_msg("%s", err.msg);
	free(src);
	snprintf(sym, sizeof(sym), "%s_emu", key);
	const emu_kernel *k = dlsym(h, sym);
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

/* NVRTC for sm_80 and sm_90: compiles, zero spill bytes, resources printed. */
static void nvrtc_check(const char *tmpl, const char *op, gen_param *p, int np)
{
	static const char *archs[] = {"sm_80", "sm_90"};
	char key[256], path[512];
	sw_err err = {0};
	gen_nvrtc *nv = gen_nvrtc_open(&err);
	if (!nv) {
		print_message("  NVRTC SKIPPED: %s\n", err.msg);
		return;
	}
	snprintf(path, sizeof(path), "%s/kernels/prelude_cuda.h", src_root());
	char *prelude = slurp(path);
	assert_non_null(prelude);
	char *src = render(tmpl, op, p, np, key, sizeof(key));
	for (int a = 0; a < 2; a++) {
		gen_kernel_res res[4];
		int n = 0;
		void *cubin = NULL;
		size_t cs = 0;
		if (gen_nvrtc_compile(nv, prelude, src, key, archs[a], &cubin, &cs, res, 4, &n, NULL, &err))
			fail_msg("%s", err.msg);
		free(cubin);
		assert_int_equal(n, 1);
		print_message("  %-5s %-60s %3d regs %4d B stack %5d B smem, spills %d/%d\n", archs[a],
		              res[0].name, res[0].regs, res[0].stack, res[0].smem, res[0].spill_stores,
		              res[0].spill_loads);
		if (res[0].spill_stores || res[0].spill_loads)
			fail_msg("%s %s: spills %d/%d", res[0].name, archs[a], res[0].spill_stores,
			         res[0].spill_loads);
	}
	free(src);
	free(prelude);
	gen_nvrtc_close(nv);
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
/* ---- end of shared helpers ---- */

#define FP(n, v) {.name = n, .type = GEN_PARAM_FLOAT, .f = (v)}
#define IP(n, v) {.name = n, .type = GEN_PARAM_INT, .i = (v)}
#define NM {.name = "NAME", .type = GEN_PARAM_IDENT}

static long g_rows, g_kept;

/* Tolerance: the host computes e = expf((x - max) / T) (glibc, < 1 ulp),
 * ks in double and inv = (float)(1 / ks), then e * inv. The kernel does the
 * same operations; expf on the GPU is within 2 ulp (CUDA C guide), the
 * double sums differ in order only (relative 2 V 2^-53, far below an fp32
 * ulp), so inv can differ by one rounding (1 ulp) and the product by half an
 * ulp: |got - want| <= (2 + 0.5 + 1 + 0.5) ulp = 4 * 2^-23 * want. In the
 * emulator expf is glibc's, so most values are bit-identical. */
static void check_row(const char *what, const float *got, const float *want, int V)
{
	for (int i = 0; i < V; i++) {
		if ((got[i] > 0.0f) != (want[i] > 0.0f))
			fail_msg("%s: token %d kept %d, host %d (%.9g vs %.9g)", what, i, got[i] > 0.0f,
			         want[i] > 0.0f, (double)got[i], (double)want[i]);
		if (!isfinite(got[i]) || fabs((double)got[i] - want[i]) > 4 * 0x1p-23 * want[i])
			fail_msg("%s: token %d: %.9g vs host %.9g", what, i, (double)got[i], (double)want[i]);
		g_kept += want[i] > 0.0f;
	}
	g_rows++;
}

/* mode 0: smooth (scale 4); 1: values on a grid of 7 (heavy ties, the
 * top-k/top-p boundary inside a tie); 2: 30% -inf; 3: sharp (scale 40,
 * e underflows to 0 for most tokens). */
static void fill(float *x, int n, int mode)
{
	for (int i = 0; i < n; i++) {
		double r = rnd();
		if (mode == 0)
			x[i] = (float)(4.0 * r);
		else if (mode == 1)
			x[i] = (float)floor((r + 1.0) * 3.5) * 0.5f;
		else if (mode == 2)
			x[i] = rnd() < -0.4 ? -INFINITY : (float)(3.0 * r);
		else
			x[i] = (float)(40.0 * r);
	}
	if (mode == 0 && n > 8)
		x[n / 3] = -0.0f, x[n / 2] = 0.0f; /* -0 ties +0 */
}

static void check(int V, int T, float temp, int top_k, float top_p, int block, int mode)
{
	gen_param p[] = {NM, IP("V", V), IP("BLOCK", block), FP("TEMP", temp), IP("TOP_K", top_k),
	                 FP("TOP_P", top_p)};
	const emu_kernel *k = load_kernel("logits_process.cu.tmpl", "logits", p, 6);
	float *x = emu_alloc((size_t)T * V * sizeof(float), "logits");
	float *out = emu_alloc((size_t)T * V * sizeof(float), "probs");
	float *want = malloc((size_t)V * sizeof(float));
	int *idx = malloc((size_t)V * sizeof(int));
	rt_sampling s = {.temperature = temp, .top_k = top_k, .top_p = top_p};
	char what[160];

	fill(x, T * V, mode);
	void *args[] = {&out, &x};
	launch(k, d3((unsigned)T, 1, 1), d3((unsigned)block, 1, 1), args);
	for (int t = 0; t < T; t++) {
		rt_probs(want, x + (size_t)t * V, V, &s, idx);
		snprintf(what, sizeof(what), "V %d T %.2f k %d p %.2f mode %d row %d", V, (double)temp,
		         top_k, (double)top_p, mode, t);
		check_row(what, out + (size_t)t * V, want, V);
	}
	free(want);
	free(idx);
	emu_free(x);
	emu_free(out);
}

static void test_logits_small(void **state)
{
	static const float temps[] = {0.0f, 0.6f, 1.0f};
	static const int ks[] = {0, 1, 7, 50};
	static const float ps[] = {1.0f, 0.9f, 0.5f, 0.0f};
	(void)state;
	for (int m = 0; m < 4; m++)
		for (int a = 0; a < 3; a++)
			for (int b = 0; b < 4; b++)
				for (int c = 0; c < 4; c++) {
					if (temps[a] == 0.0f && (b || c))
						continue;
					check(1000, 3, temps[a], ks[b], ps[c], 128, m);
				}
	check(33, 4, 1.0f, 5, 0.8f, 32, 1);
	check(33, 4, 0.6f, 40, 0.95f, 32, 0);
	print_message("  %ld rows, %ld kept tokens: all identical sets\n", g_rows, g_kept);
}

static void test_logits_vocab(void **state)
{
	(void)state;
	check(4099, 2, 0.6f, 40, 0.9f, 256, 0);
	check(4099, 2, 1.0f, 0, 0.95f, 256, 1);
	check(4099, 2, 1.0f, 3000, 1.0f, 256, 0);
	check(32003, 1, 1.0f, 50, 0.9f, 256, 0);
	check(32003, 1, 0.6f, 0, 0.8f, 256, 1);
	check(32003, 1, 0.0f, 0, 1.0f, 256, 0);
	print_message("  %ld rows, %ld kept tokens in all: identical sets\n", g_rows, g_kept);
}

static void test_logits_nvrtc(void **state)
{
	(void)state;
	gen_param a[] = {NM, IP("V", 32003), IP("BLOCK", 256), FP("TEMP", 0.6f), IP("TOP_K", 50),
	                 FP("TOP_P", 0.9f)};
	nvrtc_check("logits_process.cu.tmpl", "logits", a, 6);
	gen_param b[] = {NM, IP("V", 128256), IP("BLOCK", 128), FP("TEMP", 1.0f), IP("TOP_K", 0),
	                 FP("TOP_P", 1.0f)};
	nvrtc_check("logits_process.cu.tmpl", "logits", b, 6);
	gen_param c[] = {NM, IP("V", 1000), IP("BLOCK", 256), FP("TEMP", 0.0f), IP("TOP_K", 0),
	                 FP("TOP_P", 1.0f)};
	nvrtc_check("logits_process.cu.tmpl", "logits", c, 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_logits_small),
		cmocka_unit_test(test_logits_vocab),
		cmocka_unit_test(test_logits_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
