/* gguf_a8 engines on the cuda backend (issue 38): the GEMM weights in
 * their files' own GGUF types, repacked at bind into the gemv_gguf
 * kernels' planes, run by the generated kernels through the fake driver
 * (tests/util/fake_cuda.c runs them in the emulator), against:
 *  - host-emulate (the same generated kernels on the host backend): the
 *    same tokens, every one (the same kernels, the same float operations);
 *  - the host backend's native gguf_a8 engine (the file's blocks, its own
 *    int8 GEMMs: the same integer sums and scale products, the fp32 sums
 *    in another order), and the host fp32 decoder on the file's weights:
 *    identical, or the first divergence at a near-tie of the fp32
 *    reference (test_engine.c's rule: int8 GEMM inputs 2^-8 and fp16
 *    2^-11, 8 u max|logit|), reported with its margin;
 *  - target-only decoding on the same cuda engine: the same tokens
 *    (speculation does not change greedy output; the GEMV's rows never
 *    depend on the other rows);
 *  - bind's repack: every GGUF weight repacked and checked (the load
 *    note), and a Q4_0 engine whose attn_q planes are overwritten with the
 *    file's blocks giving other tokens: the kernels read the planes;
 *  - the manifest's extent proof of quant_a8 and gemv_gguf: a layer in
 *    another type than its kernel's, more rows than the weight, a short
 *    grid, rows not whole int8 blocks, each refused naming it;
 *  - the blocks' source of an engine bound to a loaded model
 *    (rt_engine_gguf_open_raw): the file's types and byte counts, values
 *    refused, a file of another family and a tensor of another shape
 *    refused naming them.
 * Models: a tiny Llama whose GEMM weights mix Q8_0, Q4_0, Q4_1, Q4_K and
 * Q6_K within fields, a Q6_K LM head (tests/util/kquant.c, as
 * test_engine_gguf.c), n-gram drafted, layer-skip drafted (the draft's
 * layers through its map, of two types) and with an EAGLE-3 head (its GEMMs
 * Q8_0, quantized at upload as the host's engines do), and SmolLM2-135M
 * Q4_1 (Q8_0 tied LM head) when
 * SW_MODEL is present (skipped, saying so, when not). Gemma 3: a tiny
 * Gemma-shaped file as Gemma 3 270M's Q4_K_M is typed (tu_tiny_gemma_gguf:
 * rows of 320 in Q5_0 and Q8_0, Q4_K and Q6_K where rows are whole
 * super-blocks, a Q8_0 tied head; a sliding window that cuts under the
 * prompt; the embedding times sqrt(dim), (1 + w) norms, q/k norms, the
 * sandwich norms, GeGLU, local and global RoPE tables), n-gram and
 * layer-skip drafted; and the real Gemma 3 270M Q4_K_M
 * (models/cache/gemma-3-270m-q4_k_m.gguf, make model-gemma; skipped,
 * saying so, when absent). */
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/fileio.h"
#include "core/json.h"
#include "core/timing.h"
#include "core/wformat.h"
#include "engine/manifest.h"
#include "engine/weights_gguf.h"
#include "device/dev_cuda_api.h"
#include "device/host_ops.h"
#include "e3_util.h"
#include "eagle3_util.h"
#include "engine_util.h"
#include "fake_cuda.h"
#include "formats/gguf.h"
#include "formats/tokenizer.h"
#include "gen/jit/emu_build.h"
#include "kern_util.h"
#include "kquant.h"
#include "model/model_gguf.h"
#include "testutil.h"

static char g_dir[256];

/* ---- the fake's kernels: every entry of the engine's kernels.cu ---- */

#define MAX_ENTRIES 512

typedef struct engine_kernels {
	void *lib;
	int n;
	char entry[MAX_ENTRIES][208];
	const emu_kernel *k[MAX_ENTRIES];
} engine_kernels;

static void engine_kernels_load(const char *dir, engine_kernels *ek)
{
	char path[600], kdir[600], sym[260];
	sw_err err = {0};
	memset(ek, 0, sizeof(*ek));
	snprintf(path, sizeof(path), "%s/kernels.cu", dir);
	char *src = sw_read_file(path, SW_CAP_IMAGE, NULL);
	if (!src)
		fail_msg("cannot read %s", path);
	snprintf(kdir, sizeof(kdir), "%s/kernels", src_root());
	/* the host backend's key: both load the same cached module */
	if (gen_emu_module_build(src, "engine-kernels", kdir, eu_cache_dir(), &ek->lib, &err))
		fail_msg("%s: %s", path, err.msg);
	free(src);
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	size_t n = 0;
	char *text = sw_read_file(path, SW_CAP_IMAGE, &n);
	if (!text)
		fail_msg("cannot read %s", path);
	json_value *root = json_parse(text, n, path, &err);
	free(text);
	if (!root)
		fail_msg("%s", err.msg);
	const json_value *ks = json_get(root, "kernels");
	assert_non_null(ks);
	for (size_t i = 0; i < ks->n; i++) {
		const json_value *en = json_get(ks->items[i], "entries");
		assert_non_null(en);
		for (size_t j = 0; j < en->n; j++) {
			assert_true(ek->n < MAX_ENTRIES);
			snprintf(ek->entry[ek->n], sizeof(ek->entry[0]), "%s", en->items[j]->str);
			snprintf(sym, sizeof(sym), "%s_emu", en->items[j]->str);
			if (!(ek->k[ek->n] = dlsym(ek->lib, sym)))
				fail_msg("%s: kernel entry %s has no %s in kernels.cu", path, en->items[j]->str,
				         sym);
			ek->n++;
		}
	}
	json_free(root);
}

