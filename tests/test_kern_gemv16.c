/* The 16-bit GEMV / small-M GEMM on the GPU (templates/gemv16.cu.tmpl,
 * kernels/ref/gemv16.c), fp16 and bf16, against independent statements:
 *  - the kernel in the emulator equals ref_gemv16 bit for bit (the
 *    reference states the kernel's order: slots of 16-byte chunks, fmaf
 *    chains, the slots added in order), rows with a NaN activation NaN;
 *  - ref_gemv16 (so the kernel) against double precision on the same
 *    16-bit inputs: every product is exact in fp32 and each fmaf or
 *    addition one rounding, so |C - exact| <= gamma_d sum |a w| with depth
 *    d = 8 ceil(K / (256 KS)) + 32 KS (Higham 3.1; u = 2^-24);
 *  - the host backend's hg_gemv16 (vectorised across slots) equals
 *    ref_gemv16 bit for bit;
 *  - the reference and hg_gemv16 refuse K not a multiple of 8, KS outside
 *    1..32;
 * on awkward shapes: N = 1, 3, 37 (row groups past N), odd M and M one past
 * the M tile, M = 64 (a verify tree's rows, four M tiles), K of one chunk,
 * 33 chunks, 97 chunks (a lane's last chunk partial against 32 KS slots),
 * K split over 1, 2, 4 and 8 warps, R 1, 2 and 4;
 * then NVRTC at Llama-3-8B's shapes (sm_80, sm_90, zero spills). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "device/host_gemm.h"
#include "kernels/half.h"
#include "kernels/ref/ref.h"

#include "check.h"
#include "op_harness.h"

typedef struct gcase {
	int f16, M, N, K, MT, R, WARPS, KS;
	int nan_row; /* -1, or a row of A holding a NaN */
} gcase;

static int ceil_div(int a, int b)
{
	return (a + b - 1) / b;
}

/* values of several magnitudes, signs and exact zeros, as 16-bit bits */
static void fill16(uint16_t *x, size_t n, int f16, double scale)
{
	for (size_t i = 0; i < n; i++) {
		double v = rnd() * scale * (i % 7 == 0 ? 16.0 : i % 5 == 0 ? 1.0 / 64 : 1.0);
		if (i % 11 == 3)
			v = 0;
		x[i] = sw_f32_to_half((float)v, f16);
	}
}

static void gemv_case(const gcase *g)
{
	const int M = g->M, N = g->N, K = g->K;
	oh_case c;
	oh_begin(&c, SW_OP_gemv16, "%s M%d N%d K%d MT%d R%d WARPS%d KS%d%s", g->f16 ? "fp16" : "bf16",
	         M, N, K, g->MT, g->R, g->WARPS, g->KS, g->nan_row >= 0 ? " NaN row" : "");
	oh_pi(&c, "IS_F16", g->f16);
	oh_pi(&c, "M", M);
	oh_pi(&c, "N", N);
	oh_pi(&c, "K", K);
	oh_pi(&c, "MT", g->MT);
	oh_pi(&c, "R", g->R);
	oh_pi(&c, "WARPS", g->WARPS);
	oh_pi(&c, "KS", g->KS);
	float *C = oh_buf(&c, "C", (size_t)M * N, sizeof(float));
	uint16_t *A = oh_buf(&c, "A", (size_t)M * K, 2);
	uint16_t *W = oh_buf(&c, "W", (size_t)N * K, 2);
	fill16(A, (size_t)M * K, g->f16, 2.0);
	fill16(W, (size_t)N * K, g->f16, 0.05);
	if (g->nan_row >= 0)
		A[(size_t)g->nan_row * K + K / 2] = g->f16 ? 0x7e00 : 0x7fc0;

	float *ref = oh_host(&c, sizeof(float) * (size_t)M * N);
	double *mag = oh_host(&c, sizeof(double) * (size_t)M * N);
	assert_int_equal(ref_gemv16_mag(ref, mag, A, W, M, N, K, g->f16, g->KS), 0);
	float *plain = oh_host(&c, sizeof(float) * (size_t)M * N);
	assert_int_equal(ref_gemv16(plain, A, W, M, N, K, g->f16, g->KS), 0);
	assert_memory_equal(plain, ref, sizeof(float) * (size_t)M * N);
	/* the host backend's fast equivalent: the same bits (NaN rows NaN) */
	float *host = oh_host(&c, sizeof(float) * (size_t)M * N);
	assert_int_equal(hg_gemv16(host, A, W, M, N, K, g->f16, g->KS, 0), 0);
	for (size_t i = 0; i < (size_t)M * N; i++)
		if (memcmp(&host[i], &ref[i], 4) && !(isnan(host[i]) && isnan(ref[i])))
			fail_msg("%s: C[%zu] ref %a, hg_gemv16 %a", c.what, i, (double)ref[i],
			         (double)host[i]);

	/* the reference against double precision: the order's bound */
	const int depth = 8 * ceil_div(K, 256 * g->KS) + 32 * g->KS;
	double worst = 0;
	for (int m = 0; m < M; m++)
		for (int n = 0; n < N; n++) {
			const float got = ref[(size_t)m * N + n];
			if (m == g->nan_row) {
				if (!isnan(got))
					fail_msg("%s: C[%d][%d] = %g, expected NaN (a NaN in A's row)", c.what, m, n,
					         (double)got);
				continue;
			}
			double exact = 0, sa = 0;
			for (int k = 0; k < K; k++) {
				const double p = (double)sw_half_to_f32(A[(size_t)m * K + k], g->f16) *
				                 sw_half_to_f32(W[(size_t)n * K + k], g->f16);
				exact += p;
				sa += fabs(p);
			}
			if (fabs(sa - mag[(size_t)m * N + n]) > 1e-12 * sa)
				fail_msg("%s: mag[%d][%d] %.17g, sum |a w| %.17g", c.what, m, n,
				         mag[(size_t)m * N + n], sa);
			const double bound = gamma_n(depth) * sa, e = fabs((double)got - exact);
			if (!(e <= bound))
				fail_msg("%s: C[%d][%d] = %.9g, exact %.9g: error %.3g > gamma_%d sum|aw| %.3g",
				         c.what, m, n, (double)got, exact, e, depth, bound);
			if (bound > 0)
				worst = fmax(worst, e / bound);
		}

	/* the kernel: the reference's bits */
	oh_expect(&c, "C", KERN_F32, C, ref, (size_t)M * N, M, N, 0);
	const int rows = g->R * g->WARPS / g->KS;
	oh_launch(&c, d3((unsigned)ceil_div(N, rows), 1, (unsigned)ceil_div(M, g->MT)),
	          d3(32 * (unsigned)g->WARPS, 1, 1));
	oh_end(&c);
	if (getenv("GEMV_VERBOSE"))
		print_message("  %s: worst error %.3f of the bound\n", c.what, worst);
}

