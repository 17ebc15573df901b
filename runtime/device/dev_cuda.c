/* The cuda backend (device.h): the CUDA driver API and cuBLASLt, both
 * dlopen'ed (dev_cuda_api.h), so one binary runs with or without a GPU.
 * One non-blocking stream; kernels from the engine's cubin (PTX fallback),
 * with their dynamic shared memory (opted in past 48 KB); GEMMs through
 * cuBLASLt with plans per shape, made and tried eagerly at load_kernels so
 * that a capture records launches only; graphs by stream capture,
 * conditional regions as CUDA IF nodes (driver 12.4+; else rt_dev.no_cond
 * says why and the engine runs gated phases eagerly). Any thread may enter,
 * one at a time: each entry makes the primary context current. Not the op
 * schedule (engine.c) and not the kernels (kernels.cu). Everything here
 * also runs against tests/util/fake_cuda.c, which is how it is tested
 * without a GPU. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev_cuda_api.h"
#include "dev_cuda_gemm_simple.h"
#include "core/fileio.h"
#include "core/timing.h"

#define CUDA_MAX_IF_DEPTH 8
#define CUDA_WORKSPACE_BYTES ((size_t)32 << 20)
#define CUDA_GEMM_ALGOS 8          /* candidates asked of cuBLASLt's heuristic */
#define CUDA_STATIC_SMEM_MAX 49152 /* dynamic shared memory up to this needs no opt-in */

/* One cuBLASLt plan: the descriptors and the heuristic's candidate
 * algorithms for one (m, n, k, dtype) at one pointer alignment (cuBLASLt
 * assumes 256-byte aligned operands unless told otherwise, and engine
 * slices are not). Made and tried eagerly, never inside a capture: the
 * heuristic query and an algorithm's first use (which may load a kernel
 * module lazily) are not launches, so a graph must not record them. The
 * first candidate that runs becomes `algo`; captures only launch it. */
typedef struct gemm_plan {
	int64_t m, n, k;
	int dtype;
	unsigned align_a, align_w, align_c;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t lw, la, lc;
	cublasLtMatmulAlgo_t cand[CUDA_GEMM_ALGOS];
	int n_cand;
	cublasLtMatmulAlgo_t algo;
	bool ready;             /* algo ran once, eagerly */
} gemm_plan;

typedef struct cuda_dev {
	rt_cu_api cu;
	rt_lt_api lt;
	bool own_libs;          /* the tables came from the dlopen loaders */
	CUdevice dev;
	CUcontext ctx;
	bool ctx_retained;
	int smem_optin;         /* the device's opt-in dynamic shared memory per block */
	CUstream stream;
	/* capture: body streams of the open IF regions, innermost last */
	CUstream body[CUDA_MAX_IF_DEPTH];
	int depth;
	CUdeviceptr ws;         /* cuBLASLt workspace, allocated once */
	cublasLtHandle_t lth;
	gemm_plan *plans;
	int n_plans, cap_plans;
	CUmodule *mods;
	int n_mods;
	CUmodule cond_mod;      /* the embedded PTX's module (engines carry their own) */
	CUfunction cond_fn;     /* sets an IF node's handle from an int32 in device memory */
	bool cond_ok;           /* driver and entry points support IF nodes */
	char cond_why[700];     /* why conditionals are unavailable (cond_fn NULL) */
	CUmodule gemm_mod;      /* SW_CUDA_GEMM=simple: the plain GEMM kernel's module */
	CUfunction gemm_fn[2];  /* its fp16 and bf16 entries; NULL: GEMMs through cuBLASLt */
} cuda_dev;

typedef struct cuda_graph {
	CUgraph g;
	CUgraphExec x;
} cuda_graph;

/* ---- checking: one helper, one macro per API family ---- */

static int api_fail(sw_err *err, int code, const char *lib, const char *call, const char *what,
                    const char *file, int line)
{
	return sw_errf(err, code, "%s: %s failed: %s (%s:%d)", lib, call, what, file, line);
}

static int cu_check(const rt_cu_api *cu, CUresult r, const char *call, const char *file, int line,
                    sw_err *err)
{
	if (r == CUDA_SUCCESS)
		return 0;
	const char *name = NULL, *desc = NULL;
	if (cu->cuGetErrorName && cu->cuGetErrorName(r, &name) != CUDA_SUCCESS)
		name = NULL;
	if (cu->cuGetErrorString && cu->cuGetErrorString(r, &desc) != CUDA_SUCCESS)
		desc = NULL;
	char what[300];
	snprintf(what, sizeof(what), "%s (%d): %s", name ? name : "CUDA error", r,
	         desc ? desc : "no description");
	int code = r == CUDA_ERROR_OUT_OF_MEMORY ? SW_ENOMEM
	         : r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_NO_DEVICE ? SW_ENOTSUP
	         : r == CUDA_ERROR_INVALID_VALUE ? SW_EINVAL : SW_EIO;
	return api_fail(err, code, "cuda", call, what, file, line);
}

static int lt_check(const rt_lt_api *lt, cublasStatus_t s, const char *call, const char *file,
                    int line, sw_err *err)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return 0;
	char what[200];
	snprintf(what, sizeof(what), "%s (%d)",
	         lt->cublasLtGetStatusString ? lt->cublasLtGetStatusString(s) : "cuBLAS status", s);
	return api_fail(err, s == CUBLAS_STATUS_NOT_SUPPORTED ? SW_ENOTSUP : SW_EIO, "cublasLt", call,
	                what, file, line);
}

/* Each evaluates to 0 or the negative error it recorded; the caller decides
 * whether to return. */
#define CU_CHECK(c, call, err) cu_check(&(c)->cu, (call), #call, __FILE__, __LINE__, (err))
#define CUBLASLT_CHECK(c, call, err) lt_check(&(c)->lt, (call), #call, __FILE__, __LINE__, (err))

/* The context contract: any thread may enter the backend (the server
 * calls it from a worker, tests from wherever), one at a time, never two
 * at once. Every entry point makes the device's primary context current on
 * the calling thread first; cuCtxGetCurrent is a thread-local read, so a
 * thread that already has it pays one cheap query. */
static int ctx_enter(cuda_dev *c, sw_err *err)
{
	CUcontext cur = NULL;
	if (!c->ctx || (c->cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c->ctx))
		return 0;
	int rc = CU_CHECK(c, c->cu.cuCtxSetCurrent(c->ctx), err);
	if (rc)
		sw_err_prefix(err, "making the device's primary context current on this thread");
	return rc;
}

/* ---- loading the libraries ---- */

typedef struct sym_entry {
	size_t off;
	const char *sym;
	bool required;
} sym_entry;

