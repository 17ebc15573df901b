/* The GGUF-typed GEMV on the GPU (templates/quant_a8.cu.tmpl and
 * gemv_gguf.cu.tmpl, kernels/ref/quant_a8.c and gemv_gguf.c) and the
 * repack at load (runtime/engine/wplanes.h), for Q4_0, Q4_1, Q5_0, Q8_0, Q4_K
 * and Q6_K weights, against independent statements:
 *  - the repack: the planes dequantize (ref_wplanes_dequant_row) to the
 *    format table's values of the file's blocks (core/wformat.h) bit for
 *    bit, and rt_wplanes_check refuses planes with one nibble, scale or
 *    (Q5_0, Q6_K) high bit changed;
 *  - quant_a8: the kernel's bytes = ref_quant_a8's = the host GEMMs' own
 *    rule (runtime/device hg_a8_quant, a separate implementation), with
 *    ties, +-65504, a zero block, inf and NaN;
 *  - ref_gemv_gguf on the planes = hg_gemm_gguf_a8 on the file's blocks
 *    bit for bit (the host's integer sums, scale products and order);
 *  - the kernel in the emulator against ref_gemv_gguf: the same terms
 *    (exact integer sums, each scale product one rounding, fmaf), summed
 *    in another order: a lane's chain over its sub-blocks, then the 32 KS
 *    partials in order, depth d_k = ceil(NG / KS) t + 32 KS (t terms a
 *    sub-block: 2 for Q4_1 and Q4_K, else 1; NG groups of 32 sub-blocks)
 *    against the reference's d_r = t K / 32, so |kernel - ref| <= (gamma_dk
 *    + gamma_dr) mag, mag = sum over the terms of |term| (Higham 3.1 for a
 *    sum of any shape of depth d); rows with a NaN activation NaN;
 *  - the kernel against double precision on the fp16 activations and the
 *    file's weights (wformat's values W): the bound the formats give,
 *    (1) the int8 activation rounding |a - da q| <= da (1/2 + 127 * 2.01
 *    u) <= 0.51 da per element (rint of a * fl(1 / fl(amax / 127)), |q| <=
 *    127), times sum |W| over its sub-block; (2) the weights the kernel
 *    multiplies are d (q - z) + mn exactly, wformat's W one rounding of it
 *    (Q4_1, Q4_K, Q6_K; exact for Q4_0, Q5_0, Q8_0): u sum |W a|, twice for the
 *    products' own rounding slack; (3) the scale products (one rounding
 *    each, u) and the sum (gamma_dk): (2 u + gamma_dk) mag;
 * on awkward shapes: K of 1, 3 and 33 sub-blocks (Q4/Q8) and 1, 5 and 9
 * super-blocks (K-quants; a GGUF row is whole blocks by the format, so K
 * is awkward against the kernel's groups of 32 sub-blocks: the last group
 * partial, lanes idle, a group split between warps), N = 1,
 * 3, 37 (row groups past N), M = 1 .. 17 (odd, one past the M tile), a K
 * split over 1, 2 and 4 warps, NW > N (the first rows of a larger weight),
 * then NVRTC at Llama-3-8B's shapes and Gemma 3 270M Q4_K_M's (sm_80,
 * sm_90, zero spills). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/wformat.h"
#include "device/host_gemm.h"
#include "engine/wplanes.h"
#include "formats/gguf.h"
#include "kernels/half.h"
#include "kernels/ref/ref.h"

#include "check.h"
#include "op_harness.h"

static const int TYPES[] = {SW_WT_Q4_0, SW_WT_Q4_1, SW_WT_Q5_0, SW_WT_Q8_0, SW_WT_Q4_K,
                           SW_WT_Q6_K};
#define N_TYPES 6

static uint32_t rbits(void)
{
	return (uint32_t)((rnd() + 1.0) * 0x1p31);
}

/* a positive fp16 scale in [lo, 2 lo) */
static uint16_t rscale(double lo)
{
	return gguf_f32_to_f16((float)(lo * (1.5 + 0.5 * rnd())));
}

