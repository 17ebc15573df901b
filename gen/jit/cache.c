/* Compile cache entries and atomic writes (cache.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "core/output.h"

#define CACHE_MAGIC "SWNVRTC1"

int gen_jit_mkdirs(const char *dir)
{
	char tmp[1024];
	snprintf(tmp, sizeof(tmp), "%s", dir);
	for (char *c = tmp + 1; *c; c++)
		if (*c == '/') {
			*c = 0;
			if (mkdir(tmp, 0777) && errno != EEXIST)
				return -1;
			*c = '/';
		}
	return mkdir(tmp, 0777) && errno != EEXIST ? -1 : 0;
}

int gen_jit_write_atomic(const char *path, const void *const *parts, const size_t *lens, int n,
                         sw_err *err)
{
	sw_outfile o;
	int rc = sw_outfile_open(&o, path, "write", err);
	for (int i = 0; !rc && i < n; i++)
		sw_outfile_write(&o, parts[i], lens[i]);
	return rc ? rc : sw_outfile_commit(&o, err);
}

int gen_jit_write_file(const char *path, const void *p, size_t n, sw_err *err)
{
	const void *parts[1] = {p};
	return gen_jit_write_atomic(path, parts, &n, 1, err);
}

void gen_jit_cache_key(uint64_t key[2], const char *prelude, const char *src, const char *opts,
                       const char *arch, const char *compiler_version)
{
	const char *parts[] = {prelude, "\n--src--\n", src, "\n--opts--\n", opts, "\n--arch--\n",
	                       arch, "\n--nvrtc--\n", compiler_version};
	key[0] = SW_FNV64_BASIS;
	key[1] = 0x84222325cbf29ce4ull; /* a second basis: 128 bits between them */
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		key[0] = sw_fnv1a64(key[0], parts[i], strlen(parts[i]));
		key[1] = sw_fnv1a64(key[1] ^ (i + 1), parts[i], strlen(parts[i]));
	}
}

/* Entry: magic, u64 key[2], u64 payload_len, u64 log_len, payload, log,
 * u64 fnv1a of everything before it. Anything else is a miss. */
int gen_jit_cache_get(const char *path, const uint64_t key[2], void **payload, size_t *plen,
                      char **log)
{
	size_t n = 0;
	unsigned char *b = (unsigned char *)sw_read_file(path, SW_CAP_IMAGE, &n);
	uint64_t hdr[4], sum;
	const size_t H = 8 + sizeof(hdr);

	*payload = NULL;
	*log = NULL;
	if (!b)
		return -1;
	if (n < H + 8 || memcmp(b, CACHE_MAGIC, 8))
		goto out_miss;
	memcpy(hdr, b + 8, sizeof(hdr));
	if (hdr[0] != key[0] || hdr[1] != key[1] || hdr[2] > n || hdr[3] > n ||
	    H + hdr[2] + hdr[3] + 8 != n)
		goto out_miss;
	memcpy(&sum, b + n - 8, 8);
	if (sw_fnv1a64(SW_FNV64_BASIS, b, n - 8) != sum)
		goto out_miss;
	*payload = malloc(hdr[2] ? hdr[2] : 1);
	*log = malloc(hdr[3] + 1);
	if (!*payload || !*log) {
		free(*payload);
		free(*log);
		*payload = NULL;
		*log = NULL;
		goto out_miss;
	}
	memcpy(*payload, b + H, hdr[2]);
	memcpy(*log, b + H + hdr[2], hdr[3]);
	(*log)[hdr[3]] = 0;
	*plen = hdr[2];
	free(b);
	return 0;
out_miss:
	free(b);
	return -1;
}

int gen_jit_cache_put(const char *path, const uint64_t key[2], const void *payload, size_t plen,
                      const char *log, sw_err *err)
{
	uint64_t hdr[4] = {key[0], key[1], plen, strlen(log)}, sum;
	sum = sw_fnv1a64(SW_FNV64_BASIS, CACHE_MAGIC, 8);
	sum = sw_fnv1a64(sum, hdr, sizeof(hdr));
	sum = sw_fnv1a64(sum, payload, plen);
	sum = sw_fnv1a64(sum, log, hdr[3]);
	const void *parts[] = {CACHE_MAGIC, hdr, payload, log, &sum};
	size_t lens[] = {8, sizeof(hdr), plen, hdr[3], 8};
	return gen_jit_write_atomic(path, parts, lens, 5, err);
}
