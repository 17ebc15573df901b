/* What each planned op touches: for every argument, how many bytes past its
 * offset the op reads or writes, as a function of the op kind, its kernel's
 * specialisation constants, its launch grid and (GEMM) m/n/k. The manifest
 * loader (manifest.c) proves each range inside its buffer before anything
 * runs, on every backend. One rule per op kind, each naming the template
 * lines it mirrors; not the executor and not the planner (gen/plan.c sizes
 * the buffers these ranges must fit). */
#ifndef RT_EXTENT_H
#define RT_EXTENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "manifest.h"

typedef struct rt_extent {
	int64_t bytes[RT_OP_MAX_ARGS]; /* bytes from the arg's offset; -1: a by-value scalar */
	unsigned whole;                /* bit a: arg a spans every layer slice from its own
	                                * (kv_commit), not one slice */
	unsigned writes;               /* bit a: the op writes through arg a */
	unsigned alias_ok;             /* bit a: arg a may overlap arg a - 1 (in-place ops) */
	unsigned alias_any;            /* bits a, c both set: args a and c may overlap (an op
	                                * whose every element is read and then written by
	                                * one thread, e.g. rmsnorm_residual's rows) */
	char what[RT_OP_MAX_ARGS][96]; /* how bytes[a] was reached, for messages */
} rt_extent;

/* The extents of op x of manifest m. Returns 0, or -1 with why (a full
 * sentence after "op NAME: ") saying what was expected and found when the
 * op is not one this runtime can bound: an unknown kind, a kernel of another
 * template, a wrong argument count or scalar position, a missing or
 * out-of-range constant, a block or grid the kernel does not index safely. */
int rt_extent_op(const rt_manifest *m, const rt_engine_pop *x, rt_extent *out, char *why,
                 size_t n);

#endif
