/* Llama GGUF loader: a tiny synthetic model with awkward shapes written by
 * the GGUF writer (mixed F32/F16/BF16/Q8_0/Q4_1 tensors) loads with the
 * written config and values in the right places; missing tensors, wrong
 * shapes, foreign architectures and bad keys each give an error naming what
 * is wrong; and the real SmolLM2 file gives its known config. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "formats/gguf.h"
#include "model/model_gguf.h"

#define DEFAULT_MODEL "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf"

struct opts {
	const char *arch;
	int layers, dim, heads, kv_heads, key_len, ffn, vocab;
	bool tied, write_vocab, write_kv_heads, write_rope_dim;
	int rope_dim;
	const char *skip;      /* tensor not written */
	const char *bad_shape; /* tensor written with ne[1] + 1 */
	const char *skip_key;  /* metadata key not written */
	const char *rope_type; /* rope.scaling.type, or NULL */
};

static struct opts defaults(void)
{
	/* dim 40 with 4 heads of head_dim 16 (explicit key_length), so the
	 * attention width is 64 and wo (ne0 = 64) can be block-quantized;
	 * ffn 37 and vocab 33 are odd on purpose. */
	struct opts o = {
		.arch = "llama", .layers = 2, .dim = 40, .heads = 4, .kv_heads = 1,
		.key_len = 16, .ffn = 37, .vocab = 33, .tied = true, .write_vocab = true,
		.write_kv_heads = true, .write_rope_dim = true, .rope_dim = 16,
	};
	return o;
}

static uint64_t rng = 12345;
static float rndf(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((double)(rng >> 11) * 0x1p-53 * 2 - 1);
}

/* Expected fp32 values of every tensor, in write order, for comparison. */
struct written {
	char name[48];
	float *vals;
	uint64_t n;
};

struct model_file {
	uint8_t *buf;
	size_t size;
	struct written w[64];
	int n_w;
};

static void add_tensor(gguf_writer *gw, struct model_file *mf, const struct opts *o, const char *name,
		       uint64_t ne0, uint64_t ne1)
{
	if (o->skip && !strcmp(o->skip, name))
		return;
	if (o->bad_shape && !strcmp(o->bad_shape, name))
		ne1 = ne1 ? ne1 + 1 : 0, ne0 = ne1 ? ne0 : ne0 + 1;
	uint64_t n = ne0 * (ne1 ? ne1 : 1);
	float *x = malloc(n * sizeof(*x));
	for (uint64_t i = 0; i < n; i++)
		x[i] = rndf();
	/* cycle through types, falling back to F32/F16 where the block size
	 * does not divide the row */
	static const uint32_t cycle[] = { GGML_T_Q8_0, GGML_T_F16, GGML_T_Q4_1, GGML_T_BF16, GGML_T_F32, GGML_T_Q4_0 };
	uint32_t type = cycle[mf->n_w % 6];
	if (type != GGML_T_F16 && type != GGML_T_BF16 && type != GGML_T_F32 && ne0 % 32)
		type = mf->n_w % 2 ? GGML_T_F16 : GGML_T_F32;
	void *enc = malloc(n * 4);
	uint64_t nb = gguf_quantize(type, x, n, enc);
	assert_int_equal(nb, ggml_dtype_nbytes(type, n));
	uint64_t ne[2] = { ne0, ne1 };
	gguf_w_tensor(gw, name, type, ne1 ? 2 : 1, ne, enc, nb);
	struct written *w = &mf->w[mf->n_w++];
	snprintf(w->name, sizeof(w->name), "%s", name);
	w->n = n;
	w->vals = x;
	assert_int_equal(gguf_dequantize(type, enc, n, x), 0); /* what the loader must produce */
	free(enc);
}

static void key_u32(gguf_writer *gw, const struct opts *o, const char *key, uint32_t v)
{
	if (!o->skip_key || strcmp(o->skip_key, key))
		gguf_w_u32(gw, key, v);
}

