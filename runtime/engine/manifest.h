/* engine.json, read and validated: the one interface between the generator
 * (gen/build.c writes it) and the executor (engine.c). Every field is checked
 * here, against its range and against the others (buffers inside the arena,
 * args inside buffers, kernels named by ops, a BFS tree, gates on existing
 * words); messages name the file and the JSON path. Nothing here touches a
 * device: a manifest is plain data the executor resolves at bind time.
 * Not the executor (engine.h) and not the planner (gen/plan.c). */
#ifndef RT_MANIFEST_H
#define RT_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/json.h"
#include "device/device.h"

#define RT_ENGINE_MAX_PHASES 48
#define RT_ENGINE_MAX_NODES 256
/* the draft-length controller's cost table: depth + 1 (+ a head's levels) */
#define RT_CTRL_MAX_COST (2 * RT_ENGINE_MAX_NODES)

/* A Llama model's shapes as engine.json states them ($.shapes.target,
 * $.shapes.draft); a weight source states its own the same way (engine.h). */
typedef struct rt_engine_shape {
	int arch;                  /* $.shapes.*.arch, model/model.h's enum rt_arch: 0 llama
	                            * (also when absent), 1 qwen2, 2 qwen3, 3 gemma3 */
	int n_layers, dim, n_heads, n_kv_heads, head_dim, ffn_dim, vocab;
	float rope_theta, norm_eps;
	bool tied_embd;            /* lm_head is tok_embd */
} rt_engine_shape;

/* "llama", "qwen2", "qwen3", "gemma3" for rt_engine_shape.arch ("unknown" otherwise):
 * model/model.h rt_arch_name's words, which the deployable runtime cannot
 * include. */
const char *rt_manifest_arch_name(int arch);

/* Sampling values: the spec's ($.spec.sampling) are the engine's defaults;
 * a request may set others at run time (engine.h rt_engine_run.samp). */
typedef struct rt_engine_sampling {
	float temperature;         /* <= 0: greedy */
	int top_k;                 /* <= 0: off */
	float top_p;               /* >= 1: off */
} rt_engine_sampling;

typedef struct rt_engine_buf {
	char name[48];
	char kind[16];      /* weight, kv, activation, state, const */
	char dtype[8];      /* bf16 fp16 f32 i32 u64 */
	int rank;
	int64_t shape[4];
	int64_t bytes, offset;
	signed char *ltype; /* gguf_a8 "layer_dtypes": each layer's GGUF type, or NULL
	                     * (every layer the dtype's); manifest_ltypes.c */
} rt_engine_buf;

typedef struct rt_engine_phase {
	char name[32];
	int rows;
	int first, n;       /* planned ops [first, first + n) of rt_manifest.ops */
	int gate_buf;       /* -1, or the phase runs only when int32 word gate_word of */
	int gate_word;      /* buffer gate_buf is nonzero (SpecDec++ draft levels) */
} rt_engine_phase;

enum rt_draft_kind { RT_ENGINE_DRAFT_NGRAM = 0, RT_ENGINE_DRAFT_LAYERSKIP, RT_ENGINE_DRAFT_MODEL,
                     RT_ENGINE_DRAFT_BLOCK, RT_ENGINE_DRAFT_EAGLE3 };
enum rt_engine_exec { RT_EXEC_KERNEL = 0, RT_EXEC_CUBLASLT, RT_EXEC_MEMSET };

/* A planned op as engine.json states it, before addresses exist. */
typedef struct rt_engine_pop {
	char name[48], op[32], entry[208];
	char gemm_uri[80];        /* a cublaslt op's uri (its m, n, k), else "" */
	int exec;                 /* enum rt_engine_exec */
	int kernel;               /* index into kernels, or -1 */
	unsigned grid[3], block[3];
	int repeat;
	int layer0;               /* a per-layer op runs layers layer0 .. layer0 + repeat - 1 */
	int layers;               /* 0 none, 1 target, 2 draft */
	int64_t m, n, k;
	int64_t bytes;            /* memset: bytes zeroed (the op's "bytes") */
	double est_bytes, est_flops; /* the planner's DRAM bytes / flops per launch */
	int n_args;
	int arg_buf[RT_OP_MAX_ARGS];      /* -1: scalar (the seed) */
	int64_t arg_off[RT_OP_MAX_ARGS];
} rt_engine_pop;

/* One file of the drafter an engine binds ($.draft_files): its name in the
 * drafter's directory, or "." for the drafter's path itself (a draft
 * model's GGUF), its size and sha256 (manifest_files.c). */
#define RT_ENGINE_MAX_DRAFT_FILES 16
typedef struct rt_draft_file {
	char name[128];
	int64_t bytes;
	char sha256[65];
} rt_draft_file;

