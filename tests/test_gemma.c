/* Gemma 3 text models on the host (runtime/model/gemma.c, the loaders):
 *   - against Hugging Face transformers itself (tests/tools/hf_tiny.py run
 *     with build/venv-hf): tiny random checkpoints made and saved by
 *     Gemma3ForCausalLM, with a sliding window of 4 under an 11-token
 *     prompt (the window cuts, in the prompt and at every generated step):
 *       gemma3: 6 layers, a global layer every 6, local RoPE base 10000,
 *         query_pre_attn_scalar = head_dim 32 (hidden / heads is 16), tied,
 *         GQA 2 -- the values llama.cpp fixes for gemma3 files, so the same
 *         tensors are also written as GGUF (convert_hf_to_gguf.py's names,
 *         norm weights + 1) and must give the HF-loaded logits bit for bit;
 *       gemma3-free-cap20-untied-kv1-s5: 4 layers, a global layer every 2,
 *         local base 100, query_pre_attn_scalar 24, final logit softcap 20,
 *         an untied LM head, one KV head (HF only: GGUF cannot say these).
 *     Logits of every prompt row within the fp32 bound of transformers'
 *     float64 forward; the greedy continuation equal to transformers' at
 *     every step; the CLI's generate and run (layer-skip, n-gram) print it.
 *     Bound: as tests/test_qwen.c, with D = 14 L + 3 chained fp32 stages
 *     (per layer the Qwen3 block's 12 plus the two post-norms; then the
 *     embedding scale, final norm and LM head; the softcap's tanh has slope
 *     <= 1 and only shrinks an error): |C - ref| <= 2 D gamma_K S_i.
 *     transformers' own fp32 logits must satisfy it too. A window that does
 *     not cut, the wrong local base, an unscaled embedding, (1 + w) missed,
 *     SwiGLU for GeGLU, a missed post-norm or softcap miss by O(1) (checked
 *     by mutation, see the commit).
 *   - greedy speculative decoding (n-gram, layer-skip over global and
 *     sliding layers, tree expansions) on those checkpoints emits the
 *     target-only tokens: the window over staged entries (blk_pos) agrees
 *     with the one over committed ones; a tree block with two roots at one
 *     position gives each branch the chain's logits bit for bit.
 *   - without Python: config.json defaults as Gemma3TextConfig's, and the
 *     refusals (an attention softcap, a layer_types list that is no
 *     period, another activation, the multimodal model_type "gemma3");
 *     GGUF refusals (missing post-norm, an attention softcap key); the
 *     generator takes gemma3 within its sliding window and refuses a
 *     max_context beyond it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "check.h"
#include "core/fileio.h"
#include "core/json.h"
#include "decode/chain.h"
#include "formats/gguf.h"
#include "gen/spec.h"
#include "model/ctx.h"
#include "model/model_gguf.h"
#include "model/model_hf.h"
#include "hf_util.h"
#include "testutil.h"

static const char *const VARIANTS[] = { "gemma3", "gemma3-free-cap20-untied-kv1-s5" };
#define N_VARIANTS 2

static char g_dir[64];
static bool g_have;

static int setup_hf(void **state)
{
	(void)state;
	int rc = hf_make("/tmp/sw_gemma_XXXXXX", g_dir, sizeof(g_dir), VARIANTS, N_VARIANTS);
	g_have = rc == 1; /* 0: no transformers, the torch tests skip, saying why */
	return rc < 0 ? -1 : 0;
}

static int teardown_hf(void **state)
{
	(void)state;
	hf_rm_rf(g_dir, "/tmp/sw_gemma_");
	return 0;
}