/* One random block of type t at p: every quant value, random (valid,
 * finite) scales of both signs where the type takes any */
static void enc_block(int t, uint8_t *p)
{
	uint16_t h;
	if (t == SW_WT_Q6_K) { /* ql[128], qh[64], scales[16] any int8, d */
		for (int i = 0; i < 208; i++)
			p[i] = (uint8_t)rbits();
		h = rscale(1.0 / 8192) ^ (rnd() < 0 ? 0x8000 : 0);
		memcpy(p + 208, &h, 2);
		return;
	}
	if (t == SW_WT_Q5_0) { /* d, qh[4], qs[16]: every bit random */
		h = rscale(1.0 / 128) ^ (rnd() < 0 ? 0x8000 : 0);
		memcpy(p, &h, 2);
		for (int i = 2; i < 22; i++)
			p[i] = (uint8_t)rbits();
		return;
	}
	if (t == SW_WT_Q8_0) {
		h = rscale(1.0 / 512) ^ (rnd() < 0 ? 0x8000 : 0);
		memcpy(p, &h, 2);
		for (int i = 0; i < 32; i++)
			p[2 + i] = (uint8_t)rbits();
		return;
	}
	if (t == SW_WT_Q4_0 || t == SW_WT_Q4_1) {
		h = rscale(1.0 / 64) ^ (rnd() < 0 ? 0x8000 : 0);
		memcpy(p, &h, 2);
		int off = 2;
		if (t == SW_WT_Q4_1) {
			h = gguf_f32_to_f16((float)(-(0.1 + 0.05 * rnd())));
			memcpy(p + 2, &h, 2);
			off = 4;
		}
		for (int i = 0; i < 16; i++)
			p[off + i] = (uint8_t)rbits();
		return;
	}
	h = rscale(1.0 / 1024); /* Q4_K: d, dmin, 12 scale bytes, 128 nibble bytes */
	memcpy(p, &h, 2);
	h = rscale(1.0 / 2048);
	memcpy(p + 2, &h, 2);
	for (int i = 4; i < 144; i++)
		p[i] = (uint8_t)rbits();
}

static uint8_t *make_blocks(int t, int n, int k)
{
	const sw_wformat *f = sw_wformat_get((uint32_t)t);
	const int64_t nb = (int64_t)n * k / f->block;
	uint8_t *w = malloc((size_t)(nb * f->bytes));
	assert_non_null(w);
	for (int64_t i = 0; i < nb; i++)
		enc_block(t, w + i * f->bytes);
	return w;
}

/* A (m, k) fp16: blocks of different scales, a zero block, values at the
 * format's edge (65504) and ties of the int8 rounding (amax 127: x.5) */
static void make_acts(uint16_t *A, int m, int k)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < k; j++) {
			const int b = (i * 7 + j / 32) % 6;
			float v = (float)(rnd() * (b == 0 ? 0.01 : b == 1 ? 3.0 : 1.0));
			if (b == 2)
				v = 0.0f;
			if (b == 3 && j % 32 == 0)
				v = 127.0f; /* da 1: the others' x.5 values are ties */
			if (b == 3 && j % 32)
				v = (float)((int)(rnd() * 100)) + 0.5f;
			if (b == 4 && j % 32 == 5)
				v = -65504.0f;
			A[(size_t)i * k + j] = gguf_f32_to_f16(v);
		}
}

static size_t a8_bytes(int m, int k)
{
	return (size_t)m * k + (size_t)m * (k / 32) * 8;
}

/* ---- the repack ---- */

