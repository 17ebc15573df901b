/* NVRTC driver: compiles a rendered kernel source (prelude_cuda.h text
 * prepended, so no include path is involved) to a cubin for one sm_XX and
 * reads ptxas's per-kernel resource report (registers, spills, stack, shared
 * memory, barriers) from the log. libnvrtc is dlopen'ed, so a binary without
 * the CUDA toolkit still links and runs; no GPU is needed. */
#ifndef GEN_NVRTC_H
#define GEN_NVRTC_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"

typedef struct gen_kernel_res {
	char name[256];
	int regs, barriers;
	int stack, spill_stores, spill_loads; /* bytes */
	int smem, cmem0;                      /* bytes (static smem; cmem[0] = params) */
} gen_kernel_res;

typedef struct gen_nvrtc gen_nvrtc;

/* Loads libnvrtc ($CUDA_HOME/lib64, /usr/local/cuda/lib64, then the loader
 * path). NULL with SW_ENOTSUP in err when it cannot be found. */
gen_nvrtc *gen_nvrtc_open(sw_err *err);
void gen_nvrtc_close(gen_nvrtc *nv);

/* Compiles prelude + src for arch ("sm_80", "sm_90", ...). On success
 * *cubin (malloc'ed, may be NULL if not wanted) and res[0..*n_res) filled
 * (at most max_res kernels); *log (malloc'ed, may be NULL) gets the whole
 * compiler log. SW_EINVAL with the log in err on a compile error. */
int gen_nvrtc_compile(gen_nvrtc *nv, const char *prelude, const char *src, const char *name,
                      const char *arch, void **cubin, size_t *cubin_size, gen_kernel_res *res,
                      int max_res, int *n_res, char **log, sw_err *err);

/* The same, with rdc: a relocatable cubin (--relocatable-device-code=true)
 * that nvJitLink can link with others into one module. */
int gen_nvrtc_compile_x(gen_nvrtc *nv, const char *prelude, const char *src, const char *name,
                        const char *arch, bool rdc, void **cubin, size_t *cubin_size,
                        gen_kernel_res *res, int max_res, int *n_res, char **log, sw_err *err);

/* Parses ptxas -v output (exposed for tests). Returns the kernel count. */
int gen_nvrtc_parse_resources(const char *log, gen_kernel_res *res, int max_res);

#endif
