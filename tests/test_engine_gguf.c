/* The gguf_a8 engine on a file whose GEMM weights mix GGUF types within a
 * field, as a Q4_K_M file does (Q6_K attn_v and ffn_down in some layers,
 * Q4_K in the rest), with Q8_0, Q4_0 and Q4_1 layers mixed in and a Q6_K
 * LM head and embedding. The model is a tiny Llama
 * whose rows are whole 256-element blocks (dim 256, ffn 512, 4 layers),
 * encoded by tests/util/kquant.c. Checked against independent references:
 *  - the test encoders against the format's decoder (formats/gguf.c) within
 *    their rounding bound;
 *  - the engine's plan keeps each layer's own type (engine.json
 *    "layer_dtypes"), and a manifest whose layer type is not one the GEMM
 *    takes, or does not fit the layer stride, is refused naming the field;
 *  - greedy tokens equal the fp32 host reference on the same file's
 *    weights (dequantized: the engine's blocks are those weights exactly),
 *    or diverge only at a near-tie within the int8-input + fp16 bound
 *    (test_engine.c's rule); graph replay equals eager execution, and
 *    target-only decoding (one row a token) the speculative tokens (up to 7
 *    rows a verify): the GEMMs' rows do not depend on the row count.
 * Where the GEMM's automatic path is AVX-512, the host backend repacks
 * the Q4_0, Q4_1 and Q8_0 layers at bind (runtime/device/host_repack.c;
 * Q8_0 on AVX2 too): the tokens above are then the repacked GEMM's
 * (checked by mutation: the repacked bytes read as the file's layout give
 * other tokens, for the Q8_0 layer as for the Q4 ones). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/fileio.h"
#include "engine_util.h"
#include "formats/gguf.h"
#include "kquant.h"
#include "testutil.h"

static char g_dir[256];

static const char *cache_dir(void)
{
	static char c[300];
	snprintf(c, sizeof(c), "%s/cache", g_dir);
	return c;
}

/* Each encoder's error is at most half its step, d sc (Q6_K) or d sc
 * (Q4_K, after the min's own rounding of at most dmin / 2), where the 6-bit
 * scale codes round to within half a code: the step is below max|x| / 15
 * (Q4_K: range / 15, range <= 2 max|x|, codes up to 63 + 1/2) or max|x| / 31
 * (Q6_K), so every value is within max|block| / 8 of its input, and a wrong
 * layout (a nibble or scale misplaced) lands far outside that. */
static void test_encoders(void **state)
{
	(void)state;
	const int64_t n = 4 * 256;
	float *x = malloc(sizeof(*x) * n), *y = malloc(sizeof(*y) * n);
	uint8_t *b = malloc(n);
	assert_non_null(x);
	assert_non_null(y);
	assert_non_null(b);
	uint64_t s = 12345;
	for (int64_t i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		/* blocks of different scales, some all-positive, some with a zero group */
		const double u = (double)(s >> 11) / 9007199254740992.0;
		x[i] = (float)((u - (i / 256 == 2 ? 0.0 : 0.5)) * (1 << (i / 256)));
		if (i / 256 == 3 && (i % 256) < 32)
			x[i] = 0;
	}
	for (int t = 0; t < 2; t++) {
		const uint32_t type = t ? GGML_T_Q6_K : GGML_T_Q4_K;
		(t ? kq_quantize_q6_k : kq_quantize_q4_k)(x, n, b);
		assert_int_equal(gguf_dequantize(type, b, (uint64_t)n, y), 0);
		double worst = 0;
		for (int64_t k = 0; k < n / 256; k++) {
			double mx = 0, e = 0;
			for (int i = 0; i < 256; i++) {
				mx = fmax(mx, fabs(x[256 * k + i]));
				e = fmax(e, fabs((double)y[256 * k + i] - x[256 * k + i]));
			}
			worst = fmax(worst, e / mx);
			if (e > mx / 8)
				fail_msg("%s block %lld: error %g > max|x| / 8 = %g", t ? "Q6_K" : "Q4_K",
				         (long long)k, e, mx / 8);
		}
		print_message("  %s encoder: worst error %.4f of max|block|\n", t ? "Q6_K" : "Q4_K", worst);
	}
	free(x);
	free(y);
	free(b);
}

#define NL 4

