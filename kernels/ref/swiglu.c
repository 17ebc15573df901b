/* SwiGLU gate: silu(gate) * up, elementwise. Elementwise with no read after
 * write, so y may alias gate or up (the MLP reference relies on that). For
 * very negative gate expf(-x) overflows to inf and silu gives -0, which is
 * the right limit, so no clamp. */
#include <math.h>

#include "ref.h"

void ref_swiglu(float *y, const float *gate, const float *up, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float g = gate[i];
		y[i] = g / (1.0f + expf(-g)) * up[i];
	}
}
