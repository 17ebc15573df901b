/* The host GEMM (runtime/device/host_gemm.c) against a double-precision
 * reference on awkward shapes (M = 1, 3, 26, 63, 257; K = 577 and K < 8;
 * N = 131 and 1, none a multiple of the vector width or the tile), fp16
 * and bf16, every code path (portable, AVX2, AVX-512, forced), on one thread and
 * on the pool; NaN/inf propagation; guard zones around C and an
 * inaccessible page right after W (a read past W's end faults).
 *
 * Bound: 16-bit x 16-bit products are exact in fp32 (11 + 11 or 8 + 8
 * significand bits <= 24), so the only error is the summation's: each of L
 * lanes (8; 16 on the AVX-512 path) is a sequential fp32 sum of ceil(K/L)
 * FMAs, then log2 L pairwise levels, |C - exact| <=
 * gamma_{ceil(K/L) + log2 L} * sum_i |a_i w_i| (Higham 3.1). The
 * dtype enters through the inputs only: the reference widens them with
 * formats/gguf.c's conversions, not the GEMM's own.
 *
 * q8_0 weights (hg_gemm_q8): W is quantized by formats/gguf.c's Q8_0 encoder
 * and the reference reads it through formats/gguf.c's dequantizer (q * d,
 * exact in fp32), so the products a * w are exact in the FMA and the same
 * summation bound holds; K a multiple of 32 (576, 1536 as the model, 32,
 * 96 and 1120 for the blocks and the portable path's 1024 chunk), N and M
 * awkward as above; the AVX2 and portable paths bit-identical. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "device/host_gemm.h"
#include "formats/gguf.h"

#include "check.h"

static float widen(uint16_t h, bool bf16)
{
	return bf16 ? gguf_bf16_to_f32(h) : gguf_f16_to_f32(h);
}

static uint16_t narrow(float f, bool bf16)
{
	return bf16 ? gguf_f32_to_bf16(f) : gguf_f32_to_f16(f);
}

/* W (n, k) placed so that its last element ends right before a PROT_NONE
 * page: any read past the end of W faults. */
typedef struct fenced {
	void *base;
	size_t len;
	uint16_t *p;
} fenced;

static uint16_t *fenced_alloc(fenced *f, size_t cnt)
{
	const size_t pg = (size_t)sysconf(_SC_PAGESIZE), bytes = cnt * sizeof(uint16_t);
	const size_t body = (bytes + pg - 1) / pg * pg;
	f->len = body + pg;
	f->base = mmap(NULL, f->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(f->base != MAP_FAILED);
	assert_int_equal(mprotect((char *)f->base + body, pg, PROT_NONE), 0);
	f->p = (uint16_t *)((char *)f->base + body - bytes);
	return f->p;
}

static void fenced_free(fenced *f)
{
	munmap(f->base, f->len);
}

static void run_case(int M, int N, int K, bool bf16, int path, int threads)
{
	fenced fw;
	uint16_t *A = malloc(sizeof(*A) * (size_t)M * K + 1), *W = fenced_alloc(&fw, (size_t)N * K);
	float *C = galloc((size_t)M * N);
	double *ref = malloc(sizeof(*ref) * (size_t)M * N), *bound = malloc(sizeof(*bound) * (size_t)M * N);
	char what[96];
	assert_non_null(A);
	assert_non_null(ref);
	assert_non_null(bound);
	for (size_t i = 0; i < (size_t)M * K; i++)
		A[i] = narrow((float)(2.0 * rnd()), bf16);
	for (size_t i = 0; i < (size_t)N * K; i++)
		W[i] = narrow((float)(0.25 * rnd()), bf16);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double s = 0.0, a = 0.0;
			for (int k = 0; k < K; k++) {
				const double p = (double)widen(A[(size_t)i * K + k], bf16) *
				                 widen(W[(size_t)j * K + k], bf16);
				s += p;
				a += fabs(p);
			}
			ref[(size_t)i * N + j] = s;
			bound[(size_t)i * N + j] = path == HG_PATH_AVX512 ? gamma_n((K + 15) / 16 + 4) * a
			                                                  : gamma_n((K + 7) / 8 + 3) * a;
		}
	assert_int_equal(hg_gemm16(C, A, W, M, N, K, bf16, path, threads), 0);
	snprintf(what, sizeof(what), "gemm16 %s %s M%d N%d K%d threads %d", bf16 ? "bf16" : "fp16",
	         hg_path_name(path), M, N, K, threads);
	check_close(what, C, ref, bound, (size_t)M * N);
	gcheck(what, C, (size_t)M * N);
	gfree(C);
	free(A);
	fenced_free(&fw);
	free(ref);
	free(bound);
}

