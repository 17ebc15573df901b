/* NVRTC through dlopen (nvrtc.h), and the loader nvJitLink shares. Only the
 * handful of entry points used are declared here, with the types of the
 * CUDA 12/13 nvrtc.h. */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
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
	/* optional: gen_nvrtc_version and gen_nvrtc_ptx say when they lack them */
	nvrtcResult (*version)(int *, int *);
	nvrtcResult (*ptx_size)(nvrtcProgram, size_t *);
	nvrtcResult (*get_ptx)(nvrtcProgram, char *);
};

/* One checking macro for the family: records the call text; never returns
 * by itself. */
static int nvrtc_fail(gen_nvrtc *nv, nvrtcResult r, const char *call, const char *name, sw_err *err)
{
	return sw_errf(err, SW_EINVAL, "%s: %s failed: %s", name, call,
	               nv->errstr ? nv->errstr(r) : "?");
}
#define NVRTC_CHECK(call) ((r = (call)) != 0 ? nvrtc_fail(nv, r, #call, name, err) : 0)

/* libX from $CUDA_HOME/lib64, /usr/local/cuda/lib64, then the loader path
 * (unversioned, 13, 12). */
static void *cuda_dlopen(const char *base)
{
	char path[512], name[128];
	const char *home = getenv("CUDA_HOME");
	void *lib = NULL;

	if (home && *home) {
		snprintf(path, sizeof(path), "%s/lib64/%s.so", home, base);
		lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	snprintf(path, sizeof(path), "/usr/local/cuda/lib64/%s.so", base);
	if (!lib)
		lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	static const char *const sfx[] = {".so", ".so.13", ".so.12"};
	for (int i = 0; i < 3 && !lib; i++) {
		snprintf(name, sizeof(name), "%s%s", base, sfx[i]);
		lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	}
	return lib;
}

gen_nvrtc *gen_nvrtc_open(sw_err *err)
{
	void *lib = cuda_dlopen("libnvrtc");
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
	*(void **)&nv->version = dlsym(lib, "nvrtcVersion");
	*(void **)&nv->ptx_size = dlsym(lib, "nvrtcGetPTXSize");
	*(void **)&nv->get_ptx = dlsym(lib, "nvrtcGetPTX");
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

/* prelude, a newline, src: NVRTC has no include path, so the prelude goes
 * in front as text. */
static char *program_text(const char *prelude, const char *src)
{
	size_t pl = strlen(prelude), sl = strlen(src);
	char *text = malloc(pl + sl + 2);
	if (!text)
		return NULL;
	memcpy(text, prelude, pl);
	text[pl] = '\n';
	memcpy(text + pl + 1, src, sl + 1);
	return text;
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
	size_t ls = 0;
	char *text = program_text(prelude, src), *lg = NULL;
	int rc = 0;

	if (cubin)
		*cubin = NULL;
	if (log)
		*log = NULL;
	if (n_res)
		*n_res = 0;
	if (!text)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", name);
	snprintf(archopt, sizeof(archopt), "--gpu-architecture=%s", arch);
	const char *opts[] = {archopt, "--std=c++17", "--ptxas-options=-v", "-default-device",
	                      "--relocatable-device-code=true"};
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

int gen_nvrtc_version(gen_nvrtc *nv, char *buf, size_t n, sw_err *err)
{
	int maj = 0, min = 0;
	if (!nv->version || !nv->ptx_size || !nv->get_ptx)
		return sw_errf(err, SW_ENOTSUP, "libnvrtc lacks nvrtcVersion/nvrtcGetPTX");
	nv->version(&maj, &min);
	snprintf(buf, n, "%d.%d", maj, min);
	return 0;
}

int gen_nvrtc_ptx(gen_nvrtc *nv, const char *prelude, const char *src, const char *name,
                  const char *arch, char **ptx, size_t *n, sw_err *err)
{
	char ao[64];
	nvrtcProgram prog = NULL;
	char *text;
	snprintf(ao, sizeof(ao), "--gpu-architecture=%s", arch);
	const char *opts[] = {ao, "--std=c++17", "-default-device"};
	*ptx = NULL;
	if (!nv->ptx_size || !nv->get_ptx)
		return sw_errf(err, SW_ENOTSUP, "libnvrtc lacks nvrtcGetPTX");
	if (!(text = program_text(prelude, src)))
		return sw_errf(err, SW_ENOMEM, "%s: out of memory", name);
	if (nv->create(&prog, text, name, 0, NULL, NULL)) {
		free(text);
		return sw_errf(err, SW_EINVAL, "%s (%s): nvrtcCreateProgram failed", name, arch);
	}
	int r = nv->compile(prog, (int)(sizeof(opts) / sizeof(opts[0])), opts);
	size_t ls = 0;
	free(text);
	if (r) {
		char *lg = NULL;
		if (!nv->log_size(prog, &ls) && (lg = calloc(1, ls + 1)))
			nv->get_log(prog, lg);
		sw_errf(err, SW_EINVAL, "%s (%s): NVRTC compile failed:\n%.800s", name, arch,
		        lg ? lg : "");
		free(lg);
		nv->destroy(&prog);
		return SW_EINVAL;
	}
	if (nv->ptx_size(prog, n) || !(*ptx = malloc(*n + 1)) || nv->get_ptx(prog, *ptx)) {
		free(*ptx);
		*ptx = NULL;
		nv->destroy(&prog);
		return sw_errf(err, SW_EINVAL, "%s (%s): cannot read the PTX", name, arch);
	}
	/* the PTX ends with its NUL; do not store it */
	while (*n && (*ptx)[*n - 1] == 0)
		(*n)--;
	nv->destroy(&prog);
	return 0;
}

/* --- nvJitLink: the per-kernel relocatable cubins into one ------------- */

struct gen_nvjitlink {
	void *lib;
	int (*create)(void **, uint32_t, const char **);
	int (*add)(void *, int, const void *, size_t, const char *);
	int (*complete)(void *);
	int (*size)(void *, size_t *);
	int (*get)(void *, void *);
	int (*destroy)(void **);
	int (*log_size)(void *, size_t *); /* optional */
	int (*get_log)(void *, char *);    /* optional */
};

gen_nvjitlink *gen_nvjitlink_open(sw_err *err)
{
	void *lib = cuda_dlopen("libnvJitLink");
	gen_nvjitlink *j;
	if (!lib) {
		sw_errf(err, SW_ENOTSUP, "libnvJitLink not found (tried $CUDA_HOME/lib64, "
		        "/usr/local/cuda/lib64, the loader path): %s", dlerror());
		return NULL;
	}
	if (!(j = calloc(1, sizeof(*j)))) {
		dlclose(lib);
		sw_errf(err, SW_ENOMEM, "out of memory");
		return NULL;
	}
	j->lib = lib;
	*(void **)&j->create = dlsym(lib, "nvJitLinkCreate");
	*(void **)&j->add = dlsym(lib, "nvJitLinkAddData");
	*(void **)&j->complete = dlsym(lib, "nvJitLinkComplete");
	*(void **)&j->size = dlsym(lib, "nvJitLinkGetLinkedCubinSize");
	*(void **)&j->get = dlsym(lib, "nvJitLinkGetLinkedCubin");
	*(void **)&j->destroy = dlsym(lib, "nvJitLinkDestroy");
	*(void **)&j->log_size = dlsym(lib, "nvJitLinkGetErrorLogSize");
	*(void **)&j->get_log = dlsym(lib, "nvJitLinkGetErrorLog");
	if (j->create && j->add && j->complete && j->size && j->get && j->destroy)
		return j;
	dlclose(lib);
	free(j);
	sw_errf(err, SW_ENOTSUP, "libnvJitLink lacks an entry point");
	return NULL;
}

void gen_nvjitlink_close(gen_nvjitlink *j)
{
	/* the library stays loaded, as in gen_nvrtc_close: its per-thread pools
	 * would otherwise show up as unattributable leaks under LeakSanitizer */
	free(j);
}

int gen_nvjitlink_cubins(gen_nvjitlink *j, const char *arch, const void *const *cubins,
                         const size_t *lens, int n, void **out, size_t *out_len, sw_err *err)
{
	char ao[32];
	const char *opts[1] = {ao};
	void *h = NULL;
	int r;
	snprintf(ao, sizeof(ao), "-arch=%s", arch);
	*out = NULL;
	if ((r = j->create(&h, 1, opts)))
		return sw_errf(err, SW_EINVAL, "nvJitLinkCreate (%s) failed: %d", arch, r);
	for (int i = 0; i < n && !r; i++)
		r = j->add(h, 1 /* NVJITLINK_INPUT_CUBIN */, cubins[i], lens[i], "kernel.cubin");
	if (!r)
		r = j->complete(h);
	if (r) {
		size_t ls = 0;
		char *lg = NULL;
		if (j->log_size && j->get_log && !j->log_size(h, &ls) && (lg = calloc(1, ls + 1)))
			j->get_log(h, lg);
		sw_errf(err, SW_EINVAL, "nvJitLink (%s) failed (%d): %.600s", arch, r, lg ? lg : "");
		free(lg);
		j->destroy(&h);
		return SW_EINVAL;
	}
	if (j->size(h, out_len) || !(*out = malloc(*out_len ? *out_len : 1)) || j->get(h, *out)) {
		free(*out);
		*out = NULL;
		j->destroy(&h);
		return sw_errf(err, SW_EINVAL, "nvJitLink (%s): cannot read the linked cubin", arch);
	}
	j->destroy(&h);
	return 0;
}

/* --- the prelude NVRTC gets -------------------------------------------- */

char *gen_nvrtc_prelude_load(const char *kernels_dir, sw_err *err)
{
	static const char inc[] = "#include \"prelude_common.h\"\n";
	char path[1024];
	char *cuda, *common = NULL, *out, *at;

	snprintf(path, sizeof(path), "%s/prelude_cuda.h", kernels_dir);
	if (!(cuda = sw_read_file(path, SW_CAP_SOURCE, NULL))) {
		sw_errf(err, SW_EIO, "%s: cannot read: %s", path, strerror(errno));
		return NULL;
	}
	if (!(at = strstr(cuda, inc)))
		return cuda;
	snprintf(path, sizeof(path), "%s/prelude_common.h", kernels_dir);
	if (!(common = sw_read_file(path, SW_CAP_SOURCE, NULL))) {
		sw_errf(err, SW_EIO, "%s: cannot read: %s", path, strerror(errno));
		free(cuda);
		return NULL;
	}
	size_t head = (size_t)(at - cuda), cl = strlen(common), tail = strlen(at + sizeof(inc) - 1);
	if ((out = malloc(head + cl + tail + 1))) {
		memcpy(out, cuda, head);
		memcpy(out + head, common, cl);
		memcpy(out + head + cl, at + sizeof(inc) - 1, tail + 1);
	} else {
		sw_errf(err, SW_ENOMEM, "out of memory");
	}
	free(common);
	free(cuda);
	return out;
}
