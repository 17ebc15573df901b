/* sw_err helpers: formatting only. */
#include "err.h"

#include <stdio.h>
#include <string.h>

int sw_errf(sw_err *e, int code, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
		e->code = code;
	}
	return code;
}

int sw_err_prefix(sw_err *e, const char *fmt, ...)
{
	if (!e)
		return SW_EINVAL;
	char head[512], old[sizeof(e->msg)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	/* Truncation of an over-long message is acceptable here, so copy by
	 * hand rather than have snprintf warn about it. */
	size_t hn = strlen(head), cap = sizeof(e->msg) - 1;
	if (hn > cap)
		hn = cap;
	memcpy(e->msg, head, hn);
	size_t n = hn;
	if (n + 2 <= cap) {
		memcpy(e->msg + n, ": ", 2);
		n += 2;
	}
	size_t on = strlen(old);
	if (on > cap - n)
		on = cap - n;
	memcpy(e->msg + n, old, on);
	e->msg[n + on] = '\0';
	return e->code ? e->code : SW_EINVAL;
}
