/* The fused layer against the separate launches it replaces (issue 37):
 * each tiny engine is built twice from one spec, as planned ("fuse" on:
 * q/k/v and gate/up one GEMM each over weights concatenated at bind,
 * rmsnorm_cast, qkv_rope, swiglu_cast) and with "fuse": false (a launch
 * an op: norm, cast, wq, wk, wv, the family's rope ops, kv_store, q's
 * cast, w_gate, w_up, swiglu, its cast), and both run on the host backend
 * (native: its host ops; emulate: the rendered kernels in the emulator) and
 * on the cuda backend over the fake driver (its cuBLASLt summing in the
 * host's fp32 order, the rendered kernels in the emulator, graph replay).
 * The arithmetic is the same (a concatenated GEMM's column is the same dot
 * product; the fused kernels' steps are the unfused ones', bit for bit,
 * tests/test_kern_fused.c), so on each backend the two engines emit the same
 * tokens in the same iterations, greedy and sampled (the same Philox
 * draws over the same probabilities). Also: the plans differ as said (the
 * fused one has wqkv and w_gate_up and fewer per-layer launches; the
 * unfused one none of them), and both bind to the same weights digest. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/fileio.h"
#include "core/json.h"
#include "device/dev_cuda_api.h"
#include "device/device.h"
#include "engine/engine.h"
#include "engine_util.h"
#include "fake_cuda.h"
#include "formats/gguf.h"
#include "gen/jit/emu_build.h"
#include "kern_util.h"
#include "kquant.h"
#include "model/model_gguf.h"
#include "testutil.h"

static char g_dir[256], g_cache[300];
static rt_model *g_tiny, *g_quant;
static char g_tiny_path[300], g_quant_path[300];

typedef struct fcase {
	const rt_model *m;  /* the target (NULL: the tiny f32 one) */
	const char *path;   /* its file */
	const char *name, *draft, *tree, *verify, *expand;
	double temp;
	const char *dtype, *extra;
	int n_prompt, max_new;
	uint64_t seed;
} fcase;

/* ---- the plans ---- */

static json_value *read_json(const char *path)
{
	sw_err err = {0};
	size_t n = 0;
	char *text = sw_read_file(path, SW_CAP_IMAGE, &n);
	if (!text)
		fail_msg("cannot read %s", path);
	json_value *root = json_parse(text, n, path, &err);
	free(text);
	if (!root)
		fail_msg("%s", err.msg);
	return root;
}

/* The launches of phase `phase`'s per-layer ops of the target (each op
 * its repeat: one launch a layer of its run), and whether an op named
 * `name` is among them. */
static int layer_launches(const json_value *root, const char *phase, const char *name,
                          bool *has)
{
	const json_value *ph = json_get(root, "phases");
	assert_non_null(ph);
	*has = false;
	for (size_t i = 0; i < ph->n; i++) {
		const json_value *pn = json_get(ph->items[i], "name");
		if (!pn || strcmp(pn->str, phase))
			continue;
		const json_value *ops = json_get(ph->items[i], "ops");
		assert_non_null(ops);
		int n = 0;
		for (size_t j = 0; j < ops->n; j++) {
			const json_value *l = json_get(ops->items[j], "layers");
			const json_value *on = json_get(ops->items[j], "name");
			const json_value *r = json_get(ops->items[j], "repeat");
			if (!l || l->type != JSON_STRING || strcmp(l->str, "target"))
				continue;
			assert_true(r && r->type == JSON_NUMBER);
			n += (int)r->number;
			*has |= on && !strcmp(on->str, name);
		}
		return n;
	}
	fail_msg("no phase %s", phase);
	return -1;
}

/* The plans say what they are: fused (wqkv, w_gate_up) with want_f
 * launches a layer, unfused (wq, w_gate) with want_u, in prefill and
 * verify (the tiny targets have 3 layers). */
