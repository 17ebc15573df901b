/* Tests for runtime/safetensors.c and runtime/model_hf.c: tiny checkpoints
 * written here, F16/BF16 against closed-form values, each malformed-file class
 * with its own message, HF config parsing, and an independent check of the
 * q/k RoPE permutation against real GGUF weights converted by python (gguf). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "formats/gguf.h"
#include "model/model_hf.h"
#include "formats/safetensors.h"

/* ---- a minimal safetensors writer ---- */

struct wt {
	const char *name;
	const char *dtype;
	int n_dims;
	int64_t shape[4];
	const void *data;
	size_t nbytes;
};

/* Serialises tensors back to back; returns a malloc'd file image. */
static uint8_t *st_build(const struct wt *t, size_t n, size_t *len)
{
	char *hdr = malloc(1 << 16);
	size_t h = 0, off = 0, data_len = 0;

	assert_non_null(hdr);
	h += (size_t)sprintf(hdr + h, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (size_t i = 0; i < n; i++) {
		h += (size_t)sprintf(hdr + h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name, t[i].dtype);
		for (int d = 0; d < t[i].n_dims; d++)
			h += (size_t)sprintf(hdr + h, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
		h += (size_t)sprintf(hdr + h, "],\"data_offsets\":[%zu,%zu]}", off, off + t[i].nbytes);
		off += t[i].nbytes;
	}
	h += (size_t)sprintf(hdr + h, "}");
	while (h % 8) /* the format pads the header with spaces */
		hdr[h++] = ' ';
	data_len = off;
	*len = 8 + h + data_len;
	uint8_t *buf = malloc(*len);
	assert_non_null(buf);
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)((uint64_t)h >> (8 * i));
	memcpy(buf + 8, hdr, h);
	off = 8 + h;
	for (size_t i = 0; i < n; i++) {
		if (t[i].nbytes)
			memcpy(buf + off, t[i].data, t[i].nbytes);
		off += t[i].nbytes;
	}
	free(hdr);
	return buf;
}

/* A file image with a hand-written header (and a chosen length field). */
static uint8_t *st_raw(uint64_t hlen, const char *header, size_t data_len, size_t *len)
{
	size_t h = strlen(header);
	*len = 8 + h + data_len;
	uint8_t *buf = calloc(1, *len);
	assert_non_null(buf);
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)(hlen >> (8 * i));
	memcpy(buf + 8, header, h);
	return buf;
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

static void write_text(const char *path, const char *s)
{
	write_file(path, s, strlen(s));
}

static char *make_tmpdir(void)
{
	char *d = strdup("/tmp/sw_st_XXXXXX");
	assert_non_null(mkdtemp(d));
	return d;
}

static void rm_rf(char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	free(dir);
}

/* Expects open_mem to fail with code and every NULL-terminated fragment. */
static void bad_mem(const uint8_t *buf, size_t len, int code, ...)
{
	safetensors_file *f = NULL;
	sw_err err = { 0 };
	va_list ap;
	int rc = safetensors_open_mem(buf, len, "m.st", &f, &err);

	if (!rc) {
		safetensors_free(f);
		fail_msg("malformed file accepted");
	}
	assert_null(f);
	assert_int_equal(rc, code);
	va_start(ap, code);
	for (const char *frag; (frag = va_arg(ap, const char *));)
		if (!strstr(err.msg, frag))
			fail_msg("message lacks \"%s\": %s", frag, err.msg);
	va_end(ap);
}

static void bad_header(const char *header, size_t data_len, int code, const char *f1, const char *f2)
{
	size_t len;
	uint8_t *buf = st_raw(strlen(header), header, data_len, &len);
	bad_mem(buf, len, code, f1, f2, NULL);
	free(buf);
}

static void test_f16_bf16_closed_form(void **state)
{
	/* binary16: normal, max, subnormals, min normal, inf, NaN, signed zero */
	assert_true(safetensors_f16_to_f32(0x3c00) == 1.0f);
	assert_true(safetensors_f16_to_f32(0xc000) == -2.0f);
	assert_true(safetensors_f16_to_f32(0x3555) == 0.333251953125f);
	assert_true(safetensors_f16_to_f32(0x7bff) == 65504.0f);
	assert_true(safetensors_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
	assert_true(safetensors_f16_to_f32(0x03ff) == 1023.0f * ldexpf(1.0f, -24));
	assert_true(safetensors_f16_to_f32(0x8001) == -ldexpf(1.0f, -24));
	assert_true(safetensors_f16_to_f32(0x0400) == ldexpf(1.0f, -14));
	assert_true(isinf(safetensors_f16_to_f32(0x7c00)) && safetensors_f16_to_f32(0x7c00) > 0);
	assert_true(isinf(safetensors_f16_to_f32(0xfc00)) && safetensors_f16_to_f32(0xfc00) < 0);
	assert_true(isnan(safetensors_f16_to_f32(0x7e00)));
	assert_true(isnan(safetensors_f16_to_f32(0x7c01))); /* signalling payload stays NaN */
	assert_true(safetensors_f16_to_f32(0x8000) == 0.0f && signbit(safetensors_f16_to_f32(0x8000)));
	/* every finite half, against sign * 2^(e-15) * (1 + m/1024) */
	for (uint32_t h = 0; h < 0x10000; h++) {
		int e = (h >> 10) & 0x1f, m = h & 0x3ff;
		if (e == 31)
			continue;
		double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m, -24);
		if (h & 0x8000)
			v = -v;
		assert_true(safetensors_f16_to_f32((uint16_t)h) == (float)v);
	}
	/* bfloat16 is the top half of an f32 */
	assert_true(safetensors_bf16_to_f32(0x3f80) == 1.0f);
	assert_true(safetensors_bf16_to_f32(0xc049) == -3.140625f);
	assert_true(safetensors_bf16_to_f32(0x0001) == ldexpf(1.0f, -133));
	assert_true(isinf(safetensors_bf16_to_f32(0xff80)));
	assert_true(isnan(safetensors_bf16_to_f32(0x7fc1)));
}

static void test_roundtrip_mem(void **state)
{
	const float f32[6] = { 1.5f, -2.0f, 0.0f, 3.25f, 1e-30f, -7.0f };
	const uint16_t f16[4] = { 0x3c00, 0xc000, 0x3800, 0x0001 };   /* 1, -2, 0.5, 2^-24 */
	const uint16_t bf16[3] = { 0x3f80, 0x4049, 0xbf00 };          /* 1, 3.140625, -0.5 */
	const float scalar = 42.0f;
	const struct wt t[] = {
		{ "a.weight", "F32", 2, { 2, 3 }, f32, sizeof(f32) },
		{ "b", "F16", 1, { 4 }, f16, sizeof(f16) },
		{ "c", "BF16", 3, { 1, 3, 1 }, bf16, sizeof(bf16) },
		{ "empty", "F32", 2, { 0, 5 }, NULL, 0 },
		{ "s", "F32", 0, { 0 }, &scalar, sizeof(scalar) },
	};
	safetensors_file *f;
	sw_err err = { 0 };
	size_t len;
	float out[8];
	uint8_t *buf = st_build(t, 5, &len);

	assert_int_equal(safetensors_open_mem(buf, len, "mem", &f, &err), 0);
	assert_int_equal(f->n_tensors, 5); /* __metadata__ is not a tensor */
	const safetensors_tensor *a = safetensors_find(f, "a.weight");
	assert_non_null(a);
	assert_int_equal(a->n_dims, 2);
	assert_int_equal(a->shape[0], 2);
	assert_int_equal(a->shape[1], 3);
	assert_int_equal(a->numel, 6);
	safetensors_to_f32(a, out);
	assert_memory_equal(out, f32, sizeof(f32));
	safetensors_to_f32(safetensors_find(f, "b"), out);
	assert_true(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0.5f && out[3] == ldexpf(1.0f, -24));
	const safetensors_tensor *c = safetensors_find(f, "c");
	assert_int_equal(c->dtype, SAFETENSORS_BF16);
	assert_int_equal(c->numel, 3);
	safetensors_to_f32(c, out);
	assert_true(out[0] == 1.0f && out[1] == 3.140625f && out[2] == -0.5f);
	assert_int_equal(safetensors_find(f, "empty")->numel, 0);
	const safetensors_tensor *s = safetensors_find(f, "s");
	assert_int_equal(s->n_dims, 0);
	assert_int_equal(s->numel, 1);
	safetensors_to_f32(s, out);
	assert_true(out[0] == 42.0f);
	assert_null(safetensors_find(f, "nope"));
	assert_string_equal(safetensors_dtype_name(SAFETENSORS_F16), "F16");
	safetensors_free(f);
	free(buf);
}

/* I64 and BOOL (EAGLE-3's d2t and t2d): read as int64 exactly (values
 * beyond 2^53 and negative ones included), BOOL any non-zero byte as 1,
 * refused by safetensors_to_i64 for a float dtype; to_f32 gives the values. */
static void test_int_dtypes(void **state)
{
	const int64_t iv[4] = { -3, 0, 9007199254740993LL, INT64_MIN };
	const uint8_t bv[5] = { 0, 1, 2, 255, 0 };
	const float fv[1] = { 1.5f };
	struct wt t[] = {
		{ "d2t", "I64", 1, { 4 }, iv, sizeof(iv) },
		{ "t2d", "BOOL", 1, { 5 }, bv, sizeof(bv) },
		{ "f", "F32", 1, { 1 }, fv, sizeof(fv) },
	};
	size_t len;
	uint8_t *buf = st_build(t, 3, &len);
	safetensors_file *f;
	sw_err err = { 0 };
	assert_int_equal(safetensors_open_mem(buf, len, "mem", &f, &err), 0);
	const safetensors_tensor *a = safetensors_find(f, "d2t"), *b = safetensors_find(f, "t2d"),
	                         *c = safetensors_find(f, "f");
	assert_int_equal(a->dtype, SAFETENSORS_I64);
	assert_int_equal(b->dtype, SAFETENSORS_BOOL);
	assert_string_equal(safetensors_dtype_name(SAFETENSORS_BOOL), "BOOL");
	int64_t out[5];
	assert_int_equal(safetensors_to_i64(a, out), 0);
	assert_memory_equal(out, iv, sizeof(iv));
	assert_int_equal(safetensors_to_i64(b, out), 0);
	const int64_t bw[5] = { 0, 1, 1, 1, 0 };
	assert_memory_equal(out, bw, sizeof(bw));
	assert_int_equal(safetensors_to_i64(c, out), -1);
	float fo[5];
	safetensors_to_f32(a, fo);
	assert_true(fo[0] == -3.0f && fo[2] == 9007199254740992.0f);
	safetensors_to_f32(b, fo);
	assert_true(fo[2] == 1.0f && fo[4] == 0.0f);
	safetensors_free(f);
	free(buf);
	/* a size that does not match the dtype */
	struct wt bad[] = { { "d2t", "I64", 1, { 3 }, iv, 20 } };
	buf = st_build(bad, 1, &len);
	assert_int_equal(safetensors_open_mem(buf, len, "mem", &f, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "expected 24 (3 elements of I64)"));
	free(buf);
}

static void test_malformed(void **state)
{
	size_t len;
	uint8_t *buf;

	buf = st_raw(0, "", 0, &len);
	bad_mem(buf, 5, SW_EINVAL, "m.st: file is 5 bytes, too short", NULL);
	free(buf);
	buf = st_raw((uint64_t)1 << 40, "{}", 0, &len);
	bad_mem(buf, len, SW_EINVAL, "header length 1099511627776 exceeds the 104857600-byte limit", NULL);
	free(buf);
	buf = st_raw(100, "{}", 4, &len);
	bad_mem(buf, len, SW_EINVAL, "header length 100 exceeds the file size 14", NULL);
	free(buf);

	bad_header("hello", 0, SW_EINVAL, "m.st (header):1:1: expected a value", "found 'hello'");
	bad_header("{\"a\": 1,}", 0, SW_EINVAL, "m.st (header):1:9:", "trailing commas");
	bad_header("[]", 0, SW_EINVAL, "$: expected an object, found array", NULL);
	bad_header("{\"a\": 5}", 0, SW_EINVAL, "$.a: expected an object, found 5", NULL);
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, SW_EINVAL,
		   "tensor \"a\": data_offsets [0, 8) outside the data section (4 bytes)", NULL);
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, SW_EINVAL,
		   "tensor \"a\": data_offsets span 8 bytes, expected 12 (3 elements of F32)", NULL);
	bad_header("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[4,2]}}", 8, SW_EINVAL,
		   "tensor \"a\": data_offsets [4, 2) end before begin", NULL);
	bad_header("{\"w.x\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, SW_ENOTSUP,
		   "tensor \"w.x\": dtype I32 is not supported", "supported: F32, F16, BF16");
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0, SW_EINVAL,
		   "$.a.shape[0]: expected an integer >= 0, found -1", NULL);
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, SW_EINVAL,
		   "$.a.shape: expected an array of 0 to 8 elements, found array of 9 elements", NULL);
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, SW_EINVAL,
		   "tensor \"a\": shape overflows", NULL);
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 4, SW_EINVAL,
		   "tensor \"a\": 4611686018427387904 elements of F32 overflow a 64-bit byte count", NULL);
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, SW_EINVAL,
		   "$.a.data_offsets: expected an array of 2 elements, found array of 1 element", NULL);
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, SW_EINVAL,
		   "$.a: missing required field \"data_offsets\"", NULL);
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"dtpye\":1}}", 4, SW_EINVAL,
		   "$.a: unknown field \"dtpye\" (did you mean \"dtype\"?)", NULL);
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, SW_EINVAL,
		   "tensors \"a\" and \"b\" overlap", NULL);
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, SW_EINVAL,
		   "duplicate key \"a\"", NULL);

	/* a file on disk: open, and a missing one */
	safetensors_file *f;
	sw_err err = { 0 };
	assert_int_equal(safetensors_open("/nonexistent/x.safetensors", &f, &err), SW_EIO);
	assert_non_null(strstr(err.msg, "/nonexistent/x.safetensors: cannot open"));
}