static void check_variant(const char *v)
{
	char dir[600], gpath[700];
	char *text;
	sw_err err = { 0 };
	snprintf(dir, sizeof(dir), "%s/%s", g_dir, v);
	json_value *ref = hf_load_ref(dir, &text);
	const int V = (int)hf_jget(ref, "vocab")->integer, L = (int)hf_jget(ref, "layers")->integer;
	const int H = (int)hf_jget(ref, "hidden")->integer, F = (int)hf_jget(ref, "ffn")->integer;
	const int hd = (int)hf_jget(ref, "head_dim")->integer;
	const json_value *jp = hf_jget(ref, "prompt"), *l64 = hf_jget(ref, "logits64"), *l32 = hf_jget(ref, "logits32"),
	                 *ab = hf_jget(ref, "abs"), *jg = hf_jget(ref, "greedy"), *jm = hf_jget(ref, "margin"),
	                 *js = hf_jget(ref, "margin_abs");
	const int T = (int)jp->n;
	int32_t prompt[64];
	assert_true(T <= 64);
	for (int t = 0; t < T; t++)
		prompt[t] = (int32_t)jp->items[t]->integer;

	rt_model *m = rt_model_load(dir, &err);
	if (!m)
		fail_msg("%s: %s", dir, err.msg);
	assert_int_equal(m->cfg.arch, RT_ARCH_GEMMA3);
	assert_int_equal(m->cfg.head_dim, hd);
	assert_int_equal(m->cfg.vocab, V);
	assert_int_equal(m->cfg.n_kv_heads, (int)hf_jget(ref, "kv_heads")->integer);
	assert_true(m->cfg.tied_embd == hf_jget(ref, "tied")->boolean);
	assert_int_equal(m->cfg.swa_window, (int)hf_jget(ref, "sliding_window")->integer);
	assert_int_equal(m->cfg.swa_pattern, (int)hf_jget(ref, "pattern")->integer);
	assert_true(m->cfg.swa_window < T); /* the window cuts inside the prompt */
	const json_value *jc = hf_jget(ref, "softcap");
	assert_true(m->cfg.final_softcap == (jc->type == JSON_NULL ? 0.0f : (float)jc->number));

	int K = H > F ? H : F;
	if (4 * hd > K)
		K = 4 * hd;
	if (T > K)
		K = T;
	const int D = 14 * L + 3;
	const double g = gamma_n(K);
	float *lg = hf_prompt_logits(m, prompt, T);
	double wc = 0, wh = 0;
	for (int t = 0; t < T; t++)
		for (int i = 0; i < V; i++) {
			double r = l64->items[t]->items[i]->number, s = ab->items[t]->items[i]->number;
			double bound = 2.0 * D * g * s, e = fabs((double)lg[(size_t)t * V + i] - r);
			double e32 = fabs(l32->items[t]->items[i]->number - r);
			if (!isfinite(lg[(size_t)t * V + i]) || e > bound)
				fail_msg("%s row %d logit %d = %.9g, transformers (float64) %.9g: error %.3g over the bound %.3g",
				         v, t, i, (double)lg[(size_t)t * V + i], r, e, bound);
			if (e32 > bound)
				fail_msg("%s row %d logit %d: transformers' own fp32 error %.3g is over the bound %.3g",
				         v, t, i, e32, bound);
			wc = fmax(wc, e / (g * s));
			wh = fmax(wh, e32 / (g * s));
		}

	int32_t out[64];
	const int n = (int)jg->n;
	assert_int_equal(hf_greedy(m, prompt, T, n, out), n);
	for (int j = 0; j < n; j++) {
		if (jm->items[j]->number <= 2.0 * D * g * js->items[j]->number)
			fail_msg("%s greedy step %d: margin %.3g within the bound: the fixture decides nothing", v, j,
			         jm->items[j]->number);
		if (out[j] != (int32_t)jg->items[j]->integer)
			fail_msg("%s greedy step %d: %d, transformers %d (margin %.3g)", v, j, out[j],
			         (int)jg->items[j]->integer, jm->items[j]->number);
	}

	if (hf_jget(ref, "gguf")->boolean) {
		snprintf(gpath, sizeof(gpath), "%s/model.gguf", dir);
		rt_model *mg = rt_model_load(gpath, &err);
		if (!mg)
			fail_msg("%s: %s", gpath, err.msg);
		assert_int_equal(mg->cfg.arch, RT_ARCH_GEMMA3);
		assert_int_equal(mg->cfg.swa_window, m->cfg.swa_window);
		assert_int_equal(mg->cfg.swa_pattern, m->cfg.swa_pattern);
		assert_true(mg->cfg.query_scalar == m->cfg.query_scalar);
		assert_true(mg->cfg.rope_theta_local == m->cfg.rope_theta_local);
		assert_true(mg->cfg.embd_scale == m->cfg.embd_scale);
		float *lgg = hf_prompt_logits(mg, prompt, T);
		assert_memory_equal(lgg, lg, (size_t)T * V * sizeof(float));
		free(lgg);
		rt_model_free(mg);
	}
	printf("  %-28s worst error %.3f gamma_K S_i (transformers fp32: %.3f; bound %d), %d greedy steps equal%s\n",
	       v, wc, wh, 2 * D, n, hf_jget(ref, "gguf")->boolean ? ", GGUF bit for bit" : "");
	free(lg);
	rt_model_free(m);
	json_free(ref);
	free(text);
}

