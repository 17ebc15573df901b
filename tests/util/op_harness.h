/* The op tests' harness (tests/test_ops.c and the kernel tests that keep a
 * file of their own), in the spirit of ggml's test-backend-ops: one case is
 * an op of kernels/ops.def with its template constants, its arguments in the
 * template's order and the outputs its specification says, and the
 * harness does the rest: renders the op's template (the Philox prefix where
 * the op list says so), builds and loads it into the emulator
 * (kern_util.h's load_kernel_ex), allocates every buffer argument with guard
 * zones (emu_alloc, checked by the launch), launches, compares each
 * registered output (exact, or within the case's derived bounds, NaN and inf
 * explicitly, then the NMSE: kern_expect) and frees everything at the end.
 * The ops whose tests build their own launches (trees, iterations) take
 * their kernels through oh_load, which reads the template and the prefix
 * from the op list too. Includes CMocka (and what it needs before it).
 * Not thread-safe; one case at a time. */
#ifndef TESTS_OP_HARNESS_H
#define TESTS_OP_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kern_util.h"
#include "kernels/emu.h"
#include "kernels/ops.h"

/* The awkward sizes every op with a free size is run at (a row length, a
 * width, a count): one element, a warp -1 and +1, odd sizes past several
 * warps and blocks, SmolLM2's width, and one past a 4096 vector boundary. */
extern const int oh_shapes[];
extern const int oh_n_shapes;

#define OH_MAX_PARAMS 24
#define OH_MAX_ARGS 16
#define OH_MAX_OUTS 8
#define OH_MAX_HOST 16

typedef struct oh_case {
	int op;                          /* SW_OP_* */
	char what[160];                  /* the case in messages */
	gen_param p[OH_MAX_PARAMS];      /* p[0] is NAME */
	int np;
	void *argv[OH_MAX_ARGS];         /* the launch's void **args */
	void *slot[OH_MAX_ARGS];         /* each buffer argument's pointer (argv points here) */
	uint64_t val[OH_MAX_ARGS];       /* each by-value argument (argv points here) */
	int n_args;
	void *bufs[OH_MAX_ARGS];         /* oh_alloc'ed, freed by oh_end */
	int n_bufs;
	kern_out outs[OH_MAX_OUTS];      /* compared after the launch */
	int n_outs;
	void *host[OH_MAX_HOST];         /* malloc'ed, freed by oh_end */
	int n_host;
	const emu_kernel *k;             /* loaded by oh_launch */
} oh_case;

/* Starts a case of op; the rest of the arguments name it in messages. */
void oh_begin(oh_case *c, int op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* An integer / float template constant. */
void oh_pi(oh_case *c, const char *name, int64_t v);
void oh_pf(oh_case *c, const char *name, double v);
/* A device buffer of n elements of elem bytes (n 0: one byte, never read),
 * guard zones before and after, contents emu_alloc's 0xff poison until the
 * case fills them; freed by oh_end. */
void *oh_alloc(oh_case *c, const char *name, size_t n, size_t elem);
/* The next kernel argument: buffer b (an oh_alloc'ed one, or any pointer
 * the kernel may take, e.g. an alias of another argument). */
void oh_arg(oh_case *c, void *b);
/* oh_alloc, then oh_arg: the common case. */
void *oh_buf(oh_case *c, const char *name, size_t n, size_t elem);
/* The next kernel argument by value (a scalar of bytes <= 8 bytes). */
void oh_val(oh_case *c, const void *v, size_t bytes);
/* Host memory freed with the case (zeroed). */
void *oh_host(oh_case *c, size_t bytes);
/* A host copy of buffer argument buf's bytes as they are now. */
void *oh_copy(oh_case *c, const void *buf, size_t bytes);
/* Output buf (an oh_buf) compared after the launch: exactly with want, or
 * (ref and bound given, KERN_F32) within bound of ref. dims: the shape for
 * the messages, outermost first, 0-terminated (up to four). */
void oh_expect(oh_case *c, const char *name, kern_dtype type, const void *buf, const void *want,
               size_t n, int d0, int d1, int d2);
void oh_expect_close(oh_case *c, const char *name, const float *buf, const double *ref,
                     const double *bound, size_t n, int d0, int d1, int d2);
/* Renders and loads the op's kernel from the case's constants (the key is
 * the op's name); done by oh_launch when not done before. */
const emu_kernel *oh_kernel(oh_case *c);
/* Launches grid x block and compares every registered output; fails the
 * test on an emulator error (a guard zone written included) or a mismatch. */
void oh_launch(oh_case *c, emu_dim3 grid, emu_dim3 block);
/* NVRTC for sm_80 and sm_90 of the case's kernel: zero spills (skipped,
 * saying so, without NVRTC). */
void oh_nvrtc(oh_case *c);
/* Frees every buffer and host block of the case. */
void oh_end(oh_case *c);

/* Template constants for oh_load / oh_nvrtc_p: p[0] is OH_NAME. */
#define OH_NAME ((gen_param){.name = "NAME", .type = GEN_PARAM_IDENT})
#define OH_I(n, v) ((gen_param){.name = (n), .type = GEN_PARAM_INT, .i = (v)})
#define OH_F(n, v) ((gen_param){.name = (n), .type = GEN_PARAM_FLOAT, .f = (v)})
/* Op op's kernel for constants p (its NAME set to the key, the op's name
 * and p): the template and the Philox prefix from the op list. */
const emu_kernel *oh_load(int op, gen_param *p, int np);
/* NVRTC of that kernel for sm_80 and sm_90: zero spills (skipped without
 * NVRTC). */
void oh_nvrtc_p(int op, gen_param *p, int np);

#endif
