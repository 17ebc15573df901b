/* Host sampler: see sampler.h. Sorting is only done for top-p, and only over
 * the tokens that survive top-k (or all of them when top-k is off). */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

int rt_argmax(const float *x, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/* Descending by value, ties by index: a total order, so every backend that
 * follows the same rule keeps the same set at a top-k/top-p boundary. */
static const float *g_sort_keys;
static int cmp_desc(const void *a, const void *b)
{
	int i = *(const int *)a, j = *(const int *)b;
	float x = g_sort_keys[i], y = g_sort_keys[j];
	if (x > y)
		return -1;
	if (x < y)
		return 1;
	return (i > j) - (i < j);
}

void rt_probs(float *probs, const float *logits, int V, const rt_sampling *s, int *idx)
{
	if (rt_sampling_greedy(s)) {
		int a = rt_argmax(logits, V);
		for (int i = 0; i < V; i++)
			probs[i] = 0.0f;
		probs[a] = 1.0f;
		return;
	}
	float inv_t = 1.0f / s->temperature;
	float mx = -INFINITY;
	for (int i = 0; i < V; i++)
		if (logits[i] > mx)
			mx = logits[i];
	/* z = (logit - max) / T; exp later. Masked tokens get probability 0. */
	double sum = 0;
	for (int i = 0; i < V; i++) {
		float e = expf((logits[i] - mx) * inv_t);
		probs[i] = e;
		sum += e;
	}
	bool need_sort = (s->top_k > 0 && s->top_k < V) || (s->top_p < 1.0f);
	if (!need_sort) {
		float r = (float)(1.0 / sum);
		for (int i = 0; i < V; i++)
			probs[i] *= r;
		return;
	}
	int n = 0;
	for (int i = 0; i < V; i++)
		if (probs[i] > 0.0f)
			idx[n++] = i;
	g_sort_keys = logits; /* same order as probs, exact ties preserved */
	qsort(idx, (size_t)n, sizeof(*idx), cmp_desc);
	int keep = n;
	if (s->top_k > 0 && s->top_k < keep)
		keep = s->top_k;
	if (s->top_p < 1.0f) {
		/* Renormalise over the top-k survivors, then keep token i while the
		 * mass before it is <= top_p (the first token is always kept). */
		double ks = 0;
		for (int r = 0; r < keep; r++)
			ks += probs[idx[r]];
		double c = 0;
		int r;
		for (r = 0; r < keep; r++) {
			if (r > 0 && c / ks > s->top_p)
				break;
			c += probs[idx[r]];
		}
		keep = r;
	}
	double ks = 0;
	for (int r = 0; r < keep; r++)
		ks += probs[idx[r]];
	for (int r = keep; r < n; r++)
		probs[idx[r]] = 0.0f;
	float inv = (float)(1.0 / ks);
	for (int r = 0; r < keep; r++)
		probs[idx[r]] *= inv;
}

int rt_sample_cdf(const float *w, int V, double u)
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

int rt_sample_residual(const float *p, const float *q, int32_t q_tok, int V, double u, float *tmp)
{
	for (int i = 0; i < V; i++) {
		float d = p[i] - (q ? q[i] : (i == q_tok ? 1.0f : 0.0f));
		tmp[i] = d > 0.0f ? d : 0.0f;
	}
	int t = rt_sample_cdf(tmp, V, u);
	return t >= 0 ? t : rt_sample_cdf(p, V, u);
}
