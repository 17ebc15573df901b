/* Engine spec validation (gen/spec.h): every class of bad spec gives its own
 * message naming the JSON path; the example specs in models/specs parse to
 * the shapes they state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "gen/drafter.h"
#include "gen/spec.h"
#include "decode/tree_verify.h"

#define SHAPE7B "{\"shape\": {\"n_layers\": 4, \"dim\": 256, \"n_heads\": 8, \"n_kv_heads\": 2, " \
                "\"ffn_dim\": 512, \"vocab\": 1000, \"max_ctx\": 4096}}"
#define TAIL "\"max_context\": 2048, \"dtype\": \"bf16\""

static gen_spec g_spec;

static char *mk(const char *target, const char *draft, const char *tree, const char *verify,
                const char *extra)
{
	static char buf[4096];
	snprintf(buf, sizeof(buf), "{\"target\": %s, \"draft\": %s, \"tree\": \"%s\", "
	         "\"verify\": %s%s%s}", target, draft, tree, verify, extra[0] ? ", " : "", extra);
	return buf;
}

#define GOOD_T SHAPE7B
#define GOOD_D "\"layerskip:2\""
#define GOOD_V "{\"method\": \"greedy\", \"expand\": \"topk\"}"

static void expect_err(const char *text, const char *want)
{
	sw_err err = {0};
	int rc = gen_spec_parse(text, strlen(text), "t.json", NULL, &g_spec, &err);
	if (rc == 0)
		fail_msg("accepted a bad spec (want \"%s\"):\n%s", want, text);
	if (!strstr(err.msg, want))
		fail_msg("message \"%s\" lacks \"%s\"", err.msg, want);
	assert_true(rc == SW_EINVAL || rc == SW_ERANGE);
}

static void expect_ok(const char *text)
{
	sw_err err = {0};
	if (gen_spec_parse(text, strlen(text), "t.json", NULL, &g_spec, &err))
		fail_msg("refused: %s\n%s", err.msg, text);
}

static void test_good_defaults(void **state)
{
	(void)state;
	expect_ok(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL));
	assert_int_equal(g_spec.target.cfg.head_dim, 32);
	assert_int_equal(g_spec.target.cfg.n_kv_heads, 2);
	assert_true(g_spec.target.from_shape);
	assert_int_equal(g_spec.draft_kind, GEN_DRAFT_LAYERSKIP);
	assert_int_equal(g_spec.n_skip_layers, 2);
	assert_int_equal(g_spec.n_archs, 2);
	assert_string_equal(g_spec.archs[0], "sm_80");
	assert_string_equal(g_spec.archs[1], "sm_90");
	assert_false(g_spec.allow_spills);
	assert_true(g_spec.fuse); /* the fused layer unless "fuse": false */
	assert_int_equal(g_spec.prefill_chunk, 128);
	assert_int_equal(g_spec.est_context, 1024);
	assert_true(g_spec.top_p == 1.0f);
	assert_int_equal(g_spec.tree.n, 5);
	/* layer ranges, vocab limit, the object form of draft */
	expect_ok(mk(GOOD_T, "{\"method\": \"layerskip:0,2-3@500\"}", "eagle25", GOOD_V, TAIL));
	assert_int_equal(g_spec.n_skip_layers, 3);
	assert_int_equal(g_spec.skip_layers[1], 2);
	assert_int_equal(g_spec.draft_vocab, 500);
	/* a model draft by shape */
	expect_ok(mk(GOOD_T, "{\"method\": \"model\", \"shape\": {\"n_layers\": 1, \"dim\": 64, "
	             "\"n_heads\": 2, \"ffn_dim\": 128, \"vocab\": 1000}}", "kary:2:2",
	             "{\"method\": \"rrs\", \"expand\": \"sample\"}",
	             TAIL ", \"sampling\": {\"temperature\": 0.7, \"top_k\": 40, \"top_p\": 0.9}"));
	assert_int_equal(g_spec.draft_kind, GEN_DRAFT_MODEL);
	assert_int_equal(g_spec.draft.cfg.dim, 64);
	assert_int_equal(g_spec.verify_method, RT_VERIFY_RRS);
	expect_ok(mk(GOOD_T, "\"ngram:1:4\"", "chain:5", GOOD_V, TAIL ", \"archs\": [\"sm_90a\"]"));
	assert_int_equal(g_spec.draft_kind, GEN_DRAFT_NGRAM);
	assert_int_equal(g_spec.ngram_max, 4);
}

