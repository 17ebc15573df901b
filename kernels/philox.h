/* Philox-4x32-10 counter-based RNG (Salmon et al., SC'11; Random123) and the
 * keyed draws every backend takes from it. Header-only, in the common subset
 * of C11 and CUDA C++ (no libc, plain integer arithmetic), so host code, the
 * SIMT emulator and NVRTC kernels produce the same bits. Not a general PRNG
 * library: one block function plus the stream layout specwright uses.
 *
 * Stream layout (the CUDA kernels must reproduce it bit for bit):
 *   key = { (uint32_t)seed, (uint32_t)(seed >> 32) }
 *   ctr = { iteration, position, purpose, lane }
 *   out = philox4x32_10(ctr, key), four uint32 words
 * iteration: draft-verify iteration index; position: tree node (or vocab
 * slot, or draw index) the number belongs to; purpose: an sw_rng_purpose, so
 * that two uses at the same (iteration, position) never share bits; lane:
 * extra words when one (iteration, position, purpose) needs more than four.
 * sw_uniform / sw_uniform_double take lane 0: word 0 (float) or words 0 and
 * 1 (double). Do not draw both from the same triple; they share word 0.
 *
 * Under NVRTC, include this after the prelude, which must provide uint32_t and
 * uint64_t (NVRTC has no <stdint.h> by default). */
#ifndef SW_PHILOX_H
#define SW_PHILOX_H

#if !defined(__CUDACC_RTC__)
#include <stdint.h>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SW_PHILOX_FN static inline __host__ __device__
#else
#define SW_PHILOX_FN static inline
#endif

/* What a random number is for; the value is the third counter word. Values
 * are part of the stream definition: append, never renumber. 0 is unused so
 * that an all-zero counter never appears in practice. */
enum sw_rng_purpose {
	SW_RNG_DRAFT_SAMPLE = 1,  /* sampling a draft token at a tree node */
	SW_RNG_ACCEPT = 2,        /* the accept/reject coin of a verification step */
	SW_RNG_RESIDUAL = 3,      /* sampling from a residual distribution */
	SW_RNG_BONUS = 4,         /* the bonus token after a fully accepted path */
	SW_RNG_TARGET_SAMPLE = 5, /* target-only sampling (no speculation) */
	SW_RNG_EXPAND = 6,        /* tree expansion: sampling children (with/without replacement) */
	SW_RNG_SPECHUB2 = 7,      /* SpecHub pair construction */
	SW_RNG_FILL = 8,          /* random weights (timing only): iteration, position = the low
	                           * and high words of an element group, lane = the buffer */
	SW_RNG_PURPOSE_COUNT      /* first free value */
};

/* Constants from Random123 philox.h: multipliers and Weyl key increments. */
#define SW_PHILOX_M0 0xD2511F53u
#define SW_PHILOX_M1 0xCD9E8D57u
#define SW_PHILOX_W0 0x9E3779B9u
#define SW_PHILOX_W1 0xBB67AE85u

/* One Philox-4x32 round on x with round key k. The 32x32->64 product is
 * written portably; nvcc turns it into mul.wide / mul.hi. */
SW_PHILOX_FN void sw_philox_round(uint32_t x[4], uint32_t k0, uint32_t k1)
{
	uint64_t p0 = (uint64_t)SW_PHILOX_M0 * x[0];
	uint64_t p1 = (uint64_t)SW_PHILOX_M1 * x[2];
	uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
	uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
	uint32_t y0 = hi1 ^ x[1] ^ k0;
	uint32_t y2 = hi0 ^ x[3] ^ k1;
	x[0] = y0;
	x[1] = lo1;
	x[2] = y2;
	x[3] = lo0;
}

/* The Philox-4x32-10 block function: out = E_key(ctr). out may alias ctr. */
SW_PHILOX_FN void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
	uint32_t x[4];
	uint32_t k0 = key[0], k1 = key[1];
	int r;

	x[0] = ctr[0];
	x[1] = ctr[1];
	x[2] = ctr[2];
	x[3] = ctr[3];
	/* Random123 bumps the key before every round but the first. */
	for (r = 0; r < 10; r++) {
		if (r > 0) {
			k0 += SW_PHILOX_W0;
			k1 += SW_PHILOX_W1;
		}
		sw_philox_round(x, k0, k1);
	}
	out[0] = x[0];
	out[1] = x[1];
	out[2] = x[2];
	out[3] = x[3];
}

/* Four keyed words with the layout documented at the top of this file. */
SW_PHILOX_FN void sw_rand_u32x4(uint64_t seed, uint32_t iteration, uint32_t position,
                                uint32_t purpose, uint32_t lane, uint32_t out[4])
{
	uint32_t ctr[4], key[2];

	ctr[0] = iteration;
	ctr[1] = position;
	ctr[2] = purpose;
	ctr[3] = lane;
	key[0] = (uint32_t)seed;
	key[1] = (uint32_t)(seed >> 32);
	philox4x32_10(ctr, key, out);
}

/* A word to a float strictly inside (0,1): u = (k + 1/2) * 2^-23 with k the
 * top 23 bits. Why 23 and not 24: (k + 1/2) * 2^-24 for a 24-bit k needs 25
 * significant bits, so in fp32 the top value rounds to 1.0f and log(1-u)
 * or the tie pattern breaks. (2k+1) * 2^-24 is exact in fp32 for every k, so
 * u lies in [2^-24, 1 - 2^-24], mean exactly 1/2, and 1 - u has the same law
 * as u. Exact under any rounding mode and on the GPU (no FMA ambiguity: one
 * int->float conversion of an exact integer and one power-of-two product). */
SW_PHILOX_FN float sw_u32_to_uniform(uint32_t x)
{
	return (float)((x >> 9) * 2u + 1u) * 5.9604644775390625e-8f; /* 2^-24 */
}

/* Two words to a double strictly inside (0,1): u = (k + 1/2) * 2^-52 with k
 * the 52 bits hi:lo[31:12]; (2k+1) * 2^-53 is exact in double (53-bit odd
 * integer), range [2^-53, 1 - 2^-53]. Same reasoning as the float case. */
SW_PHILOX_FN double sw_u64_to_uniform_double(uint32_t hi, uint32_t lo)
{
	uint64_t k = ((uint64_t)hi << 20) | (uint64_t)(lo >> 12);
	return (double)(k * 2u + 1u) * 1.1102230246251565404e-16; /* 2^-53 */
}

/* Keyed uniform float in (0,1): word 0 of lane 0. */
SW_PHILOX_FN float sw_uniform(uint64_t seed, uint32_t iteration, uint32_t position, uint32_t purpose)
{
	uint32_t w[4];

	sw_rand_u32x4(seed, iteration, position, purpose, 0u, w);
	return sw_u32_to_uniform(w[0]);
}

/* Keyed uniform double in (0,1): words 0 (high) and 1 (low) of lane 0. */
SW_PHILOX_FN double sw_uniform_double(uint64_t seed, uint32_t iteration, uint32_t position,
                                      uint32_t purpose)
{
	uint32_t w[4];

	sw_rand_u32x4(seed, iteration, position, purpose, 0u, w);
	return sw_u64_to_uniform_double(w[0], w[1]);
}

#endif
