/* The GGUF-type GEMM on int8 activations (runtime/device/host_gemm_q4.c,
 * host_gemm.h hg_gemm_gguf_a8) for Q4_0, Q4_1, Q5_0, Q4_K, Q6_K and Q8_0
 * weights.
 *
 * The weight blocks are built here (random scales, mins and every nibble
 * value; Q4_K random packed 6-bit scales; Q6_K random bits and int8 scales
 * of either sign), and read back by this file's own dequantizer written from
 * llama.cpp's formulas (ggml-quants.c dequantize_row_q4_0/q4_1/q5_0/q4_K/q6_K,
 * get_scale_min_k4), in double, exactly; that
 * dequantizer is checked against formats/gguf.c's gguf_dequantize (another
 * implementation) bit for bit after the one fp32 rounding both make.
 *
 * Bounds, per output (C = sum over 32-blocks b):
 *  (1) against the quantized activations: with this file's int8 rule for A
 *      (GGUF Q8_0 with an fp32 scale: da = amax / 127, q = rne(a / da)) the
 *      exact value is sum_b da_b sum_t q_t w_t. The GEMM's integer sums are
 *      exact, so its error is the fp32 combination: per block one rounding
 *      of da d (and of da asum) and one or two fmafs in a chain of at most
 *      2 nb, so |C - exact| <= gamma_{2 nb + 2} sum_b (|da d isum| +
 *      |mn da asum|) (Higham 3.1).
 *  (2) against the fp16 activations themselves (the fp32 GEMM's numbers up
 *      to its own rounding): add the activation rounding, |a - da q| <=
 *      da (1/2 + 127 2^-22) per element (two fp32 roundings in a / da), times
 *      sum |w| over the block; the looser, separately checked bound.
 * Q6_K's 16-element scales enter as integers: isum = sum_h sc_h sum_{t in h}
 * (q_t - 32) a_t, exact (at most 2 x 128 x 16 x 32 x 127 < 2^24, so also
 * exact in fp32), then the one fmaf; the bounds hold as written with w_t =
 * d sc_h (q_t - 32).
 * Shapes: k whole blocks but odd block counts (1, 3, 35 blocks of 32; 1, 3, 5
 * of 256 for Q4_K and Q6_K), n = 33, 111 (not multiples of the 16- or 8-column
 * groups), m = 1, 5, 26, 70 (past the 64-row tile). Every path, one thread
 * and the pool; all paths bit-identical to the portable one and to the
 * specification written out plainly here, every row the same bits at
 * every m. */
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
#include "device/host_repack.h"
#include "formats/gguf.h"

#include "check.h"

static const int TYPES[] = {HG_GGUF_Q4_0, HG_GGUF_Q4_1, HG_GGUF_Q4_K, HG_GGUF_Q8_0,
                            HG_GGUF_Q6_K, HG_GGUF_Q5_0};

static int blk_elems(int t)
{
	return t == HG_GGUF_Q4_K || t == HG_GGUF_Q6_K ? 256 : 32;
}

static int blk_bytes(int t)
{
	return t == HG_GGUF_Q4_0 ? 18 : t == HG_GGUF_Q4_1 ? 20 : t == HG_GGUF_Q8_0 ? 34
	       : t == HG_GGUF_Q5_0 ? 22 : t == HG_GGUF_Q6_K ? 210 : 144;
}

static uint32_t rbits(void)
{
	return (uint32_t)((rnd() + 1.0) * 0x1p31);
}

/* a positive fp16 scale in [lo, 2 lo) */
static uint16_t rscale(double lo)
{
	return gguf_f32_to_f16((float)(lo * (1.5 + 0.5 * rnd())));
}