static void check_plans(const char *fused, const char *unfused, int want_f, int want_u)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/engine.json", fused);
	json_value *f = read_json(path);
	snprintf(path, sizeof(path), "%s/engine.json", unfused);
	json_value *u = read_json(path);
	static const char *const phases[] = {"prefill", "verify"};
	for (int p = 0; p < 2; p++) {
		bool a, b, c, d;
		const int nf = layer_launches(f, phases[p], "wqkv", &a);
		(void)layer_launches(f, phases[p], "w_gate", &b);
		const int nu = layer_launches(u, phases[p], "wqkv", &c);
		(void)layer_launches(u, phases[p], "w_gate", &d);
		print_message("  %s: %d launches over the 3 layers fused, %d unfused\n", phases[p], nf,
		              nu);
		if (!a || b || c || !d || nf != 3 * want_f || nu != 3 * want_u)
			fail_msg("%s: fused %d launches a layer (wqkv %d, w_gate %d), unfused %d (wqkv %d, "
			         "w_gate %d); expected 3 x %d with wqkv and 3 x %d with w_gate", phases[p], nf,
			         a, b, nu, c, d, want_f, want_u);
	}
	/* the same weights: the digest is the unfused engine's (core/wparts.h) */
	const json_value *sf = json_get(json_get(f, "spec"), "target");
	const json_value *su = json_get(json_get(u, "spec"), "target");
	assert_non_null(sf);
	assert_non_null(su);
	const json_value *df = json_get(sf, "digest"), *du = json_get(su, "digest");
	assert_non_null(df);
	assert_non_null(du);
	assert_string_equal(df->str, du->str);
	json_free(f);
	json_free(u);
}

/* ---- devices ---- */

static rt_dev *open_host(int mode)
{
	return eu_open_host(mode, g_cache);
}

/* The engine's kernels.cu as an emulator module, every entry engine.json
 * lists registered with a fresh fake (sm_90, cuBLASLt in the host's order),
 * and the cuda backend over it; *lib: the module (dlclose after). */
static rt_dev *open_fake(const char *dir, void **lib)
{
	char path[600], kdir[600], sym[260];
	sw_err err = {0};
	snprintf(path, sizeof(path), "%s/kernels.cu", dir);
	char *src = sw_read_file(path, SW_CAP_IMAGE, NULL);
	if (!src)
		fail_msg("cannot read %s", path);
	snprintf(kdir, sizeof(kdir), "%s/kernels", src_root());
	if (gen_emu_module_build(src, "engine-kernels", kdir, g_cache, lib, &err))
		fail_msg("%s: %s", path, err.msg);
	free(src);
	fake_cuda_cfg cfg = {.n_devices = 1, .cc_major = 9, .cc_minor = 0, .name = "Fake H100",
	                     .gemm_blas = true};
	fake_cuda_reset(&cfg);
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	json_value *root = read_json(path);
	const json_value *ks = json_get(root, "kernels");
	assert_non_null(ks);
	for (size_t i = 0; i < ks->n; i++) {
		const json_value *en = json_get(ks->items[i], "entries");
		assert_non_null(en);
		for (size_t j = 0; j < en->n; j++) {
			snprintf(sym, sizeof(sym), "%s_emu", en->items[j]->str);
			const emu_kernel *k = dlsym(*lib, sym);
			if (!k)
				fail_msg("%s: kernel entry %s has no %s", path, en->items[j]->str, sym);
			fake_cuda_register(en->items[j]->str, k);
		}
	}
	json_free(root);
	rt_cu_api cu;
	rt_lt_api lt;
	fake_cuda_api(&cu, &lt);
	rt_cuda_cfg cc = {.ordinal = 0};
	rt_dev *d = rt_dev_cuda_new_with_api(&cu, &lt, &cc, &err);
	if (!d)
		fail_msg("cuda (fake driver): %s (fake: %s)", err.msg, fake_cuda_last_error());
	return d;
}

/* ---- the runs ---- */

/* dir's engine on backend b (0 host native, 1 host emulate, 2 cuda over
 * the fake): tokens into out, statistics into st. */