/* W (n, k) as Q8_0 blocks, fenced like fenced_alloc's */
static void run_case_q8(int M, int N, int K, int path, int threads)
{
	fenced fw;
	const size_t wb = (size_t)N * K / 32 * 34;
	uint16_t *A = malloc(sizeof(*A) * (size_t)M * K + 1);
	char *W = (char *)fenced_alloc(&fw, (wb + 1) / 2) + (wb & 1); /* ends at the fence */
	float *Wf = malloc(sizeof(*Wf) * (size_t)N * K), *C = galloc((size_t)M * N);
	double *ref = malloc(sizeof(*ref) * (size_t)M * N), *bound = malloc(sizeof(*bound) * (size_t)M * N);
	char what[96];
	assert_true(A && Wf && ref && bound);
	for (size_t i = 0; i < (size_t)M * K; i++)
		A[i] = narrow((float)(2.0 * rnd()), false);
	for (size_t i = 0; i < (size_t)N * K; i++)
		Wf[i] = (float)(0.25 * rnd());
	for (int i = 0; i < K; i++) /* a row with a zero block (d = 0) */
		Wf[i] = i < 32 ? 0.0f : Wf[i];
	assert_int_equal(gguf_quantize(GGML_T_Q8_0, Wf, (uint64_t)N * K, W), wb);
	assert_int_equal(gguf_dequantize(GGML_T_Q8_0, W, (uint64_t)N * K, Wf), 0);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double s = 0.0, a = 0.0;
			for (int k = 0; k < K; k++) {
				const double p = (double)widen(A[(size_t)i * K + k], false) * Wf[(size_t)j * K + k];
				s += p;
				a += fabs(p);
			}
			ref[(size_t)i * N + j] = s;
			bound[(size_t)i * N + j] = path == HG_PATH_AVX512 ? gamma_n((K + 15) / 16 + 4) * a
			                                                  : gamma_n((K + 7) / 8 + 3) * a;
		}
	assert_int_equal(hg_gemm_q8(C, A, W, M, N, K, false, path, threads), 0);
	snprintf(what, sizeof(what), "gemm q8_0 %s M%d N%d K%d threads %d", hg_path_name(path), M, N,
	         K, threads);
	check_close(what, C, ref, bound, (size_t)M * N);
	gcheck(what, C, (size_t)M * N);
	/* hg_q8_to_f32 is the dequantizer's exact values */
	float *Wd = malloc(sizeof(*Wd) * (size_t)N * K);
	assert_non_null(Wd);
	hg_q8_to_f32(Wd, W, N, K);
	assert_memory_equal(Wd, Wf, sizeof(float) * (size_t)N * K);
	free(Wd);
	gfree(C);
	free(A);
	free(Wf);
	fenced_free(&fw);
	free(ref);
	free(bound);
}

