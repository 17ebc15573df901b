/* Engine spec: the JSON document `specwright build` reads (target and draft
 * models by path or by explicit shape, draft method, tree, verification pair,
 * sampling, context, dtype, GPU archs), parsed and validated into gen_spec.
 * Every error names the file, the JSON path, what was expected and what was
 * found. Not the planner (gen/plan.h): nothing here decides buffers or ops.
 *
 *   {
 *     "name": "smollm2-eagle25",                  optional, [A-Za-z0-9_.-]{1,63}
 *     "target": {"path": "model.gguf"}            GGUF file or HF directory, or
 *               {"shape": {"n_layers": 32, "dim": 4096, "n_heads": 32,
 *                          "n_kv_heads": 8, "head_dim": 128, "ffn_dim": 14336,
 *                          "vocab": 128256, "rope_theta": 500000,
 *                          "norm_eps": 1e-5, "tied_embd": false}}
 *               (n_kv_heads, head_dim, rope_theta, norm_eps, tied_embd optional)
 *     "draft": {"method": "layerskip:0-7" | "model" | "ngram" | "ngram:1:3",
 *               "path": ..., "shape": {...}}      path/shape only for "model";
 *              or {"method": "block", "path": DIR, "steps": S}: a block
 *              drafter directory (runtime/model/block_drafter.h; features
 *              conditioning), S denoising passes (1..16, default 1, > 1
 *              with a chain tree only); the tree is "chain:K" (K <= the
 *              drafter's block B) or any tree of depth <= B drafted from
 *              the pass's per-depth rows ("branch:k1,k2,..." Cartesian)
 *              or the string "model:PATH" / "layerskip:8" / "ngram"; a model's
 *              vocabulary is the target's or a prefix of it (same tokens,
 *              rt_draft_vocab_check; ids beyond it: q = 0, a zero embedding)
 *              or {"method": "eagle3", "path": DIR}: an EAGLE-3 head in the
 *              public checkpoint format (runtime/model/eagle3.h; its
 *              config.json is read here and checked against the target:
 *              width, vocabulary, layers, taps); any tree; "bf16" or "fp16"
 *     "tree": "eagle25" | "chain:5" | "kary:2:3" | "path/tree.json" | ...
 *     "verify": {"method": "greedy", "expand": "topk"}   an exact pair
 *     "sampling": {"temperature": 0, "top_k": 0, "top_p": 1}   optional: the
 *                 engine's defaults; requests set their own at run time
 *                 (runtime/engine/engine.h). Temperature 0 with a sampled
 *                 method builds a sampling engine that is greedy by default
 *     "max_context": 2048,
 *     "prefill_chunk": 128,                       optional, default min(128, max_context)
 *     "dtype": "bf16" | "fp16",                   weights and GEMM activations; fp32 accumulation
 *              | "q8_0" | "q8_0_a8",              host only: Q8_0 weights; _a8: int8 GEMM
 *                                                 inputs too (below)
 *              | "gguf_a8",                       each GEMM weight in its GGUF file's own
 *                                                 type, int8 GEMM inputs (below); host and
 *                                                 cuda (the gemv_gguf kernels)
 *     "archs": ["sm_80", "sm_90"],                optional, this default
 *     "allow_spills": false,                      optional
 *     "fuse": true,                               optional: a layer's small ops fused with
 *                                                 their neighbours, q/k/v and gate/up one
 *                                                 GEMM each (weights concatenated at load);
 *                                                 false: one launch an op (the same tokens)
 *     "gemm": "auto" | "cublaslt" | "gemv16",     optional, default cublaslt (until a
 *                                                 hardware run calibrates the GEMV):
 *                                                 auto, the 16-bit GEMMs through the
 *                                                 generated GEMV (templates/gemv16) or
 *                                                 cuBLASLt per shape by the cost model
 *                                                 (gen/gpu_model.h); the others force
 *                                                 one where it applies
 *     "adaptive": {"h": 0.3, "min": 1, "max": 6}  optional, chain trees with a draft
 *                                                 model: SpecDec++ stop rule on the
 *                                                 device, later levels as graph IFs
 *     "control": {"mode": "cost", ...}            optional, ngram engines (on by
 *                                                 default): how many tokens to draft
 *                                                 each iteration (gen/plan_ctrl.h)
 *     "roofline": {"tau": 3.2, "context": 1024}   optional: expected tokens per
 *                                                 iteration and the context length
 *                                                 the bytes estimates assume
 *   }
 */
