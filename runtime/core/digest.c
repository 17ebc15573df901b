/* Weights digest (digest.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "digest.h"

#define FNV_PRIME 0x100000001b3ull

void sw_digest_init(sw_digest *d)
{
	d->h = 0xcbf29ce484222325ull;
}

/* FNV-1a over little-endian 8-byte words, then the tail bytewise: a word
 * at a time is 8x fewer multiplies than the byte-wise FNV-1a. A multiply
 * only carries bits upwards, so with whole words a flipped top bit (a
 * float's sign) would stay in bit 63 and two of them would cancel: each
 * step folds the high half back down (h ^= h >> 29). */
void sw_digest_bytes(sw_digest *d, const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = d->h;
	for (; n >= 8; n -= 8, b += 8) {
		uint64_t w = 0;
		for (int i = 0; i < 8; i++)
			w |= (uint64_t)b[i] << (8 * i);
		h = (h ^ w) * FNV_PRIME;
		h ^= h >> 29;
	}
	for (; n; n--, b++) {
		h = (h ^ *b) * FNV_PRIME;
		h ^= h >> 29;
	}
	d->h = h;
}

void sw_digest_weight(sw_digest *d, const char *field, int layer, const float *x, size_t n)
{
	unsigned char hdr[16];
	const uint64_t nn = n;
	const int64_t l = layer;
	for (int i = 0; i < 8; i++) {
		hdr[i] = (unsigned char)(nn >> (8 * i));
		hdr[8 + i] = (unsigned char)((uint64_t)l >> (8 * i));
	}
	sw_digest_bytes(d, field, strlen(field) + 1);
	sw_digest_bytes(d, hdr, sizeof(hdr));
	/* fp32 values by their bit patterns, little-endian whatever the host */
	unsigned char buf[4096];
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &x[i], 4);
		buf[k++] = (unsigned char)u;
		buf[k++] = (unsigned char)(u >> 8);
		buf[k++] = (unsigned char)(u >> 16);
		buf[k++] = (unsigned char)(u >> 24);
		if (k == sizeof(buf)) {
			sw_digest_bytes(d, buf, k);
			k = 0;
		}
	}
	sw_digest_bytes(d, buf, k);
}

void sw_digest_format(const sw_digest *d, char *out, size_t n)
{
	snprintf(out, n, SW_DIGEST_PREFIX "%016" PRIx64, d->h);
}