/* int8 activations (hg_gemm_q8a8): A (fp16, or bf16) against the same Q8_0
 * W. The reference is the exact dot product of A's 16-bit values with W's
 * dequantized ones (double). The GEMM differs from it by
 *  - quantizing A: per block b, |a - da q| <= da / 2 (round to nearest,
 *    da = amax_b / 127; the product a * (1 / da) carries two fp32
 *    roundings, so |a / da - q| <= 1/2 + 127 * 2^-22), times sum |w| over
 *    the block;
 *  - the float part: per block one rounding of da * dw and an FMA, nb of
 *    them in a chain: gamma_{nb + 1} * sum_b |da dw isum_b| <= gamma_{nb+1}
 *    * sum |a w| (1 + 1/254 slack for |da q| vs |a|), with isum exact.
 * That bound is what the test holds every output to. */
static void run_case_a8(int M, int N, int K, bool a_bf16, int path, int threads)
{
	fenced fw;
	const size_t wb = (size_t)N * K / 32 * 34;
	uint16_t *A = malloc(sizeof(*A) * (size_t)M * K + 1);
	char *W = (char *)fenced_alloc(&fw, (wb + 1) / 2) + (wb & 1);
	float *Wf = malloc(sizeof(*Wf) * (size_t)N * K), *C = galloc((size_t)M * N);
	double *ref = malloc(sizeof(*ref) * (size_t)M * N), *bound = malloc(sizeof(*bound) * (size_t)M * N);
	double *da = malloc(sizeof(*da) * (size_t)K / 32 + 1);
	char what[112];
	assert_true(A && Wf && ref && bound && da);
	for (size_t i = 0; i < (size_t)M * K; i++) /* exponents spread over 2^-6 .. 2 */
		A[i] = narrow((float)(2.0 * rnd() * ldexp(1.0, -(int)(i % 7))), a_bf16);
	for (int i = 0; i < K && M > 1; i++) /* row 1: a zero block (da = 0) */
		A[(size_t)K + i] = i < 32 ? 0 : A[(size_t)K + i];
	for (size_t i = 0; i < (size_t)N * K; i++)
		Wf[i] = (float)(0.25 * rnd());
	assert_int_equal(gguf_quantize(GGML_T_Q8_0, Wf, (uint64_t)N * K, W), wb);
	assert_int_equal(gguf_dequantize(GGML_T_Q8_0, W, (uint64_t)N * K, Wf), 0);
	const int nb = K / 32;
	for (int i = 0; i < M; i++) {
		for (int b = 0; b < nb; b++) {
			double amax = 0;
			for (int t = 0; t < 32; t++)
				amax = fmax(amax, fabs(widen(A[(size_t)i * K + 32 * b + t], a_bf16)));
			da[b] = amax / 127 * (1 + 0x1p-23);
		}
		for (int j = 0; j < N; j++) {
			double s = 0.0, a = 0.0, q = 0.0;
			for (int b = 0; b < nb; b++) {
				double sw = 0.0;
				for (int t = 0; t < 32; t++) {
					const size_t k = (size_t)32 * b + t;
					const double w = Wf[(size_t)j * K + k];
					const double p = (double)widen(A[(size_t)i * K + k], a_bf16) * w;
					s += p;
					a += fabs(p);
					sw += fabs(w);
				}
				q += da[b] * (0.5 + 127 * 0x1p-22) * sw;
			}
			ref[(size_t)i * N + j] = s;
			bound[(size_t)i * N + j] = q + gamma_n(nb + 1) * (a + q) * (1 + 1.0 / 254) + 1e-30;
		}
	}
	assert_int_equal(hg_gemm_q8a8(C, A, W, M, N, K, a_bf16, path, threads), 0);
	snprintf(what, sizeof(what), "gemm q8_0 x int8 %s %s M%d N%d K%d threads %d",
	         a_bf16 ? "bf16" : "fp16", hg_path_name(path), M, N, K, threads);
	check_close(what, C, ref, bound, (size_t)M * N);
	gcheck(what, C, (size_t)M * N);
	gfree(C);
	free(A);
	free(Wf);
	free(da);
	fenced_free(&fw);
	free(ref);
	free(bound);
}

