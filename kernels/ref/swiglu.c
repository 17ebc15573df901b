/* SwiGLU gate: silu(gate) * up, elementwise; GeGLU (Gemma): gelu_tanh(gate)
 * * up. Elementwise with no read after
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

void ref_geglu_tanh(float *y, const float *gate, const float *up, size_t n)
{
	const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
	for (size_t i = 0; i < n; i++) {
		const float g = gate[i];
		y[i] = 0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g))) * up[i];
	}
}
