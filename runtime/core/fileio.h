/* Whole-file reading for configs, specs, prompts and corpora: the one place
 * that does it. Not for model weights (those are mmap'ed by their readers). */
#ifndef RT_FILEIO_H
#define RT_FILEIO_H

#include <stddef.h>

/* The file's bytes plus a terminating NUL (malloc'ed), its length in *len
 * (may be NULL). NULL with errno set when it cannot be opened or read. */
char *sw_read_file(const char *path, size_t *len);

#endif