/* One bad spec per class, each with the words its message must carry. */
static void test_bad_specs(void **state)
{
	(void)state;
	/* malformed JSON */
	expect_err("{\"target\": ", "t.json:1:");
	/* unknown keys, top level and nested */
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"treee\": 1"),
	           "unknown field \"treee\"");
	expect_err(mk("{\"shape\": {\"n_layers\": 4, \"dim\": 256, \"n_heads\": 8, \"ffn_dim\": 512, "
	              "\"vocab\": 1000, \"n_kv_head\": 2}}", GOOD_D, "chain:4", GOOD_V, TAIL),
	           "$.target.shape: unknown field \"n_kv_head\"");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", "{\"method\": \"greedy\", \"expand\": \"topk\", "
	              "\"x\": 1}", TAIL), "$.verify: unknown field \"x\"");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"sampling\": {\"temp\": 0}"),
	           "$.sampling: unknown field \"temp\"");
	/* wrong type, missing field */
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, "\"max_context\": \"2048\", "
	              "\"dtype\": \"bf16\""), "$.max_context: expected");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, "\"dtype\": \"bf16\""),
	           "missing required field \"max_context\"");
	expect_err("{\"target\": " SHAPE7B ", \"draft\": \"ngram\", \"verify\": " GOOD_V ", " TAIL "}",
	           "missing required field \"tree\"");
	expect_err(mk("{\"shape\": {\"dim\": 256, \"n_heads\": 8, \"ffn_dim\": 512, \"vocab\": 1000}}",
	              GOOD_D, "chain:4", GOOD_V, TAIL), "missing required field \"n_layers\"");
	/* model source: both, neither, a missing file */
	expect_err(mk("{\"path\": \"x.gguf\", \"shape\": {}}", GOOD_D, "chain:4", GOOD_V, TAIL),
	           "$.target: expected exactly one of \"path\" and \"shape\", found both");
	expect_err(mk("{}", GOOD_D, "chain:4", GOOD_V, TAIL), "found neither");
	expect_err(mk("{\"path\": \"/nonexistent/m.gguf\"}", GOOD_D, "chain:4", GOOD_V, TAIL),
	           "$.target.path: expected a GGUF file or an HF model directory");
	/* shapes */
	expect_err(mk("{\"shape\": {\"n_layers\": 4, \"dim\": 256, \"n_heads\": 8, \"n_kv_heads\": 3, "
	              "\"ffn_dim\": 512, \"vocab\": 1000}}", GOOD_D, "chain:4", GOOD_V, TAIL),
	           "n_heads a multiple of n_kv_heads (GQA)");
	expect_err(mk("{\"shape\": {\"n_layers\": 4, \"dim\": 250, \"n_heads\": 8, \"ffn_dim\": 512, "
	              "\"vocab\": 1000}}", GOOD_D, "chain:4", GOOD_V, TAIL),
	           "$.target.shape.dim: expected a multiple of n_heads");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, "\"max_context\": 8192, \"dtype\": \"bf16\""),
	           "$.max_context: expected at most the target's trained context");
	/* draft */
	expect_err(mk(GOOD_T, "\"layerskip:0-9\"", "chain:4", GOOD_V, TAIL),
	           "$.draft: expected increasing layer ids in [0, n_layers)");
	expect_err(mk(GOOD_T, "\"layerskip:4\"", "chain:4", GOOD_V, TAIL),
	           "a layer count 1 <= N < the target's layers");
	expect_err(mk(GOOD_T, "\"layerskip:2@5000\"", "chain:4", GOOD_V, TAIL), "vocabulary limit");
	expect_err(mk(GOOD_T, "{\"method\": \"layerskip:2\", \"path\": \"m.gguf\"}", "chain:4", GOOD_V,
	              TAIL), "\"path\"/\"shape\" only with method \"model\"");
	expect_err(mk(GOOD_T, "\"medusa\"", "chain:4", GOOD_V, TAIL),
	           "$.draft: expected layerskip:LAYERS, model, model:PATH, ngram");
	/* a draft vocabulary that is a prefix of the target's (q = 0 beyond it,
	 * test_vocab_prefix.c), not one larger */
	expect_ok(mk(GOOD_T, "{\"method\": \"model\", \"shape\": {\"n_layers\": 1, \"dim\": 64, "
	             "\"n_heads\": 2, \"ffn_dim\": 128, \"vocab\": 997}}", "chain:4", GOOD_V, TAIL));
	assert_int_equal(g_spec.draft_vocab, 997);
	expect_err(mk(GOOD_T, "{\"method\": \"model\", \"shape\": {\"n_layers\": 1, \"dim\": 64, "
	              "\"n_heads\": 2, \"ffn_dim\": 128, \"vocab\": 1001}}", "chain:4", GOOD_V, TAIL),
	           "$.draft: expected a draft vocabulary at most the target's (the target's or a prefix "
	           "of it), found 1001 (target 1000)");
	expect_err(mk(GOOD_T, "\"ngram\"", "eagle25", GOOD_V, TAIL),
	           "$.tree: expected a chain (ngram drafts one continuation)");
	expect_err(mk(GOOD_T, "\"ngram\"", "chain:4", "{\"method\": \"rrs\", \"expand\": \"sample\"}",
	              TAIL ", \"sampling\": {\"temperature\": 1}"), "greedy or onehot");
	/* tree */
	expect_err(mk(GOOD_T, GOOD_D, "kary:0:3", GOOD_V, TAIL), "$.tree");
	expect_err(mk(GOOD_T, GOOD_D, "no_such_preset", GOOD_V, TAIL), "$.tree");
	/* verification pair and names */
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", "{\"method\": \"rrs\", \"expand\": \"topk\"}",
	              TAIL ", \"sampling\": {\"temperature\": 0.8}"),
	           "$.verify: expected an exact (expand, method) pair");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"sampling\": {\"temperature\": 0.8}"),
	           "expand \"topk\" with method \"greedy\" at temperature 0.8");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", "{\"method\": \"rrx\", \"expand\": \"topk\"}", TAIL),
	           "$.verify.method: expected greedy, rrs, rrsw, spechub or onehot, found \"rrx\"");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", "{\"method\": \"greedy\", \"expand\": \"top1\"}", TAIL),
	           "$.verify.expand: expected topk, sample, sample-wor or spechub");
	/* sampling ranges */
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"sampling\": {\"top_p\": 0}"),
	           "$.sampling.top_p: expected 0 < top_p <= 1");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"sampling\": {\"temperature\": -1}"),
	           "$.sampling.temperature");
	/* context, dtype, archs, spills, roofline */
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"prefill_chunk\": 4096"),
	           "$.prefill_chunk: expected at most max_context");
	expect_err(mk(GOOD_T, GOOD_D, "eagle25", GOOD_V, "\"max_context\": 40, \"dtype\": \"bf16\""),
	           "room for at least two trees");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, "\"max_context\": 2048, \"dtype\": \"fp8\""),
	           "$.dtype: expected \"bf16\", \"fp16\", \"q8_0\", \"q8_0_a8\" or \"gguf_a8\", found "
	           "\"fp8\"");
	/* gguf_a8 takes the file's types: a target given by shape has none */
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, "\"max_context\": 2048, \"dtype\": \"gguf_a8\""),
	           "$.dtype: expected a target GGUF file (the weights keep its types), found "
	           "\"gguf_a8\" with a target given by shape");
	/* q8_0: GEMM widths in whole 32-element blocks (ffn_dim 500 is not) */
	expect_ok(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, "\"max_context\": 2048, \"dtype\": \"q8_0\""));
	assert_int_equal(g_spec.dtype, GEN_DTYPE_Q8_0);
	/* q8_0_a8 (int8 GEMM inputs): its own dtype, the q8_0 weights and the
	 * fp16 activation buffers */
	expect_ok(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V,
	             "\"max_context\": 2048, \"dtype\": \"q8_0_a8\""));
	assert_int_equal(g_spec.dtype, GEN_DTYPE_Q8_0_A8);
	assert_string_equal(gen_dtype_name(g_spec.dtype), "q8_0_a8");
	assert_int_equal(gen_dtype_weights(g_spec.dtype), GEN_DTYPE_Q8_0);
	assert_int_equal(gen_dtype_act(g_spec.dtype), GEN_DTYPE_FP16);
	expect_err(mk("{\"shape\": {\"n_layers\": 4, \"dim\": 256, \"n_heads\": 8, \"n_kv_heads\": 2, "
	              "\"ffn_dim\": 500, \"vocab\": 1000, \"max_ctx\": 4096}}", GOOD_D, "chain:4", GOOD_V,
	              "\"max_context\": 2048, \"dtype\": \"q8_0_a8\""),
	           "found \"q8_0_a8\" with the target's 256, 500 and 256");
	expect_err(mk("{\"shape\": {\"n_layers\": 4, \"dim\": 256, \"n_heads\": 8, \"n_kv_heads\": 2, "
	              "\"ffn_dim\": 500, \"vocab\": 1000, \"max_ctx\": 4096}}", GOOD_D, "chain:4", GOOD_V,
	              "\"max_context\": 2048, \"dtype\": \"q8_0\""),
	           "$.dtype: expected a model whose dim, ffn_dim and n_heads x head_dim are multiples "
	           "of 32 (q8_0 blocks), found \"q8_0\" with the target's 256, 500 and 256");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"archs\": [\"sm_80\", \"sm8\"]"),
	           "$.archs[1]: expected an NVRTC real arch");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"archs\": [\"sm_90\", \"sm_90\"]"),
	           "$.archs[1]: expected each arch once");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"archs\": []"), "$.archs");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"allow_spills\": 1"),
	           "$.allow_spills: expected");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"fuse\": \"no\""),
	           "$.fuse: expected");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"roofline\": {\"tau\": 9}"),
	           "$.roofline.tau");
	expect_err(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL ", \"name\": \"a b\""),
	           "$.name: expected 1-63 characters");
}

