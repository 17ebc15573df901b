/* SwiGLU / GeGLU into the next GEMM's 16-bit input, plain C: the
 * specification of templates/swiglu_cast.cu.tmpl, the unfused ops it
 * replaces run one after another (ref_swiglu or ref_geglu_tanh, ref_cast,
 * and for a gguf_a8 engine ref_quant_a8 of the fp16 rows), gate and up read
 * with the row stride of the GEMM that wrote them. */
#include "ref.h"

int ref_swiglu_cast(uint16_t *y, const float *gate, const float *up, void *a8, int T, int ffn,
                    int ld, int act, int is_f16, float *tmp)
{
	if (T < 0 || ffn < 1 || ld < ffn || act < 0 || act > 1 || (a8 && ffn % REF_A8_QK))
		return REF_EINVAL;
	for (int t = 0; t < T; t++) {
		const size_t o = (size_t)t * ld;
		if (act)
			ref_geglu_tanh(tmp, gate + o, up + o, (size_t)ffn);
		else
			ref_swiglu(tmp, gate + o, up + o, (size_t)ffn);
		ref_cast(y + (size_t)t * ffn, tmp, (size_t)ffn, is_f16 ? 1 : 0);
	}
	return a8 ? ref_quant_a8(a8, y, T, ffn) : 0;
}
