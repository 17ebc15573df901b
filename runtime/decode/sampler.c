/* Host sampler: see sampler.h. The specification lives in kernels/ref
 * (argmax.c, logits_process.c, sample.c); these are its host-decoder names. */
#include "sampler.h"

#include "kernels/ref/ref.h"

int rt_argmax(const float *x, int n)
{
	return ref_argmax_row(x, n);
}

void rt_probs(float *probs, const float *logits, int V, const rt_sampling *s, int *idx)
{
	ref_logits_process_row(probs, logits, V, s->temperature, s->top_k, s->top_p, idx);
}

int rt_sample_cdf(const float *w, int V, double u)
{
	return ref_sample_cdf(w, V, u);
}

int rt_sample_residual(const float *p, const float *q, int32_t q_tok, int V, double u, float *tmp)
{
	return ref_sample_residual(p, q, q_tok, V, u, tmp);
}
