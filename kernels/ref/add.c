/* Elementwise add (residual connections). y may alias a or b. */
#include "ref.h"

void ref_add(float *y, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = a[i] + b[i];
}
