/* Transformer families in the generator: what a family changes in the
 * planner's layer (gen/plan.c layer_ops), as data the planner emits. The
 * layer is Llama's block (norm, q/k/v GEMMs, attention, wo, norm, SwiGLU
 * MLP); a family states
 *   - its extra per-layer weights (f32, `per` elements a layer, bound by
 *     field name through rt_model_weight: "bq", "q_norm", ...), and
 *   - the in-place ops on q, k and v between their GEMMs and the K/V store
 *     (Llama: adjacent-pair RoPE on q and k; Qwen2: bias + NeoX RoPE on q
 *     and k, bias on v; Qwen3: per-head RMSNorm + NeoX RoPE on q and k).
 * and, as data the planner reads (gen_arch_block), what it changes in the
 * rest of the block: the embedding's scale, the GLU's activation, RMSNorms
 * on the attention and MLP outputs before their residual adds (Gemma 3's
 * sandwich norms), and a refusal of the specs its engine cannot run
 * (check). One file per family (arch_llama.c, arch_qwen.c, arch_gemma.c);
 * gen_arch_of picks it by rt_config.arch. */
#ifndef GEN_ARCH_H
#define GEN_ARCH_H

#include <stdint.h>

#include "model/model.h"
#include "render.h"

#define GEN_ARCH_MAX_W 6   /* extra weights of one family */
#define GEN_ARCH_MAX_OPS 4 /* in-place q/k/v ops of one layer */
#define GEN_ARCH_MAX_PRM 10

struct gen_spec;

enum gen_qkv { GEN_QKV_Q = 0, GEN_QKV_K, GEN_QKV_V };

typedef struct gen_arch_weight {
	const char *field; /* the buffer "<tag>.<field>", rt_model_weight's name */
	int64_t per;       /* f32 elements per layer */
} gen_arch_weight;

/* One in-place kernel on q (T, n_heads, head_dim), k or v (T, n_kv_heads,
 * head_dim): its arguments are (x, pos, inv_freq) and then, for n_args 5,
 * the family weights w[0], w[1] (-1: a step the kernel does not run; the
 * planner passes inv_freq, a buffer that is there). inv_freq is the
 * model's table, or with freq >= 0 that family weight (per-layer
 * frequencies: Gemma 3's local and global RoPE bases). params[0] is NAME. */
typedef struct gen_arch_op {
	const char *name;  /* "rope_q", "qk_q" */
	const char *op;    /* engine.json op type (host_ops.c, extent.c): "rope", "head_prep" */
	const char *kop;   /* the kernel key's op: "rope_f32", "head_prep" */
	const char *tmpl;  /* "rope.cu.tmpl" */
	int n_params;
	gen_param params[GEN_ARCH_MAX_PRM];
	int x;             /* enum gen_qkv */
	int n_args;        /* 3 or 5 */
	int w[2];          /* indexes into the family's weights, or -1 */
	int freq;          /* the family weight passed as inv_freq, or -1: the model's */
	int block;
	double bytes, flops;
} gen_arch_op;

/* The rest of the block (gen/plan.c layer_ops, gp_forward). */
typedef struct gen_arch_block {
	float embd_scale; /* the embedding rows times this (1: as read) */
	int act;          /* the GLU's activation (swiglu.cu.tmpl ACT): 0 SiLU, 1 tanh GELU */
	int post_attn;    /* the family weight (dim) RMS-normalizing the attention's output
	                   * before its residual add, or -1 */
	int post_ffn;     /* the same on the MLP's output, or -1 */
} gen_arch_block;

/* A spec the family's engine cannot run: the spec's top-level key to
 * blame ("max_context", "dtype", "target", "draft") and json_refuse's
 * expected / found texts. */
typedef struct gen_arch_refusal {
	const char *key;
	char expected[240];
	char found[160];
} gen_arch_refusal;

typedef struct gen_arch {
	const char *name; /* rt_arch_name */
	/* The extra weights of cfg's layers; returns how many (<= GEN_ARCH_MAX_W). */
	int (*weights)(const rt_config *cfg, gen_arch_weight *out);
	/* The in-place ops of one layer over `rows` rows, in order; returns how
	 * many (<= GEN_ARCH_MAX_OPS). */
	int (*qkv_ops)(const rt_config *cfg, int64_t rows, gen_arch_op *out);
	/* The rest of cfg's block into *out. */
	void (*block)(const rt_config *cfg, gen_arch_block *out);
	/* 0, or 1 with *r filled: the model cfg (role "target" or "draft") of
	 * spec s is one the family's engine cannot run. NULL: every spec runs. */
	int (*check)(const rt_config *cfg, const char *role, const struct gen_spec *s,
	             gen_arch_refusal *r);
} gen_arch;

/* One templates/head_prep.cu.tmpl launch on projection x (enum gen_qkv)
 * over `rows` rows (arch_qwen.c; Gemma's too): bias / norm / rope steps
 * on or off, family weights wb (bias) and wn (norm) or -1, the result
 * times scale, inv_freq from family weight freq or -1 (the model's). */
gen_arch_op gen_arch_head_op(const char *name, const rt_config *cfg, int x, int64_t rows, int bias,
                             int norm, int rope, int wb, int wn, float scale, int freq);

/* Llama's block: no scale, SiLU, no post-norms (the Llama and Qwen files'). */
void gen_arch_block_plain(const rt_config *cfg, gen_arch_block *out);

/* The family of cfg->arch, or NULL for one the generator has no file for. */
const gen_arch *gen_arch_of(int arch);

extern const gen_arch gen_arch_llama, gen_arch_qwen, gen_arch_gemma;

#endif