/* A block drafter: the trained SmolLM2 one, against a target of SmolLM2's
 * shape (no weights read), its config baked into the spec; every rule that
 * refuses a block spec names its field. */
#define SMOL_SHAPE "{\"shape\": {\"n_layers\": 30, \"dim\": 576, \"n_heads\": 9, " \
                   "\"n_kv_heads\": 3, \"ffn_dim\": 1536, \"vocab\": 49152, \"rope_theta\": 100000}}"
#define BLK_FEAT "models/drafters/smollm2-features-b8"
#define BLK_D(steps) "{\"method\": \"block\", \"path\": \"" BLK_FEAT "\"" steps "}"
#define SAMP_V "{\"method\": \"rrs\", \"expand\": \"sample\"}"

static void test_block_specs(void **state)
{
	(void)state;
	expect_ok(mk(SMOL_SHAPE, BLK_D(""), "chain:8", GOOD_V, TAIL));
	assert_int_equal(g_spec.draft_kind, GEN_DRAFT_BLOCK);
	assert_int_equal(g_spec.block.block, 8);
	assert_int_equal(g_spec.block.n_taps, 3);
	assert_int_equal(g_spec.block.taps[2], 29);
	assert_int_equal(g_spec.draft_vocab, 8192);
	assert_int_equal(g_spec.block_steps, 1);
	expect_ok(mk(SMOL_SHAPE, BLK_D(", \"steps\": 4"), "chain:6", SAMP_V, TAIL));
	assert_int_equal(g_spec.block_steps, 4);
	expect_ok(mk(SMOL_SHAPE, BLK_D(""), "branch:3,2,2,1", "{\"method\": \"onehot\", \"expand\": \"topk\"}",
	             TAIL ", \"sampling\": {\"temperature\": 0.7}"));
	assert_int_equal(g_spec.tree.depth_max, 4);

	expect_err(mk(SMOL_SHAPE, BLK_D(""), "chain:9", GOOD_V, TAIL),
	           "$.tree: expected a tree of depth at most the block drafter's B");
	expect_err(mk(SMOL_SHAPE, BLK_D(", \"steps\": 2"), "branch:2,2", GOOD_V, TAIL),
	           "$.draft.steps: expected 1 with a tree");
	expect_err(mk(SMOL_SHAPE, BLK_D(", \"steps\": 17"), "chain:4", GOOD_V, TAIL), "$.draft.steps");
	/* a tokens-conditioned drafter's config (the retired smollm2-tokens-b8's; the
	 * spec reads config.json only) */
	char tdir[] = "/tmp/sw_spec_tokens_XXXXXX", cfg[64], tdraft[128];
	assert_non_null(mkdtemp(tdir));
	snprintf(cfg, sizeof(cfg), "%s/config.json", tdir);
	FILE *cf = fopen(cfg, "w");
	assert_non_null(cf);
	fputs("{\"format\": \"specwright-block-drafter\", \"version\": 1, \"conditioning\": \"tokens\", "
	      "\"block\": 8, \"draft_vocab\": 8192, \"target\": {\"dim\": 576, \"vocab\": 49152, "
	      "\"n_layers\": 30}, \"taps\": [], \"window\": 32, \"block_attention\": \"bidirectional\", "
	      "\"n_layers\": 1, \"n_heads\": 9, \"n_kv_heads\": 3, \"head_dim\": 64, \"ffn_dim\": 1536, "
	      "\"norm_eps\": 1e-5, \"rope_theta\": 100000.0, \"dtype\": \"F16\"}\n", cf);
	fclose(cf);
	snprintf(tdraft, sizeof(tdraft), "{\"method\": \"block\", \"path\": \"%s\"}", tdir);
	expect_err(mk(SMOL_SHAPE, tdraft, "chain:4", GOOD_V, TAIL),
	           "$.draft.path: expected a features-conditioned block drafter");
	unlink(cfg);
	rmdir(tdir);
	expect_err(mk(SMOL_SHAPE, "{\"method\": \"block\", \"path\": \"/nonexistent\"}", "chain:4",
	              GOOD_V, TAIL), "$.draft.path: expected a block drafter directory");
	expect_err(mk(SMOL_SHAPE, "\"block\"", "chain:4", GOOD_V, TAIL),
	           "$.draft: expected {\"method\": \"block\"");
	expect_err(mk(SHAPE7B, BLK_D(""), "chain:4", GOOD_V, TAIL),
	           "config.json: $.target.dim: expected 256 (the width of the target");
	expect_err(mk(SMOL_SHAPE, "{\"method\": \"ngram\", \"steps\": 2}", "chain:4", GOOD_V, TAIL),
	           "$.draft.steps: expected \"steps\" only with method \"block\"");
	expect_err(mk(SMOL_SHAPE, BLK_D(""), "chain:4", GOOD_V,
	              "\"max_context\": 2048, \"dtype\": \"q8_0\""),
	           "$.dtype: expected \"bf16\" or \"fp16\" with a block drafter");
	expect_err(mk(SMOL_SHAPE, BLK_D(""), "chain:4", GOOD_V,
	              "\"max_context\": 2048, \"dtype\": \"q8_0_a8\""),
	           "$.dtype: expected \"bf16\" or \"fp16\" with a block drafter, found \"q8_0_a8\"");
	expect_err(mk(SMOL_SHAPE, BLK_D(""), "chain:4", GOOD_V, TAIL ", \"adaptive\": {\"h\": 0.3}"),
	           "$.adaptive: expected a chain tree drafted by a model");

	/* a drafter by shape: config.json's keys, the spec's target its target */
#define BLK_SHAPE(extra) "{\"method\": \"block\", \"shape\": {\"conditioning\": \"features\", " \
	"\"block\": 16, \"draft_vocab\": 500, \"taps\": [0, 3], \"block_attention\": \"causal\", " \
	"\"n_layers\": 1, \"n_heads\": 8, \"n_kv_heads\": 2, \"head_dim\": 32, \"ffn_dim\": 512, " \
	"\"norm_eps\": 1e-5, \"rope_theta\": 10000" extra "}}"
	expect_ok(mk(SHAPE7B, BLK_SHAPE(""), "chain:16", GOOD_V, TAIL));
	assert_int_equal(g_spec.draft_kind, GEN_DRAFT_BLOCK);
	assert_true(g_spec.draft.from_shape);
	assert_int_equal(g_spec.block.block, 16);
	assert_int_equal(g_spec.block.block_attn, RT_BD_CAUSAL);
	assert_int_equal(g_spec.block.dim, 256);
	expect_err(mk(SHAPE7B, BLK_SHAPE(", \"format\": 1"), "chain:4", GOOD_V, TAIL), "$.draft.shape");
	expect_err(mk(SHAPE7B, "{\"method\": \"block\", \"shape\": {\"conditioning\": \"features\", "
	              "\"block\": 4, \"draft_vocab\": 500, \"taps\": [0, 4], \"block_attention\": \"causal\", "
	              "\"n_layers\": 1, \"n_heads\": 8, \"n_kv_heads\": 2, \"head_dim\": 32, "
	              "\"ffn_dim\": 512, \"norm_eps\": 1e-5, \"rope_theta\": 10000}}", "chain:4", GOOD_V, TAIL),
	           "$.draft.shape.taps[1]");
	expect_err(mk(SHAPE7B, "{\"method\": \"block\", \"path\": \"" BLK_FEAT "\", \"shape\": {}}",
	              "chain:4", GOOD_V, TAIL), "$.draft: expected exactly one of \"path\" and \"shape\"");
}