/* M = 1, 3, 26, 63, 257; N odd (131, 1, 7, 25, 3: none a multiple of the 16
 * or 8 column group); K whole blocks but 96 and 1120 not multiples of 64
 * (two blocks, a zmm of A), 32 a single block; fp16 and bf16 A. */
static void shapes_a8(int path)
{
	static const int MS[] = {1, 3, 26, 63, 257};
	static const int NKQ[][2] = {{131, 576}, {1, 32}, {7, 1536}, {25, 96}, {3, 1120}};
	if (!hg_i8_path_available(path))
		skip();
	rng_state = 21;
	for (size_t m = 0; m < sizeof(MS) / sizeof(MS[0]); m++)
		for (size_t s = 0; s < sizeof(NKQ) / sizeof(NKQ[0]); s++)
			for (int th = 0; th <= 1; th++)
				run_case_a8(MS[m], NKQ[s][0], NKQ[s][1], (m + s) % 2, path, th);
}

static void test_a8_portable(void **state)
{
	(void)state;
	shapes_a8(HG_PATH_PORTABLE);
}

static void test_a8_avx2(void **state)
{
	(void)state;
	shapes_a8(HG_PATH_AVX2);
}

static void test_a8_avx512(void **state)
{
	(void)state;
	shapes_a8(HG_PATH_AVX512);
}

static void shapes(int path)
{
	static const int MS[] = {1, 3, 26, 63, 257};
	static const int NK[][2] = {{131, 577}, {1, 577}, {5, 7}, {7, 1536}, {2, 9}};
	if (!hg_path_available(path))
		skip();
	rng_state = 15;
	for (int b = 0; b < 2; b++)
		for (size_t m = 0; m < sizeof(MS) / sizeof(MS[0]); m++)
			for (size_t s = 0; s < sizeof(NK) / sizeof(NK[0]); s++)
				for (int th = 0; th <= 1; th++)
					run_case(MS[m], NK[s][0], NK[s][1], b, path, th);
	static const int NKQ[][2] = {{131, 576}, {1, 32}, {7, 1536}, {25, 96}, {3, 1120}};
	for (size_t m = 0; m < sizeof(MS) / sizeof(MS[0]); m++)
		for (size_t s = 0; s < sizeof(NKQ) / sizeof(NKQ[0]); s++)
			for (int th = 0; th <= 1; th++)
				run_case_q8(MS[m], NKQ[s][0], NKQ[s][1], path, th);
}

static void test_portable(void **state)
{
	(void)state;
	shapes(HG_PATH_PORTABLE);
}

static void test_avx2(void **state)
{
	(void)state;
	shapes(HG_PATH_AVX2);
}

static void test_avx512(void **state)
{
	(void)state;
	shapes(HG_PATH_AVX512);
}

/* NaN in A row 2 -> C row 2 all NaN; +inf in W row 5 at column kc where every
 * A row holds 1 -> C[:, 5] = +inf, except row 0 whose A[0][kc] is 0
 * (0 * inf = NaN); everything else finite. */
static void nan_inf(int path)
{
	const int M = 7, N = 11, K = 37, kc = 35;
	if (!hg_path_available(path))
		skip();
	for (int b = 0; b < 2; b++) {
		uint16_t A[7 * 37], W[11 * 37];
		float C[7 * 11];
		rng_state = 7;
		for (int i = 0; i < M * K; i++)
			A[i] = narrow((float)rnd(), b);
		for (int i = 0; i < N * K; i++)
			W[i] = narrow((float)rnd(), b);
		for (int i = 0; i < M; i++)
			A[i * K + kc] = narrow(i ? 1.0f : 0.0f, b);
		A[2 * K + 3] = b ? 0x7fc0 : 0x7e00; /* quiet NaN */
		W[5 * K + kc] = b ? 0x7f80 : 0x7c00; /* +inf */
		assert_int_equal(hg_gemm16(C, A, W, M, N, K, b, path, 1), 0);
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				const float c = C[i * N + j];
				if (i == 2 || (i == 0 && j == 5))
					assert_true(isnan(c));
				else if (j == 5)
					assert_true(isinf(c) && c > 0);
				else
					assert_true(isfinite(c));
			}
	}
}

