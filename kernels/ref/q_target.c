/* A mapped draft vocabulary's q over the target's ids, plain C: the
 * specification of templates/q_target.cu.tmpl. A drafter whose head covers
 * Vd draft ids mapped to target ids (d2t; t2d its inverse, -1 off the map)
 * gives q over target id x as q_draft[t2d[x]] where x is mapped, 0
 * elsewhere, so expansion and verification stay over all V target ids
 * (ALGORITHMS.txt 11; runtime/decode/block_decode.c scatter_q). */
#include "ref.h"

int ref_q_target(float *out, const float *q, const int32_t *t2d, int rows, int VD, int V)
{
	if (rows < 1 || VD < 1 || V < VD)
		return REF_EINVAL;
	for (int x = 0; x < V; x++)
		if (t2d[x] < -1 || t2d[x] >= VD)
			return REF_EINVAL;
	for (int r = 0; r < rows; r++)
		for (int x = 0; x < V; x++)
			out[(size_t)r * V + x] = t2d[x] >= 0 ? q[(size_t)r * VD + t2d[x]] : 0.0f;
	return 0;
}
