/* NVRTC through dlopen (nvrtc.h). Only the handful of entry points used are
 * declared here, with the types of the CUDA 12/13 nvrtc.h. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc.h"

typedef struct _nvrtcProgram *nvrtcProgram;
typedef int nvrtcResult; /* NVRTC_SUCCESS = 0 */

struct gen_nvrtc {
	void *lib;
	nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *,
	                      const char *const *);
	nvrtcResult (*destroy)(nvrtcProgram *);
	nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
	nvrtcResult (*log_size)(nvrtcProgram, size_t *);
	nvrtcResult (*get_log)(nvrtcProgram, char *);
	nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
	nvrtcResult (*get_cubin)(nvrtcProgram, char *);
	const char *(*errstr)(nvrtcResult);
};

/* One checking macro for the family: records the call text; never returns
 * by itself. */
static int nvrtc_fail(gen_nvrtc *nv, nvrtcResult r, const char *call, const char *name, sw_err *err)
{
	return sw_errf(err, SW_EINVAL, "%s: %s failed: %s", name, call,
	               nv->errstr ? nv->errstr(r) : "?");
}
#define NVRTC_CHECK(call) ((r = (call)) != 0 ? nvrtc_fail(nv, r, #call, name, err) : 0)

gen_nvrtc *gen_nvrtc_open(sw_err *err)
{
	char path[512];
	const char *home = getenv("CUDA_HOME");
	const char *cands[6];
	int nc = 0;
	void *lib = NULL;

	if (home && *home) {
		snprintf(path, sizeof(path), "%s/lib64/libnvrtc.so", home);
		cands[nc++] = path;
	}
	cands[nc++] = "/usr/local/cuda/lib64/libnvrtc.so";
	cands[nc++] = "libnvrtc.so";
	cands[nc++] = "libnvrtc.so.13";
	cands[nc++] = "libnvrtc.so.12";
	for (int i = 0; i < nc && !lib; i++)
		lib = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		sw_errf(err, SW_ENOTSUP, "libnvrtc not found (tried $CUDA_HOME/lib64, "
		        "/usr/local/cuda/lib64, the loader path): %s", dlerror());
		return NULL;
	}
	gen_nvrtc *nv = calloc(1, sizeof(*nv));
	if (!nv) {
		dlclose(lib);
		sw_errf(err, SW_ENOMEM, "out of memory");
		return NULL;
	}
	nv->lib = lib;
	*(void **)&nv->create = dlsym(lib, "nvrtcCreateProgram");
	*(void **)&nv->destroy = dlsym(lib, "nvrtcDestroyProgram");
	*(void **)&nv->compile = dlsym(lib, "nvrtcCompileProgram");
	*(void **)&nv->log_size = dlsym(lib, "nvrtcGetProgramLogSize");
	*(void **)&nv->get_log = dlsym(lib, "nvrtcGetProgramLog");
	*(void **)&nv->cubin_size = dlsym(lib, "nvrtcGetCUBINSize");
	*(void **)&nv->get_cubin = dlsym(lib, "nvrtcGetCUBIN");
	*(void **)&nv->errstr = dlsym(lib, "nvrtcGetErrorString");
	if (!nv->create || !nv->destroy || !nv->compile || !nv->log_size || !nv->get_log ||
	    !nv->cubin_size || !nv->get_cubin) {
		sw_errf(err, SW_ENOTSUP, "libnvrtc lacks an entry point (nvrtcGetCUBIN needs CUDA >= 11.1)");
		gen_nvrtc_close(nv);
		return NULL;
	}
	return nv;
}

void gen_nvrtc_close(gen_nvrtc *nv)
{
	if (!nv)
		return;
	/* The library stays loaded: NVRTC keeps process-wide state (its C++
	 * runtime's emergency exception pool among it) that unloading would
	 * only turn into an unattributable leak report under LeakSanitizer. */
	free(nv);
}

/* The integer written just before `phrase` in line (e.g. 32 in "32 bytes
 * stack frame"), or 0 when the phrase is absent. ptxas prefixes these lines
 * differently under nvcc ("    0 bytes stack frame") and NVRTC ("ptxas
 * .   0 bytes stack frame"), so nothing may be anchored at the line start. */
static int num_before(const char *line, const char *phrase)
{
	const char *q = strstr(line, phrase);
	if (!q)
		return 0;
	while (q > line && q[-1] == ' ')
		q--;
	while (q > line && q[-1] >= '0' && q[-1] <= '9')
		q--;
	return atoi(q);
}