/* ---- HF config.json ---- */

static int cfg_parse(const char *json, rt_config *c, sw_err *err)
{
	return rt_llama_config_from_hf_json(json, strlen(json), "config.json", c, err);
}

static void cfg_bad(const char *json, int code, const char *frag)
{
	rt_config c;
	sw_err err = { 0 };
	int rc = cfg_parse(json, &c, &err);
	if (rc != code || !strstr(err.msg, frag))
		fail_msg("config: rc %d (want %d), message \"%s\" lacks \"%s\"", rc, code, err.msg, frag);
}

#define CFG_BASE "\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":96," \
		 "\"num_attention_heads\":4,\"num_hidden_layers\":2,\"vocab_size\":100"

static void test_hf_config(void **state)
{
	rt_config c;
	sw_err err = { 0 };

	/* defaults */
	assert_int_equal(cfg_parse("{" CFG_BASE "}", &c, &err), 0);
	assert_int_equal(c.dim, 64);
	assert_int_equal(c.ffn_dim, 96);
	assert_int_equal(c.n_heads, 4);
	assert_int_equal(c.n_kv_heads, 4);
	assert_int_equal(c.head_dim, 16);
	assert_int_equal(c.n_layers, 2);
	assert_int_equal(c.vocab, 100);
	assert_int_equal(c.max_ctx, 2048);
	assert_true(c.rope_theta == 10000.0f);
	assert_true(c.norm_eps == 1e-6f);
	assert_int_equal(c.rope_scaling, RT_ROPE_SCALING_NONE);
	assert_false(c.tied_embd);
	assert_int_equal(c.bos_id, -1);
	assert_int_equal(c.eos_id, -1);

	/* everything given: Llama 3.1 style */
	assert_int_equal(cfg_parse("{" CFG_BASE ",\"architectures\":[\"LlamaForCausalLM\"],"
				   "\"num_key_value_heads\":2,\"head_dim\":8,\"rms_norm_eps\":1e-05,"
				   "\"rope_theta\":500000.0,\"max_position_embeddings\":131072,"
				   "\"tie_word_embeddings\":true,\"bos_token_id\":1,\"eos_token_id\":[2,3,4],"
				   "\"attention_bias\":false,\"mlp_bias\":false,\"hidden_act\":\"silu\","
				   "\"rope_scaling\":{\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
				   "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"}}", &c, &err), 0);
	assert_int_equal(c.n_kv_heads, 2);
	assert_int_equal(c.head_dim, 8);
	assert_true(c.norm_eps == 1e-5f);
	assert_true(c.rope_theta == 500000.0f);
	assert_int_equal(c.max_ctx, 131072);
	assert_true(c.tied_embd);
	assert_int_equal(c.bos_id, 1);
	assert_int_equal(c.eos_id, 2);
	assert_int_equal(c.rope_scaling, RT_ROPE_SCALING_LLAMA3);
	assert_true(c.rope_factor == 8.0f && c.rope_low_freq_factor == 1.0f && c.rope_high_freq_factor == 4.0f);
	assert_int_equal(c.rope_orig_ctx, 8192);

	assert_int_equal(cfg_parse("{" CFG_BASE ",\"rope_scaling\":{\"type\":\"linear\",\"factor\":2},"
				   "\"bos_token_id\":null,\"eos_token_id\":[]}", &c, &err), 0);
	assert_int_equal(c.rope_scaling, RT_ROPE_SCALING_LINEAR);
	assert_true(c.rope_factor == 2.0f);
	assert_int_equal(c.bos_id, -1);
	assert_int_equal(c.eos_id, -1);
	assert_int_equal(cfg_parse("{" CFG_BASE ",\"rope_scaling\":null}", &c, &err), 0);
	assert_int_equal(c.rope_scaling, RT_ROPE_SCALING_NONE);

	cfg_bad("{" CFG_BASE ",\"model_type\":\"qwen2\"}", SW_EINVAL, "duplicate key \"model_type\"");
	/* the multimodal Gemma 3 wrapper: only its text model (gemma3_text) loads */
	cfg_bad("{\"model_type\":\"gemma3\",\"hidden_size\":64}", SW_ENOTSUP,
		"config.json:1:15: $.model_type: expected \"llama\" (without biases), \"qwen2\", \"qwen3\" or "
		"\"gemma3_text\", found \"gemma3\"");
	cfg_bad("{\"hidden_size\":64}", SW_EINVAL, "$: missing required field \"model_type\"");
	cfg_bad("{" CFG_BASE ",\"architectures\":[\"MistralForCausalLM\"]}", SW_ENOTSUP,
		"$.architectures: expected [\"LlamaForCausalLM\"], found \"MistralForCausalLM\"");
	cfg_bad("{" CFG_BASE ",\"attention_bias\":true}", SW_ENOTSUP, "$.attention_bias: expected false");
	cfg_bad("{" CFG_BASE ",\"hidden_act\":\"gelu\"}", SW_ENOTSUP, "$.hidden_act: expected \"silu\", found \"gelu\"");
	cfg_bad("{" CFG_BASE ",\"num_key_value_heads\":3}", SW_EINVAL,
		"$.num_key_value_heads: expected a divisor of num_attention_heads (4), found 3");
	cfg_bad("{" CFG_BASE ",\"num_key_value_heads\":8}", SW_EINVAL,
		"$.num_key_value_heads: expected an integer in [1, 4], found 8");
	cfg_bad("{" CFG_BASE ",\"head_dim\":7}", SW_EINVAL, "head_dim 7 must be even");
	cfg_bad("{\"model_type\":\"llama\",\"hidden_size\":66,\"intermediate_size\":96,"
		"\"num_attention_heads\":4,\"num_hidden_layers\":2,\"vocab_size\":100}", SW_EINVAL,
		"$.hidden_size (66) is not a multiple of num_attention_heads (4)");
	cfg_bad("{" CFG_BASE ",\"hidden_size\":0}", SW_EINVAL, "duplicate key");
	cfg_bad("{\"model_type\":\"llama\",\"hidden_size\":\"64\"}", SW_EINVAL,
		"$.hidden_size: expected an integer in [1, 1048576], found string \"64\"");
	cfg_bad("{" CFG_BASE ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}", SW_ENOTSUP,
		"$.rope_scaling: rope scaling \"yarn\" is not supported");
	cfg_bad("{" CFG_BASE ",\"rope_scaling\":{\"factor\":4}}", SW_EINVAL,
		"$.rope_scaling: missing required field \"rope_type\"");
	cfg_bad("{" CFG_BASE ",\"rope_scaling\":{\"type\":\"linear\",\"rope_type\":\"llama3\"}}", SW_EINVAL,
		"disagree");
	cfg_bad("{" CFG_BASE ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"low_freq_factor\":4,"
		"\"high_freq_factor\":1,\"original_max_position_embeddings\":8192}}", SW_EINVAL,
		"expected high_freq_factor > low_freq_factor");
	cfg_bad("{" CFG_BASE ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8}}", SW_EINVAL,
		"$.rope_scaling: missing required field \"low_freq_factor\"");
	cfg_bad("{" CFG_BASE ",\"eos_token_id\":[2,\"x\"]}", SW_EINVAL,
		"$.eos_token_id[1]: expected an integer in [0, 99], found string \"x\"");
	cfg_bad("{" CFG_BASE ",\"bos_token_id\":100}", SW_EINVAL, "$.bos_token_id: expected an integer in [0, 99], found 100");
	cfg_bad("{" CFG_BASE ",\"rms_norm_eps\":-1}", SW_EINVAL, "$.rms_norm_eps: expected a number in [0, 1], found -1");
	cfg_bad("{" CFG_BASE ",\"tie_word_embeddings\":1}", SW_EINVAL, "$.tie_word_embeddings: expected true or false, found 1");
	cfg_bad("{" CFG_BASE, SW_EINVAL, "config.json:1:");
}

