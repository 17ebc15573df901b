/* The trained block drafters on the real target (SmolLM2-135M-Instruct):
 * their files match the sha256 recorded next to them (SHA256SUMS, checked by
 * sha256sum), they load against the target, and greedy block-drafted output
 * (chain of the whole block, B = 8, and Cartesian trees: a wide one and one
 * as deep as the block) equals target-only greedy output token
 * for token on a held-out prompt (New Testament text, never trained on),
 * with some drafts accepted (else the comparison would not exercise an
 * acceptance). Needs the model (`make model`; SW_MODEL overrides the path). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "decode/block_decode.h"
#include "core/tree.h"
#include "decode/tree_verify.h"
#include "formats/gguf.h"
#include "formats/tokenizer.h"

#define DRAFTER "models/drafters/smollm2-features-b8"

static const char *model_path(void)
{
	const char *p = getenv("SW_MODEL");
	return p ? p : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
}

static void test_sha256(void **state)
{
	static const char *const dirs[] = { DRAFTER };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "cd %s && sha256sum --quiet -c SHA256SUMS", dirs[i]);
		if (system(cmd) != 0)
			fail_msg("%s: files differ from the sha256 recorded in SHA256SUMS", dirs[i]);
	}
}

static void greedy_equal(const char *dpath, int block, const char *tree)
{
	sw_err err = { 0 };
	if (access(model_path(), R_OK))
		fail_msg("real model %s missing: run `make model`", model_path());
	rt_model *m = rt_model_load(model_path(), &err);
	assert_non_null(m);
	gguf_file *g = gguf_open(model_path(), &err);
	rt_tokenizer *tok = g ? rt_tokenizer_from_gguf(g, &err) : NULL;
	gguf_close(g);
	assert_non_null(tok);
	rt_block_drafter *bd = rt_block_drafter_load(dpath, m, &err);
	if (!bd)
		fail_msg("%s", err.msg);
	assert_int_equal(bd->cfg.block, block);
	static const char text[] =
		"Rewrite the following passage in plain modern English:\n\n"
		"Blessed are the poor in spirit: for theirs is the kingdom of heaven. Blessed are they that mourn: "
		"for they shall be comforted.";
	char chat[1024];
	int len = rt_chat_format(tok, text, chat, sizeof(chat), &err);
	assert_true(len > 0);
	int32_t ids[512];
	int n_prompt = rt_tokenize(tok, chat, (size_t)len, false, true, ids, 512, &err);
	assert_true(n_prompt > 10);
	enum { N = 24 };
	int32_t ref[N], out[N];
	rt_sampling greedy = { 0.0f, 0, 1.0f };
	rt_gen_cfg cfg = { .samp = greedy, .gamma = block, .seed = 1, .max_new = N };
	rt_stats st;
	rt_ctx *rc = rt_ctx_new(m, 512, 64, &err);
	assert_int_equal(rt_generate_target(rc, ids, n_prompt, &cfg, ref, &st, &err), N);
	rt_tree t;
	assert_int_equal(rt_tree_parse(tree, NULL, &t, &err), 0);
	for (int mode = 0; mode < 2; mode++) {
		rt_ctx *tc = rt_ctx_new(m, 512, 64, &err);
		rt_drafter *d = rt_drafter_block(bd, tc, 1, &err);
		assert_non_null(d);
		int n;
		if (mode == 0) {
			n = rt_generate_spec(tc, d, ids, n_prompt, &cfg, out, &st, &err);
		} else {
			rt_tree_cfg tcfg = { &t, RT_EXPAND_TOPK, RT_VERIFY_GREEDY };
			n = rt_generate_tree_block(tc, d, &tcfg, ids, n_prompt, &cfg, out, &st, &err);
		}
		if (n != N)
			fail_msg("%s", err.msg);
		printf("  %s: %s%s: tau %.2f (%llu target forwards for %d tokens)\n", dpath, mode ? "tree " : "chain",
		       mode ? tree : "", (double)st.n_tokens / (double)st.n_target_calls, (unsigned long long)st.n_target_calls, N);
		assert_memory_equal(out, ref, sizeof(ref));
		if (st.n_target_calls >= (uint64_t)N)
			fail_msg("%s: no draft accepted in %d tokens: the comparison did not exercise an acceptance", dpath, N);
		rt_drafter_free(d);
		rt_ctx_free(tc);
	}
	rt_ctx_free(rc);
	rt_block_drafter_free(bd);
	rt_tokenizer_free(tok);
	rt_model_free(m);
}

static void test_greedy_equal_b8(void **state)
{
	greedy_equal(DRAFTER, 8, "branch:3,2,2,1,1");
}

/* a tree as deep as the block (the retired B = 16 drafter had its own, 62 nodes) */
static void test_greedy_equal_b8_deep(void **state)
{
	greedy_equal(DRAFTER, 8, "branch:2,2,1,1,1,1,1,1"); /* 30 nodes */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256),
		cmocka_unit_test(test_greedy_equal_b8),
		cmocka_unit_test(test_greedy_equal_b8_deep),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