int gen_nvrtc_parse_resources(const char *log, gen_kernel_res *res, int max_res)
{
	int n = 0;
	gen_kernel_res *cur = NULL;

	for (const char *l = log; l && *l;) {
		const char *e = strchr(l, '\n');
		size_t len = e ? (size_t)(e - l) : strlen(l);
		char line[512], nm[256];
		snprintf(line, sizeof(line), "%.*s", (int)(len < 511 ? len : 511), l);
		const char *p;
		/* "ptxas info    : Compiling entry function 'k' for 'sm_80'" */
		if ((p = strstr(line, "Compiling entry function '")) &&
		    sscanf(p, "Compiling entry function '%255[^']'", nm) == 1) {
			cur = NULL;
			if (n < max_res) {
				cur = &res[n++];
				memset(cur, 0, sizeof(*cur));
				snprintf(cur->name, sizeof(cur->name), "%s", nm);
			}
		} else if (cur && strstr(line, "bytes stack frame")) {
			/* "... 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" */
			cur->stack = num_before(line, "bytes stack frame");
			cur->spill_stores = num_before(line, "bytes spill stores");
			cur->spill_loads = num_before(line, "bytes spill loads");
		} else if (cur && (p = strstr(line, "Used "))) {
			/* "Used 16 registers, used 1 barriers, 128 bytes smem, 380 bytes cmem[0]"
			 * (sm_90 logs have no cmem[0] entry: it stays 0) */
			sscanf(p, "Used %d registers", &cur->regs);
			cur->barriers = num_before(p, "barriers");
			cur->smem = num_before(p, "bytes smem");
			cur->cmem0 = num_before(p, "bytes cmem[0]");
		}
		l = e ? e + 1 : l + len;
	}
	return n;
}

int gen_nvrtc_compile(gen_nvrtc *nv, const char *prelude, const char *src, const char *name,
                      const char *arch, void **cubin, size_t *cubin_size, gen_kernel_res *res,
                      int max_res, int *n_res, char **log, sw_err *err)
{
	return gen_nvrtc_compile_x(nv, prelude, src, name, arch, false, cubin, cubin_size, res,
	                           max_res, n_res, log, err);
}

int gen_nvrtc_compile_x(gen_nvrtc *nv, const char *prelude, const char *src, const char *name,
                        const char *arch, bool rdc, void **cubin, size_t *cubin_size,
                        gen_kernel_res *res, int max_res, int *n_res, char **log, sw_err *err)
{
	char archopt[64];
	nvrtcProgram prog = NULL;
	nvrtcResult r;
	size_t pl = strlen(prelude), sl = strlen(src), ls = 0;
	char *text = malloc(pl + sl + 2), *lg = NULL;
	int rc = 0;

	if (cubin)
		*cubin = NULL;
	if (log)
		*log = NULL;
	if (n_res)
		*n_res = 0;
	if (!text)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", name);
	memcpy(text, prelude, pl);
	text[pl] = '\n';
	memcpy(text + pl + 1, src, sl + 1);
	snprintf(archopt, sizeof(archopt), "--gpu-architecture=%s", arch);
	const char *opts[] = {archopt, "--std=c++17", "--ptxas-options=-v", "-default-device",
	                      "--restrict", "--relocatable-device-code=true"};
	if ((rc = NVRTC_CHECK(nv->create(&prog, text, name, 0, NULL, NULL))))
		goto out_free_text;
	r = nv->compile(prog, (int)(sizeof(opts) / sizeof(opts[0])) - (rdc ? 0 : 1), opts);
	if (nv->log_size(prog, &ls) == 0 && (lg = malloc(ls + 1))) {
		if (nv->get_log(prog, lg) != 0)
			lg[0] = 0;
		lg[ls] = 0;
	}
	if (r != 0) {
		rc = sw_errf(err, SW_EINVAL, "%s (%s): NVRTC compile failed: %s\n%.800s", name, arch,
		             nv->errstr ? nv->errstr(r) : "?", lg ? lg : "");
		goto out_destroy;
	}
	if (cubin) {
		size_t n = 0;
		if ((rc = NVRTC_CHECK(nv->cubin_size(prog, &n))))
			goto out_destroy;
		*cubin = malloc(n ? n : 1);
		if (!*cubin) {
			rc = sw_errf(err, SW_ENOMEM, "%s: out of memory", name);
			goto out_destroy;
		}
		if ((rc = NVRTC_CHECK(nv->get_cubin(prog, *cubin)))) {
			free(*cubin);
			*cubin = NULL;
			goto out_destroy;
		}
		if (cubin_size)
			*cubin_size = n;
	}
	if (res && n_res)
		*n_res = gen_nvrtc_parse_resources(lg, res, max_res);
out_destroy:
	nv->destroy(&prog);
	if (log && !rc) {
		*log = lg;
		lg = NULL;
	}
	free(lg);
out_free_text:
	free(text);
	return rc;
}
