/* Models checked at load and at run time (issue 40), each case against a
 * file that loads before one value of it is changed in place:
 *   - a GGUF whose tokenizer.ggml.tokens is shorter than its vocabulary is
 *     refused by the tokenizer (file, field, expected, found), and by the
 *     CLI, also where the tokenizer comes from another file (--tokenizer,
 *     as for a Hugging Face directory);
 *   - the finite scan refuses a NaN in an F32 tensor, an inf in an F16
 *     tensor, a NaN block scale in Q8_0 (d) and in Q4_K (dmin), naming the
 *     file, the tensor and the element or block, in the host loader and in
 *     the engine's GGUF weight source; an EAGLE-3 head with an inf in its
 *     LM head and a block drafter with a NaN weight are refused the same;
 *   - a non-finite logit stops the host decoder (a NaN put into the LM head
 *     after load; finite weights whose logits overflow, loaded through the
 *     scan) and an EAGLE-3 head's forward, naming the op and the step, and
 *     a built engine on the host backend, naming the op, the buffer and the
 *     iteration. Before this check each of these drew a token. */
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "block_util.h"
#include "eagle3_util.h"
#include "engine/weights_gguf.h"
#include "engine_util.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "formats/tokenizer.h"
#include "kernels/half.h"
#include "kquant.h"
#include "model/block_drafter.h"
#include "model/eagle3.h"
#include "testutil.h"

static char g_dir[256];

static void must_contain(const char *msg, const char *const *needles, int n)
{
	for (int i = 0; i < n; i++)
		if (!strstr(msg, needles[i]))
			fail_msg("expected '%s' in: %s", needles[i], msg);
}

/* Writes n bytes at file offset at of path. */
static void file_poke(const char *path, uint64_t at, const void *v, size_t n)
{
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, v, n, (off_t)at), (ssize_t)n);
	close(fd);
}

static void file_copy(const char *src, const char *dst)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, dst);
	assert_int_equal(system(cmd), 0);
}

/* The file offset of tensor name's data in a GGUF or safetensors file. */
static uint64_t gguf_at(const char *path, const char *name)
{
	sw_err err = {0};
	gguf_file *f = gguf_open(path, &err);
	if (!f)
		fail_msg("%s", err.msg);
	const gguf_tensor *t = gguf_tensor_find(f, name);
	assert_non_null(t);
	const uint64_t at = (uint64_t)((const uint8_t *)t->data - f->base);
	gguf_close(f);
	return at;
}

static uint64_t st_at(const char *path, const char *name)
{
	sw_err err = {0};
	safetensors_file *f = NULL;
	if (safetensors_open(path, &f, &err))
		fail_msg("%s", err.msg);
	const safetensors_tensor *t = safetensors_find(f, name);
	assert_non_null(t);
	const uint64_t at = (uint64_t)(t->data - f->base);
	safetensors_free(f);
	return at;
}