static void test_repack(void **state)
{
	(void)state;
	sw_err err = {0};
	for (int ti = 0; ti < N_TYPES; ti++) {
		const int t = TYPES[ti];
		const sw_wformat *f = sw_wformat_get((uint32_t)t);
		const int blk = f->block;
		static const int kb[] = {1, 3, 33};
		for (int s = 0; s < 3; s++) {
			const int n = 5, k = blk == 32 ? 32 * kb[s] : 256 * (s == 2 ? 9 : kb[s]);
			uint8_t *w = make_blocks(t, n, k);
			const size_t bytes = (size_t)sw_wformat_nbytes((uint32_t)t, (uint64_t)n * k);
			uint8_t *p = malloc(bytes), *p2 = malloc(bytes);
			assert_non_null(p);
			assert_non_null(p2);
			memset(p, 0xa5, bytes);
			assert_int_equal(rt_wplanes_repack(p, w, t, n, k), 0);
			int64_t off[REF_WPLANES];
			assert_int_equal(ref_wplanes_layout(t, n, k, off), 0);
			assert_int_equal(off[REF_WPLANES - 1], (int64_t)bytes); /* the file's bytes */
			if (rt_wplanes_check(p, w, t, n, k, f->name, &err))
				fail_msg("%s n %d k %d: %s", f->name, n, k, err.msg);
			/* deterministic: a second repack over other garbage, the same bytes */
			memset(p2, 0x5a, bytes);
			assert_int_equal(rt_wplanes_repack(p2, w, t, n, k), 0);
			assert_memory_equal(p, p2, bytes);
			/* one bit of a quant, of a scale, (Q5_0, Q6_K) of a high bit: refused */
			const int64_t flips[3] = {off[1] / 2 + 3, off[1] + 1,
			                          t == SW_WT_Q6_K || t == SW_WT_Q5_0 ? off[2] + 5 : -1};
			for (int x = 0; x < 3; x++) {
				if (flips[x] < 0)
					continue;
				memcpy(p2, p, bytes);
				p2[flips[x]] ^= x == 1 ? 0x02 : 0x10;
				memset(&err, 0, sizeof(err));
				if (!rt_wplanes_check(p2, w, t, n, k, f->name, &err))
					fail_msg("%s n %d k %d: byte %lld changed, the check passed", f->name, n, k,
					         (long long)flips[x]);
				if (!strstr(err.msg, "do not hold the file's weights"))
					fail_msg("%s: %s", f->name, err.msg);
			}
			free(w);
			free(p);
			free(p2);
		}
		print_message("  %s: planes = the file's values, bit for bit (K of 1, 3, %s blocks)\n",
		              f->name, blk == 32 ? "33" : "9");
	}
	/* not a type with planes, k not whole blocks */
	uint8_t dummy[64];
	assert_int_equal(rt_wplanes_repack(dummy, dummy, SW_WT_Q5_1, 1, 32), SW_EINVAL);
	assert_int_equal(rt_wplanes_repack(dummy, dummy, SW_WT_Q4_K, 1, 32), SW_EINVAL);
}

/* ---- quant_a8 ---- */

static void quant_case(int M, int K, bool specials)
{
	oh_case c;
	oh_begin(&c, SW_OP_quant_a8, "M%d K%d%s", M, K, specials ? " inf/nan" : "");
	oh_pi(&c, "M", M);
	oh_pi(&c, "K", K);
	oh_pi(&c, "BLOCK", 128);
	const size_t ab = a8_bytes(M, K);
	uint8_t *a8 = oh_buf(&c, "a8", ab, 1);
	uint16_t *A = oh_buf(&c, "a16", (size_t)M * K, 2);
	make_acts(A, M, K);
	if (specials) {
		A[3] = 0x7c00;                    /* inf: block 0 of row 0 */
		A[(size_t)(M - 1) * K + 40] = 0x7e01; /* NaN: block 1 of the last row */
	}
	uint8_t *want = oh_host(&c, ab);
	assert_int_equal(ref_quant_a8(want, A, M, K), 0);
	/* the host GEMMs' rule (hg_a8_quant), another implementation */
	const int nb = K / 32;
	uint8_t *hq = oh_host(&c, (size_t)M * K);
	float *hd = oh_host(&c, sizeof(float) * (size_t)M * nb), *xr = oh_host(&c, sizeof(float) * K);
	hg_a8_quant(hq, hd, xr, A, M, K, false, 0, HG_PATH_AUTO);
	assert_memory_equal(hq, want, (size_t)M * K);
	const float *wd = (const float *)(want + (size_t)M * K);
	const int32_t *ws = (const int32_t *)(wd + (size_t)M * nb);
	for (int i = 0; i < M * nb; i++) {
		if (memcmp(&hd[i], &wd[i], 4))
			fail_msg("%s: da[%d] %a, the host's %a", c.what, i, (double)wd[i], (double)hd[i]);
		int32_t h[2] = {0, 0};
		for (int t = 0; t < 32; t++)
			h[t / 16] += (int8_t)hq[(size_t)i * 32 + t];
		assert_int_equal((int16_t)(ws[i] & 0xffff), h[0]);
		assert_int_equal((int16_t)((uint32_t)ws[i] >> 16), h[1]);
	}
	if (specials) {
		assert_true(isnan(wd[0]));
		assert_true(isnan(wd[(size_t)(M - 1) * nb + 1]));
	}
	oh_expect(&c, "a8", KERN_U8, a8, want, ab, 0, 0, 0);
	oh_launch(&c, d3((unsigned)((M * nb + 127) / 128), 1, 1), d3(128, 1, 1));
	oh_end(&c);
}

