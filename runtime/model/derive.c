/* Writes a Llama model (or a layer-skip view of one) to a new GGUF file,
 * optionally re-quantized: how a separate draft model with the target's
 * vocabulary is made from the target when no smaller sibling exists, and how
 * a small test model is cut from a real one (a few of its layers, its
 * tokenizer, a smaller embedding type). A tensor whose type does not change
 * is copied block for block from the source file when one is given; the
 * others are encoded from the model's fp32 values. Without a tokenizer copy
 * the file holds none and the drafter uses the target's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "formats/gguf.h"

static uint64_t block_of(uint32_t type) { return type == GGML_T_F32 || type == GGML_T_F16 || type == GGML_T_BF16 ? 1 : 32; }

typedef struct derive_out {
	gguf_writer *w;
	const gguf_file *src;
	int copied, encoded;
} derive_out;

/* One tensor: the source's blocks when src holds src_name in the same type
 * and shape, else x (in x out fp32) encoded as type. */
static int put(derive_out *o, const char *name, const char *src_name, uint32_t type, const float *x,
               uint64_t in, uint64_t out, sw_err *err)
{
	uint64_t n = in * out;
	if (in % block_of(type))
		type = GGML_T_F32; /* a row that does not fill whole blocks stays exact */
	uint64_t ne[2] = { in, out };
	uint32_t nd = out == 1 ? 1 : 2;
	const gguf_tensor *t = o->src && src_name ? gguf_tensor_find(o->src, src_name) : NULL;
	if (t && t->type == type && t->n_elems == n && t->ne[0] == in) {
		gguf_w_tensor(o->w, name, type, nd, ne, t->data, t->nbytes);
		o->copied++;
		return 0;
	}
	uint64_t bytes = ggml_dtype_nbytes(type, n);
	void *b = malloc(bytes ? bytes : 1);
	if (!b)
		return sw_errf(err, SW_ENOMEM, "derive: out of memory for %s", name);
	gguf_quantize(type, x, n, b);
	gguf_w_tensor(o->w, name, type, nd, ne, b, bytes); /* the writer copies */
	free(b);
	o->encoded++;
	return 0;
}

static bool type_ok(uint32_t t)
{
	return t == GGML_T_F32 || t == GGML_T_F16 || t == GGML_T_BF16 || t == GGML_T_Q8_0 || t == GGML_T_Q4_0 ||
	       t == GGML_T_Q4_1;
}

static bool has_prefix(gguf_str s, const char *p)
{
	size_t n = strlen(p);
	return s.n >= n && !memcmp(s.p, p, n);
}

