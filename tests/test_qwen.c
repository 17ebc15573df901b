/* Qwen2/Qwen2.5 and Qwen3 on the host (runtime/model/qwen.c, the loaders):
 *   - against Hugging Face transformers itself (tests/tools/hf_tiny.py run
 *     with build/venv-hf, which tests/deps.sh makes): tiny random
 *     checkpoints made and saved by Qwen2ForCausalLM / Qwen3ForCausalLM
 *     (tied and untied, GQA 2 and 4, Qwen3 head_dim 24 != 64 / 4), loaded
 *     with the HF loader: the logits of every prompt row within the fp32
 *     bound below of transformers' float64 forward, and the greedy
 *     continuation equal to transformers' (float64, argmax) at every step
 *     whose margin exceeds the two logits' bounds; the same tensors as GGUF
 *     under llama.cpp's names (the gguf package, as convert_hf_to_gguf.py
 *     maps them): logits bit for bit the HF-loaded model's. Config.json
 *     rewritten to another family is refused naming the tensor. The CLI's
 *     generate and run (layer-skip, n-gram) print transformers' greedy
 *     tokens from the GGUF and from the HF directory.
 *     Bound: a logit is the end of D = 12 L + 2 chained fp32 stages (per
 *     layer: the norm, q/k/v with bias, the q/k norm, RoPE, scores,
 *     softmax, P V, o plus residual, the norm, gate/up, SiLU product, down
 *     plus residual; then the final norm and the LM head), each a dot
 *     product of length <= K = max(dim, ffn, n_heads * head_dim, rows) or an
 *     elementwise op, within gamma_K relative of its absolute sum (Higham
 *     3.1). To first order those relative errors add up through the
 *     well-conditioned norms, so |C - ref| <= 2 D gamma_K S_i with S_i =
 *     sum_d |lm_head[i, d] h_d| (h after the final norm, float64); the
 *     factor 2 covers second-order terms (the bound of tests/test_eagle3.c).
 *     transformers' own fp32 logits must satisfy it too (checked: a bound
 *     that a correct fp32 forward breaks would be wrong). A skipped bias,
 *     q/k norm or the wrong RoPE pairing misses by O(1).
 *   - without Python: a Qwen2 and a Qwen3 GGUF written with the project's
 *     GGUF writer under llama.cpp's names load to the same logits bit for
 *     bit; a missing bias or q/k norm, a stray attn_output.bias, a bias in
 *     a Llama file are refused naming the tensor; greedy speculative output
 *     (n-gram, layer-skip and separate Qwen draft models) equals
 *     target-only; derive refuses a Qwen model naming the architecture;
 *     the generator takes one (its engines: tests/test_qwen_engine.c). */
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

static const char *const VARIANTS[] = { "qwen2", "qwen2-tied", "qwen3", "qwen3-tied-kv1" };
#define N_VARIANTS 4

static char g_dir[64]; /* hf_tiny.py output, one run for every variant */
static bool g_have;

static int setup_hf(void **state)
{
	(void)state;
	int rc = hf_make("/tmp/sw_qwen_XXXXXX", g_dir, sizeof(g_dir), VARIANTS, N_VARIANTS);
	g_have = rc == 1; /* 0: no transformers, the torch tests skip, saying why */
	return rc < 0 ? -1 : 0;
}

static int teardown_hf(void **state)
{
	(void)state;
	hf_rm_rf(g_dir, "/tmp/sw_qwen_");
	return 0;
}