static int run_on(const char *dir, int b, const fcase *c, const int32_t *prompt, int32_t *out,
                  rt_engine_stats *st)
{
	static const char *const names[] = {"host", "host-emulate", "cuda(fake)"};
	void *lib = NULL;
	rt_dev *d = b == 2 ? open_fake(dir, &lib) : open_host(b ? RT_HOST_EMULATE : RT_HOST_NATIVE);
	rt_engine *e = eu_bind(dir, d, c->m ? c->m : g_tiny, c->seed);
	char what[200];
	snprintf(what, sizeof(what), "%s %s %s", c->name, strrchr(dir, '/') + 1, names[b]);
	const int n = eu_generate(e, what, prompt, c->n_prompt, c->max_new, false, out, st);
	rt_engine_free(e);
	rt_dev_free(d);
	if (lib)
		dlclose(lib);
	if (b == 2)
		assert_int_equal(fake_cuda_live_allocs(), 0);
	return n;
}

static void run_case(const fcase *c, int want_f, int want_u)
{
	char spec[4096], fused[400], unfused[400], extra[300];
	int32_t prompt[64], tf[256], tu[256];
	assert_true(c->n_prompt <= 64 && c->max_new <= 256);
	snprintf(fused, sizeof(fused), "%s/%s-fused", g_dir, c->name);
	snprintf(unfused, sizeof(unfused), "%s/%s-unfused", g_dir, c->name);
	const char *mp = c->path ? c->path : g_tiny_path;
	eu_tiny_spec(spec, sizeof(spec), mp, c->draft, c->tree, c->verify, c->expand, c->temp,
	             c->dtype, c->extra);
	eu_build(spec, fused, NULL, false);
	snprintf(extra, sizeof(extra), "%s%s\"fuse\": false", c->extra ? c->extra : "",
	         c->extra ? ", " : "");
	eu_tiny_spec(spec, sizeof(spec), mp, c->draft, c->tree, c->verify, c->expand, c->temp,
	             c->dtype, extra);
	eu_build(spec, unfused, NULL, false);
	check_plans(fused, unfused, want_f, want_u);
	/* the cuda backend loads a module image: a stand-in PTX (the fake
	 * resolves functions from its registry) */
	static const char ptx[] = "// test_engine_fuse: stand-in for NVRTC's PTX (fake driver)\n"
	                          ".version 8.3\n.target sm_80\n.address_size 64\n";
	const char *dirs[2] = {fused, unfused};
	for (int i = 0; i < 2; i++) {
		char path[500];
		snprintf(path, sizeof(path), "%s/kernels.ptx", dirs[i]);
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fputs(ptx, f);
		fclose(f);
		eu_list_file(dirs[i], "kernels.ptx");
	}
	eu_tiny_prompt(prompt, c->n_prompt);
	for (int b = 0; b < 3; b++) {
		rt_engine_stats sf, su;
		const int nf = run_on(fused, b, c, prompt, tf, &sf);
		const int nu = run_on(unfused, b, c, prompt, tu, &su);
		assert_int_equal(nf, c->max_new);
		assert_int_equal(nu, c->max_new);
		for (int i = 0; i < nf; i++)
			if (tf[i] != tu[i])
				fail_msg("%s, backend %d: token %d: fused %d, unfused %d", c->name, b, i, tf[i],
				         tu[i]);
		if (sf.n_iters != su.n_iters)
			fail_msg("%s, backend %d: %d iterations fused, %d unfused", c->name, b, sf.n_iters,
			         su.n_iters);
	}
}

/* Prompt lookup, chain:4, greedy, bf16 (a prompt of two chunks and a tail);
 * the draft-length controller on a fixed cost table (not the host's timing
 * of each engine's own verify). */
static void test_ngram_chain(void **state)
{
	(void)state;
	const fcase c = {NULL, NULL, "ngram_chain", "ngram:1:3", "chain:4", "greedy", "topk", 0, "bf16",
	                 "\"control\": {\"cost\": \"flat\"}", 37, 24, 1};
	run_case(&c, 10, 19);
}

/* Layer-skip EAGLE-25, greedy, fp16: the draft runs the target's fused
 * layers (one weight buffer) through its own forward. */