static void build(struct model_file *mf, const struct opts *o)
{
	gguf_writer *gw = gguf_writer_new(3, 32);
	char name[48];
	memset(mf, 0, sizeof(*mf));
	gguf_w_str(gw, "general.architecture", o->arch);
	key_u32(gw, o, "llama.block_count", (uint32_t)o->layers);
	key_u32(gw, o, "llama.embedding_length", (uint32_t)o->dim);
	key_u32(gw, o, "llama.feed_forward_length", (uint32_t)o->ffn);
	key_u32(gw, o, "llama.attention.head_count", (uint32_t)o->heads);
	if (o->write_kv_heads)
		key_u32(gw, o, "llama.attention.head_count_kv", (uint32_t)o->kv_heads);
	if (o->key_len) {
		key_u32(gw, o, "llama.attention.key_length", (uint32_t)o->key_len);
		key_u32(gw, o, "llama.attention.value_length", (uint32_t)o->key_len);
	}
	key_u32(gw, o, "llama.context_length", 256);
	if (o->write_vocab)
		key_u32(gw, o, "llama.vocab_size", (uint32_t)o->vocab);
	if (o->write_rope_dim)
		key_u32(gw, o, "llama.rope.dimension_count", (uint32_t)o->rope_dim);
	gguf_w_f32(gw, "llama.rope.freq_base", 50000.0f);
	if (!o->skip_key || strcmp(o->skip_key, "llama.attention.layer_norm_rms_epsilon"))
		gguf_w_f32(gw, "llama.attention.layer_norm_rms_epsilon", 1e-6f);
	key_u32(gw, o, "tokenizer.ggml.bos_token_id", 1);
	key_u32(gw, o, "tokenizer.ggml.eos_token_id", 32);
	if (o->rope_type) {
		gguf_w_str(gw, "llama.rope.scaling.type", o->rope_type);
		gguf_w_f32(gw, "llama.rope.scaling.factor", 4.0f);
		gguf_w_f32(gw, "llama.rope.scaling.low_freq_factor", 2.0f);
		gguf_w_u32(gw, "llama.rope.scaling.original_context_length", 128);
	}

	int hd = o->key_len ? o->key_len : o->dim / o->heads;
	uint64_t D = (uint64_t)o->dim, QD = (uint64_t)o->heads * hd, KVD = (uint64_t)o->kv_heads * hd,
		 F = (uint64_t)o->ffn, V = (uint64_t)o->vocab;
	add_tensor(gw, mf, o, "token_embd.weight", D, V);
	for (int l = 0; l < o->layers; l++) {
#define T(suffix, ne0, ne1) \
		snprintf(name, sizeof(name), "blk.%d." suffix ".weight", l); \
		add_tensor(gw, mf, o, name, ne0, ne1)
		T("attn_norm", D, 0);
		T("attn_q", D, QD);
		T("attn_k", D, KVD);
		T("attn_v", D, KVD);
		T("attn_output", QD, D);
		T("ffn_norm", D, 0);
		T("ffn_gate", D, F);
		T("ffn_up", D, F);
		T("ffn_down", F, D);
#undef T
	}
	add_tensor(gw, mf, o, "output_norm.weight", D, 0);
	if (!o->tied)
		add_tensor(gw, mf, o, "output.weight", D, V);
	sw_err e = { 0 };
	void *p;
	assert_int_equal(gguf_writer_to_mem(gw, &p, &mf->size, &e), 0);
	mf->buf = p;
	gguf_writer_free(gw);
}

static void mf_free(struct model_file *mf)
{
	for (int i = 0; i < mf->n_w; i++)
		free(mf->w[i].vals);
	free(mf->buf);
}

static const struct written *find_w(const struct model_file *mf, const char *name)
{
	for (int i = 0; i < mf->n_w; i++)
		if (!strcmp(mf->w[i].name, name))
			return &mf->w[i];
	fail_msg("no written tensor %s", name);
	return NULL;
}

