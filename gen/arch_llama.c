/* The Llama family in the planner (arch.h): no extra weights; RoPE on
 * adjacent pairs (rows in GGUF order, templates/rope.cu.tmpl) on q and k;
 * the plain block (gen_arch_block_plain, Qwen's too). Also the family
 * table gen_arch_of. */
#include "arch.h"

enum { BLK_ROPE = 128 }; /* the block test_kern_nvrtc checks for zero spills */

static int llama_weights(const rt_config *cfg, gen_arch_weight *out)
{
	(void)cfg;
	(void)out;
	return 0;
}

static int llama_qkv_ops(const rt_config *cfg, int64_t rows, gen_arch_op *out)
{
	const int64_t hd = cfg->head_dim;
	for (int qk = 0; qk < 2; qk++) {
		const int64_t H = qk ? cfg->n_kv_heads : cfg->n_heads;
		gen_arch_op o = {.name = qk ? "rope_k" : "rope_q", .op = "rope", .kop = "rope_f32",
		                 .tmpl = "rope.cu.tmpl", .n_params = 5,
		                 .params = {{.name = "NAME", .type = GEN_PARAM_IDENT},
		                            {.name = "N_HEADS", .type = GEN_PARAM_INT, .i = H},
		                            {.name = "HEAD_DIM", .type = GEN_PARAM_INT, .i = hd},
		                            {.name = "ROT_DIM", .type = GEN_PARAM_INT, .i = hd},
		                            {.name = "BLOCK", .type = GEN_PARAM_INT, .i = BLK_ROPE}},
		                 .x = qk ? GEN_QKV_K : GEN_QKV_Q, .n_args = 3, .w = {-1, -1}, .freq = -1,
		                 .block = BLK_ROPE,
		                 .bytes = 2.0 * rows * H * hd * 4 + rows * 4.0 + hd / 2 * 4.0,
		                 .flops = 3.0 * rows * H * hd};
		out[qk] = o;
	}
	return 2;
}

void gen_arch_block_plain(const rt_config *cfg, gen_arch_block *out)
{
	(void)cfg;
	*out = (gen_arch_block){.embd_scale = 1.0f, .act = 0, .post_attn = -1, .post_ffn = -1};
}

const gen_arch gen_arch_llama = {"llama", llama_weights, llama_qkv_ops, gen_arch_block_plain, NULL};

const gen_arch *gen_arch_of(int arch)
{
	switch (arch) {
	case RT_ARCH_LLAMA:
		return &gen_arch_llama;
	case RT_ARCH_QWEN2:
	case RT_ARCH_QWEN3:
		return &gen_arch_qwen;
	case RT_ARCH_GEMMA3:
		return &gen_arch_gemma;
	default:
		return NULL;
	}
}