static void test_eagle25_greedy(void **state)
{
	(void)state;
	const fcase c = {NULL, NULL, "eagle25", "layerskip:1", "eagle25", "greedy", "topk", 0, "fp16", NULL, 19,
	                 24, 1};
	run_case(&c, 10, 19);
}

/* Sampled: binary tree drawn without replacement + RRSw at T = 0.8, fp16,
 * the same seed: a last-bit difference in a probability would move a
 * Philox draw's token. */
static void test_sampled(void **state)
{
	(void)state;
	const fcase c = {NULL, NULL, "biseq8_rrsw", "layerskip:0-1", "biseq8", "rrsw", "sample-wor", 0.8, "fp16",
	                 NULL, 19, 32, 5};
	run_case(&c, 10, 19);
}

/* gguf_a8 (each GEMM weight in its file's GGUF type, int8 GEMM inputs):
 * q/k/v one type a layer and gate/up too (so both fuse), the types
 * changing over the layers; the fused norm and SwiGLU also write the int8
 * blocks quant_a8 wrote before w_qkv, w_gate_up and w_down. */
static uint32_t pick(const char *name, int l)
{
	if (strstr(name, "norm"))
		return GGML_T_F32;
	if (!strcmp(name, "token_embd.weight") || !strcmp(name, "output.weight"))
		return GGML_T_Q6_K;
	if (strstr(name, "attn_q") || strstr(name, "attn_k") || strstr(name, "attn_v"))
		return l == 1 ? GGML_T_Q8_0 : GGML_T_Q4_K;
	if (strstr(name, "ffn_gate") || strstr(name, "ffn_up"))
		return l == 0 ? GGML_T_Q4_0 : GGML_T_Q4_K;
	if (strstr(name, "attn_output"))
		return GGML_T_Q4_1;
	return GGML_T_Q6_K;
}

static void test_gguf_a8(void **state)
{
	(void)state;
	/* the controller on a fixed cost table: the host would time its own
	 * verify at each row count, and the two engines' times differ */
	const fcase c = {g_quant, g_quant_path, "gguf_a8", "ngram:1:3", "chain:4", "greedy", "topk",
	                 0, "gguf_a8", "\"control\": {\"cost\": \"flat\"}", 37, 24, 1};
	run_case(&c, 11, 23);
}

static int setup(void **state)
{
	(void)state;
	eu_work_dir(g_dir, sizeof(g_dir), "test_engine_fuse");
	snprintf(g_cache, sizeof(g_cache), "%s/gen/emu",
	         getenv("BUILD") && *getenv("BUILD") ? getenv("BUILD") : "build");
	g_tiny = eu_tiny_model(g_dir, g_tiny_path, sizeof(g_tiny_path));
	if (!g_tiny)
		return -1;
	/* the quantized target: 3 layers, dim 256, ffn 512 (whole K-quant
	 * blocks), from an f32 file */
	sw_err err = {0};
	char f32[300];
	rt_model *t = tu_tiny_llama(EU_TINY_VOCAB, 256, 3, 4, 2, 512, 11);
	if (!t)
		return -1;
	snprintf(f32, sizeof(f32), "%s/q_f32.gguf", g_dir);
	snprintf(g_quant_path, sizeof(g_quant_path), "%s/q_mixed.gguf", g_dir);
	const int rc = rt_llama_save_gguf(t, f32, GGML_T_F32, &err);
	rt_model_free(t);
	if (rc) {
		print_message("%s\n", err.msg);
		return -1;
	}
	kq_write_mixed(f32, g_quant_path, pick);
	if (!(g_quant = rt_model_load(g_quant_path, &err)))
		print_message("%s\n", err.msg);
	return g_quant ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[400];
	rt_model_free(g_tiny);
	rt_model_free(g_quant);
	fake_cuda_reset(NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
	return system(cmd) ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ngram_chain),
		cmocka_unit_test(test_eagle25_greedy),
		cmocka_unit_test(test_sampled),
		cmocka_unit_test(test_gguf_a8),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
