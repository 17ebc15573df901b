/* Error reporting shared by every module: a function that can fail takes an
 * `sw_err *` and returns 0 or a negative code; the message says what a user
 * needs to act on (file, field, expected, found). Not a logging facility. */
#ifndef SW_ERR_H
#define SW_ERR_H

#include <stdarg.h>

enum {
	SW_OK = 0,
	SW_EINVAL = -22,  /* malformed input: file, spec, option */
	SW_EIO = -5,      /* cannot open/read/write/mmap */
	SW_ENOMEM = -12,
	SW_ERANGE = -34,  /* value out of the supported range (prompt > ctx, ...) */
	SW_ENOTSUP = -95, /* valid but unsupported (tensor type, arch) */
};

typedef struct sw_err {
	int code;
	char msg[1024];
} sw_err;

/* Formats the message into e (if non-NULL) and returns code, so callers can
 * write `return sw_errf(err, SW_EINVAL, "%s: ...", path);`. */
int sw_errf(sw_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefixes an existing message: "context: old message". Returns e->code. */
int sw_err_prefix(sw_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