static double worst_c = 0, worst_hf32 = 0;

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
	const bool qwen3 = !strncmp(v, "qwen3", 5);
	assert_int_equal(m->cfg.arch, qwen3 ? RT_ARCH_QWEN3 : RT_ARCH_QWEN2);
	assert_int_equal(m->cfg.head_dim, hd);
	assert_int_equal(m->cfg.vocab, V);
	assert_int_equal(m->cfg.n_kv_heads, (int)hf_jget(ref, "kv_heads")->integer);
	assert_true(m->cfg.tied_embd == hf_jget(ref, "tied")->boolean);
	assert_true(m->cfg.rope_theta == 1000000.0f);

	int K = H > F ? H : F;
	if (4 * hd > K)
		K = 4 * hd;
	if (T > K)
		K = T;
	const int D = 12 * L + 2;
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
	worst_c = fmax(worst_c, wc);
	worst_hf32 = fmax(worst_hf32, wh);

	/* greedy: equal at every step up to the first whose top-2 margin is
	 * within the two logits' bounds (none is in these fixtures: checked) */
	int32_t out[64];
	const int n = (int)jg->n;
	assert_int_equal(hf_greedy(m, prompt, T, n, out), n);
	int decisive = 0;
	for (int j = 0; j < n; j++) {
		if (jm->items[j]->number <= 2.0 * D * g * js->items[j]->number)
			break;
		decisive++;
		if (out[j] != (int32_t)jg->items[j]->integer)
			fail_msg("%s greedy step %d: %d, transformers %d (margin %.3g)", v, j, out[j],
			         (int)jg->items[j]->integer, jm->items[j]->number);
	}
	assert_int_equal(decisive, n);

	/* the GGUF of the same tensors: the same function, bit for bit */
	snprintf(gpath, sizeof(gpath), "%s/model.gguf", dir);
	rt_model *mg = rt_model_load(gpath, &err);
	if (!mg)
		fail_msg("%s: %s", gpath, err.msg);
	assert_int_equal(mg->cfg.arch, m->cfg.arch);
	assert_int_equal(mg->cfg.head_dim, hd);
	assert_true(mg->cfg.tied_embd == m->cfg.tied_embd);
	float *lgg = hf_prompt_logits(mg, prompt, T);
	assert_memory_equal(lgg, lg, (size_t)T * V * sizeof(float));
	int32_t out2[64];
	assert_int_equal(hf_greedy(mg, prompt, T, n, out2), n);
	assert_memory_equal(out2, out, (size_t)n * sizeof(int32_t));
	printf("  %-15s worst error %.3f gamma_K S_i (transformers fp32: %.3f; bound %d), %d greedy steps equal\n",
	       v, wc, wh, 2 * D, n);
	free(lgg);
	free(lg);
	rt_model_free(mg);
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
	(void)worst_c;
	(void)worst_hf32;
}

/* config.json of one family over another's tensors: refused, naming the
 * tensor (never loaded half right). */
