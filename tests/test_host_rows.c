/* Rows regions of the host backend (device.h rows_begin / rows_end): the
 * tree forward run on the first L of its planned rows, which target-only
 * decoding (L = 1) and n-gram chains with fewer drafts than nodes use. The
 * region is exact only if a row's result never depends on how many rows
 * run beside it, so that is what is checked, bit for bit:
 *  - the host GEMM (fp16, bf16, q8_0, q8_0 x int8; every available path; one thread and
 *    the pool): C for m = L equals the first L rows of C for m = M, M = 3,
 *    26, 63, 257 (the awkward shapes), L = 1, 2, M - 1; K = 100
 *    (fp16/bf16) and 96, 160 (q8_0, int8), N = 37: none a multiple of the vector
 *    width or the tile; M = 5, 6 too, for the AVX-512 path's 5- to 8-row
 *    tiles;
 *  - the host tree attention: T = nb = L queries over a random tree mask
 *    give the first L rows of T = nb = M, for both paths, fp16 and bf16;
 *  - the device: rows_begin's L rule (the last present node, the cap, at
 *    least 1), recorded regions replayed with the tokens of replay time, a
 *    GEMM and a memset sized by it, and misuse refused with an error; a
 *    q8_0_a8 GEMM op computes hg_gemm_q8a8's bits at every m, the BLAS
 *    switch's included, never hg_gemm_q8's.
 * Correctness of each kernel against its fp32 reference is test_host_gemm's
 * and test_host_attn's; the engine-level checks (a tree forward at every L
 * against the full one, target-only tokens == speculative tokens == the
 * fp32 reference) are test_engine's test_tiny_rows. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "device/device.h"
#include "device/host_attn.h"
#include "device/host_gemm.h"
#include "formats/gguf.h"

#include "check.h"

static const int PATHS[] = {HG_PATH_PORTABLE, HG_PATH_AVX2, HG_PATH_AVX512};

static void rows_equal(const char *what, const float *full, const float *part, size_t row,
                       int L)
{
	if (memcmp(full, part, sizeof(*full) * row * (size_t)L)) {
		for (size_t i = 0; i < row * (size_t)L; i++)
			if (memcmp(&full[i], &part[i], sizeof(*full)))
				fail_msg("%s: row %zu col %zu: %.9g with all rows, %.9g with %d", what, i / row,
				         i % row, (double)full[i], (double)part[i], L);
	}
}

/* wf: 0 fp16, 1 bf16, 2 q8_0, 3 q8_0 weights x int8 activations */
static int gemm_wf(int wf, float *C, const uint16_t *A, const void *W, int m, int N, int K,
                   int path, int threads)
{
	return wf == 3 ? hg_gemm_q8a8(C, A, W, m, N, K, false, path, threads)
	       : wf == 2 ? hg_gemm_q8(C, A, W, m, N, K, false, path, threads)
	                 : hg_gemm16(C, A, W, m, N, K, wf == 1, path, threads);
}

static void gemm_case(int wf, int M, int K, int N, int path, int threads)
{
	const size_t wbytes = wf >= 2 ? (size_t)N * K / 32 * 34 : (size_t)N * K * 2;
	uint16_t *A = malloc(sizeof(*A) * (size_t)M * K);
	void *W = malloc(wbytes);
	float *wf32 = malloc(sizeof(float) * (size_t)N * K);
	float *Cf = malloc(sizeof(float) * (size_t)M * N), *Cp = malloc(sizeof(float) * (size_t)M * N);
	char what[128];
	assert_true(A && W && wf32 && Cf && Cp);
	for (size_t i = 0; i < (size_t)M * K; i++)
		A[i] = wf == 1 ? gguf_f32_to_bf16((float)rnd()) : gguf_f32_to_f16((float)rnd());
	fill(wf32, (size_t)N * K, 1.0);
	if (wf >= 2)
		gguf_quantize(GGML_T_Q8_0, wf32, (size_t)N * K, W);
	else
		for (size_t i = 0; i < (size_t)N * K; i++)
			((uint16_t *)W)[i] = wf ? gguf_f32_to_bf16(wf32[i]) : gguf_f32_to_f16(wf32[i]);
	const int Ls[] = {1, 2, M - 1};
	int rc = gemm_wf(wf, Cf, A, W, M, N, K, path, threads);
	assert_int_equal(rc, 0);
	for (int li = 0; li < 3; li++) {
		const int L = Ls[li];
		if (L < 1 || L >= M)
			continue;
		for (size_t i = 0; i < (size_t)M * N; i++)
			Cp[i] = NAN;
		rc = gemm_wf(wf, Cp, A, W, L, N, K, path, threads);
		assert_int_equal(rc, 0);
		snprintf(what, sizeof(what), "%s GEMM M %d K %d N %d path %s threads %d, L %d",
		         wf == 3 ? "q8_0 x int8" : wf == 2 ? "q8_0" : wf ? "bf16" : "fp16", M, K, N,
		         hg_path_name(path), threads, L);
		rows_equal(what, Cf, Cp, (size_t)N, L);
		/* rows past L untouched */
		for (size_t i = (size_t)L * N; i < (size_t)M * N; i++)
			if (!isnan(Cp[i]))
				fail_msg("%s: wrote past row %d", what, L);
	}
	free(A);
	free(W);
	free(wf32);
	free(Cf);
	free(Cp);
}

