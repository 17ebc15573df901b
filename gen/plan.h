/* Planner: turns a validated spec into the static iteration, i.e. every
 * device buffer (shape, dtype, bytes, 256-byte aligned offset in one arena)
 * and the op schedule of each phase (prefill chunk, draft level 0..D-1,
 * verify, accept, commit) with its kernel URI, launch shape and bytes/flops
 * estimates. Pure and deterministic: the same spec gives the same plan and
 * the same engine.json bytes. Every op of the static iteration is a rendered
 * template (embedding, K/V store, attention, logits processing, tree
 * expansion, fused verification, KV commit, the bookkeeping steps of
 * runtime/engine_state.h) or a cuBLASLt GEMM or a memset; only verification
 * with a narrower "@V" draft vocabulary is still pending.
 * Not the renderer or the compiler (gen/build.h). */
#ifndef GEN_PLAN_H
#define GEN_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "render.h"
#include "spec.h"

#define GEN_PLAN_ALIGN 256
#define GEN_OP_MAX_ARGS 12
#define GEN_KERNEL_MAX_PARAMS 16

enum gen_exec {
	GEN_EXEC_KERNEL = 0, /* a rendered template from kernels.cu */
	GEN_EXEC_CUBLASLT,   /* a GEMM: cuBLASLt matmul, A (m,k) x B^T (n,k) -> C (m,n) fp32 */
	GEN_EXEC_PENDING,    /* a kernel whose template comes with the next issue */
	GEN_EXEC_MEMSET,     /* a graph memset node */
};

typedef struct gen_buf {
	char name[48];
	const char *kind;  /* "weight", "kv", "activation", "state" */
	const char *dtype; /* "bf16", "fp16", "f32", "i32", "u64" */
	int rank;
	int64_t shape[4];
	int64_t bytes, offset; /* offset in the arena, a multiple of GEN_PLAN_ALIGN */
	const unsigned char *ltypes; /* gguf_a8, a field whose layers differ: each layer's GGUF
	                              * type (plan_gguf.h), n_ltypes of them; else NULL */
	int n_ltypes;
} gen_buf;

typedef struct gen_arg {
	int buf;        /* index into plan->bufs */
	int64_t offset; /* bytes from the buffer's start (per-layer stride added at run time) */
	const char *scalar; /* non-NULL: a by-value argument the runtime supplies
	                     * ("seed", u64), not a buffer; buf is then 0 */
} gen_arg;

/* What a kernel's source needs before it (NVRTC has no include path). */
enum gen_prefix {
	GEN_PREFIX_NONE = 0,
	GEN_PREFIX_PHILOX = 1, /* kernels/philox.h (tree_expand, verify) */
	GEN_PREFIX_MASK = 2,   /* DEV_CONST uint64_t <uri>_mask[T * MASK_WORDS]: rows
	                        * N_BLK-T .. N_BLK-1 of the tree's ancestor mask,
	                        * columns 0 .. N_BLK-1 (tree attention, MASKED 1) */
};

typedef struct gen_kernel {
	char uri[192];          /* gen_key of (op, params): the kernel's name */
	const char *tmpl;       /* "rmsnorm_residual.cu.tmpl" */
	int n_params;           /* params[0] is NAME (its .s set when rendering) */
	gen_param params[GEN_KERNEL_MAX_PARAMS];
	int prefix;             /* enum gen_prefix bits */
	int n_entries;          /* __global__ functions: uri + entry[i] */
	const char *entry[2];   /* suffixes: "" or "_part", "_merge" */
	char tree_id[64];       /* the TREE identifier parameter's value, if any (params'
	                         * .s pointers are only valid while planning) */
	int mask_kind;          /* GEN_PREFIX_MASK: enum gen_mask_kind, the table's source */
} gen_kernel;

/* What a masked tree attention's table holds: the spec tree's ancestor
 * mask, or a block drafter's block visibility (T = N_BLK = B rows):
 * causal = lower triangle, bidirectional = all ones. engine.json's kernel
 * entry names the block kinds ("mask"). */
