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

/* The file's bytes plus a terminating NUL (malloc'ed), its length in *len
 * (may be NULL). NULL with errno set when it cannot be opened or read
 * (EISDIR for a directory, EINVAL for another non-regular file). */
char *sw_read_file(const char *path, size_t *len);

/* The same with a message naming the file and what went wrong; "-" reads
 * standard input (to its end). */
char *sw_read_input(const char *path, size_t *len, sw_err *err);

#endif
