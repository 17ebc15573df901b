/* Random weights, plain C: the specification of templates/fill_random.cu.tmpl
 * (ref.h ref_fill_random). One Philox block per group of four elements, the
 * group index split into the counter's first two words, the buffer in the
 * lane, so every (seed, buffer, element) has its own bits on every backend. */
#include <math.h>

#include "kernels/half.h"
#include "kernels/philox.h"
#include "ref.h"

int ref_fill_random(void *dst, uint64_t n, int mode, uint64_t seed, uint32_t buf, float a, float c)
{
	if (mode != REF_FILL_F32 && mode != REF_FILL_F16 && mode != REF_FILL_BF16)
		return REF_EINVAL;
	for (uint64_t g = 0; g * 4 < n; g++) {
		uint32_t w[4];
		sw_rand_u32x4(seed, (uint32_t)g, (uint32_t)(g >> 32), SW_RNG_FILL, buf, w);
		for (uint64_t j = 0; j < 4 && g * 4 + j < n; j++) {
			const float v = 2.0f * sw_u32_to_uniform(w[j]) - 1.0f; /* exact */
			const float x = fmaf(a, v, c);
			const uint64_t e = g * 4 + j;
			if (mode == REF_FILL_F32)
				((float *)dst)[e] = x;
			else
				((uint16_t *)dst)[e] = sw_f32_to_half(x, mode == REF_FILL_F16);
		}
	}
	return 0;
}
