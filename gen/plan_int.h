/* What the planner's files share (gen/plan.c, the op helpers; plan_build.c,
 * the phase skeleton; the drafters, gen/drafter_*.c): the plan's model and
 * activation indices, the op descriptor, the planning context, the forward
 * options, and the helpers plan.c defines (gp_*: the planner's prefix, out
 * of the library's other names). Internal to gen/plan*.c and
 * gen/drafter*.c; the interface is gen/plan.h, the drafters' drafter.h. */
#ifndef GEN_PLAN_INT_H
#define GEN_PLAN_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "plan.h"

/* Block sizes: the ones test_kern_nvrtc checks for zero spills. */
enum { BLK_EMB = 128, BLK_RMS = 256, BLK_ROPE = 128, BLK_SWIGLU = 256, BLK_ARGMAX = 512,
       BLK_CAST = 256, BLK_QKV = 256 };
/* The hot kernels' block sizes: the ones their tests compile without spills
 * (test_kern_logits_process, _tree_expand, _verify, _kv_commit, _tree_attention). */
enum { BLK_LOGITS = 256, BLK_EXPAND = 256, BLK_VERIFY = 256, BLK_COMMIT = 128 };
/* The engine's own small kernels (test_kern_kv_store, _step). */
enum { BLK_KVSTORE = 128, BLK_STEP = 64, RING = 256 };
/* The target's feature taps and q over its ids (test_kern_feature_tap, _q_target). */
enum { BLK_TAP = 128, BLK_QTGT = 256 };

typedef struct model_ix {
	const char *tag;     /* "target" / "draft" */
	const rt_config *cfg;
	int n_layers;        /* layers this forward runs */
	int vocab_out;       /* LM head rows used */
	int embd_rows;       /* rows of tok_embd (a layer-skip draft reads the target's) */
	int tok_embd, attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down, out_norm, lm_head;
	/* fused GEMM weights (core/wparts.h), else -1: wqkv the rows of wq, wk
	 * and wv one after another (then wq = wk = wv = -1), w_gate_up those
	 * of w_gate and w_up (then w_gate = w_up = -1): one GEMM each */
	int wqkv, w_gate_up;
	bool fusable;        /* its own weights (gp_model_init), so q/k/v and gate/up may fuse */
	int k_cache, v_cache, inv_freq;
	int mask_embd, fc, fc_norm; /* a drafter's own input weights (block, EAGLE-3), else -1 */
	int d2t, t2d;        /* a mapped draft vocabulary (i32: draft id -> target id, target
	                      * id -> draft id or -1), else -1 */
	int len_word;        /* state[len_word]: this cache's length (target 0, draft 1) */
	int ctx_rows;        /* cache slots per layer: max_context, + B for a block drafter
	                      * (its block rows are staged past the length) */
	const gen_arch *arch; /* the family's weights and q/k/v ops (arch.h) */
	int n_xw, xw[GEN_ARCH_MAX_W]; /* the family's extra weights (arch->weights order) */
	gen_arch_block blk;   /* the rest of the family's block (arch.h) */
} model_ix;

/* The buffers every engine has, and the few that several drafters share
 * (-1 where absent: ngram_hist .. ctrl_cost, q_tgt, taps). */
typedef struct act_ix {
	int h, delta, xn, x16, q, q16, k, v, attn, part_o, part_ml, gate, up, pos, tokens,
	    tree_tokens, tree_table, logits, probs, state, iter, err, accept_path, emitted, counts,
	    verify_scratch, kv_done, sampling;
	int draft_logits, draft_probs; /* a learned drafter's logits and q (rows: its own) */
	int taps;            /* the target's tapped layer outputs, concatenated per row */
	int q_tgt;           /* q over the target's ids (a mapped draft vocabulary) */
	int ngram_hist, ngram_info, ctrl, ctrl_cost; /* the n-gram lookup and its controller */
	int a8;              /* gguf_a8: the GEMM inputs as int8 blocks (quant_a8), else -1 */
	int qkv, gu;         /* a fused GEMM's rows (q|k|v; gate|up) where the target has one,
	                      * else -1 */
} act_ix;