#ifndef GEN_SPEC_H
#define GEN_SPEC_H

#include <stdbool.h>

#include "core/err.h"
#include "model/block_drafter.h"
#include "model/eagle3.h"
#include "model/model.h"
#include "core/tree.h"
#include "drafters.h"
#include "plan_ctrl.h"

#define GEN_SPEC_MAX_ARCHS 8
#define GEN_SPEC_MAX_LAYERS 512

/* Q8_0: the matrix weights (attention, MLP, LM head) in GGUF's Q8_0 blocks
 * (32 int8 and one fp16 scale), everything else (embedding, activations, KV
 * cache) fp16; host backend only (its GEMM, runtime/device/host_gemm.h).
 * Q8_0_A8: the same weights and buffers, but every GEMM also rounds its fp16
 * input to int8 per block of 32 (an fp32 scale each) and sums the block
 * products in integers (host_gemm.h hg_gemm_q8a8): other numbers than Q8_0's
 * (relative error up to 2^-8 of a block's largest activation), so it is an
 * engine dtype of its own, which a backend without that GEMM refuses.
 * GGUF_A8: the matrix weights stay in the target GGUF file's own blocks
 * (Q8_0, Q4_0, Q4_1, Q5_0, Q4_K or Q6_K, each layer's tensor its own type, read
 * here into gen_model_src.wtype/wtype_l: a Q4_K_M file's fields mix Q4_K
 * and Q6_K layers; the tied LM head a buffer of the embedding's type), the GEMM rounds its fp16 input to int8 as Q8_0_A8 does and sums
 * each 32-block in integers (host_gemm.h hg_gemm_gguf_a8); embedding,
 * activations and KV cache fp16. A file whose GEMM weight has another type
 * is refused naming the tensor and the type. An EAGLE-3 head's GEMM
 * weights are Q8_0 (quantized at upload; gen/drafter_eagle3.c), its k values
 * whole blocks of 32; other learned drafters are refused. The host runs
 * its own GEMM on the file's blocks; cuda (and host-emulate) the planned
 * quant_a8 + gemv_gguf kernels on the blocks repacked at load
 * (runtime/engine/wplanes.h), the same integer sums. */
enum gen_dtype { GEN_DTYPE_BF16 = 0, GEN_DTYPE_FP16, GEN_DTYPE_Q8_0, GEN_DTYPE_Q8_0_A8,
                 GEN_DTYPE_GGUF_A8 };

/* The GEMM weight fields, in gen_model_src.wtype's order. */
/* "gemm": how the 16-bit GEMMs run (gen/plan.c gp_op_gemm). The default
 * is cuBLASLt until a hardware run calibrates the generated GEMV: "auto"'s
 * choice rests on its assumed efficiency (gen/gpu_model.h), and on the
 * host backend a gemv16 op costs more than the host's own GEMM (it keeps
 * the kernel's summation order, runtime/device/host_gemv16.c). */
enum gen_gemm_choice { GEN_GEMM_AUTO = 0, GEN_GEMM_CUBLASLT, GEN_GEMM_GEMV16,
                       GEN_GEMM_DEFAULT = GEN_GEMM_CUBLASLT };
const char *gen_gemm_choice_name(int c);

enum gen_wfield { GEN_WT_WQ = 0, GEN_WT_WK, GEN_WT_WV, GEN_WT_WO, GEN_WT_GATE, GEN_WT_UP,
                  GEN_WT_DOWN, GEN_WT_LM_HEAD, GEN_WT_N };

typedef struct gen_model_src {
	bool from_shape;  /* shape given in the spec, no weights needed to build */
	char path[512];   /* when !from_shape: the file or directory read */
	rt_config cfg;    /* shapes, from the file's metadata or the spec */
	int wtype[GEN_WT_N]; /* GGUF_A8: each GEMM field's GGUF type (enum ggml_dtype); for a
	                      * field whose layers differ, the one with the most bytes an
	                      * element (the buffer's layer stride) */
	bool wmixed[GEN_WT_N];                          /* GGUF_A8: the field's layers differ */
	unsigned char wtype_l[GEN_WT_N][GEN_SPEC_MAX_LAYERS]; /* GGUF_A8: layer l's type */
	int embd_wtype;   /* GGUF_A8: token_embd's type where it has planes (a type above,
	                   * dim whole blocks of it): the table stays in it; else 0 (16-bit) */
} gen_model_src;

