/* The CUDA driver and cuBLASLt entry points the cuda backend uses, as two
 * function tables filled by dlsym (rt_cu_api_load, rt_lt_api_load) or by a
 * test's fake driver (tests/util/fake_cuda.c), so the backend runs the same
 * code against either. Only the handful of types these calls need are
 * declared here, with the layouts of CUDA 13's cuda.h and cublasLt.h
 * (tests/gpu/run.sh checks them against the real headers); no CUDA header is
 * needed to build. Not the backend itself (dev_cuda.c). */
#ifndef RT_DEV_CUDA_API_H
#define RT_DEV_CUDA_API_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "device.h"
#include "core/err.h"

/* ---- driver API types (cuda.h) ---- */
typedef int CUresult; /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef uint64_t CUgraphConditionalHandle;
typedef int CUjit_option;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_STUB_LIBRARY = 34,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_LAUNCH_FAILED = 719,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
	CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
	CUDA_ERROR_UNKNOWN = 999,
};

enum {
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
	CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
	CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
	CU_STREAM_NON_BLOCKING = 1,
	CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
	CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
	CU_STREAM_CAPTURE_MODE_RELAXED = 2,
	CU_STREAM_CAPTURE_STATUS_NONE = 0,
	CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
	CU_STREAM_SET_CAPTURE_DEPENDENCIES = 1,
	CU_JIT_INFO_LOG_BUFFER = 3,
	CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
	CU_JIT_ERROR_LOG_BUFFER = 5,
	CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
	CU_GRAPH_NODE_TYPE_KERNEL = 0,
	CU_GRAPH_NODE_TYPE_MEMSET = 2,
	CU_GRAPH_NODE_TYPE_CONDITIONAL = 13,
	CU_GRAPH_COND_TYPE_IF = 0,
	CU_GRAPH_COND_ASSIGN_DEFAULT = 1,
};

/* An edge annotation (cuda.h CUgraphEdgeData); all zero = full dependency. */
typedef struct CUgraphEdgeData {
	unsigned char from_port, to_port, type, reserved[5];
} CUgraphEdgeData;

typedef struct CUDA_CONDITIONAL_NODE_PARAMS {
	CUgraphConditionalHandle handle;
	int type;              /* CU_GRAPH_COND_TYPE_IF */
	unsigned size;         /* bodies: 1 (IF) */
	CUgraph *phGraph_out;  /* set by the driver: the body graph(s), driver-owned */
	CUcontext ctx;
} CUDA_CONDITIONAL_NODE_PARAMS;

/* cuGraphAddNode's polymorphic parameter block (256 bytes); only the
 * conditional member is used here, the rest is the union's padding. */
typedef struct CUgraphNodeParams {
	int type;              /* CU_GRAPH_NODE_TYPE_* */
	int reserved0[3];
	union {
		long long reserved1[29];
		CUDA_CONDITIONAL_NODE_PARAMS conditional;
	};
	long long reserved2;
} CUgraphNodeParams;

/* ---- cuBLASLt types (cublasLt.h, library_types.h, cublas_api.h) ---- */
typedef int cublasStatus_t; /* CUBLAS_STATUS_SUCCESS = 0 */
typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct { uint64_t data[32]; } cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t *cublasLtMatmulDesc_t;
typedef struct { uint64_t data[8]; } cublasLtMatrixLayoutOpaque_t;
typedef cublasLtMatrixLayoutOpaque_t *cublasLtMatrixLayout_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtMatmulPreferenceOpaque_t *cublasLtMatmulPreference_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
	cublasLtMatmulAlgo_t algo;
	size_t workspaceSize;
	cublasStatus_t state;
	float wavesCount;
	int reserved[4];
} cublasLtMatmulHeuristicResult_t;