/* ---- a tiny synthetic HF checkpoint ---- */

enum { T_DIM = 8, T_HEADS = 2, T_KV = 1, T_HD = 4, T_FFN = 12, T_LAYERS = 2, T_VOCAB = 10 };

struct tiny {
	float embd[T_VOCAB * T_DIM], lm[T_VOCAB * T_DIM], norm[T_DIM];
	uint16_t embd_bf16[T_VOCAB * T_DIM];
	struct {
		float an[T_DIM], fn[T_DIM];
		uint16_t q16[T_HEADS * T_HD * T_DIM]; /* q as F16, the rest F32 */
		float k[T_KV * T_HD * T_DIM], v[T_KV * T_HD * T_DIM], o[T_DIM * T_HEADS * T_HD];
		float g[T_FFN * T_DIM], u[T_FFN * T_DIM], d[T_DIM * T_FFN];
	} l[T_LAYERS];
	char names[T_LAYERS][9][64];
};

/* Small integers are exact in f16, bf16 and f32, so values identify origins. */
static void tiny_fill(struct tiny *m)
{
	for (int i = 0; i < T_VOCAB * T_DIM; i++) {
		m->embd[i] = (float)(i % 200) - 100.0f;
		uint32_t bits;
		memcpy(&bits, &m->embd[i], sizeof(bits));
		m->embd_bf16[i] = (uint16_t)(bits >> 16); /* exact: small ints */
		m->lm[i] = (float)i * 0.5f;
	}
	for (int i = 0; i < T_DIM; i++)
		m->norm[i] = 1.0f + (float)i;
	for (int l = 0; l < T_LAYERS; l++) {
		for (int i = 0; i < T_DIM; i++) {
			m->l[l].an[i] = (float)(100 * l + i);
			m->l[l].fn[i] = (float)(100 * l - i);
		}
		for (int i = 0; i < T_HEADS * T_HD * T_DIM; i++) {
			float f = (float)(1000 * l + i);
			uint32_t b;
			memcpy(&b, &f, sizeof(b));
			/* f32 -> f16 for integers < 2048: exact by construction */
			int e = (int)((b >> 23) & 0xff) - 127, mant = (int)(b & 0x7fffff);
			m->l[l].q16[i] = f == 0.0f ? 0 : (uint16_t)(((e + 15) << 10) | (mant >> 13));
		}
		for (int i = 0; i < T_KV * T_HD * T_DIM; i++) {
			m->l[l].k[i] = (float)(2000 * l + i);
			m->l[l].v[i] = (float)(-i);
		}
		for (int i = 0; i < T_DIM * T_HEADS * T_HD; i++)
			m->l[l].o[i] = (float)i / 4.0f;
		for (int i = 0; i < T_FFN * T_DIM; i++) {
			m->l[l].g[i] = (float)i;
			m->l[l].u[i] = (float)-i;
			m->l[l].d[i] = (float)(i + l);
		}
	}
}