static void test_quant_a8(void **state)
{
	(void)state;
	static const int ms[] = {1, 3, 17}, ks[] = {32, 96, 4128};
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++)
			quant_case(ms[i], ks[j], j == 1);
	gen_param p[] = {OH_NAME, OH_I("M", 16), OH_I("K", 14336), OH_I("BLOCK", 128)};
	oh_nvrtc_p(SW_OP_quant_a8, p, 4);
}

/* ---- gemv_gguf ---- */

typedef struct gcase {
	int t, M, N, NW, K, MT, R, WARPS, KS;
	int nan_row; /* -1, or a row of A holding a NaN */
} gcase;

static int ceil_div(int a, int b)
{
	return (a + b - 1) / b;
}

static void gemv_case(const gcase *g)
{
	const int t = g->t, M = g->M, N = g->N, NW = g->NW, K = g->K;
	const sw_wformat *f = sw_wformat_get((uint32_t)t);
	oh_case c;
	oh_begin(&c, SW_OP_gemv_gguf, "%s M%d N%d NW%d K%d MT%d R%d WARPS%d KS%d%s", f->name, M, N, NW,
	         K, g->MT, g->R, g->WARPS, g->KS, g->nan_row >= 0 ? " NaN row" : "");
	oh_pi(&c, "WTYPE", t);
	oh_pi(&c, "M", M);
	oh_pi(&c, "N", N);
	oh_pi(&c, "NW", NW);
	oh_pi(&c, "K", K);
	oh_pi(&c, "MT", g->MT);
	oh_pi(&c, "R", g->R);
	oh_pi(&c, "WARPS", g->WARPS);
	oh_pi(&c, "KS", g->KS);
	const size_t wbytes = (size_t)sw_wformat_nbytes((uint32_t)t, (uint64_t)NW * K);
	float *C = oh_buf(&c, "C", (size_t)M * N, sizeof(float));
	uint16_t *A = oh_buf(&c, "a16", (size_t)M * K, 2);
	uint8_t *a8 = oh_buf(&c, "a8", a8_bytes(M, K), 1);
	uint8_t *W = oh_buf(&c, "w", wbytes, 1);
	uint8_t *blocks = make_blocks(t, NW, K);
	assert_int_equal(rt_wplanes_repack(W, blocks, t, NW, K), 0);
	make_acts(A, M, K);
	if (g->nan_row >= 0)
		A[(size_t)g->nan_row * K + K / 2] = 0x7e00;
	assert_int_equal(ref_quant_a8(a8, A, M, K), 0);

	/* the specification, and the host's GEMM on the file's blocks: the same bits */
	float *ref = oh_host(&c, sizeof(float) * (size_t)M * N);
	double *mag = oh_host(&c, sizeof(double) * (size_t)M * N);
	assert_int_equal(ref_gemv_gguf_mag(ref, mag, a8, W, M, N, NW, K, t), 0);
	float *host = oh_host(&c, sizeof(float) * (size_t)M * N);
	float *hfull = oh_host(&c, sizeof(float) * (size_t)M * NW);
	assert_int_equal(hg_gemm_gguf_a8(hfull, A, blocks, M, NW, K, t, false, HG_PATH_AUTO, 1), 0);
	for (int m = 0; m < M; m++)
		memcpy(host + (size_t)m * N, hfull + (size_t)m * NW, sizeof(float) * N);
	for (size_t i = 0; i < (size_t)M * N; i++)
		if (memcmp(&host[i], &ref[i], 4))
			fail_msg("%s: C[%zu] ref %a, the host GEMM %a", c.what, i, (double)ref[i],
			         (double)host[i]);

	/* the kernel: the reference's terms in its order (the header's bound) */
	const int tpb = t == SW_WT_Q4_1 || t == SW_WT_Q4_K ? 2 : 1;
	const int NG = ceil_div(K / 32, 32);
	const int dk = ceil_div(NG, g->KS) * tpb + 32 * g->KS, dr = K / 32 * tpb;
	double *rd = oh_host(&c, sizeof(double) * (size_t)M * N);
	double *bd = oh_host(&c, sizeof(double) * (size_t)M * N);
	for (size_t i = 0; i < (size_t)M * N; i++) {
		rd[i] = ref[i];
		bd[i] = (gamma_n(dk) + gamma_n(dr)) * mag[i];
		if (g->nan_row >= 0 && (int)(i / N) == g->nan_row)
			assert_true(isnan(ref[i]));
	}
	oh_expect_close(&c, "C", C, rd, bd, (size_t)M * N, M, N, 0);
	const int rows = g->R * g->WARPS / g->KS;
	oh_launch(&c, d3((unsigned)ceil_div(N, rows), 1, (unsigned)ceil_div(M, g->MT)),
	          d3(32 * (unsigned)g->WARPS, 1, 1));

	/* against double precision on the fp16 inputs and the file's weights */
	float *wv = malloc(sizeof(float) * (size_t)NW * K);
	assert_non_null(wv);
	assert_int_equal(sw_wformat_dequant((uint32_t)t, blocks, (uint64_t)NW * K, wv), 0);
	const float *da = (const float *)(a8 + (size_t)M * K);
	double worst = 0;
	for (int m = 0; m < M; m++) {
		if (m == g->nan_row)
			continue;
		for (int n = 0; n < N; n++) {
			double exact = 0, act = 0, wa = 0;
			for (int b = 0; b < K / 32; b++) {
				double sw = 0;
				for (int x = 0; x < 32; x++) {
					const int k = 32 * b + x;
					const double a = sw_f16_to_f32(A[(size_t)m * K + k]), w = wv[(size_t)n * K + k];
					exact += a * w;
					wa += fabs(a * w);
					sw += fabs(w);
				}
				act += 0.51 * da[(size_t)m * (K / 32) + b] * sw;
			}
			const size_t i = (size_t)m * N + n;
			const double bound = act * (1 + 4 * U32) + 2 * U32 * wa + (2 * U32 + gamma_n(dk)) * mag[i];
			const double e = fabs((double)C[i] - exact);
			if (!(e <= bound))
				fail_msg("%s: C[%d][%d] = %.9g, exact %.9g: error %.3g > the format bound %.3g",
				         c.what, m, n, (double)C[i], exact, e, bound);
			worst = fmax(worst, e / bound);
		}
	}
	free(wv);
	free(blocks);
	oh_end(&c);
	if (getenv("GEMV_VERBOSE"))
		print_message("  %s: worst error %.3f of the format bound\n", c.what, worst);
}

