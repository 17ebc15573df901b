/* RMSNorm over the last axis. The sum of squares is accumulated in double:
 * it costs nothing at these sizes and makes the reference the more exact
 * side of any comparison (ggml does the same). y may alias x. */
#include <math.h>

#include "ref.h"

void ref_rmsnorm(float *y, const float *x, const float *w, int T, int dim, float eps)
{
	for (int t = 0; t < T; t++) {
		const float *xr = x + (size_t)t * dim;
		float *yr = y + (size_t)t * dim;
		double ss = 0.0;

		for (int i = 0; i < dim; i++)
			ss += (double)xr[i] * xr[i];
		/* The scale is rounded to fp32 once, as a kernel would hold it. */
		float r = (float)(1.0 / sqrt(ss / dim + (double)eps));
		for (int i = 0; i < dim; i++)
			yr[i] = xr[i] * r * w[i];
	}
}