/* Writes the tiny model into dir; `skip` omits a tensor, `bad_shape` gives
 * model.norm.weight a wrong shape, `lm_head` adds an untied head. */
static void tiny_write(const char *dir, struct tiny *m, const char *skip, bool bad_shape,
		       bool lm_head, bool bias)
{
	struct wt t[64];
	size_t n = 0;
	char path[512];
	static const float zero[T_DIM];

	t[n++] = (struct wt){ "model.embed_tokens.weight", "BF16", 2, { T_VOCAB, T_DIM }, m->embd_bf16, sizeof(m->embd_bf16) };
	for (int l = 0; l < T_LAYERS; l++) {
		static const char *const sfx[9] = {
			"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
			"self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
			"mlp.down_proj",
		};
		for (int k = 0; k < 9; k++)
			snprintf(m->names[l][k], sizeof(m->names[l][k]), "model.layers.%d.%s.weight", l, sfx[k]);
		t[n++] = (struct wt){ m->names[l][0], "F32", 1, { T_DIM }, m->l[l].an, sizeof(m->l[l].an) };
		t[n++] = (struct wt){ m->names[l][1], "F16", 2, { T_HEADS * T_HD, T_DIM }, m->l[l].q16, sizeof(m->l[l].q16) };
		t[n++] = (struct wt){ m->names[l][2], "F32", 2, { T_KV * T_HD, T_DIM }, m->l[l].k, sizeof(m->l[l].k) };
		t[n++] = (struct wt){ m->names[l][3], "F32", 2, { T_KV * T_HD, T_DIM }, m->l[l].v, sizeof(m->l[l].v) };
		t[n++] = (struct wt){ m->names[l][4], "F32", 2, { T_DIM, T_HEADS * T_HD }, m->l[l].o, sizeof(m->l[l].o) };
		t[n++] = (struct wt){ m->names[l][5], "F32", 1, { T_DIM }, m->l[l].fn, sizeof(m->l[l].fn) };
		t[n++] = (struct wt){ m->names[l][6], "F32", 2, { T_FFN, T_DIM }, m->l[l].g, sizeof(m->l[l].g) };
		t[n++] = (struct wt){ m->names[l][7], "F32", 2, { T_FFN, T_DIM }, m->l[l].u, sizeof(m->l[l].u) };
		t[n++] = (struct wt){ m->names[l][8], "F32", 2, { T_DIM, T_FFN }, m->l[l].d, sizeof(m->l[l].d) };
	}
	if (bad_shape)
		t[n++] = (struct wt){ "model.norm.weight", "F32", 2, { 2, T_DIM / 2 }, m->norm, sizeof(m->norm) };
	else
		t[n++] = (struct wt){ "model.norm.weight", "F32", 1, { T_DIM }, m->norm, sizeof(m->norm) };
	if (lm_head)
		t[n++] = (struct wt){ "lm_head.weight", "F32", 2, { T_VOCAB, T_DIM }, m->lm, sizeof(m->lm) };
	if (bias)
		t[n++] = (struct wt){ "model.layers.0.self_attn.q_proj.bias", "F32", 1, { T_DIM }, zero, sizeof(zero) };
	for (size_t i = 0; i < n; i++) {
		if (skip && !strcmp(t[i].name, skip)) {
			memmove(&t[i], &t[i + 1], (n - i - 1) * sizeof(t[0]));
			n--;
			break;
		}
	}

	size_t len;
	uint8_t *buf = st_build(t, n, &len);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	write_file(path, buf, len);
	free(buf);
	snprintf(path, sizeof(path), "%s/config.json", dir);
	write_text(path, "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\",\n"
			 " \"hidden_size\": 8, \"intermediate_size\": 12, \"num_attention_heads\": 2,\n"
			 " \"num_key_value_heads\": 1, \"num_hidden_layers\": 2, \"vocab_size\": 10,\n"
			 " \"rms_norm_eps\": 1e-05, \"bos_token_id\": 1, \"eos_token_id\": 2}\n");
}

