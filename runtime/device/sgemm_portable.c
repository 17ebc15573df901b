/* The portable sgemm (sgemm_portable.h): C is cut into MC x NC tiles, the
 * tiles shared out to the host thread pool; per tile and per KC-deep slice
 * of k, alpha op(A) and op(B) are packed into MR-row and NR-column strips
 * and a 6 x 16 register tile (GCC vector extensions: AVX2 under
 * -march=x86-64-v3, SSE pairs without) adds one product per k. The sums
 * keep k order and never fuse (-std=c11 keeps -ffp-contract=off), which
 * is what makes every layout and thread count give the same bits. */
#include <stdlib.h>
#include <string.h>

#include "host_pool.h"
#include "sgemm_portable.h"

#define MR 6    /* rows of the register tile */
#define NR 16   /* columns of the register tile (two 8-float vectors) */
#define KC 256  /* k per packed slice: a 6 x 256 A strip and 256 x 16 B strip stay in L1 */
#define MC 96   /* rows per tile (a multiple of MR) */
#define NC 256  /* columns per tile (a multiple of NR): the packed B slice is 256 KB */

/* v8 passes by value only between this file's static functions (no ABI
 * boundary): a build without AVX (the fuzz build) need not warn about it */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8 __attribute__((vector_size(32)));