enum {
	CUBLAS_STATUS_SUCCESS = 0,
	CUBLAS_STATUS_NOT_INITIALIZED = 1,
	CUBLAS_STATUS_INVALID_VALUE = 7,
	CUBLAS_STATUS_NOT_SUPPORTED = 15,
	CUDA_R_32F = 0,
	CUDA_R_16F = 2,
	CUDA_R_16BF = 14,
	CUBLAS_COMPUTE_32F = 68,
	CUBLAS_OP_N = 0,
	CUBLAS_OP_T = 1,
	CUBLASLT_MATMUL_DESC_TRANSA = 3,
	CUBLASLT_MATMUL_DESC_TRANSB = 4,
	CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

/* The driver entry points, named as the un-suffixed API names; the comment
 * gives the versioned symbol dlsym looks up (cuda.h #defines the plain name
 * to it, so these are the ABI the CUDA 12.3+ headers compile against). */
typedef struct rt_cu_api {
	void *lib;  /* dlopen handle (NULL for a fake) */
	CUresult (*cuInit)(unsigned flags);
	CUresult (*cuDriverGetVersion)(int *version);
	CUresult (*cuGetErrorName)(CUresult r, const char **s);
	CUresult (*cuGetErrorString)(CUresult r, const char **s);
	CUresult (*cuDeviceGetCount)(int *n);
	CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
	CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
	CUresult (*cuDeviceGetAttribute)(int *v, int attrib, CUdevice dev);
	CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev);            /* _v2 */
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
	CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);                   /* _v2 */
	CUresult (*cuCtxSetCurrent)(CUcontext ctx);
	CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
	CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t bytes);                  /* _v2 */
	CUresult (*cuMemFree)(CUdeviceptr p);                                  /* _v2 */
	CUresult (*cuMemHostAlloc)(void **p, size_t bytes, unsigned flags);
	CUresult (*cuMemFreeHost)(void *p);
	CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t n, CUstream s); /* _v2 */
	CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t n, CUstream s);       /* _v2 */
	CUresult (*cuMemsetD8Async)(CUdeviceptr p, unsigned char v, size_t n, CUstream s);
	CUresult (*cuStreamCreate)(CUstream *s, unsigned flags);
	CUresult (*cuStreamDestroy)(CUstream s);                               /* _v2 */
	CUresult (*cuStreamSynchronize)(CUstream s);
	CUresult (*cuModuleLoadDataEx)(CUmodule *m, const void *image, unsigned n_opts,
	                               CUjit_option *opts, void **vals);
	CUresult (*cuModuleUnload)(CUmodule m);
	CUresult (*cuModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
	CUresult (*cuFuncSetAttribute)(CUfunction f, int attrib, int value);
	CUresult (*cuLaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
	                           unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
	                           void **extra);
	CUresult (*cuStreamBeginCapture)(CUstream s, int mode);                /* _v2 */
	CUresult (*cuStreamEndCapture)(CUstream s, CUgraph *g);
	CUresult (*cuGraphInstantiate)(CUgraphExec *x, CUgraph g, unsigned long long flags); /* WithFlags */
	CUresult (*cuGraphLaunch)(CUgraphExec x, CUstream s);
	CUresult (*cuGraphExecDestroy)(CUgraphExec x);
	CUresult (*cuGraphDestroy)(CUgraph g);
	/* Conditional nodes: the entry points appeared with driver 12.3; the
	 * backend uses them from 12.4 on (RT_CUDA_COND_MIN_DRIVER). NULL when
	 * the driver lacks them. */
	CUresult (*cuStreamGetCaptureInfo)(CUstream s, int *status, uint64_t *id, CUgraph *g,
	                                   const CUgraphNode **deps, const CUgraphEdgeData **edges,
	                                   size_t *n_deps);                     /* _v3 */
	CUresult (*cuStreamUpdateCaptureDependencies)(CUstream s, CUgraphNode *deps,
	                                              const CUgraphEdgeData *edges, size_t n,
	                                              unsigned flags);          /* _v2 */
	CUresult (*cuStreamBeginCaptureToGraph)(CUstream s, CUgraph g, const CUgraphNode *deps,
	                                        const CUgraphEdgeData *edges, size_t n, int mode);
	CUresult (*cuGraphConditionalHandleCreate)(CUgraphConditionalHandle *h, CUgraph g,
	                                           CUcontext ctx, unsigned def, unsigned flags);
	CUresult (*cuGraphAddNode)(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
	                           const CUgraphEdgeData *edges, size_t n,
	                           CUgraphNodeParams *params);                  /* _v2 */
} rt_cu_api;

