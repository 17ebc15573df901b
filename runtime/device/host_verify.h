/* The host backend's greedy tree verification (host_verify.c): the native
 * verify op's METHOD greedy, kernels/ref's ref_verify_q with the
 * full-vocabulary argmax vectorised (host_argmax.h). */
#ifndef RT_HOST_VERIFY_H
#define RT_HOST_VERIFY_H

#include <stdint.h>

/* ref_verify_q(out_path, out_tok, counts, tree, tok, p, q, scratch, seed,
 * iter, n_nodes, V, Vq, REF_VERIFY_GREEDY, q_by_depth, why) exactly: the
 * same checks and refusals (REF_EINVAL, *why, outputs untouched), the same
 * path, tokens and counts; greedy reads neither q's values, the scratch,
 * the seed nor q_by_depth. path: enum hg_path (host_gemm.h) of the argmax. */
int hv_verify_greedy(int32_t *out_path, int32_t *out_tok, int32_t *counts, const int32_t *tree,
                     const int32_t *tok, const float *p, const float *q, int n_nodes, int V,
                     int Vq, int path, const char **why);

#endif
