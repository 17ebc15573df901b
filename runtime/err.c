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
	snprintf(e->msg, sizeof(e->msg), "%s: %s", head, old);
	return e->code ? e->code : SW_EINVAL;
}