static void test_gemm_rows(void **state)
{
	/* 5 and 6: the AVX-512 path's 5- and 6-row tiles against the others */
	const int Ms[] = {3, 5, 6, 26, 63, 257};
	int checked = 0;
	rng_state = 15;
	for (size_t p = 0; p < sizeof(PATHS) / sizeof(PATHS[0]); p++) {
		if (!hg_path_available(PATHS[p]))
			continue;
		for (int mi = 0; mi < 6; mi++)
			for (int threads = 0; threads <= 1; threads++) {
				gemm_case(0, Ms[mi], 100, 37, PATHS[p], threads);
				gemm_case(1, Ms[mi], 100, 37, PATHS[p], threads);
				gemm_case(2, Ms[mi], 96, 37, PATHS[p], threads);
				gemm_case(2, Ms[mi], 160, 37, PATHS[p], threads);
				if (hg_i8_path_available(PATHS[p])) {
					gemm_case(3, Ms[mi], 96, 37, PATHS[p], threads);
					gemm_case(3, Ms[mi], 160, 37, PATHS[p], threads);
				}
				checked++;
			}
	}
	assert_true(checked >= 8); /* at least portable and one vector path */
}

static void attn_case(int M, bool f16, int path)
{
	const int ctx = 37, H = 6, KH = 2, hd = 20, kvd = KH * hd, mw = (M + 63) / 64;
	const size_t nq = (size_t)M * H * hd, nkv = (size_t)(ctx + M) * kvd;
	uint16_t *q = malloc(2 * nq), *k = malloc(2 * nkv), *v = malloc(2 * nkv);
	float *of = malloc(4 * nq), *op = malloc(4 * nq);
	uint64_t *mask = calloc((size_t)M * mw, sizeof(*mask));
	int *par = malloc(sizeof(*par) * (size_t)M);
	char what[96];
	assert_true(q && k && v && of && op && mask && par);
	for (size_t i = 0; i < nq; i++)
		q[i] = f16 ? gguf_f32_to_f16((float)(2 * rnd())) : gguf_f32_to_bf16((float)(2 * rnd()));
	for (size_t i = 0; i < nkv; i++) {
		k[i] = f16 ? gguf_f32_to_f16((float)(2 * rnd())) : gguf_f32_to_bf16((float)(2 * rnd()));
		v[i] = f16 ? gguf_f32_to_f16((float)rnd()) : gguf_f32_to_bf16((float)rnd());
	}
	/* a random tree in BFS order: node i's parent is < i; a row sees its
	 * ancestors and itself */
	for (int i = 0; i < M; i++) {
		par[i] = i ? (int)((rnd() + 1) * 0.5 * i) % i : -1;
		for (int a = i; a >= 0; a = par[a])
			mask[(size_t)i * mw + a / 64] |= 1ull << (a % 64);
	}
	assert_int_equal(ha_tree_attention(of, q, k, v, M, ctx, M, H, KH, hd, mask, mw, f16, path, 0),
	                 0);
	const int Ls[] = {1, 2, M - 1};
	for (int li = 0; li < 3; li++) {
		const int L = Ls[li];
		if (L < 1 || L >= M)
			continue;
		assert_int_equal(
			ha_tree_attention(op, q, k, v, L, ctx, L, H, KH, hd, mask, mw, f16, path, 0), 0);
		snprintf(what, sizeof(what), "tree attention %s M %d path %s, L %d", f16 ? "fp16" : "bf16",
		         M, hg_path_name(path), L);
		rows_equal(what, of, op, (size_t)H * hd, L);
	}
	free(q);
	free(k);
	free(v);
	free(of);
	free(op);
	free(mask);
	free(par);
}

static void test_attention_rows(void **state)
{
	const int Ms[] = {3, 26, 63, 257};
	rng_state = 16;
	for (int p = 0; p < 2; p++) {
		if (!hg_path_available(PATHS[p]))
			continue;
		for (int mi = 0; mi < 4; mi++) {
			attn_case(Ms[mi], true, PATHS[p]);
			attn_case(Ms[mi], false, PATHS[p]);
		}
	}
}

