/* Backend selection (device.h): rt_dev_open by name, with "auto" taking the
 * cuda backend when a driver and a GPU are present and the host backend
 * otherwise, and rt_dev_free. The backends themselves are dev_host.c and
 * dev_cuda.c. */
#include <stdlib.h>
#include <string.h>

#include "device.h"

void rt_dev_free(rt_dev *d)
{
	if (d)
		d->ops->destroy(d);
}

/* "cuda" or "cuda:N" (device ordinal N); -1 when name is neither. */
static int cuda_ordinal(const char *name)
{
	if (!strcmp(name, "cuda"))
		return 0;
	if (strncmp(name, "cuda:", 5) || !name[5])
		return -1;
	char *end;
	long v = strtol(name + 5, &end, 10);
	return *end || v < 0 || v > 1024 ? -1 : (int)v;
}

rt_dev *rt_dev_open(const char *backend, const rt_dev_opts *o, sw_err *err)
{
	const char *b = backend && *backend ? backend : "auto";
	int ord;

	if (!strcmp(b, "host"))
		return rt_dev_host_new(RT_HOST_NATIVE, o, err);
	if (!strcmp(b, "host-emulate"))
		return rt_dev_host_new(RT_HOST_EMULATE, o, err);
	if ((ord = cuda_ordinal(b)) >= 0)
		return rt_dev_cuda_new(ord, err);
	if (!strcmp(b, "auto")) {
		/* only "no driver / no device" falls back; a driver that is there
		 * but fails is an error worth seeing */
		sw_err e = {0};
		rt_dev *d = rt_dev_cuda_new(0, &e);
		if (d)
			return d;
		if (e.code != SW_ENOTSUP) {
			if (err)
				*err = e;
			return NULL;
		}
		return rt_dev_host_new(RT_HOST_NATIVE, o, err);
	}
	sw_errf(err, SW_EINVAL, "backend '%s': expected auto, host, host-emulate, cuda or cuda:N", b);
	return NULL;
}