/* `specwright args` with stdout and stderr into out; the exit status. */
static int cli(const char *args, char *out, size_t cap)
{
	const char *b = getenv("BUILD");
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "%s/specwright %s 2>&1", b && b[0] ? b : "build", args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = 0;
	int st = pclose(p);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* ---- the token table ---------------------------------------------------- */

static void test_short_token_table(void **state)
{
	enum { V = 64 };
	char raw[300], full[300], shrt[300], tok[300], out[8192], args[1200];
	snprintf(raw, sizeof(raw), "%s/tok.raw.gguf", g_dir);
	snprintf(full, sizeof(full), "%s/tok_full.gguf", g_dir);
	snprintf(shrt, sizeof(shrt), "%s/tok_short.gguf", g_dir);
	snprintf(tok, sizeof(tok), "%s/tok_only61.gguf", g_dir);
	sw_err err = {0};
	rt_model *m = tu_tiny_llama(V, 32, 1, 2, 1, 48, 3);
	assert_non_null(m);
	char store[V][16];
	const char *toks[V];
	for (int i = 0; i < V; i++) {
		snprintf(store[i], sizeof(store[i]), "t%d", i);
		toks[i] = store[i];
	}
	if (rt_llama_save_gguf(m, raw, GGML_T_F32, &err) ||
	    tu_gguf_revocab(raw, full, V, toks, V, "gpt2", &err) ||
	    tu_gguf_revocab(raw, shrt, V, toks, V - 3, "gpt2", &err))
		fail_msg("%s", err.msg);
	/* a tokenizer alone (no tensor, no vocab_size): nothing to cover */
	gguf_writer *w = gguf_writer_new(3, 32);
	gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, V - 3);
	gguf_w_arr_str(w, "tokenizer.ggml.merges", NULL, NULL, 0);
	assert_int_equal(gguf_writer_save(w, tok, &err), 0);
	gguf_writer_free(w);

	gguf_file *f = gguf_open(full, &err);
	rt_tokenizer *t = rt_tokenizer_from_gguf(f, &err);
	if (!t)
		fail_msg("%s", err.msg);
	assert_int_equal(rt_tokenizer_vocab(t), V);
	rt_tokenizer_free(t);
	gguf_close(f);
	f = gguf_open(tok, &err);
	t = rt_tokenizer_from_gguf(f, &err);
	assert_non_null(t);
	assert_int_equal(rt_tokenizer_vocab(t), V - 3);
	rt_tokenizer_free(t);
	gguf_close(f);

	f = gguf_open(shrt, &err);
	assert_non_null(f);
	assert_null(rt_tokenizer_from_gguf(f, &err));
	gguf_close(f);
	print_message("  %s\n", err.msg);
	const char *want[] = {shrt, "tokenizer.ggml.tokens: expected 64 tokens",
	                      "tensor token_embd.weight", "found 61", "ids 61..63"};
	must_contain(err.msg, want, 5);

	/* the CLI: the model's own file, and a tokenizer from another file */
	snprintf(args, sizeof(args), "generate %s --ids '1 2 3' -n 2", full);
	if (cli(args, out, sizeof(out)))
		fail_msg("specwright %s:\n%s", args, out);
	snprintf(args, sizeof(args), "generate %s --ids '1 2 3' -n 2", shrt);
	assert_int_equal(cli(args, out, sizeof(out)), 1);
	must_contain(out, want, 5);
	snprintf(args, sizeof(args), "generate %s --tokenizer %s --ids '1 2 3' -n 2", full, tok);
	assert_int_equal(cli(args, out, sizeof(out)), 1);
	print_message("  %s", out);
	const char *want2[] = {tok, "tokenizer.ggml.tokens: expected 64 tokens", "found 61"};
	must_contain(out, want2, 3);
	rt_model_free(m);
}

/* ---- the finite scan at load --------------------------------------------- */

static uint32_t pick_mixed(const char *name, int layer)
{
	(void)layer;
	return strstr(name, "attn_q") ? GGML_T_Q8_0 : strstr(name, "ffn_gate") ? GGML_T_Q4_K : GGML_T_F32;
}

/* path loads; a copy with v (n bytes) at byte off of tensor's data is
 * refused by the host loader naming the copy, the tensor and what. */
static void expect_scan_refuses(const char *path, const char *tensor, uint64_t off, const void *v,
                                size_t n, const char *what)
{
	sw_err err = {0};
	rt_model *m = rt_model_load(path, &err);
	if (!m)
		fail_msg("%s before the change: %s", path, err.msg);
	rt_model_free(m);
	char bad[400];
	snprintf(bad, sizeof(bad), "%s.bad.gguf", path);
	file_copy(path, bad);
	file_poke(bad, gguf_at(bad, tensor) + off, v, n);
	assert_null(rt_model_load(bad, &err));
	print_message("  %s\n", err.msg);
	const char *want[] = {bad, tensor, what, "expected finite values"};
	must_contain(err.msg, want, 4);
}

