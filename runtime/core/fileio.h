/* Whole-file reading for configs, specs, prompts and corpora: the one place
 * that does it, and the one open() for files a user names. Not for model
 * weights' parsing (those are mmap'ed by their readers, through
 * sw_open_regular). */
#ifndef RT_FILEIO_H
#define RT_FILEIO_H

#include <stddef.h>

#include "err.h"

/* Opens path read-only for reading its bytes: never blocks (a FIFO or a
 * device would block in open() or read forever) and refuses anything but a
 * regular file, naming what it is ("a directory", "a FIFO", ...). Returns
 * the fd (blocking mode restored) or a negative error with err set. */
int sw_open_regular(const char *path, sw_err *err);

/* Every whole-file read takes a cap derived from what can be valid (the
 * caps below say how), checked with fstat BEFORE anything is allocated or
 * read, so a huge (or sparse) file is refused at once: there is no uncapped
 * reader. */

/* The file's bytes plus a terminating NUL (malloc'ed), its length in *len
 * (may be NULL). NULL with errno set when it cannot be opened or read
 * (EISDIR for a directory, EINVAL for another non-regular file, EFBIG for
 * more than cap bytes). For the project's own files (templates, kernel
 * images, cache entries); a file a user names goes through sw_read_capped. */
char *sw_read_file(const char *path, size_t cap, size_t *len);

/* The same with a message: a file of more than cap bytes is SW_EINVAL
 * naming the file, its size and the cap, what is `what` ("an engine.json");
 * "-" reads standard input (refused after cap + 1 bytes). */
char *sw_read_capped(const char *path, size_t cap, const char *what, size_t *len, sw_err *err);

/* Caps on whole-file reads (bytes). */
/* engine.json: the planner writes per-layer ops once with a repeat, so its
 * size does not grow with depth: <= 48 phases x ~64 ops x ~2 KiB an op
 * (10 args, uri, entry, grid) + kernels (<= ~500 x 4 KiB with params) +
 * buffers (<= ~500 x 256 B) ~ 8.3 MiB at the most; real ones are
 * 30-100 KiB. */
#define SW_CAP_ENGINE_JSON ((size_t)16 << 20)
/* small JSON configs and records (config.json of a HF model, a block
 * drafter's config, resources.json, engine.sum, a spec, a tree file, the
 * header of a safetensors file): a few KiB each; 1 KiB per kernel x arch
 * for resources.json (<= 500 x 8): 4 MiB leaves room. */
#define SW_CAP_CONFIG ((size_t)4 << 20)
/* tokenizer files (tokenizer.json: a 256k vocabulary with its merges is
 * ~35 MiB for the largest open models) */
#define SW_CAP_TOKENIZER ((size_t)256 << 20)
/* text a user gives (prompts, corpora): the longest context any engine
 * takes is 2^24 tokens (engine.json max_context), and a token is at most
 * a few dozen bytes of text: 1 GiB */
#define SW_CAP_TEXT ((size_t)1 << 30)
/* the project's own sources (kernel templates, rendered kernels.cu: ~1 MiB
 * for the largest engine) and logs */
#define SW_CAP_SOURCE ((size_t)64 << 20)
/* compiled kernel images (a cubin of <= ~500 kernels x 4 arches is tens of
 * MiB) and JIT cache entries */
#define SW_CAP_IMAGE ((size_t)512 << 20)

#endif