typedef struct rt_lt_api {
	void *lib;  /* dlopen handle (NULL for a fake) */
	cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t *h);
	cublasStatus_t (*cublasLtDestroy)(cublasLtHandle_t h);
	const char *(*cublasLtGetStatusString)(cublasStatus_t s);
	cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t *d, int compute, int scale);
	cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t d);
	cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t d, int attr,
	                                                 const void *buf, size_t n);
	cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t *l, int type,
	                                             uint64_t rows, uint64_t cols, int64_t ld);
	cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t l);
	cublasStatus_t (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t *p);
	cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t p);
	cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t p, int attr,
	                                                       const void *buf, size_t n);
	cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(
		cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
		cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
		cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t *res,
		int *returned);
	cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
	                                 const void *alpha, const void *a, cublasLtMatrixLayout_t la,
	                                 const void *b, cublasLtMatrixLayout_t lb, const void *beta,
	                                 const void *c, cublasLtMatrixLayout_t lc, void *d,
	                                 cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *algo,
	                                 void *ws, size_t ws_bytes, CUstream s);
} rt_lt_api;

/* dlopen("libcuda.so.1") and resolve every entry point (the conditional-node
 * ones may stay NULL). SW_ENOTSUP "no CUDA driver: ..." when it cannot. */
int rt_cu_api_load(rt_cu_api *api, sw_err *err);
/* libcublasLt.so.13, .12, then unversioned, then $CUDA_HOME/lib64. */
int rt_lt_api_load(rt_lt_api *api, sw_err *err);
/* Drop a loaded table. The libraries themselves stay mapped (the driver and
 * cuBLASLt's runtime keep threads and atexit state past their last call). */
void rt_cu_api_unload(rt_cu_api *api);
void rt_lt_api_unload(rt_lt_api *api);

typedef struct rt_cuda_cfg {
	int ordinal;      /* device */
	bool simple_gemm; /* GEMMs by the plain kernel, not cuBLASLt (SW_CUDA_GEMM=simple) */
} rt_cuda_cfg;

/* The backend over given tables (copied; a fake's tables stay the caller's
 * to keep alive while the device lives). rt_dev_cuda_new is this over the
 * dlopen'ed tables. */
rt_dev *rt_dev_cuda_new_with_api(const rt_cu_api *cu, const rt_lt_api *lt, const rt_cuda_cfg *cfg,
                                 sw_err *err);

/* The entry name of the set-conditional kernel: args (handle, const int32 *flag). */
#define RT_CUDA_SET_COND_ENTRY "sw_graph_set_cond"
/* Its CUDA C is kernels/graph_set_cond.cuh, which gen/build.c appends to
 * every engine's kernels.cu, so the engine's cubins and PTX carry it
 * (compiled by the build's NVRTC for the engine's archs) and the backend
 * takes it from the engine's module. */
/* Its embedded PTX: the backend loads it at init (cuModuleLoadDataEx, which
 * JIT-compiles PTX) for modules without it (engines built before it was
 * part of kernels.cu, and tests); the runtime never needs NVRTC. */
const char *rt_cuda_cond_ptx(void);
/* Conditional IF nodes are used from this driver on (cuDriverGetVersion). */
#define RT_CUDA_COND_MIN_DRIVER 12040

#endif