static void test_against_transformers(void **state)
{
	(void)state;
	if (!g_have) {
		printf("  %s with transformers is missing (make deps): the transformers cross-check is skipped\n",
		       hf_python());
		skip();
	}
	for (int i = 0; i < N_VARIANTS; i++)
		check_variant(VARIANTS[i]);
}

/* Greedy speculative decoding over the transformers checkpoints: n-gram,
 * layer-skip (a sliding and a global layer; only sliding ones), chain and
 * a tree, equal to target-only; prompts that repeat so the drafts land. */
static void test_spec_equals_target(void **state)
{
	(void)state;
	if (!g_have)
		skip();
	static const int32_t prompts[2][12] = { { 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4 },
	                                        { 50, 7, 7, 19, 88, 4, 50, 7, 7, 19, 88, 4 } };
	static const char *const skips[2] = { "0,5", "0-1" }; /* per variant */
	sw_err err = { 0 };
	for (int vi = 0; vi < N_VARIANTS; vi++) {
		char dir[600];
		snprintf(dir, sizeof(dir), "%s/%s", g_dir, VARIANTS[vi]);
		rt_model *t = rt_model_load(dir, &err);
		if (!t)
			fail_msg("%s", err.msg);
		rt_model *ls = rt_model_layerskip_parse(t, skips[vi], &err);
		if (!ls)
			fail_msg("%s", err.msg);
		uint64_t drafted[2] = { 0, 0 }, accepted[2] = { 0, 0 };
		for (int pi = 0; pi < 2; pi++) {
			int32_t ref[48], out[48];
			const int N = 40;
			assert_int_equal(hf_greedy(t, prompts[pi], 12, N, ref), N);
			for (int d = 0; d < 2; d++) {
				rt_drafter *dr = d == 0 ? rt_drafter_ngram(1, 3, &err) : rt_drafter_model(ls, 256, &err);
				if (!dr)
					fail_msg("%s", err.msg);
				rt_ctx *c = rt_ctx_new(t, 256, 64, &err);
				assert_non_null(c);
				rt_gen_cfg cfg = { .samp = { 0.0f, 0, 1.0f }, .gamma = 5, .seed = 3, .max_new = N };
				rt_stats st;
				memset(&st, 0, sizeof(st));
				int n = rt_generate_spec(c, dr, prompts[pi], 12, &cfg, out, &st, &err);
				if (n != N)
					fail_msg("%s drafter %d: %d tokens: %s", VARIANTS[vi], d, n, err.msg);
				for (int j = 0; j < N; j++)
					if (out[j] != ref[j])
						fail_msg("%s prompt %d drafter %d: token %d is %d, target-only %d", VARIANTS[vi],
						         pi, d, j, out[j], ref[j]);
				drafted[d] += st.n_drafted;
				accepted[d] += st.n_accepted;
				rt_ctx_free(c);
				rt_drafter_free(dr);
			}
		}
		for (int d = 0; d < 2; d++) /* every drafter proposed, and some were kept */
			assert_true(drafted[d] > 0 && accepted[d] > 0);
		printf("  %-28s n-gram %llu/%llu, layer-skip %s %llu/%llu drafted tokens accepted\n", VARIANTS[vi],
		       (unsigned long long)accepted[0], (unsigned long long)drafted[0], skips[vi],
		       (unsigned long long)accepted[1], (unsigned long long)drafted[1]);
		rt_model_free(ls);
		rt_model_free(t);
	}
}