#define CU_SYM(field, sym, req) {offsetof(rt_cu_api, field), sym, req}
static const sym_entry cu_syms[] = {
	CU_SYM(cuInit, "cuInit", true),
	CU_SYM(cuDriverGetVersion, "cuDriverGetVersion", true),
	CU_SYM(cuGetErrorName, "cuGetErrorName", true),
	CU_SYM(cuGetErrorString, "cuGetErrorString", true),
	CU_SYM(cuDeviceGetCount, "cuDeviceGetCount", true),
	CU_SYM(cuDeviceGet, "cuDeviceGet", true),
	CU_SYM(cuDeviceGetName, "cuDeviceGetName", true),
	CU_SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute", true),
	CU_SYM(cuDeviceTotalMem, "cuDeviceTotalMem_v2", true),
	CU_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", true),
	CU_SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", true),
	CU_SYM(cuCtxSetCurrent, "cuCtxSetCurrent", true),
	CU_SYM(cuCtxGetCurrent, "cuCtxGetCurrent", true),
	CU_SYM(cuMemAlloc, "cuMemAlloc_v2", true),
	CU_SYM(cuMemFree, "cuMemFree_v2", true),
	CU_SYM(cuMemHostAlloc, "cuMemHostAlloc", true),
	CU_SYM(cuMemFreeHost, "cuMemFreeHost", true),
	CU_SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", true),
	CU_SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", true),
	CU_SYM(cuMemsetD8Async, "cuMemsetD8Async", true),
	CU_SYM(cuStreamCreate, "cuStreamCreate", true),
	CU_SYM(cuStreamDestroy, "cuStreamDestroy_v2", true),
	CU_SYM(cuStreamSynchronize, "cuStreamSynchronize", true),
	CU_SYM(cuModuleLoadDataEx, "cuModuleLoadDataEx", true),
	CU_SYM(cuModuleUnload, "cuModuleUnload", true),
	CU_SYM(cuModuleGetFunction, "cuModuleGetFunction", true),
	CU_SYM(cuFuncSetAttribute, "cuFuncSetAttribute", true),
	CU_SYM(cuLaunchKernel, "cuLaunchKernel", true),
	CU_SYM(cuStreamBeginCapture, "cuStreamBeginCapture_v2", true),
	CU_SYM(cuStreamEndCapture, "cuStreamEndCapture", true),
	CU_SYM(cuGraphInstantiate, "cuGraphInstantiateWithFlags", true),
	CU_SYM(cuGraphLaunch, "cuGraphLaunch", true),
	CU_SYM(cuGraphExecDestroy, "cuGraphExecDestroy", true),
	CU_SYM(cuGraphDestroy, "cuGraphDestroy", true),
	CU_SYM(cuStreamGetCaptureInfo, "cuStreamGetCaptureInfo_v3", false),
	CU_SYM(cuStreamUpdateCaptureDependencies, "cuStreamUpdateCaptureDependencies_v2", false),
	CU_SYM(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", false),
	CU_SYM(cuGraphConditionalHandleCreate, "cuGraphConditionalHandleCreate", false),
	CU_SYM(cuGraphAddNode, "cuGraphAddNode_v2", false),
};

#define LT_SYM(field) {offsetof(rt_lt_api, field), #field, true}
static const sym_entry lt_syms[] = {
	LT_SYM(cublasLtCreate),
	LT_SYM(cublasLtDestroy),
	LT_SYM(cublasLtGetStatusString),
	LT_SYM(cublasLtMatmulDescCreate),
	LT_SYM(cublasLtMatmulDescDestroy),
	LT_SYM(cublasLtMatmulDescSetAttribute),
	LT_SYM(cublasLtMatrixLayoutCreate),
	LT_SYM(cublasLtMatrixLayoutDestroy),
	LT_SYM(cublasLtMatmulPreferenceCreate),
	LT_SYM(cublasLtMatmulPreferenceDestroy),
	LT_SYM(cublasLtMatmulPreferenceSetAttribute),
	LT_SYM(cublasLtMatmulAlgoGetHeuristic),
	LT_SYM(cublasLtMatmul),
};

/* Fills the table at base from lib; the first missing required symbol's
 * name, or NULL. */
static const char *resolve(void *lib, void *base, const sym_entry *t, int n)
{
	for (int i = 0; i < n; i++) {
		void *p = dlsym(lib, t[i].sym);
		memcpy((char *)base + t[i].off, &p, sizeof(p));
		if (!p && t[i].required)
			return t[i].sym;
	}
	return NULL;
}

int rt_cu_api_load(rt_cu_api *api, sw_err *err)
{
	memset(api, 0, sizeof(*api));
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return sw_errf(err, SW_ENOTSUP, "no CUDA driver: dlopen libcuda.so.1 failed: %s", dlerror());
	const char *miss = resolve(lib, api, cu_syms, (int)(sizeof(cu_syms) / sizeof(cu_syms[0])));
	if (miss) {
		dlclose(lib);
		memset(api, 0, sizeof(*api));
		return sw_errf(err, SW_ENOTSUP, "CUDA driver too old: libcuda.so.1 has no %s "
		               "(a driver for CUDA 12.0 or later is needed)", miss);
	}
	api->lib = lib;
	return 0;
}

int rt_lt_api_load(rt_lt_api *api, sw_err *err)
{
	char home_path[600], tried[1200] = "";
	const char *home = getenv("CUDA_HOME");
	const char *cands[6];
	int nc = 0;
	void *lib = NULL;

	memset(api, 0, sizeof(*api));
	cands[nc++] = "libcublasLt.so.13";
	cands[nc++] = "libcublasLt.so.12";
	cands[nc++] = "libcublasLt.so";
	snprintf(home_path, sizeof(home_path), "%s/lib64/libcublasLt.so", home && *home ? home :
	         "/usr/local/cuda");
	cands[nc++] = home_path;
	for (int i = 0; i < nc && !lib; i++) {
		lib = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
		size_t k = strlen(tried);
		snprintf(tried + k, sizeof(tried) - k, "%s%s", k ? ", " : "", cands[i]);
	}
	if (!lib)
		return sw_errf(err, SW_ENOTSUP, "no cuBLASLt: tried %s: %s", tried, dlerror());
	const char *miss = resolve(lib, api, lt_syms, (int)(sizeof(lt_syms) / sizeof(lt_syms[0])));
	if (miss) {
		dlclose(lib);
		memset(api, 0, sizeof(*api));
		return sw_errf(err, SW_ENOTSUP, "cuBLASLt lacks %s (CUDA 11.0 or later needed)", miss);
	}
	api->lib = lib;
	return 0;
}

void rt_cu_api_unload(rt_cu_api *api)
{
	/* libcuda stays mapped too: after cuInit the driver owns threads and
	 * atexit state that an unmapped library would leave dangling. */
	memset(api, 0, sizeof(*api));
}

void rt_lt_api_unload(rt_lt_api *api)
{
	/* cuBLASLt stays mapped (its CUDA runtime registers atexit handlers);
	 * the table is dropped, not the library. */
	memset(api, 0, sizeof(*api));
}

/* ---- the set-conditional kernel ---- */

/* The set-conditional kernel, in CUDA C, is
 *
 *   extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle,
 *                                                      unsigned int value);
 *   extern "C" __global__ void sw_graph_set_cond(unsigned long long handle,
 *                                                const int *flag)
 *   { cudaGraphSetConditional(handle, *flag != 0 ? 1u : 0u); }
 *
 * CUDA's device-side cudaGraphSetConditional (cuda_device_runtime_api.h) is
 * a __cudart_builtin__: the compiled code calls an undefined function that
 * the driver binds when the module is loaded (a relocation in constant bank
 * 4), so neither -rdc nor libcudadevrt is needed. Below is the PTX NVRTC
 * emits for it at ISA 8.3 (the first with conditional nodes; drivers that
 * have conditional nodes read it), embedded so the runtime needs no NVRTC:
 * cuModuleLoadDataEx JIT-compiles it for any sm_60+ device. */
static const char cond_ptx[] =
	".version 8.3\n"
	".target sm_60\n"
	".address_size 64\n"
	".extern .func cudaGraphSetConditional\n"
	"(\n"
	"\t.param .b64 cudaGraphSetConditional_param_0,\n"
	"\t.param .b32 cudaGraphSetConditional_param_1\n"
	")\n"
	";\n"
	".visible .entry " RT_CUDA_SET_COND_ENTRY "(\n"
	"\t.param .u64 handle,\n"
	"\t.param .u64 flag\n"
	")\n"
	"{\n"
	"\t.reg .pred %p<2>;\n"
	"\t.reg .b32 %r<3>;\n"
	"\t.reg .b64 %rd<4>;\n"
	"\tld.param.u64 %rd1, [handle];\n"
	"\tld.param.u64 %rd2, [flag];\n"
	"\tcvta.to.global.u64 %rd3, %rd2;\n"
	"\tld.global.u32 %r1, [%rd3];\n"
	"\tsetp.ne.s32 %p1, %r1, 0;\n"
	"\tselp.u32 %r2, 1, 0, %p1;\n"
	"\t{\n"
	"\t.param .b64 param0;\n"
	"\tst.param.b64 [param0+0], %rd1;\n"
	"\t.param .b32 param1;\n"
	"\tst.param.b32 [param1+0], %r2;\n"
	"\tcall.uni cudaGraphSetConditional, (param0, param1);\n"
	"\t}\n"
	"\tret;\n"
	"}\n";

const char *rt_cuda_cond_ptx(void)
{
	return cond_ptx;
}

/* Whether IF nodes can be used, and if so the set-conditional kernel from
 * the embedded PTX (the driver JIT-compiles it), loaded once at init; an
 * engine's own module replaces it at load_kernels (built with the engine,
 * no JIT). Conditional nodes need the entry points (driver 12.3) and a
 * driver of 12.4 or later, the first whose stream capture into an IF body
 * (cuStreamBeginCaptureToGraph) is complete. Not fatal when missing:
 * graph_if_begin refuses with cond_why, and rt_dev.no_cond tells the
 * engine to run its gated phases eagerly instead. */
static void cond_kernel_load(rt_dev *d, cuda_dev *c)
{
	sw_err e = {0};
	const int ver = d->driver_version;

	const bool syms = c->cu.cuStreamGetCaptureInfo && c->cu.cuStreamUpdateCaptureDependencies &&
	                  c->cu.cuStreamBeginCaptureToGraph && c->cu.cuGraphConditionalHandleCreate &&
	                  c->cu.cuGraphAddNode;
	if (!syms || ver < RT_CUDA_COND_MIN_DRIVER) {
		snprintf(c->cond_why, sizeof(c->cond_why), "the CUDA driver (version %d.%d) lacks "
		         "conditional graph nodes (%s: driver %d.%d or later)", ver / 1000,
		         ver % 1000 / 10, !syms ? "no cuGraphConditionalHandleCreate, cuGraphAddNode_v2, "
		         "cuStreamBeginCaptureToGraph" : "capture into IF bodies",
		         RT_CUDA_COND_MIN_DRIVER / 1000, RT_CUDA_COND_MIN_DRIVER % 1000 / 10);
		d->no_cond = c->cond_why;
		return;
	}
	c->cond_ok = true;
	int rc = CU_CHECK(c, c->cu.cuModuleLoadDataEx(&c->cond_mod, cond_ptx, 0, NULL, NULL), &e);
	if (!rc && (rc = CU_CHECK(c, c->cu.cuModuleGetFunction(&c->cond_fn, c->cond_mod,
	                                                       RT_CUDA_SET_COND_ENTRY), &e))) {
		c->cu.cuModuleUnload(c->cond_mod);
		c->cond_mod = NULL;
		c->cond_fn = NULL;
	}
	if (rc) {
		snprintf(c->cond_why, sizeof(c->cond_why), "the set-conditional kernel did not load "
		         "(embedded PTX: %.600s)", e.msg);
		d->no_cond = c->cond_why;
	}
}

/* ---- memory ---- */

static int refuse_capture(rt_dev *d, const char *what, sw_err *err)
{
	return sw_errf(err, SW_EINVAL, "%s: %s inside a graph capture (only launches can be "
	               "captured)", d->desc, what);
}

static int cuda_alloc(rt_dev *d, size_t bytes, rt_dptr *out, sw_err *err)
{
	cuda_dev *c = d->impl;
	CUdeviceptr p = 0;
	int rc;
	*out = 0;
	if (d->capturing)
		return refuse_capture(d, "alloc", err);
	if ((rc = ctx_enter(c, err)))
		return rc;
	if (bytes == 0)
		bytes = 256;
	if ((rc = CU_CHECK(c, c->cu.cuMemAlloc(&p, bytes), err))) {
		sw_err_prefix(err, "%s: alloc of %zu bytes", d->desc, bytes);
		return rc;
	}
	/* the interface promises zeroed memory; cuMemAlloc does not */
	if ((rc = CU_CHECK(c, c->cu.cuMemsetD8Async(p, 0, bytes, c->stream), err)) ||
	    (rc = CU_CHECK(c, c->cu.cuStreamSynchronize(c->stream), err))) {
		c->cu.cuMemFree(p);
		return rc;
	}
	*out = (rt_dptr)p;
	return 0;
}

static void cuda_free(rt_dev *d, rt_dptr p)
{
	cuda_dev *c = d->impl;
	if (p && !ctx_enter(c, NULL))
		c->cu.cuMemFree((CUdeviceptr)p); /* no error path: an invalid free is the caller's bug */
}

static void *cuda_alloc_host(rt_dev *d, size_t bytes)
{
	cuda_dev *c = d->impl;
	void *p = NULL;
	if (ctx_enter(c, NULL) || c->cu.cuMemHostAlloc(&p, bytes ? bytes : 1, 0) != CUDA_SUCCESS)
		return NULL;
	return p;
}

static void cuda_free_host(rt_dev *d, void *p)
{
	cuda_dev *c = d->impl;
	if (p && !ctx_enter(c, NULL))
		c->cu.cuMemFreeHost(p);
}

/* Copies go through the backend's stream (a non-blocking stream does not
 * order against the legacy default stream a plain cuMemcpyHtoD uses), then
 * wait for it: both calls are synchronous by contract. */
static int cuda_upload(rt_dev *d, rt_dptr dst, const void *src, size_t bytes, sw_err *err)
{
	cuda_dev *c = d->impl;
	int rc;
	if (d->capturing)
		return refuse_capture(d, "upload", err);
	if (!bytes)
		return 0;
	if ((rc = ctx_enter(c, err)))
		return rc;
	if ((rc = CU_CHECK(c, c->cu.cuMemcpyHtoDAsync((CUdeviceptr)dst, src, bytes, c->stream), err)) ||
	    (rc = CU_CHECK(c, c->cu.cuStreamSynchronize(c->stream), err))) {
		sw_err_prefix(err, "%s: upload of %zu bytes", d->desc, bytes);
		return rc;
	}
	d->stats.uploads++;
	return 0;
}

static int cuda_download(rt_dev *d, void *dst, rt_dptr src, size_t bytes, sw_err *err)
{
	cuda_dev *c = d->impl;
	int rc;
	if (d->capturing)
		return refuse_capture(d, "download", err);
	if (!bytes)
		return 0;
	if ((rc = ctx_enter(c, err)))
		return rc;
	double t0 = sw_now_s();
	if ((rc = CU_CHECK(c, c->cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, bytes, c->stream), err)) ||
	    (rc = CU_CHECK(c, c->cu.cuStreamSynchronize(c->stream), err))) {
		sw_err_prefix(err, "%s: download of %zu bytes", d->desc, bytes);
		return rc;
	}
	d->stats.downloads++;
	d->stats.seconds_ops += sw_now_s() - t0;
	return 0;
}