static void check_arr(const rt_weights *w, const struct model_file *mf, const char *name, const float *got)
{
	const struct written *x = find_w(mf, name);
	assert_non_null(got);
	assert_true((const uint8_t *)got >= (const uint8_t *)w->arena &&
		    (const uint8_t *)(got + x->n) <= (const uint8_t *)w->arena + w->arena_bytes);
	assert_int_equal((uintptr_t)got % 64, 0);
	if (memcmp(got, x->vals, x->n * sizeof(float)))
		fail_msg("%s: loaded values differ from the written ones", name);
}

/* Loads and expects an error with code and substrings. */
static void expect_load_fail(const struct opts *o, int code, const char *s1, const char *s2)
{
	struct model_file mf;
	build(&mf, o);
	sw_err e = { 0 };
	gguf_file *f = gguf_open_mem(mf.buf, mf.size, "tiny.gguf", &e);
	if (!f)
		fail_msg("open: %s", e.msg);
	rt_config cfg;
	rt_weights w;
	memset(&w, 0xab, sizeof(w));
	int rc = rt_llama_load_gguf(f, &cfg, &w, &e);
	if (rc != code || !strstr(e.msg, "tiny.gguf") || (s1 && !strstr(e.msg, s1)) || (s2 && !strstr(e.msg, s2)))
		fail_msg("expected %d with '%s' '%s', got %d: %s", code, s1, s2 ? s2 : "", rc, e.msg);
	assert_null(w.arena); /* left empty on failure */
	rt_weights_free(&w);
	gguf_close(f);
	mf_free(&mf);
}

static void load_ok(const struct opts *o, struct model_file *mf, rt_config *cfg, rt_weights *w)
{
	build(mf, o);
	sw_err e = { 0 };
	gguf_file *f = gguf_open_mem(mf->buf, mf->size, "tiny.gguf", &e);
	if (!f)
		fail_msg("open: %s", e.msg);
	if (rt_llama_load_gguf(f, cfg, w, &e))
		fail_msg("load: %s", e.msg);
	gguf_close(f); /* the weights must not point into the file */
	memset(mf->buf, 0, mf->size);
}

static void test_tiny_model_loads(void **state)
{
	for (int tied = 0; tied < 2; tied++) {
		struct opts o = defaults();
		o.tied = tied;
		struct model_file mf;
		rt_config c;
		rt_weights w;
		load_ok(&o, &mf, &c, &w);
		assert_int_equal(c.n_layers, 2);
		assert_int_equal(c.dim, 40);
		assert_int_equal(c.n_heads, 4);
		assert_int_equal(c.n_kv_heads, 1);
		assert_int_equal(c.head_dim, 16);
		assert_int_equal(c.ffn_dim, 37);
		assert_int_equal(c.vocab, 33);
		assert_int_equal(c.max_ctx, 256);
		assert_true(c.rope_theta == 50000.0f);
		assert_true(c.norm_eps == 1e-6f);
		assert_int_equal(c.rope_scaling, RT_ROPE_SCALING_NONE);
		assert_int_equal(c.bos_id, 1);
		assert_int_equal(c.eos_id, 32);
		assert_int_equal(c.tied_embd, tied);

		check_arr(&w, &mf, "token_embd.weight", w.tok_embd);
		check_arr(&w, &mf, "output_norm.weight", w.out_norm);
		if (tied)
			assert_ptr_equal(w.lm_head, w.tok_embd);
		else
			check_arr(&w, &mf, "output.weight", w.lm_head);
		assert_ptr_equal(w.layers, w.arena);
		char name[48];
		for (int l = 0; l < 2; l++) {
			const rt_layer_weights *L = &w.layers[l];
#define C(suffix, field) \
			snprintf(name, sizeof(name), "blk.%d." suffix ".weight", l); \
			check_arr(&w, &mf, name, L->field)
			C("attn_norm", attn_norm);
			C("attn_q", wq);
			C("attn_k", wk);
			C("attn_v", wv);
			C("attn_output", wo);
			C("ffn_norm", ffn_norm);
			C("ffn_gate", w_gate);
			C("ffn_up", w_up);
			C("ffn_down", w_down);
#undef C
		}
		rt_weights_free(&w);
		assert_null(w.arena);
		assert_null(w.tok_embd);
		rt_weights_free(&w); /* idempotent */
		mf_free(&mf);
	}
}