static void test_example_specs(void **state)
{
	(void)state;
	sw_err err = {0};
	if (gen_spec_load("models/specs/llama2-7b-eagle25.json", NULL, &g_spec, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(g_spec.target.cfg.ffn_dim, 11008);
	assert_int_equal(g_spec.target.cfg.vocab, 32000);
	assert_int_equal(g_spec.target.cfg.head_dim, 128);
	assert_int_equal(g_spec.dtype, GEN_DTYPE_FP16);
	if (gen_spec_load("models/specs/llama3-8b-eagle25.json", NULL, &g_spec, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(g_spec.target.cfg.n_heads / g_spec.target.cfg.n_kv_heads, 4);
	assert_int_equal(g_spec.target.cfg.vocab, 128256);
	assert_true(g_spec.target.cfg.rope_theta == 500000.0f);
	assert_int_equal(g_spec.verify_method, RT_VERIFY_RRSW);
	FILE *f = fopen("models/cache/SmolLM2-135M-Instruct.Q4_1.gguf", "rb");
	if (!f) {
		print_message("test_spec: SKIPPING the real-model spec: model not fetched (make model)\n");
		return;
	}
	fclose(f);
	if (gen_spec_load("models/specs/smollm2-eagle25.json", NULL, &g_spec, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(g_spec.target.cfg.dim, 576);
	assert_int_equal(g_spec.target.cfg.n_layers, 30);
	assert_int_equal(g_spec.target.cfg.n_kv_heads, 3);
	assert_int_equal(g_spec.target.cfg.vocab, 49152);
	assert_int_equal(g_spec.n_skip_layers, 10);
	assert_int_equal(g_spec.tree.n, 26);
}

/* $.control (gen/plan_ctrl.h): on by default for n-gram engines, off for
 * others; values, types and unknown keys refused naming the field, what
 * was expected and what was found. */
static void test_control(void **state)
{
	(void)state;
	expect_ok(mk(GOOD_T, "\"ngram:1:3\"", "chain:6", GOOD_V, TAIL));
	assert_true(g_spec.ctrl.on);
	assert_int_equal(g_spec.ctrl.cost_kind, GEN_CTRL_COST_MEASURE);
	assert_int_equal(g_spec.ctrl.probe, 8);
	assert_int_equal(g_spec.ctrl.probe_max, 256);
	assert_true(g_spec.ctrl.prior1 == 0.1 && g_spec.ctrl.prior1_w == 4);
	/* a sampling engine's default table is flat: a timed one differs between
	 * processes, and a seed must give the same tokens in every process */
	expect_ok(mk(GOOD_T, "\"ngram:1:3\"", "chain:6", "{\"method\": \"onehot\", \"expand\": \"topk\"}",
	             TAIL ", \"sampling\": {\"temperature\": 0.8, \"top_k\": 0, \"top_p\": 1}"));
	assert_true(g_spec.ctrl.on);
	assert_int_equal(g_spec.ctrl.cost_kind, GEN_CTRL_COST_FLAT);
	expect_ok(mk(GOOD_T, GOOD_D, "chain:4", GOOD_V, TAIL));
	assert_false(g_spec.ctrl.on);
	expect_ok(mk(GOOD_T, "\"ngram\"", "chain:3", GOOD_V,
	             TAIL ", \"control\": {\"mode\": \"cost\", \"probe\": 0, \"decay\": 1, "
	             "\"cost\": [1, 1.5, 2, 2.5]}"));
	assert_true(g_spec.ctrl.on && g_spec.ctrl.probe == 0 && g_spec.ctrl.cost[3] == 2.5);
	assert_int_equal(g_spec.ctrl.cost_kind, GEN_CTRL_COST_TABLE);
	expect_ok(mk(GOOD_T, "\"ngram\"", "chain:3", GOOD_V,
	             TAIL ", \"control\": {\"probe\": 5, \"prior_1\": 0.3, \"prior_1_weight\": 2}"));
	assert_true(g_spec.ctrl.probe == 5 && g_spec.ctrl.probe_max == 160); /* 32 probe */
	assert_true(g_spec.ctrl.prior1 == 0.3 && g_spec.ctrl.prior1_w == 2);
	expect_ok(mk(GOOD_T, "\"ngram\"", "chain:3", GOOD_V,
	             TAIL ", \"control\": {\"probe\": 5, \"probe_max\": 5}"));
	assert_int_equal(g_spec.ctrl.probe_max, 5);
	expect_ok(mk(GOOD_T, "\"ngram\"", "chain:3", GOOD_V, TAIL ", \"control\": {\"mode\": \"off\"}"));
	assert_false(g_spec.ctrl.on);
	expect_ok(mk(GOOD_T, "\"ngram\"", "chain:3", GOOD_V, TAIL ", \"control\": {\"cost\": \"flat\"}"));
	assert_int_equal(g_spec.ctrl.cost_kind, GEN_CTRL_COST_FLAT);
	const char *N = "\"ngram\"";
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V, TAIL ", \"control\": {\"mdoe\": \"cost\"}"),
	           "$.control: unknown field \"mdoe\"");
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V, TAIL ", \"control\": {\"mode\": \"fast\"}"),
	           "$.control.mode: expected \"cost\" or \"off\", found \"fast\"");
	expect_err(mk(GOOD_T, GOOD_D, "chain:3", GOOD_V, TAIL ", \"control\": {\"mode\": \"cost\"}"),
	           "$.control.mode: expected \"off\" (the draft-length controller drives n-gram");
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V, TAIL ", \"control\": {\"cost\": [1, 2]}"),
	           "$.control.cost");
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V, TAIL ", \"control\": {\"cost\": [2, 2, 2, 2]}"),
	           "$.control.cost[0]: expected 1");
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V, TAIL ", \"control\": {\"cost\": [1, 0.5, 2, 2]}"),
	           "$.control.cost[1]");
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V, TAIL ", \"control\": {\"cost\": \"cheap\"}"),
	           "$.control.cost: expected \"measure\", \"flat\" or an array, found \"cheap\"");
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V, TAIL ", \"control\": {\"decay\": 0.2}"),
	           "$.control.decay");
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V, TAIL ", \"control\": {\"probe\": -1}"),
	           "$.control.probe");
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V,
	              TAIL ", \"control\": {\"probe\": 9, \"probe_max\": 8}"), "$.control.probe_max");
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V, TAIL ", \"control\": {\"prior_1\": 1.5}"),
	           "$.control.prior_1");
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V, TAIL ", \"control\": {\"prior_1_weight\": 0}"),
	           "$.control.prior_1_weight");
	expect_err(mk(GOOD_T, N, "chain:3", GOOD_V, TAIL ", \"control\": 3"), "$.control");
}

