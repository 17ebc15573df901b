/* A fake CUDA driver and cuBLASLt for testing the cuda backend without a
 * GPU: the entry points of rt_cu_api / rt_lt_api (runtime/dev_cuda_api.h)
 * implemented on host memory. Device memory comes from emu_alloc (guard
 * zones checked), kernels are emulator kernels a test registers by name,
 * streams run work at once or record it while capturing, graphs replay in
 * dependency order with IF nodes honoured (the set-conditional kernel is
 * recognised by name and evaluated on the host), and the fake cuBLASLt
 * computes D = op(A) op(B) in cuBLASLt's column-major terms from the
 * descriptors it was given, so a wrong transpose or leading dimension
 * shows (in double, or in the host backend's fp32 order: cfg.gemm_blas).
 * It also checks what a GPU would not forgive silently (graphs that are
 * not a chain, i.e. could run concurrently; unaligned operands for the
 * chosen algorithm; handles with no node; copies inside a capture; launch
 * dimensions past the hardware limits; an entry a real module image does
 * not define; a call from a thread with no current context; a cuBLASLt
 * heuristic query while a stream captures, or an algorithm's first use
 * inside a capture; dynamic shared memory past 48 KB without the function's
 * opt-in) and records every call so tests can assert the sequence.
 * Not thread-safe: one thread at a time (any thread). */
#ifndef TESTS_FAKE_CUDA_H
#define TESTS_FAKE_CUDA_H

#include <stdbool.h>
#include <stdint.h>

#include "device/dev_cuda_api.h"
#include "kernels/emu.h"

typedef struct fake_cuda_cfg {
	int n_devices;          /* 0: cuDeviceGetCount reports none */
	int cc_major, cc_minor; /* compute capability */
	const char *name;
	bool no_conditionals;   /* a pre-12.3 driver: the conditional entry points are NULL */
	int driver_version;     /* cuDriverGetVersion; 0: 13000 (12020 with no_conditionals) */
	int lt_bad_algos;       /* the first N algorithms of every heuristic answer refuse to
	                         * run (CUBLAS_STATUS_NOT_SUPPORTED at cublasLtMatmul) */
	CUresult init_result;   /* what cuInit returns */
	/* cuBLASLt's sums: false, in double (an exact-ish reference); true, in
	 * fp32 through cblas_sgemm in the order the host backend uses, so a
	 * GEMM here is bit-identical to rt_dev_host's (engines compared token
	 * for token across backends) */
	bool gemm_blas;
} fake_cuda_cfg;

/* Forgets all state (memory, modules, graphs, the call log, registered
 * kernels, injected failures) and applies cfg (NULL: one sm_90 device). */
void fake_cuda_reset(const fake_cuda_cfg *cfg);
/* Fills the tables with the fake's entry points. */
void fake_cuda_api(rt_cu_api *cu, rt_lt_api *lt);

/* cuModuleGetFunction(name) will resolve to k in any module whose image
 * defines name (an ELF cubin's symbol strings, PTX's ".entry name"), or in
 * any module loaded from a stand-in PTX text without .entry lines. */
void fake_cuda_register(const char *name, const emu_kernel *k);

/* The call log: "cuName" or "cuName detail" (detail: the kernel name of a
 * launch, "cubin"/"ptx" for a module load, "conditional" for a node add,
 * "body" for a capture into an existing graph, the byte count of a
 * cuMemcpy*, "algo I" for cublasLtMatmul (the heuristic's I-th candidate),
 * "thread T" for cuCtxSetCurrent (T: 0 for the first thread that called
 * it, 1 for the next, ...)). Queries (cuCtxGetCurrent, attributes, names,
 * versions) are not logged. Unbounded. */
int fake_cuda_n_calls(void);
const char *fake_cuda_call(int i);
/* Entries matching pat ("cuName" matches "cuName ..." too). */
int fake_cuda_count(const char *pat);
/* Index of the first entry at or after from that matches pat, or -1. */
int fake_cuda_find(const char *pat, int from);
/* Whether the log holds pats[0..n) in this order (not necessarily adjacent);
 * on failure *missing (if non-NULL) is the first pattern not found. */
bool fake_cuda_has_seq(const char *const *pats, int n, const char **missing);
void fake_cuda_print_log(void);

/* What the fake objected to last (empty when nothing). */
const char *fake_cuda_last_error(void);
/* Device allocations still live (leak checks). */
int fake_cuda_live_allocs(void);
/* IF nodes evaluated by graph launches since the reset: bodies run and
 * bodies skipped. */
void fake_cuda_if_counts(uint64_t *taken, uint64_t *skipped);
/* Makes the count-th next call named call return r (count 1: the next). */
void fake_cuda_fail(const char *call, CUresult r, int count);

#endif
