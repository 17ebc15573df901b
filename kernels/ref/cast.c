/* Dtype casts, plain C: the specification of templates/cast.cu.tmpl, with
 * kernels/half.h's conversions (the kernel's for every non-NaN value; the
 * GPU writes 0x7fff for a NaN, this keeps a quiet NaN). */
#include "kernels/half.h"
#include "ref.h"

int ref_cast(void *dst, const void *src, size_t n, int mode)
{
	if (mode < 0 || mode > 3)
		return REF_EINVAL;
	if (mode <= 1) {
		const float *x = src;
		uint16_t *y = dst;
		for (size_t i = 0; i < n; i++)
			y[i] = sw_f32_to_half(x[i], mode == 1);
	} else {
		const uint16_t *x = src;
		float *y = dst;
		for (size_t i = 0; i < n; i++)
			y[i] = sw_half_to_f32(x[i], mode == 3);
	}
	return 0;
}