/* Q4_K_M's rule for attn_v and ffn_down, Q6_K for the LM head, and
 * other types mixed into attn_q and attn_output. */
static uint32_t pick(const char *name, int l)
{
	if (strstr(name, "norm"))
		return GGML_T_F32;
	if (!strcmp(name, "token_embd.weight") || !strcmp(name, "output.weight"))
		return GGML_T_Q6_K; /* Q4_K_M's output; tied or not, the LM head is Q6_K */
	if (strstr(name, "attn_v") || strstr(name, "ffn_down"))
		return kq_more_bits(l, NL) ? GGML_T_Q6_K : GGML_T_Q4_K;
	if (strstr(name, "attn_q"))
		return l == 1 ? GGML_T_Q8_0 : l == 2 ? GGML_T_Q4_0 : GGML_T_Q4_K;
	if (strstr(name, "attn_output"))
		return l == 0 ? GGML_T_Q4_1 : GGML_T_Q4_K;
	return GGML_T_Q4_K;
}

static char *read_text(const char *path)
{
	size_t len;
	char *t = sw_read_file(path, 1 << 24, &len);
	if (!t)
		fail_msg("cannot read %s", path);
	return t;
}

static void write_text(const char *path, const char *t)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(t, f);
	fclose(f);
}

/* buffer `buf`'s line of engine.json, copied into out */
static void buf_line(const char *json, const char *buf, char *out, size_t n)
{
	char key[64];
	snprintf(key, sizeof(key), "{\"name\": \"%s\"", buf);
	const char *p = strstr(json, key);
	if (!p)
		fail_msg("engine.json has no buffer %s", buf);
	snprintf(out, n, "%.*s", (int)strcspn(p, "\n"), p);
}