/* A tree block whose entries' positions are not their slots (two roots at
 * one position): the window must go by position. The last row of the
 * branch under the second root equals the same tokens evaluated as a
 * chain, bit for bit (masked keys add exact zeros), with the window (4)
 * cutting the second root off the last query (position distance 4) where
 * numbering by slot would see it (slot distance 3). */
static void test_tree_window(void **state)
{
	(void)state;
	if (!g_have)
		skip();
	char dir[600];
	sw_err err = { 0 };
	snprintf(dir, sizeof(dir), "%s/%s", g_dir, VARIANTS[0]);
	rt_model *m = rt_model_load(dir, &err);
	if (!m)
		fail_msg("%s", err.msg);
	assert_int_equal(m->cfg.swa_window, 4);
	static const int32_t prompt[9] = { 5, 17, 230, 41, 9, 77, 120, 3, 64 };
	/* entries: 0 X@9, 1 Y@9 (roots), 2..5 a chain under Y at 10..13 */
	const int32_t tok[6] = { 11, 12, 13, 14, 15, 16 }, pos[6] = { 9, 9, 10, 11, 12, 13 };
	const uint64_t mask[6] = { 1u, 2u, 2u | 4u, 2u | 4u | 8u, 2u | 4u | 8u | 16u, 2u | 4u | 8u | 16u | 32u };
	const int V = m->cfg.vocab;
	float *lt = malloc((size_t)6 * V * sizeof(float)), *lc = malloc((size_t)5 * V * sizeof(float));
	float *pl = malloc((size_t)V * sizeof(float));
	for (int k = 0; k < 2; k++) {
		rt_ctx *c = rt_ctx_new(m, 64, 16, &err);
		assert_non_null(c);
		if (rt_ctx_feed(c, prompt, 9, pl, &err))
			fail_msg("%s", err.msg);
		int rc = k == 0 ? rt_ctx_eval(c, tok, pos, 6, mask, lt, NULL, &err)
		                : rt_ctx_eval(c, tok + 1, pos + 1, 5, NULL, lc, NULL, &err);
		if (rc)
			fail_msg("%s", err.msg);
		rt_ctx_free(c);
	}
	for (int r = 0; r < 5; r++)
		if (memcmp(lt + (size_t)(r + 1) * V, lc + (size_t)r * V, (size_t)V * sizeof(float)))
			fail_msg("tree entry %d (position %d): logits differ from the chain's", r + 1, pos[r + 1]);
	free(lt);
	free(lc);
	free(pl);
	rt_model_free(m);
}

static void cli_out(const char *args, char *out, size_t cap)
{
	char cmd[2048];
	const char *b = getenv("BUILD");
	snprintf(cmd, sizeof(cmd), "%s/specwright %s 2>/dev/null", b && b[0] ? b : "build", args);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	size_t n = fread(out, 1, cap - 1, f);
	out[n] = 0;
	if (pclose(f) != 0)
		fail_msg("%s: non-zero exit", cmd);
}

/* The CLI's host decoder on the GGUF checkpoint (its stand-in tokenizer
 * spells id i "<i>") and on the HF directory: transformers' greedy tokens. */
