/* derive-draft's small test model from the real SmolLM2-135M-Instruct Q4_1
 * (`make gpu-model`): layers 0 and 29 with the token embedding re-encoded as
 * Q4_1 and the tokenizer copied. Checked against the source file itself:
 * every layer tensor (and the output norm) is the source's blocks byte for
 * byte, every tokenizer.* key is the source's value, the embedding is within
 * Q4_1's rounding bound of the source's Q8_0 values, the file loads, its
 * tokenizer applies the chat template, and it generates. A tokenizer of
 * another vocabulary is refused naming the key. Needs the model (`make
 * model`; SW_MODEL overrides the path). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "decode/chain.h"
#include "formats/gguf.h"
#include "formats/tokenizer.h"

static const char *model_path(void)
{
	const char *p = getenv("SW_MODEL");
	return p ? p : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
}

static const char *const FIELDS[] = { "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
	                              "ffn_norm", "ffn_gate", "ffn_up", "ffn_down" };

static const gguf_tensor *tensor(const gguf_file *f, const char *name)
{
	const gguf_tensor *t = gguf_tensor_find(f, name);
	if (!t)
		fail_msg("%s: no tensor %s", f->path, name);
	return t;
}

/* a and b hold the same tensor: type, shape and bytes */
static void same_blocks(const gguf_file *a, const char *an, const gguf_file *b, const char *bn)
{
	const gguf_tensor *x = tensor(a, an), *y = tensor(b, bn);
	assert_int_equal(x->type, y->type);
	assert_int_equal(x->n_dims, y->n_dims);
	assert_memory_equal(x->ne, y->ne, sizeof(x->ne));
	assert_int_equal(x->nbytes, y->nbytes);
	if (memcmp(x->data, y->data, x->nbytes))
		fail_msg("%s %s differs from %s %s", a->path, an, b->path, bn);
}

static size_t vsize(uint32_t t)
{
	return t == GGUF_VT_UINT64 || t == GGUF_VT_INT64 || t == GGUF_VT_FLOAT64 ? 8
	       : t <= GGUF_VT_INT8 || t == GGUF_VT_BOOL                          ? 1
	       : t <= GGUF_VT_INT16                                               ? 2 : 4;
}

/* the key's value in a equals its value in b (type, raw bytes or strings) */
static void same_kv(const gguf_file *a, const gguf_kv *x, const gguf_file *b)
{
	char key[128];
	snprintf(key, sizeof(key), "%.*s", (int)x->key.n, x->key.p);
	const gguf_kv *y = gguf_find(b, key);
	if (!y)
		fail_msg("%s: no %s", b->path, key);
	assert_int_equal(x->type, y->type);
	if (x->type == GGUF_VT_STRING) {
		gguf_str s, t;
		assert_int_equal(gguf_get_str(a, key, &s, NULL), 0);
		assert_int_equal(gguf_get_str(b, key, &t, NULL), 0);
		assert_int_equal(s.n, t.n);
		assert_memory_equal(s.p, t.p, s.n);
	} else if (x->type == GGUF_VT_ARRAY) {
		assert_int_equal(x->arr_type, y->arr_type);
		assert_int_equal(x->arr_n, y->arr_n);
		for (uint64_t i = 0; x->arr_type == GGUF_VT_STRING && i < x->arr_n; i++) {
			gguf_str s = gguf_arr_str(a, x, i), t = gguf_arr_str(b, y, i);
			if (s.n != t.n || memcmp(s.p, t.p, s.n))
				fail_msg("%s[%llu] differs", key, (unsigned long long)i);
		}
		if (x->arr_type != GGUF_VT_STRING)
			assert_memory_equal(gguf_arr_data(x), gguf_arr_data(y), x->arr_n * vsize(x->arr_type));
	} else {
		assert_memory_equal(x->val, y->val, vsize(x->type));
	}
}

