/* y = x @ w^T with w stored (n_out, n_in) as in GGUF/PyTorch Linear: the
 * specification, a plain loop, each element summed in fp32 in i order. The
 * fast paths (CBLAS in runtime/model/gemm.c for the host forward, the host
 * backend's GEMMs in runtime/device) equal it within the fp32 dot-product
 * bound gamma_{n_in+1} sum |x w| (tests/test_ref_matmul.c). */
#include <stddef.h>

#include "ref.h"

void ref_matmul(float *y, const float *x, const float *w, int T, int n_in, int n_out)
{
	for (int t = 0; t < T; t++) {
		const float *xt = x + (size_t)t * (n_in > 0 ? n_in : 0);
		for (int o = 0; o < n_out; o++) {
			const float *wo = w + (size_t)o * (n_in > 0 ? n_in : 0);
			float s = 0.0f;
			for (int i = 0; i < n_in; i++)
				s += xt[i] * wo[i];
			y[(size_t)t * n_out + o] = s;
		}
	}
}
