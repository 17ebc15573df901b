/* The block drafter's input rows, plain C: the specification of
 * templates/block_embed.cu.tmpl (rt_bd_forward's block rows: a token's
 * table row, or a masked position's mask embedding), widened with
 * ref_embedding16. */
#include "ref.h"

int ref_block_embed(float *y, const uint16_t *tok_embd, const uint16_t *mask_embd, int32_t *blk_tok,
                    int32_t root, int32_t *blk_pos, int32_t len, int B, int dim, int n_rows,
                    int is_f16, int first)
{
	int rc = 0;
	if (first) {
		blk_tok[0] = root;
		for (int j = 1; j <= B; j++)
			blk_tok[j] = -1;
	}
	for (int j = 0; j < B; j++) {
		const int32_t t = blk_tok[j], m = j - 1;
		float *row = y + (size_t)j * dim;
		blk_pos[j] = len + j;
		if (j > 0 && t == -1)
			ref_embedding16(row, mask_embd, &m, 1, dim, B - 1, B - 1, is_f16, 1.0f);
		else if (ref_embedding16(row, tok_embd, &t, 1, dim, n_rows, n_rows, is_f16, 1.0f))
			rc = -1;
	}
	return rc;
}
