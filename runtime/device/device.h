/* The device interface: what the engine executor (runtime/engine/engine.c)
 * needs of a machine, as a small vtable in the ggml-backend manner. Two
 * backends: `host` (dev_host.c: native kernels/ref ops, or the generated
 * kernels in the SIMT emulator, compiled by a caller-given rt_emu_compile_fn)
 * and `cuda` (dev_cuda.c: driver API and cuBLASLt, both dlopen'ed; no
 * NVRTC: modules come from the engine's cubin or PTX). Not the op schedule (engine.h) and not the
 * kernels themselves.
 *
 * Device addresses are rt_dptr (a CUdeviceptr on cuda, a host address on
 * host). An op record names everything a launch needs, with its argument
 * values already resolved, so replaying a recorded graph is a loop over
 * records with no lookups. */
#ifndef RT_DEVICE_H
#define RT_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef uint64_t rt_dptr;

#define RT_OP_MAX_ARGS 16
#define RT_OP_MAX_PARAMS 16

/* RT_Q8_0 (GEMMs only): A fp16, W in GGUF Q8_0 blocks (host_gemm.h);
 * RT_Q8_0_A8 (GEMMs only): the same operands, A rounded to int8 per block of
 * 32 by the GEMM and the block products summed in integers (host_gemm.h
 * hg_gemm_q8a8): other numbers, so a backend without that GEMM refuses it;
 * RT_GGUF_A8 (GEMMs only): A fp16 rounded to int8 as Q8_0_A8's, W in its
 * GGUF file's own blocks, of the type rt_op.wtype names (host_gemm.h
 * hg_gemm_gguf_a8) */
enum rt_dtype { RT_BF16 = 0, RT_FP16 = 1, RT_F32 = 2, RT_Q8_0 = 3, RT_Q8_0_A8 = 4,
                RT_GGUF_A8 = 5 };

/* Whether dt's GEMM weights are GGUF Q8_0 blocks (q8_0 and q8_0_a8). */
static inline bool rt_dtype_q8(int dt)
{
	return dt == RT_Q8_0 || dt == RT_Q8_0_A8;
}

/* One kernel parameter as engine.json states it (the template constants the
 * kernel was rendered with): what the native host backend needs to run the
 * same op with kernels/ref code. */
typedef struct rt_kparam {
	char name[24];
	int64_t i;   /* ints */
	double f;    /* floats (also set for ints) */
} rt_kparam;

/* A rendered kernel of the engine (one per engine.json "kernels" entry). */
typedef struct rt_kernel_info {
	char uri[192];
	char tmpl[64];      /* "tree_attention.cu.tmpl" */
	int n_params;
	rt_kparam params[RT_OP_MAX_PARAMS];
	uint64_t *mask;     /* tree attention MASKED: T * MASK_WORDS rows (engine-owned) */
	int dyn_smem;       /* dynamic shared memory bytes its launches provide */
} rt_kernel_info;

enum rt_op_kind {
	RT_OP_KERNEL = 0, /* a generated kernel launch */
	RT_OP_GEMM,       /* C (m,n) f32 = A (m,k) x W^T (W (n,k)); A, W of dtype */
	RT_OP_MEMSET,     /* bytes zeroed at args[0] */
};

/* One launch, resolved: pointers are final device addresses (arena base +
 * offset + layer stride), scalars are values. argv[i] points at argval[i]
 * (the cuLaunchKernel convention), so a backend passes argv as is. */
