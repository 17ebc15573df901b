/* The fake driver (fake_cuda.c) as the shared libraries a process loads
 * by name: libcuda.so.1 (the driver API plus the fake's state) and, built
 * from this file with -DFAKE_CUDA_LT, libcublasLt.so.13 (which links
 * libcuda.so.1 and forwards to its tables, so both share one fake: a
 * cublasLtMatmul on a capturing stream joins the driver's graph). Each
 * exported name is the real symbol runtime/device/dev_cuda.c resolves
 * (cu_syms, lt_syms: the _v2/_v3 spellings included), a one-instruction
 * x86-64 trampoline jumping through a slot filled from fake_cuda_api(), so
 * no prototype is restated here. For tests of a whole process (a bundle's
 * `run --backend cuda`) without a GPU; the semantics are the fake's.
 *
 * Environment, read once when libcuda.so.1 loads:
 *   SW_FAKE_CUDA_ENGINE  an engine directory: every entry of its
 *                        engine.json's kernels is registered, as
 *   SW_FAKE_CUDA_EMU     the engine's kernels.cu built as an emulator
 *                        module (gen_emu_module_build, e.g. host-emulate's
 *                        cache entry engine-kernels-*.so): <entry>_emu.
 *                        Both may be ':'-separated lists of equal length
 *                        (engine i with module i), for a process that
 *                        runs several engines (the GPU check's dry run).
 *   SW_FAKE_CUDA_DEVICES the device count (default 1: a "Fake H100", sm_90,
 *                        driver 13.0, cuBLASLt in the host backend's fp32
 *                        order).
 * A registration that fails is printed to stderr and makes cuInit fail. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/json.h"
#include "fake_cuda.h"
#include "gemm_simple_emu.h"

#define EXPORT __attribute__((visibility("default")))

/* (rt_cu_api field, exported symbol) as runtime/device/dev_cuda.c's cu_syms */
#define CU_LIST(X)                                                                             \
	X(cuInit, cuInit) X(cuDriverGetVersion, cuDriverGetVersion)                                \
	X(cuGetErrorName, cuGetErrorName) X(cuGetErrorString, cuGetErrorString)                    \
	X(cuDeviceGetCount, cuDeviceGetCount) X(cuDeviceGet, cuDeviceGet)                          \
	X(cuDeviceGetName, cuDeviceGetName) X(cuDeviceGetAttribute, cuDeviceGetAttribute)          \
	X(cuDeviceTotalMem, cuDeviceTotalMem_v2)                                                   \
	X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)                                      \
	X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)                                 \
	X(cuCtxSetCurrent, cuCtxSetCurrent) X(cuCtxGetCurrent, cuCtxGetCurrent)                    \
	X(cuMemAlloc, cuMemAlloc_v2) X(cuMemFree, cuMemFree_v2)                                    \
	X(cuMemHostAlloc, cuMemHostAlloc) X(cuMemFreeHost, cuMemFreeHost)                          \
	X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2)      \
	X(cuMemsetD8Async, cuMemsetD8Async) X(cuStreamCreate, cuStreamCreate)                      \
	X(cuStreamDestroy, cuStreamDestroy_v2) X(cuStreamSynchronize, cuStreamSynchronize)         \
	X(cuModuleLoadDataEx, cuModuleLoadDataEx) X(cuModuleUnload, cuModuleUnload)                \
	X(cuModuleGetFunction, cuModuleGetFunction) X(cuFuncSetAttribute, cuFuncSetAttribute)      \
	X(cuLaunchKernel, cuLaunchKernel) X(cuStreamBeginCapture, cuStreamBeginCapture_v2)         \
	X(cuStreamEndCapture, cuStreamEndCapture)                                                  \
	X(cuGraphInstantiate, cuGraphInstantiateWithFlags) X(cuGraphLaunch, cuGraphLaunch)         \
	X(cuGraphExecDestroy, cuGraphExecDestroy) X(cuGraphDestroy, cuGraphDestroy)                \
	X(cuStreamGetCaptureInfo, cuStreamGetCaptureInfo_v3)                                       \
	X(cuStreamUpdateCaptureDependencies, cuStreamUpdateCaptureDependencies_v2)                 \
	X(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph)                                \
	X(cuGraphConditionalHandleCreate, cuGraphConditionalHandleCreate)                          \
	X(cuGraphAddNode, cuGraphAddNode_v2)

/* rt_lt_api fields: the symbol is the field's name (lt_syms) */
#define LT_LIST(X)                                                                             \
	X(cublasLtCreate, cublasLtCreate) X(cublasLtDestroy, cublasLtDestroy)                      \
	X(cublasLtGetStatusString, cublasLtGetStatusString)                                        \
	X(cublasLtMatmulDescCreate, cublasLtMatmulDescCreate)                                      \
	X(cublasLtMatmulDescDestroy, cublasLtMatmulDescDestroy)                                    \
	X(cublasLtMatmulDescSetAttribute, cublasLtMatmulDescSetAttribute)                          \
	X(cublasLtMatrixLayoutCreate, cublasLtMatrixLayoutCreate)                                  \
	X(cublasLtMatrixLayoutDestroy, cublasLtMatrixLayoutDestroy)                                \
	X(cublasLtMatmulPreferenceCreate, cublasLtMatmulPreferenceCreate)                          \
	X(cublasLtMatmulPreferenceDestroy, cublasLtMatmulPreferenceDestroy)                        \
	X(cublasLtMatmulPreferenceSetAttribute, cublasLtMatmulPreferenceSetAttribute)              \
	X(cublasLtMatmulAlgoGetHeuristic, cublasLtMatmulAlgoGetHeuristic)                          \
	X(cublasLtMatmul, cublasLtMatmul)