/* The device: a GEMM of m = 5 rows and a memset of 5 rows inside a region
 * over 5 tokens, eager and recorded; L = 1 + the last present node, capped. */
static void test_device_region(void **state)
{
	sw_err err = {0};
	rt_dev *d = rt_dev_host_new(RT_HOST_NATIVE, NULL, &err);
	if (!d)
		fail_msg("%s", err.msg);
	assert_non_null(d->ops->rows_begin);
	enum { R = 5, K = 32, N = 8 };
	rt_dptr tok, A, W, C, Z;
	assert_int_equal(d->ops->alloc(d, 4 * R, &tok, &err), 0);
	assert_int_equal(d->ops->alloc(d, 2 * R * K, &A, &err), 0);
	assert_int_equal(d->ops->alloc(d, 2 * N * K, &W, &err), 0);
	assert_int_equal(d->ops->alloc(d, 4 * R * N, &C, &err), 0);
	assert_int_equal(d->ops->alloc(d, 4 * R * 4, &Z, &err), 0);
	uint16_t *a = (uint16_t *)(uintptr_t)A, *w = (uint16_t *)(uintptr_t)W;
	for (int i = 0; i < R * K; i++)
		a[i] = gguf_f32_to_f16((float)rnd());
	for (int i = 0; i < N * K; i++)
		w[i] = gguf_f32_to_f16((float)rnd());
	float full[R * N];
	assert_int_equal(hg_gemm16(full, a, w, R, N, K, false, HG_PATH_AUTO, 1), 0);
	rt_op g = {.kind = RT_OP_GEMM, .m = R, .n = N, .k = K, .dtype = RT_FP16, .layer = -1,
	           .n_args = 3, .argval = {C, A, W}};
	rt_op z = {.kind = RT_OP_MEMSET, .bytes = 4 * R * 4, .layer = -1, .n_args = 1, .argval = {Z}};
	snprintf(g.name, sizeof(g.name), "g");
	snprintf(z.name, sizeof(z.name), "z");
	rt_op_fix_argv(&g);
	rt_op_fix_argv(&z);
	/* tokens, cap -> the rows expected */
	static const int32_t toks[][R] = {{7, -1, -1, -1, -1}, {7, 3, 4, -1, -1}, {7, 3, -1, 4, -1},
	                                  {7, 3, 4, 5, 6}, {-1, -1, -1, -1, -1}};
	static const int caps[] = {R, R, R, 2, R}, want[] = {1, 3, 4, 2, 1};
	rt_graph *gr = NULL;
	assert_int_equal(d->ops->graph_begin(d, &err), 0);
	assert_int_equal(d->ops->rows_begin(d, tok, R, R, &err), 0);
	assert_int_equal(d->ops->launch(d, &g, &err), 0);
	assert_int_equal(d->ops->launch(d, &z, &err), 0);
	assert_int_equal(d->ops->rows_end(d, &err), 0);
	assert_int_equal(d->ops->graph_end(d, &gr, &err), 0);
	for (int c = 0; c < 5; c++)
		for (int replay = 0; replay < 2; replay++) {
			float *cc = (float *)(uintptr_t)C, *zz = (float *)(uintptr_t)Z;
			for (int i = 0; i < R * N; i++)
				cc[i] = -1.0f;
			for (int i = 0; i < R * 4; i++)
				zz[i] = -1.0f;
			memcpy((void *)(uintptr_t)tok, toks[c], sizeof(toks[c]));
			int rc;
			if (replay && caps[c] == R) {
				rc = d->ops->graph_launch(d, gr, &err);
			} else {
				rc = d->ops->rows_begin(d, tok, R, caps[c], &err);
				rc = rc ? rc : d->ops->launch(d, &g, &err);
				rc = rc ? rc : d->ops->launch(d, &z, &err);
				rc = rc ? rc : d->ops->rows_end(d, &err);
			}
			if (rc)
				fail_msg("%s", err.msg);
			for (int i = 0; i < R * N; i++)
				if (i < want[c] * N ? memcmp(&cc[i], &full[i], 4) : cc[i] != -1.0f)
					fail_msg("case %d (%s): C[%d] = %g, want %d live rows", c,
					         replay ? "replay" : "eager", i, (double)cc[i], want[c]);
			for (int i = 0; i < R * 4; i++)
				if (zz[i] != (i < want[c] * 4 ? 0.0f : -1.0f))
					fail_msg("case %d: memset word %d = %g, want %d live rows", c, i,
					         (double)zz[i], want[c]);
		}
	/* outside a region every op runs its planned rows again */
	float *cc = (float *)(uintptr_t)C;
	for (int i = 0; i < R * N; i++)
		cc[i] = -1.0f;
	assert_int_equal(d->ops->launch(d, &g, &err), 0);
	assert_memory_equal(cc, full, sizeof(full));
	d->ops->graph_free(d, gr);
	/* misuse */
	assert_int_not_equal(d->ops->rows_begin(d, tok, 0, 1, &err), 0);
	assert_non_null(strstr(err.msg, "rows_begin"));
	assert_int_not_equal(d->ops->rows_begin(d, tok + 2, R, 1, &err), 0);
	assert_int_equal(d->ops->graph_begin(d, &err), 0);
	assert_int_not_equal(d->ops->rows_end(d, &err), 0);
	assert_non_null(strstr(err.msg, "rows_end without rows_begin"));
	assert_int_equal(d->ops->rows_begin(d, tok, R, R, &err), 0);
	assert_int_not_equal(d->ops->rows_begin(d, tok, R, R, &err), 0);
	assert_non_null(strstr(err.msg, "inside a rows region"));
	gr = NULL;
	assert_int_not_equal(d->ops->graph_end(d, &gr, &err), 0);
	assert_non_null(strstr(err.msg, "rows region still open"));
	assert_null(gr);
	rt_dev_free(d);
}

