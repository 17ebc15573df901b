/* Llama MLP: down(silu(gate(x)) * up(x)), three GEMMs and one elementwise
 * gate. scratch holds gate then up activations (2*T*ffn floats); the SwiGLU
 * result overwrites the gate half in place. */
#include "ref.h"

void ref_mlp_swiglu(float *out, const float *x, const float *w_gate, const float *w_up,
                    const float *w_down, int T, int dim, int ffn, float *scratch)
{
	float *g = scratch;                    /* (T, ffn) */
	float *u = scratch + (size_t)T * ffn;  /* (T, ffn) */

	ref_matmul(g, x, w_gate, T, dim, ffn);
	ref_matmul(u, x, w_up, T, dim, ffn);
	ref_swiglu(g, g, u, (size_t)T * ffn);
	ref_matmul(out, g, w_down, T, ffn, dim);
}