static void test_defaults(void **state)
{
	/* no head_count_kv (-> head_count), no vocab_size (-> token_embd rows),
	 * no key_length (-> dim / heads = 8), no rope.dimension_count, no
	 * bos/eos (-> -1) */
	struct opts o = defaults();
	o.write_kv_heads = false;
	o.write_vocab = false;
	o.key_len = 0;
	o.heads = 5;
	o.kv_heads = 5;
	o.write_rope_dim = false;
	o.skip_key = "tokenizer.ggml.bos_token_id";
	struct model_file mf;
	rt_config c;
	rt_weights w;
	load_ok(&o, &mf, &c, &w);
	assert_int_equal(c.n_kv_heads, 5);
	assert_int_equal(c.head_dim, 8);
	assert_int_equal(c.vocab, 33);
	assert_int_equal(c.bos_id, -1);
	assert_int_equal(c.eos_id, 32);
	check_arr(&w, &mf, "blk.1.attn_k.weight", w.layers[1].wk);
	rt_weights_free(&w);
	mf_free(&mf);

	o = defaults();
	o.rope_type = "llama3";
	load_ok(&o, &mf, &c, &w);
	assert_int_equal(c.rope_scaling, RT_ROPE_SCALING_LLAMA3);
	assert_true(c.rope_factor == 4.0f && c.rope_low_freq_factor == 2.0f && c.rope_high_freq_factor == 4.0f);
	assert_int_equal(c.rope_orig_ctx, 128);
	rt_weights_free(&w);
	mf_free(&mf);

	o.rope_type = "linear";
	load_ok(&o, &mf, &c, &w);
	assert_int_equal(c.rope_scaling, RT_ROPE_SCALING_LINEAR);
	assert_true(c.rope_factor == 4.0f);
	rt_weights_free(&w);
	mf_free(&mf);
}

static void test_load_errors(void **state)
{
	struct opts o = defaults();
	o.skip = "blk.1.ffn_up.weight";
	expect_load_fail(&o, SW_EINVAL, "missing tensor 'blk.1.ffn_up.weight'", NULL);
	o = defaults();
	o.skip = "output_norm.weight";
	expect_load_fail(&o, SW_EINVAL, "output_norm.weight", NULL);

	o = defaults();
	o.bad_shape = "blk.0.attn_k.weight";
	expect_load_fail(&o, SW_EINVAL, "tensor 'blk.0.attn_k.weight': expected shape [40, 16]", "found [40, 17]");
	o.bad_shape = "blk.1.ffn_norm.weight";
	expect_load_fail(&o, SW_EINVAL, "blk.1.ffn_norm.weight", "expected shape [40]");
	o.bad_shape = "token_embd.weight"; /* vocab_size says 33, rows are 34 */
	expect_load_fail(&o, SW_EINVAL, "token_embd.weight", "found [40, 34]");
	o.tied = false;
	o.bad_shape = "output.weight";
	expect_load_fail(&o, SW_EINVAL, "output.weight", "expected shape [40, 33]");

	o = defaults();
	o.arch = "gpt2";
	expect_load_fail(&o, SW_ENOTSUP, "general.architecture", "found \"gpt2\"");
	o = defaults();
	o.skip_key = "llama.block_count";
	expect_load_fail(&o, SW_ENOENT_KEY, "llama.block_count", NULL);
	o = defaults();
	o.skip_key = "llama.attention.layer_norm_rms_epsilon";
	expect_load_fail(&o, SW_ENOENT_KEY, "layer_norm_rms_epsilon", NULL);
	o = defaults();
	o.rope_dim = 8;
	expect_load_fail(&o, SW_ENOTSUP, "llama.rope.dimension_count", "expected 16");
	o = defaults();
	o.kv_heads = 3;
	expect_load_fail(&o, SW_EINVAL, "head_count_kv (3)", NULL);
	o = defaults();
	o.rope_type = "yarn";
	expect_load_fail(&o, SW_ENOTSUP, "rope.scaling.type", "yarn");
	o = defaults();
	o.key_len = 0;
	o.heads = 3; /* 40 not divisible by 3 */
	o.kv_heads = 1;
	expect_load_fail(&o, SW_EINVAL, "not a multiple of attention.head_count (3)", NULL);
}

