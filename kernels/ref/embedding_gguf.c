/* The token embedding gathered from a GGUF-typed table in its planes, plain
 * C: the specification of templates/embedding_gguf.cu.tmpl. A row is
 * dequantized by ref_wplanes_dequant_row (the format table's operation
 * order, runtime/core/wformat.c, so the file's values bit for bit), then
 * times the family's scale (one fp32 multiply; 1: none), as the host
 * decoder embeds (runtime/model rt_tf_embed: the row, then the scale). The
 * id rules are ref_embedding16's. */
#include <string.h>

#include "ref.h"

int ref_embedding_gguf(float *y, const void *W, const int32_t *tok, int T, int dim, int n_rows,
                       int n_ids, int wtype, float scale)
{
	int64_t off[REF_WPLANES];
	if (T < 0 || dim < 1 || n_rows < 1 || n_ids < n_rows ||
	    ref_wplanes_layout(wtype, n_rows, dim, off))
		return REF_EINVAL;
	int bad = 0;
	for (int t = 0; t < T; t++) {
		float *dst = y + (size_t)t * dim;
		if (tok[t] < 0 || tok[t] >= n_ids) {
			bad = 1;
			continue;
		}
		if (tok[t] >= n_rows) {
			memset(dst, 0, (size_t)dim * sizeof(*dst));
			continue;
		}
		(void)ref_wplanes_dequant_row(dst, W, wtype, n_rows, dim, tok[t]);
		if (scale != 1.0f)
			for (int i = 0; i < dim; i++)
				dst[i] *= scale;
	}
	return bad;
}
