/* Emulator module build (emu_build.c): C11 from a rendered kernel source,
 * run by kernels/emu.c. Not the NVRTC driver (nvrtc.h). */
#ifndef GEN_JIT_EMU_BUILD_H
#define GEN_JIT_EMU_BUILD_H

#include "core/err.h"

/* Compiles src (a rendered source) as C11 with -include prelude_emu.h
 * (found in kernels_dir) into cache_dir/<key>-<hash>.so, the hash covering
 * src, the command and the prelude files it includes (prelude_emu.h,
 * prelude_common.h, emu.h), so a stale entry is a miss; written to a temp
 * file and renamed. Loads it into *handle (dlopen). Compiler: $CC, else
 * cc. */
int gen_emu_module_build(const char *src, const char *key, const char *kernels_dir,
                         const char *cache_dir, void **handle, sw_err *err);

#endif