/* config_from_gguf on a file with no tensors at all: vocab must come from
 * somewhere, and the message says where it looked. */
static void test_config_without_vocab(void **state)
{
	gguf_writer *gw = gguf_writer_new(3, 32);
	gguf_w_str(gw, "general.architecture", "llama");
	gguf_w_u32(gw, "llama.block_count", 1);
	gguf_w_u32(gw, "llama.embedding_length", 8);
	gguf_w_u32(gw, "llama.feed_forward_length", 8);
	gguf_w_u32(gw, "llama.attention.head_count", 2);
	gguf_w_u32(gw, "llama.context_length", 16);
	gguf_w_f32(gw, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
	void *p;
	size_t n;
	sw_err e = { 0 };
	assert_int_equal(gguf_writer_to_mem(gw, &p, &n, &e), 0);
	gguf_writer_free(gw);
	gguf_file *f = gguf_open_mem(p, n, "novocab.gguf", &e);
	assert_non_null(f);
	rt_config c;
	assert_int_equal(rt_llama_config_from_gguf(f, &c, &e), SW_EINVAL);
	assert_non_null(strstr(e.msg, "vocab_size"));
	assert_non_null(strstr(e.msg, "token_embd.weight"));
	gguf_close(f);
	free(p);
}

static void test_real_model(void **state)
{
	const char *path = getenv("SW_MODEL");
	path = path && *path ? path : DEFAULT_MODEL;
	if (access(path, R_OK) != 0)
		fail_msg("model %s not found: run `make model` (or set SW_MODEL)", path);
	sw_err e = { 0 };
	gguf_file *f = gguf_open(path, &e);
	if (!f)
		fail_msg("%s", e.msg);
	rt_config c;
	rt_weights w;
	if (rt_llama_load_gguf(f, &c, &w, &e))
		fail_msg("%s", e.msg);
	/* facts of the file as gguf-py's GGUFReader reports them */
	assert_int_equal(c.n_layers, 30);
	assert_int_equal(c.dim, 576);
	assert_int_equal(c.n_heads, 9);
	assert_int_equal(c.n_kv_heads, 3);
	assert_int_equal(c.head_dim, 64);
	assert_int_equal(c.ffn_dim, 1536);
	assert_int_equal(c.vocab, 49152);
	assert_int_equal(c.max_ctx, 8192);
	assert_true(c.rope_theta == 100000.0f);
	assert_true(c.norm_eps == 1e-5f);
	assert_true(c.tied_embd);
	assert_int_equal(c.bos_id, 1);
	assert_int_equal(c.eos_id, 2);
	assert_ptr_equal(w.lm_head, w.tok_embd);

	/* spot checks: the last embedding row and a last-layer weight */
	const gguf_tensor *t = gguf_tensor_find(f, "token_embd.weight");
	float row[1536];
	uint64_t rb = ggml_dtype_nbytes(t->type, 576);
	assert_int_equal(gguf_dequantize(t->type, (const uint8_t *)t->data + 49151 * rb, 576, row), 0);
	assert_memory_equal(row, w.tok_embd + (size_t)49151 * 576, 576 * sizeof(float));
	t = gguf_tensor_find(f, "blk.29.ffn_down.weight");
	rb = ggml_dtype_nbytes(t->type, 1536);
	assert_int_equal(gguf_dequantize(t->type, (const uint8_t *)t->data + 575 * rb, 1536, row), 0);
	assert_memory_equal(row, w.layers[29].w_down + (size_t)575 * 1536, 1536 * sizeof(float));
	rt_weights_free(&w);
	gguf_close(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiny_model_loads),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_config_without_vocab),
		cmocka_unit_test(test_real_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