static void test_gemv_gguf(void **state)
{
	(void)state;
	/* every type on the awkward shapes */
	for (int ti = 0; ti < N_TYPES; ti++) {
		const int t = TYPES[ti], blk = sw_wformat_block(t) == 256;
		const int ks[3] = {blk ? 256 : 32, blk ? 256 * 9 : 96, blk ? 256 * 5 : 32 * 33};
		for (int s = 0; s < 3; s++) {
			const gcase a = {t, s == 0 ? 1 : s == 1 ? 5 : 9, s == 0 ? 1 : s == 1 ? 37 : 3,
			                 s == 0 ? 1 : s == 1 ? 37 : 7, ks[s], 8, 2, 4, s == 2 ? 2 : 1,
			                 s == 1 ? 3 : -1};
			gemv_case(&a);
		}
		print_message("  %s: K %d, %d, %d; kernel = ref within the order bound, ref = the host "
		              "GEMM bit for bit, within the format bound of double\n",
		              sw_wformat_get((uint32_t)t)->name, ks[0], ks[1], ks[2]);
	}
	/* M = 1 .. 17 (one past the M tile, odd) on Q4_1, N 3, a 4-warp K split */
	for (int M = 1; M <= 17; M++) {
		const gcase a = {SW_WT_Q4_1, M, 3, 3, 32 * 70, 8, 2, 4, 4, M == 17 ? 16 : -1};
		gemv_case(&a);
	}
	print_message("  Q4_1: M = 1 .. 17 (MT 8), N 3, K 2240, KS 4\n");
	/* one row a warp, eight warps, M tile 4 */
	const gcase b = {SW_WT_Q6_K, 6, 19, 19, 512, 4, 1, 8, 2, -1};
	gemv_case(&b);
}