typedef struct rt_manifest {
	char dir[1024];
	char name[128];
	/* spec echo */
	char target_path[1024], draft_path[1024];
	char target_digest[32], draft_digest[32]; /* core/digest.h; "" when built from a shape */
	int draft_kind;           /* enum rt_draft_kind */
	int skip_layers[256], n_skip;
	int draft_vocab;
	int block, steps;         /* a block drafter's B and S ($.spec.draft), else 0 */
	char verify[16], expand[16];
	rt_engine_sampling samp;
	int max_ctx, chunk, dtype; /* dtype: enum rt_dtype */
	/* shapes */
	rt_engine_shape tcfg, dcfg; /* dcfg all 0 for an n-gram draft */
	int n_nodes, depth;
	int32_t tree_table[5 * RT_ENGINE_MAX_NODES]; /* parent, n_children, child_start, child_list, depth */
	int level_start[RT_ENGINE_MAX_NODES + 2];
	/* plan */
	int n_bufs, n_kernels, n_ops, n_phases;
	rt_engine_buf *bufs;
	rt_kernel_info *kernels;
	int64_t arena_bytes;
	rt_engine_pop *ops;       /* (n_ops) planned ops, phase by phase */
	rt_engine_phase phases[RT_ENGINE_MAX_PHASES];
	int ph_prefill, ph_iter_first; /* phases [ph_iter_first, n_phases) form one iteration */
	int ring;                 /* output ring entries (the state buffer past its header) */
	/* $.toolkit: the NVRTC that compiled the kernels ("" when none did) and
	 * the CUDA driver it needs (cuDriverGetVersion's encoding, 13000 = 13.0;
	 * 0 when none) */
	char nvrtc_version[16];
	int min_driver;
	/* $.spec.control: the draft-length controller (templates/draft_ctrl.cu.tmpl),
	 * RT_CTRL_NONE when the engine has none; its cost table's source and,
	 * RT_CTRL_TABLE, the depth + 1 entries */
	int ctrl;                 /* enum rt_ctrl_cost */
	double ctrl_cost[RT_CTRL_MAX_COST];
	int n_ctrl_cost;
	/* $.draft_files: the drafter's files as the build read them; none for
	 * an engine without a drafter's files (n-gram, layer-skip, shapes) */
	rt_draft_file draft_files[RT_ENGINE_MAX_DRAFT_FILES];
	int n_draft_files;
} rt_manifest;

enum rt_ctrl_cost { RT_CTRL_NONE = 0, RT_CTRL_MEASURE, RT_CTRL_FLAT, RT_CTRL_TABLE };

/* Parses and validates dir/engine.json. */
rt_manifest *rt_manifest_load(const char *dir, sw_err *err);
/* The same from engine.json's text in memory (dir names it in messages). */
rt_manifest *rt_manifest_parse(const char *dir, const char *text, size_t len, sw_err *err);
void rt_manifest_free(rt_manifest *m);

/* $.draft_files of root into m (after $.spec and $.shapes): required, and
 * holding what the drafter's loader reads, when the engine binds a
 * drafter's files by path; absent otherwise. 0 or SW_EINVAL naming file
 * and the JSON path (manifest_files.c). */
int rt_manifest_parse_draft_files(rt_manifest *m, const json_value *root, const char *file,
                                  sw_err *err);
/* The drafter's files at path (the engine's $.spec.draft.path, or the copy
 * a run names with --draft-model or --weights) against $.draft_files:
 * each a regular file of its recorded size and sha256, read whole (about
 * 200 MB/s). 0 (also for an engine without drafter files), or an error
 * naming the file, the expected and the found size and digest. */
int rt_manifest_draft_files_check(const rt_manifest *m, const char *path, sw_err *err);

/* The index of buffer / phase `name`, or -1. */
int rt_manifest_buf_find(const rt_manifest *m, const char *name);
int rt_manifest_phase_find(const rt_manifest *m, const char *name);
/* The GGUF type (enum ggml_dtype) of a weight buffer dtype kept in its
 * file's blocks ("q8_0", "q4_0", "q4_1", "q5_0", "q4_k", "q6_k": core/wformat.h gemm_name),
 * -1 for any other dtype. */
int rt_manifest_wtype(const char *dtype);
/* The GGUF type of weight buffer b's layer (its "layer_dtypes" entry where
 * it has them, else rt_manifest_wtype of its dtype; layer -1: the dtype's). */
int rt_manifest_buf_wtype(const rt_engine_buf *b, int layer);
/* Reads buffer x's "layer_dtypes" (lt; NULL: none) at path p of file:
 * one GGUF block type a layer of a layered GGUF-typed weight, each fitting
 * the dtype's layer stride. 0 or an error naming the field. */
int rt_manifest_parse_ltypes(rt_engine_buf *x, const json_value *lt, const char *file,
                             const char *p, sw_err *err);
/* Whether weight field `field` ("wq", the part of a buffer name after
 * "target."/"draft.") has one slice per layer (not tok_embd, out_norm,
 * lm_head, inv_freq, nor a block drafter's mask_embd, fc, fc_norm). */
bool rt_manifest_field_layered(const char *field);

#endif