/* ---- kernels ---- */

static bool cuda_supports_op(rt_dev *d, const rt_op *op);
static int gemm_plan_get(cuda_dev *c, const rt_op *op, bool capturing, gemm_plan **out,
                         bool *ran, sw_err *err);

static int load_image(cuda_dev *c, const char *path, const void *image, CUmodule *mod, sw_err *err)
{
	char elog[4096] = "";
	CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[] = {elog, (void *)(uintptr_t)sizeof(elog)};
	int rc = CU_CHECK(c, c->cu.cuModuleLoadDataEx(mod, image, 2, opts, vals), err);
	if (rc) {
		elog[sizeof(elog) - 1] = 0;
		if (elog[0])
			sw_err_prefix(err, "%s (JIT log: %.600s)", path, elog);
		else
			sw_err_prefix(err, "%s", path);
	}
	return rc;
}

static int cuda_load_kernels(rt_dev *d, const char *engine_dir, rt_op *ops, int n, sw_err *err)
{
	cuda_dev *c = d->impl;
	char path[1200];
	char *image = NULL;
	int rc;

	if (d->capturing)
		return refuse_capture(d, "load_kernels", err);
	if ((rc = ctx_enter(c, err)))
		return rc;
	/* a cubin runs on its own major arch at an equal or higher minor
	 * (sm_80 code on sm_86/89, never sm_80 code on sm_90) */
	for (int a = d->arch; a >= d->arch / 10 * 10 && !image; a--) {
		snprintf(path, sizeof(path), "%s/kernels.sm_%d.cubin", engine_dir, a);
		image = sw_read_file(path, SW_CAP_IMAGE, NULL);
	}
	if (!image) {
		snprintf(path, sizeof(path), "%s/kernels.ptx", engine_dir);
		image = sw_read_file(path, SW_CAP_IMAGE, NULL);
	}
	if (!image)
		return sw_errf(err, SW_EINVAL, "%s: neither kernels.sm_%d.cubin (or an sm_%d.. cubin) nor "
		               "kernels.ptx: rebuild the engine with sm_%d among its archs", engine_dir,
		               d->arch, d->arch / 10 * 10, d->arch);
	CUmodule *mods = realloc(c->mods, sizeof(*mods) * (size_t)(c->n_mods + 1));
	if (!mods) {
		free(image);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	c->mods = mods;
	CUmodule mod = NULL;
	rc = load_image(c, path, image, &mod, err);
	free(image);
	if (rc)
		return rc;
	c->mods[c->n_mods++] = mod;
	for (int i = 0; i < n; i++) {
		rt_op *o = &ops[i];
		if (o->kind != RT_OP_KERNEL)
			continue;
		CUfunction f = NULL;
		if ((rc = CU_CHECK(c, c->cu.cuModuleGetFunction(&f, mod, o->entry), err))) {
			sw_err_prefix(err, "%s: op %s (%s): kernel entry %s", path, o->name, o->op, o->entry);
			return rc;
		}
		o->fn = f;
		/* dynamic shared memory past 48 KB is an opt-in per function */
		if (o->dyn_smem > CUDA_STATIC_SMEM_MAX) {
			if ((int64_t)o->dyn_smem > c->smem_optin)
				return sw_errf(err, SW_ENOTSUP, "%s: op %s (%s): kernel %s needs %u bytes of "
				               "dynamic shared memory, this device allows %d per block",
				               path, o->name, o->op, o->entry, o->dyn_smem, c->smem_optin);
			if ((rc = CU_CHECK(c, c->cu.cuFuncSetAttribute(
			                          f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			                          (int)o->dyn_smem), err)))
				return sw_err_prefix(err, "%s: op %s: kernel %s: %u bytes of dynamic shared "
				                     "memory", path, o->name, o->entry, o->dyn_smem);
		}
	}
	/* the engine's own set-conditional kernel (built with it: no JIT), when
	 * its module has one and the driver has conditional nodes */
	CUfunction cf = NULL;
	if (c->cond_ok && c->cu.cuModuleGetFunction(&cf, mod, RT_CUDA_SET_COND_ENTRY) == CUDA_SUCCESS) {
		c->cond_fn = cf;
		d->no_cond = NULL;
	}
	/* every GEMM: plan, heuristic candidates and the trial run, now, so
	 * that a capture holds cublasLtMatmul launches only */
	for (int i = 0; i < n; i++) {
		rt_op *o = &ops[i];
		gemm_plan *p = NULL;
		bool ran = false;
		if (o->kind != RT_OP_GEMM || !cuda_supports_op(d, o) || o->m <= 0 || o->n <= 0 ||
		    o->k <= 0 || c->gemm_mod)
			continue;
		if ((rc = gemm_plan_get(c, o, false, &p, &ran, err)))
			return sw_err_prefix(err, "%s: op %s (readying its cuBLASLt plan)", d->desc, o->name);
	}
	return 0;
}

static bool cuda_supports_op(rt_dev *d, const rt_op *op)
{
	if (op->kind == RT_OP_GEMM)
		return op->dtype == RT_BF16 || op->dtype == RT_FP16;
	return op->kind == RT_OP_KERNEL || op->kind == RT_OP_MEMSET;
}

/* ---- GEMM through cuBLASLt ---- */

static unsigned ptr_align(rt_dptr p)
{
	if (!p)
		return 256;
	unsigned a = (unsigned)(p & (~p + 1));
	return a == 0 || a > 256 ? 256 : a;
}

static void plan_free(cuda_dev *c, gemm_plan *p)
{
	if (p->desc)
		c->lt.cublasLtMatmulDescDestroy(p->desc);
	if (p->lw)
		c->lt.cublasLtMatrixLayoutDestroy(p->lw);
	if (p->la)
		c->lt.cublasLtMatrixLayoutDestroy(p->la);
	if (p->lc)
		c->lt.cublasLtMatrixLayoutDestroy(p->lc);
	memset(p, 0, sizeof(*p));
}

/* C (m,n) f32 row-major = A (m,k) row-major x W (n,k)^T. cuBLASLt is
 * column-major, where a row-major (r,c) matrix with leading dimension c is
 * its (c,r) transpose. So the product is computed as C^T (n,m) = W (n,k) x
 * A^T (k,m): cuBLASLt's A is W stored (k,n) ld k with op T, its B is A
 * stored (k,m) ld k with op N, C/D are (n,m) ld n. This "TN" form is the
 * layout cuBLASLt's 16-bit tensor-core kernels support best. */
static int plan_make(cuda_dev *c, const rt_op *op, unsigned aa, unsigned aw, unsigned ac,
                     gemm_plan *p, sw_err *err)
{
	const int ty = op->dtype == RT_FP16 ? CUDA_R_16F : CUDA_R_16BF;
	const int32_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
	const uint64_t ws = CUDA_WORKSPACE_BYTES;
	const uint32_t al[4] = {aw, aa, ac, ac};
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res[CUDA_GEMM_ALGOS];
	int got = 0, rc;

	memset(p, 0, sizeof(*p));
	memset(res, 0, sizeof(res));
	p->m = op->m;
	p->n = op->n;
	p->k = op->k;
	p->dtype = op->dtype;
	p->align_a = aa;
	p->align_w = aw;
	p->align_c = ac;
	if ((rc = CUBLASLT_CHECK(c, c->lt.cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F,
	                                                           CUDA_R_32F), err)) ||
	    (rc = CUBLASLT_CHECK(c, c->lt.cublasLtMatmulDescSetAttribute(
	                                 p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof(opT)), err)) ||
	    (rc = CUBLASLT_CHECK(c, c->lt.cublasLtMatmulDescSetAttribute(
	                                 p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof(opN)), err)) ||
	    (rc = CUBLASLT_CHECK(c, c->lt.cublasLtMatrixLayoutCreate(&p->lw, ty, (uint64_t)op->k,
	                                                             (uint64_t)op->n, op->k), err)) ||
	    (rc = CUBLASLT_CHECK(c, c->lt.cublasLtMatrixLayoutCreate(&p->la, ty, (uint64_t)op->k,
	                                                             (uint64_t)op->m, op->k), err)) ||
	    (rc = CUBLASLT_CHECK(c, c->lt.cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32F,
	                                                             (uint64_t)op->n, (uint64_t)op->m,
	                                                             op->n), err)) ||
	    (rc = CUBLASLT_CHECK(c, c->lt.cublasLtMatmulPreferenceCreate(&pref), err)) ||
	    (rc = CUBLASLT_CHECK(c, c->lt.cublasLtMatmulPreferenceSetAttribute(
	                                 pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
	                         err)))
		goto out;
	for (int i = 0; i < 4; i++)
		if ((rc = CUBLASLT_CHECK(c, c->lt.cublasLtMatmulPreferenceSetAttribute(
		                                    pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i,
		                                    &al[i], sizeof(al[i])), err)))
			goto out;
	if ((rc = CUBLASLT_CHECK(c, c->lt.cublasLtMatmulAlgoGetHeuristic(
	                                    c->lth, p->desc, p->lw, p->la, p->lc, p->lc, pref,
	                                    CUDA_GEMM_ALGOS, res, &got), err)))
		goto out;
	for (int i = 0; i < got && i < CUDA_GEMM_ALGOS; i++)
		if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= ws)
			p->cand[p->n_cand++] = res[i].algo;
	if (p->n_cand < 1) {
		rc = sw_errf(err, SW_ENOTSUP, "cublasLt: no algorithm for m=%lld n=%lld k=%lld %s "
		             "(alignments A %u, W %u, C %u bytes; the heuristic returned %d)",
		             (long long)op->m, (long long)op->n, (long long)op->k,
		             op->dtype == RT_FP16 ? "fp16" : "bf16", aa, aw, ac, got);
		goto out;
	}