int rt_llama_derive_gguf(const rt_model *m, const char *path, const rt_derive_opts *opt, sw_err *err)
{
	if (m->kind != RT_MODEL_LLAMA)
		return sw_errf(err, SW_EINVAL, "derive: %s is not a transformer", m->name);
	if (m->cfg.arch != RT_ARCH_LLAMA) /* the writer knows Llama's tensors only */
		return sw_errf(err, SW_ENOTSUP, "derive: %s: architecture: expected llama (a derived "
		               "draft is written as a Llama GGUF), found %s", m->name,
		               rt_arch_name(m->cfg.arch));
	if (m->embd_rows > 0) /* its tables have fewer rows than its vocabulary says */
		return sw_errf(err, SW_EINVAL, "derive: %s is a padded view; save the model it pads",
		               m->name);
	if (!type_ok(opt->type) || !type_ok(opt->embd_type))
		return sw_errf(err, SW_EINVAL, "derive: cannot write tensor type %s (expected f32, f16, bf16, q8_0, q4_0 or q4_1)",
		               ggml_dtype_name(type_ok(opt->type) ? opt->embd_type : opt->type));
	const rt_config *c = &m->cfg;
	if (opt->tok) {
		const gguf_kv *tk = gguf_find(opt->tok, "tokenizer.ggml.tokens");
		if (!tk || tk->type != GGUF_VT_ARRAY || tk->arr_type != GGUF_VT_STRING)
			return sw_errf(err, SW_EINVAL, "derive: %s: tokenizer.ggml.tokens: expected an array of "
			               "strings (a tokenizer to copy), found %s", opt->tok->path, tk ? "another type" : "none");
		if (tk->arr_n != (uint64_t)c->vocab)
			return sw_errf(err, SW_EINVAL, "derive: %s: tokenizer.ggml.tokens: expected %d tokens (the "
			               "vocabulary of %s), found %llu", opt->tok->path, c->vocab, m->name,
			               (unsigned long long)tk->arr_n);
	}
	const rt_weights *W = &m->w;
	int L = m->n_layers_run, rc = 0;
	derive_out o = { gguf_writer_new(3, 32), opt->src, 0, 0 };
	if (!o.w)
		return sw_errf(err, SW_ENOMEM, "derive: out of memory");
	gguf_w_str(o.w, "general.architecture", "llama");
	gguf_w_str(o.w, "general.name", m->name);
	gguf_w_u32(o.w, "llama.block_count", (uint32_t)L);
	gguf_w_u32(o.w, "llama.context_length", (uint32_t)c->max_ctx);
	gguf_w_u32(o.w, "llama.embedding_length", (uint32_t)c->dim);
	gguf_w_u32(o.w, "llama.feed_forward_length", (uint32_t)c->ffn_dim);
	gguf_w_u32(o.w, "llama.attention.head_count", (uint32_t)c->n_heads);
	gguf_w_u32(o.w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads);
	gguf_w_u32(o.w, "llama.rope.dimension_count", (uint32_t)c->head_dim);
	gguf_w_u32(o.w, "llama.vocab_size", (uint32_t)c->vocab);
	gguf_w_f32(o.w, "llama.rope.freq_base", c->rope_theta);
	gguf_w_f32(o.w, "llama.attention.layer_norm_rms_epsilon", c->norm_eps);
	if (c->rope_scaling == RT_ROPE_SCALING_LINEAR) {
		gguf_w_str(o.w, "llama.rope.scaling.type", "linear");
		gguf_w_f32(o.w, "llama.rope.scaling.factor", c->rope_factor);
	}
	if (opt->tok) {
		/* every tokenizer.* key (vocabulary, merges, types, special ids, chat template) */
		for (uint64_t i = 0; i < opt->tok->n_kv && !rc; i++)
			if (has_prefix(opt->tok->kv[i].key, "tokenizer."))
				rc = gguf_w_copy_kv(o.w, opt->tok, &opt->tok->kv[i], err);
	} else {
		if (c->bos_id >= 0)
			gguf_w_u32(o.w, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos_id);
		if (c->eos_id >= 0)
			gguf_w_u32(o.w, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos_id);
	}
	uint64_t D = (uint64_t)c->dim, F = (uint64_t)c->ffn_dim, V = (uint64_t)c->vocab;
	uint64_t Q = (uint64_t)c->n_heads * c->head_dim, K = (uint64_t)c->n_kv_heads * c->head_dim;
	if (!rc)
		rc = put(&o, "token_embd.weight", "token_embd.weight", opt->embd_type, W->tok_embd, D, V, err);
	for (int l = 0; l < L && !rc; l++) {
		const rt_layer_weights *lw = &W->layers[m->layer_map[l]];
		char n[64], sn[64];
#define PUT(suffix, ptr, t, in, out)                                                       \
		if (!rc) {                                                                     \
			snprintf(n, sizeof(n), "blk.%d.%s.weight", l, suffix);                     \
			snprintf(sn, sizeof(sn), "blk.%d.%s.weight", m->layer_map[l], suffix);     \
			rc = put(&o, n, sn, t, ptr, in, out, err);                                 \
		}
		PUT("attn_norm", lw->attn_norm, GGML_T_F32, D, 1);
		PUT("attn_q", lw->wq, opt->type, D, Q);
		PUT("attn_k", lw->wk, opt->type, D, K);
		PUT("attn_v", lw->wv, opt->type, D, K);
		PUT("attn_output", lw->wo, opt->type, Q, D);
		PUT("ffn_norm", lw->ffn_norm, GGML_T_F32, D, 1);
		PUT("ffn_gate", lw->w_gate, opt->type, D, F);
		PUT("ffn_up", lw->w_up, opt->type, D, F);
		PUT("ffn_down", lw->w_down, opt->type, F, D);
#undef PUT
	}
	if (!rc)
		rc = put(&o, "output_norm.weight", "output_norm.weight", GGML_T_F32, W->out_norm, D, 1, err);
	if (!rc && !c->tied_embd)
		rc = put(&o, "output.weight", "output.weight", opt->embd_type, W->lm_head, D, V, err);
	if (!rc)
		rc = gguf_writer_save(o.w, path, err);
	gguf_writer_free(o.w);
	if (!rc && opt->n_copied)
		*opt->n_copied = o.copied;
	return rc;
}

int rt_llama_save_gguf(const rt_model *m, const char *path, uint32_t type, sw_err *err)
{
	rt_derive_opts o = { .type = type, .embd_type = type };
	return rt_llama_derive_gguf(m, path, &o, err);
}
