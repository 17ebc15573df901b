/* Logits processing and sampling on the host: temperature, top-k, top-p,
 * greedy, inverse-CDF sampling from a uniform, and the speculative residual
 * norm(relu(p - q)). Thin wrappers over the kernels' specification
 * (kernels/ref: ref_argmax_row, ref_logits_process_row, ref_sample_cdf,
 * ref_sample_residual), under the names the host decoder uses. Uniforms come
 * from the caller (Philox, kernels/philox.h); nothing here draws randomness
 * itself. */
#ifndef RT_SAMPLER_H
#define RT_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct rt_sampling {
	float temperature; /* <= 0: greedy */
	int top_k;         /* <= 0: off */
	float top_p;       /* >= 1: off */
} rt_sampling;

static inline bool rt_sampling_greedy(const rt_sampling *s) { return s->temperature <= 0.0f; }

/* First index of the maximum (NaN never wins). */
int rt_argmax(const float *x, int n);

/* probs (V) = softmax(F(logits / T)) with F = top-k mask then top-p mask
 * (ALGORITHMS.txt 1c); greedy: one-hot at argmax. idx: scratch of V ints. */
void rt_probs(float *probs, const float *logits, int V, const rt_sampling *s, int *idx);

/* Inverse CDF over unnormalised non-negative weights w: the first i with
 * cumsum(w)[i] > u * sum(w); u in [0,1). Returns -1 if sum(w) == 0; if
 * rounding leaves nothing selected, the last index with w > 0. */
int rt_sample_cdf(const float *w, int V, double u);

/* Samples from norm(relu(p - q)); q == NULL means one-hot at q_tok (a
 * deterministic draft: p with q_tok removed). Falls back to p when the
 * residual has no mass (p == q up to rounding). */
int rt_sample_residual(const float *p, const float *q, int32_t q_tok, int V, double u, float *tmp);

#endif
