/* The real model (SmolLM2-135M-Instruct Q4_1): greedy speculative output is
 * identical to greedy target-only output for every drafter (layer-skip with
 * and without a vocabulary-limited head, a separate draft model file derived
 * from the target, prompt-lookup n-grams), and bad requests are refused with
 * clear errors. Needs the model: `make model` (SW_MODEL overrides the path). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "formats/gguf.h"
#include "decode/chain.h"
#include "formats/tokenizer.h"
#include "core/tree.h"
#include "decode/tree_verify.h"

static const char *model_path(void)
{
	const char *p = getenv("SW_MODEL");
	return p ? p : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
}

struct fixture {
	rt_model *m;
	rt_tokenizer *tok;
};

static int setup(void **state)
{
	static struct fixture f;
	sw_err err;
	if (access(model_path(), R_OK)) {
		fprintf(stderr, "real model %s missing: run `make model`\n", model_path());
		return -1;
	}
	f.m = rt_model_load(model_path(), &err);
	if (!f.m) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	gguf_file *g = gguf_open(model_path(), &err);
	f.tok = g ? rt_tokenizer_from_gguf(g, &err) : NULL;
	gguf_close(g);
	if (!f.tok)
		return -1;
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	rt_tokenizer_free(f->tok);
	rt_model_free(f->m);
	return 0;
}

static int encode_chat(const rt_tokenizer *t, const char *msg, int32_t *ids, int cap)
{
	char buf[2048];
	sw_err err;
	int n = rt_chat_format(t, msg, buf, sizeof(buf), &err);
	assert_true(n > 0);
	n = rt_tokenize(t, buf, (size_t)n, false, true, ids, cap, &err);
	assert_true(n > 0);
	return n;
}

static const char *PROMPTS[] = {
	"What is the capital of France? Answer in one sentence.",
	"Repeat this sentence twice: the quick brown fox jumps over the lazy dog.",
	"Write a haiku about the sea.",
};
#define N_NEW 24

static void test_greedy_spec_equals_target(void **state)
{
	struct fixture *f = *state;
	sw_err err;
	char draft_path[] = "/tmp/sw_draft_XXXXXX";
	int fd = mkstemp(draft_path);
	assert_true(fd >= 0);
	close(fd);
	/* A separate draft model file: 8 of the 30 layers, re-quantized to Q8_0. */
	rt_model *view = rt_model_layerskip_parse(f->m, "0-3,26-29", &err);
	assert_non_null(view);
	assert_int_equal(rt_llama_save_gguf(view, draft_path, GGML_T_Q8_0, &err), 0);
	rt_model_free(view);
	rt_model *sep = rt_model_load(draft_path, &err);
	assert_non_null(sep);
	unlink(draft_path);
	assert_int_equal(sep->cfg.n_layers, 8);
	assert_int_equal(sep->cfg.vocab, f->m->cfg.vocab);

	rt_model *ls1 = rt_model_layerskip_parse(f->m, "0-14,22-29", &err);
	rt_model *ls2 = rt_model_layerskip_parse(f->m, "0-9,20-29@8192", &err);
	assert_non_null(ls1);
	assert_non_null(ls2);
	rt_drafter *ds[4] = {
		rt_drafter_model(ls1, 512, &err),
		rt_drafter_model(ls2, 512, &err),
		rt_drafter_model(sep, 512, &err),
		rt_drafter_ngram(1, 3, &err),
	};
	const char *names[4] = { "layerskip:0-14,22-29", "layerskip:0-9,20-29@8192", "separate Q8_0 draft", "ngram" };
	rt_ctx *tc = rt_ctx_new(f->m, 512, 256, &err);
	assert_non_null(tc);
	for (size_t p = 0; p < sizeof(PROMPTS) / sizeof(PROMPTS[0]); p++) {
		int32_t ids[256], ref[N_NEW], out[N_NEW];
		int n = encode_chat(f->tok, PROMPTS[p], ids, 256);
		rt_gen_cfg cfg = { .samp = { 0.0f, 0, 1.0f }, .gamma = 4, .seed = 1, .max_new = N_NEW };
		rt_stats st;
		rt_ctx_truncate(tc, 0);
		assert_int_equal(rt_generate_target(tc, ids, n, &cfg, ref, &st, &err), N_NEW);
		for (int d = 0; d < 4; d++) {
			cfg.gamma = d == 3 ? 6 : 3;
			rt_ctx_truncate(tc, 0);
			int got = rt_generate_spec(tc, ds[d], ids, n, &cfg, out, &st, &err);
			assert_int_equal(got, N_NEW);
			printf("  prompt %zu, %-26s tau %.2f, accepted %llu of %llu\n", p, names[d],
			       (double)st.n_tokens / st.n_target_calls, (unsigned long long)st.n_accepted,
			       (unsigned long long)st.n_drafted);
			assert_memory_equal(out, ref, sizeof(ref));
		}
	}
	for (int d = 0; d < 4; d++)
		rt_drafter_free(ds[d]);
	rt_ctx_free(tc);
	rt_model_free(ls1);
	rt_model_free(ls2);
	rt_model_free(sep);
}

