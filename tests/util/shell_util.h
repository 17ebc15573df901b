/* Tests that run programs as a user would (the CLI, a bundle's launcher):
 * a shell command's output and status, the token list of a `run --json`,
 * host-emulate's compiled kernel module. Each fails the calling test on
 * what it cannot do (a crash of the command included). */
#ifndef SHELL_UTIL_H
#define SHELL_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Runs a shell command (printf-style, at most 16 KiB), its stdout and
 * stderr together into out (cap bytes, NUL-terminated); its exit status. A
 * command ended by a signal fails the test. */
int tu_sh(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The "tokens": [...] array of a `run --json` object in text, into out (at
 * most cap); the count. No array fails the test. */
int tu_json_tokens(const char *text, int32_t *out, int cap);

/* The first engine-kernels-*.so in dir (host-emulate's compiled kernels, as
 * the cache names them) into out; none fails the test. */
void tu_find_emu_module(const char *dir, char *out, size_t n);

#endif
