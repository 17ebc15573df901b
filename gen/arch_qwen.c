/* The Qwen family in the planner (arch.h), as runtime/model/qwen.c runs it
 * on the host: rows stay in HF order and RoPE rotates the NeoX pairs.
 *   Qwen2/Qwen2.5: q/k/v biases (bq, bk, bv); q and k: bias + RoPE, v: bias;
 *   Qwen3: per-head RMSNorm weights (q_norm, k_norm; head_dim each, the
 *          model's norm_eps) before RoPE, no biases.
 * Each step is one templates/head_prep.cu.tmpl launch per projection
 * (kernels/ref/head_prep.c). head_dim comes from the config (Qwen3's need
 * not be dim / n_heads): every shape below is in heads x head_dim. */
#include "arch.h"

/* 4 warps, a head each; fewer heads, a warp each: ptxas spills 8 bytes of
 * a one-head, head_dim-256 kernel at 64 threads (Gemma 3 270M's k) and none
 * at 32 (test_kern_head_prep: zero spills at these blocks) */
enum { BLK_HEAD = 128 };

enum { W_BQ = 0, W_BK, W_BV, W_QN = 0, W_KN };

static int qwen_weights(const rt_config *cfg, gen_arch_weight *out)
{
	const int64_t hd = cfg->head_dim;
	if (cfg->arch == RT_ARCH_QWEN2) {
		out[W_BQ] = (gen_arch_weight){"bq", (int64_t)cfg->n_heads * hd};
		out[W_BK] = (gen_arch_weight){"bk", (int64_t)cfg->n_kv_heads * hd};
		out[W_BV] = (gen_arch_weight){"bv", (int64_t)cfg->n_kv_heads * hd};
		return 3;
	}
	out[W_QN] = (gen_arch_weight){"q_norm", hd};
	out[W_KN] = (gen_arch_weight){"k_norm", hd};
	return 2;
}

gen_arch_op gen_arch_head_op(const char *name, const rt_config *cfg, int x, int64_t rows, int bias,
                             int norm, int rope, int wb, int wn, float scale, int freq)
{
	const int64_t hd = cfg->head_dim, H = x == GEN_QKV_Q ? cfg->n_heads : cfg->n_kv_heads;
	const double n = (double)rows * H * hd;
	const int block = H < BLK_HEAD / 32 ? 32 * (int)H : BLK_HEAD;
	gen_arch_op o = {.name = name, .op = "head_prep", .kop = "head_prep",
	                 .tmpl = "head_prep.cu.tmpl", .n_params = 9,
	                 .params = {{.name = "NAME", .type = GEN_PARAM_IDENT},
	                            {.name = "N_HEADS", .type = GEN_PARAM_INT, .i = H},
	                            {.name = "HEAD_DIM", .type = GEN_PARAM_INT, .i = hd},
	                            {.name = "BIAS", .type = GEN_PARAM_INT, .i = bias},
	                            {.name = "NORM", .type = GEN_PARAM_INT, .i = norm},
	                            {.name = "ROPE", .type = GEN_PARAM_INT, .i = rope},
	                            {.name = "EPS", .type = GEN_PARAM_FLOAT, .f = cfg->norm_eps},
	                            {.name = "SCALE", .type = GEN_PARAM_FLOAT, .f = scale},
	                            {.name = "BLOCK", .type = GEN_PARAM_INT, .i = block}},
	                 .x = x, .n_args = 5, .w = {wb, wn}, .freq = freq, .block = block,
	                 /* x read and written once, positions, the small tables */
	                 .bytes = 2.0 * n * 4 + rows * 4.0 + (rope ? hd / 2 * 4.0 : 0) +
	                          (bias ? H * hd * 4.0 : 0) + (norm ? hd * 4.0 : 0),
	                 .flops = n * (bias + 4.0 * norm + 3.0 * rope + (scale != 1.0f))};
	return o;
}

static int qwen_qkv_ops(const rt_config *cfg, int64_t rows, gen_arch_op *out)
{
	if (cfg->arch == RT_ARCH_QWEN2) {
		out[0] = gen_arch_head_op("qk_q", cfg, GEN_QKV_Q, rows, 1, 0, 1, W_BQ, -1, 1.0f, -1);
		out[1] = gen_arch_head_op("qk_k", cfg, GEN_QKV_K, rows, 1, 0, 1, W_BK, -1, 1.0f, -1);
		out[2] = gen_arch_head_op("bias_v", cfg, GEN_QKV_V, rows, 1, 0, 0, W_BV, -1, 1.0f, -1);
		return 3;
	}
	out[0] = gen_arch_head_op("qk_q", cfg, GEN_QKV_Q, rows, 0, 1, 1, -1, W_QN, 1.0f, -1);
	out[1] = gen_arch_head_op("qk_k", cfg, GEN_QKV_K, rows, 0, 1, 1, -1, W_KN, 1.0f, -1);
	return 2;
}

const gen_arch gen_arch_qwen = {"qwen", qwen_weights, qwen_qkv_ops, gen_arch_block_plain, NULL};
