/* FNV-1a, the one non-cryptographic hash of the project: cache keys, the
 * tokenizer's vocabulary table, tree ids, the host weight cache's sample.
 * Header-only (a few multiply-xors inline where they are used). Not for
 * anything adversarial, and not a checksum to trust across machines with
 * other byte orders. */
#ifndef SW_HASH_H
#define SW_HASH_H

#include <stddef.h>
#include <stdint.h>

#define SW_FNV64_BASIS 0xcbf29ce484222325ull
#define SW_FNV64_PRIME 0x100000001b3ull
#define SW_FNV32_BASIS 2166136261u
#define SW_FNV32_PRIME 16777619u

/* One step: h' = (h ^ v) * prime. v is usually a byte; the host weight
 * cache feeds whole 16-bit words (its own variant, kept as it was). */
static inline uint64_t sw_fnv1a64_mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * SW_FNV64_PRIME;
}

/* 64-bit FNV-1a of p[0..n) continuing from h (SW_FNV64_BASIS to start), so
 * several pieces chain into one hash. */
static inline uint64_t sw_fnv1a64(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * SW_FNV64_PRIME;
	return h;
}

/* 32-bit FNV-1a of p[0..n) from the standard basis. */
static inline uint32_t sw_fnv1a32(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint32_t h = SW_FNV32_BASIS;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * SW_FNV32_PRIME;
	return h;
}

#endif