static void test_hf_load_tiny(void **state)
{
	struct tiny *m = calloc(1, sizeof(*m));
	char *dir = make_tmpdir();
	rt_config c;
	rt_weights w;
	sw_err err = { 0 };

	tiny_fill(m);
	tiny_write(dir, m, NULL, false, true, false);
	assert_int_equal(rt_llama_load_hf(dir, &c, &w, &err), 0);
	assert_int_equal(c.n_layers, T_LAYERS);
	assert_int_equal(c.head_dim, T_HD);
	assert_false(c.tied_embd);
	assert_ptr_not_equal(w.lm_head, w.tok_embd);
	assert_memory_equal(w.tok_embd, m->embd, sizeof(m->embd));
	assert_memory_equal(w.lm_head, m->lm, sizeof(m->lm));
	assert_memory_equal(w.out_norm, m->norm, sizeof(m->norm));
	for (int l = 0; l < T_LAYERS; l++) {
		const rt_layer_weights *L = &w.layers[l];
		/* head_dim 4: HF rows (x0 x1 | y0 y1) become GGUF (x0 y0 x1 y1), i.e.
		 * per head the source row order is 0, 2, 1, 3 (written out by hand,
		 * not derived from the loader's formula). */
		static const int src[T_HD] = { 0, 2, 1, 3 };
		for (int h = 0; h < T_HEADS; h++)
			for (int r = 0; r < T_HD; r++)
				for (int i = 0; i < T_DIM; i++)
					assert_true(L->wq[(h * T_HD + r) * T_DIM + i] ==
						    (float)(1000 * l + (h * T_HD + src[r]) * T_DIM + i));
		for (int r = 0; r < T_KV * T_HD; r++)
			for (int i = 0; i < T_DIM; i++)
				assert_true(L->wk[r * T_DIM + i] == m->l[l].k[(src[r % T_HD] + r / T_HD * T_HD) * T_DIM + i]);
		assert_memory_equal(L->wv, m->l[l].v, sizeof(m->l[l].v));
		assert_memory_equal(L->wo, m->l[l].o, sizeof(m->l[l].o));
		assert_memory_equal(L->attn_norm, m->l[l].an, sizeof(m->l[l].an));
		assert_memory_equal(L->ffn_norm, m->l[l].fn, sizeof(m->l[l].fn));
		assert_memory_equal(L->w_gate, m->l[l].g, sizeof(m->l[l].g));
		assert_memory_equal(L->w_up, m->l[l].u, sizeof(m->l[l].u));
		assert_memory_equal(L->w_down, m->l[l].d, sizeof(m->l[l].d));
		assert_int_equal((uintptr_t)L->wq % 64, 0);
	}
	rt_weights_free(&w);

	/* lm_head absent -> tied */
	tiny_write(dir, m, "lm_head.weight", false, false, false);
	assert_int_equal(rt_llama_load_hf(dir, &c, &w, &err), 0);
	assert_true(c.tied_embd);
	assert_ptr_equal(w.lm_head, w.tok_embd);
	rt_weights_free(&w);

	/* missing tensor, wrong shape, bias */
	tiny_write(dir, m, "model.layers.1.mlp.up_proj.weight", false, true, false);
	assert_int_equal(rt_llama_load_hf(dir, &c, &w, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "tensor \"model.layers.1.mlp.up_proj.weight\" not found (expected shape [12, 8])"));
	assert_null(w.arena);
	tiny_write(dir, m, NULL, true, true, false);
	assert_int_equal(rt_llama_load_hf(dir, &c, &w, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "tensor \"model.norm.weight\": expected shape [8], found [2, 4]"));
	tiny_write(dir, m, NULL, false, true, true);
	assert_int_equal(rt_llama_load_hf(dir, &c, &w, &err), SW_ENOTSUP);
	assert_non_null(strstr(err.msg, "model.layers.0.self_attn.q_proj.bias\": expected no bias at all (model_type \"llama\"), found one"));

	/* no checkpoint at all */
	char path[512];
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	unlink(path);
	assert_int_equal(rt_llama_load_hf(dir, &c, &w, &err), SW_EIO);
	assert_non_null(strstr(err.msg, "neither model.safetensors nor model.safetensors.index.json found"));
	rm_rf(dir);
	free(m);
}