typedef struct gen_spec {
	char file[256];   /* the spec's name in messages */
	char name[64];
	gen_model_src target;
	/* the drafter's: its kind (enum gen_draft_kind, drafters.h: the row of
	 * its file's gen_drafter, whose parse fills the fields below) */
	int draft_kind;
	char draft_method[256];    /* as written, for the echo */
	gen_model_src draft;       /* GEN_DRAFT_MODEL: cfg its shapes (0s for every other kind:
	                            * the family's and the dtype's checks take a set one);
	                            * BLOCK, EAGLE3: path = the drafter's directory */
	rt_bd_config block;        /* GEN_DRAFT_BLOCK: the drafter's config.json */
	rt_e3_config eagle3;       /* GEN_DRAFT_EAGLE3: the head's config.json (path: draft.path) */
	int block_steps;           /* GEN_DRAFT_BLOCK: S, the drafter passes per iteration */
	int n_skip_layers;         /* LAYERSKIP: the target layers the draft runs, increasing */
	int skip_layers[GEN_SPEC_MAX_LAYERS];
	int draft_vocab;           /* LAYERSKIP "@V" limit, else the draft's vocab; 0 for NGRAM */
	int ngram_min, ngram_max;  /* the n-gram lookup's lengths, 0 without one: NGRAM; EAGLE3
	                            * with e3_ngram */
	bool e3_ngram;             /* EAGLE3 "ngram": an n-gram match drafts first, the head
	                            * drafts e3_levels tokens where it drafts none */
	int e3_levels;             /* 0 without e3_ngram */
	char tree_spec[512];
	rt_tree tree;
	int verify_method, expand_rule; /* rt_verify_method / rt_expand_rule */
	float temperature, top_p; /* defaults (run-time values of the engine) */
	int top_k;
	int max_context, prefill_chunk;
	int dtype;                 /* enum gen_dtype */
	int n_archs;
	char archs[GEN_SPEC_MAX_ARCHS][16];
	bool allow_spills;
	bool fuse;                 /* a layer's fused launches (gen/plan.c layer_ops); false: the
	                            * separate ones, the same bits (a check, and a baseline) */
	int gemm;                  /* enum gen_gemm_choice ("gemm") */
	bool adaptive;             /* SpecDec++: stop drafting a chain early (device-side) */
	float adapt_h;             /* stop once P(a rejection) > h, the draft's q(Y) as predictor */
	int adapt_min, adapt_max;  /* draft at least / at most this many tokens */
	gen_ctrl ctrl;             /* the draft-length controller ("control", plan_ctrl.h) */
	double tau;                /* 0 when not given */
	int est_context;           /* context length the bytes estimates assume */
} gen_spec;

/* Parses and validates spec text (n bytes; file names it in messages).
 * trees_dir: where tree presets live (NULL: models/trees). Model paths are
 * opened (metadata only) relative to the current directory. */
int gen_spec_parse(const char *text, size_t n, const char *file, const char *trees_dir,
                   gen_spec *s, sw_err *err);
/* The same from a file. */
int gen_spec_load(const char *path, const char *trees_dir, gen_spec *s, sw_err *err);

const char *gen_dtype_name(int dtype);
/* Bytes per element of the 16-bit activation dtype (2 for all). */
int gen_dtype_size(int dtype);
/* The 16-bit dtype of activations and KV cache: dtype itself, fp16 for q8_0
 * and q8_0_a8. */
int gen_dtype_act(int dtype);
/* The dtype of the GEMMs' weight buffers: dtype itself, q8_0 for q8_0_a8
 * (gguf_a8: per field, gen_wtype_name of gen_model_src.wtype). */
int gen_dtype_weights(int dtype);
/* A GGUF type's buffer dtype name under gguf_a8 ("q8_0", "q4_0", "q4_1",
 * "q5_0", "q4_k", "q6_k"), NULL for a type the engine does not take; its block's elements
 * and bytes (0 for others). */
const char *gen_wtype_name(int ggml_type);
int gen_wtype_block(int ggml_type, int *bytes);
/* The field names GEN_WT_* stand for ("wq" ... "lm_head"). */
extern const char *const gen_wfield_names[GEN_WT_N];

#endif
