/* Writes a Llama model (or a layer-skip view of one) to a new GGUF file,
 * optionally re-quantized: how a separate draft model with the target's
 * vocabulary is made from the target when no smaller sibling exists. The
 * file holds no tokenizer; the drafter uses the target's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "formats/gguf.h"

static uint64_t block_of(uint32_t type) { return type == GGML_T_F32 || type == GGML_T_F16 || type == GGML_T_BF16 ? 1 : 32; }

static int put(gguf_writer *w, const char *name, uint32_t type, const float *x, uint64_t in, uint64_t out,
               void **bufs, int *nb, sw_err *err)
{
	uint64_t n = in * out;
	if (in % block_of(type))
		type = GGML_T_F32; /* a row that does not fill whole blocks stays exact */
	uint64_t bytes = ggml_dtype_nbytes(type, n);
	void *b = malloc(bytes ? bytes : 1);
	if (!b)
		return sw_errf(err, SW_ENOMEM, "derive: out of memory for %s", name);
	bufs[(*nb)++] = b;
	gguf_quantize(type, x, n, b);
	uint64_t ne[2] = { in, out };
	gguf_w_tensor(w, name, type, out == 1 ? 1 : 2, ne, b, bytes);
	return 0;
}

int rt_llama_save_gguf(const rt_model *m, const char *path, uint32_t type, sw_err *err)
{
	if (m->kind != RT_MODEL_LLAMA)
		return sw_errf(err, SW_EINVAL, "derive: %s is not a transformer", m->name);
	if (m->embd_rows > 0) /* its tables have fewer rows than its vocabulary says */
		return sw_errf(err, SW_EINVAL, "derive: %s is a padded view; save the model it pads",
		               m->name);
	if (type != GGML_T_F32 && type != GGML_T_F16 && type != GGML_T_BF16 && type != GGML_T_Q8_0 &&
	    type != GGML_T_Q4_0 && type != GGML_T_Q4_1)
		return sw_errf(err, SW_EINVAL, "derive: cannot write tensor type %s (expected f32, f16, bf16, q8_0, q4_0 or q4_1)",
		               ggml_dtype_name(type));
	const rt_config *c = &m->cfg;
	const rt_weights *W = &m->w;
	int L = m->n_layers_run;
	gguf_writer *w = gguf_writer_new(3, 32);
	int nbuf = 0, rc = 0;
	void **bufs = calloc((size_t)L * 9 + 8, sizeof(*bufs));
	if (!w || !bufs) {
		rc = sw_errf(err, SW_ENOMEM, "derive: out of memory");
		goto out_free;
	}
	gguf_w_str(w, "general.architecture", "llama");
	gguf_w_str(w, "general.name", m->name);
	gguf_w_u32(w, "llama.block_count", (uint32_t)L);
	gguf_w_u32(w, "llama.context_length", (uint32_t)c->max_ctx);
	gguf_w_u32(w, "llama.embedding_length", (uint32_t)c->dim);
	gguf_w_u32(w, "llama.feed_forward_length", (uint32_t)c->ffn_dim);
	gguf_w_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads);
	gguf_w_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads);
	gguf_w_u32(w, "llama.rope.dimension_count", (uint32_t)c->head_dim);
	gguf_w_u32(w, "llama.vocab_size", (uint32_t)c->vocab);
	gguf_w_f32(w, "llama.rope.freq_base", c->rope_theta);
	gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", c->norm_eps);
	if (c->rope_scaling == RT_ROPE_SCALING_LINEAR) {
		gguf_w_str(w, "llama.rope.scaling.type", "linear");
		gguf_w_f32(w, "llama.rope.scaling.factor", c->rope_factor);
	}
	if (c->bos_id >= 0)
		gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos_id);
	if (c->eos_id >= 0)
		gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos_id);
	uint64_t D = (uint64_t)c->dim, F = (uint64_t)c->ffn_dim, V = (uint64_t)c->vocab;
	uint64_t Q = (uint64_t)c->n_heads * c->head_dim, K = (uint64_t)c->n_kv_heads * c->head_dim;
	rc = put(w, "token_embd.weight", type, W->tok_embd, D, V, bufs, &nbuf, err);
	for (int l = 0; l < L && !rc; l++) {
		const rt_layer_weights *lw = &W->layers[m->layer_map[l]];
		char n[64];
#define PUT(suffix, ptr, t, in, out)                                                       \
		if (!rc) {                                                                     \
			snprintf(n, sizeof(n), "blk.%d.%s.weight", l, suffix);                     \
			rc = put(w, n, t, ptr, in, out, bufs, &nbuf, err);                         \
		}
		PUT("attn_norm", lw->attn_norm, GGML_T_F32, D, 1);
		PUT("attn_q", lw->wq, type, D, Q);
		PUT("attn_k", lw->wk, type, D, K);
		PUT("attn_v", lw->wv, type, D, K);
		PUT("attn_output", lw->wo, type, Q, D);
		PUT("ffn_norm", lw->ffn_norm, GGML_T_F32, D, 1);
		PUT("ffn_gate", lw->w_gate, type, D, F);
		PUT("ffn_up", lw->w_up, type, D, F);
		PUT("ffn_down", lw->w_down, type, F, D);
#undef PUT
	}
	if (!rc)
		rc = put(w, "output_norm.weight", GGML_T_F32, W->out_norm, D, 1, bufs, &nbuf, err);
	if (!rc && !c->tied_embd)
		rc = put(w, "output.weight", type, W->lm_head, D, V, bufs, &nbuf, err);
	if (!rc)
		rc = gguf_writer_save(w, path, err);
out_free:
	for (int i = 0; i < nbuf; i++)
		free(bufs[i]);
	free(bufs);
	gguf_writer_free(w);
	return rc;
}