out:
	if (pref)
		c->lt.cublasLtMatmulPreferenceDestroy(pref);
	if (rc)
		plan_free(c, p);
	return rc;
}

static void gemm_desc(const rt_op *op, char *buf, size_t n)
{
	snprintf(buf, n, "GEMM m=%lld n=%lld k=%lld %s", (long long)op->m, (long long)op->n,
	         (long long)op->k, op->dtype == RT_FP16 ? "fp16" : "bf16");
}

static int gemm_run(cuda_dev *c, const gemm_plan *p, const cublasLtMatmulAlgo_t *algo,
                    const rt_op *op, CUstream s, sw_err *err)
{
	static const float one = 1.0f, zero = 0.0f;
	const rt_dptr C = op->argval[0], A = op->argval[1], W = op->argval[2];
	return CUBLASLT_CHECK(c, c->lt.cublasLtMatmul(c->lth, p->desc, &one, (const void *)W, p->lw,
	                                              (const void *)A, p->la, &zero, (const void *)C,
	                                              p->lc, (void *)C, p->lc, algo, (void *)c->ws,
	                                              CUDA_WORKSPACE_BYTES, s), err);
}

/* The op's plan: found, or (outside a capture only) made and made ready:
 * the candidates are run on the op's own operands, in the heuristic's
 * order, each followed by a stream sync, and the first that runs is kept
 * (an algorithm the heuristic offers may still refuse this problem). That
 * run is the op's launch: *ran tells the caller it has nothing left to do. */
