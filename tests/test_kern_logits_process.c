/* logits_process template in the emulator vs its specification
 * ref_logits_process (kernels/ref): greedy, temperature, top-k, top-p and
 * both, on vocabularies that are not powers of two, with heavy ties and -inf
 * entries. The sampling values are run-time words: each kernel is compiled
 * once and launched at many settings. The kept set must be identical;
 * probabilities agree within the bound derived at check_row.
 * Also compiles every variant with NVRTC for sm_80 and sm_90 (zero spills). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/ref.h"
#include "kernels/sample_layout.h"

#include "op_harness.h"

static long g_rows, g_kept;

/* Tolerance: the host computes e = expf((x - max) / T) (glibc, < 1 ulp),
 * ks in double and inv = (float)(1 / ks), then e * inv. The kernel does the
 * same operations; expf on the GPU is within 2 ulp (CUDA C guide), the
 * double sums differ in order only (relative 2 V 2^-53, far below an fp32
 * ulp), so inv can differ by one rounding (1 ulp) and the product by half an
 * ulp: |got - want| <= (2 + 0.5 + 1 + 0.5) ulp = 4 * 2^-23 * want. In the
 * emulator expf is glibc's, so most values are bit-identical. The kept set
 * (the decision) is compared exactly first. */
static void check_row(const char *what, const float *got, const float *want, int V)
{
	uint8_t *gk = malloc((size_t)V), *wk = malloc((size_t)V);
	double *ref = malloc((size_t)V * sizeof(*ref)), *bound = malloc((size_t)V * sizeof(*bound));
	const double ulp = 2 * kern_unit_roundoff(KERN_F32, 0); /* 2^-23 */
	for (int i = 0; i < V; i++) {
		gk[i] = got[i] > 0.0f;
		wk[i] = want[i] > 0.0f;
		ref[i] = want[i];
		bound[i] = 4 * ulp * want[i];
		g_kept += want[i] > 0.0f;
	}
	kern_expect_equal(what, "kept", KERN_U8, gk, wk, (size_t)V);
	kern_expect_close(what, "probs", got, ref, bound, (size_t)V);
	free(gk);
	free(wk);
	free(ref);
	free(bound);
	g_rows++;
}

/* mode 0: smooth (scale 4); 1: values on a grid of 7 (heavy ties, the
 * top-k/top-p boundary inside a tie); 2: 30% -inf; 3: sharp (scale 40,
 * e underflows to 0 for most tokens). */
static void fill_logits(float *x, int n, int mode)
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

/* One (temperature, top-k, top-p) setting: the run-time words of the
 * engine's sampling buffer (kernels/engine_state.h). */
typedef struct setting {
	float temp;
	int top_k;
	float top_p;
} setting;

/* The kernel's scratch for T rows of `slices` (kernels/sample_layout.h),
 * the sync words at 0 (the planner's zeroed arena), the rest poisoned. */
static int32_t *lp_scratch(int T, int slices)
{
	int32_t *s = emu_alloc((size_t)sw_logits_scratch_words(T, slices) * sizeof(int32_t),
	                       "logits scratch");
	memset(s, 0, SW_LOGITS_SYNC * sizeof(int32_t));
	return s;
}

/* The sync words are back at 0 after a launch (the next one relies on it). */
static void lp_sync_clear(const int32_t *s)
{
	for (int i = 0; i < SW_LOGITS_SYNC; i++)
		assert_int_equal(s[i], 0);
}

/* slices: the vocabulary slices per row (0: the planner's,
 * sw_logits_slices) */
static int g_slices = 0;

/* ONE compiled kernel per (V, BLOCK), whatever the slices (the grid's):
 * every setting is written into the params words between launches, as the
 * engine writes them between
 * requests on one captured graph, and each launch is compared with
 * ref_logits_process (kernels/ref) at that setting. One scratch serves
 * every launch, as in the engine. */