/* a slot per symbol and the exported trampoline that jumps through it */
#define SLOT(field, sym) __attribute__((used, visibility("hidden"))) void *sw_fake_slot_##sym;
#define TRAMP(field, sym)                                                                      \
	__asm__(".text\n\t.globl " #sym "\n\t.type " #sym ", @function\n" #sym                     \
	        ":\n\tjmp *sw_fake_slot_" #sym "(%rip)\n\t.size " #sym ", .-" #sym "\n");
#define FILL(tab, field, sym) memcpy(&sw_fake_slot_##sym, &(tab).field, sizeof(void *));

#ifndef FAKE_CUDA_LT

CU_LIST(SLOT)
CU_LIST(TRAMP)

static rt_lt_api g_lt;

/* the cuBLASLt half's tables (libcublasLt.so.13 links this library) */
EXPORT const rt_lt_api *sw_fake_cuda_lt_api(void)
{
	return &g_lt;
}

/* Registers <entry>_emu of module for every kernel entry of dir/engine.json. */
static int register_engine(const char *dir, const char *module)
{
	char path[1200];
	sw_err err = {0};
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	char *text = sw_read_capped(path, SW_CAP_ENGINE_JSON, "an engine.json", &len, &err);
	if (!text) {
		fprintf(stderr, "fake libcuda.so.1: SW_FAKE_CUDA_ENGINE: %s\n", err.msg);
		return -1;
	}
	json_value *root = json_parse(text, len, path, &err);
	free(text);
	if (!root) {
		fprintf(stderr, "fake libcuda.so.1: %s\n", err.msg);
		return -1;
	}
	void *lib = dlopen(module, RTLD_NOW | RTLD_LOCAL);
	const json_value *ks = json_get(root, "kernels");
	int rc = 0, n = 0;
	if (!lib) {
		fprintf(stderr, "fake libcuda.so.1: SW_FAKE_CUDA_EMU: %s\n", dlerror());
		rc = -1;
	}
	for (size_t i = 0; !rc && ks && i < ks->n; i++) {
		const json_value *en = json_get(ks->items[i], "entries");
		for (size_t j = 0; !rc && en && j < en->n; j++) {
			char sym[300];
			snprintf(sym, sizeof(sym), "%s_emu", en->items[j]->str);
			const emu_kernel *k = dlsym(lib, sym);
			if (!k) {
				fprintf(stderr, "fake libcuda.so.1: %s: no %s (kernel entry of %s)\n", module,
				        sym, path);
				rc = -1;
			} else {
				fake_cuda_register(en->items[j]->str, k);
				n++;
			}
		}
	}
	if (!rc && !n) {
		fprintf(stderr, "fake libcuda.so.1: %s: $.kernels: no entries\n", path);
		rc = -1;
	}
	json_free(root);
	return rc; /* the module stays mapped: its kernels are registered */
}

__attribute__((constructor)) static void fake_so_init(void)
{
	const char *nd = getenv("SW_FAKE_CUDA_DEVICES");
	const char *dir = getenv("SW_FAKE_CUDA_ENGINE"), *mod = getenv("SW_FAKE_CUDA_EMU");
	fake_cuda_cfg cfg = {.n_devices = nd && *nd ? atoi(nd) : 1, .cc_major = 9, .cc_minor = 0,
	                     .name = "Fake H100 (libcuda.so.1)", .gemm_blas = true};
	fake_cuda_reset(&cfg);
	gemm_simple_emu_register(fake_cuda_register); /* SW_CUDA_GEMM=simple */
	if ((dir && *dir) || (mod && *mod)) {
		if (!dir || !*dir || !mod || !*mod) {
			fprintf(stderr, "fake libcuda.so.1: SW_FAKE_CUDA_ENGINE and SW_FAKE_CUDA_EMU go together\n");
			cfg.init_result = CUDA_ERROR_NOT_INITIALIZED;
			fake_cuda_reset(&cfg);
		} else {
			char ds[4096], ms[4096], *sd = NULL, *sm = NULL;
			snprintf(ds, sizeof(ds), "%s", dir);
			snprintf(ms, sizeof(ms), "%s", mod);
			char *d = strtok_r(ds, ":", &sd), *m = strtok_r(ms, ":", &sm);
			int bad = 0;
			for (; d && m && !bad; d = strtok_r(NULL, ":", &sd), m = strtok_r(NULL, ":", &sm))
				bad = register_engine(d, m);
			if (!bad && (d || m)) {
				fprintf(stderr, "fake libcuda.so.1: SW_FAKE_CUDA_ENGINE and SW_FAKE_CUDA_EMU list "
				        "different numbers of entries\n");
				bad = 1;
			}
			if (bad) {
				cfg.init_result = CUDA_ERROR_NOT_INITIALIZED;
				fake_cuda_reset(&cfg);
			}
		}
	}
	rt_cu_api cu;
	fake_cuda_api(&cu, &g_lt);
#define FILL_CU(field, sym) FILL(cu, field, sym)
	CU_LIST(FILL_CU)
}

#else /* libcublasLt.so.13 */

LT_LIST(SLOT)
LT_LIST(TRAMP)

const rt_lt_api *sw_fake_cuda_lt_api(void);

__attribute__((constructor)) static void fake_lt_init(void)
{
	/* libcuda.so.1, a dependency, has run its constructor */
	const rt_lt_api *lt = sw_fake_cuda_lt_api();
#define FILL_LT(field, sym) FILL(*lt, field, sym)
	LT_LIST(FILL_LT)
}

#endif