static void test_cli(void **state)
{
	(void)state;
	if (!g_have)
		skip();
	char dir[600], *text, ids[512] = "", want[1024] = "", got[2048], args[1600];
	snprintf(dir, sizeof(dir), "%s/%s", g_dir, VARIANTS[0]);
	json_value *ref = hf_load_ref(dir, &text);
	const json_value *jp = hf_jget(ref, "prompt"), *jg = hf_jget(ref, "greedy");
	size_t a = 0, b = 0;
	for (size_t i = 0; i < jp->n; i++)
		a += (size_t)snprintf(ids + a, sizeof(ids) - a, "%s%d", i ? " " : "", (int)jp->items[i]->integer);
	for (size_t i = 0; i < jg->n; i++)
		b += (size_t)snprintf(want + b, sizeof(want) - b, "<%d>", (int)jg->items[i]->integer);
	static const char *const runs[] = {
		"generate %s/model.gguf", "run %s/model.gguf --draft layerskip:2",
		"run %s/model.gguf --draft ngram", "run %s --tokenizer %s/model.gguf --draft layerskip:1",
	};
	for (int r = 0; r < 4; r++) {
		int n = snprintf(args, sizeof(args), runs[r], dir, dir);
		snprintf(args + n, sizeof(args) - (size_t)n, " --ids \"%s\" -n %zu --no-chat --ctx 256", ids, jg->n);
		cli_out(args, got, sizeof(got));
		if (strncmp(got, want, strlen(want)))
			fail_msg("specwright %s:\n  printed %s\n  expected %s", args, got, want);
	}
	json_free(ref);
	free(text);
}

/* ---- without Python ---- */

static const char G_BASE[] =
	"{\"architectures\": [\"Gemma3ForCausalLM\"], \"model_type\": \"gemma3_text\", \"hidden_size\": 64, "
	"\"intermediate_size\": 96, \"num_attention_heads\": 4, \"num_key_value_heads\": 1, "
	"\"num_hidden_layers\": 6, \"vocab_size\": 300";

static int cfg_of(const char *extra, rt_config *c, sw_err *err)
{
	char js[1024];
	snprintf(js, sizeof(js), "%s%s}", G_BASE, extra);
	return rt_llama_config_from_hf_json(js, strlen(js), "g.json", c, err);
}

static void refused(const char *extra, const char *want)
{
	rt_config c;
	sw_err err = { 0 };
	if (!cfg_of(extra, &c, &err))
		fail_msg("config with %s: accepted", extra);
	if (!strstr(err.msg, want) || !strstr(err.msg, "g.json"))
		fail_msg("config with %s: message \"%s\" lacks \"%s\"", extra, err.msg, want);
}