/* The cuda backend over a fresh fake sm_90 device with ek's kernels; the
 * engine has no cuBLASLt GEMM left (gguf_a8: every GEMM a gemv_gguf). */
static rt_dev *open_fake(const engine_kernels *ek)
{
	rt_cu_api cu;
	rt_lt_api lt;
	sw_err err = {0};
	fake_cuda_cfg cfg = {.n_devices = 1, .cc_major = 9, .cc_minor = 0, .name = "Fake H100",
	                     .gemm_blas = true};
	fake_cuda_reset(&cfg);
	fake_cuda_api(&cu, &lt);
	for (int i = 0; i < ek->n; i++)
		fake_cuda_register(ek->entry[i], ek->k[i]);
	rt_cuda_cfg cc = {.ordinal = 0};
	rt_dev *d = rt_dev_cuda_new_with_api(&cu, &lt, &cc, &err);
	if (!d)
		fail_msg("cuda (fake driver): %s (fake: %s)", err.msg, fake_cuda_last_error());
	return d;
}

/* Builds spec into dir without NVRTC and gives it the stand-in PTX the
 * fake loads (it resolves the entries from its registry). */
static void build(const char *spec, const char *dir)
{
	char path[600];
	eu_build(spec, dir, eu_cache_dir(), false);
	snprintf(path, sizeof(path), "%s/kernels.ptx", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("// test_engine_gguf_cuda: stand-in for NVRTC's PTX (fake driver)\n"
	      ".version 8.3\n.target sm_80\n.address_size 64\n", f);
	fclose(f);
	eu_list_file(dir, "kernels.ptx");
}

/* Every GEMM of the engine a gemv_gguf kernel (none left for cuBLASLt),
 * and the kernel ops of each GGUF type it holds counted into by_type. */
static void check_no_gemm(const rt_engine *e, int by_type[32])
{
	for (int i = 0; i < e->n_ops; i++) {
		const rt_op *o = &e->ops[i];
		if (o->kind == RT_OP_GEMM)
			fail_msg("op %s is a cuBLASLt GEMM on cuda (dtype %d)", o->name, o->dtype);
		if (o->kind == RT_OP_KERNEL && !strcmp(o->op, "gemv_gguf"))
			for (int p = 0; p < o->kinfo->n_params; p++)
				if (!strcmp(o->kinfo->params[p].name, "WTYPE"))
					by_type[o->kinfo->params[p].i & 31]++;
	}
}

typedef struct gcase {
	const char *name;
	const rt_model *m;
	const char *spec;
	const int32_t *prompt;
	int P, N;
	bool emulate;   /* also host-emulate (slow on a real model) */
	bool eager;     /* also cuda eager */
	double bound;   /* the near-tie bound on the fp32 reference's margin */
	rt_engine_stats *cu_st; /* NULL, or the cuda graph run's statistics */
	int window;     /* > 0: some kernel's WINDOW is this (a sliding window that cuts) */
	int embd;       /* the embedding table's GGUF type (its gather embedding_gguf), or
	                 * -1: a 16-bit table (embedding16: an EAGLE-3 head reads its rows) */
} gcase;

/* Whether some op's kernel has constant WINDOW = w. */
static bool has_window(const rt_engine *e, int w)
{
	for (int i = 0; i < e->n_ops; i++)
		for (int p = 0; e->ops[i].kinfo && p < e->ops[i].kinfo->n_params; p++)
			if (!strcmp(e->ops[i].kinfo->params[p].name, "WINDOW") &&
			    e->ops[i].kinfo->params[p].i == w)
				return true;
	return false;
}

/* The embedding (issue 38): every gather of the engine (the target's, a
 * layer-skip draft's) reads target.tok_embd, in the file's type c->embd by
 * embedding_gguf (its WTYPE) or, c->embd -1, a 16-bit table by
 * embedding16; a tied head's GEMV reads that same buffer (no
 * target.lm_head) and no 16-bit copy of the table is left in the arena. */
static void check_embedding(const rt_engine *e, const gcase *c)
{
	const rt_manifest *man = e->man;
	const rt_config *cfg = &c->m->cfg;
	const int tb = rt_manifest_buf_find(man, "target.tok_embd");
	assert_true(tb >= 0);
	const rt_engine_buf *b = &man->bufs[tb];
	const rt_dptr table = e->arena + (rt_dptr)b->offset;
	const char *want_dt = c->embd >= 0 ? sw_wformat_gemm_name(c->embd) : NULL;
	if (c->embd >= 0 ? strcmp(b->dtype, want_dt) : strcmp(b->dtype, "fp16"))
		fail_msg("%s: target.tok_embd is %s, expected %s", c->name, b->dtype,
		         want_dt ? want_dt : "fp16");
	int gathers = 0, heads = 0;
	for (int i = 0; i < e->n_ops; i++) {
		const rt_op *o = &e->ops[i];
		if (!strcmp(o->name, "embedding")) {
			gathers++;
			if (strcmp(o->op, c->embd >= 0 ? "embedding_gguf" : "embedding16"))
				fail_msg("%s: op embedding is %s", c->name, o->op);
			if (o->argval[1] != table)
				fail_msg("%s: op embedding reads another table than target.tok_embd", c->name);
			if (c->embd >= 0 && rt_op_param_i(o, "WTYPE", -1) != c->embd)
				fail_msg("%s: embedding_gguf WTYPE %lld, expected %d", c->name,
				         rt_op_param_i(o, "WTYPE", -1), c->embd);
		}
		if (!strcmp(o->name, "lm_head") && cfg->tied_embd && c->embd >= 0) {
			heads++;
			if (o->argval[3] != table)
				fail_msg("%s: the tied head's GEMV reads another buffer than the gather's "
				         "table", c->name);
		}
	}
	assert_true(gathers >= 2); /* prefill and the tree's forward at least */
	if (cfg->tied_embd && c->embd >= 0) {
		assert_true(heads >= 1);
		if (rt_manifest_buf_find(man, "target.lm_head") >= 0)
			fail_msg("%s: a tied head in the embedding's type has a buffer of its own", c->name);
	}
	for (int i = 0; i < man->n_bufs && c->embd >= 0; i++) {
		const rt_engine_buf *w = &man->bufs[i];
		if (!strcmp(w->kind, "weight") && w->rank == 2 && w->shape[0] == cfg->vocab &&
		    w->shape[1] == cfg->dim && rt_manifest_wtype(w->dtype) < 0)
			fail_msg("%s: a 16-bit copy of the table is left: buffer %s (%s)", c->name, w->name,
			         w->dtype);
	}
}

/* The fp32 reference's next token after the prompt and prefix[0 .. k)
 * (the engines' shared tokens), and its top-2 margin there: where the
 * free-running reference (eu_reference) took another path before k, its
 * own token k says nothing of this prefix. */
static int forced_reference(const rt_model *m, const int32_t *prompt, int n_prompt,
                            const int32_t *prefix, int k, float *margin)
{
	sw_err err = {0};
	const int V = m->cfg.vocab;
	rt_ctx *c = rt_ctx_new(m, n_prompt + k + 8, n_prompt + 8, &err);
	float *lg = malloc(sizeof(*lg) * (size_t)V);
	assert_non_null(c);
	assert_non_null(lg);
	if (rt_ctx_feed(c, prompt, n_prompt, lg, &err))
		fail_msg("%s", err.msg);
	for (int i = 0; i < k; i++)
		if (rt_ctx_feed(c, &prefix[i], 1, lg, &err))
			fail_msg("%s", err.msg);
	const int top = rt_argmax(lg, V);
	float second = -INFINITY;
	for (int v = 0; v < V; v++)
		if (v != top && lg[v] > second)
			second = lg[v];
	*margin = lg[top] - second;
	free(lg);
	rt_ctx_free(c);
	return top;
}

/* The engine on cuda (graph, then eager and target-only on the same
 * binding), host-emulate and host native; the assertions of the header. */
static void run_gguf(const gcase *c)
{
	char dir[400];
	int32_t cu[256], cu_e[256], em[256], nat[256], ref[256];
	float margin[256];
	double mx = 0;
	rt_engine_stats st;
	assert_true(c->N <= 256);
	snprintf(dir, sizeof(dir), "%s/%s", g_dir, c->name);
	build(c->spec, dir);
	engine_kernels ek;
	engine_kernels_load(dir, &ek);

	double t0 = sw_now_s();
	rt_dev *d = open_fake(&ek);
	rt_engine *e = eu_bind(dir, d, c->m, 1);
	int by_type[32] = {0};
	check_no_gemm(e, by_type);
	check_embedding(e, c);
	if (c->window > 0 && !has_window(e, c->window))
		fail_msg("%s: no kernel attends through WINDOW %d", c->name, c->window);
	char what[160];
	snprintf(what, sizeof(what), "%s cuda (fake), graph", c->name);
	assert_int_equal(eu_generate(e, what, c->prompt, c->P, c->N, false, cu, &st), c->N);
	if (c->cu_st)
		*c->cu_st = st;
	if (c->eager) {
		snprintf(what, sizeof(what), "%s cuda (fake), eager", c->name);
		assert_int_equal(eu_generate(e, what, c->prompt, c->P, c->N, true, cu_e, &st), c->N);
		assert_memory_equal(cu, cu_e, sizeof(*cu) * (size_t)c->N);
	}
	/* speculation = target-only, on this engine */
	snprintf(what, sizeof(what), "%s cuda (fake)", c->name);
	eu_check_target_only(e, what, c->prompt, c->P, c->N, cu, &st);
	rt_engine_free(e);
	rt_dev_free(d);
	print_message("  %s: cuda = %starget-only (%d iterations), %.1f s; gemv_gguf ops "
	              "by type: Q8_0 %d, Q4_0 %d, Q4_1 %d, Q5_0 %d, Q4_K %d, Q6_K %d\n", c->name,
	              c->eager ? "cuda eager = " : "", st.n_iters,
	              sw_now_s() - t0, by_type[SW_WT_Q8_0], by_type[SW_WT_Q4_0], by_type[SW_WT_Q4_1],
	              by_type[SW_WT_Q5_0], by_type[SW_WT_Q4_K], by_type[SW_WT_Q6_K]);

	if (c->emulate) {
		rt_dev *h = eu_open_host(RT_HOST_EMULATE, eu_cache_dir());
		e = eu_bind(dir, h, c->m, 1);
		snprintf(what, sizeof(what), "%s host-emulate", c->name);
		assert_int_equal(eu_generate(e, what, c->prompt, c->P, c->N, false, em, &st), c->N);
		for (int i = 0; i < c->N; i++)
			if (em[i] != cu[i])
				fail_msg("%s: token %d: cuda %d, host-emulate %d (the same kernels)", c->name, i,
				         cu[i], em[i]);
		rt_engine_free(e);
		rt_dev_free(h);
	}

	rt_dev *n = eu_open_host(RT_HOST_NATIVE, eu_cache_dir());
	e = eu_bind(dir, n, c->m, 1);
	snprintf(what, sizeof(what), "%s host native", c->name);
	assert_int_equal(eu_generate(e, what, c->prompt, c->P, c->N, false, nat, &st), c->N);
	rt_engine_free(e);
	rt_dev_free(n);

	eu_reference(c->m, c->prompt, c->P, c->N, ref, margin, &mx);
	const double bound = c->bound * mx;
	int k = 0;
	while (k < c->N && cu[k] == nat[k])
		k++;
	if (k < c->N) {
		/* the two differ only in the fp32 order of the GEMV's sums: a
		 * divergence must sit where the reference itself is near a tie,
		 * the reference on the two engines' prefix (the free-running one's
		 * where it has not left it before k) */
		int rk = ref[k];
		float mk = margin[k];
		bool same = true;
		for (int i = 0; i < k; i++)
			same = same && ref[i] == cu[i];
		if (!same)
			rk = forced_reference(c->m, c->prompt, c->P, cu, k, &mk);
		if (rk == cu[k] || rk == nat[k] ? mk > bound : true)
			fail_msg("%s: token %d: cuda %d, host native %d, the fp32 reference %d%s by a margin "
			         "%.5f > the near-tie bound %.5f", c->name, k, cu[k], nat[k], rk,
			         same ? "" : " (on the engines' prefix)", (double)mk, bound);
		print_message("  %s: cuda = host native for %d of %d tokens; token %d differs at a "
		              "near-tie (fp32 reference%s margin %.5f <= %.5f)\n", c->name, k, c->N, k,
		              same ? "" : " on the engines' prefix", (double)mk, bound);
	} else {
		/* the closest call the two came through: the fp32 reference's
		 * smallest top-2 margin over the tokens */
		int at = 0;
		for (int i = 1; i < c->N; i++)
			if (margin[i] < margin[at])
				at = i;
		print_message("  %s: cuda = host native gguf_a8 engine, %d of %d tokens (smallest "
		              "fp32 reference margin %.5f, token %d; near-tie bound %.5f)\n", c->name,
		              k, c->N, (double)margin[at], at, bound);
	}
	for (int v = 0; v < 2; v++) {
		snprintf(what, sizeof(what), "%s %s", c->name, v ? "host native" : "cuda");
		const int a = eu_agree_prefix(what, v ? nat : cu, ref, margin, c->N, bound);
		if (a < c->N)
			print_message("  %s: first divergence from the fp32 reference at token %d, its "
			              "margin %.5f (bound %.5f)\n", what, a, (double)margin[a], bound);
	}
	dlclose(ek.lib);
}

/* ---- the tiny mixed model ---- */

#define NL 4

/* test_engine_gguf.c's rule: Q4_K_M's for attn_v and ffn_down, a Q6_K LM
 * head and embedding, Q8_0 / Q4_0 / Q4_1 layers mixed into attn_q and
 * attn_output */
static uint32_t pick(const char *name, int l)
{
	if (strstr(name, "norm"))
		return GGML_T_F32;
	if (!strcmp(name, "token_embd.weight") || !strcmp(name, "output.weight"))
		return GGML_T_Q6_K;
	if (strstr(name, "attn_v") || strstr(name, "ffn_down"))
		return kq_more_bits(l, NL) ? GGML_T_Q6_K : GGML_T_Q4_K;
	if (strstr(name, "attn_q"))
		return l == 1 ? GGML_T_Q8_0 : l == 2 ? GGML_T_Q4_0 : GGML_T_Q4_K;
	if (strstr(name, "attn_output"))
		return l == 0 ? GGML_T_Q4_1 : GGML_T_Q4_K;
	return GGML_T_Q4_K;
}

static char g_mixed[300];
static rt_model *g_mixed_m;

/* The mixed file (made once, in setup) and the model loaded from it: its
 * dequantized weights, the engines' blocks exactly. */
static int make_mixed(void)
{
	sw_err err = {0};
	char f32[300];
	rt_model *t = tu_tiny_llama(EU_TINY_VOCAB, 256, NL, 4, 2, 512, 11);
	if (!t)
		return -1;
	snprintf(f32, sizeof(f32), "%s/k_f32.gguf", g_dir);
	snprintf(g_mixed, sizeof(g_mixed), "%s/k_mixed.gguf", g_dir);
	if (rt_llama_save_gguf(t, f32, GGML_T_F32, &err)) {
		print_message("%s\n", err.msg);
		rt_model_free(t);
		return -1;
	}
	rt_model_free(t);
	kq_write_mixed(f32, g_mixed, pick);
	if (!(g_mixed_m = rt_model_load(g_mixed, &err)))
		print_message("%s\n", err.msg);
	return g_mixed_m ? 0 : -1;
}

static void test_tiny_mixed(void **state)
{
	(void)state;
	char spec[2048];
	int32_t prompt[64];
	eu_tiny_prompt(prompt, 37);
	eu_tiny_spec(spec, sizeof(spec), g_mixed, "ngram:1:3", "chain:6", "greedy", "topk", 0,
	             "gguf_a8", NULL);
	const gcase c = {"mixed_chain6", g_mixed_m, spec, prompt, 37, 40, true, true,
	                 8.0 * (0x1p-8 + 0x1p-11), NULL, 0, GGML_T_Q6_K};
	run_gguf(&c);
	/* a layer-skip draft over layers 0 and 3 (Q6_K and Q4_K attn_v and
	 * ffn_down): its runs take their types through the draft's map */
	eu_tiny_spec(spec, sizeof(spec), g_mixed, "layerskip:0,3", "chain:3", "greedy", "topk", 0,
	             "gguf_a8", NULL);
	const gcase l = {"mixed_layerskip", g_mixed_m, spec, prompt, 37, 24, true, false,
	                 8.0 * (0x1p-8 + 0x1p-11), NULL, 0, GGML_T_Q6_K};
	run_gguf(&l);
}

/* An EAGLE-3 head (its GEMMs Q8_0, quantized at upload as the host engines
 * do, gen/drafter_eagle3.c; repacked into planes with the target's, its
 * levels gemv_gguf kernels too) beside the mixed target, and beside
 * test_engine_eagle3_a8.c's Q8_0 tiny target, where that head's drafts
 * are accepted: on cuda too (tau > 1). */
static void test_eagle3_head(void **state)
{
	(void)state;
	sw_err err = {0};
	char spec[2048], head[400], q8[300];
	int32_t prompt[64];
	rt_engine_stats st;
	eu_tiny_prompt(prompt, 37);
	snprintf(head, sizeof(head), "%s/head", g_dir);
	assert_int_equal(e3u_head60(head, g_mixed_m, 192, 5), 0);
	e3u_spec(spec, sizeof(spec), "gguf_a8", g_mixed, head, "chain:4", "greedy", "topk", 0, 192,
	         16);
	const gcase c = {"mixed_eagle3_chain4", g_mixed_m, spec, prompt, 37, 32, true, false,
	                 8.0 * (0x1p-8 + 0x1p-11), NULL, 0, -1};
	run_gguf(&c);
	te3_rmdir(head);

	rt_model *t = tu_tiny_llama(EU_TINY_VOCAB, 256, 3, 4, 2, 384, 7);
	assert_non_null(t);
	snprintf(q8, sizeof(q8), "%s/tiny_q8.gguf", g_dir);
	if (rt_llama_save_gguf(t, q8, GGML_T_Q8_0, &err))
		fail_msg("%s", err.msg);
	rt_model_free(t);
	rt_model *m = rt_model_load(q8, &err);
	if (!m)
		fail_msg("%s", err.msg);
	assert_int_equal(e3u_head60(head, m, 192, 5), 0);
	e3u_spec(spec, sizeof(spec), "gguf_a8", q8, head, "chain:4", "greedy", "topk", 0, 192, 16);
	const gcase q = {"q8_eagle3_chain4", m, spec, prompt, 37, 40, false, false,
	                 8.0 * (0x1p-8 + 0x1p-11), &st, 0, -1};
	run_gguf(&q);
	uint64_t acc = 0;
	for (int i = 0; i < RT_ENGINE_MAX_DEPTH; i++)
		acc += st.pos_accepted[i];
	print_message("  q8_eagle3_chain4: cuda accepted %llu of the head's drafts (%d iterations "
	              "for 40 tokens)\n", (unsigned long long)acc, st.n_iters);
	assert_true(acc > 0 && st.n_iters < 40);
	te3_rmdir(head);
	rt_model_free(m);
}

/* The kernels read the planes: the tiny model in Q4_0 on host-emulate (the
 * same gemv_gguf kernels), its tokens with the planes bind uploaded, then
 * with attn_q's layers overwritten by the file's blocks as the file lays
 * them out (what an upload without the repack would leave; the first part
 * of each layer of the fused q/k/v buffer, whose layers are the three
 * tensors' bytes): other tokens. */
static void test_planes_read(void **state)
{
	(void)state;
	sw_err err = {0};
	char path[300], spec[2048], dir[400];
	rt_model *t = tu_tiny_llama(EU_TINY_VOCAB, 256, 2, 4, 2, 512, 5);
	assert_non_null(t);
	snprintf(path, sizeof(path), "%s/q4_0.gguf", g_dir);
	if (rt_llama_save_gguf(t, path, GGML_T_Q4_0, &err))
		fail_msg("%s", err.msg);
	rt_model_free(t);
	rt_model *m = rt_model_load(path, &err);
	if (!m)
		fail_msg("%s", err.msg);
	eu_tiny_spec(spec, sizeof(spec), path, "ngram:1:3", "chain:2", "greedy", "topk", 0,
	             "gguf_a8", NULL);
	snprintf(dir, sizeof(dir), "%s/q4_0", g_dir);
	build(spec, dir);
	int32_t prompt[32], a[24], b[24];
	rt_engine_stats st;
	eu_tiny_prompt(prompt, 20);
	gguf_file *f = gguf_open(path, &err);
	if (!f)
		fail_msg("%s", err.msg);
	for (int v = 0; v < 2; v++) {
		rt_dev *h = eu_open_host(RT_HOST_EMULATE, eu_cache_dir());
		rt_engine *e = eu_bind(dir, h, m, 1);
		/* q/k/v one buffer (fused: wq's rows, then wk's, wv's, a layer) */
		const int bi = rt_manifest_buf_find(e->man, "target.wqkv");
		assert_true(bi >= 0);
		const rt_engine_buf *wb = &e->man->bufs[bi];
		const int64_t slice = wb->bytes / wb->shape[0];
		for (int l = 0; v == 1 && l < (int)wb->shape[0]; l++) {
			static const char *const part[3] = {"attn_q", "attn_k", "attn_v"};
			const gguf_tensor *gt[3];
			uint64_t sum = 0;
			for (int j = 0; j < 3; j++) {
				char name[64];
				snprintf(name, sizeof(name), "blk.%d.%s.weight", l, part[j]);
				gt[j] = gguf_tensor_find(f, name);
				assert_non_null(gt[j]);
				sum += gt[j]->nbytes;
			}
			assert_int_equal((int64_t)sum, slice);
			memcpy((char *)(uintptr_t)rt_engine_buf_addr(e, "target.wqkv") + l * slice,
			       gt[0]->data, gt[0]->nbytes);
		}
		assert_int_equal(eu_generate(e, v ? "q4_0 wq as the file's blocks" : "q4_0 planes", prompt,
		                             20, 24, false, v ? b : a, &st), 24);
		rt_engine_free(e);
		rt_dev_free(h);
	}
	gguf_close(f);
	if (!memcmp(a, b, sizeof(a)))
		fail_msg("attn_q as the file's blocks gave the planes' tokens: the kernels do not read "
		         "what the repack wrote");
	print_message("  q4_0: attn_q's planes replaced by the file's blocks change the tokens\n");
	rt_model_free(m);
}

/* The manifest's proof of the new ops' extents (runtime/engine/extent.c):
 * engine.json edited where a gemv_gguf would read its weight in another
 * type than its layers hold, more rows than the weight has, or a grid or
 * a quant_a8 row length the kernels do not index safely; each refused
 * before anything runs, naming what. */
static void test_refusals(void **state)
{
	(void)state;
	char spec[2048], dir[400], path[500];
	eu_tiny_spec(spec, sizeof(spec), g_mixed, "ngram:1:3", "chain:6", "greedy", "topk", 0,
	             "gguf_a8", NULL);
	snprintf(dir, sizeof(dir), "%s/refuse", g_dir);
	eu_build(spec, dir, eu_cache_dir(), false);
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	size_t n = 0;
	char *text = sw_read_file(path, SW_CAP_IMAGE, &n);
	assert_non_null(text);
	/* each: a kernel renamed everywhere (the uri states its constants:
	 * the manifest checks them against it), then one edit */
	static const struct { const char *what, *uri, *uri_to, *from, *to, *expect; } T[] = {
		{"a layer in another type than its kernel's", NULL, NULL,
		 "\"layer_dtypes\": [\"q4_k\", \"q4_k\", \"q6_k\", \"q6_k\"]",
		 "\"layer_dtypes\": [\"q6_k\", \"q6_k\", \"q4_k\", \"q4_k\"]",
		 "W buffer target.wv layer 0 is q6_k, expected the kernel's WTYPE 12 (q4_k)"},
		{"more rows than the weight", "gemv_gguf_wtype12_m16_n128_nw128_k256_",
		 "gemv_gguf_wtype12_m16_n129_nw128_k256_", "\"N\": 128, \"NW\": 128",
		 "\"N\": 129, \"NW\": 128",
		 "expected a GGUF type with planes (2, 3, 6, 8, 12, 14) whose blocks divide K, N <= NW"},
		{"a grid short of M's tiles", NULL, NULL, "\"grid\": [32, 1, 2]", "\"grid\": [32, 1, 1]",
		 "expected [32, 1, 2] (ceil(N / (R WARPS / KS)), 1, ceil(M / MT))"},
		{"rows not whole int8 blocks", "quant_a8_m16_k256_", "quant_a8_m16_k250_",
		 "\"M\": 16, \"K\": 256, \"BLOCK\": 128", "\"M\": 16, \"K\": 250, \"BLOCK\": 128",
		 "constant K = 250, expected a multiple of 32"},
	};
	sw_err err = {0};
	rt_manifest *ok = rt_manifest_parse(dir, text, n, &err);
	if (!ok)
		fail_msg("the untouched engine.json: %s", err.msg);
	rt_manifest_free(ok);
	for (size_t i = 0; i < sizeof(T) / sizeof(T[0]); i++) {
		char *re = malloc(n + 1), *ed = malloc(n + 64);
		assert_non_null(re);
		assert_non_null(ed);
		memcpy(re, text, n + 1);
		for (char *u = T[i].uri ? strstr(re, T[i].uri) : NULL; u; u = strstr(u + 1, T[i].uri))
			memcpy(u, T[i].uri_to, strlen(T[i].uri_to)); /* same length */
		const char *at = strstr(re, T[i].from);
		if (!at)
			fail_msg("%s: engine.json lacks %s", T[i].what, T[i].from);
		sprintf(ed, "%.*s%s%s", (int)(at - re), re, T[i].to, at + strlen(T[i].from));
		free(re);
		memset(&err, 0, sizeof(err));
		rt_manifest *m = rt_manifest_parse(dir, ed, strlen(ed), &err);
		free(ed);
		if (m) {
			rt_manifest_free(m);
			fail_msg("%s: accepted", T[i].what);
		}
		if (!strstr(err.msg, T[i].expect))
			fail_msg("%s: message \"%s\" lacks \"%s\"", T[i].what, err.msg, T[i].expect);
		print_message("  refused, %s: %s\n", T[i].what, err.msg + strlen(dir) + 1);
	}
	free(text);
}

/* ---- SmolLM2-135M Q4_1 (Q8_0 tied LM head) ---- */

static void test_smollm2(void **state)
{
	(void)state;
	const char *path = getenv("SW_MODEL") ? getenv("SW_MODEL")
	                                      : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
	if (access(path, R_OK)) {
		print_message("  SmolLM2 %s missing (make model): skipped\n", path);
		skip();
	}
	sw_err err = {0};
	rt_model *m = rt_model_load(path, &err);
	if (!m)
		fail_msg("%s", err.msg);
	char spec[2048];
	/* short: every GEMV row runs in the emulator (~0.4 s a row a forward) */
	snprintf(spec, sizeof(spec),
	         "{\"name\": \"smollm2-gguf-cuda\", \"target\": {\"path\": \"%s\"}, "
	         "\"draft\": {\"method\": \"ngram:1:3\"}, \"tree\": \"chain:2\", "
	         "\"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, "
	         "\"max_context\": 64, \"prefill_chunk\": 8, \"dtype\": \"gguf_a8\", "
	         "\"archs\": [\"sm_80\"]}", path);
	/* a short text with a repeat (for the n-gram lookup), as its tokenizer
	 * reads it */
	static const char text[] = "The old lighthouse keeper climbed the stairs. The old lighthouse";
	int32_t prompt[32];
	gguf_file *f = gguf_open(path, &err);
	rt_tokenizer *tk = f ? rt_tokenizer_from_gguf(f, &err) : NULL;
	const int P = tk ? rt_tokenize(tk, text, strlen(text), false, false, prompt, 32, &err) : -1;
	rt_tokenizer_free(tk);
	gguf_close(f);
	if (P < 2)
		fail_msg("%s: %s", path, err.msg);
	const gcase c = {"smollm2_q4_1", m, spec, prompt, P, 12, false, false,
	                 8.0 * (0x1p-8 + 0x1p-11), NULL, 0, GGML_T_Q8_0};
	run_gguf(&c);
	rt_model_free(m);
}

/* ---- Gemma 3 ---- */

/* Gemma 3 270M Q4_K_M's types (llama.cpp's fallbacks where a row of 640
 * is no whole super-block): Q5_0 for attn_q, attn_k, ffn_gate, ffn_up and
 * attn_v (Q8_0 where use_more_bits), Q4_K attn_output, ffn_down Q6_K or
 * Q4_K, a Q8_0 embedding (the tied head) */
static uint32_t pick_gemma(const char *name, int l)
{
	if (strstr(name, "norm"))
		return GGML_T_F32;
	if (!strcmp(name, "token_embd.weight"))
		return GGML_T_Q8_0;
	if (strstr(name, "attn_v"))
		return kq_more_bits(l, 6) ? GGML_T_Q8_0 : GGML_T_Q5_0;
	if (strstr(name, "ffn_down"))
		return kq_more_bits(l, 6) ? GGML_T_Q6_K : GGML_T_Q4_K;
	if (strstr(name, "attn_output"))
		return GGML_T_Q4_K;
	return GGML_T_Q5_0;
}

static void gemma_spec(char *spec, size_t n, const char *path, const char *draft,
                       const char *tree, int max_context)
{
	snprintf(spec, n,
	         "{\"name\": \"gemma-gguf\", \"target\": {\"path\": \"%s\"}, "
	         "\"draft\": {\"method\": \"%s\"}, \"tree\": \"%s\", "
	         "\"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, "
	         "\"max_context\": %d, \"prefill_chunk\": 8, \"dtype\": \"gguf_a8\", "
	         "\"archs\": [\"sm_80\"]}", path, draft, tree, max_context);
}

/* Six layers (five sliding under a window of 16, one global), dim 320
 * (Gemma 3 270M's 640 halved: no whole super-block, so Q5_0 and Q8_0),
 * two heads of 128 over one KV head, ffn 512; a prompt of 37 and 40
 * tokens: the window cuts. */
static rt_model *make_gemma(char *mixed, size_t n)
{
	sw_err err = {0};
	char f32[300];
	snprintf(f32, sizeof(f32), "%s/gemma_f32.gguf", g_dir);
	snprintf(mixed, n, "%s/gemma_mixed.gguf", g_dir);
	if (tu_tiny_gemma_gguf(f32, EU_TINY_VOCAB, 320, 6, 2, 1, 128, 512, 16, 21, &err))
		fail_msg("%s", err.msg);
	kq_write_mixed(f32, mixed, pick_gemma);
	rt_model *m = rt_model_load(mixed, &err);
	if (!m)
		fail_msg("%s", err.msg);
	return m;
}

static void test_tiny_gemma(void **state)
{
	(void)state;
	char mixed[300], spec[2048];
	rt_model *m = make_gemma(mixed, sizeof(mixed));
	assert_int_equal(m->cfg.arch, RT_ARCH_GEMMA3);
	assert_int_equal(m->cfg.swa_window, 16);
	int32_t prompt[64];
	eu_tiny_prompt(prompt, 37);
	gemma_spec(spec, sizeof(spec), mixed, "ngram:1:3", "chain:4", 96);
	const gcase c = {"gemma_chain4", m, spec, prompt, 37, 40, true, true,
	                 8.0 * (0x1p-8 + 0x1p-11), NULL, 16, GGML_T_Q8_0};
	run_gguf(&c);
	/* a layer-skip draft over a sliding and the global layer */
	gemma_spec(spec, sizeof(spec), mixed, "layerskip:0,5", "chain:3", 96);
	const gcase l = {"gemma_layerskip", m, spec, prompt, 37, 24, false, false,
	                 8.0 * (0x1p-8 + 0x1p-11), NULL, 16, GGML_T_Q8_0};
	run_gguf(&l);
	rt_model_free(m);
}

/* rt_engine_gguf_open_raw, the blocks' source of a gguf_a8 engine bound
 * to a loaded model of any family: a tensor's blocks in the file's own
 * type and byte count (the writer's: pick_gemma, 22 bytes a Q5_0 block of
 * 32), the values refused (the loaded model gives them), a file of another
 * family and a tensor of another shape than the model's refused, naming
 * them. */
static void test_gemma_raw_source(void **state)
{
	(void)state;
	char mixed[300];
	rt_model *m = make_gemma(mixed, sizeof(mixed));
	const rt_config *c = &m->cfg;
	rt_engine_shape sh = {.arch = c->arch, .n_layers = c->n_layers, .dim = c->dim,
	                      .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads,
	                      .head_dim = c->head_dim, .ffn_dim = c->ffn_dim, .vocab = c->vocab,
	                      .rope_theta = c->rope_theta, .norm_eps = c->norm_eps,
	                      .tied_embd = c->tied_embd};
	rt_engine_weights w;
	sw_err err = {0};
	rt_engine_gguf *g = rt_engine_gguf_open_raw(mixed, &sh, &w, &err);
	if (!g)
		fail_msg("%s", err.msg);
	const void *data = NULL;
	size_t bytes = 0;
	int type = -1;
	/* layer 1: not a use_more_bits layer, so attn_v is Q5_0 */
	assert_int_equal(w.get_raw(w.user, "wv", 1, &data, &bytes, &type, &err), 0);
	assert_int_equal(type, GGML_T_Q5_0);
	assert_int_equal(bytes, (size_t)c->dim * c->n_kv_heads * c->head_dim / 32 * 22);
	assert_int_equal(w.get_raw(w.user, "lm_head", -1, &data, &bytes, &type, &err), 0);
	assert_int_equal(type, GGML_T_Q8_0); /* tied: token_embd's blocks */
	assert_int_equal(bytes, (size_t)c->dim * c->vocab / 32 * 34);
	const float *x = NULL;
	size_t n = 0;
	assert_int_not_equal(w.get(w.user, "wq", 0, &x, &n, &err), 0);
	if (!strstr(err.msg, "opened for its blocks only"))
		fail_msg("unexpected message: %s", err.msg);
	rt_engine_gguf_close(g);
	/* another family's shape: refused at open, naming the key */
	sh.arch = RT_ARCH_LLAMA;
	memset(&err, 0, sizeof(err));
	assert_null(rt_engine_gguf_open_raw(mixed, &sh, &w, &err));
	if (!strstr(err.msg, "'general.architecture': expected \"llama\"") ||
	    !strstr(err.msg, "found \"gemma3\""))
		fail_msg("unexpected message: %s", err.msg);
	/* another width: each tensor's shape checked when its blocks are read */
	sh.arch = c->arch;
	sh.ffn_dim = c->ffn_dim * 2;
	memset(&err, 0, sizeof(err));
	g = rt_engine_gguf_open_raw(mixed, &sh, &w, &err);
	if (!g)
		fail_msg("%s", err.msg);
	assert_int_not_equal(w.get_raw(w.user, "w_up", 0, &data, &bytes, &type, &err), 0);
	if (!strstr(err.msg, "blk.0.ffn_up.weight"))
		fail_msg("unexpected message: %s", err.msg);
	print_message("  refused, a raw source of another shape: %s\n", err.msg);
	rt_engine_gguf_close(g);
	rt_model_free(m);
}

/* Gemma 3 270M Q4_K_M (its Q5_0, Q8_0, Q4_K and Q6_K GEMMs, the Q8_0 tied
 * head over 262144 ids): cuda on the fake driver against host native and
 * the fp32 reference; short, every GEMV row runs in the emulator */
static void test_gemma270m(void **state)
{
	(void)state;
	const char *path = getenv("SW_GEMMA_MODEL") ? getenv("SW_GEMMA_MODEL")
	                                            : "models/cache/gemma-3-270m-q4_k_m.gguf";
	if (access(path, R_OK)) {
		print_message("  Gemma 3 270M %s missing (make model-gemma): skipped\n", path);
		skip();
	}
	sw_err err = {0};
	rt_model *m = rt_model_load(path, &err);
	if (!m)
		fail_msg("%s", err.msg);
	char spec[2048];
	gemma_spec(spec, sizeof(spec), path, "ngram:1:3", "chain:2", 64);
	static const char text[] = "The old lighthouse keeper climbed the stairs. The old lighthouse";
	int32_t prompt[32];
	gguf_file *f = gguf_open(path, &err);
	rt_tokenizer *tk = f ? rt_tokenizer_from_gguf(f, &err) : NULL;
	const int P = tk ? rt_tokenize(tk, text, strlen(text), true, false, prompt, 32, &err) : -1;
	rt_tokenizer_free(tk);
	gguf_close(f);
	if (P < 2)
		fail_msg("%s: %s", path, err.msg);
	const gcase c = {"gemma270m_q4_k_m", m, spec, prompt, P, 12, false, false,
	                 8.0 * (0x1p-8 + 0x1p-11), NULL, 0, GGML_T_Q8_0};
	run_gguf(&c);
	rt_model_free(m);
}

static int setup(void **state)
{
	(void)state;
	eu_work_dir(g_dir, sizeof(g_dir), "test_engine_gguf_cuda");
	return make_mixed();
}

static int teardown(void **state)
{
	(void)state;
	rt_model_free(g_mixed_m);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiny_mixed),
		cmocka_unit_test(test_eagle3_head),
		cmocka_unit_test(test_planes_read),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_smollm2),
		cmocka_unit_test(test_tiny_gemma),
		cmocka_unit_test(test_gemma_raw_source),
		cmocka_unit_test(test_gemma270m),
	};
	/* e.g. CMOCKA_FILTER='test_*gemma*' (as test_engine.c) */
	if (getenv("CMOCKA_FILTER") && *getenv("CMOCKA_FILTER"))
		cmocka_set_test_filter(getenv("CMOCKA_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
