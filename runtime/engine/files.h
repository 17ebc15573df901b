/* An engine directory's files against the list engine.json makes of them
 * (gen/build.c writes it last): every listed file present, a regular file,
 * of its size and 64-bit FNV-1a; no kernel image (kernels.*) that is not
 * listed. An engine directory is code the backends load and run (cubins,
 * PTX, and for host-emulate kernels.cu compiled with cc): this check makes
 * them run only what `specwright build` wrote. It is an integrity check,
 * not a signature: whoever can write engine.json can rewrite the list. */
#ifndef RT_ENGINE_FILES_H
#define RT_ENGINE_FILES_H

#include "core/err.h"

/* 0, or SW_EINVAL naming the file, what was expected and what was found. */
int rt_engine_files_check(const char *dir, sw_err *err);

#endif
