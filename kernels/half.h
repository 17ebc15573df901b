/* fp32 <-> fp16 and fp32 <-> bf16 on the host: the one implementation every
 * host-side conversion uses (the GGUF reader and writer, kernels/ref, the
 * host backend) and that the SIMT emulator's F32_TO_F16 & co.
 * (kernels/prelude_emu.h) build on. Plain C11, static inline, no state.
 *
 * To 16 bits: round to nearest, ties to even (F16C's _cvtss_sh(x, 0), which
 * ggml uses; ggml_compute_fp32_to_bf16), overflow to +-inf, fp16 subnormals
 * rounded the same way. NaN stays NaN, quiet, with its sign: fp16 sign|0x7e00,
 * bf16 the top 16 bits with the quiet bit (0x40) set. The GPU's cvt.rn
 * writes the canonical 0x7fff for every NaN instead; the emulator applies
 * that on top (prelude_emu.h), so the two differ only in NaN payloads.
 * To 32 bits: exact (every fp16 and bf16 value is an fp32 value); NaN and inf
 * keep sign and payload (fp16 mantissa << 13).
 *
 * sw_f32_to_f16's subnormal branch uses rintf, i.e. the current rounding
 * mode, which is round-to-nearest-even unless a caller changed it (nothing
 * in specwright does). Link with -lm. */
#ifndef SW_HALF_H
#define SW_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float sw_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
	if (e == 0) {
		if (m == 0) {
			u = sign;
		} else { /* subnormal: renormalise, exact in fp32 */
			e = 127 - 15 + 1;
			while (!(m & 0x400)) {
				m <<= 1;
				e--;
			}
			u = sign | e << 23 | (m & 0x3ff) << 13;
		}
	} else if (e == 31) {
		u = sign | 0x7f800000 | m << 13;
	} else {
		u = sign | (e + 127 - 15) << 23 | m << 13;
	}
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint16_t sw_f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t ax = x & 0x7fffffff;
	if (ax > 0x7f800000)
		return sign | 0x7e00; /* quiet NaN */
	if (ax >= 0x47800000) /* >= 65536: inf (65520..65536 rounds up below) */
		return sign | 0x7c00;
	if (ax < 0x38800000) { /* below 2^-14: half subnormal (or zero) */
		float a;
		memcpy(&a, &ax, sizeof(a));
		/* a * 2^24 is exact; rint rounds half to even; 1024 lands on
		 * the smallest normal's encoding, which is correct. */
		return sign | (uint16_t)rintf(a * 0x1p24f);
	}
	uint32_t u = ax - ((uint32_t)(127 - 15) << 23);
	u += 0xfff + ((u >> 13) & 1);
	return sign | (uint16_t)(u >> 13); /* a carry into exponent 31 gives inf */
}

static inline float sw_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint16_t sw_f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 64); /* quiet NaN */
	return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

/* The 16-bit dtype as a flag, as kernels/ref and the templates take it:
 * is_f16 1 fp16, 0 bf16. */
static inline float sw_half_to_f32(uint16_t h, int is_f16)
{
	return is_f16 ? sw_f16_to_f32(h) : sw_bf16_to_f32(h);
}

static inline uint16_t sw_f32_to_half(float f, int is_f16)
{
	return is_f16 ? sw_f32_to_f16(f) : sw_f32_to_bf16(f);
}

#endif