static void refuse_as(const char *variant, const char *from, const char *to, const char *from2,
                      const char *to2, const char *want)
{
	char src[600], dir[64], p[700], cmd[1400];
	snprintf(src, sizeof(src), "%s/%s", g_dir, variant);
	strcpy(dir, "/tmp/sw_qwen_XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "cp '%s/model.safetensors' '%s/'", src, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(p, sizeof(p), "%s/config.json", src);
	size_t n;
	char *cfg = sw_read_file(p, SW_CAP_TEXT, &n);
	assert_non_null(cfg);
	for (int r = 0; r < 2; r++) {
		const char *a = r ? from2 : from, *b = r ? to2 : to;
		if (!a)
			continue;
		char *at = strstr(cfg, a);
		if (!at)
			fail_msg("%s/config.json has no %s", src, a);
		size_t len = strlen(cfg) - strlen(a) + strlen(b) + 1;
		char *nc = malloc(len);
		snprintf(nc, len, "%.*s%s%s", (int)(at - cfg), cfg, b, at + strlen(a));
		free(cfg);
		cfg = nc;
	}
	snprintf(p, sizeof(p), "%s/config.json", dir);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(cfg, f);
	fclose(f);
	free(cfg);
	sw_err err = { 0 };
	rt_model *m = rt_model_load(dir, &err);
	if (m)
		fail_msg("%s as %s: loaded", variant, to);
	if (!strstr(err.msg, want))
		fail_msg("%s as %s: message \"%s\" lacks \"%s\"", variant, to, err.msg, want);
	hf_rm_rf(dir, "/tmp/sw_qwen_");
}

static void test_hf_refusals(void **state)
{
	(void)state;
	if (!g_have)
		skip();
	refuse_as("qwen2", "\"model_type\": \"qwen2\"", "\"model_type\": \"qwen3\", \"head_dim\": 16",
	          "\"Qwen2ForCausalLM\"", "\"Qwen3ForCausalLM\"",
	          "_proj.bias\": expected no bias at all (model_type \"qwen3\"), found one");
	refuse_as("qwen2", "\"model_type\": \"qwen2\"", "\"model_type\": \"llama\"", NULL, NULL,
	          "$.architectures: expected [\"LlamaForCausalLM\"], found \"Qwen2ForCausalLM\"");
	refuse_as("qwen2", "\"model_type\": \"qwen2\"", "\"model_type\": \"llama\"",
	          "\"Qwen2ForCausalLM\"", "\"LlamaForCausalLM\"",
	          "_proj.bias\": expected no bias at all (model_type \"llama\"), found one");
	refuse_as("qwen3", "\"model_type\": \"qwen3\"", "\"model_type\": \"qwen2\"",
	          "\"Qwen3ForCausalLM\"", "\"Qwen2ForCausalLM\"",
	          "tensor \"model.layers.0.self_attn.q_proj.bias\" not found (expected shape [96])");
	refuse_as("qwen3", "\"head_dim\": 24", "\"head_dim\": 16", NULL, NULL,
	          "tensor \"model.layers.0.self_attn.q_proj.weight\": expected shape [64, 64], found [96, 64]");
	refuse_as("qwen3", "\"use_sliding_window\": false", "\"use_sliding_window\": true", NULL, NULL,
	          "$.use_sliding_window: expected false (sliding-window attention is not supported), found true");
	refuse_as("qwen3", "\"attention_bias\": false", "\"attention_bias\": true", NULL, NULL,
	          "$.attention_bias: expected false (qwen3 without biases), found true");
}

/* The CLI's host decoder on these files: `generate` prints transformers'
 * greedy tokens (the GGUF's stand-in tokenizer spells id i "<i>"), `run`
 * with a layer-skip or n-gram drafter prints the same, from the GGUF and
 * from the HF directory (--tokenizer the GGUF). */
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

static void test_cli(void **state)
{
	(void)state;
	if (!g_have)
		skip();
	static const char *const vs[] = { "qwen2", "qwen3" };
	for (int k = 0; k < 2; k++) {
		char dir[600], *text, ids[512] = "", want[1024] = "", got[2048], args[1600];
		snprintf(dir, sizeof(dir), "%s/%s", g_dir, vs[k]);
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
}

/* ---- without Python ---- */

/* m as a GGUF under llama.cpp's names for its architecture (f32), minus
 * tensor `drop` and plus a vector `extra` of length n_extra when given. */
static void write_gguf(const rt_model *m, const char *path, const char *arch, const char *drop,
                       const char *extra, int n_extra)
{
	const rt_config *c = &m->cfg;
	gguf_writer *w = gguf_writer_new(3, 32);
	char k[96];
#define KEY(s) (snprintf(k, sizeof(k), "%s.%s", arch, s), k)
	gguf_w_str(w, "general.architecture", arch);
	gguf_w_u32(w, KEY("block_count"), (uint32_t)c->n_layers);
	gguf_w_u32(w, KEY("context_length"), 4096);
	gguf_w_u32(w, KEY("embedding_length"), (uint32_t)c->dim);
	gguf_w_u32(w, KEY("feed_forward_length"), (uint32_t)c->ffn_dim);
	gguf_w_u32(w, KEY("attention.head_count"), (uint32_t)c->n_heads);
	gguf_w_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_heads);
	gguf_w_u32(w, KEY("attention.key_length"), (uint32_t)c->head_dim);
	gguf_w_u32(w, KEY("attention.value_length"), (uint32_t)c->head_dim);
	gguf_w_f32(w, KEY("rope.freq_base"), c->rope_theta);
	gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), c->norm_eps);
#undef KEY
	const size_t D = (size_t)c->dim, F = (size_t)c->ffn_dim, QD = (size_t)c->n_heads * c->head_dim,
	             KVD = (size_t)c->n_kv_heads * c->head_dim, V = (size_t)c->vocab, HD = (size_t)c->head_dim;
	struct { char name[64]; const float *p; uint64_t ne0, ne1; } t[256];
	int n = 0;
