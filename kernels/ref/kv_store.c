/* The 16-bit storage ops of an engine, plain C: the table gather that starts
 * a forward (ref_embedding16) and the store of new K/V rows into a cache
 * (ref_kv_store). The specification of templates/embedding16.cu.tmpl and
 * templates/kv_store.cu.tmpl; conversions are runtime/gguf.h's, bit-exact
 * with the preludes' for every non-NaN value (NaN payloads differ: see
 * tests/test_kern_kv_store.c). */
#include "formats/gguf.h"
#include "ref.h"

int ref_embedding16(float *y, const uint16_t *table, const int32_t *tok, int T, int dim, int n_rows,
                    int is_f16)
{
	int rc = 0;
	for (int t = 0; t < T; t++) {
		if (tok[t] < 0 || tok[t] >= n_rows) {
			rc = -1;
			continue;
		}
		const uint16_t *src = table + (size_t)tok[t] * dim;
		float *dst = y + (size_t)t * dim;
		for (int i = 0; i < dim; i++)
			dst[i] = is_f16 ? gguf_f16_to_f32(src[i]) : gguf_bf16_to_f32(src[i]);
	}
	return rc;
}

void ref_kv_store(uint16_t *kc, uint16_t *vc, const float *k, const float *v, int len, int rows,
                  int kvd, int row0, int max_ctx, int is_f16)
{
	for (int r = 0; r < rows; r++) {
		if (len + row0 + r >= max_ctx)
			break; /* past the cache: every later row is too */
		for (int c = 0; c < kvd; c++) {
			size_t s = (size_t)r * kvd + c, d = ((size_t)len + r) * kvd + c;
			kc[d] = is_f16 ? gguf_f32_to_f16(k[s]) : gguf_f32_to_bf16(k[s]);
			vc[d] = is_f16 ? gguf_f32_to_f16(v[s]) : gguf_f32_to_bf16(v[s]);
		}
	}
}
