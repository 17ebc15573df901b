/* The compile cache and the file writes every compile path shares: one
 * entry per (prelude, source, options, arch, compiler version), keyed by a
 * 128-bit FNV-1a of them, written atomically (temp file + rename) with a
 * checksum, so a stale, truncated or corrupt entry is a miss, never an
 * error. Used by gen/build.c (NVRTC cubins and PTX); the emulator's modules
 * (emu_build.c) are cached by file name instead. Not a size-bounded store:
 * nothing is ever evicted. */
#ifndef GEN_JIT_CACHE_H
#define GEN_JIT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

/* mkdir -p: 0, or -1 with errno set. */
int gen_jit_mkdirs(const char *dir);

/* Writes the n parts to path.tmp<pid>, then renames it onto path: readers
 * see the old file or the whole new one. */
int gen_jit_write_atomic(const char *path, const void *const *parts, const size_t *lens, int n,
                         sw_err *err);
/* The same for one buffer. */
int gen_jit_write_file(const char *path, const void *p, size_t n, sw_err *err);

/* The key of one compile: every input that changes its output, in order,
 * with separators (so moving text from one part to the next changes it). */
void gen_jit_cache_key(uint64_t key[2], const char *prelude, const char *src, const char *opts,
                       const char *arch, const char *compiler_version);

/* Entry at path for key: 0 with *payload (malloc'ed, plen bytes) and *log
 * (malloc'ed, NUL-terminated); -1 on any miss (absent, another key,
 * truncated, checksum mismatch, out of memory). */
int gen_jit_cache_get(const char *path, const uint64_t key[2], void **payload, size_t *plen,
                      char **log);
/* Writes the entry atomically. */
int gen_jit_cache_put(const char *path, const uint64_t key[2], const void *payload, size_t plen,
                      const char *log, sw_err *err);

#endif