/* Same seed, same tokens: the Philox keys make stochastic runs repeatable. */
static void test_stochastic_repeatable(void **state)
{
	struct fixture *f = *state;
	sw_err err;
	rt_model *ls = rt_model_layerskip_parse(f->m, "0-9,20-29", &err);
	rt_drafter *d = rt_drafter_model(ls, 256, &err);
	rt_ctx *tc = rt_ctx_new(f->m, 256, 16, &err);
	int32_t ids[256], a[16], b[16], c[16];
	int n = encode_chat(f->tok, PROMPTS[2], ids, 256);
	rt_gen_cfg cfg = { .samp = { 0.8f, 40, 0.95f }, .gamma = 3, .seed = 99, .max_new = 16 };
	rt_stats st;
	assert_int_equal(rt_generate_spec(tc, d, ids, n, &cfg, a, &st, &err), 16);
	rt_ctx_truncate(tc, 0);
	assert_int_equal(rt_generate_spec(tc, d, ids, n, &cfg, b, &st, &err), 16);
	assert_memory_equal(a, b, sizeof(a));
	cfg.seed = 100;
	rt_ctx_truncate(tc, 0);
	assert_int_equal(rt_generate_spec(tc, d, ids, n, &cfg, c, &st, &err), 16);
	assert_memory_not_equal(a, c, sizeof(a)); /* different seeds differ (p ~ 1 for 16 tokens at T=0.8) */
	rt_ctx_free(tc);
	rt_drafter_free(d);
	rt_model_free(ls);
}

static void test_bad_requests(void **state)
{
	struct fixture *f = *state;
	sw_err err;
	rt_ctx *tc = rt_ctx_new(f->m, 32, 16, &err);
	int32_t ids[64], out[8];
	for (int i = 0; i < 64; i++)
		ids[i] = 100 + i;
	rt_gen_cfg cfg = { .samp = { 0.0f, 0, 1.0f }, .gamma = 4, .seed = 1, .max_new = 8 };
	rt_stats st;
	/* prompt longer than the context */
	assert_int_equal(rt_generate_target(tc, ids, 40, &cfg, out, &st, &err), SW_ERANGE);
	assert_non_null(strstr(err.msg, "does not fit the context of 32"));
	/* token outside the vocabulary */
	ids[3] = 49152;
	assert_int_equal(rt_generate_target(tc, ids, 5, &cfg, out, &st, &err), SW_EINVAL);
	assert_non_null(strstr(err.msg, "outside the vocabulary"));
	/* layer-skip specs */
	assert_null(rt_model_layerskip_parse(f->m, "40", &err));
	assert_non_null(strstr(err.msg, "30 layers"));
	assert_null(rt_model_layerskip_parse(f->m, "3-1", &err));
	assert_null(rt_model_layerskip_parse(f->m, "0-3,x", &err));
	assert_non_null(strstr(err.msg, "expected N, or ranges"));
	assert_null(rt_model_layerskip_parse(f->m, "4@0", &err));
	/* context larger than the model's trained context */
	assert_null(rt_ctx_new(f->m, 100000, 16, &err));
	assert_non_null(strstr(err.msg, "trained context 8192"));
	rt_ctx_free(tc);
}

/* Greedy tree decoding on the real model equals greedy target-only decoding. */
static void test_greedy_tree_equals_target(void **state)
{
	struct fixture *f = *state;
	sw_err err;
	rt_model *ls = rt_model_layerskip_parse(f->m, "0-9,20-29@8192", &err);
	assert_non_null(ls);
	rt_ctx *tc = rt_ctx_new(f->m, 512, 256, &err);
	const char *trees[2] = { "eagle25", "biseq8" };
	for (int ti = 0; ti < 2; ti++) {
		rt_tree *t = malloc(sizeof(*t));
		assert_int_equal(rt_tree_parse(trees[ti], NULL, t, &err), 0);
		rt_tree_cfg tcfg = { t, RT_EXPAND_TOPK, RT_VERIFY_GREEDY };
		int32_t ids[256], ref[16], out[16];
		int n = encode_chat(f->tok, PROMPTS[ti], ids, 256);
		rt_gen_cfg cfg = { .samp = { 0.0f, 0, 1.0f }, .gamma = 1, .seed = 1, .max_new = 16 };
		rt_stats st;
		rt_ctx_truncate(tc, 0);
		assert_int_equal(rt_generate_target(tc, ids, n, &cfg, ref, &st, &err), 16);
		rt_ctx_truncate(tc, 0);
		assert_int_equal(rt_generate_tree(tc, ls, &tcfg, ids, n, &cfg, out, &st, &err), 16);
		printf("  tree %s: tau %.2f\n", trees[ti], (double)st.n_tokens / st.n_target_calls);
		assert_memory_equal(out, ref, sizeof(ref));
		free(t);
	}
	rt_ctx_free(tc);
	rt_model_free(ls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_stochastic_repeatable),
		cmocka_unit_test(test_greedy_spec_equals_target),
		cmocka_unit_test(test_greedy_tree_equals_target),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