/* The device's GEMM op in dtype q8_0_a8 is the int8 GEMM at every m: 5
 * rows and the BLAS switch's m (hg_blas_min_m, where q8_0 goes to sgemm),
 * bit for bit hg_gemm_q8a8's (and not hg_gemm_q8's: the activations'
 * rounding shows); supports_op takes it with k in whole blocks only. */
static void test_device_gemm_a8(void **state)
{
	sw_err err = {0};
	rt_dev *d = rt_dev_host_new(RT_HOST_NATIVE, NULL, &err);
	if (!d)
		fail_msg("%s", err.msg);
	const int64_t big = hg_blas_min_m();
	const int K = 64, N = 9;
	rt_dptr A, W, C;
	assert_int_equal(d->ops->alloc(d, (size_t)(2 * big * K), &A, &err), 0);
	assert_int_equal(d->ops->alloc(d, (size_t)N * K / 32 * 34, &W, &err), 0);
	assert_int_equal(d->ops->alloc(d, (size_t)(4 * big * N), &C, &err), 0);
	uint16_t *a = (uint16_t *)(uintptr_t)A;
	float *wf = malloc(sizeof(*wf) * N * K), *want = malloc(sizeof(float) * (size_t)(big * N));
	float *q8 = malloc(sizeof(float) * (size_t)(big * N));
	assert_true(wf && want && q8);
	rng_state = 5;
	for (int64_t i = 0; i < big * K; i++)
		a[i] = gguf_f32_to_f16((float)rnd());
	fill(wf, (size_t)N * K, 1.0);
	gguf_quantize(GGML_T_Q8_0, wf, (size_t)N * K, (void *)(uintptr_t)W);
	const int64_t ms[] = {5, big};
	for (int t = 0; t < 2; t++) {
		const int64_t m = ms[t];
		rt_op g = {.kind = RT_OP_GEMM, .m = m, .n = N, .k = K, .dtype = RT_Q8_0_A8, .layer = -1,
		           .n_args = 3, .argval = {C, A, W}};
		snprintf(g.name, sizeof(g.name), "g");
		rt_op_fix_argv(&g);
		assert_true(d->ops->supports_op(d, &g));
		if (d->ops->launch(d, &g, &err) || d->ops->sync(d, &err))
			fail_msg("%s", err.msg);
		assert_int_equal(hg_gemm_q8a8(want, a, (const void *)(uintptr_t)W, m, N, K, false,
		                              HG_PATH_AUTO, 0), 0);
		assert_int_equal(hg_gemm_q8(q8, a, (const void *)(uintptr_t)W, m, N, K, false,
		                            HG_PATH_AUTO, 0), 0);
		const float *c = (const float *)(uintptr_t)C;
		if (memcmp(c, want, sizeof(float) * (size_t)(m * N)))
			fail_msg("q8_0_a8 GEMM op at m %lld: not hg_gemm_q8a8's bits", (long long)m);
		assert_true(memcmp(c, q8, sizeof(float) * (size_t)(m * N)) != 0);
		g.k = 48;
		assert_false(d->ops->supports_op(d, &g));
	}
	free(wf);
	free(want);
	free(q8);
	rt_dev_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gemm_rows),
		cmocka_unit_test(test_attention_rows),
		cmocka_unit_test(test_device_region),
		cmocka_unit_test(test_device_gemm_a8),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
