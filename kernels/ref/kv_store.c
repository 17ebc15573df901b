/* The store of new K/V rows into a 16-bit cache, plain C: the specification
 * of templates/kv_store.cu.tmpl. Conversions are kernels/half.h's, bit-exact
 * with the preludes' for every non-NaN value (NaN payloads differ: see
 * tests/test_ops.c). */
#include "kernels/half.h"
#include "ref.h"

void ref_kv_store(uint16_t *kc, uint16_t *vc, const float *k, const float *v, int len, int rows,
                  int kvd, int row0, int max_ctx, int is_f16)
{
	for (int r = 0; r < rows; r++) {
		if (len + row0 + r >= max_ctx)
			break; /* past the cache: every later row is too */
		for (int c = 0; c < kvd; c++) {
			size_t s = (size_t)r * kvd + c, d = ((size_t)len + r) * kvd + c;
			kc[d] = sw_f32_to_half(k[s], is_f16);
			vc[d] = sw_f32_to_half(v[s], is_f16);
		}
	}
}