static int gemm_plan_get(cuda_dev *c, const rt_op *op, bool capturing, gemm_plan **out,
                         bool *ran, sw_err *err)
{
	const unsigned aa = ptr_align(op->argval[1]), aw = ptr_align(op->argval[2]);
	const unsigned ac = ptr_align(op->argval[0]);
	char what[160];
	int rc;

	*out = NULL;
	*ran = false;
	for (int i = 0; i < c->n_plans; i++) {
		gemm_plan *q = &c->plans[i];
		if (q->m == op->m && q->n == op->n && q->k == op->k && q->dtype == op->dtype &&
		    q->align_a == aa && q->align_w == aw && q->align_c == ac && q->ready) {
			*out = q;
			return 0;
		}
	}
	gemm_desc(op, what, sizeof(what));
	if (capturing)
		return sw_errf(err, SW_EINVAL, "%s (alignments A %u, W %u, C %u bytes) was not run before "
		               "the capture: cuBLASLt's heuristic query and an algorithm's first use "
		               "must not be captured (load_kernels readies every GEMM op; run a "
		               "GEMM shape once eagerly before capturing it)", what, aa, aw, ac);
	if (c->n_plans == c->cap_plans) {
		int cap = c->cap_plans ? 2 * c->cap_plans : 16;
		gemm_plan *np = realloc(c->plans, sizeof(*np) * (size_t)cap);
		if (!np)
			return sw_errf(err, SW_ENOMEM, "out of memory");
		c->plans = np;
		c->cap_plans = cap;
	}
	gemm_plan *p = &c->plans[c->n_plans];
	if ((rc = plan_make(c, op, aa, aw, ac, p, err)))
		return rc;
	sw_err first = {0};
	for (int i = 0; i < p->n_cand && !p->ready; i++) {
		sw_err e = {0};
		if (gemm_run(c, p, &p->cand[i], op, c->stream, &e)) {
			if (!first.msg[0])
				first = e;
			continue;
		}
		/* an asynchronous failure: the context may be unusable, so stop */
		if ((rc = CU_CHECK(c, c->cu.cuStreamSynchronize(c->stream), err))) {
			sw_err_prefix(err, "%s: trial run of cuBLASLt algorithm %d of %d", what, i + 1,
			              p->n_cand);
			plan_free(c, p);
			return rc;
		}
		p->algo = p->cand[i];
		p->ready = true;
	}
	if (!p->ready) {
		rc = sw_errf(err, first.code ? first.code : SW_ENOTSUP, "%s: none of the %d algorithms "
		             "cuBLASLt's heuristic offered runs (the first refused: %s)", what, p->n_cand,
		             first.msg);
		plan_free(c, p);
		return rc;
	}
	c->n_plans++;
	*out = p;
	*ran = true;
	return 0;
}