static void test_nan_inf_portable(void **state)
{
	(void)state;
	nan_inf(HG_PATH_PORTABLE);
}

static void test_nan_inf_avx2(void **state)
{
	(void)state;
	nan_inf(HG_PATH_AVX2);
}

static void test_nan_inf_avx512(void **state)
{
	(void)state;
	nan_inf(HG_PATH_AVX512);
}

/* hg_to_f32 on every 16-bit pattern against formats/gguf.c (bit-exact; NaN
 * to some NaN): all 65536 in one call (the vector loop where the CPU has
 * one) and one at a time (the scalar tail). */
static void test_widen_all(void **state)
{
	(void)state;
	uint16_t *x = malloc(sizeof(*x) * 65536);
	float *y = malloc(sizeof(*y) * 65536);
	assert_true(x && y);
	for (uint32_t h = 0; h < 65536; h++)
		x[h] = (uint16_t)h;
	for (int b = 0; b < 2; b++) {
		hg_to_f32(y, x, 65536, b);
		for (uint32_t h = 0; h < 65536; h++) {
			float one, want = widen(x[h], b);
			hg_to_f32(&one, &x[h], 1, b);
			if (isnan(want)) {
				assert_true(isnan(one));
				assert_true(isnan(y[h]));
			} else {
				assert_memory_equal(&one, &want, sizeof(one));
				assert_memory_equal(&y[h], &want, sizeof(want));
			}
		}
	}
	free(x);
	free(y);
}

/* hg_from_f32 against formats/gguf.c's gguf_f32_to_f16/bf16, bit for bit:
 * every upper half (sign, exponent, top mantissa bits) with lower halves at
 * and around the rounding points of both formats (bf16: bit 15; fp16
 * normals: bit 12, subnormals further up), plus 2^22 random patterns; in
 * blocks (the vector loop) and one at a time (the scalar tail). */
static void test_narrow_all(void **state)
{
	static const uint32_t LO[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x2000, 0x3000,
	                              0x7fff, 0x8000, 0x8001, 0xa000, 0xffff};
	const size_t nlo = sizeof(LO) / sizeof(LO[0]), n = 65536 * nlo + (1u << 22);
	float *x = malloc(sizeof(*x) * n);
	uint16_t *y = malloc(sizeof(*y) * n);
	uint64_t r = 0x15;
	(void)state;
	assert_true(x && y);
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		if (i < 65536 * nlo) {
			u = (uint32_t)(i / nlo) << 16 | LO[i % nlo];
		} else {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			u = (uint32_t)(r >> 32);
		}
		memcpy(&x[i], &u, sizeof(u));
	}
	for (int b = 0; b < 2; b++) {
		hg_from_f32(y, x, (int64_t)n, b);
		for (size_t i = 0; i < n; i++) {
			const uint16_t want = b ? gguf_f32_to_bf16(x[i]) : gguf_f32_to_f16(x[i]);
			if (y[i] != want)
				fail_msg("%s of %#x: %#x, gguf.c %#x", b ? "bf16" : "fp16",
				         *(const uint32_t *)&x[i], y[i], want);
			if (i % 4097 == 0) {
				uint16_t one;
				hg_from_f32(&one, &x[i], 1, b);
				assert_int_equal(one, want);
			}
		}
	}
	free(x);
	free(y);
}

/* The two paths sum in the same order (8 FMA lanes, then (l, l+4), (l, l+2),
 * (l, l+1)), and a column's tile or thread does not change it: portable ==
 * AVX2 == AVX2 on the pool, bit for bit (what lets a fake cuBLASLt, or
 * another machine, reproduce the host's tokens exactly). */