static void test_scan_gguf(void **state)
{
	char f32[300], f16[300], mixed[300];
	snprintf(f32, sizeof(f32), "%s/scan_f32.gguf", g_dir);
	snprintf(f16, sizeof(f16), "%s/scan_f16.gguf", g_dir);
	snprintf(mixed, sizeof(mixed), "%s/scan_mixed.gguf", g_dir);
	sw_err err = {0};
	/* rows of whole 256-element blocks, for Q4_K */
	rt_model *m = tu_tiny_llama(64, 256, 1, 4, 2, 512, 5);
	assert_non_null(m);
	if (rt_llama_save_gguf(m, f32, GGML_T_F32, &err) || rt_llama_save_gguf(m, f16, GGML_T_F16, &err))
		fail_msg("%s", err.msg);
	kq_write_mixed(f32, mixed, pick_mixed);
	rt_model_free(m);

	const float nan = NAN;
	expect_scan_refuses(f32, "blk.0.attn_norm.weight", 5 * 4, &nan, 4, "element 5 is nan");
	const uint16_t inf16 = 0x7c00, nan16 = 0x7e00;
	expect_scan_refuses(f16, "blk.0.ffn_up.weight", 77 * 2, &inf16, 2, "element 77 is inf");
	/* Q8_0 {d; qs[32]}: block 3's d */
	expect_scan_refuses(mixed, "blk.0.attn_q.weight", 3 * 34, &nan16, 2,
	                    "block 3 (elements 96..127): scale d is nan");
	/* Q4_K {d, dmin; scales[12]; qs[128]}: block 2's dmin */
	expect_scan_refuses(mixed, "blk.0.ffn_gate.weight", 2 * 144 + 2, &nan16, 2,
	                    "block 2 (elements 512..767): scale dmin is nan");

	/* the engine's GGUF weight source (the deployable runtime's): refused
	 * when bind reads the tensor, as floats or as the file's blocks */
	char bad[400];
	snprintf(bad, sizeof(bad), "%s.bad.gguf", mixed);
	file_copy(mixed, bad);
	file_poke(bad, gguf_at(bad, "blk.0.attn_q.weight") + 3 * 34, &nan16, 2);
	rt_engine_weights w;
	rt_engine_gguf *g = rt_engine_gguf_open(bad, &w, &err);
	if (!g)
		fail_msg("%s", err.msg);
	const float *data;
	size_t n;
	assert_int_equal(w.get(w.user, "wk", 0, &data, &n, &err), 0); /* its neighbour is fine */
	assert_int_equal(w.get(w.user, "wq", 0, &data, &n, &err), SW_EINVAL);
	const char *want[] = {bad, "blk.0.attn_q.weight", "scale d is nan"};
	must_contain(err.msg, want, 3);
	const void *raw;
	int type;
	assert_int_equal(w.get_raw(w.user, "wq", 0, &raw, &n, &type, &err), SW_EINVAL);
	must_contain(err.msg, want, 3);
	rt_engine_gguf_close(g);
}