#define T2(nm, ptr, a, b) do { snprintf(t[n].name, 64, "%s", nm); t[n].p = ptr; t[n].ne0 = a; t[n].ne1 = b; n++; } while (0)
	T2("token_embd.weight", m->w.tok_embd, D, V);
	T2("output_norm.weight", m->w.out_norm, D, 0);
	if (!c->tied_embd)
		T2("output.weight", m->w.lm_head, D, V);
	for (int l = 0; l < c->n_layers; l++) {
		const rt_layer_weights *L = &m->w.layers[l];
		char nm[64];
#define LT(s, ptr, a, b) do { snprintf(nm, sizeof(nm), "blk.%d.%s", l, s); if (ptr) T2(nm, ptr, a, b); } while (0)
		LT("attn_norm.weight", L->attn_norm, D, 0);
		LT("attn_q.weight", L->wq, D, QD);
		LT("attn_k.weight", L->wk, D, KVD);
		LT("attn_v.weight", L->wv, D, KVD);
		LT("attn_q.bias", L->bq, QD, 0);
		LT("attn_k.bias", L->bk, KVD, 0);
		LT("attn_v.bias", L->bv, KVD, 0);
		LT("attn_q_norm.weight", L->q_norm, HD, 0);
		LT("attn_k_norm.weight", L->k_norm, HD, 0);
		LT("attn_output.weight", L->wo, QD, D);
		LT("ffn_norm.weight", L->ffn_norm, D, 0);
		LT("ffn_gate.weight", L->w_gate, D, F);
		LT("ffn_up.weight", L->w_up, D, F);
		LT("ffn_down.weight", L->w_down, F, D);
#undef LT
	}
	float *zeros = calloc((size_t)(n_extra > 0 ? n_extra : 1), sizeof(float));
	if (extra)
		T2(extra, zeros, (uint64_t)n_extra, 0);
#undef T2
	for (int i = 0; i < n; i++) {
		if (drop && !strcmp(drop, t[i].name))
			continue;
		uint64_t ne[2] = { t[i].ne0, t[i].ne1 };
		uint64_t cnt = t[i].ne0 * (t[i].ne1 ? t[i].ne1 : 1);
		gguf_w_tensor(w, t[i].name, GGML_T_F32, t[i].ne1 ? 2 : 1, ne, t[i].p, cnt * sizeof(float));
	}
	sw_err err = { 0 };
	if (gguf_writer_save(w, path, &err))
		fail_msg("%s", err.msg);
	gguf_writer_free(w);
	free(zeros);
}

static void test_gguf_roundtrip_and_refusals(void **state)
{
	(void)state;
	char dir[64], p[128];
	strcpy(dir, "/tmp/sw_qwen_XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/m.gguf", dir);
	const int32_t prompt[7] = { 3, 41, 5, 77, 12, 41, 5 };
	sw_err err = { 0 };
	for (int a = RT_ARCH_QWEN2; a <= RT_ARCH_QWEN3; a++) {
		rt_model *m = tu_tiny_qwen(a, 97, 48, 2, 4, 2, a == RT_ARCH_QWEN3 ? 20 : 12, 64, 5 + a);
		assert_non_null(m);
		const char *arch = rt_arch_name(a);
		write_gguf(m, p, arch, NULL, NULL, 0);
		rt_model *g = rt_model_load(p, &err);
		if (!g)
			fail_msg("%s", err.msg);
		assert_int_equal(g->cfg.arch, a);
		float *l1 = hf_prompt_logits(m, prompt, 7), *l2 = hf_prompt_logits(g, prompt, 7);
		assert_memory_equal(l1, l2, 7 * 97 * sizeof(float));
		free(l1);
		free(l2);
		rt_model_free(g);

		struct { const char *drop, *extra; int n; const char *want; } bad[] = {
			{ a == RT_ARCH_QWEN2 ? "blk.1.attn_k.bias" : "blk.1.attn_k_norm.weight", NULL, 0,
			  a == RT_ARCH_QWEN2 ? "missing tensor 'blk.1.attn_k.bias'" : "missing tensor 'blk.1.attn_k_norm.weight'" },
			{ NULL, "blk.0.attn_output.bias", 48, "tensor 'blk.0.attn_output.bias': expected no bias" },
			{ NULL, "output.bias", 97, "tensor 'output.bias': expected no bias" },
		};
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			write_gguf(m, p, arch, bad[i].drop, bad[i].extra, bad[i].n);
			assert_null(rt_model_load(p, &err));
			if (!strstr(err.msg, bad[i].want) || !strstr(err.msg, p))
				fail_msg("%s: message \"%s\" lacks \"%s\"", arch, err.msg, bad[i].want);
		}
		/* derive writes Llama GGUFs only; an engine binding is Llama's */
		assert_int_not_equal(rt_llama_save_gguf(m, p, GGML_T_F32, &err), 0);
		assert_non_null(strstr(err.msg, "architecture: expected llama"));
		assert_non_null(strstr(err.msg, arch));
		rt_model_free(m);
	}
	/* a Llama file with a bias tensor: refused, not dropped */
	rt_model *l = tu_tiny_llama(97, 48, 2, 4, 2, 64, 9);
	write_gguf(l, p, "llama", NULL, "blk.1.attn_q.bias", 48);
	assert_null(rt_model_load(p, &err));
	assert_non_null(strstr(err.msg, "tensor 'blk.1.attn_q.bias': expected no bias at all (general.architecture \"llama\")"));
	rt_model_free(l);
	unlink(p);
	rmdir(dir);
}

