/* Transformer families in the generator: what a family changes in the
 * planner's layer (gen/plan.c layer_ops), as data the planner emits. The
 * layer is Llama's block (norm, q/k/v GEMMs, attention, wo, norm, SwiGLU
 * MLP); a family states
 *   - its extra per-layer weights (f32, `per` elements a layer, bound by
 *     field name through rt_model_weight: "bq", "q_norm", ...), and
 *   - the in-place ops on q, k and v between their GEMMs and the K/V store
 *     (Llama: adjacent-pair RoPE on q and k; Qwen2: bias + NeoX RoPE on q
 *     and k, bias on v; Qwen3: per-head RMSNorm + NeoX RoPE on q and k).
 * One file per family (arch_llama.c, arch_qwen.c); gen_arch_of picks it by
 * rt_config.arch. A family whose block differs elsewhere (Gemma 3's extra
 * norms, GeGLU) adds its hooks here and a file of its own. */
#ifndef GEN_ARCH_H
#define GEN_ARCH_H

#include <stdint.h>

#include "model/model.h"
#include "render.h"

#define GEN_ARCH_MAX_W 6   /* extra weights of one family */
#define GEN_ARCH_MAX_OPS 4 /* in-place q/k/v ops of one layer */
#define GEN_ARCH_MAX_PRM 10

enum gen_qkv { GEN_QKV_Q = 0, GEN_QKV_K, GEN_QKV_V };

typedef struct gen_arch_weight {
	const char *field; /* the buffer "<tag>.<field>", rt_model_weight's name */
	int64_t per;       /* f32 elements per layer */
} gen_arch_weight;

/* One in-place kernel on q (T, n_heads, head_dim), k or v (T, n_kv_heads,
 * head_dim): its arguments are (x, pos, inv_freq) and then, for n_args 5,
 * the family weights w[0], w[1] (-1: a step the kernel does not run; the
 * planner passes inv_freq, a buffer that is there). params[0] is NAME. */
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
	int block;
	double bytes, flops;
} gen_arch_op;

typedef struct gen_arch {
	const char *name; /* rt_arch_name */
	/* The extra weights of cfg's layers; returns how many (<= GEN_ARCH_MAX_W). */
	int (*weights)(const rt_config *cfg, gen_arch_weight *out);
	/* The in-place ops of one layer over `rows` rows, in order; returns how
	 * many (<= GEN_ARCH_MAX_OPS). */
	int (*qkv_ops)(const rt_config *cfg, int64_t rows, gen_arch_op *out);
} gen_arch;

/* The family of cfg->arch, or NULL for one the generator has no file for. */
const gen_arch *gen_arch_of(int arch);

extern const gen_arch gen_arch_llama, gen_arch_qwen;

#endif
