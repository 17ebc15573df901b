/* A small portable single-precision GEMM (sgemm_portable.c) for the
 * portable runtime kit (`make portable`), which ships without OpenBLAS: the
 * CBLAS sgemm contract (either order, either transpose, alpha, beta),
 * blocked and run on the host thread pool. Built with -DSW_PORTABLE_BLAS
 * the same file also defines cblas_sgemm itself; the normal build links
 * OpenBLAS and calls this only from tests. Not a tuned BLAS: a plain
 * 6 x 16 register tile at about half of OpenBLAS's speed on large shapes. */
#ifndef RT_SGEMM_PORTABLE_H
#define RT_SGEMM_PORTABLE_H

enum { SW_SGEMM_ROW_MAJOR = 101, SW_SGEMM_COL_MAJOR = 102 }; /* CBLAS's values */
enum { SW_SGEMM_NO_TRANS = 111, SW_SGEMM_TRANS = 112 };

/* C = alpha op(A) op(B) + beta C, op(A) M x K, op(B) K x N, in order
 * `order`. Every element of C is summed in k order, one product at a time
 * (c = beta c, then c += (alpha a_ik) b_kj for k = 0 .. K-1, no fused
 * multiply-add), whatever the blocking, the thread count or the order: a
 * column-major call and its row-major transpose give the same bits when
 * alpha is 1. beta 0 overwrites C (NaNs in C do not survive). Arguments
 * out of CBLAS's domain (negative sizes, a short leading dimension) leave
 * C untouched and return -1; otherwise 0. */
int sw_sgemm_portable(int order, int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc);

#endif