typedef struct rt_op {
	int kind;                 /* enum rt_op_kind */
	char name[48];            /* planner's op name ("wq", "attention") */
	char op[32];              /* op type ("rmsnorm_residual", "tree_attention") */
	char entry[208];          /* KERNEL: the __global__ name (uri + entry suffix) */
	const rt_kernel_info *kinfo; /* KERNEL: its params (host native uses them) */
	void *fn;                 /* KERNEL: the backend's handle (set by load_kernels) */
	unsigned grid[3], block[3];
	int n_args;
	uint64_t argval[RT_OP_MAX_ARGS];
	void *argv[RT_OP_MAX_ARGS];
	int64_t m, n, k;          /* GEMM */
	int dtype;                /* GEMM: enum rt_dtype of A and W (Q8_0, Q8_0_A8: of W, A fp16) */
	int wtype;                /* GEMM under RT_GGUF_A8: W's GGUF type (enum ggml_dtype);
	                           * the host backend's repack (host_repack.h) may set it
	                           * on an RT_Q8_0_A8 GEMM too (HG_GGUF_Q8_0R); KERNEL
	                           * embedding_gguf on a gguf_blocks device: its table's
	                           * type, the file's blocks there (else -1: planes) */
	int64_t bytes;            /* MEMSET */
	unsigned dyn_smem;        /* KERNEL: dynamic shared memory bytes the launch provides */
	int layer;                /* -1, or the layer this launch serves (diagnostics) */
	/* Inside a rows region (rt_dev_ops.rows_begin; host native only): the
	 * region's planned rows and the live ones this replay runs, 0 outside.
	 * An op whose row count (a GEMM's m, a kernel's rows) equals rows_full
	 * runs rows_live rows; the rest stay as the last forward left them. */
	int rows_full, rows_live;
} rt_op;

/* Re-point argv at argval (after copying an rt_op by value). */
static inline void rt_op_fix_argv(rt_op *o)
{
	for (int i = 0; i < RT_OP_MAX_ARGS; i++)
		o->argv[i] = &o->argval[i];
}

/* Prefetches an op record into the cache (timing only): a run loop asks
 * for the next record while this one runs, as a decode step's weight
 * stream evicts them all between steps. */
static inline void rt_op_prefetch(const rt_op *o)
{
	for (size_t b = 0; b < sizeof(*o); b += 64)
		__builtin_prefetch((const char *)o + b, 0, 3);
}

typedef struct rt_graph rt_graph;
typedef struct rt_dev rt_dev;

/* Per-launch timing a backend may collect (bench, tests/gpu). */
typedef struct rt_dev_stats {
	uint64_t launches, gemms, memsets, graph_launches, uploads, downloads;
	double seconds_ops; /* wall time spent inside op execution (host backends) */
} rt_dev_stats;

struct rt_dev_ops {
	const char *name;
	/* Device memory: zero-filled. */
	int (*alloc)(rt_dev *d, size_t bytes, rt_dptr *out, sw_err *err);
	void (*free)(rt_dev *d, rt_dptr p);
	/* Host memory the backend can copy to/from fastest (pinned on cuda); NULL slot: malloc. */
	void *(*alloc_host)(rt_dev *d, size_t bytes);
	void (*free_host)(rt_dev *d, void *p);
	/* Synchronous copies. Refused while capturing. */
	int (*upload)(rt_dev *d, rt_dptr dst, const void *src, size_t bytes, sw_err *err);
	int (*download)(rt_dev *d, void *dst, rt_dptr src, size_t bytes, sw_err *err);
	/* Makes every KERNEL op's fn valid: engine_dir holds kernels.sm_XX.cubin,
	 * kernels.ptx and kernels.cu. ops[0..n) are filled in place. Also readies
	 * every GEMM op for capture (cuda: its cuBLASLt plan is made and tried
	 * once, eagerly, on the op's own operands, writing its output): a GEMM
	 * shape neither readied here nor run eagerly before is refused inside a
	 * capture. */
	int (*load_kernels)(rt_dev *d, const char *engine_dir, rt_op *ops, int n, sw_err *err);
	/* Whether this backend can execute op (host native: a registry entry). */
	bool (*supports_op)(rt_dev *d, const rt_op *op);
	/* Enqueues one op (KERNEL, GEMM or MEMSET); while capturing it is
	 * recorded instead. Errors of an asynchronous device surface at sync. */
	int (*launch)(rt_dev *d, const rt_op *op, sw_err *err);
	/* Capture: ops launched between begin and end form a graph; inside, no
	 * alloc, upload, download or sync (refused with an error). */
	int (*graph_begin)(rt_dev *d, sw_err *err);
	int (*graph_end)(rt_dev *d, rt_graph **out, sw_err *err);
	/* Conditional region inside a capture: the ops up to graph_if_end run
	 * only when the int32 at flag is nonzero at that point of the replay (a
	 * device-side decision; CUDA conditional IF node). Optional (NULL). */
	int (*graph_if_begin)(rt_dev *d, rt_dptr flag, sw_err *err);
	int (*graph_if_end)(rt_dev *d, sw_err *err);
	int (*graph_launch)(rt_dev *d, rt_graph *g, sw_err *err);
	void (*graph_free)(rt_dev *d, rt_graph *g);
	int (*sync)(rt_dev *d, sw_err *err);
	void (*destroy)(rt_dev *d);
	/* Rows region (optional, NULL: every op runs its planned shape, as on
	 * cuda, whose graphs are fixed-shape): the ops up to rows_end, planned
	 * for n_rows tree rows, run on the first L rows only, L = min(cap, 1 +
	 * the last i < n_rows with the int32 tokens[i] >= 0), at least 1, read
	 * when the region starts (at that point of a replay while capturing).
	 * Exact for a tree forward: rows past the last present node are absent
	 * nodes, which no present node attends to and verification never reads.
	 * Regions do not nest. */
	int (*rows_begin)(rt_dev *d, rt_dptr tokens, int n_rows, int cap, sw_err *err);
	int (*rows_end)(rt_dev *d, sw_err *err);
};