/* How many drafters of the registry read a "$.draft" key. */
static int key_readers(const char *key)
{
	int n = 0;
	for (int k = 0; k < GEN_DRAFT_N; k++)
		for (const char *const *x = gen_drafter_of(k)->keys; x && *x; x++)
			n += !strcmp(*x, key);
	return n;
}

/* "$.draft" is read through the drafter registry (gen/drafters.h): every
 * row's methods are what an unknown method's refusal lists and its keys
 * what an unknown key's allows; a key one drafter alone reads is refused
 * with every other method, naming that drafter's. */
static void test_draft_table(void **state)
{
	(void)state;
	sw_err err = {0};
	char draft[256], want[512];
	const char *unknown = mk(GOOD_T, "{\"method\": \"medusa\", \"mtp\": 2}", "chain:4", GOOD_V, TAIL);
	assert_int_not_equal(gen_spec_parse(unknown, strlen(unknown), "t.json", NULL, &g_spec, &err), 0);
	for (int k = 0; k < GEN_DRAFT_N; k++) {
		const gen_drafter *dr = gen_drafter_of(k);
		assert_non_null(dr);
		assert_non_null(dr->parse);
		assert_non_null(dr->methods[0]);
		for (const char *const *x = dr->keys; x && *x; x++)
			if (!strstr(err.msg, *x))
				fail_msg("%s: key \"%s\" not allowed: %s", dr->name, *x, err.msg);
	}
	unknown = mk(GOOD_T, "\"medusa\"", "chain:4", GOOD_V, TAIL);
	err = (sw_err){0};
	assert_int_not_equal(gen_spec_parse(unknown, strlen(unknown), "t.json", NULL, &g_spec, &err), 0);
	for (int k = 0; k < GEN_DRAFT_N; k++)
		for (const char *const *m = gen_drafter_of(k)->methods; *m; m++)
			if (!strstr(err.msg, *m))
				fail_msg("method %s not listed: %s", *m, err.msg);
	/* a prefix is matched through its ':' ("ngram:MIN:MAX" is no "ngram*"),
	 * a path or not */
	expect_err(mk(GOOD_T, "{\"method\": \"ngramfoo\", \"path\": \"m.gguf\"}", "chain:4", GOOD_V,
	              TAIL), "$.draft.method: expected layerskip:LAYERS, model, model:PATH, ngram, "
	           "ngram:MIN:MAX, block or eagle3, found \"ngramfoo\"");
	/* every key one drafter alone reads, with each other drafter's method */
	int n = 0;
	for (int k = 0; k < GEN_DRAFT_N; k++) {
		const gen_drafter *owner = gen_drafter_of(k);
		for (const char *const *x = owner->keys; x && *x; x++) {
			if (key_readers(*x) != 1)
				continue;
			for (int j = 0; j < GEN_DRAFT_N; j++) {
				if (j == k)
					continue;
				const char *m = gen_drafter_of(j)->methods[0];
				snprintf(draft, sizeof(draft), "{\"method\": \"%s\", \"%s\": 1}", m, *x);
				snprintf(want, sizeof(want), "$.draft.%s: expected ", *x);
				expect_err(mk(GOOD_T, draft, "chain:4", GOOD_V, TAIL), want);
				snprintf(want, sizeof(want), "only with method \"%s\"", owner->methods[0]);
				expect_err(mk(GOOD_T, draft, "chain:4", GOOD_V, TAIL), want);
				snprintf(want, sizeof(want), "found it with \"%s\"", m);
				expect_err(mk(GOOD_T, draft, "chain:4", GOOD_V, TAIL), want);
				n++;
			}
		}
	}
	assert_true(n >= 3 * (GEN_DRAFT_N - 1)); /* steps; ngram and levels */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_defaults),
		cmocka_unit_test(test_control),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_block_specs),
		cmocka_unit_test(test_example_specs),
		cmocka_unit_test(test_draft_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