/* A Hugging Face directory is scanned at load (issue 40): an inf in a BF16
 * tensor, a NaN in an F16 one and in an F32 one are refused naming the
 * file, the tensor and the element; the same directory with finite values
 * loads. */
static void test_hf_nonfinite(void **state)
{
	struct tiny *m = calloc(1, sizeof(*m));
	char *dir = make_tmpdir();
	rt_config c;
	rt_weights w;
	sw_err err = { 0 };
	static const struct {
		const char *tensor, *what;
	} cases[] = {
		{ "model.embed_tokens.weight", "(BF16, 80 elements): expected finite values, found a "
		                               "non-finite one: element 2 is inf" },
		{ "model.layers.0.self_attn.q_proj.weight", "(F16, 64 elements): expected finite values, "
		                                            "found a non-finite one: element 6 is nan" },
		{ "model.layers.1.mlp.down_proj.weight", "(F32, 96 elements): expected finite values, "
		                                         "found a non-finite one: element 4 is nan" },
	};
	for (int k = 0; k < 3; k++) {
		tiny_fill(m);
		tiny_write(dir, m, NULL, false, true, false);
		assert_int_equal(rt_llama_load_hf(dir, &c, &w, &err), 0);
		rt_weights_free(&w);
		if (k == 0)
			m->embd_bf16[2] = 0x7f80;
		else if (k == 1)
			m->l[0].q16[6] = 0x7e00;
		else
			m->l[1].d[4] = NAN;
		tiny_write(dir, m, NULL, false, true, false);
		assert_int_equal(rt_llama_load_hf(dir, &c, &w, &err), SW_EINVAL);
		assert_null(w.arena);
		print_message("  %s\n", err.msg);
		char path[512];
		snprintf(path, sizeof(path), "%s/model.safetensors: tensor %s %s", dir, cases[k].tensor,
		         cases[k].what);
		if (!strstr(err.msg, path))
			fail_msg("expected '%s' in: %s", path, err.msg);
	}
	rm_rf(dir);
	free(m);
}

/* A loader that does not read a quantized form refuses its int8 codes
 * naming file and tensor (an I8 tensor once converted to NaN there, when
 * the EAGLE-3 head's packed form made I8 a dtype the reader opens). */
static void test_hf_int8_refused(void **state)
{
	struct tiny *m = calloc(1, sizeof(*m));
	char *dir = make_tmpdir();
	rt_config c;
	rt_weights w;
	sw_err err = { 0 };
	char cmd[1200];
	tiny_fill(m);
	tiny_write(dir, m, NULL, false, true, false);
	/* the header rewritten in place: down_proj's F32 bytes as I8 codes,
	 * padded with spaces to its old length (the data does not move) */
	snprintf(cmd, sizeof(cmd), "python3 -c 'import json,struct,sys; p=sys.argv[1]; b=open(p,\"rb\").read(); "
	         "n=struct.unpack(\"<Q\",b[:8])[0]; h=json.loads(b[8:8+n]); t=h[\"model.layers.1.mlp.down_proj.weight\"]; "
	         "o=t[\"data_offsets\"]; t[\"dtype\"]=\"I8\"; t[\"shape\"]=[o[1]-o[0]]; s=json.dumps(h,separators=(\",\",\":\")).encode(); "
	         "assert len(s)<=n; open(p,\"wb\").write(b[:8]+s+b\" \"*(n-len(s))+b[8+n:])' %s/model.safetensors", dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(rt_llama_load_hf(dir, &c, &w, &err), SW_ENOTSUP);
	assert_null(w.arena);
	if (!strstr(err.msg, "model.layers.1.mlp.down_proj.weight\": dtype I8") || !strstr(err.msg, "model.safetensors"))
		fail_msg("%s", err.msg);
	print_message("  %s\n", err.msg);
	rm_rf(dir);
	free(m);
}

/* The tokenizer of a Hugging Face directory is a GGUF given with
 * --tokenizer: one with fewer tokens than the model's vocabulary is refused
 * at load, naming it, the field, expected and found (issue 40). */
static void test_hf_tokenizer_short(void **state)
{
	struct tiny *m = calloc(1, sizeof(*m));
	char *dir = make_tmpdir();
	sw_err err = { 0 };
	tiny_fill(m);
	tiny_write(dir, m, NULL, false, true, false);
	const char *toks[T_VOCAB] = { "a", "b", "c", "d", "e", "f", "g", "h", "i", "j" };
	char tok[2][512], cmd[2048], out[8192];
	for (int k = 0; k < 2; k++) {
		snprintf(tok[k], sizeof(tok[k]), "%s/tok%d.gguf", dir, k ? T_VOCAB - 3 : T_VOCAB);
		gguf_writer *w = gguf_writer_new(3, 32);
		gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
		gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, k ? T_VOCAB - 3 : T_VOCAB);
		gguf_w_arr_str(w, "tokenizer.ggml.merges", NULL, NULL, 0);
		assert_int_equal(gguf_writer_save(w, tok[k], &err), 0);
		gguf_writer_free(w);
	}
	const char *b = getenv("BUILD");
	for (int k = 0; k < 2; k++) {
		snprintf(cmd, sizeof(cmd), "%s/specwright generate %s --tokenizer %s --ids '1 2' -n 1 2>&1",
		         b && b[0] ? b : "build", dir, tok[k]);
		FILE *p = popen(cmd, "r");
		assert_non_null(p);
		size_t n = fread(out, 1, sizeof(out) - 1, p);
		out[n] = 0;
		const int st = pclose(p);
		print_message("  %s", out);
		char want[1024];
		snprintf(want, sizeof(want), "%s: tokenizer.ggml.tokens: expected %d tokens (the vocabulary of "
		         "%s), found %d", tok[1], T_VOCAB, dir, T_VOCAB - 3);
		if (k == 0 && strstr(out, "tokenizer.ggml.tokens"))
			fail_msg("the whole table refused: %s", out);
		if (k == 1 && (!WIFEXITED(st) || WEXITSTATUS(st) != 1 || !strstr(out, want)))
			fail_msg("expected exit 1 and '%s', found: %s", want, out);
	}
	rm_rf(dir);
	free(m);
}