static int cuda_gemm(cuda_dev *c, const rt_op *op, bool capturing, CUstream s, sw_err *err)
{
	gemm_plan *p = NULL;
	bool ran = false;
	int rc;

	if (op->m <= 0 || op->n <= 0)
		return 0;
	if (op->k <= 0) /* an empty sum; cuBLASLt refuses k = 0 */
		return CU_CHECK(c, c->cu.cuMemsetD8Async((CUdeviceptr)op->argval[0], 0,
		                                         sizeof(float) * (size_t)(op->m * op->n), s), err);
	if (c->gemm_mod) { /* SW_CUDA_GEMM=simple: one thread per output */
		if (op->m > 65535 || op->n > INT32_MAX)
			return sw_errf(err, SW_ENOTSUP, "GEMM m=%lld n=%lld k=%lld: past the simple "
			               "kernel's grid (m <= 65535; SW_CUDA_GEMM=simple)", (long long)op->m,
			               (long long)op->n, (long long)op->k);
		int64_t m = op->m, n = op->n, k = op->k; /* the kernel's int64_t parameters */
		void *args[] = {(void *)&op->argval[0], (void *)&op->argval[1], (void *)&op->argval[2],
		                &m, &n, &k};
		const unsigned bx = RT_CUDA_GEMM_SIMPLE_BLOCK;
		return CU_CHECK(c, c->cu.cuLaunchKernel(c->gemm_fn[op->dtype == RT_BF16],
		                                        (unsigned)((n + bx - 1) / bx), (unsigned)m, 1, bx,
		                                        1, 1, 0, s, args, NULL), err);
	}
	if ((rc = gemm_plan_get(c, op, capturing, &p, &ran, err)) || ran)
		return rc;
	return gemm_run(c, p, &p->algo, op, s, err);
}

/* ---- launch ---- */

static CUstream cur_stream(cuda_dev *c)
{
	return c->depth ? c->body[c->depth - 1] : c->stream;
}

static int cuda_launch(rt_dev *d, const rt_op *op, sw_err *err)
{
	cuda_dev *c = d->impl;
	CUstream s = cur_stream(c);
	int rc;
	double t0 = sw_now_s();

	if ((rc = ctx_enter(c, err)))
		return rc;
	switch (op->kind) {
	case RT_OP_KERNEL: {
		if (!op->fn)
			return sw_errf(err, SW_EINVAL, "%s: op %s (%s): kernel %s not loaded (load_kernels "
			               "first)", d->desc, op->name, op->op, op->entry);
		/* argv rebuilt here: a copied op's own argv may point into the original */
		void *argv[RT_OP_MAX_ARGS];
		for (int i = 0; i < RT_OP_MAX_ARGS; i++)
			argv[i] = (void *)&op->argval[i];
		rc = CU_CHECK(c, c->cu.cuLaunchKernel((CUfunction)op->fn, op->grid[0], op->grid[1],
		                                      op->grid[2], op->block[0], op->block[1],
		                                      op->block[2], op->dyn_smem, s, argv, NULL), err);
		break;
	}
	case RT_OP_GEMM:
		if (!cuda_supports_op(d, op))
			return sw_errf(err, SW_ENOTSUP, "%s: op %s: GEMM dtype %d (bf16 or fp16 expected)",
			               d->desc, op->name, op->dtype);
		rc = cuda_gemm(c, op, d->capturing, s, err);
		d->stats.gemms++;
		break;
	case RT_OP_MEMSET:
		rc = op->bytes <= 0 ? 0 : CU_CHECK(c, c->cu.cuMemsetD8Async((CUdeviceptr)op->argval[0], 0,
		                                                            (size_t)op->bytes, s), err);
		d->stats.memsets++;
		break;
	default:
		return sw_errf(err, SW_EINVAL, "%s: op %s (%s): unknown op kind %d", d->desc, op->name,
		               op->op, op->kind);
	}
	if (rc) {
		char layer[24] = "";
		if (op->layer >= 0)
			snprintf(layer, sizeof(layer), ", layer %d", op->layer);
		sw_err_prefix(err, "%s: op %s (%s%s)", d->desc, op->name, op->op, layer);
		return rc;
	}
	d->stats.launches++;
	d->stats.seconds_ops += sw_now_s() - t0;
	return 0;
}

/* ---- graphs ---- */

static int cuda_graph_begin(rt_dev *d, sw_err *err)
{
	cuda_dev *c = d->impl;
	int rc;
	if (d->capturing)
		return sw_errf(err, SW_EINVAL, "%s: graph_begin while already capturing", d->desc);
	if ((rc = ctx_enter(c, err)))
		return rc;
	/* Relaxed: every cuBLASLt plan was made and first run before (at
	 * load_kernels), so the capture holds launches only; relaxed mode keeps
	 * a library's harmless queries during it from invalidating the capture.
	 * The backend itself refuses alloc/copy/sync while capturing. */
	if ((rc = CU_CHECK(c, c->cu.cuStreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_RELAXED), err)))
		return rc;
	c->depth = 0;
	d->capturing = true;
	return 0;
}

/* An IF region inside a stream capture (the pattern of PyTorch's
 * begin_capture_to_if_node):
 *   1. the graph s is capturing into, from cuStreamGetCaptureInfo;
 *   2. a conditional handle on it, default 0 re-applied at every launch;
 *   3. the set-conditional kernel captured on s: handle = (*flag != 0);
 *   4. the IF node added by hand after that kernel (cuGraphAddNode, deps =
 *      s's capture frontier), and s's frontier moved onto the IF node so the
 *      work after the region waits for it;
 *   5. the region's ops captured into the IF node's body graph by a second
 *      stream (cuStreamBeginCaptureToGraph) until graph_if_end.
 * Nesting works the same way one level down (the handle is created on the
 * body graph, "the graph or one of its children" as cuda.h requires). */
static int cuda_graph_if_begin(rt_dev *d, rt_dptr flag, sw_err *err)
{
	cuda_dev *c = d->impl;
	CUstream s = cur_stream(c);
	CUgraph g = NULL;
	const CUgraphNode *deps = NULL;
	const CUgraphEdgeData *edges = NULL;
	size_t nd = 0;
	uint64_t id = 0;
	int status = 0, rc;
	CUgraphConditionalHandle h = 0;

	if (!d->capturing)
		return sw_errf(err, SW_EINVAL, "%s: graph_if_begin outside a graph capture", d->desc);
	if ((rc = ctx_enter(c, err)))
		return rc;
	if (!c->cond_fn)
		return sw_errf(err, SW_ENOTSUP, "%s: conditional graph regions unavailable: %s", d->desc,
		               c->cond_why);
	if (c->depth == CUDA_MAX_IF_DEPTH)
		return sw_errf(err, SW_ERANGE, "%s: graph_if_begin: more than %d nested regions", d->desc,
		               CUDA_MAX_IF_DEPTH);
	if (!flag || flag % 4)
		return sw_errf(err, SW_EINVAL, "%s: graph_if_begin: flag address %#llx is not an aligned "
		               "int32", d->desc, (unsigned long long)flag);
	if (!c->body[c->depth] &&
	    (rc = CU_CHECK(c, c->cu.cuStreamCreate(&c->body[c->depth], CU_STREAM_NON_BLOCKING), err)))
		return rc;
	if ((rc = CU_CHECK(c, c->cu.cuStreamGetCaptureInfo(s, &status, &id, &g, NULL, NULL, NULL), err)))
		return rc;
	if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || !g)
		return sw_errf(err, SW_EINVAL, "%s: graph_if_begin: the stream is not capturing (status "
		               "%d; an earlier error invalidated the capture?)", d->desc, status);
	if ((rc = CU_CHECK(c, c->cu.cuGraphConditionalHandleCreate(&h, g, c->ctx, 0,
	                                                           CU_GRAPH_COND_ASSIGN_DEFAULT), err)))
		return rc;
	void *args[2] = {&h, &flag};
	if ((rc = CU_CHECK(c, c->cu.cuLaunchKernel(c->cond_fn, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), err)))
		return rc;
	if ((rc = CU_CHECK(c, c->cu.cuStreamGetCaptureInfo(s, &status, &id, &g, &deps, &edges, &nd), err)))
		return rc;
	CUgraphNodeParams np;
	memset(&np, 0, sizeof(np));
	np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
	np.conditional.handle = h;
	np.conditional.type = CU_GRAPH_COND_TYPE_IF;
	np.conditional.size = 1;
	np.conditional.ctx = c->ctx;
	CUgraphNode node = NULL;
	if ((rc = CU_CHECK(c, c->cu.cuGraphAddNode(&node, g, deps, edges, nd, &np), err)))
		return rc;
	if (!np.conditional.phGraph_out || !np.conditional.phGraph_out[0])
		return sw_errf(err, SW_EIO, "%s: cuGraphAddNode returned no body graph for the IF node",
		               d->desc);
	if ((rc = CU_CHECK(c, c->cu.cuStreamUpdateCaptureDependencies(s, &node, NULL, 1,
	                                                              CU_STREAM_SET_CAPTURE_DEPENDENCIES),
	                   err)))
		return rc;
	if ((rc = CU_CHECK(c, c->cu.cuStreamBeginCaptureToGraph(c->body[c->depth],
	                                                        np.conditional.phGraph_out[0], NULL,
	                                                        NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED),
	                   err)))
		return rc;
	c->depth++;
	return 0;
}