/* config.json defaults as transformers' Qwen2Config / Qwen3Config have
 * them (head_dim 128 for Qwen3 whatever hidden / heads is; context 32768),
 * and the families' refusals that need no checkpoint */
static void test_config(void **state)
{
	(void)state;
	static const char q3[] = "{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"intermediate_size\": 96, "
	                         "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 300}";
	static const char q2[] = "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 96, "
	                         "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_hidden_layers\": 2, "
	                         "\"vocab_size\": 300, \"attention_bias\": false, \"layer_types\": [\"full_attention\", "
	                         "\"full_attention\"]}";
	static const char q2w[] = "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 96, "
	                          "\"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"vocab_size\": 300, "
	                          "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}";
	rt_config c;
	sw_err err = { 0 };
	assert_int_equal(rt_llama_config_from_hf_json(q3, strlen(q3), "q3.json", &c, &err), 0);
	assert_int_equal(c.arch, RT_ARCH_QWEN3);
	assert_int_equal(c.head_dim, 128);
	assert_int_equal(c.max_ctx, 32768);
	assert_int_equal(c.n_kv_heads, 4);
	/* Qwen2 has its q/k/v biases whatever attention_bias says */
	assert_int_equal(rt_llama_config_from_hf_json(q2, strlen(q2), "q2.json", &c, &err), 0);
	assert_int_equal(c.arch, RT_ARCH_QWEN2);
	assert_int_equal(c.head_dim, 16);
	assert_int_equal(c.max_ctx, 32768);
	assert_int_not_equal(rt_llama_config_from_hf_json(q2w, strlen(q2w), "q2w.json", &c, &err), 0);
	assert_non_null(strstr(err.msg, "q2w.json:1:"));
	assert_non_null(strstr(err.msg, "$.layer_types[1]: expected \"full_attention\", found \"sliding_attention\""));
	/* an EAGLE-3 head config stays Llama-only */
	static const char *const e3[] = { "LlamaForCausalLMEagle3", NULL };
	assert_int_not_equal(rt_llama_config_from_hf_json_as(q3, strlen(q3), "e3.json", e3, &c, &err), 0);
	assert_non_null(strstr(err.msg, "$.model_type: expected \"llama\" (LlamaForCausalLM without biases), found \"qwen3\""));
	/* in-memory weights that do not fit their arch: refused, naming the array */
	rt_model *m = tu_tiny_qwen(RT_ARCH_QWEN2, 31, 16, 1, 2, 1, 8, 24, 3);
	assert_non_null(m);
	rt_config cfg = m->cfg;
	rt_weights w;
	size_t bytes = m->w.arena_bytes;
	w = m->w;
	w.arena = malloc(bytes);
	memcpy(w.arena, m->w.arena, bytes);
	/* the copy's pointers still point into m's arena; only the table matters */
	w.layers = w.arena;
	cfg.arch = RT_ARCH_QWEN3;
	assert_null(rt_model_from_weights(&cfg, &w, "q2-as-q3", &err));
	assert_non_null(strstr(err.msg, "q2-as-q3: layer 0 weight bq: expected absent for architecture qwen3, found present"));
	rt_model_free(m);
}

