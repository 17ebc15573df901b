/* The weights digest that binds an engine to the model it was built for: a
 * 64-bit FNV-1a variant (fast enough to run over every weight at build and
 * at bind), fed each weight array the engine uploads as (field name, layer,
 * element count, fp32 values) in engine.json's buffer order. Definition:
 * h = FNV offset basis; each part - the field's name with its NUL, then n
 * and layer as little-endian 64-bit words, then the values' little-endian
 * bytes - is taken as little-endian 8-byte words w, h = (h ^ w) * FNV
 * prime, h ^= h >> 29, and its last n % 8 bytes likewise one by one. Not a
 * cryptographic hash: it catches other weights, not an adversary who
 * crafts a collision. */
#ifndef SW_DIGEST_H
#define SW_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define SW_DIGEST_PREFIX "fnv1a64xs:"

typedef struct sw_digest {
	uint64_t h;
} sw_digest;

void sw_digest_init(sw_digest *d);
void sw_digest_bytes(sw_digest *d, const void *p, size_t n);
/* One weight array as the engine reads it: field ("wq"), layer (-1: not
 * layered), n and the n fp32 values. */
void sw_digest_weight(sw_digest *d, const char *field, int layer, const float *x, size_t n);
/* "fnv1a64xs:" and 16 hex digits into out (at least 27 bytes). */
void sw_digest_format(const sw_digest *d, char *out, size_t n);

#endif
