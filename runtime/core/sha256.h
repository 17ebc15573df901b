/* SHA-256 (FIPS 180-4), for what must be checked across machines: a
 * bundle's file list (`specwright bundle`, bundle.json) and its weights.
 * A plain portable implementation, about 200 MB/s; not the project's fast
 * hash (hash.h) and not the weights digest (digest.h). */
#ifndef SW_SHA256_H
#define SW_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct sw_sha256 {
	uint32_t h[8];
	uint64_t bytes;       /* fed so far */
	unsigned char buf[64];
	size_t nbuf;
} sw_sha256;

void sw_sha256_init(sw_sha256 *s);
void sw_sha256_update(sw_sha256 *s, const void *p, size_t n);
/* Finishes: 64 lower-case hex digits and a NUL into hex. */
void sw_sha256_hex(sw_sha256 *s, char hex[65]);
/* The file's hash and size, read in pieces (weights are large); 0, or an
 * error naming the file. */
int sw_sha256_file(const char *path, char hex[65], uint64_t *bytes, sw_err *err);

#endif