/* Tree attention launch shape: the one of least projected _part + _merge
 * time at est_context cached keys (gen/attn_cost.h: the H100 model, its
 * terms and what it leaves out). The T * GROUP query rows of a KV head go
 * to warps of ROW_BLOCKS 16-row mma fragments, WARPS per block, ZT =
 * ceil(rows / (16 ROW_BLOCKS WARPS)) row blocks on the grid's z axis (each
 * re-reads the split's K/V from L2); SPLIT keys per block along the
 * context, the last live split also taking the N_BLK block keys (so
 * blk_splits = 0: no partials of a block split of their own). Fewer splits
 * shrink the fp32 partials, more row blocks cost L2 traffic, both buy
 * blocks for 132 SMs; the model weighs them. E.g. Llama-3-8B at 4096:
 * eagle25 (T = 26) ROW_BLOCKS 1, WARPS 4, SPLIT 512, ZT 2; sequoia63 (T =
 * 64) 2, 2, 512, 4; a decode step (T = 1) 1, 1, 256. */
typedef struct attn_shape {
	int T, n_blk, masked, split, warps, rb, mblock, zt, ctx_splits, blk_splits;
} attn_shape;

typedef struct op_desc {
	const char *name, *op;
	int exec, kernel;
	const char *uri; /* pending/cuBLASLt key; kernels take theirs */
	const char *entry; /* kernels with two entries: "_part" / "_merge" */
	int gx, gy, gz, block, repeat, layer0;
	const char *layers;
	int64_t m, n, k;
	double bytes, flops;
	int n_args;
	gen_arg args[GEN_OP_MAX_ARGS];
} op_desc;

#define A(b, off) ((gen_arg){.buf = (b), .offset = (off)})
#define PI(n, v) ((gen_param){.name = (n), .type = GEN_PARAM_INT, .i = (v)})
#define PNAME ((gen_param){.name = "NAME", .type = GEN_PARAM_IDENT})
#define PF(n, v) ((gen_param){.name = (n), .type = GEN_PARAM_FLOAT, .f = (v)})

typedef struct ctx {
	gen_plan *p;
	const gen_spec *s;
	act_ix a;
	int dt16;       /* bytes of the 16-bit dtype */
	int cast_mode;  /* cast template MODE for f32 -> dtype */
	int rule;       /* the expansion rule the engine drafts with (enum rt_expand_rule) */
	int layer0;     /* the first layer of the per-layer ops being emitted */
	int window;     /* their attention's sliding window (WINDOW), 0: none */
	int64_t rows;   /* the activations' rows (the prefill chunk, the tree, a drafter's) */
	int ph;         /* the phase being planned (gp_phase_begin) */
	void *draft;    /* the drafter's own indices (gen_drafter.state_bytes, zeroed) */
	int rc;
	char why[256];   /* what rc = SW_EINVAL refused (gp_emit) */
	/* gguf_a8: what a8 holds after op a8_op - 1 (the last gemv_gguf): the
	 * int8 blocks of a8_src's a8_m x a8_k, so the next GEMM on the same
	 * input right after it (wq, wk, wv; w_gate, w_up) quantizes nothing */
	int a8_op;
	gen_arg a8_src;
	int64_t a8_m, a8_k;
} ctx;

enum fwd_mode { FWD_PREFILL, FWD_TREE, FWD_BLOCK };

/* One forward's shape: FWD_PREFILL a causal chunk, FWD_TREE the staged tree
 * levels under the ancestor mask, FWD_BLOCK a drafter's block of rows (a
 * block drafter's pass): its own input op (embed), positions (pos_buf) and
 * visibility table (mask_kind). */
typedef struct fwd_opt {
	int mode;
	int64_t rows, row0;
	int lm_rows;          /* LM head over the last lm_rows rows, into logits_buf */
	int logits_buf;
	int64_t logits_off;
	const char *layers;
	int n_taps;           /* the outputs of layers taps[] go to slots of a->taps */
	const int *taps;
	void (*embed)(ctx *c, const model_ix *m, const struct fwd_opt *o); /* FWD_BLOCK */
	int pos_buf;          /* FWD_BLOCK: the rows' positions */
	int mask_kind;        /* FWD_BLOCK: GEN_MASK_BLOCK_* */
} fwd_opt;

/* What the drafter adds to the activations' extents (gen_drafter.extents):
 * more rows than the prefill chunk and the tree, a wider 16-bit GEMM input,
 * and its attention shapes' fp32 partials (gp_attn_partials). */
