/* How the kernel tests get a template into the emulator: render it with
 * gen_render (the same renderer and parameter table the NVRTC path uses),
 * compile the rendered text as C11 with -include prelude_emu.h into a cached
 * build/gen/emu/<key>-<hash>.so (gen_emu_module_build), dlopen it and take
 * <key>_emu. The tested source is byte for byte what NVRTC compiles, and no
 * Makefile rule per template is needed. */
#ifndef TESTS_KERN_UTIL_H
#define TESTS_KERN_UTIL_H

#include <stdbool.h>

#include "check.h"
#include "kernels/emu.h"
#include "gen/render.h"

/* Repository root (SW_SRC_DIR, default "."). */
const char *src_root(void);
/* Renders templates/<tmpl> with p (its NAME entry is set to the URI key
 * built from op and p), builds and loads it; fails the test on error. */
const emu_kernel *load_kernel(const char *tmpl, const char *op, gen_param *p, int np);
/* Same, for templates that draw from Philox: kernels/philox.h is prepended,
 * as the generator does (NVRTC has no include path). */
const emu_kernel *load_kernel_ex(const char *tmpl, const char *op, gen_param *p, int np, bool philox);
/* The rendered source (malloc'ed) with the optional philox.h prefix; key
 * receives the URI. */
char *render_kernel(const char *tmpl, const char *op, gen_param *p, int np, bool philox, char *key,
                    size_t nkey);
/* kernels/prelude_cuda.h as NVRTC gets it (gen_nvrtc_prelude_load, the
 * shared prelude_common.h inlined; malloc'ed); fails the test on error. */
char *load_prelude_cuda(void);
/* NVRTC for sm_80 and sm_90: one kernel compiles, zero spill bytes asserted,
 * resources printed. Skips with a message when NVRTC cannot be loaded. */
void nvrtc_check_ex(const char *tmpl, const char *op, gen_param *p, int np, bool philox);
emu_dim3 d3(unsigned x, unsigned y, unsigned z);
/* Launches and fails the test with the emulator's report on any error. */
void launch(const emu_kernel *k, emu_dim3 g, emu_dim3 b, void **args);

#endif
