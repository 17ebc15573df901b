/* Host row ops (host_rowops.c): SwiGLU and the residual RMSNorm, the two
 * element-wise/row-wise ops of a transformer layer whose cost grows with a
 * verify's rows, for the host backend's native op table (host_ops.c).
 *
 * hr_swiglu: y = g / (1 + exp(-g)) * u, kernels/ref ref_swiglu's operations
 * in its order, with host_exp.h's exp in place of libm's expf (within 2 ulp
 * of it: tests/test_host_ops.c derives the bound on y); portable, AVX2 and
 * AVX-512 give the same bits for any n and any element position (y may be
 * gate or up, element for element); a NaN result is the default quiet NaN.
 *
 * hr_rmsnorm_residual: kernels/ref ref_rmsnorm_residual bit for bit (s = x +
 * r, the sequential double sum of squares, the scale rounded to fp32, y =
 * s * scale * w), several rows' sums at once as independent chains (AVX2:
 * 8 rows, 4 in each of two double vectors; portable: 4 rows unrolled), so
 * a verify's rows cost about one row's latency.
 *
 * hr_rope_rotate: ref_rope's rotation of one position's H heads (the first
 * 2 half values of each hd), given the angles' cos c[i] and sin s[i]: x0 c
 * - x1 s and x0 s + x1 c in double, each rounded to fp32, bit for bit (AVX2:
 * four pairs a step, the same IEEE operations).
 *
 * hr_softmax_temp: ref_logits_process_row at temperature temp > 0 without
 * top-k / top-p (the sampling engines' target_probs): the max (NaN
 * skipped), e = exp((l - max) * (1 / temp)) by host_exp.h's exp (within 2
 * ulp of expf), their double sum in 16 lanes (element i into lane i mod
 * 16, the lanes then added in order, where ref adds in element order), p =
 * e * (float)(1 / sum); portable, AVX2 and AVX-512 give the same bits.
 * (hr_logits_truncate below: with top-k / top-p.) */
#ifndef SW_HOST_ROWOPS_H
#define SW_HOST_ROWOPS_H

#include <stddef.h>

/* path: an hg_path (host_gemm.h); HG_PATH_AUTO picks the CPU's best */
void hr_swiglu(float *y, const float *gate, const float *up, size_t n, int path);
void hr_rmsnorm_residual(float *y, float *s, const float *x, const float *r, const float *w, int T,
                         int dim, float eps, int path);
void hr_rope_rotate(float *x, int H, int hd, int half, const double *c, const double *s, int path);
void hr_softmax_temp(float *probs, const float *logits, size_t n, float temp, int path);
/* hr_logits_truncate: ref_logits_process_row with top-k (0 < top_k < the
 * tokens of positive weight) or top-p (< 1): the e and their sum as
 * hr_softmax_temp's, then ref's rule (the tokens by logit descending, ties
 * by index; keep the first top_k; over those, keep token r while the mass
 * before it over theirs is <= top_p; p = e / the kept mass, 0 for the rest),
 * sorting only the prefix {e >= tau} (tau = 2^-4, 2^-8, ..: every token
 * with e >= tau precedes every other in that order) that holds the kept
 * tokens, where ref sorts every token of positive weight. Without top-k
 * the mass top-p compares against is the 16-lane sum (ref's: the sum in
 * sorted order). idx: n ints of scratch; returns the tokens kept. */
int hr_logits_truncate(float *probs, const float *logits, int n, float temp, int top_k,
                       float top_p, int *idx, int path);

#endif