struct rt_dev {
	const struct rt_dev_ops *ops;
	char desc[128];      /* "host (native)", "cuda: NVIDIA H100 80GB HBM3, sm_90" */
	int arch;            /* cuda: 80, 90, ...; host: 0 */
	int driver_version;  /* cuda: cuDriverGetVersion (13000 = 13.0); host: 0 */
	/* NULL when graph_if regions work; else why not (a CUDA driver older
	 * than 12.4): the engine then runs its gated phases eagerly */
	const char *no_cond;
	/* GGUF-typed GEMM weights (a gguf_a8 engine's): true, the backend runs
	 * them itself on the file's blocks as RT_OP_GEMM (host native's int8
	 * GEMMs, host_gemm.h); false, the engine repacks them at load into the
	 * planes its generated gemv_gguf kernels read (cuda, host emulate) */
	bool gguf_blocks;
	bool capturing;
	rt_dev_stats stats;
	void *impl;          /* backend state */
};

enum rt_host_mode { RT_HOST_NATIVE = 0, RT_HOST_EMULATE = 1 };

/* Compiles a rendered kernel source (kernels.cu) for the SIMT emulator with
 * -include kernels_dir/prelude_emu.h into a shared object cached under
 * cache_dir (key names the entry) and dlopens it into *handle. The device
 * layer does not compile: the generator's gen_emu_module_build (gen/) is
 * this function, and the caller that links the generator passes it. */
typedef int (*rt_emu_compile_fn)(const char *src, const char *key, const char *kernels_dir,
                                 const char *cache_dir, void **handle, sw_err *err);

/* How to open a device; NULL or zeroed fields take the defaults. */
typedef struct rt_dev_opts {
	const char *src_dir;      /* holds kernels/ (prelude_emu.h): NULL: $SW_SRC_DIR or "." */
	const char *cache_dir;    /* emulate builds: NULL: $SPECWRIGHT_CACHE or build/cache */
	rt_emu_compile_fn emu_compile; /* host-emulate's compiler; NULL: host-emulate is
	                                * refused (host native and cuda need none) */
} rt_dev_opts;

/* Host backend, native or emulate (see rt_dev_opts). */
rt_dev *rt_dev_host_new(int mode, const rt_dev_opts *o, sw_err *err);

/* CUDA backend: dlopen("libcuda.so.1") and libcublasLt; NULL with SW_ENOTSUP
 * and a message saying what is missing when there is no driver or device.
 * Any thread may call the device, one thread at a time: each call makes
 * the device's primary context current on the calling thread. */
rt_dev *rt_dev_cuda_new(int device_ordinal, sw_err *err);
/* True when a CUDA driver with at least one device can be opened. */
bool rt_dev_cuda_available(void);

void rt_dev_free(rt_dev *d);

/* "host", "host-emulate", "cuda", or "auto" (cuda when available, else
 * host); o as for rt_dev_host_new (NULL: defaults, no emulator compiler). */
rt_dev *rt_dev_open(const char *backend, const rt_dev_opts *o, sw_err *err);

#endif
