/* A tapped layer's output into the block drafter's feature rows, plain C:
 * the specification of templates/feature_tap.cu.tmpl (one fp32 add per
 * element, ref_add). */
#include "ref.h"

void ref_feature_tap(float *taps, const float *h, const float *delta, int rows, int dim, int n_taps,
                     int slot)
{
	for (int r = 0; r < rows; r++)
		ref_add(taps + ((size_t)r * n_taps + slot) * dim, h + (size_t)r * dim,
		        delta + (size_t)r * dim, (size_t)dim);
}