static void test_config(void **state)
{
	(void)state;
	rt_config c;
	sw_err err = { 0 };
	/* Gemma3TextConfig's defaults */
	if (cfg_of("", &c, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(c.arch, RT_ARCH_GEMMA3);
	assert_int_equal(c.head_dim, 256);
	assert_true(c.tied_embd);
	assert_true(c.rope_theta == 1e6f);
	assert_true(c.rope_theta_local == 10000.0f);
	assert_int_equal(c.swa_window, 4096);
	assert_int_equal(c.swa_pattern, 6);
	assert_true(c.query_scalar == 256.0f);
	assert_true(c.final_softcap == 0.0f);
	assert_true(c.embd_scale == 8.0f);
	assert_int_equal(c.max_ctx, 131072);
	for (int l = 0; l < 6; l++)
		assert_true(rt_config_layer_sliding(&c, l) == (l != 5));
	/* a layer_types list of period 3; bf16: sqrt(hidden) rounded to bf16 */
	static const char g640[] =
		"{\"model_type\": \"gemma3_text\", \"hidden_size\": 640, \"intermediate_size\": 96, "
		"\"num_attention_heads\": 4, \"num_hidden_layers\": 6, \"vocab_size\": 300, \"layer_types\": "
		"[\"sliding_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", "
		"\"sliding_attention\", \"full_attention\"], \"torch_dtype\": \"bfloat16\", "
		"\"final_logit_softcapping\": 30.0}";
	if (rt_llama_config_from_hf_json(g640, strlen(g640), "g640.json", &c, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(c.swa_pattern, 3);
	assert_true(c.final_softcap == 30.0f);
	assert_true(c.embd_scale == 25.25f); /* sqrt(640) = 25.298 -> bf16 25.25 */
	refused(", \"attn_logit_softcapping\": 50.0", "$.attn_logit_softcapping: expected null");
	refused(", \"layer_types\": [\"sliding_attention\", \"full_attention\", \"full_attention\", "
	        "\"sliding_attention\", \"full_attention\", \"full_attention\"]",
	        "$.layer_types[2]: expected \"sliding_attention\" (a global layer every 2), found \"full_attention\"");
	refused(", \"layer_types\": [\"sliding_attention\"]", "$.layer_types");
	refused(", \"hidden_activation\": \"gelu\"", "$.hidden_activation: expected \"gelu_pytorch_tanh\", found \"gelu\"");
	refused(", \"attention_bias\": true", "$.attention_bias: expected false (gemma3 without biases)");
	char js[1024];
	snprintf(js, sizeof(js), "{\"model_type\": \"gemma3\", \"architectures\": [\"Gemma3ForConditionalGeneration\"]}");
	assert_int_not_equal(rt_llama_config_from_hf_json(js, strlen(js), "mm.json", &c, &err), 0);
	assert_non_null(strstr(err.msg, "$.model_type: expected"));
	assert_non_null(strstr(err.msg, "\"gemma3_text\", found \"gemma3\""));
}

/* GGUF gemma3 files from the project's writer: the config llama.cpp reads,
 * and the refusals */
static void write_gguf(const char *path, const char *drop, bool attn_cap)
{
	enum { D = 16, V = 40, F = 24, HD = 8, NH = 2, NL = 2 };
	gguf_writer *w = gguf_writer_new(3, 32);
	gguf_w_str(w, "general.architecture", "gemma3");
	gguf_w_u32(w, "gemma3.block_count", NL);
	gguf_w_u32(w, "gemma3.context_length", 512);
	gguf_w_u32(w, "gemma3.embedding_length", D);
	gguf_w_u32(w, "gemma3.feed_forward_length", F);
	gguf_w_u32(w, "gemma3.attention.head_count", NH);
	gguf_w_u32(w, "gemma3.attention.head_count_kv", 1);
	gguf_w_u32(w, "gemma3.attention.key_length", HD);
	gguf_w_u32(w, "gemma3.attention.value_length", HD);
	gguf_w_f32(w, "gemma3.rope.freq_base", 1e6f);
	gguf_w_f32(w, "gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
	gguf_w_u32(w, "gemma3.attention.sliding_window", 3);
	if (attn_cap)
		gguf_w_f32(w, "gemma3.attn_logit_softcapping", 50.0f);
	static float buf[V * D];
	for (int i = 0; i < V * D; i++)
		buf[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
	struct { const char *n; uint64_t a, b; } t[] = {
		{ "attn_norm", D, 0 }, { "attn_q", D, NH * HD }, { "attn_k", D, HD }, { "attn_v", D, HD },
		{ "attn_output", NH * HD, D }, { "attn_q_norm", HD, 0 }, { "attn_k_norm", HD, 0 },
		{ "post_attention_norm", D, 0 }, { "ffn_norm", D, 0 }, { "ffn_gate", D, F }, { "ffn_up", D, F },
		{ "ffn_down", F, D }, { "post_ffw_norm", D, 0 },
	};
	uint64_t ne[2] = { D, V };
	gguf_w_tensor(w, "token_embd.weight", GGML_T_F32, 2, ne, buf, sizeof(float) * V * D);
	ne[0] = D;
	gguf_w_tensor(w, "output_norm.weight", GGML_T_F32, 1, ne, buf, sizeof(float) * D);
	for (int l = 0; l < NL; l++)
		for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
			char nm[64];
			snprintf(nm, sizeof(nm), "blk.%d.%s.weight", l, t[i].n);
			if (drop && !strcmp(drop, nm))
				continue;
			uint64_t e[2] = { t[i].a, t[i].b };
			gguf_w_tensor(w, nm, GGML_T_F32, t[i].b ? 2 : 1, e, buf,
			              sizeof(float) * t[i].a * (t[i].b ? t[i].b : 1));
		}
	sw_err err = { 0 };
	if (gguf_writer_save(w, path, &err))
		fail_msg("%s", err.msg);
	gguf_writer_free(w);
}

static void test_gguf(void **state)
{
	(void)state;
	char dir[64], p[128];
	strcpy(dir, "/tmp/sw_gemma_XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/m.gguf", dir);
	sw_err err = { 0 };
	write_gguf(p, NULL, false);
	rt_model *m = rt_model_load(p, &err);
	if (!m)
		fail_msg("%s", err.msg);
	assert_int_equal(m->cfg.arch, RT_ARCH_GEMMA3);
	assert_int_equal(m->cfg.swa_window, 3);
	assert_int_equal(m->cfg.swa_pattern, 6);
	assert_true(m->cfg.rope_theta_local == 10000.0f);
	assert_true(m->cfg.query_scalar == 8.0f);
	assert_true(m->cfg.embd_scale == 4.0f);
	assert_true(m->cfg.tied_embd);
	/* derive writes Llama GGUFs only */
	assert_int_not_equal(rt_llama_save_gguf(m, p, GGML_T_F32, &err), 0);
	assert_non_null(strstr(err.msg, "gemma3"));
	rt_model_free(m);
	write_gguf(p, "blk.1.post_ffw_norm.weight", false);
	assert_null(rt_model_load(p, &err));
	assert_non_null(strstr(err.msg, "missing tensor 'blk.1.post_ffw_norm.weight'"));
	write_gguf(p, NULL, true);
	assert_null(rt_model_load(p, &err));
	assert_non_null(strstr(err.msg, "metadata key 'gemma3.attn_logit_softcapping': expected absent or 0"));
	assert_non_null(strstr(err.msg, p));
	unlink(p);
	rmdir(dir);
}

/* gen takes a gemma3 target (gen/arch_gemma.c) at any max_context: its
 * sliding layers run tree attention's window (tests/test_gemma_engine.c runs
 * such engines). Where the window cuts (max_context above it), a prefill
 * chunk or tree of more rows than the window is refused naming the field,
 * the window and the rows (the windowed attention takes a block's own keys
 * as inside the window) */
static void test_generator_window(void **state)
{
	(void)state;
	char dir[64], p[128], spec[512];
	strcpy(dir, "/tmp/sw_gemma_XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/config.json", dir);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fprintf(f, "%s, \"sliding_window\": 16}", G_BASE);
	fclose(f);
	static const struct {
		int max_ctx, chunk;
		const char *tree;
		bool ok;
	} cases[] = {
		{16, 16, "chain:6", true},     /* the window covers every position: no window */
		{4097, 16, "chain:15", true},  /* cuts; 16 rows a block at most */
		{4097, 16, "chain:16", false}, /* a tree of 17 rows */
		{4097, 32, "chain:2", false},  /* a prefill chunk of 32 */
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		snprintf(spec, sizeof(spec), "{\"target\": {\"path\": \"%s\"}, \"draft\": \"ngram\", "
		         "\"tree\": \"%s\", \"verify\": {\"method\": \"greedy\", \"expand\": "
		         "\"topk\"}, \"max_context\": %d, \"prefill_chunk\": %d, \"dtype\": \"bf16\"}",
		         dir, cases[k].tree, cases[k].max_ctx, cases[k].chunk);
		gen_spec *s = calloc(1, sizeof(*s));
		sw_err err = { 0 };
		assert_non_null(s);
		int rc = gen_spec_parse(spec, strlen(spec), "spec.json", NULL, s, &err);
		if (cases[k].ok) {
			if (rc)
				fail_msg("case %zu: rc %d: %s", k, rc, err.msg);
			assert_int_equal(s->target.cfg.arch, RT_ARCH_GEMMA3);
		} else if (!rc || !strstr(err.msg, "spec.json") ||
		           !strstr(err.msg, k == 2 ? "$.tree" : "$.prefill_chunk") ||
		           !strstr(err.msg, "at most 16 rows") || !strstr(err.msg, "sliding_window") ||
		           !strstr(err.msg, k == 2 ? "found 17 rows" : "found 32 rows")) {
			fail_msg("case %zu: rc %d, message: %s", k, rc, err.msg);
		}
		free(s);
	}
	unlink(p);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_transformers),
		cmocka_unit_test(test_spec_equals_target),
		cmocka_unit_test(test_tree_window),
		cmocka_unit_test(test_cli),
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_gguf),
		cmocka_unit_test(test_generator_window),
	};
	return cmocka_run_group_tests(tests, setup_hf, teardown_hf);
}
