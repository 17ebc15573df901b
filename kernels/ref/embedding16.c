/* The table gather that starts an engine's forward, plain C: the
 * specification of templates/embedding16.cu.tmpl. The 16-bit table is
 * widened with kernels/half.h, bit-exact with the preludes' BF16_TO_F32 /
 * F16_TO_F32 (NaN included); the scale is one fp32 multiply (1: none, NaN bits kept). */
#include <string.h>

#include "kernels/half.h"
#include "ref.h"

int ref_embedding16(float *y, const uint16_t *table, const int32_t *tok, int T, int dim, int n_rows,
                    int n_ids, int is_f16, float scale)
{
	int rc = 0;
	for (int t = 0; t < T; t++) {
		if (tok[t] < 0 || tok[t] >= n_ids) {
			rc = -1;
			continue;
		}
		float *dst = y + (size_t)t * dim;
		if (tok[t] >= n_rows) {
			memset(dst, 0, (size_t)dim * sizeof(*dst));
			continue;
		}
		const uint16_t *src = table + (size_t)tok[t] * dim;
		for (int i = 0; i < dim; i++)
			dst[i] = scale != 1.0f ? sw_half_to_f32(src[i], is_f16) * scale
			                       : sw_half_to_f32(src[i], is_f16);
	}
	return rc;
}
