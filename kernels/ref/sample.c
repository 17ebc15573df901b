/* The sampling primitives the verify and tree_expand specifications share
 * (their kernels' _cdf helpers mirror ref_sample_cdf), and the host decoder
 * with them (rt_sample_cdf, rt_sample_residual wrap these). Not an op of its
 * own: no template. */
#include "ref.h"

int ref_sample_cdf(const float *w, int V, double u)
{
	double sum = 0;
	int last = -1;
	for (int i = 0; i < V; i++)
		if (w[i] > 0.0f) {
			sum += w[i];
			last = i;
		}
	if (last < 0)
		return -1;
	double target = u * sum, c = 0;
	for (int i = 0; i <= last; i++) {
		c += w[i];
		if (c > target && w[i] > 0.0f)
			return i;
	}
	return last;
}

int ref_sample_residual(const float *p, const float *q, int32_t q_tok, int V, double u, float *tmp)
{
	for (int i = 0; i < V; i++) {
		float d = p[i] - (q ? q[i] : (i == q_tok ? 1.0f : 0.0f));
		tmp[i] = d > 0.0f ? d : 0.0f;
	}
	int t = ref_sample_cdf(tmp, V, u);
	return t >= 0 ? t : ref_sample_cdf(p, V, u);
}
