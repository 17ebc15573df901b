/* `specwright build`: spec -> engine directory. Plans (gen/plan.h), writes
 * engine.json, renders every planned kernel into kernels.cu, compiles it with
 * NVRTC for each arch (kernels.sm_XX.cubin) plus PTX for the lowest arch
 * (kernels.ptx), and records ptxas's resources in resources.json. NVRTC
 * results go through a compile cache keyed by a hash of prelude + source +
 * options + arch + NVRTC version; entries are written atomically and carry a
 * checksum, so a corrupt or truncated entry is a miss, never an error. */
#ifndef GEN_BUILD_H
#define GEN_BUILD_H

#include <stdbool.h>
#include <stdio.h>

#include "core/err.h"
#include "spec.h"

typedef struct gen_build_opts {
	const char *out_dir;   /* the engine directory (created) */
	const char *src_dir;   /* holds templates/ and kernels/; NULL: $SW_SRC_DIR or "." */
	const char *cache_dir; /* NULL: $SPECWRIGHT_CACHE, else build/cache */
	bool no_compile;       /* plan and render only: no NVRTC, no cubins */
	FILE *log;             /* progress lines, or NULL */
} gen_build_opts;

typedef struct gen_build_stats {
	int n_kernels;          /* rendered kernels */
	int n_ops;              /* planned ops, all phases */
	int cache_hits, cache_misses; /* NVRTC compiles (one per arch, plus the PTX) */
	int max_spill_bytes;    /* over every kernel and arch */
	double seconds, compile_seconds;
	char nvrtc_version[16];
} gen_build_stats;

int gen_build(const gen_spec *s, const gen_build_opts *o, gen_build_stats *st, sw_err *err);

/* kernels.cu as build writes it for plan p (templates/ and kernels/ under
 * src_dir): malloc'ed into *out, *out_len bytes; 0 or an error naming
 * the file it could not read. The CLI compares an engine's kernels.cu with
 * it (gen/replan.h). */
struct gen_plan;
int gen_build_render(const struct gen_plan *p, const char *src_dir, char **out, size_t *out_len,
                     sw_err *err);

/* The cache directory gen_build uses for o (resolves the defaults). */
const char *gen_build_cache_dir(const gen_build_opts *o);

/* The CLI command: argv[1] == "build"; returns the exit status. */
int gen_build_main(int argc, char **argv);

#endif