static void test_two_layer_model(void **state)
{
	(void)state;
	sw_err err = { 0 };
	if (access(model_path(), R_OK))
		fail_msg("real model %s missing: run `make model`", model_path());
	char dir[] = "/tmp/sw_derive_XXXXXX", out[64], bare[64];
	assert_non_null(mkdtemp(dir));
	snprintf(out, sizeof(out), "%s/smollm2-2l.gguf", dir);
	snprintf(bare, sizeof(bare), "%s/bare.gguf", dir);
	rt_model *m = rt_model_load(model_path(), &err);
	assert_non_null(m);
	gguf_file *src = gguf_open(model_path(), &err);
	assert_non_null(src);
	rt_model *v = rt_model_layerskip_parse(m, "0,29", &err);
	assert_non_null(v);
	int copied = -1;
	rt_derive_opts o = { .type = GGML_T_Q4_1, .embd_type = GGML_T_Q4_1, .src = src, .tok = src,
	                     .n_copied = &copied };
	if (rt_llama_derive_gguf(v, out, &o, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(copied, 2 * 9 + 1);

	gguf_file *d = gguf_open(out, &err);
	assert_non_null(d);
	printf("  %s: %zu bytes (%.1f MiB)\n", out, d->size, (double)d->size / 1048576.0);
	assert_true(d->size < 25u * 1000 * 1000); /* the GPU machine's upload budget */
	uint32_t nl = 0;
	assert_int_equal(gguf_get_u32(d, "llama.block_count", &nl, &err), 0);
	assert_int_equal(nl, 2);
	static const int from[2] = { 0, 29 };
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < sizeof(FIELDS) / sizeof(FIELDS[0]); i++) {
			char a[64], b[64];
			snprintf(a, sizeof(a), "blk.%d.%s.weight", l, FIELDS[i]);
			snprintf(b, sizeof(b), "blk.%d.%s.weight", from[l], FIELDS[i]);
			same_blocks(d, a, src, b);
		}
	same_blocks(d, "output_norm.weight", src, "output_norm.weight");
	assert_null(gguf_tensor_find(d, "output.weight")); /* tied, as the source */
	int n_tok_keys = 0;
	for (uint64_t i = 0; i < src->n_kv; i++)
		if (src->kv[i].key.n > 10 && !memcmp(src->kv[i].key.p, "tokenizer.", 10)) {
			same_kv(src, &src->kv[i], d);
			n_tok_keys++;
		}
	assert_true(n_tok_keys >= 8); /* model, pre, tokens, types, merges, ids, chat template */
	assert_non_null(gguf_find(d, "tokenizer.chat_template"));

	/* the embedding: Q4_1 now, each value within the block's rounding of
	 * the source's (half a step, plus fp16 rounding of the scale and min) */
	const gguf_tensor *te = tensor(d, "token_embd.weight"), *se = tensor(src, "token_embd.weight");
	assert_int_equal(te->type, GGML_T_Q4_1);
	assert_int_equal(se->type, GGML_T_Q8_0);
	assert_int_equal(te->n_elems, se->n_elems);
	float *x = malloc(se->n_elems * sizeof(float)), *y = malloc(te->n_elems * sizeof(float));
	assert_non_null(x);
	assert_non_null(y);
	assert_int_equal(gguf_tensor_to_f32(src, se, x, &err), 0);
	assert_int_equal(gguf_tensor_to_f32(d, te, y, &err), 0);
	double worst = 0;
	for (uint64_t b = 0; b < se->n_elems; b += 32) {
		float lo = x[b], hi = x[b];
		for (int i = 1; i < 32; i++) {
			lo = x[b + i] < lo ? x[b + i] : lo;
			hi = x[b + i] > hi ? x[b + i] : hi;
		}
		double bound = (hi - lo) / 30.0 + (hi - lo) * 16.0 / 2048.0 + (lo < 0 ? -lo : lo) / 2048.0 + 1e-7;
		for (int i = 0; i < 32; i++) {
			double e = x[b + i] > y[b + i] ? x[b + i] - y[b + i] : y[b + i] - x[b + i];
			if (e > bound)
				fail_msg("token_embd[%llu]: %g, source %g: beyond Q4_1's bound %g",
				         (unsigned long long)(b + i), (double)y[b + i], (double)x[b + i], bound);
			worst = e / bound > worst ? e / bound : worst;
		}
	}
	printf("  token_embd Q8_0 -> Q4_1: worst error %.2f of the bound\n", worst);
	free(x);
	free(y);

	/* it loads, its own tokenizer formats a chat, and it generates */
	rt_model *dm = rt_model_load(out, &err);
	if (!dm)
		fail_msg("%s", err.msg);
	assert_int_equal(dm->cfg.n_layers, 2);
	assert_true(dm->cfg.tied_embd);
	rt_tokenizer *tok = rt_tokenizer_from_gguf(d, &err);
	assert_non_null(tok);
	char chat[512];
	int len = rt_chat_format(tok, "Hello, who are you?", chat, sizeof(chat), &err);
	assert_true(len > 0);
	assert_non_null(strstr(chat, "<|im_start|>user"));
	int32_t ids[128], gen[8];
	int n = rt_tokenize(tok, chat, (size_t)len, false, true, ids, 128, &err);
	assert_true(n > 5);
	rt_gen_cfg cfg = { .samp = { 0.0f, 0, 1.0f }, .gamma = 1, .seed = 1, .max_new = 8 };
	rt_stats st;
	rt_ctx *c = rt_ctx_new(dm, 256, 32, &err);
	assert_non_null(c);
	assert_int_equal(rt_generate_target(c, ids, n, &cfg, gen, &st, &err), 8);
	for (int i = 0; i < 8; i++)
		assert_true(gen[i] >= 0 && gen[i] < dm->cfg.vocab);
	rt_ctx_free(c);

	/* without a tokenizer; then a tokenizer from a file that has none */
	rt_derive_opts ob = { .type = GGML_T_Q4_1, .embd_type = GGML_T_Q4_1, .src = src };
	assert_int_equal(rt_llama_derive_gguf(v, bare, &ob, &err), 0);
	gguf_file *bf = gguf_open(bare, &err);
	assert_non_null(bf);
	assert_null(gguf_find(bf, "tokenizer.ggml.tokens"));
	rt_derive_opts oc = { .type = GGML_T_Q4_1, .embd_type = GGML_T_Q4_1, .src = src, .tok = bf };
	assert_int_not_equal(rt_llama_derive_gguf(v, out, &oc, &err), 0);
	assert_non_null(strstr(err.msg, "tokenizer.ggml.tokens: expected an array of strings"));
	assert_non_null(strstr(err.msg, "bare.gguf"));

	gguf_close(bf);
	rt_tokenizer_free(tok);
	rt_model_free(dm);
	gguf_close(d);
	rt_model_free(v);
	rt_model_free(m);
	gguf_close(src);
	unlink(out);
	unlink(bare);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_layer_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
