/* An engine directory checked whole against its own spec echo (issue 40):
 * engine.json is a pure function of its $.spec (and the weights' and
 * drafter's metadata), so the CLI, which has the planner, re-plans it the
 * way `specwright build` did (gen_spec_parse, gen_plan_build,
 * gen_plan_write_json; no compile) and refuses any difference, naming the
 * first differing JSON path, what the plan says and what the file holds.
 * An edit that also recomputes engine.sum, which the deployable runtime
 * alone cannot tell from a build (runtime/formats/engine_files.h), is
 * refused here. kernels.cu is compared with the source the plan renders
 * wherever a source tree is found (templates/, kernels/; host-emulate
 * compiles kernels.cu only where one is); the kernel images (cubins, PTX)
 * cannot be re-derived without NVRTC and stay bound by their sha256 in
 * $.files. Not the manifest reader (runtime/engine/manifest.h), which
 * checks an engine.json against itself. */
#ifndef GEN_REPLAN_H
#define GEN_REPLAN_H

#include <stdbool.h>

#include "core/err.h"

typedef struct gen_replan_opts {
	const char *target_path; /* the target weights this run binds (their metadata is
	                          * read, as build read it); NULL: $.spec.target.path.
	                          * Unused for a target built from a shape ($.shapes.target) */
	const char *draft_path;  /* the drafter's file or directory this run binds; NULL:
	                          * $.spec.draft.path */
	const char *src_dir;     /* holds templates/ and kernels/; NULL: $SW_SRC_DIR, ".",
	                          * else the tree above the running binary, where present */
} gen_replan_opts;

typedef struct gen_replan_stats {
	double seconds;          /* the whole check, wall-clock */
	bool source_checked;     /* kernels.cu compared with the rendered source */
	char src_dir[1024];      /* the source tree it was rendered from, "" when none */
} gen_replan_stats;

/* dir/engine.json against the engine re-planned from its $.spec (o may be
 * NULL; st may be NULL): every member the plan writes equal (the build's
 * own members $.toolkit, $.draft_files and $.files aside; $.files may name
 * only the files build writes for the spec's archs), and kernels.cu equal
 * to the rendered source where a source tree is found. 0, or SW_EINVAL
 * naming the file, the first differing JSON path
 * ($.phases[3].ops[12].args[2]), expected and found. */
int gen_engine_replan_check(const char *dir, const gen_replan_opts *o, gen_replan_stats *st,
                            sw_err *err);

#endif