enum gen_mask_kind { GEN_MASK_TREE = 0, GEN_MASK_BLOCK_CAUSAL, GEN_MASK_BLOCK_BIDIR };

typedef struct gen_op {
	char name[48];      /* what it computes, e.g. "attn_norm", "wq" */
	const char *op;     /* op type: "rmsnorm_residual", "gemm", "attention", ... */
	int exec;           /* enum gen_exec */
	int kernel;         /* index into plan->kernels for GEN_EXEC_KERNEL, else -1 */
	char uri[192];      /* kernel URI, or the pending specialisation's key */
	const char *entry;  /* GEN_EXEC_KERNEL: the entry's suffix (kernel uri + entry) */
	int grid[3], block[3]; /* 0s when not known yet (pending, cuBLASLt) */
	int repeat;         /* launches: 1, or the layers of a per-layer op */
	int layer0;         /* a per-layer op's first layer: it runs layers layer0 ..
	                     * layer0 + repeat - 1 (a segment of the block that ends
	                     * at a feature tap) */
	const char *layers; /* "target", "draft" (layer ids through the draft map) or NULL */
	int64_t m, n, k;    /* GEN_EXEC_CUBLASLT */
	int n_args;
	gen_arg args[GEN_OP_MAX_ARGS];
	double bytes, flops; /* per launch: DRAM bytes moved, arithmetic ops */
} gen_op;

typedef struct gen_phase {
	char name[32];
	int rows;           /* token rows processed */
	int first_op, n_ops;
	int gate_buf;       /* -1, or: the phase runs only when int32 word gate_word of */
	int gate_word;      /* this buffer is nonzero (a conditional graph node) */
} gen_phase;

typedef struct gen_plan {
	const gen_spec *spec;   /* borrowed: must outlive the plan */
	const struct gen_drafter *drafter; /* the spec's drafter (gen/drafter.h) */
	rt_config draft_cfg;    /* the draft's forward shapes (layerskip: target's, fewer layers) */
	int n_bufs, n_ops, n_kernels, n_phases;
	gen_buf *bufs;
	gen_op *ops;
	gen_kernel *kernels;
	gen_phase phases[RT_TREE_MAX_DEPTH + 8]; /* prefill, the drafter's few, one a level,
	                                         * verify, accept, commit */
	int64_t arena_bytes;
	int cap_bufs, cap_ops, cap_kernels;
	/* the weights the engine was built for (core/digest.h), "" when built
	 * from a shape: $.spec.target.digest, $.spec.draft.digest */
	char target_digest[32], draft_digest[32];
} gen_plan;

int gen_plan_build(const gen_spec *s, gen_plan *p, sw_err *err);

void gen_plan_free(gen_plan *p);

/* Refuses (SW_EINVAL, naming the op, the template, both parameters and the
 * buffer) a kernel launch that passes one buffer to two parameters its
 * template marks RESTRICT when one of them is written: restrict would make
 * the aliasing undefined behaviour. Reads src_dir/templates/<tmpl>. */
int gen_plan_check_restrict(const gen_plan *p, const char *src_dir, sw_err *err);

/* Index of a buffer by name, or -1. */
int gen_plan_find_buf(const gen_plan *p, const char *name);

/* Rows N_BLK-T .. N_BLK-1 of the tree's ancestor mask over columns 0 .. N_BLK-1,
 * (N_BLK + 63) / 64 words per row: the table a tree attention kernel reads. */
void gen_plan_attn_mask(const rt_tree *t, int T, int n_blk, uint64_t *rows);
/* The table kernel k reads: gen_plan_attn_mask of the spec's tree, or the
 * block visibility of its mask_kind. */
void gen_plan_kernel_mask(const gen_plan *p, const gen_kernel *k, int T, int n_blk, uint64_t *rows);

/* engine.json: spec echo, shapes, buffers, kernels, ops per phase. The
 * output depends on nothing but the plan (no time, no host names). */
int gen_plan_write_json(const gen_plan *p, FILE *f);

#endif