/* gen takes a Qwen target (gen/arch_qwen.c; its engines: test_qwen_engine.c) */
static void test_generator_takes_qwen(void **state)
{
	(void)state;
	char dir[64], p[128], spec[512];
	strcpy(dir, "/tmp/sw_qwen_XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/config.json", dir);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs("{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 64, "
	      "\"intermediate_size\": 96, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
	      "\"num_hidden_layers\": 2, \"vocab_size\": 300, \"tie_word_embeddings\": true}", f);
	fclose(f);
	snprintf(spec, sizeof(spec), "{\"target\": {\"path\": \"%s\"}, \"draft\": \"ngram\", \"tree\": "
	         "\"chain:4\", \"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, "
	         "\"max_context\": 256, \"dtype\": \"bf16\"}", dir);
	gen_spec s;
	sw_err err = { 0 };
	memset(&s, 0, sizeof(s));
	int rc = gen_spec_parse(spec, strlen(spec), "spec.json", NULL, &s, &err);
	if (rc)
		fail_msg("rc %d: %s", rc, err.msg);
	assert_int_equal(s.target.cfg.arch, RT_ARCH_QWEN2);
	unlink(p);
	rmdir(dir);
}

/* Greedy speculative decoding emits exactly the target-only tokens, with
 * n-gram, layer-skip and separate-model drafters over Qwen targets. */
static void test_spec_equals_target(void **state)
{
	(void)state;
	static const int32_t prompts[3][6] = { { 1, 2, 3, 1, 2, 3 }, { 50, 7, 7, 19, 88, 4 }, { 96, 0, 33, 33, 33, 33 } };
	sw_err err = { 0 };
	for (int a = RT_ARCH_QWEN2; a <= RT_ARCH_QWEN3; a++) {
		const int hd = a == RT_ARCH_QWEN3 ? 20 : 12;
		rt_model *t = tu_tiny_qwen(a, 97, 48, 4, 4, 2, hd, 64, 21 + a);
		rt_model *dm = tu_tiny_qwen(a, 97, 48, 1, 4, 1, hd, 32, 31 + a);
		rt_model *ls = rt_model_layerskip_parse(t, "0,2", &err);
		assert_non_null(t);
		assert_non_null(dm);
		if (!ls)
			fail_msg("%s", err.msg);
		uint64_t drafted[3] = { 0, 0, 0 };
		for (int pi = 0; pi < 3; pi++) {
			int32_t ref[48], out[48];
			const int N = 40;
			assert_int_equal(hf_greedy(t, prompts[pi], 6, N, ref), N);
			for (int d = 0; d < 3; d++) {
				rt_drafter *dr = d == 0 ? rt_drafter_ngram(1, 3, &err)
				                 : rt_drafter_model(d == 1 ? ls : dm, 256, &err);
				if (!dr)
					fail_msg("%s", err.msg);
				rt_ctx *c = rt_ctx_new(t, 256, 64, &err);
				assert_non_null(c);
				rt_gen_cfg cfg = { .samp = { 0.0f, 0, 1.0f }, .gamma = 4, .seed = 3, .max_new = N };
				rt_stats st;
				memset(&st, 0, sizeof(st));
				int n = rt_generate_spec(c, dr, prompts[pi], 6, &cfg, out, &st, &err);
				if (n != N)
					fail_msg("%s drafter %d: %d tokens: %s", rt_arch_name(a), d, n, err.msg);
				for (int j = 0; j < N; j++)
					if (out[j] != ref[j])
						fail_msg("%s prompt %d drafter %d: token %d is %d, target-only %d", rt_arch_name(a),
						         pi, d, j, out[j], ref[j]);
				drafted[d] += st.n_drafted;
				rt_ctx_free(c);
				rt_drafter_free(dr);
			}
		}
		for (int d = 0; d < 3; d++) /* every drafter proposed something */
			assert_true(drafted[d] > 0);
		rt_model_free(ls);
		rt_model_free(dm);
		rt_model_free(t);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_transformers),
		cmocka_unit_test(test_hf_refusals),
		cmocka_unit_test(test_cli),
		cmocka_unit_test(test_gguf_roundtrip_and_refusals),
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_generator_takes_qwen),
		cmocka_unit_test(test_spec_equals_target),
	};
	return cmocka_run_group_tests(tests, setup_hf, teardown_hf);
}