/* One random block of type t at p (the encoder of this test). */
static void enc_block(int t, uint8_t *p)
{
	uint16_t h;
	if (t == HG_GGUF_Q6_K) { /* ql[128], qh[64], scales[16] (any int8), d */
		for (int i = 0; i < 208; i++)
			p[i] = (uint8_t)rbits();
		h = rscale(1.0 / 8192);
		memcpy(p + 208, &h, 2);
		return;
	}
	if (t == HG_GGUF_Q8_0) {
		h = rscale(1.0 / 512);
		memcpy(p, &h, 2);
		for (int i = 0; i < 32; i++)
			p[2 + i] = (uint8_t)(int8_t)((int)(rbits() % 255) - 127);
		return;
	}
	if (t == HG_GGUF_Q5_0) { /* d, qh[4] (every high bit), qs[16] */
		h = rscale(1.0 / 128);
		memcpy(p, &h, 2);
		for (int i = 2; i < 22; i++)
			p[i] = (uint8_t)rbits();
		return;
	}
	if (t == HG_GGUF_Q4_0 || t == HG_GGUF_Q4_1) {
		h = rscale(1.0 / 64);
		memcpy(p, &h, 2);
		int off = 2;
		if (t == HG_GGUF_Q4_1) { /* m about -8 d, as a min */
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

/* llama.cpp's dequantizers, in double (exact): 32-block j of the block at p
 * as w_t = d sc_{t / 16} (q_t - z) + mn, its d, mn, q (0..15, 0..63 or
 * signed 8-bit), z and the 16-element scales sc (1 but for Q6_K). */
typedef struct sub {
	double d, mn;
	int q[32], z, sc[2];
} sub;

/* dequantize_row_q6_K's loop, element by element: q (0..63) and scale */
static void dec_q6_k(const uint8_t *p, int j, sub *s)
{
	int qv[256], scv[256];
	for (int n = 0; n < 2; n++) {
		const uint8_t *ql = p + 64 * n, *qh = p + 128 + 32 * n;
		const int8_t *sc = (const int8_t *)(p + 192 + 8 * n);
		for (int l = 0; l < 32; l++) {
			const int is = l / 16, y = 128 * n + l;
			qv[y] = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
			qv[y + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
			qv[y + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
			qv[y + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
			scv[y] = sc[is];
			scv[y + 32] = sc[is + 2];
			scv[y + 64] = sc[is + 4];
			scv[y + 96] = sc[is + 6];
		}
	}
	uint16_t h;
	memcpy(&h, p + 208, 2);
	*s = (sub){.d = gguf_f16_to_f32(h), .mn = 0, .z = 32,
	           .sc = {scv[32 * j], scv[32 * j + 16]}};
	for (int u = 0; u < 32; u++) {
		s->q[u] = qv[32 * j + u];
		assert_int_equal(scv[32 * j + u], s->sc[u / 16]);
	}
}

static void dec_sub(int t, const uint8_t *p, int j, sub *s)
{
	uint16_t h;
	if (t == HG_GGUF_Q6_K) {
		dec_q6_k(p, j, s);
		return;
	}
	memcpy(&h, p, 2);
	const double d = gguf_f16_to_f32(h);
	if (t == HG_GGUF_Q8_0) {
		*s = (sub){.d = d, .mn = 0, .z = 0, .sc = {1, 1}};
		for (int i = 0; i < 32; i++)
			s->q[i] = (int8_t)p[2 + i];
		return;
	}
	if (t == HG_GGUF_Q5_0) { /* dequantize_row_q5_0: (qs nibble | qh bit << 4) - 16 */
		uint32_t qh;
		memcpy(&qh, p + 2, 4);
		*s = (sub){.d = d, .mn = 0, .z = 16, .sc = {1, 1}};
		for (int i = 0; i < 16; i++) {
			s->q[i] = (p[6 + i] & 15) | (int)((qh >> i) & 1) << 4;
			s->q[i + 16] = (p[6 + i] >> 4) | (int)((qh >> (i + 16)) & 1) << 4;
		}
		return;
	}
	if (t == HG_GGUF_Q4_0 || t == HG_GGUF_Q4_1) {
		const uint8_t *qs = p + (t == HG_GGUF_Q4_0 ? 2 : 4);
		double m = 0;
		if (t == HG_GGUF_Q4_1) {
			memcpy(&h, p + 2, 2);
			m = gguf_f16_to_f32(h);
		}
		*s = (sub){.d = d, .mn = m, .z = t == HG_GGUF_Q4_0 ? 8 : 0, .sc = {1, 1}};
		for (int i = 0; i < 16; i++) {
			s->q[i] = qs[i] & 15;
			s->q[i + 16] = qs[i] >> 4;
		}
		return;
	}
	memcpy(&h, p + 2, 2);
	const double dmin = gguf_f16_to_f32(h);
	const uint8_t *sc = p + 4, *qs = p + 16 + 32 * (j / 2);
	int scale, mn; /* get_scale_min_k4 */
	if (j < 4) {
		scale = sc[j] & 63;
		mn = sc[j + 4] & 63;
	} else {
		scale = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
		mn = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
	}
	*s = (sub){.d = d * scale, .mn = -dmin * mn, .z = 0, .sc = {1, 1}};
	for (int i = 0; i < 32; i++)
		s->q[i] = j % 2 ? qs[i] >> 4 : qs[i] & 15;
}

/* W (N, K) of type t: 32-block b of row j */
static void w_sub(int t, const uint8_t *W, int K, int j, int b, sub *s)
{
	const int per = blk_elems(t) / 32;
	const uint8_t *row = W + (size_t)j * (K / blk_elems(t)) * blk_bytes(t);
	dec_sub(t, row + (size_t)(b / per) * blk_bytes(t), b % per, s);
}

/* A's int8 rule (host_gemm.h hg_gemm_q8a8), written out: finite fp16 A */
static void quant_a(const uint16_t *A, int M, int K, int8_t *q, float *da)
{
	for (int i = 0; i < M; i++)
		for (int b = 0; b < K / 32; b++) {
			const uint16_t *a = A + (size_t)i * K + 32 * b;
			float amax = 0.0f;
			for (int t = 0; t < 32; t++)
				amax = fmaxf(amax, fabsf(gguf_f16_to_f32(a[t])));
			const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
			da[i * (K / 32) + b] = d;
			for (int t = 0; t < 32; t++) {
				const float x = gguf_f16_to_f32(a[t]) * id;
				q[(size_t)i * K + 32 * b + t] = (int8_t)nearbyintf(x);
			}
		}
}

/* The specification (host_gemm.h) in float, from this file's decoding: the
 * portable path must give these bits. Q8_0 is hg_gemm_q8a8's (no mn). */
static void spec(float *C, const int8_t *q, const float *da, const uint8_t *W, int t, int M,
                 int N, int K)
{
	const int nb = K / 32;
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float acc = 0.0f;
			for (int b = 0; b < nb; b++) {
				sub s;
				w_sub(t, W, K, j, b, &s);
				int32_t isum = 0, asum = 0;
				for (int u = 0; u < 32; u++) {
					isum += s.sc[u / 16] * (s.q[u] - s.z) * q[(size_t)i * K + 32 * b + u];
					asum += q[(size_t)i * K + 32 * b + u];
				}
				const float a = da[i * nb + b];
				acc = fmaf((float)isum, a * (float)s.d, acc);
				if (t == HG_GGUF_Q4_1 || t == HG_GGUF_Q4_K)
					acc = fmaf((float)s.mn, a * (float)asum, acc);
			}
			C[(size_t)i * N + j] = acc;
		}
}

static void make(int t, int M, int N, int K, uint16_t **A, uint8_t **W)
{
	*A = malloc(sizeof(**A) * (size_t)M * K);
	*W = malloc((size_t)N * (K / blk_elems(t)) * blk_bytes(t));
	assert_true(*A && *W);
	for (size_t i = 0; i < (size_t)M * K; i++) /* exponents spread over 2^-6 .. 2 */
		(*A)[i] = gguf_f32_to_f16((float)(2.0 * rnd() * ldexp(1.0, -(int)(i % 7))));
	for (int i = 0; i < K && M > 1; i++) /* row 1: a zero block */
		(*A)[(size_t)K + i] = i < 32 ? 0 : (*A)[(size_t)K + i];
	for (size_t b = 0; b < (size_t)N * (K / blk_elems(t)); b++)
		enc_block(t, *W + b * blk_bytes(t));
}

/* This file's dequantizer against formats/gguf.c's, after the fp32 rounding
 * both make (llama.cpp rounds q d + m once; q d is exact in fp32). */
static void test_dequant_agrees(void **state)
{
	(void)state;
	rng_state = 5;
	for (size_t ti = 0; ti < sizeof(TYPES) / sizeof(TYPES[0]); ti++) {
		const int t = TYPES[ti], K = 3 * blk_elems(t), N = 7;
		uint16_t *A;
		uint8_t *W;
		make(t, 1, N, K, &A, &W);
		float *y = malloc(sizeof(*y) * (size_t)N * K);
		assert_true(y);
		assert_int_equal(gguf_dequantize((uint32_t)t, W, (uint64_t)N * K, y), 0);
		for (int j = 0; j < N; j++)
			for (int b = 0; b < K / 32; b++) {
				sub s;
				w_sub(t, W, K, j, b, &s);
				for (int u = 0; u < 32; u++) {
					const float want = (float)(s.d * s.sc[u / 16] * (s.q[u] - s.z) + s.mn);
					if (y[(size_t)j * K + 32 * b + u] != want)
						fail_msg("%s row %d elem %d: gguf_dequantize %a, this file's %a",
						         hg_gguf_name(t), j, 32 * b + u, y[(size_t)j * K + 32 * b + u],
						         want);
				}
			}
		free(y);
		free(A);
		free(W);
	}
}

/* bounds (1) and (2) on every path and thread count, at the shapes above */
static void run_type(int t)
{
	static const int MS[] = {1, 5, 26, 70}, NS[] = {33, 111}, KB[] = {1, 3, 35};
	rng_state = 40 + (uint64_t)t;
	for (size_t mi = 0; mi < 4; mi++)
		for (size_t ni = 0; ni < 2; ni++)
			for (size_t ki = 0; ki < 3; ki++) {
				const int M = MS[mi], N = NS[ni];
				const int K = blk_elems(t) == 256 ? 256 * (2 * (int)ki + 1) : 32 * KB[ki];
				const int nb = K / 32;
				uint16_t *A;
				uint8_t *W;
				make(t, M, N, K, &A, &W);
				int8_t *q = malloc((size_t)M * K);
				float *da = malloc(sizeof(*da) * (size_t)M * nb), *C = galloc((size_t)M * N);
				double *r1 = malloc(sizeof(double) * (size_t)M * N), *b1 = malloc(sizeof(double) * (size_t)M * N);
				double *r2 = malloc(sizeof(double) * (size_t)M * N), *b2 = malloc(sizeof(double) * (size_t)M * N);
				assert_true(q && da && r1 && b1 && r2 && b2);
				quant_a(A, M, K, q, da);
				for (int i = 0; i < M; i++)
					for (int j = 0; j < N; j++) {
						double e1 = 0, s1 = 0, e2 = 0, s2 = 0;
						for (int b = 0; b < nb; b++) {
							sub s;
							w_sub(t, W, K, j, b, &s);
							const double a = da[i * nb + b];
							long isum = 0, asum = 0;
							double sw = 0;
							for (int u = 0; u < 32; u++) {
								const size_t x = (size_t)i * K + 32 * b + u;
								const double w = s.d * s.sc[u / 16] * (s.q[u] - s.z) + s.mn;
								isum += (long)s.sc[u / 16] * (s.q[u] - s.z) * q[x];
								asum += q[x];
								e1 += a * q[x] * w;
								e2 += gguf_f16_to_f32(A[x]) * w;
								sw += fabs(w);
							}
							s1 += fabs(a * s.d * (double)isum) + fabs(s.mn * a * (double)asum);
							s2 += a * (0.5 + 127 * 0x1p-22) * sw;
						}
						r1[(size_t)i * N + j] = e1;
						b1[(size_t)i * N + j] = gamma_n(2 * nb + 2) * s1 + 1e-30;
						r2[(size_t)i * N + j] = e2;
						b2[(size_t)i * N + j] = s2 + gamma_n(2 * nb + 2) * s1 + 1e-30;
					}
				for (int p = HG_PATH_PORTABLE; p <= HG_PATH_AVX512; p++) {
					if (!hg_i8_path_available(p))
						continue;
					for (int th = 0; th <= 1; th++) {
						char what[128];
						assert_int_equal(hg_gemm_gguf_a8(C, A, W, M, N, K, t, false, p, th), 0);
						snprintf(what, sizeof(what), "%s x int8 %s M%d N%d K%d threads %d (1)",
						         hg_gguf_name(t), hg_path_name(p), M, N, K, th);
						check_close(what, C, r1, b1, (size_t)M * N);
						what[strlen(what) - 2] = '2';
						check_close(what, C, r2, b2, (size_t)M * N);
						gcheck(what, C, (size_t)M * N);
					}
				}
				free(A);
				free(W);
				free(q);
				free(da);
				gfree(C);
				free(r1);
				free(b1);
				free(r2);
				free(b2);
			}
}

static void test_q4_0(void **state)
{
	(void)state;
	run_type(HG_GGUF_Q4_0);
}

static void test_q4_1(void **state)
{
	(void)state;
	run_type(HG_GGUF_Q4_1);
}

static void test_q4_k(void **state)
{
	(void)state;
	run_type(HG_GGUF_Q4_K);
}

static void test_q6_k(void **state)
{
	(void)state;
	run_type(HG_GGUF_Q6_K);
}

static void test_q8_0(void **state)
{
	(void)state;
	run_type(HG_GGUF_Q8_0);
}

static void test_q5_0(void **state)
{
	(void)state;
	run_type(HG_GGUF_Q5_0);
}

/* The portable path equals spec() bit for bit; every path, on one thread and
 * two (and the pool), equals the portable path at every m from 1 to 27 and
 * at 70, and the first rows of a 70-row call are an m-row call's. K: 35
 * 32-blocks (5 256-blocks for Q4_K and Q6_K), N = 111; Q4_1 also at 2, 36, 37
 * and 38 blocks, N 47 and 64, 1 to 9 rows (the AVX-512 register tiles of
 * 1 to 8 rows, the buffer beyond), 1 to 3 threads. Refusals: k not
 * whole blocks, an unknown type. */
static void test_bit_identical(void **state)
{
	(void)state;
	const int M = 70, N = 111;
	for (size_t ti = 0; ti < sizeof(TYPES) / sizeof(TYPES[0]); ti++) {
		const int t = TYPES[ti], K = blk_elems(t) == 256 ? 1280 : 1120;
		rng_state = 90 + ti;
		uint16_t *A;
		uint8_t *W;
		make(t, M, N, K, &A, &W);
		int8_t *q = malloc((size_t)M * K);
		float *da = malloc(sizeof(*da) * (size_t)M * (K / 32));
		float *C0 = malloc(sizeof(float) * M * N), *C1 = malloc(sizeof(float) * M * N);
		assert_true(q && da && C0 && C1);
		quant_a(A, M, K, q, da);
		spec(C1, q, da, W, t, M, N, K);
		assert_int_equal(hg_gemm_gguf_a8(C0, A, W, M, N, K, t, false, HG_PATH_PORTABLE, 1), 0);
		if (memcmp(C0, C1, sizeof(float) * M * N))
			fail_msg("%s: the portable path is not the specification's bits", hg_gguf_name(t));
		for (int p = HG_PATH_PORTABLE; p <= HG_PATH_AVX512; p++) {
			if (!hg_i8_path_available(p))
				continue;
			for (int m = 1; m <= M; m = m == 27 ? M : m + 1)
				for (int th = 0; th <= 2; th++) {
					memset(C1, 0, sizeof(float) * M * N);
					assert_int_equal(hg_gemm_gguf_a8(C1, A, W, m, N, K, t, false, p, th), 0);
					if (memcmp(C0, C1, sizeof(float) * m * N))
						fail_msg("%s, path %s, %d rows, threads %d: not the portable path's "
						         "bits", hg_gguf_name(t), hg_path_name(p), m, th);
				}
			assert_int_equal(hg_gemm_gguf_a8(C1, A, W, M, N, K - 16, t, false, p, 0), -22);
		}
		free(A);
		free(W);
		free(q);
		free(da);
		free(C0);
		free(C1);
	}
	/* Q4_1's AVX-512 path reads three blocks a transpose (and one row on its
	 * own loop): every remainder of the block count by 3 and a count below
	 * 3, at N with a partial last group of 16 and one with whole groups,
	 * with the part boundaries of 1, 2 and 3 threads */
	static const int KB3[] = {2, 36, 37, 38}, NB3[] = {47, 64};
	for (size_t ki = 0; ki < sizeof(KB3) / sizeof(KB3[0]); ki++)
		for (size_t ni = 0; ni < 2; ni++) {
			const int t = HG_GGUF_Q4_1, K = 32 * KB3[ki], N3 = NB3[ni], M3 = 9;
			rng_state = 300 + 2 * ki + ni;
			uint16_t *A;
			uint8_t *W;
			make(t, M3, N3, K, &A, &W);
			int8_t *q = malloc((size_t)M3 * K);
			float *da = malloc(sizeof(*da) * (size_t)M3 * (K / 32));
			float *C0 = malloc(sizeof(float) * M3 * N3), *C1 = malloc(sizeof(float) * M3 * N3);
			assert_true(q && da && C0 && C1);
			quant_a(A, M3, K, q, da);
			spec(C0, q, da, W, t, M3, N3, K);
			for (int p = HG_PATH_PORTABLE; p <= HG_PATH_AVX512; p++) {
				if (!hg_i8_path_available(p))
					continue;
				for (int m = 1; m <= M3; m++)
					for (int th = 1; th <= 3; th++) {
						memset(C1, 0, sizeof(float) * M3 * N3);
						assert_int_equal(hg_gemm_gguf_a8(C1, A, W, m, N3, K, t, false, p, th),
						                 0);
						if (memcmp(C0, C1, sizeof(float) * m * N3))
							fail_msg("q4_1 K %d N %d, path %s, %d rows, threads %d: not the "
							         "specification's bits", K, N3, hg_path_name(p), m, th);
					}
			}
			free(A);
			free(W);
			free(q);
			free(da);
			free(C0);
			free(C1);
		}
	float c[1];
	uint16_t a[32] = {0};
	uint8_t w[64] = {0};
	assert_int_equal(hg_gemm_gguf_a8(c, a, w, 1, 1, 32, 7 /* Q5_1 */, false, HG_PATH_AUTO, 0), -22);
	assert_null(hg_gguf_name(7));
	assert_int_equal(hg_gguf_block(13 /* Q5_K */), 0);
}

/* Q4_0, Q4_1 and Q8_0 repacked at load (host_gemm.h hg_gguf_repack; issue
 * 24): the GEMM on the repacked bytes gives the specification's bits (spec
 * on the file's layout, written out above) on every path, at K of 2, 35,
 * 36, 37 and 38 blocks (Q8_0: an odd block count leaves the repacked
 * groups' vectors 32 bytes off a cache line every other group), N with no
 * whole group (15), a partial last one (47, 111) and whole groups only
 * (64), 1 to 9 and 26 rows (the AVX-512 tiles, the buffer beyond), 1 to 3
 * threads (part boundaries; AVX2 reads each 16-row group as two 8-column
 * halves). The repack moves bytes (the first group's differ from the
 * file's where N >= 16, the rows past the whole groups do not) and is
 * refused for other types and k not whole blocks. Q8_0 also against
 * hg_gemm_q8a8 on the file's bytes, at 70 rows (past the 64-row tile), and
 * with a q of -128 in every block (the repacked byte 0, AVX2's |w| 128). */
/* 70 rows of A (the 64-row tile and a second pass) on Q8_0 W repacked at
 * R: hg_gemm_q8a8's bits on the file's W, path p, 1 and 3 threads */
static void q8_rows_70(const uint8_t *R, const uint8_t *W, int N, int K, int p)
{
	const int M = 70;
	uint16_t *A = malloc(sizeof(*A) * (size_t)M * K);
	float *C0 = malloc(sizeof(float) * M * N), *C1 = malloc(sizeof(float) * M * N);
	assert_true(A && C0 && C1);
	for (int i = 0; i < M * K; i++)
		A[i] = gguf_f32_to_f16((float)rnd());
	assert_int_equal(hg_gemm_q8a8(C0, A, W, M, N, K, false, p, 1), 0);
	for (int th = 1; th <= 3; th += 2) {
		memset(C1, 0, sizeof(float) * M * N);
		assert_int_equal(hg_gemm_q8a8r(C1, A, R, M, N, K, false, p, th), 0);
		if (memcmp(C0, C1, sizeof(float) * M * N))
			fail_msg("q8_0 repacked, K %d N %d, path %s, 70 rows, threads %d: not the file "
			         "layout's bits", K, N, hg_path_name(p), th);
	}
	free(A);
	free(C0);
	free(C1);
}

static void test_repacked(void **state)
{
	(void)state;
	static const int KB[] = {2, 35, 36, 37, 38}, NS[] = {15, 47, 64, 111};
	static const int MS[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 26};
	const int M = 26;
	static const int TS[] = {HG_GGUF_Q4_0, HG_GGUF_Q4_1, HG_GGUF_Q8_0};
	for (int ti = 0; ti < 3; ti++)
		for (size_t ki = 0; ki < sizeof(KB) / sizeof(KB[0]); ki++)
			for (size_t ni = 0; ni < sizeof(NS) / sizeof(NS[0]); ni++) {
				const int t = TS[ti], K = 32 * KB[ki], N = NS[ni];
				const size_t wb = (size_t)N * (K / 32) * blk_bytes(t);
				rng_state = 700 + 40 * ti + 5 * ki + ni;
				uint16_t *A;
				uint8_t *W;
				make(t, M, N, K, &A, &W);
				/* Q8_0: q -128 in every block (no quantizer writes it; a file may) */
				if (t == HG_GGUF_Q8_0)
					for (size_t b = 0; b < wb / 34; b++)
						W[34 * b + 2 + b % 32] = 0x80;
				uint8_t *R = malloc(wb);
				int8_t *q = malloc((size_t)M * K);
				float *da = malloc(sizeof(*da) * (size_t)M * (K / 32));
				float *C0 = malloc(sizeof(float) * M * N), *C1 = malloc(sizeof(float) * M * N);
				assert_true(R && q && da && C0 && C1);
				memcpy(R, W, wb);
				const int rt = hg_gguf_repack(R, N, K, t);
				assert_int_equal(rt, t | HG_GGUF_REPACKED);
				const size_t whole = (size_t)(N / 16 * 16) * (K / 32) * blk_bytes(t);
				assert_true(N < 16 || memcmp(R, W, whole) != 0);
				assert_memory_equal(R + whole, W + whole, wb - whole);
				quant_a(A, M, K, q, da);
				spec(C0, q, da, W, t, M, N, K);
				for (int p = HG_PATH_PORTABLE; p <= HG_PATH_AVX512; p++) {
					if (!hg_i8_path_available(p))
						continue;
					for (size_t mi = 0; mi < sizeof(MS) / sizeof(MS[0]); mi++)
						for (int th = 1; th <= 3; th++) {
							const int m = MS[mi];
							memset(C1, 0, sizeof(float) * M * N);
							assert_int_equal(hg_gemm_gguf_a8(C1, A, R, m, N, K, rt, false, p, th),
							                 0);
							if (memcmp(C0, C1, sizeof(float) * m * N))
								fail_msg("%s repacked, K %d N %d, path %s, %d rows, threads %d: "
								         "not the specification's bits", hg_gguf_name(t), K, N,
								         hg_path_name(p), m, th);
						}
					if (t == HG_GGUF_Q8_0 && ki < 2)
						q8_rows_70(R, W, N, K, p);
				}
				free(A);
				free(W);
				free(R);
				free(q);
				free(da);
				free(C0);
				free(C1);
			}
	uint8_t w[4 * 144] = {0};
	assert_int_equal(hg_gguf_repack(w, 2, 256, HG_GGUF_Q4_K), -22);
	assert_int_equal(hg_gguf_repack(w, 2, 256, HG_GGUF_Q6_K), -22);
	assert_int_equal(hg_gguf_repack(w, 2, 48, HG_GGUF_Q4_1), -22);
	assert_int_equal(hg_gguf_repack(w, 2, 48, HG_GGUF_Q8_0), -22);
	assert_int_equal(hg_gguf_block(HG_GGUF_Q4_1R), 32);
	assert_int_equal(hg_gguf_block_bytes(HG_GGUF_Q4_0R), 18);
	assert_int_equal(hg_gguf_block(HG_GGUF_Q8_0R), 32);
	assert_int_equal(hg_gguf_block_bytes(HG_GGUF_Q8_0R), 34);
	assert_string_equal(hg_gguf_name(HG_GGUF_Q8_0R), "q8_0r");
}

static rt_op gemm_op(const void *C, const void *A, const void *W, int64_t n, int64_t k, int wt)
{
	rt_op o;
	memset(&o, 0, sizeof(o));
	o.kind = RT_OP_GEMM;
	o.dtype = RT_GGUF_A8;
	o.wtype = wt;
	o.m = 1;
	o.n = n;
	o.k = k;
	o.n_args = 3;
	o.argval[0] = (uint64_t)(uintptr_t)C;
	o.argval[1] = (uint64_t)(uintptr_t)A;
	o.argval[2] = (uint64_t)(uintptr_t)W;
	rt_op_fix_argv(&o);
	return o;
}

/* The host backend's repack at bind (host_repack.h): a Q4_1 or Q8_0
 * weight that only GEMMs of its shape read is repacked (its GEMMs retyped,
 * the GEMM's output the specification's bits on the file's bytes), and
 * left as the file has it (bytes and wtype unchanged) where a kernel's
 * argument points into it (an embedding gather on a tied LM head, say), a
 * memset covers part of it, a GEMM reads a slice of it (another address or
 * shape) or writes into it, or a GEMM of another dtype reads it (a
 * q8_0_a8 GEMM on the same bytes: it reads the file's layout); a Q4_K or
 * fp16 GEMM is never repacked. */
static void repack_ops(int t)
{
	const int M = 3, N = 40, K = 96;
	const size_t wb = (size_t)N * (K / 32) * blk_bytes(t);
	rng_state = 901 + t;
	uint16_t *A;
	uint8_t *W;
	make(t, M, N, K, &A, &W);
	uint8_t *R = malloc(wb);
	int8_t *q = malloc((size_t)M * K);
	float *da = malloc(sizeof(*da) * (size_t)M * (K / 32));
	float *C0 = malloc(sizeof(float) * M * N), *C1 = malloc(sizeof(float) * M * N);
	assert_true(R && q && da && C0 && C1);
	quant_a(A, M, K, q, da);
	spec(C0, q, da, W, t, M, N, K);
	for (int c = 0; c < 9; c++) {
		memcpy(R, W, wb);
		rt_op ops[3];
		int n = 0;
		ops[n++] = gemm_op(C1, A, R, N, K, t);
		ops[n++] = gemm_op(C1, A, R, N, K, t); /* the same weight in another phase */
		switch (c) {
		case 1: /* a kernel reading the weight (one argument inside its bytes) */
			memset(&ops[n], 0, sizeof(ops[n]));
			ops[n].kind = RT_OP_KERNEL;
			ops[n].n_args = 4;
			ops[n].argval[0] = 7;
			ops[n].argval[3] = (uint64_t)(uintptr_t)(R + wb - 1);
			rt_op_fix_argv(&ops[n++]);
			break;
		case 2: /* a memset over its last byte */
			memset(&ops[n], 0, sizeof(ops[n]));
			ops[n].kind = RT_OP_MEMSET;
			ops[n].n_args = 1;
			ops[n].argval[0] = (uint64_t)(uintptr_t)(R + wb - 1);
			ops[n++].bytes = 64;
			break;
		case 3: /* a GEMM on its second half */
			ops[n++] = gemm_op(C1, A, R + wb / 2, N / 2, K, t);
			break;
		case 4: /* a GEMM of another shape from the same address */
			ops[n++] = gemm_op(C1, A, R, N / 2, K, t);
			break;
		case 5: /* a GEMM writing into it (an fp16 one: its own W not a candidate) */
			ops[n] = gemm_op(R + 64, A, A, N, K, t);
			ops[n++].dtype = RT_FP16;
			break;
		case 6: /* not Q4_0 / Q4_1 / Q8_0 */
			ops[0].wtype = ops[1].wtype = HG_GGUF_Q4_K;
			break;
		case 7: /* a kernel reading it from its first byte (a tied embedding's lookup) */
			memset(&ops[n], 0, sizeof(ops[n]));
			ops[n].kind = RT_OP_KERNEL;
			ops[n].n_args = 2;
			ops[n].argval[0] = (uint64_t)(uintptr_t)C1;
			ops[n].argval[1] = (uint64_t)(uintptr_t)R;
			rt_op_fix_argv(&ops[n++]);
			break;
		case 8: /* a GEMM of another dtype on the same bytes, same shape */
			ops[n] = gemm_op(C1, A, R, N, K, t);
			ops[n++].dtype = t == HG_GGUF_Q8_0 ? RT_Q8_0_A8 : RT_FP16;
			break;
		default:
			break;
		}
		const int got = rt_host_repack_weights(ops, n, true);
		if (c == 0) {
			assert_int_equal(got, 1);
			assert_int_equal(ops[0].wtype, t | HG_GGUF_REPACKED);
			assert_int_equal(ops[1].wtype, t | HG_GGUF_REPACKED);
			assert_true(memcmp(R, W, wb) != 0);
			for (int p = HG_PATH_PORTABLE; p <= HG_PATH_AVX512; p++) {
				if (!hg_i8_path_available(p))
					continue;
				memset(C1, 0, sizeof(float) * M * N);
				assert_int_equal(hg_gemm_gguf_a8(C1, A, R, M, N, K, ops[0].wtype, false, p, 1),
				                 0);
				if (memcmp(C0, C1, sizeof(float) * M * N))
					fail_msg("%s repacked at bind, path %s: not the specification's bits",
					         hg_gguf_name(t), hg_path_name(p));
			}
			/* a second pass finds nothing left to repack */
			assert_int_equal(rt_host_repack_weights(ops, n, true), 0);
		} else {
			if (got != 0)
				fail_msg("%s, case %d: repacked a weight another op reads", hg_gguf_name(t), c);
			assert_int_equal(ops[0].wtype, c == 6 ? HG_GGUF_Q4_K : t);
			assert_memory_equal(R, W, wb);
		}
	}
	free(A);
	free(W);
	free(R);
	free(q);
	free(da);
	free(C0);
	free(C1);
}

/* q8_0_a8 GEMMs (the same int8 GEMM on Q8_0 blocks, wtype unused) on a
 * weight: repacked with two of them on it (wtype HG_GGUF_Q8_0R, the bits
 * hg_gemm_q8a8's on the file's bytes), refused with a q8_0 GEMM (fp32
 * expansion of the file's blocks: hg_gemm_q8) or a gguf_a8 one of the
 * same shape beside them (GEMMs of one dtype only). */
static void repack_ops_q8a8(void)
{
	const int M = 3, N = 40, K = 96;
	const size_t wb = (size_t)N * (K / 32) * 34;
	rng_state = 977;
	uint16_t *A;
	uint8_t *W;
	make(HG_GGUF_Q8_0, M, N, K, &A, &W);
	uint8_t *R = malloc(wb);
	float *C0 = malloc(sizeof(float) * M * N), *C1 = malloc(sizeof(float) * M * N);
	assert_true(R && C0 && C1);
	assert_int_equal(hg_gemm_q8a8(C0, A, W, M, N, K, false, HG_PATH_PORTABLE, 1), 0);
	for (int c = 0; c < 3; c++) {
		memcpy(R, W, wb);
		rt_op ops[3];
		for (int i = 0; i < 3; i++) {
			ops[i] = gemm_op(C1, A, R, N, K, -1);
			ops[i].dtype = RT_Q8_0_A8;
		}
		if (c == 1)
			ops[2].dtype = RT_Q8_0;
		if (c == 2) {
			ops[2].dtype = RT_GGUF_A8;
			ops[2].wtype = HG_GGUF_Q8_0;
		}
		const int got = rt_host_repack_weights(ops, 3, true);
		if (c) {
			if (got != 0)
				fail_msg("q8_0_a8, case %d: repacked a weight another op reads", c);
			assert_int_equal(ops[0].wtype, -1);
			assert_memory_equal(R, W, wb);
			continue;
		}
		assert_int_equal(got, 1);
		for (int i = 0; i < 3; i++)
			assert_int_equal(ops[i].wtype, HG_GGUF_Q8_0R);
		assert_true(memcmp(R, W, wb) != 0);
		for (int p = HG_PATH_PORTABLE; p <= HG_PATH_AVX512; p++) {
			if (!hg_i8_path_available(p))
				continue;
			memset(C1, 0, sizeof(float) * M * N);
			assert_int_equal(hg_gemm_q8a8r(C1, A, R, M, N, K, false, p, 1), 0);
			if (memcmp(C0, C1, sizeof(float) * M * N))
				fail_msg("q8_0_a8 repacked at bind, path %s: not hg_gemm_q8a8's bits on the "
				         "file's bytes", hg_path_name(p));
		}
		assert_int_equal(rt_host_repack_weights(ops, 3, true), 0);
	}
	free(A);
	free(W);
	free(R);
	free(C0);
	free(C1);
}

static void test_repack_ops(void **state)
{
	(void)state;
	repack_ops(HG_GGUF_Q4_1);
	repack_ops(HG_GGUF_Q8_0);
	repack_ops_q8a8();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dequant_agrees),
		cmocka_unit_test(test_q4_0),
		cmocka_unit_test(test_q4_1),
		cmocka_unit_test(test_q4_k),
		cmocka_unit_test(test_q6_k),
		cmocka_unit_test(test_q8_0),
		cmocka_unit_test(test_q5_0),
		cmocka_unit_test(test_bit_identical),
		cmocka_unit_test(test_repacked),
		cmocka_unit_test(test_repack_ops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