static void test_paths_bit_identical(void **state)
{
	const int M = 26, N = 131, K = 1100; /* K > 1024: the portable path's chunking too */
	(void)state;
	if (!hg_path_available(HG_PATH_AVX2))
		skip();
	uint16_t *A = malloc(sizeof(*A) * M * K), *W = malloc(sizeof(*W) * N * K);
	float *C[3];
	assert_true(A && W);
	for (int b = 0; b < 2; b++) {
		rng_state = 99;
		for (int i = 0; i < M * K; i++)
			A[i] = narrow((float)rnd(), b);
		for (int i = 0; i < N * K; i++)
			W[i] = narrow((float)rnd(), b);
		for (int p = 0; p < 3; p++) {
			C[p] = malloc(sizeof(float) * M * N);
			assert_non_null(C[p]);
			assert_int_equal(hg_gemm16(C[p], A, W, M, N, K, b,
			                           p ? HG_PATH_AVX2 : HG_PATH_PORTABLE, p == 2 ? 0 : 1), 0);
		}
		assert_memory_equal(C[0], C[1], sizeof(float) * M * N);
		assert_memory_equal(C[1], C[2], sizeof(float) * M * N);
		if (hg_path_available(HG_PATH_AVX512)) { /* its own order: 1 thread == the pool */
			assert_int_equal(hg_gemm16(C[0], A, W, M, N, K, b, HG_PATH_AVX512, 1), 0);
			assert_int_equal(hg_gemm16(C[1], A, W, M, N, K, b, HG_PATH_AVX512, 0), 0);
			assert_memory_equal(C[0], C[1], sizeof(float) * M * N);
		}
		for (int p = 0; p < 3; p++)
			free(C[p]);
	}
	free(A);
	free(W);
}

/* q8_0: portable == AVX2 == AVX2 on the pool bit for bit, as for 16 bits;
 * AVX-512 on one thread == on the pool; a k that is not whole blocks is
 * refused. */
static void test_q8_paths_bit_identical(void **state)
{
	const int M = 26, N = 131, K = 1120;
	(void)state;
	if (!hg_path_available(HG_PATH_AVX2))
		skip();
	uint16_t *A = malloc(sizeof(*A) * M * K);
	float *Wf = malloc(sizeof(float) * N * K), *C[3];
	char *W = malloc((size_t)N * K / 32 * 34);
	assert_true(A && W && Wf);
	rng_state = 7;
	for (int i = 0; i < M * K; i++)
		A[i] = narrow((float)rnd(), false);
	for (int i = 0; i < N * K; i++)
		Wf[i] = (float)rnd();
	gguf_quantize(GGML_T_Q8_0, Wf, (uint64_t)N * K, W);
	for (int p = 0; p < 3; p++) {
		C[p] = malloc(sizeof(float) * M * N);
		assert_non_null(C[p]);
		assert_int_equal(hg_gemm_q8(C[p], A, W, M, N, K, false,
		                            p ? HG_PATH_AVX2 : HG_PATH_PORTABLE, p == 2 ? 0 : 1), 0);
	}
	assert_memory_equal(C[0], C[1], sizeof(float) * M * N);
	assert_memory_equal(C[1], C[2], sizeof(float) * M * N);
	if (hg_path_available(HG_PATH_AVX512)) {
		assert_int_equal(hg_gemm_q8(C[0], A, W, M, N, K, false, HG_PATH_AVX512, 1), 0);
		assert_int_equal(hg_gemm_q8(C[1], A, W, M, N, K, false, HG_PATH_AVX512, 0), 0);
		assert_memory_equal(C[0], C[1], sizeof(float) * M * N);
	}
	for (int p = HG_PATH_PORTABLE; p <= HG_PATH_AVX512; p++)
		if (hg_path_available(p))
			assert_int_equal(hg_gemm_q8(C[0], A, W, M, N, 48, false, p, 0), -22);
	for (int p = 0; p < 3; p++)
		free(C[p]);
	free(A);
	free(W);
	free(Wf);
}

