/* An engine directory's files against the build's integrity record:
 * engine.sum (gen/build.c writes it after engine.json) holds engine.json's
 * size and sha256, and engine.json's $.files lists every other file with
 * its size and sha256. Every listed file present, a regular file, of its
 * size (checked before it is read) and digest; no kernel image (kernels.*)
 * that is not listed; a record of an older specwright (FNV-1a) refused,
 * asking for a rebuild. An engine directory is code the backends load and
 * run (cubins, PTX, and for host-emulate kernels.cu compiled with cc): this
 * check makes them run only what `specwright build` wrote, and any edit of
 * engine.json (which the record cannot contain: hence a file of its own)
 * refused naming the file. It is an integrity check, not a signature:
 * whoever can write engine.json can rewrite engine.sum. The deployable
 * runtime has only this (and the manifest reader's and executor's own
 * bounds); the CLI also re-plans the engine from its spec echo and refuses
 * any difference (gen/replan.h). */
#ifndef RT_FORMATS_ENGINE_FILES_H
#define RT_FORMATS_ENGINE_FILES_H

#include "core/err.h"

#define RT_ENGINE_SUM "engine.sum"
/* engine.json's members the build adds after the plan (gen/build.c
 * write_manifest): the NVRTC that compiled it, the drafter's files with
 * their sizes and sha256 (runtime/engine/manifest_files.c), the directory's
 * files. A re-plan has none of them (gen/replan.c). */
#define RT_ENGINE_TOOLKIT "toolkit"
#define RT_ENGINE_DRAFT_FILES "draft_files"
#define RT_ENGINE_FILES "files"

/* engine.sum against engine.json: 0, or an error naming the file. */
int rt_engine_sum_check(const char *dir, sw_err *err);
/* engine.sum, then $.files: 0, or SW_EINVAL naming the file, what was
 * expected and what was found. */
int rt_engine_files_check(const char *dir, sw_err *err);
/* Whether dir holds an engine this program built and nothing else: an
 * engine.sum, an engine.json with its $.files list, and no entry outside
 * engine.json, engine.sum, $.files and kernel images kernels.* (a listed
 * file may be damaged or gone, an image unlisted: "rebuild the engine"
 * must work on it). 0, or an error naming what
 * is not. `build -o` replaces only such a directory (or an empty one): a
 * user's own file is never deleted. */
int rt_engine_dir_is_built(const char *dir, sw_err *err);

#endif