static void check(int V, int T, const setting *set, int n_set, int block, int mode)
{
	const int S = g_slices ? g_slices : sw_logits_slices(T, V, block);
	gen_param p[] = {OH_NAME, OH_I("V", V), OH_I("BLOCK", block)};
	const emu_kernel *k = oh_load(SW_OP_logits_process, p, 3);
	float *x = emu_alloc((size_t)T * V * sizeof(float), "logits");
	float *out = emu_alloc((size_t)T * V * sizeof(float), "probs");
	int32_t *prm = emu_alloc(3 * sizeof(int32_t), "params");
	int32_t *scr = lp_scratch(T, S);
	float *want = malloc((size_t)V * sizeof(float));
	int *idx = malloc((size_t)V * sizeof(int));
	char what[160];

	fill_logits(x, T * V, mode);
	for (int c = 0; c < n_set; c++) {
		const setting *s = &set[c];
		memcpy(&prm[0], &s->temp, 4);
		prm[1] = s->top_k;
		memcpy(&prm[2], &s->top_p, 4);
		for (size_t i = 0; i < (size_t)T * V; i++)
			out[i] = NAN; /* a stale row from the last setting cannot pass */
		void *args[] = {&out, &x, &prm, &scr};
		launch(k, d3((unsigned)(SW_LOGITS_PHASES * S), (unsigned)T, 1), d3((unsigned)block, 1, 1),
		       args);
		lp_sync_clear(scr);
		for (int t = 0; t < T; t++) {
			ref_logits_process_row(want, x + (size_t)t * V, V, s->temp, s->top_k, s->top_p, idx);
			snprintf(what, sizeof(what), "V %d T %.2f k %d p %.2f mode %d row %d slices %d", V,
			         (double)s->temp, s->top_k, (double)s->top_p, mode, t, S);
			check_row(what, out + (size_t)t * V, want, V);
		}
	}
	free(want);
	free(idx);
	emu_free(x);
	emu_free(out);
	emu_free(prm);
	emu_free(scr);
}

/* Every (T, top-k, top-p) of the grid on one kernel per logits mode:
 * greedy (T = 0, with masks that must not matter), top-k 1, top-p 1, both
 * masks, top-p 0 (the first token only), top-k past V. */
static void test_logits_small(void **state)
{
	static const float temps[] = {0.0f, 0.6f, 1.0f};
	static const int ks[] = {0, 1, 7, 50, 5000};
	static const float ps[] = {1.0f, 0.9f, 0.5f, 0.0f};
	setting set[3 * 5 * 4];
	int n = 0;
	(void)state;
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < 5; b++)
			for (int c = 0; c < 4; c++)
				set[n++] = (setting){temps[a], ks[b], ps[c]};
	for (int m = 0; m < 4; m++)
		check(1000, 3, set, n, 128, m);
	const setting odd[] = {{1.0f, 5, 0.8f}, {0.6f, 40, 0.95f}, {0.0f, 0, 1.0f}, {2.0f, 1, 1.0f}};
	check(33, 4, odd, 4, 32, 1);
	check(33, 4, odd, 4, 32, 0);
	print_message("  %ld rows, %ld kept tokens: all identical sets\n", g_rows, g_kept);
}

static void test_logits_vocab(void **state)
{
	(void)state;
	const setting a[] = {{0.6f, 40, 0.9f}, {1.0f, 3000, 1.0f}, {0.0f, 0, 1.0f}};
	const setting b[] = {{1.0f, 0, 0.95f}, {1.0f, 1, 1.0f}};
	const setting c[] = {{1.0f, 50, 0.9f}, {0.0f, 0, 1.0f}, {1.0f, 0, 1.0f}};
	const setting d[] = {{0.6f, 0, 0.8f}};
	check(4099, 2, a, 3, 256, 0);
	check(4099, 2, b, 2, 256, 1);
	check(32003, 1, c, 3, 256, 0);
	check(32003, 1, d, 1, 256, 1);
	print_message("  %ld rows, %ld kept tokens in all: identical sets\n", g_rows, g_kept);
}