static void test_mixed_engine(void **state)
{
	(void)state;
	sw_err err = {0};
	char f32[300], mixed[300], spec[2048], dir[300], path[400], line[1024];
	rt_model *t = tu_tiny_llama(EU_TINY_VOCAB, 256, NL, 4, 2, 512, 11);
	assert_non_null(t);
	snprintf(f32, sizeof(f32), "%s/k_f32.gguf", g_dir);
	snprintf(mixed, sizeof(mixed), "%s/k_mixed.gguf", g_dir);
	if (rt_llama_save_gguf(t, f32, GGML_T_F32, &err))
		fail_msg("%s", err.msg);
	rt_model_free(t);
	kq_write_mixed(f32, mixed, pick);
	rt_model *m = rt_model_load(mixed, &err);
	if (!m)
		fail_msg("%s", err.msg);

	eu_tiny_spec(spec, sizeof(spec), mixed, "ngram:1:3", "chain:6", "greedy", "topk", 0,
	             "gguf_a8", NULL);
	snprintf(dir, sizeof(dir), "%s/mixed", g_dir);
	eu_build(spec, dir, cache_dir(), false);

	/* the plan: each field its widest type, each layer its own */
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	char *json = read_text(path);
	static const struct { const char *buf, *want; } bl[] = {
		{"target.wq", "\"dtype\": \"q8_0\", \"shape\": [4, 256, 256], \"layer_dtypes\": "
		              "[\"q4_k\", \"q8_0\", \"q4_0\", \"q4_k\"]"},
		{"target.wv", "\"dtype\": \"q6_k\", \"shape\": [4, 128, 256], \"layer_dtypes\": "
		              "[\"q4_k\", \"q4_k\", \"q6_k\", \"q6_k\"]"},
		{"target.wo", "\"dtype\": \"q4_1\", \"shape\": [4, 256, 256], \"layer_dtypes\": "
		              "[\"q4_1\", \"q4_k\", \"q4_k\", \"q4_k\"]"},
		{"target.w_down", "\"dtype\": \"q6_k\", \"shape\": [4, 256, 512], \"layer_dtypes\": "
		                  "[\"q4_k\", \"q4_k\", \"q6_k\", \"q6_k\"]"},
		{"target.wk", "\"dtype\": \"q4_k\", \"shape\": [4, 128, 256], \"bytes\""},
		{"target.lm_head", "\"dtype\": \"q6_k\", \"shape\": [111, 256], \"bytes\""}};
	for (size_t i = 0; i < sizeof(bl) / sizeof(bl[0]); i++) {
		buf_line(json, bl[i].buf, line, sizeof(line));
		if (!strstr(line, bl[i].want))
			fail_msg("engine.json %s: %s, expected %s", bl[i].buf, line, bl[i].want);
	}

	/* greedy tokens against the fp32 reference on the file's own weights */
	const int P = 37, N = 40;
	int32_t prompt[64], ref[64], a[64], b[64];
	float margin[64];
	double mx;
	rt_engine_stats st;
	eu_tiny_prompt(prompt, P);
	eu_reference(m, prompt, P, N, ref, margin, &mx);
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, cache_dir());
	rt_engine *e = eu_bind(dir, d, m, 1);
	assert_int_equal(eu_generate(e, "gguf_a8 mixed, graph", prompt, P, N, false, a, &st), N);
	assert_int_equal(eu_generate(e, "gguf_a8 mixed, eager", prompt, P, N, true, b, &st), N);
	assert_memory_equal(a, b, sizeof(*a) * N);
	/* target-only: one row a token, where the chain verified up to 7; the
	 * GEMMs give every row the same bits at any row count, so the tokens
	 * are the same */
	eu_check_target_only(e, "gguf_a8 mixed", prompt, P, N, a, &st);
	print_message("  gguf_a8 mixed: target-only (1 row a token) == speculative, %d tokens, "
	              "%d iterations\n", N, st.n_iters);
	rt_engine_free(e);
	rt_dev_free(d);
	/* int8 GEMM inputs (2^-8) and fp16 elsewhere (2^-11), 8 u max|logit| */
	eu_agree_prefix("gguf_a8 mixed", a, ref, margin, N, 8.0 * (0x1p-8 + 0x1p-11) * mx);

	/* refusals: a layer type the GEMM does not take, one that overflows the
	 * stride (q8_0 in a q6_k buffer), a count that is not the layers' */
	static const struct { const char *from, *to, *msg; } bad[] = {
		{"[\"q4_k\", \"q4_k\", \"q6_k\", \"q6_k\"]", "[\"q4_k\", \"q5_1\", \"q6_k\", \"q6_k\"]",
		 "layer_dtypes[1] (target.wv): expected \"q8_0\", \"q4_0\", \"q4_1\", \"q5_0\", \"q4_k\" "
		 "or \"q6_k\", found \"q5_1\""},
		{"[\"q4_k\", \"q4_k\", \"q6_k\", \"q6_k\"]", "[\"q4_k\", \"q4_k\", \"q8_0\", \"q6_k\"]",
		 "layer_dtypes[2] (target.wv): q8_0, expected a type whose blocks divide the rows of "
		 "256 and fit the q6_k layer stride (26880 bytes)"},
		{"[\"q4_k\", \"q4_k\", \"q6_k\", \"q6_k\"]", "[\"q4_k\", \"q6_k\", \"q6_k\"]",
		 "layer_dtypes (target.wv): 3 types for a q6_k weight buffer of rank 3, expected a "
		 "layered GGUF-typed weight with one type a layer (4)"}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char bdir[330], cmd[1200];
		snprintf(bdir, sizeof(bdir), "%s/bad%zu", g_dir, i);
		snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s' '%s'", bdir, dir, bdir);
		assert_int_equal(system(cmd), 0);
		char *p = strstr(json, "\"name\": \"target.wv\"");
		assert_non_null(p);
		p = strstr(p, bad[i].from);
		assert_non_null(p);
		const size_t pre = (size_t)(p - json), fl = strlen(bad[i].from);
		char *ed = malloc(strlen(json) + 64);
		assert_non_null(ed);
		sprintf(ed, "%.*s%s%s", (int)pre, json, bad[i].to, p + fl);
		snprintf(path, sizeof(path), "%s/engine.json", bdir);
		write_text(path, ed);
		free(ed);
		eu_resum(bdir);
		rt_engine *be = rt_engine_load(bdir, &err);
		if (be)
			fail_msg("bad layer_dtypes %zu: loaded", i);
		if (!strstr(err.msg, bad[i].msg))
			fail_msg("bad layer_dtypes %zu: '%s', expected it to say '%s'", i, err.msg, bad[i].msg);
		print_message("  refused: %s\n", err.msg);
	}
	free(json);
	rt_model_free(m);
}

static int setup(void **state)
{
	(void)state;
	eu_work_dir(g_dir, sizeof(g_dir), "test_engine_gguf");
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encoders),
		cmocka_unit_test(test_mixed_engine),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
