/* Activation rows to int8 blocks, plain C: the specification of
 * templates/quant_a8.cu.tmpl, the rule of the host's int8 GEMMs
 * (runtime/device/host_gemm.h hg_a8_quant, bias 0) written from its
 * statement, so the GPU's GGUF GEMVs see the int8 inputs the host's see.
 * Not a weight quantizer. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/half.h"
#include "ref.h"

/* Row m's block b (32 fp16 values at a) into q (32 int8), *da, *s. */
static void quant_block(int8_t *q, float *da, int32_t *s, const uint16_t *a)
{
	uint16_t mx = 0;
	float amax = 0.0f;
	for (int t = 0; t < REF_A8_QK; t++) {
		const uint16_t v = a[t] & 0x7fff;
		mx = v > mx ? v : mx;
		const float x = fabsf(sw_f16_to_f32(a[t]));
		amax = x > amax ? x : amax;
	}
	const float d = amax / 127.0f;
	if (mx >= 0x7c00 || !(d >= FLT_MIN)) {
		/* inf or NaN: d NaN (every output it reaches is NaN); a zero
		 * block, or one whose 1 / d would overflow: d 0; q 0 either way */
		*da = mx >= 0x7c00 ? NAN : 0.0f;
		memset(q, 0, REF_A8_QK);
		*s = 0;
		return;
	}
	const float id = 1.0f / d;
	int32_t h[2] = {0, 0};
	for (int t = 0; t < REF_A8_QK; t++) {
		const float v = sw_f16_to_f32(a[t]) * id;
		int qi = (int)rintf(v); /* |v| <= 127.5: round to nearest even */
		qi = qi > 127 ? 127 : qi < -127 ? -127 : qi;
		q[t] = (int8_t)qi;
		h[t / 16] += qi;
	}
	*da = d;
	*s = (int32_t)((uint32_t)(uint16_t)(int16_t)h[0] | (uint32_t)(uint16_t)(int16_t)h[1] << 16);
}

int ref_quant_a8(void *a8, const uint16_t *A, int M, int K)
{
	if (M < 0 || K < 0 || K % REF_A8_QK)
		return REF_EINVAL;
	const int nb = K / REF_A8_QK;
	int8_t *q = a8;
	float *da = (float *)(void *)((char *)a8 + (size_t)M * K);
	int32_t *s = (int32_t *)(void *)(da + (size_t)M * nb);
	for (int m = 0; m < M; m++)
		for (int b = 0; b < nb; b++) {
			const size_t i = (size_t)m * nb + b;
			quant_block(q + i * REF_A8_QK, &da[i], &s[i], A + i * REF_A8_QK);
		}
	return 0;
}