/* The awkward vocabularies (1, 31, 4097, 151936, 262144) at several row
 * counts, the planner's slice count and others (1: one block a phase; 3,
 * 8; 40: more slices than entries at V = 31), so that the top-k and top-p
 * boundaries fall in every place the merges have: inside one slice, across
 * slices, inside a group of equal logits that spans slices (the logits on
 * a grid of 7 values: top-k 700 and 100000 split a group, top-p too), on
 * -inf and underflowing rows. Every launch against ref_logits_process. */
static void test_logits_slices(void **state)
{
	(void)state;
	static const float temps[] = {0.0f, 0.7f, 1.3f};
	static const int ks[] = {0, 1, 3, 20};
	static const float ps[] = {1.0f, 0.9f, 0.3f};
	setting set[3 * 4 * 3];
	int n = 0;
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < 4; b++)
			for (int c = 0; c < 3; c++)
				set[n++] = (setting){temps[a], ks[b], ps[c]};
	static const int sl[] = {0, 1, 3, 8, 40};
	for (int i = 0; i < 5; i++) {
		g_slices = sl[i];
		for (int m = 0; m < 4; m++) {
			check(1, 3, set, n, 32, m);
			check(31, 7, set, n, 32, m);
		}
		if (sl[i] != 40) {
			check(4097, 1, set, n, 128, i % 4);
			check(4097, 3, set, n, 64, 1);
		}
	}
	/* boundaries inside groups of equal logits spread over 8 slices */
	const setting tie[] = {{1.0f, 700, 1.0f}, {1.0f, 1200, 0.5f}, {0.9f, 0, 0.45f},
	                       {1.0f, 650, 0.3f}, {2.0f, 3000, 0.99f}};
	g_slices = 8;
	check(4097, 2, tie, 5, 128, 1);
	g_slices = 0;
	check(4097, 2, tie, 5, 256, 1);
	print_message("  V 1, 31, 4097: %ld rows, %ld kept tokens: identical sets\n", g_rows, g_kept);
	const setting big[] = {{1.0f, 0, 0.95f}, {0.8f, 50, 0.9f}, {0.0f, 0, 1.0f}, {1.0f, 0, 1.0f}};
	const setting bigtie[] = {{1.0f, 100000, 1.0f}, {1.0f, 0, 0.6f}};
	check(151936, 2, big, 4, 256, 0);
	check(262144, 1, big, 2, 256, 3);
	check(262144, 1, bigtie, 2, 256, 1);
	print_message("  with V 151936, 262144: %ld rows, %ld kept tokens: identical sets\n", g_rows,
	              g_kept);
}

/* The normaliser against the one-block kernel's order (before the slices):
 * it summed e in double, thread t the entries t, t + B, t + 2B, .. in
 * order, then a tree over the B threads; the slices' kernel sums the exact
 * fixed-point masses (floor(e * 2^63)) and rounds once. Derived bound: the
 * old sum is within (V / B + log2 B) 2^-53 of the exact one (relative), the
 * new within 2^-53 + V 2^-63 (ks >= 1: the maximum's e is 1), so the two
 * 1 / ks differ by less than 2^-24 relative and their float roundings by at
 * most one ulp; a probability e * inv then by at most 2^-22 relative (one
 * ulp of inv on the product plus the product's two roundings). Checked on
 * the kept set of ref_logits_process (identical, as test_logits_small
 * asserts), with the old order replayed in C over the kernel's own e. */