/* hg_gemm_q8a8's specification written out plainly (host_gemm.h): GGUF
 * Q8_0's rule for A with an fp32 scale and round to nearest even, exact
 * integer block sums, one fmaf per block in block order. Finite A only. */
static void a8_spec(float *C, const uint16_t *A, const char *W, int M, int N, int K, bool bf16)
{
	const int nb = K / 32;
	int8_t *q = malloc((size_t)K);
	float *d = malloc(sizeof(*d) * (size_t)nb);
	assert_true(q && d);
	for (int i = 0; i < M; i++) {
		for (int b = 0; b < nb; b++) {
			float amax = 0.0f;
			for (int t = 0; t < 32; t++)
				amax = fmaxf(amax, fabsf(widen(A[(size_t)i * K + 32 * b + t], bf16)));
			d[b] = amax / 127.0f;
			const float id = d[b] != 0.0f ? 1.0f / d[b] : 0.0f;
			for (int t = 0; t < 32; t++) {
				const float x = widen(A[(size_t)i * K + 32 * b + t], bf16) * id;
				q[32 * b + t] = (int8_t)nearbyintf(x);
			}
		}
		for (int j = 0; j < N; j++) {
			float acc = 0.0f;
			for (int b = 0; b < nb; b++) {
				const char *blk = W + ((size_t)j * nb + b) * 34;
				int32_t isum = 0;
				for (int t = 0; t < 32; t++)
					isum += q[32 * b + t] * (int8_t)blk[2 + t];
				uint16_t dh;
				memcpy(&dh, blk, 2);
				const float p = d[b] * gguf_f16_to_f32(dh);
				acc = fmaf((float)isum, p, acc);
			}
			C[(size_t)i * N + j] = acc;
		}
	}
	free(q);
	free(d);
}

/* int8 activations: every path (portable, AVX2, AVX-512 VNNI), on one
 * thread and on the pool, gives the same bits, and every row's bits are
 * the same whatever M: the first L rows of an M-row call equal an L-row
 * call's, for L = 1, 3, 26, 63 of M = 257 (the verify at its rows and the
 * one-row decode compute the same numbers). K = 1120 (35 blocks, not a
 * multiple of two), N = 131. Blocks with NaN or inf make their row's outputs
 * NaN on every path, and a k that is not whole blocks is refused. The
 * finite rows equal a8_spec's, bit for bit. */
