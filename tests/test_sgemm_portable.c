/* The portable kit's sgemm (runtime/device/sgemm_portable.c) on awkward
 * shapes (1 x 1 x 1; M, N, K off every tile size: 7, 33, 111, 260, 301;
 * K past the 256-deep slice; N past the 256-wide tile; shapes large enough
 * to run on the thread pool), both orders, every transpose pair, padded
 * leading dimensions, alpha and beta of 0, 1 and others, guard values
 * around C.
 *
 * Two references: (1) the naive float loop in the order the header
 * promises (c = beta c, then c = c + (alpha a) b per k): bit-identical;
 * (2) the same sum in double: |C - ref| <= gamma_{K+1} (|alpha| sum |a b| +
 * |beta c|) + u |ref| (Higham 3.1; the +1 and u |ref| for the beta product
 * and alpha's rounding), which catches an error the naive loop would share
 * (a wrong transpose in both is not possible: the double reference reads
 * A and B through its own index rule). Also: a column-major call equals the
 * row-major call on the transposes bit for bit (alpha 1), and a bad
 * argument leaves C untouched. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "device/sgemm_portable.h"
#include "testutil.h"

#define GUARD 4
#define GUARD_VAL 12345.0f

typedef struct prob {
	int order, tA, tB, M, N, K, lda, ldb, ldc;
	float alpha, beta;
} prob;

/* element (i, k) of op(A) with A stored in `order` (rows x cols as CBLAS sees them) */
static float op_at(const float *X, int order, int trans, int ld, int r, int c)
{
	if (trans) {
		int t = r;
		r = c;
		c = t;
	}
	return order == SW_SGEMM_ROW_MAJOR ? X[(size_t)r * ld + c] : X[r + (size_t)c * ld];
}

static size_t c_index(const prob *p, int i, int j)
{
	return p->order == SW_SGEMM_ROW_MAJOR ? (size_t)i * p->ldc + j : i + (size_t)j * p->ldc;
}

static void check_one(const prob *p, uint64_t seed)
{
	const bool row = p->order == SW_SGEMM_ROW_MAJOR;
	/* stored shapes: row-major A is (tA ? K : M) rows of lda */
	const int a_rows = row ? (p->tA ? p->K : p->M) : (p->tA ? p->M : p->K);
	const int b_rows = row ? (p->tB ? p->N : p->K) : (p->tB ? p->K : p->N);
	const int c_rows = row ? p->M : p->N;
	const size_t na = (size_t)(a_rows > 0 ? a_rows : 1) * p->lda, nb = (size_t)(b_rows > 0 ? b_rows : 1) * p->ldb;
	const size_t nc = (size_t)(c_rows > 0 ? c_rows : 1) * p->ldc;
	float *A = malloc(sizeof(*A) * na), *B = malloc(sizeof(*B) * nb);
	float *C = malloc(sizeof(*C) * (nc + 2 * GUARD)), *C0 = malloc(sizeof(*C0) * nc);
	float *N = malloc(sizeof(*N) * nc);
	assert_non_null(A);
	assert_non_null(B);
	assert_non_null(C);
	assert_non_null(C0);
	assert_non_null(N);
	for (size_t i = 0; i < na; i++)
		A[i] = (float)(2 * tu_uniform(&seed) - 1);
	for (size_t i = 0; i < nb; i++)
		B[i] = (float)(2 * tu_uniform(&seed) - 1);
	for (size_t i = 0; i < nc; i++)
		C0[i] = p->beta == 0.0f && i % 7 == 0 ? NAN : (float)(2 * tu_uniform(&seed) - 1);
	for (int g = 0; g < GUARD; g++)
		C[g] = C[GUARD + nc + g] = GUARD_VAL;
	memcpy(C + GUARD, C0, sizeof(*C) * nc);
	memcpy(N, C0, sizeof(*N) * nc);
	assert_int_equal(sw_sgemm_portable(p->order, p->tA ? SW_SGEMM_TRANS : SW_SGEMM_NO_TRANS,
	                                   p->tB ? SW_SGEMM_TRANS : SW_SGEMM_NO_TRANS, p->M, p->N, p->K,
	                                   p->alpha, A, p->lda, B, p->ldb, p->beta, C + GUARD, p->ldc),
	                 0);
	for (int g = 0; g < GUARD; g++) {
		assert_true(C[g] == GUARD_VAL);
		assert_true(C[GUARD + nc + g] == GUARD_VAL);
	}
	const double u = ldexp(1.0, -24), gam = (p->K + 1) * u / (1 - (p->K + 1) * u);
	for (int i = 0; i < p->M; i++)
		for (int j = 0; j < p->N; j++) {
			const size_t ic = c_index(p, i, j);
			float c = p->beta == 0.0f ? 0.0f : p->beta * N[ic];
			double ref = p->beta == 0.0f ? 0.0 : (double)p->beta * C0[ic], mag = fabs(ref);
			for (int k = 0; k < p->K; k++) {
				const float a = op_at(A, p->order, p->tA, p->lda, i, k);
				const float b = op_at(B, p->order, p->tB, p->ldb, k, j);
				c = c + (p->alpha * a) * b;
				ref += (double)p->alpha * a * b;
				mag += fabs((double)p->alpha * a * b);
			}
			N[ic] = c;
			const float got = C[GUARD + ic];
			if (memcmp(&got, &c, sizeof(c)) || fabs(got - ref) > gam * mag + u * fabs(ref))
				fail_msg("%s tA %d tB %d M %d N %d K %d alpha %g beta %g: C(%d,%d) = %.9g, naive "
				         "%.9g, double %.9g (bound %.3g)", row ? "row" : "col", p->tA, p->tB, p->M,
				         p->N, p->K, (double)p->alpha, (double)p->beta, i, j, (double)got, (double)c,
				         ref, gam * mag + u * fabs(ref));
		}
	/* the padding between rows (ldc > the row length) is never written */
	for (int r = 0; r < c_rows; r++)
		for (int x = row ? p->N : p->M; x < p->ldc; x++)
			assert_memory_equal(&C[GUARD + (size_t)r * p->ldc + x], &C0[(size_t)r * p->ldc + x],
			                    sizeof(float));
	free(A);
	free(B);
	free(C);
	free(C0);
	free(N);
}

