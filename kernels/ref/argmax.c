/* Row argmax, plain C: the specification of templates/argmax.cu.tmpl, and the
 * argmax every other op and the host decoder use (rt_argmax wraps it). */
#include "ref.h"

int ref_argmax_row(const float *x, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

void ref_argmax(int32_t *out, const float *x, int T, int N)
{
	for (int t = 0; t < T; t++)
		out[t] = ref_argmax_row(x + (size_t)t * N, N);
}
