/* The kernel tests' harness, in the spirit of ggml's test-backend-ops: how
 * a template gets into the emulator, and how its outputs are compared with
 * its specification (kernels/ref, or the host decoder's rule).
 * Loading: render the template with gen_render (the same renderer and
 * parameter table the NVRTC path uses), compile the rendered text as C11
 * with -include prelude_emu.h into a cached build/gen/emu/<key>-<hash>.so
 * (gen_emu_module_build), dlopen it and take <key>_emu. The tested source
 * is byte for byte what NVRTC compiles, and no Makefile rule per template
 * is needed.
 * Comparing: a test fills the inputs, runs the specification on them, puts
 * the kernel's outputs in emu_alloc buffers (guard zones before and after
 * each, checked by every launch: a write outside an output fails the
 * launch), launches and hands each output to kern_expect: exact for
 * integer, decision and bit-pattern outputs; for floats a per-element bound
 * the test derives from the dtype and the op (kern_unit_roundoff), NaN and
 * inf compared explicitly, then the NMSE against what those bounds allow.
 * A mismatch fails the test naming the case, the output, its shape, the
 * first mismatching element as a multi-index, both values and the count. */
#ifndef TESTS_KERN_UTIL_H
#define TESTS_KERN_UTIL_H

#include <stdbool.h>

#include "check.h"
#include "kernels/emu.h"
#include "gen/jit/nvrtc.h"
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
/* libnvrtc, or the calling test skipped, saying so, when it cannot be
 * loaded. */
gen_nvrtc *nvrtc_or_skip(const char *who);
/* kernels/prelude_cuda.h as NVRTC gets it (gen_nvrtc_prelude_load, the
 * shared prelude_common.h inlined; malloc'ed); fails the test on error. */
char *load_prelude_cuda(void);
/* NVRTC for sm_80 and sm_90: one kernel compiles, zero spill bytes asserted,
 * resources printed. Skips with a message when NVRTC cannot be loaded. */
void nvrtc_check_ex(const char *tmpl, const char *op, gen_param *p, int np, bool philox);
emu_dim3 d3(unsigned x, unsigned y, unsigned z);

/* ---- comparison ---- */
typedef enum kern_dtype {
	KERN_F32, /* float */
	KERN_I32, /* int32_t: token ids, counts, decisions */
	KERN_U32, /* uint32_t */
	KERN_U16, /* uint16_t: bf16/fp16 storage, compared as bit patterns */
	KERN_U8,  /* uint8_t: flags */
} kern_dtype;

typedef struct kern_out {
	const char *name;     /* the output in messages: "y", "k_cache" */
	kern_dtype type;
	const void *got;      /* the kernel's output */
	const void *want;     /* exact comparison: the specification's output, same type */
	const double *ref;    /* bounded (KERN_F32 only): the specification's value ... */
	const double *bound;  /* ... and the bound on |got - ref| of each element */
	size_t n;             /* elements */
	int dims[4];          /* the shape, outermost first ({0}: flat), for the messages */
} kern_out;

/* Exact when o->bound is NULL: element-wise equality of the representation
 * (KERN_F32 bit patterns: -0 differs from +0, a NaN equals only the same
 * NaN). Bounded otherwise: where ref is NaN got must be NaN, where ref is
 * an infinity got must be the same one, elsewhere got must be finite and
 * within bound; then the NMSE over the finite elements against the NMSE
 * the bounds imply (check_close). Fails the test on any mismatch. */
void kern_expect(const char *what, const kern_out *o);
/* The same, exact only, for tests that tally mismatches over many cases
 * and assert the total: prints the first mismatch and returns the count. */
size_t kern_mismatches(const char *what, const kern_out *o);
/* Shorthands for one flat output. */
void kern_expect_equal(const char *what, const char *name, kern_dtype type, const void *got,
                       const void *want, size_t n);
void kern_expect_close(const char *what, const char *name, const float *got, const double *ref,
                       const double *bound, size_t n);
/* Launches k (no dynamic shared memory), then kern_expect on each output:
 * the whole step for a test whose reference ran on the inputs first. */
void kern_launch_expect(const char *what, const emu_kernel *k, emu_dim3 g, emu_dim3 b,
                        void **args, const kern_out *outs, int n_outs);

/* The unit roundoff of the type a value is stored in (2^-24 for f32; for
 * bf16 2^-8, for fp16 2^-11: name them with is_f16), for bounds derived
 * from the dtype. */
double kern_unit_roundoff(kern_dtype type, int is_f16);
/* Launches and fails the test with the emulator's report on any error. */
void launch(const emu_kernel *k, emu_dim3 g, emu_dim3 b, void **args);
/* The Philox seed as verify and tree_expand read it at run time: two words
 * (low, high) in an emu_alloc buffer (kernels/engine_state.h RT_SP_SEED_LO,
 * RT_SP_SEED_HI); emu_free it. */
uint32_t *kern_seed(uint64_t seed);

#endif