static int cuda_graph_if_end(rt_dev *d, sw_err *err)
{
	cuda_dev *c = d->impl;
	CUgraph body = NULL;
	if (!d->capturing || c->depth == 0)
		return sw_errf(err, SW_EINVAL, "%s: graph_if_end without a matching graph_if_begin",
		               d->desc);
	int rc = ctx_enter(c, err);
	if (rc)
		return rc;
	c->depth--;
	/* the body graph belongs to the IF node: nothing to free */
	return CU_CHECK(c, c->cu.cuStreamEndCapture(c->body[c->depth], &body), err);
}

static int cuda_graph_end(rt_dev *d, rt_graph **out, sw_err *err)
{
	cuda_dev *c = d->impl;
	CUgraph g = NULL, body = NULL;
	int rc = 0, open = c->depth;
	*out = NULL;
	if (!d->capturing)
		return sw_errf(err, SW_EINVAL, "%s: graph_end without graph_begin", d->desc);
	if ((rc = ctx_enter(c, err)))
		return rc;
	while (c->depth > 0)
		c->cu.cuStreamEndCapture(c->body[--c->depth], &body);
	d->capturing = false;
	int rc_end = CU_CHECK(c, c->cu.cuStreamEndCapture(c->stream, &g), err);
	if (open) {
		if (g)
			c->cu.cuGraphDestroy(g);
		return sw_errf(err, SW_EINVAL, "%s: graph_end with %d graph_if region(s) still open",
		               d->desc, open);
	}
	if (rc_end)
		return rc_end;
	cuda_graph *cg = calloc(1, sizeof(*cg));
	if (!cg) {
		c->cu.cuGraphDestroy(g);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	cg->g = g;
	if ((rc = CU_CHECK(c, c->cu.cuGraphInstantiate(&cg->x, g, 0), err))) {
		c->cu.cuGraphDestroy(g);
		free(cg);
		return rc;
	}
	*out = (rt_graph *)cg;
	return 0;
}

static int cuda_graph_launch(rt_dev *d, rt_graph *g, sw_err *err)
{
	cuda_dev *c = d->impl;
	cuda_graph *cg = (cuda_graph *)g;
	if (d->capturing)
		return sw_errf(err, SW_EINVAL, "%s: graph_launch inside a graph capture", d->desc);
	double t0 = sw_now_s();
	int rc = ctx_enter(c, err);
	if (!rc)
		rc = CU_CHECK(c, c->cu.cuGraphLaunch(cg->x, c->stream), err);
	d->stats.graph_launches++;
	d->stats.seconds_ops += sw_now_s() - t0;
	return rc;
}

static void cuda_graph_free(rt_dev *d, rt_graph *g)
{
	cuda_dev *c = d->impl;
	cuda_graph *cg = (cuda_graph *)g;
	if (!cg)
		return;
	ctx_enter(c, NULL);
	if (cg->x)
		c->cu.cuGraphExecDestroy(cg->x);
	if (cg->g)
		c->cu.cuGraphDestroy(cg->g);
	free(cg);
}

/* seconds_ops on cuda: wall time inside the calls that feed or wait on the
 * device (launches, graph launches, syncs, downloads), so that the engine's
 * "host overhead" is the rest. */
static int cuda_sync(rt_dev *d, sw_err *err)
{
	cuda_dev *c = d->impl;
	if (d->capturing)
		return refuse_capture(d, "sync", err);
	double t0 = sw_now_s();
	int rc = ctx_enter(c, err);
	if (!rc)
		rc = CU_CHECK(c, c->cu.cuStreamSynchronize(c->stream), err);
	d->stats.seconds_ops += sw_now_s() - t0;
	if (rc)
		sw_err_prefix(err, "%s: sync (a queued launch failed)", d->desc);
	return rc;
}

static void cuda_destroy(rt_dev *d)
{
	if (!d)
		return;
	cuda_dev *c = d->impl;
	if (c) {
		ctx_enter(c, NULL); /* the thread that frees it may not be the one that opened it */
		if (d->capturing) { /* abandoned mid-capture: end it, drop what it made */
			CUgraph g = NULL;
			while (c->depth > 0)
				c->cu.cuStreamEndCapture(c->body[--c->depth], &g);
			g = NULL;
			if (c->cu.cuStreamEndCapture(c->stream, &g) == CUDA_SUCCESS && g)
				c->cu.cuGraphDestroy(g);
			d->capturing = false;
		}
		if (c->stream)
			c->cu.cuStreamSynchronize(c->stream);
		for (int i = 0; i < c->n_plans; i++)
			plan_free(c, &c->plans[i]);
		free(c->plans);
		if (c->lth)
			c->lt.cublasLtDestroy(c->lth);
		if (c->ws)
			c->cu.cuMemFree(c->ws);
		for (int i = 0; i < c->n_mods; i++)
			c->cu.cuModuleUnload(c->mods[i]);
		free(c->mods);
		if (c->cond_mod)
			c->cu.cuModuleUnload(c->cond_mod);
		if (c->gemm_mod)
			c->cu.cuModuleUnload(c->gemm_mod);
		for (int i = 0; i < CUDA_MAX_IF_DEPTH; i++)
			if (c->body[i])
				c->cu.cuStreamDestroy(c->body[i]);
		if (c->stream)
			c->cu.cuStreamDestroy(c->stream);
		if (c->ctx_retained)
			c->cu.cuDevicePrimaryCtxRelease(c->dev);
		if (c->own_libs) {
			rt_lt_api_unload(&c->lt);
			rt_cu_api_unload(&c->cu);
		}
		free(c);
	}
	free(d);
}

static const struct rt_dev_ops cuda_ops = {
	/* .name = */ "cuda",
	/* .alloc = */ cuda_alloc,
	/* .free = */ cuda_free,
	/* .alloc_host = */ cuda_alloc_host,
	/* .free_host = */ cuda_free_host,
	/* .upload = */ cuda_upload,
	/* .download = */ cuda_download,
	/* .load_kernels = */ cuda_load_kernels,
	/* .supports_op = */ cuda_supports_op,
	/* .launch = */ cuda_launch,
	/* .graph_begin = */ cuda_graph_begin,
	/* .graph_end = */ cuda_graph_end,
	/* .graph_if_begin = */ cuda_graph_if_begin,
	/* .graph_if_end = */ cuda_graph_if_end,
	/* .graph_launch = */ cuda_graph_launch,
	/* .graph_free = */ cuda_graph_free,
	/* .sync = */ cuda_sync,
	/* .destroy = */ cuda_destroy,
	/* .rows_begin = */ NULL, /* graphs are fixed-shape: every tree row runs */
	/* .rows_end = */ NULL,
};

/* ---- construction ---- */

static int cuda_open(rt_dev *d, cuda_dev *c, const rt_cuda_cfg *cfg, sw_err *err)
{
	int n = 0, major = 0, minor = 0, rc;
	char name[96] = "";
	CUresult r = c->cu.cuInit(0);

	if (r == CUDA_ERROR_NO_DEVICE)
		return sw_errf(err, SW_ENOTSUP, "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)");
	if (r == CUDA_ERROR_STUB_LIBRARY)
		return sw_errf(err, SW_ENOTSUP, "no CUDA driver: libcuda.so.1 is the toolkit's stub "
		               "library, not a driver");
	if ((rc = CU_CHECK(c, r, err))) {
		sw_err_prefix(err, "no usable CUDA driver");
		if (err)
			err->code = SW_ENOTSUP;
		return SW_ENOTSUP;
	}
	if ((rc = CU_CHECK(c, c->cu.cuDriverGetVersion(&d->driver_version), err)) ||
	    (rc = CU_CHECK(c, c->cu.cuDeviceGetCount(&n), err)))
		return rc;
	if (n <= 0)
		return sw_errf(err, SW_ENOTSUP, "no CUDA device (the driver reports none)");
	if (cfg->ordinal < 0 || cfg->ordinal >= n)
		return sw_errf(err, SW_EINVAL, "CUDA device %d: only %d device(s) present", cfg->ordinal, n);
	if ((rc = CU_CHECK(c, c->cu.cuDeviceGet(&c->dev, cfg->ordinal), err)) ||
	    (rc = CU_CHECK(c, c->cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
	                                                 c->dev), err)) ||
	    (rc = CU_CHECK(c, c->cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
	                                                 c->dev), err)) ||
	    (rc = CU_CHECK(c, c->cu.cuDeviceGetAttribute(&c->smem_optin,
	                                                 CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
	                                                 c->dev), err)) ||
	    (rc = CU_CHECK(c, c->cu.cuDeviceGetName(name, (int)sizeof(name) - 1, c->dev), err)))
		return rc;
	d->arch = 10 * major + minor;
	snprintf(d->desc, sizeof(d->desc), "cuda: %s, sm_%d", name, d->arch);
	/* the primary context: the one the CUDA runtime inside cuBLASLt uses too */
	if ((rc = CU_CHECK(c, c->cu.cuDevicePrimaryCtxRetain(&c->ctx, c->dev), err)))
		return rc;
	c->ctx_retained = true;
	if ((rc = CU_CHECK(c, c->cu.cuCtxSetCurrent(c->ctx), err)) ||
	    (rc = CU_CHECK(c, c->cu.cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING), err)) ||
	    (rc = CU_CHECK(c, c->cu.cuMemAlloc(&c->ws, CUDA_WORKSPACE_BYTES), err)) ||
	    (rc = CUBLASLT_CHECK(c, c->lt.cublasLtCreate(&c->lth), err)))
		return rc;
	cond_kernel_load(d, c);
	if (cfg->simple_gemm) {
		if ((rc = CU_CHECK(c, c->cu.cuModuleLoadDataEx(&c->gemm_mod, rt_cuda_gemm_simple_ptx(), 0,
		                                              NULL, NULL), err)) ||
		    (rc = CU_CHECK(c, c->cu.cuModuleGetFunction(&c->gemm_fn[0], c->gemm_mod,
		                                                RT_CUDA_GEMM_SIMPLE_F16), err)) ||
		    (rc = CU_CHECK(c, c->cu.cuModuleGetFunction(&c->gemm_fn[1], c->gemm_mod,
		                                                RT_CUDA_GEMM_SIMPLE_BF16), err)))
			return sw_err_prefix(err, "SW_CUDA_GEMM=simple: the simple GEMM kernel (embedded "
			                     "PTX)");
		size_t l = strlen(d->desc);
		snprintf(d->desc + l, sizeof(d->desc) - l, " (GEMMs: simple kernel)");
	}
	return 0;
}