static void test_sharded(void **state)
{
	const float a[2] = { 1, 2 }, b[3] = { 3, 4, 5 };
	const struct wt ta = { "a", "F32", 1, { 2 }, a, sizeof(a) };
	const struct wt tb = { "b", "F32", 1, { 3 }, b, sizeof(b) };
	char *dir = make_tmpdir();
	char path[512];
	safetensors_ckpt *c;
	const safetensors_tensor *t;
	const safetensors_file *f;
	sw_err err = { 0 };
	size_t len;
	uint8_t *buf;
	float out[3];

	buf = st_build(&ta, 1, &len);
	snprintf(path, sizeof(path), "%s/model-00001-of-00002.safetensors", dir);
	write_file(path, buf, len);
	free(buf);
	buf = st_build(&tb, 1, &len);
	snprintf(path, sizeof(path), "%s/model-00002-of-00002.safetensors", dir);
	write_file(path, buf, len);
	free(buf);
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	write_text(path, "{\"metadata\": {\"total_size\": 20}, \"weight_map\": {\n"
			 "  \"a\": \"model-00001-of-00002.safetensors\",\n"
			 "  \"b\": \"model-00002-of-00002.safetensors\"}}");
	assert_int_equal(safetensors_ckpt_open(dir, &c, &err), 0);
	assert_int_equal(c->n_files, 2);
	assert_int_equal(safetensors_ckpt_find(c, "b", &t, &f, &err), 0);
	assert_non_null(t);
	assert_non_null(strstr(f->name, "model-00002-of-00002.safetensors"));
	safetensors_to_f32(t, out);
	assert_memory_equal(out, b, sizeof(b));
	assert_int_equal(safetensors_ckpt_find(c, "a", &t, NULL, &err), 0);
	safetensors_to_f32(t, out);
	assert_memory_equal(out, a, sizeof(a));
	assert_int_equal(safetensors_ckpt_find(c, "zz", &t, NULL, &err), 0);
	assert_null(t);
	safetensors_ckpt_free(c);

	/* the index lies about a tensor's shard */
	write_text(path, "{\"weight_map\": {\"a\": \"model-00002-of-00002.safetensors\"}}");
	assert_int_equal(safetensors_ckpt_open(dir, &c, &err), 0);
	assert_int_equal(safetensors_ckpt_find(c, "a", &t, NULL, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "weight_map puts \"a\" in"));
	safetensors_ckpt_free(c);
	/* a shard outside the directory */
	write_text(path, "{\"weight_map\": {\"a\": \"../etc/passwd\"}}");
	assert_int_equal(safetensors_ckpt_open(dir, &c, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "$.weight_map.a: expected a file name in the checkpoint directory, found \"../etc/passwd\""));
	/* a shard that does not exist */
	write_text(path, "{\"weight_map\": {\"a\": \"gone.safetensors\"}}");
	assert_int_equal(safetensors_ckpt_open(dir, &c, &err), SW_EIO);
	assert_non_null(strstr(err.msg, "gone.safetensors: cannot open"));
	write_text(path, "{\"weight_map\": [1]}");
	assert_int_equal(safetensors_ckpt_open(dir, &c, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "$.weight_map: expected an object, found array"));
	rm_rf(dir);
}

/* ---- independent check of the q/k permutation on real weights ----
 * python (gguf package) dequantizes layer 0 of the real GGUF, undoes
 * llama.cpp's permutation to get HF layout, writes a 1-layer HF checkpoint,
 * and writes the GGUF-order arrays alongside. The C loader must reproduce
 * them bit for bit: the permutation is lossless and conversion is F32. */
static const char *const py_script =
	"import json, sys, numpy as np, gguf\n"
	"from gguf.quants import dequantize\n"
	"src, out = sys.argv[1], sys.argv[2]\n"
	"r = gguf.GGUFReader(src)\n"
	"def fld(k):\n"
	"    f = r.fields[k]\n"
	"    return f.parts[f.data[0]][0]\n"
	"n_head = int(fld('llama.attention.head_count'))\n"
	"n_kv = int(fld('llama.attention.head_count_kv'))\n"
	"dim = int(fld('llama.embedding_length'))\n"
	"ffn = int(fld('llama.feed_forward_length'))\n"
	"hd = dim // n_head\n"
	"T = {t.name: t for t in r.tensors}\n"
	"def deq(name, rows=None):\n"
	"    t = T[name]\n"
	"    d = t.data if rows is None else t.data[rows[0]:rows[1]]\n"
	"    a = np.asarray(dequantize(d, t.tensor_type), dtype=np.float32)\n"
	"    return np.ascontiguousarray(a.reshape(d.shape[0], -1) if a.ndim > 1 or len(t.shape) > 1 else a)\n"
	"def unpermute(w, n):\n"
	"    return np.ascontiguousarray(w.reshape(n, hd // 2, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape))\n"
	"V = 64\n"
	"g = {\n"
	"  'q': deq('blk.0.attn_q.weight'), 'k': deq('blk.0.attn_k.weight'),\n"
	"  'v': deq('blk.0.attn_v.weight'), 'o': deq('blk.0.attn_output.weight'),\n"
	"  'an': deq('blk.0.attn_norm.weight'), 'fn': deq('blk.0.ffn_norm.weight'),\n"
	"  'gate': deq('blk.0.ffn_gate.weight'), 'up': deq('blk.0.ffn_up.weight'),\n"
	"  'down': deq('blk.0.ffn_down.weight'), 'norm': deq('output_norm.weight'),\n"
	"  'embd': deq('token_embd.weight', (0, V)), 'lm': deq('token_embd.weight', (V, 2 * V)),\n"
	"}\n"
	"assert g['q'].shape == (n_head * hd, dim) and g['k'].shape == (n_kv * hd, dim), (g['q'].shape, g['k'].shape)\n"
	"assert g['embd'].shape == (V, dim) and g['down'].shape == (dim, ffn)\n"
	"hf = [('model.embed_tokens.weight', g['embd']),\n"
	"      ('model.layers.0.input_layernorm.weight', g['an']),\n"
	"      ('model.layers.0.self_attn.q_proj.weight', unpermute(g['q'], n_head)),\n"
	"      ('model.layers.0.self_attn.k_proj.weight', unpermute(g['k'], n_kv)),\n"
	"      ('model.layers.0.self_attn.v_proj.weight', g['v']),\n"
	"      ('model.layers.0.self_attn.o_proj.weight', g['o']),\n"
	"      ('model.layers.0.post_attention_layernorm.weight', g['fn']),\n"
	"      ('model.layers.0.mlp.gate_proj.weight', g['gate']),\n"
	"      ('model.layers.0.mlp.up_proj.weight', g['up']),\n"
	"      ('model.layers.0.mlp.down_proj.weight', g['down']),\n"
	"      ('model.norm.weight', g['norm']), ('lm_head.weight', g['lm'])]\n"
	"hdr, off = {'__metadata__': {'format': 'pt'}}, 0\n"
	"for n, a in hf:\n"
	"    hdr[n] = {'dtype': 'F32', 'shape': list(a.shape), 'data_offsets': [off, off + a.nbytes]}\n"
	"    off += a.nbytes\n"
	"h = json.dumps(hdr).encode()\n"
	"h += b' ' * (-len(h) % 8)\n"
	"with open(out + '/model.safetensors', 'wb') as f:\n"
	"    f.write(len(h).to_bytes(8, 'little')); f.write(h)\n"
	"    for n, a in hf: f.write(a.astype('<f4').tobytes())\n"
	"cfg = {'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_size': dim,\n"
	"       'intermediate_size': ffn, 'num_attention_heads': n_head, 'num_key_value_heads': n_kv,\n"
	"       'num_hidden_layers': 1, 'vocab_size': V, 'rms_norm_eps': 1e-5, 'rope_theta': 100000.0,\n"
	"       'max_position_embeddings': 8192, 'tie_word_embeddings': False}\n"
	"json.dump(cfg, open(out + '/config.json', 'w'), indent=2)\n"
	"for k in ['q', 'k', 'v', 'o', 'an', 'fn', 'gate', 'up', 'down', 'norm', 'embd', 'lm']:\n"
	"    g[k].astype('<f4').tofile(out + '/expect_' + k + '.f32')\n";

