/* The host backend's full-vocabulary argmax (host_argmax.c): kernels/ref
 * argmax's rule, ref_argmax_row, on AVX-512 or AVX2 where the CPU has them.
 * Used by the native host ops that scan a whole logits or probability row
 * every decode step (argmax, logits_process's greedy one-hot). */
#ifndef RT_HOST_ARGMAX_H
#define RT_HOST_ARGMAX_H

/* The first index of the largest of x[0 .. n) by ref_argmax_row's rule
 * (x[i] > x[best]: NaNs never win, x[0] NaN keeps 0, -0 == +0, ties to the
 * lower index), on path (host_gemm.h enum hg_path; AUTO the best the CPU
 * has). Every path returns ref_argmax_row's index; n < 1 returns 0.
 * path unavailable: the portable one. */
int hg_argmax_row(const float *x, int n, int path);

#endif
