/* NVRTC driver: compiles a rendered kernel source (prelude_cuda.h text
 * prepended, so no include path is involved) to a cubin for one sm_XX, or to
 * PTX, and reads ptxas's per-kernel resource report (registers, spills,
 * stack, shared memory, barriers) from the log; nvJitLink links relocatable
 * cubins into one. libnvrtc and libnvJitLink are dlopen'ed (one loader for
 * both), so a binary without the CUDA toolkit still links and runs; no GPU
 * is needed. The compile cache is cache.h; the emulator's build
 * emu_build.h. */
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

/* The options above as they enter a compile cache key (cache.h): bump the
 * tag when nvrtc.c's options change. No --restrict: several launches pass
 * one buffer as two arguments (rmsnorm_residual's in-place s/x, swiglu's
 * y/gate), where restrict would be undefined behaviour (issue 14, item 6). */
#define GEN_NVRTC_OPTS "--std=c++17 --ptxas-options=-v -default-device|nvrtc.c/2"
#define GEN_NVRTC_RDC_OPTS GEN_NVRTC_OPTS " --relocatable-device-code=true|kernel/1"
#define GEN_NVRTC_PTX_OPTS "--std=c++17 -default-device|ptx/2"

/* NVRTC's version as "major.minor". SW_ENOTSUP when the library lacks
 * nvrtcVersion or nvrtcGetPTX (gen_build needs both). */
int gen_nvrtc_version(gen_nvrtc *nv, char *buf, size_t n, sw_err *err);

/* PTX (malloc'ed, *n bytes without the terminating NUL) of prelude + src
 * for a virtual arch ("compute_80"): the driver's JIT fallback. */
int gen_nvrtc_ptx(gen_nvrtc *nv, const char *prelude, const char *src, const char *name,
                  const char *arch, char **ptx, size_t *n, sw_err *err);

/* The CUDA prelude as NVRTC gets it: kernels_dir/prelude_cuda.h with its
 * #include "prelude_common.h" replaced by that file's text (malloc'ed). */
char *gen_nvrtc_prelude_load(const char *kernels_dir, sw_err *err);

typedef struct gen_nvjitlink gen_nvjitlink;

/* Loads libnvJitLink (same search as libnvrtc). NULL with SW_ENOTSUP. */
gen_nvjitlink *gen_nvjitlink_open(sw_err *err);
void gen_nvjitlink_close(gen_nvjitlink *j);

/* Links n relocatable cubins for arch ("sm_90") into one (*out, malloc'ed). */
int gen_nvjitlink_cubins(gen_nvjitlink *j, const char *arch, const void *const *cubins,
                         const size_t *lens, int n, void **out, size_t *out_len, sw_err *err);

/* Parses ptxas -v output (exposed for tests). Returns the kernel count. */
int gen_nvrtc_parse_resources(const char *log, gen_kernel_res *res, int max_res);

#endif