static void test_shapes(void **state)
{
	(void)state;
	static const int shapes[][3] = {{1, 1, 1}, {7, 33, 5}, {33, 7, 260}, {111, 17, 33},
	                                {6, 16, 256}, {13, 300, 301}, {97, 260, 513}, {1, 577, 64}};
	static const float ab[][2] = {{1, 0}, {1, 1}, {-0.5f, 0.25f}, {0, 2}};
	uint64_t seed = 7;
	int n = 0;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int order = SW_SGEMM_ROW_MAJOR; order <= SW_SGEMM_COL_MAJOR; order++)
			for (int t = 0; t < 4; t++) {
				prob p = {.order = order, .tA = t & 1, .tB = t >> 1, .M = shapes[s][0],
				          .N = shapes[s][1], .K = shapes[s][2]};
				const bool row = order == SW_SGEMM_ROW_MAJOR;
				const int a_cols = row ? (p.tA ? p.M : p.K) : (p.tA ? p.K : p.M);
				const int b_cols = row ? (p.tB ? p.K : p.N) : (p.tB ? p.N : p.K);
				p.lda = a_cols + (int)(s % 3);
				p.ldb = b_cols + (int)(t % 2) * 5;
				p.ldc = (row ? p.N : p.M) + (int)(s % 2) * 3;
				p.alpha = ab[(s + (size_t)t) % 4][0];
				p.beta = ab[(s + (size_t)t) % 4][1];
				check_one(&p, seed++);
				n++;
			}
	assert_int_equal(n, 64);
}

/* C = A B^T row-major (the host backend's call) and its column-major
 * spelling C^T = B A^T: the same bits. */
static void test_orders_bit_identical(void **state)
{
	(void)state;
	const int M = 37, N = 300, K = 290;
	uint64_t seed = 99;
	float *A = malloc(sizeof(*A) * M * K), *W = malloc(sizeof(*W) * N * K);
	float *C1 = malloc(sizeof(*C1) * M * N), *C2 = malloc(sizeof(*C2) * M * N);
	assert_true(A && W && C1 && C2);
	for (int i = 0; i < M * K; i++)
		A[i] = (float)(tu_uniform(&seed) - 0.5);
	for (int i = 0; i < N * K; i++)
		W[i] = (float)(tu_uniform(&seed) - 0.5);
	assert_int_equal(sw_sgemm_portable(SW_SGEMM_ROW_MAJOR, SW_SGEMM_NO_TRANS, SW_SGEMM_TRANS, M, N, K,
	                                   1.0f, A, K, W, K, 0.0f, C1, N), 0);
	/* the same memory column-major: C^T (N x M) = W A^T, where W's memory
	 * read column-major is W^T (K x N, so transposed) and A's is A^T */
	assert_int_equal(sw_sgemm_portable(SW_SGEMM_COL_MAJOR, SW_SGEMM_TRANS, SW_SGEMM_NO_TRANS, N, M, K,
	                                   1.0f, W, K, A, K, 0.0f, C2, N), 0);
	assert_memory_equal(C1, C2, sizeof(*C1) * M * N);
	free(A);
	free(W);
	free(C1);
	free(C2);
}

static void test_bad_args(void **state)
{
	(void)state;
	float A[4] = {1, 2, 3, 4}, B[4] = {1, 1, 1, 1}, C[4] = {9, 9, 9, 9};
	const float C0[4] = {9, 9, 9, 9};
	assert_int_equal(sw_sgemm_portable(SW_SGEMM_ROW_MAJOR, SW_SGEMM_NO_TRANS, SW_SGEMM_NO_TRANS, -1, 2, 2,
	                                   1, A, 2, B, 2, 0, C, 2), -1);
	assert_int_equal(sw_sgemm_portable(SW_SGEMM_ROW_MAJOR, SW_SGEMM_NO_TRANS, SW_SGEMM_NO_TRANS, 2, 2, 2,
	                                   1, A, 1, B, 2, 0, C, 2), -1); /* lda < K */
	assert_int_equal(sw_sgemm_portable(SW_SGEMM_COL_MAJOR, SW_SGEMM_NO_TRANS, SW_SGEMM_NO_TRANS, 2, 2, 2,
	                                   1, A, 2, B, 2, 0, C, 1), -1); /* ldc < M */
	assert_int_equal(sw_sgemm_portable(7, SW_SGEMM_NO_TRANS, SW_SGEMM_NO_TRANS, 2, 2, 2, 1, A, 2, B, 2,
	                                   0, C, 2), -1);
	assert_memory_equal(C, C0, sizeof(C));
	/* K = 0: C = beta C */
	assert_int_equal(sw_sgemm_portable(SW_SGEMM_ROW_MAJOR, SW_SGEMM_NO_TRANS, SW_SGEMM_NO_TRANS, 2, 2, 0,
	                                   1, A, 1, B, 2, 0.5f, C, 2), 0);
	for (int i = 0; i < 4; i++)
		assert_true(C[i] == 4.5f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_orders_bit_identical),
		cmocka_unit_test(test_bad_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