static inline v8 ld8(const float *p)
{
	v8 v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void st8(float *p, v8 v)
{
	memcpy(p, &v, sizeof(v));
}

typedef struct sg_job {
	int tA, tB, M, N, K;
	float alpha, beta;
	const float *A, *B;
	int lda, ldb, ldc;
	float *C;
	int tiles_m, tiles_n;
} sg_job;

/* c (MR x NR, row stride ldc) += ap (kc x MR) times bp (kc x NR). */
static void micro(int kc, const float *ap, const float *bp, float *c, int ldc)
{
	v8 c0[MR], c1[MR];
	for (int r = 0; r < MR; r++) {
		c0[r] = ld8(c + (size_t)r * ldc);
		c1[r] = ld8(c + (size_t)r * ldc + 8);
	}
	for (int p = 0; p < kc; p++) {
		const v8 b0 = ld8(bp + (size_t)p * NR), b1 = ld8(bp + (size_t)p * NR + 8);
		for (int r = 0; r < MR; r++) {
			const float a = ap[(size_t)p * MR + r];
			c0[r] = c0[r] + a * b0;
			c1[r] = c1[r] + a * b1;
		}
	}
	for (int r = 0; r < MR; r++) {
		st8(c + (size_t)r * ldc, c0[r]);
		st8(c + (size_t)r * ldc + 8, c1[r]);
	}
}

/* alpha op(A)[i0 .. i0+mc, p0 .. p0+kc] into strips of MR rows, zero padded. */
static void pack_a(const sg_job *j, int i0, int mc, int p0, int kc, float *ap)
{
	for (int s = 0; s < mc; s += MR, ap += (size_t)MR * kc)
		for (int p = 0; p < kc; p++)
			for (int r = 0; r < MR; r++) {
				const int i = i0 + s + r, k = p0 + p;
				float v = 0.0f;
				if (s + r < mc)
					v = j->alpha * (j->tA ? j->A[(size_t)k * j->lda + i] : j->A[(size_t)i * j->lda + k]);
				ap[(size_t)p * MR + r] = v;
			}
}

/* op(B)[p0 .. p0+kc, c0 .. c0+nc] into strips of NR columns, zero padded. */
static void pack_b(const sg_job *j, int p0, int kc, int c0, int nc, float *bp)
{
	for (int s = 0; s < nc; s += NR, bp += (size_t)NR * kc)
		for (int p = 0; p < kc; p++)
			for (int c = 0; c < NR; c++) {
				const int col = c0 + s + c, k = p0 + p;
				float v = 0.0f;
				if (s + c < nc)
					v = j->tB ? j->B[(size_t)col * j->ldb + k] : j->B[(size_t)k * j->ldb + col];
				bp[(size_t)p * NR + c] = v;
			}
}

static void run_tile(const sg_job *j, int t, float *ap, float *bp)
{
	const int i0 = (t / j->tiles_n) * MC, c0 = (t % j->tiles_n) * NC;
	const int mc = j->M - i0 < MC ? j->M - i0 : MC, nc = j->N - c0 < NC ? j->N - c0 : NC;
	for (int i = 0; i < mc; i++) {
		float *c = j->C + (size_t)(i0 + i) * j->ldc + c0;
		if (j->beta == 0.0f)
			memset(c, 0, sizeof(*c) * (size_t)nc);
		else if (j->beta != 1.0f)
			for (int x = 0; x < nc; x++)
				c[x] = j->beta * c[x];
	}
	if (j->K == 0 || j->alpha == 0.0f)
		return;
	float edge[MR * NR];
	for (int p0 = 0; p0 < j->K; p0 += KC) {
		const int kc = j->K - p0 < KC ? j->K - p0 : KC;
		pack_a(j, i0, mc, p0, kc, ap);
		pack_b(j, p0, kc, c0, nc, bp);
		for (int s = 0; s < mc; s += MR)
			for (int q = 0; q < nc; q += NR) {
				const int mr = mc - s < MR ? mc - s : MR, nr = nc - q < NR ? nc - q : NR;
				float *c = j->C + (size_t)(i0 + s) * j->ldc + c0 + q;
				const float *as = ap + (size_t)s * kc, *bs = bp + (size_t)q * kc;
				if (mr == MR && nr == NR) {
					micro(kc, as, bs, c, j->ldc);
					continue;
				}
				/* an edge: through a full tile, the padding's sums discarded */
				memset(edge, 0, sizeof(edge));
				for (int r = 0; r < mr; r++)
					memcpy(edge + r * NR, c + (size_t)r * j->ldc, sizeof(float) * (size_t)nr);
				micro(kc, as, bs, edge, NR);
				for (int r = 0; r < mr; r++)
					memcpy(c + (size_t)r * j->ldc, edge + r * NR, sizeof(float) * (size_t)nr);
			}
	}
}

static void run_part(void *ctx, int part, int n_parts)
{
	const sg_job *j = ctx;
	float *ap = malloc(sizeof(*ap) * (size_t)MC * KC), *bp = malloc(sizeof(*bp) * (size_t)KC * NC);
	const int n_tiles = j->tiles_m * j->tiles_n;
	/* no memory, no sums: the caller cannot be told from inside a part, so
	 * C is poisoned rather than left plausible */
	for (int t = part; t < n_tiles; t += n_parts)
		if (ap && bp)
			run_tile(j, t, ap, bp);
		else
			for (int i = (t / j->tiles_n) * MC; i < j->M && i < (t / j->tiles_n + 1) * MC; i++)
				for (int c = (t % j->tiles_n) * NC; c < j->N && c < (t % j->tiles_n + 1) * NC; c++)
					j->C[(size_t)i * j->ldc + c] = __builtin_nanf("");
	free(ap);
	free(bp);
}

static int row_major(int tA, int tB, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc)
{
	if (M < 0 || N < 0 || K < 0)
		return -1;
	const int a_cols = tA ? M : K, b_cols = tB ? K : N;
	if (lda < (a_cols > 1 ? a_cols : 1) || ldb < (b_cols > 1 ? b_cols : 1) || ldc < (N > 1 ? N : 1))
		return -1;
	if (M == 0 || N == 0)
		return 0;
	sg_job j = {.tA = tA, .tB = tB, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta,
	            .A = A, .B = B, .lda = lda, .ldb = ldb, .ldc = ldc, .C = C,
	            .tiles_m = (M + MC - 1) / MC, .tiles_n = (N + NC - 1) / NC};
	const int n_tiles = j.tiles_m * j.tiles_n;
	/* a part's packing costs about one pass over its operands: below ~1
	 * Mflop a thread's wake-up costs more than it saves */
	int parts = (double)M * N * K < 1e6 ? 1 : hp_threads();
	if (parts > n_tiles)
		parts = n_tiles;
	hp_run(run_part, &j, parts);
	return 0;
}

int sw_sgemm_portable(int order, int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc)
{
	if ((order != SW_SGEMM_ROW_MAJOR && order != SW_SGEMM_COL_MAJOR) ||
	    (trans_a != SW_SGEMM_NO_TRANS && trans_a != SW_SGEMM_TRANS) ||
	    (trans_b != SW_SGEMM_NO_TRANS && trans_b != SW_SGEMM_TRANS))
		return -1;
	const int tA = trans_a == SW_SGEMM_TRANS, tB = trans_b == SW_SGEMM_TRANS;
	if (order == SW_SGEMM_ROW_MAJOR)
		return row_major(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	/* column-major C (M x N) is row-major C^T (N x M) = op(B)^T op(A)^T */
	return row_major(tB, tA, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc);
}

#ifdef SW_PORTABLE_BLAS
/* The portable kit's BLAS: the one CBLAS entry the code calls (grep
 * cblas_: kernels/ref/matmul.c, runtime/device/dev_host.c,
 * runtime/decode/acchead_train.c, and the fake cuBLASLt of the tests). */
#include <cblas.h>

void cblas_sgemm(const enum CBLAS_ORDER Order, const enum CBLAS_TRANSPOSE TransA,
                 const enum CBLAS_TRANSPOSE TransB, const blasint M, const blasint N,
                 const blasint K, const float alpha, const float *A, const blasint lda,
                 const float *B, const blasint ldb, const float beta, float *C, const blasint ldc)
{
	/* CBLAS reports a bad argument through xerbla and returns; so does this */
	(void)sw_sgemm_portable((int)Order, (int)TransA, (int)TransB, (int)M, (int)N, (int)K, alpha,
	                        A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}
#endif