rt_dev *rt_dev_cuda_new_with_api(const rt_cu_api *cu, const rt_lt_api *lt, const rt_cuda_cfg *cfg,
                                 sw_err *err)
{
	static const rt_cuda_cfg defaults = {0};
	rt_dev *d = calloc(1, sizeof(*d));
	cuda_dev *c = calloc(1, sizeof(*c));
	if (!d || !c) {
		free(d);
		free(c);
		sw_errf(err, SW_ENOMEM, "out of memory");
		return NULL;
	}
	c->cu = *cu;
	c->lt = *lt;
	d->ops = &cuda_ops;
	d->impl = c;
	snprintf(d->desc, sizeof(d->desc), "cuda");
	if (cuda_open(d, c, cfg ? cfg : &defaults, err)) {
		c->own_libs = false; /* the caller keeps its tables */
		cuda_destroy(d);
		return NULL;
	}
	return d;
}

rt_dev *rt_dev_cuda_new(int device_ordinal, sw_err *err)
{
	rt_cuda_cfg cfg = {.ordinal = device_ordinal};
	/* SW_CUDA_GEMM: cublaslt (the default) or simple (a diagnostic, for
	 * compute-sanitizer's racecheck: dev_cuda_gemm_simple.c) */
	const char *g = getenv("SW_CUDA_GEMM");
	if (g && *g && strcmp(g, "cublaslt") != 0) {
		if (strcmp(g, "simple") != 0) {
			sw_errf(err, SW_EINVAL, "environment SW_CUDA_GEMM: expected cublaslt or simple, "
			        "found '%.60s'", g);
			return NULL;
		}
		cfg.simple_gemm = true;
	}
	rt_cu_api cu;
	rt_lt_api lt;
	if (rt_cu_api_load(&cu, err))
		return NULL;
	if (rt_lt_api_load(&lt, err)) {
		rt_cu_api_unload(&cu);
		return NULL;
	}
	rt_dev *d = rt_dev_cuda_new_with_api(&cu, &lt, &cfg, err);
	if (!d) {
		rt_lt_api_unload(&lt);
		rt_cu_api_unload(&cu);
		return NULL;
	}
	((cuda_dev *)d->impl)->own_libs = true;
	return d;
}

bool rt_dev_cuda_available(void)
{
	static int cached = -1;
	if (cached >= 0)
		return cached;
	rt_cu_api cu;
	int n = 0;
	cached = 0;
	if (rt_cu_api_load(&cu, NULL))
		return false;
	if (cu.cuInit(0) == CUDA_SUCCESS && cu.cuDeviceGetCount(&n) == CUDA_SUCCESS && n > 0)
		cached = 1;
	rt_cu_api_unload(&cu);
	return cached;
}