static float *read_f32(const char *dir, const char *key, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/expect_%s.f32", dir, key);
	FILE *f = fopen(path, "rb");
	if (!f)
		fail_msg("python did not write %s", path);
	float *p = malloc(n * sizeof(*p) + 1);
	assert_non_null(p);
	size_t got = fread(p, sizeof(*p), n + 1, f);
	fclose(f);
	if (got != n)
		fail_msg("%s: %zu floats, expected %zu", path, got, n);
	return p;
}

static void expect_bitwise(const char *dir, const char *key, const float *have, size_t n)
{
	float *want = read_f32(dir, key, n);
	for (size_t i = 0; i < n; i++)
		if (memcmp(&want[i], &have[i], sizeof(float)))
			fail_msg("%s[%zu]: loader %.9g, gguf %.9g", key, i, have[i], want[i]);
	free(want);
}

static void test_qk_permutation_vs_gguf(void **state)
{
	const char *model = getenv("SW_MODEL");
	const char *py = "build/venv/bin/python";
	char cmd[2048], script[512];
	rt_config c;
	rt_weights w;
	sw_err err = { 0 };

	if (!model || !*model)
		model = "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
	if (access(model, R_OK))
		fail_msg("model %s not found: run `make model` (or set SW_MODEL)", model);
	if (access(py, X_OK))
		fail_msg("%s not found: run tests/deps.sh (numpy + gguf)", py);

	char *dir = make_tmpdir();
	snprintf(script, sizeof(script), "%s/hf_from_gguf.py", dir);
	write_text(script, py_script);
	snprintf(cmd, sizeof(cmd), "%s %s '%s' '%s'", py, script, model, dir);
	if (system(cmd))
		fail_msg("python conversion failed: %s", cmd);

	assert_int_equal(rt_llama_load_hf(dir, &c, &w, &err), 0);
	const size_t dim = (size_t)c.dim, hd = (size_t)c.head_dim, ffn = (size_t)c.ffn_dim;
	const size_t q = (size_t)c.n_heads * hd, kv = (size_t)c.n_kv_heads * hd;
	const rt_layer_weights *L = &w.layers[0];
	assert_int_equal(c.n_layers, 1);
	assert_int_equal(c.vocab, 64);
	assert_true(c.n_kv_heads < c.n_heads); /* GQA: k uses the kv head count */
	expect_bitwise(dir, "q", L->wq, q * dim);
	expect_bitwise(dir, "k", L->wk, kv * dim);
	expect_bitwise(dir, "v", L->wv, kv * dim);
	expect_bitwise(dir, "o", L->wo, dim * q);
	expect_bitwise(dir, "an", L->attn_norm, dim);
	expect_bitwise(dir, "fn", L->ffn_norm, dim);
	expect_bitwise(dir, "gate", L->w_gate, ffn * dim);
	expect_bitwise(dir, "up", L->w_up, ffn * dim);
	expect_bitwise(dir, "down", L->w_down, dim * ffn);
	expect_bitwise(dir, "norm", w.out_norm, dim);
	expect_bitwise(dir, "embd", w.tok_embd, 64 * dim);
	expect_bitwise(dir, "lm", w.lm_head, 64 * dim);

	/* Not vacuous: the HF file's q rows really are in another order. */
	safetensors_file *f;
	char path[512];
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	assert_int_equal(safetensors_open(path, &f, &err), 0);
	const safetensors_tensor *t = safetensors_find(f, "model.layers.0.self_attn.q_proj.weight");
	float *raw = malloc(t->numel * sizeof(*raw));
	assert_non_null(raw);
	safetensors_to_f32(t, raw);
	assert_memory_not_equal(raw + dim, L->wq + dim, dim * sizeof(float));
	/* GGUF row 1 (pair partner of row 0) is HF row hd/2 */
	assert_memory_equal(raw + (hd / 2) * dim, L->wq + dim, dim * sizeof(float));
	free(raw);
	safetensors_free(f);
	rt_weights_free(&w);
	rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f16_bf16_closed_form),
		cmocka_unit_test(test_roundtrip_mem),
		cmocka_unit_test(test_int_dtypes),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_hf_config),
		cmocka_unit_test(test_hf_load_tiny),
		cmocka_unit_test(test_hf_nonfinite),
		cmocka_unit_test(test_hf_int8_refused),
		cmocka_unit_test(test_hf_tokenizer_short),
		cmocka_unit_test(test_sharded),
		cmocka_unit_test(test_qk_permutation_vs_gguf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