static void test_a8_bit_identical(void **state)
{
	static const int LS[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 26, 63};
	const int M = 257, N = 131, K = 1120;
	(void)state;
	uint16_t *A = malloc(sizeof(*A) * M * K);
	float *Wf = malloc(sizeof(float) * N * K), *C0 = malloc(sizeof(float) * M * N);
	float *C1 = malloc(sizeof(float) * M * N);
	char *W = malloc((size_t)N * K / 32 * 34);
	assert_true(A && W && Wf && C0 && C1);
	for (int b = 0; b < 2; b++) {
		rng_state = 31 + b;
		for (int i = 0; i < M * K; i++)
			A[i] = narrow((float)(rnd() * ldexp(1.0, -(i % 5))), b);
		for (int i = 0; i < N * K; i++)
			Wf[i] = (float)rnd();
		A[5 * K + 40] = b ? 0x7fc0 : 0x7e00; /* row 5: NaN */
		A[6 * K + 1000] = b ? 0xff80 : 0xfc00; /* row 6: -inf */
		gguf_quantize(GGML_T_Q8_0, Wf, (uint64_t)N * K, W);
		assert_int_equal(hg_gemm_q8a8(C0, A, W, M, N, K, b, HG_PATH_PORTABLE, 1), 0);
		for (int i = 0; i < M * N; i++)
			assert_true((i / N == 5 || i / N == 6) ? isnan(C0[i]) : isfinite(C0[i]));
		a8_spec(C1, A, W, 5, N, K, b); /* rows 0-4: finite */
		if (memcmp(C0, C1, sizeof(float) * 5 * N))
			fail_msg("q8_0 x int8 %s A: the portable path is not the specification's bits",
			         b ? "bf16" : "fp16");
		for (int p = HG_PATH_PORTABLE; p <= HG_PATH_AVX512; p++) {
			if (!hg_i8_path_available(p))
				continue;
			for (int th = 0; th <= 1; th++) {
				memset(C1, 0, sizeof(float) * M * N);
				assert_int_equal(hg_gemm_q8a8(C1, A, W, M, N, K, b, p, th), 0);
				if (memcmp(C0, C1, sizeof(float) * M * N))
					fail_msg("q8_0 x int8 %s A, path %s, threads %d: not the portable path's "
					         "bits", b ? "bf16" : "fp16", hg_path_name(p), th);
			}
			for (size_t l = 0; l < sizeof(LS) / sizeof(LS[0]); l++) {
				memset(C1, 0, sizeof(float) * M * N);
				assert_int_equal(hg_gemm_q8a8(C1, A, W, LS[l], N, K, b, p, 0), 0);
				if (memcmp(C0, C1, sizeof(float) * LS[l] * N))
					fail_msg("q8_0 x int8, path %s: %d rows differ from the same rows of %d",
					         hg_path_name(p), LS[l], M);
			}
			assert_int_equal(hg_gemm_q8a8(C1, A, W, M, N, 48, b, p, 0), -22);
		}
	}
	assert_int_equal(hg_gemm_q8a8(C0, A, W, 2, 3, 0, false, HG_PATH_AUTO, 0), 0);
	for (int i = 0; i < 6; i++)
		assert_true(C0[i] == 0.0f);
	free(A);
	free(W);
	free(Wf);
	free(C0);
	free(C1);
}

/* Degenerate shapes: m = 0 or n = 0 writes nothing; k = 0 writes zeros. */
static void test_empty(void **state)
{
	(void)state;
	float *C = galloc(6);
	uint16_t A[1] = {0}, W[1] = {0};
	for (int i = 0; i < 6; i++)
		C[i] = 5.0f;
	assert_int_equal(hg_gemm16(C, A, W, 0, 3, 4, false, HG_PATH_AUTO, 0), 0);
	assert_int_equal(hg_gemm16(C, A, W, 2, 0, 4, false, HG_PATH_AUTO, 0), 0);
	for (int i = 0; i < 6; i++)
		assert_true(C[i] == 5.0f);
	for (int p = HG_PATH_PORTABLE; p <= HG_PATH_AVX512; p++) {
		if (!hg_path_available(p))
			continue;
		assert_int_equal(hg_gemm16(C, A, W, 2, 3, 0, true, p, 0), 0);
		for (int i = 0; i < 6; i++)
			assert_true(C[i] == 0.0f);
	}
	gcheck("gemm16 empty", C, 6);
	gfree(C);
	assert_int_equal(hg_gemm16(C, A, W, -1, 3, 4, false, HG_PATH_AUTO, 0), -22);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_widen_all),
		cmocka_unit_test(test_narrow_all),
		cmocka_unit_test(test_portable),
		cmocka_unit_test(test_avx2),
		cmocka_unit_test(test_avx512),
		cmocka_unit_test(test_paths_bit_identical),
		cmocka_unit_test(test_q8_paths_bit_identical),
		cmocka_unit_test(test_a8_portable),
		cmocka_unit_test(test_a8_avx2),
		cmocka_unit_test(test_a8_avx512),
		cmocka_unit_test(test_a8_bit_identical),
		cmocka_unit_test(test_nan_inf_portable),
		cmocka_unit_test(test_nan_inf_avx2),
		cmocka_unit_test(test_nan_inf_avx512),
		cmocka_unit_test(test_empty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