static void test_gemv16(void **state)
{
	(void)state;
	static const gcase cases[] = {
		/* f16 M   N    K      MT  R WARPS KS nan */
		{1, 1, 1, 8, 1, 2, 4, 1, -1},        /* one chunk, N 1, rows past N */
		{0, 1, 1, 8, 1, 2, 4, 4, -1},        /* three of the four split warps idle */
		{1, 3, 37, 264, 8, 2, 4, 1, 1},      /* 33 chunks: a lane's second chunk */
		{0, 5, 37, 264, 8, 2, 4, 2, -1},
		{1, 7, 3, 776, 4, 1, 8, 8, -1},      /* 97 chunks over 256 slots */
		{0, 9, 19, 776, 8, 4, 4, 2, 8},      /* one past the M tile, NaN in the last row */
		{1, 17, 13, 2056, 16, 2, 8, 4, -1},  /* 257 chunks: slot 0 a chunk more */
		{0, 64, 11, 1024, 16, 2, 4, 1, 63},  /* a verify tree's 64 rows, four M tiles */
		{1, 64, 5, 512, 16, 4, 8, 8, -1},
		{0, 1, 96, 4096, 1, 2, 4, 1, -1},    /* a decode row at 8B's K */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		gemv_case(&cases[i]);
	/* M = 1 .. 17 on one shape (odd M, one past the tile), both types */
	for (int M = 1; M <= 17; M++) {
		const gcase a = {M % 2, M, 7, 136, 8, 2, 4, 2, -1};
		gemv_case(&a);
	}
	print_message("  fp16 and bf16: kernel = ref bit for bit, ref within gamma_d of double, "
	              "N 1..96, M 1..17 and 64, K 8..4096, KS 1..8\n");
}

static void test_gemv16_refusals(void **state)
{
	(void)state;
	float C[4];
	uint16_t A[32] = {0}, W[32] = {0};
	assert_int_equal(ref_gemv16(C, A, W, 1, 1, 12, 1, 1), REF_EINVAL); /* K not 8k */
	assert_int_equal(ref_gemv16(C, A, W, 1, 1, 0, 1, 1), REF_EINVAL);
	assert_int_equal(ref_gemv16(C, A, W, 1, 1, 8, 1, 0), REF_EINVAL);  /* KS 0 */
	assert_int_equal(ref_gemv16(C, A, W, 1, 1, 8, 1, 33), REF_EINVAL); /* KS 33 */
	assert_int_equal(ref_gemv16(C, A, W, 0, 1, 8, 1, 1), REF_EINVAL);
	assert_int_equal(ref_gemv16(C, A, W, 1, 1, 8, 2, 1), REF_EINVAL);  /* IS_F16 2 */
	assert_int_equal(ref_gemv16(C, A, W, 1, 1, 8, 1, 1), 0);
	assert_int_equal(hg_gemv16(C, A, W, 1, 1, 12, true, 1, 0), SW_EINVAL);
	assert_int_equal(hg_gemv16(C, A, W, 1, 1, 8, true, 33, 0), SW_EINVAL);
	assert_int_equal(hg_gemv16(C, A, W, 1, 1, 8, true, 1, 0), 0);
}

/* Llama-3-8B's GEMMs (wq/wo 4096 x 4096, wk/wv 1024 x 4096, gate/up 14336
 * x 4096, down 4096 x 14336) at decode (M 1), a chain (4), 8 and 16 rows
 * and a 64-row tree (M tiles of 16), both types: zero spills. */
static void test_gemv16_nvrtc(void **state)
{
	(void)state;
	static const int shapes[][6] = {
		/* M  N      K      MT  R  KS */
		{1, 4096, 4096, 1, 2, 1},  {1, 1024, 4096, 1, 2, 4}, {4, 14336, 4096, 4, 2, 1},
		{8, 4096, 14336, 8, 2, 1}, {16, 4096, 4096, 16, 2, 1}, {64, 1024, 4096, 16, 2, 2},
	};
	for (int f16 = 0; f16 < 2; f16++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			gen_param p[] = {OH_NAME, OH_I("IS_F16", f16), OH_I("M", shapes[s][0]),
			                 OH_I("N", shapes[s][1]), OH_I("K", shapes[s][2]),
			                 OH_I("MT", shapes[s][3]), OH_I("R", shapes[s][4]),
			                 OH_I("WARPS", 4), OH_I("KS", shapes[s][5])};
			oh_nvrtc_p(SW_OP_gemv16, p, 9);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gemv16),
		cmocka_unit_test(test_gemv16_refusals),
		cmocka_unit_test(test_gemv16_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