typedef struct gp_extents {
	int64_t rows, x16, part_o, part_ml;
} gp_extents;

/* plan.c: see each definition's comment */
attn_shape gp_attn_choose(const rt_config *cfg, int T, int n_blk, const gen_spec *s, int elt,
                          bool masked, int max_ctx);
void gp_attn_partials(const attn_shape *sh, const rt_config *cfg, gp_extents *e);
int gp_add_buf(gen_plan *p, const char *name, const char *kind, const char *dt, int rank,
               int64_t d0, int64_t d1, int64_t d2, int64_t d3);
int gp_buf(ctx *c, int *ix, const char *name, const char *kind, const char *dt, int rank,
           int64_t d0, int64_t d1);
int gp_kernel_x(ctx *c, const char *op, const char *tmpl, const gen_param *prm, int np, int prefix,
                bool two, const char *tree_id);
int gp_kernel(ctx *c, const char *op, const char *tmpl, const gen_param *prm, int np);
void gp_emit(ctx *c, const op_desc *d);
void gp_phase_begin(ctx *c, const char *name, int rows);
void gp_phase_gate(ctx *c, int buf, int word);
void gp_phase_end(ctx *c);
void gp_op_cast(ctx *c, const char *name, int64_t rows, int64_t width, gen_arg dst, gen_arg src,
                int repeat, const char *layers);
void gp_op_gemm(ctx *c, const char *name, int64_t m, int64_t n, int64_t k, gen_arg out, gen_arg a,
                gen_arg w, int repeat, const char *layers);
/* gguf_a8: the GGUF type (enum ggml_dtype) the GEMMs of the per-layer run
 * from c->layer0 (layers: its model, "draft" through a layer-skip draft's
 * map) read from weight buffer buf; -1 for a 16-bit buffer. */
int gp_gemm_wtype(const ctx *c, int buf, const char *layers, int layer);
/* The gemv_gguf launch shape for M x N x K (plan.c): rows of W a warp,
 * warps a block, the warps splitting K, A rows a block. */
typedef struct gp_gemv_shape {
	int r, warps, ks, mt, grid_x, grid_z;
} gp_gemv_shape;
gp_gemv_shape gp_gemv_choose(int64_t m, int64_t n, int64_t k);
/* The gemv16 launch shape: 2 rows of W a warp, 4 warps, M tiles of up to
 * 16 rows, K split over the warps while the grid is under 4 blocks an SM. */
gp_gemv_shape gp_gemv16_choose(int64_t m, int64_t n, int64_t k);
void gp_op_rmsnorm(ctx *c, const char *name, const rt_config *cfg, int64_t rows, gen_arg w,
                   int repeat, const char *layers);
void gp_op_attention(ctx *c, const model_ix *m, const attn_shape *sh, int L, const char *layers,
                     int mask_kind);
void gp_op_logits(ctx *c, const char *name, int V, int rows, gen_arg out, gen_arg in,
                  gen_arg params);
void gp_op_expand(ctx *c, int d, int V, int rule, bool by_depth, int q_buf, int ids_buf);
void gp_op_step(ctx *c, const char *name, int mode, bool has_hist);
void gp_op_q_target(ctx *c, int rows, int64_t Vd, gen_arg out, gen_arg q, gen_arg t2d);
void gp_forward(ctx *c, const model_ix *m, const fwd_opt *o);
int gp_model_init(ctx *c, model_ix *m, const char *tag, const rt_config *cfg, int n_layers,
                  int arch, bool own_weights, const model_ix *shared);
int gp_model_buf(ctx *c, const model_ix *m, int *ix, const char *field, const char *kind,
                 const char *dt, int rank, int64_t d0, int64_t d1, int64_t d2);
int gp_model_layers(ctx *c, model_ix *m);
int gp_model_extra(ctx *c, model_ix *m);
int gp_model_cache(ctx *c, model_ix *m);
int gp_model_bufs(ctx *c, model_ix *m, const char *tag, const rt_config *cfg, int n_layers,
                  bool own_weights, const model_ix *shared);
int64_t gp_max64(int64_t a, int64_t b);
void gp_op_accept(ctx *c, int q_buf, int vq, bool by_depth);
void gp_op_kv_commit(ctx *c, const model_ix *m, int done_word);
void gp_write_src(FILE *f, bool from_shape, const char *path, const char *digest);

#endif