static void test_scan_heads(void **state)
{
	sw_err err = {0};
	rt_model *m = tu_tiny_llama(64, 32, 4, 2, 1, 48, 11);
	assert_non_null(m);
	char dir[300], path[400];
	/* an EAGLE-3 head (the public format) with an inf in its LM head */
	snprintf(dir, sizeof(dir), "%s/e3head", g_dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	te3_opts o = te3_default(m);
	assert_int_equal(te3_write(dir, m, &o, 4), 0);
	rt_eagle3 *h = rt_eagle3_load(dir, m, &err);
	if (!h)
		fail_msg("%s", err.msg);
	rt_eagle3_free(h);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	const float inf = INFINITY;
	file_poke(path, st_at(path, "lm_head.weight") + 10 * 4, &inf, 4);
	assert_null(rt_eagle3_load(dir, m, &err));
	print_message("  %s\n", err.msg);
	const char *want[] = {path, "tensor lm_head.weight", "element 10 is inf"};
	must_contain(err.msg, want, 3);
	te3_rmdir(dir);

	/* a block drafter with a NaN weight */
	char bdir[64];
	tbu_tmpdir(bdir);
	tbu_opts bo = tbu_default(m);
	assert_int_equal(tbu_write(bdir, m, &bo, 2), 0);
	rt_block_drafter *bd = rt_block_drafter_load(bdir, m, &err);
	if (!bd)
		fail_msg("%s", err.msg);
	rt_block_drafter_free(bd);
	snprintf(path, sizeof(path), "%s/model.safetensors", bdir);
	const float nan = -NAN;
	file_poke(path, st_at(path, "layers.0.wq") + 3 * 4, &nan, 4);
	assert_null(rt_block_drafter_load(bdir, m, &err));
	print_message("  %s\n", err.msg);
	const char *want2[] = {path, "tensor layers.0.wq", "element 3 is"};
	must_contain(err.msg, want2, 3);
	tbu_rmdir(bdir);
	rt_model_free(m);
}

/* ---- non-finite logits at run time --------------------------------------- */

/* A fresh context of m: the prompt, then one token; the second eval's rc. */
static int two_evals(const rt_model *m, float *logits, sw_err *err)
{
	rt_ctx *c = rt_ctx_new(m, 32, 8, err);
	assert_non_null(c);
	const int32_t tok[3] = {1, 2, 3}, pos[3] = {0, 1, 2}, t4 = 4, p4 = 3;
	int rc = rt_ctx_eval(c, tok, pos, 3, NULL, logits, NULL, err);
	if (!rc) {
		int keep[3] = {0, 1, 2};
		rt_ctx_commit(c, keep, 3);
		rc = rt_ctx_eval(c, &t4, &p4, 1, NULL, logits, NULL, err);
	}
	rt_ctx_free(c);
	return rc;
}

static void test_logits_host(void **state)
{
	enum { V = 64, D = 32 };
	sw_err err = {0};
	float *logits = malloc(sizeof(*logits) * 3 * V);
	rt_model *m = tu_tiny_llama(V, D, 2, 2, 1, 48, 9);
	assert_non_null(m);
	assert_int_equal(two_evals(m, logits, &err), 0);
	/* a NaN in the LM head after load: token 9's logit in every row */
	m->w.lm_head[9 * D + 4] = NAN;
	assert_int_equal(two_evals(m, logits, &err), SW_EINVAL);
	print_message("  %s\n", err.msg);
	const char *want[] = {"tiny-llama", "non-finite logit nan", "token id 9", "row 0", "op lm_head",
	                      "step 1", "position 0"};
	must_contain(err.msg, want, 7);
	m->w.lm_head[9 * D + 4] = 0.5f;

	/* finite weights whose logits overflow: out_norm 1e30, token 11's row
	 * 3e38; saved and loaded through the scan (the weights pass it) */
	for (int i = 0; i < D; i++) {
		m->w.out_norm[i] = 1e30f;
		m->w.lm_head[11 * D + i] = 3e38f;
	}
	char path[300];
	snprintf(path, sizeof(path), "%s/overflow.gguf", g_dir);
	assert_int_equal(rt_llama_save_gguf(m, path, GGML_T_F32, &err), 0);
	rt_model *l = rt_model_load(path, &err);
	if (!l)
		fail_msg("%s", err.msg);
	assert_int_equal(two_evals(l, logits, &err), SW_EINVAL);
	print_message("  %s\n", err.msg);
	const char *want2[] = {path, "token id 11", "op lm_head", "step 1"};
	must_contain(err.msg, want2, 4);
	rt_model_free(l);
	rt_model_free(m);

	/* an EAGLE-3 head's forward: a NaN put into its LM head after load */
	m = tu_tiny_llama(V, D, 4, 2, 1, 48, 12);
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/e3run", g_dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	te3_opts o = te3_default(m);
	assert_int_equal(te3_write(dir, m, &o, 6), 0);
	rt_eagle3 *h = rt_eagle3_load(dir, m, &err);
	if (!h)
		fail_msg("%s", err.msg);
	rt_e3_state *st = rt_e3_state_new(h, 16, 4, &err);
	assert_non_null(st);
	float feat[2 * 3 * D], hid[D], lg[V];
	for (int i = 0; i < 2 * 3 * D; i++)
		feat[i] = (float)((i % 7) - 3) * 0.25f;
	const int32_t tok[2] = {5, 6};
	assert_int_equal(rt_e3_commit(st, feat, tok, 1, hid, lg, &err), 0);
	((float *)h->lm_head)[2 * D + 1] = NAN; /* the arena behind the head's const view */
	assert_int_equal(rt_e3_commit(st, feat + 3 * D, tok + 1, 1, hid, lg, &err), SW_EINVAL);
	print_message("  %s\n", err.msg);
	const char *want3[] = {dir, "token id 2", "op EAGLE-3 lm_head", "step 2", "position 1"};
	must_contain(err.msg, want3, 5);
	rt_e3_state_free(st);
	rt_eagle3_free(h);
	te3_rmdir(dir);
	rt_model_free(m);
	free(logits);
}

/* A built engine on the host backend: a NaN put into its LM head buffer
 * (fp16, on the device) after bind stops generation at iteration 1. */
static void test_logits_engine(void **state)
{
	char mpath[300], dir[300], spec[4096];
	rt_model *m = eu_tiny_model(g_dir, mpath, sizeof(mpath));
	snprintf(dir, sizeof(dir), "%s/eng_nan", g_dir);
	eu_tiny_spec(spec, sizeof(spec), mpath, "ngram:1:3", "chain:4", "greedy", "topk", 0, "fp16", NULL);
	eu_build(spec, dir, eu_cache_dir(), false);
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, eu_cache_dir());
	rt_engine *e = eu_bind(dir, d, m, 1);
	enum { P = 20, N = 8 };
	int32_t prompt[P], out[64];
	rt_engine_stats st;
	eu_tiny_prompt(prompt, P);
	assert_int_equal(eu_generate(e, "before", prompt, P, N, false, out, &st), N);
	rt_dptr lm = rt_engine_buf_addr(e, "target.lm_head");
	assert_true(lm != 0);
	const uint16_t nan16 = 0x7e00;
	sw_err err = {0};
	assert_int_equal(d->ops->upload(d, lm + (rt_dptr)(9 * m->cfg.dim * 2), &nan16, 2, &err), 0);
	for (int eager = 0; eager < 2; eager++) {
		rt_engine_run r = {.prompt = prompt, .n_prompt = P, .max_new = N, .eos = -1,
		                   .eager = eager};
		assert_true(rt_engine_generate(e, &r, out, &st, &err) < 0);
		print_message("  %s: %s\n", eager ? "eager" : "graph", err.msg);
		const char *want[] = {dir, "iteration 1", "non-finite logit nan", "buffer logits",
		                      "token id 9", "op lm_head (phase verify)"};
		must_contain(err.msg, want, 6);
	}
	rt_engine_free(e);
	rt_dev_free(d);
	rt_model_free(m);
}

static int setup(void **state)
{
	eu_work_dir(g_dir, sizeof(g_dir), "test_model_check");
	return 0;
}

static int teardown(void **state)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	return system(cmd) ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_short_token_table),
		cmocka_unit_test(test_scan_gguf),
		cmocka_unit_test(test_scan_heads),
		cmocka_unit_test(test_logits_host),
		cmocka_unit_test(test_logits_engine),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