/* Llama-3-8B's GEMMs (wq 4096 x 4096, w_down 4096 x 14336, wk 1024 x
 * 4096) at decode (M 1) and a 16-row tree, every type. */
static void test_gemv_gguf_nvrtc(void **state)
{
	(void)state;
	static const int shapes[][4] = {{1, 4096, 4096, 1}, {16, 4096, 14336, 1}, {5, 1024, 4096, 4}};
	for (int ti = 0; ti < N_TYPES; ti++)
		for (int s = 0; s < 3; s++) {
			gen_param p[] = {OH_NAME, OH_I("WTYPE", TYPES[ti]), OH_I("M", shapes[s][0]),
			                 OH_I("N", shapes[s][1]), OH_I("NW", shapes[s][1]),
			                 OH_I("K", shapes[s][2]), OH_I("MT", shapes[s][0] < 8 ? shapes[s][0] : 8),
			                 OH_I("R", 2), OH_I("WARPS", 4), OH_I("KS", shapes[s][3])};
			oh_nvrtc_p(SW_OP_gemv_gguf, p, 10);
		}
	/* Gemma 3 270M Q4_K_M's as its engine plans them: Q5_0 w_gate (2048 x
	 * 640: 20 sub-blocks a row, one partial group), the Q8_0 tied head
	 * (262144 x 640), Q6_K and Q4_K w_down (640 x 2048) split over 2 warps */
	static const int gemma[][5] = {{SW_WT_Q5_0, 16, 2048, 640, 1}, {SW_WT_Q8_0, 5, 262144, 640, 1},
	                               {SW_WT_Q6_K, 16, 640, 2048, 2}, {SW_WT_Q4_K, 5, 640, 2048, 2}};
	for (int s = 0; s < 4; s++) {
		gen_param p[] = {OH_NAME, OH_I("WTYPE", gemma[s][0]), OH_I("M", gemma[s][1]),
		                 OH_I("N", gemma[s][2]), OH_I("NW", gemma[s][2]), OH_I("K", gemma[s][3]),
		                 OH_I("MT", gemma[s][1] < 8 ? gemma[s][1] : 8), OH_I("R", 2),
		                 OH_I("WARPS", 4), OH_I("KS", gemma[s][4])};
		oh_nvrtc_p(SW_OP_gemv_gguf, p, 10);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_repack),
		cmocka_unit_test(test_quant_a8),
		cmocka_unit_test(test_gemv_gguf),
		cmocka_unit_test(test_gemv_gguf_nvrtc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
