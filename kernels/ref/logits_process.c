/* Logits processing, plain C: the specification of
 * templates/logits_process.cu.tmpl (temperature, top-k, top-p, softmax;
 * greedy one-hot) and the host decoder's (rt_probs wraps it). The values are
 * arguments here as they are run-time words there (the engine's "sampling"
 * buffer): one engine serves every setting. Sorting is only
 * done when a mask is on, and only over the tokens with nonzero weight.
 * The kernel spreads a row over many blocks and finds the same kept set
 * without sorting; it sums the masses exactly (fixed point, floor(e 2^63))
 * where this sums them in double in sorted order, so a top-p decision can
 * differ only where c / ks lies within ~V 2^-52 of top_p, and 1 / ks by one
 * float rounding (tests/test_kern_logits_process.c derives the bound). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "ref.h"

/* Descending by value, ties by index: a total order, so every backend that
 * follows the same rule keeps the same set at a top-k/top-p boundary (and
 * qsort's result does not depend on its algorithm). */
static _Thread_local const float *g_sort_keys;
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

void ref_sort_desc(int *idx, int n, const float *keys)
{
	g_sort_keys = keys;
	qsort(idx, (size_t)n, sizeof(*idx), cmp_desc);
}

void ref_logits_process_row(float *probs, const float *logits, int V, float temp, int top_k,
                            float top_p, int *idx)
{
	if (!(temp > 0.0f)) { /* NaN too, as the kernel */
		int a = ref_argmax_row(logits, V);
		for (int i = 0; i < V; i++)
			probs[i] = 0.0f;
		probs[a] = 1.0f;
		return;
	}
	float inv_t = 1.0f / temp;
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
	bool need_sort = (top_k > 0 && top_k < V) || (top_p < 1.0f);
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
	ref_sort_desc(idx, n, logits); /* same order as probs, exact ties preserved */
	int keep = n;
	if (top_k > 0 && top_k < keep)
		keep = top_k;
	if (top_p < 1.0f) {
		/* Renormalise over the top-k survivors, then keep token i while the
		 * mass before it is <= top_p (the first token is always kept). */
		double ks = 0;
		for (int r = 0; r < keep; r++)
			ks += probs[idx[r]];
		double c = 0;
		int r;
		for (r = 0; r < keep; r++) {
			if (r > 0 && c / ks > top_p)
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

void ref_logits_process(float *probs, const float *logits, int T, int V, float temp, int top_k,
                        float top_p, int *idx)
{
	for (int t = 0; t < T; t++)
		ref_logits_process_row(probs + (size_t)t * V, logits + (size_t)t * V, V, temp, top_k, top_p,
		                       idx);
}