static void old_order(int V, int T, const setting *set, int n_set, int mode, long *same,
                      long *n)
{
	const int B = 256, S = sw_logits_slices(T, V, B);
	gen_param p[] = {OH_NAME, OH_I("V", V), OH_I("BLOCK", B)};
	const emu_kernel *k = oh_load(SW_OP_logits_process, p, 3);
	float *x = emu_alloc((size_t)T * V * sizeof(float), "logits");
	float *out = emu_alloc((size_t)T * V * sizeof(float), "probs");
	int32_t *prm = emu_alloc(3 * sizeof(int32_t), "params");
	int32_t *scr = lp_scratch(T, S);
	float *want = malloc((size_t)V * sizeof(float));
	int *idx = malloc((size_t)V * sizeof(int));
	double part[256];
	fill_logits(x, T * V, mode);
	for (int c = 0; c < n_set; c++) {
		const setting *s = &set[c];
		memcpy(&prm[0], &s->temp, 4);
		prm[1] = s->top_k;
		memcpy(&prm[2], &s->top_p, 4);
		void *args[] = {&out, &x, &prm, &scr};
		launch(k, d3((unsigned)(SW_LOGITS_PHASES * S), (unsigned)T, 1), d3((unsigned)B, 1, 1),
		       args);
		for (int t = 0; t < T; t++) {
			const float *xr = x + (size_t)t * V, *o = out + (size_t)t * V;
			ref_logits_process_row(want, xr, V, s->temp, s->top_k, s->top_p, idx);
			float mx = -INFINITY;
			for (int i = 0; i < V; i++)
				mx = xr[i] > mx ? xr[i] : mx;
			const float inv_t = 1.0f / s->temp;
			for (int j = 0; j < B; j++)
				part[j] = 0.0;
			for (int i = 0; i < V; i++)
				if (want[i] > 0.0f)
					part[i % B] += (double)expf((xr[i] - mx) * inv_t);
			for (int h = B / 2; h > 0; h >>= 1)
				for (int j = 0; j < h; j++)
					part[j] += part[j + h];
			const float inv = (float)(1.0 / part[0]);
			for (int i = 0; i < V; i++) {
				if (!(want[i] > 0.0f))
					continue;
				const float old = expf((xr[i] - mx) * inv_t) * inv;
				if (!(fabs((double)o[i] - old) <= ldexp((double)old, -22)))
					fail_msg("V %d row %d entry %d: %.9g, the old order's %.9g: beyond 2^-22 "
					         "relative", V, t, i, (double)o[i], (double)old);
				*same += o[i] == old;
				(*n)++;
			}
		}
	}
	free(want);
	free(idx);
	emu_free(x);
	emu_free(out);
	emu_free(prm);
	emu_free(scr);
}

static void test_logits_old_order(void **state)
{
	(void)state;
	const setting set[] = {{1.0f, 0, 1.0f}, {0.7f, 40, 0.9f}, {1.0f, 0, 0.95f}, {1.3f, 3000, 1.0f}};
	long same = 0, n = 0;
	old_order(4099, 3, set, 4, 0, &same, &n);
	old_order(32003, 2, set, 4, 1, &same, &n);
	old_order(32003, 1, set, 4, 3, &same, &n);
	print_message("  %ld kept probabilities within 2^-22 of the old order's, %ld bit-identical\n", n,
	              same);
}

static void test_logits_nvrtc(void **state)
{
	(void)state;
	gen_param a[] = {OH_NAME, OH_I("V", 32003), OH_I("BLOCK", 256)};
	oh_nvrtc_p(SW_OP_logits_process, a, 3);
	gen_param b[] = {OH_NAME, OH_I("V", 128256), OH_I("BLOCK", 128)};
	oh_nvrtc_p(SW_OP_logits_process, b, 3);
	gen_param c[] = {OH_NAME, OH_I("V", 1000), OH_I("BLOCK", 256)};
	oh_nvrtc_p(SW_OP_logits_process, c, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_logits_small),
		cmocka_unit_test(test_logits_vocab),
		cmocka_unit_test(test_logits_slices),
		cmocka_unit_test(test_logits_old_order),
		cmocka_unit_test(test_logits_nvrtc),
	};
	if (getenv("CMOCKA_FILTER") && *getenv("CMOCKA_FILTER"))
		cmocka_set_test_filter(getenv("CMOCKA_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
