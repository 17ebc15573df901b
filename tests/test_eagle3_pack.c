/* The repository's packed EAGLE-3 heads (models/drafters/train/e3pack.py, the
 * I8 + NAME_scale matrices runtime/model/eagle3.c reads):
 *   - the files: config.json copied byte for byte, SHA256SUMS that sha256sum
 *     checks (and that fails on a flipped byte), every matrix I8 with one
 *     F16 scale per 32 codes, vectors and d2t as they were, no t2d;
 *   - the loaded weights against C's own Q8_0 (gguf_quantize +
 *     gguf_dequantize of the unpacked head, the arithmetic a gguf_a8 engine
 *     uploads with): equal bit for bit, and the engine's Q8_0 blocks of them
 *     equal byte for byte to those of the unpacked head (re-quantizing the
 *     packed values is lossless);
 *   - so a gguf_a8 engine drafts the same with either head: greedy chain:4
 *     on a tiny Q8_0 target, the same tokens, iterations and acceptance at
 *     every depth, and the same as its target-only;
 *   - the real head's shapes (SmolLM2-135M, Vd 4096, ffn 1536: the GPU
 *     head's config in models/drafters/smollm2-eagle3-gpu-record/) pack to
 *     at most 8,000,000 bytes and load; under a smaller --max-bytes the
 *     packer fails and leaves nothing;
 *   - malformed packed files refused naming the tensor, what was expected
 *     and what was found.
 * Needs python3 with torch (Debian's python3-torch; skipped without it) and
 * the real model for its shapes (SW_MODEL, default models/cache/...). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "e3_util.h"
#include "eagle3_util.h"
#include "engine/engine.h"
#include "engine_util.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/eagle3.h"
#include "shell_util.h"
#include "testutil.h"

#define PY "/usr/bin/python3"
#define PACK PY " models/drafters/train/e3pack.py"

static char g_out[1 << 16];
#define sh(...) tu_sh(g_out, sizeof(g_out), __VA_ARGS__)
static char g_dir[256], g_path[300], g_head[300], g_packed[300];
static rt_model *g_t;
static rt_eagle3 *g_h, *g_hq, *g_hp; /* unpacked; unpacked through C's Q8_0; packed */
static bool g_torch;

static const char *const MATS[] = {"fc", "wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down", "lm_head"};
static const char *const VECS[] = {"in_norm", "hid_norm", "ffn_norm", "out_norm", "d2t", "t2d"};

/* w (n floats, rows whole blocks of 32) := dequantize(quantize_q8_0(w)) */
static void q8_round(float *w, size_t n)
{
	void *b = malloc(n / 32 * 34);
	assert_non_null(b);
	gguf_quantize(GGML_T_Q8_0, w, n, b);
	assert_int_equal(gguf_dequantize(GGML_T_Q8_0, b, n, w), 0);
	free(b);
}

static int setup(void **state)
{
	(void)state;
	sw_err err = {0};
	g_torch = system(PY " -c 'import torch' >/dev/null 2>&1") == 0;
	if (!g_torch)
		return 0;
	eu_work_dir(g_dir, sizeof(g_dir), "test_eagle3_pack");
	snprintf(g_path, sizeof(g_path), "%s/tiny_q8.gguf", g_dir);
	rt_model *m = tu_tiny_llama(EU_TINY_VOCAB, 256, 3, 4, 2, 384, 7);
	if (rt_llama_save_gguf(m, g_path, GGML_T_Q8_0, &err)) {
		print_message("%s\n", err.msg);
		return -1;
	}
	rt_model_free(m);
	if (!(g_t = rt_model_load(g_path, &err))) {
		print_message("%s\n", err.msg);
		return -1;
	}
	snprintf(g_head, sizeof(g_head), "%s/head", g_dir);
	snprintf(g_packed, sizeof(g_packed), "%s/packed", g_dir);
	if (e3u_head60(g_head, g_t, 192, 5))
		return -1;
	if (sh(PACK " %s %s 2>&1", g_head, g_packed)) {
		print_message("e3pack.py: %s\n", g_out);
		return -1;
	}
	print_message("  %s", g_out);
	g_h = rt_eagle3_load(g_head, g_t, &err);
	g_hq = g_h ? rt_eagle3_load(g_head, g_t, &err) : NULL;
	g_hp = g_hq ? rt_eagle3_load(g_packed, g_t, &err) : NULL;
	if (!g_hp) {
		print_message("load: %s\n", err.msg);
		return -1;
	}
	for (size_t i = 0; i < sizeof(MATS) / sizeof(*MATS); i++) {
		size_t n;
		float *w = (float *)rt_e3_weight(g_hq, MATS[i], &n);
		q8_round(w, n);
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rt_eagle3_free(g_h);
	rt_eagle3_free(g_hq);
	rt_eagle3_free(g_hp);
	rt_model_free(g_t);
	if (g_torch)
		sh("rm -rf %s", g_dir);
	return 0;
}

#define NEED_TORCH()                                                                           \
	do {                                                                                   \
		if (!g_torch) {                                                                \
			print_message("  " PY " has no torch (Debian's python3-torch): skipped\n"); \
			skip();                                                                \
		}                                                                              \
	} while (0)

static void test_files(void **state)
{
	(void)state;
	NEED_TORCH();
	assert_int_equal(sh("cmp %s/config.json %s/config.json 2>&1", g_head, g_packed), 0);
	if (sh("cd %s && sha256sum -c SHA256SUMS 2>&1", g_packed))
		fail_msg("sha256sum -c: %s", g_out);
	assert_non_null(strstr(g_out, "config.json: OK"));
	assert_non_null(strstr(g_out, "model.safetensors: OK"));
	/* a flipped byte in a copy is caught */
	assert_int_equal(sh("cp -r %s %s/flip && printf '\\x01' | dd of=%s/flip/model.safetensors bs=1 seek=5000 "
	                    "conv=notrunc 2>/dev/null && cd %s/flip && sha256sum -c SHA256SUMS 2>&1", g_packed,
	                    g_dir, g_dir, g_dir) != 0, 1);
	assert_non_null(strstr(g_out, "model.safetensors: FAILED"));

	char path[400];
	snprintf(path, sizeof(path), "%s/model.safetensors", g_packed);
	safetensors_file *f = NULL, *o = NULL;
	sw_err err = {0};
	if (safetensors_open(path, &f, &err))
		fail_msg("%s", err.msg);
	snprintf(path, sizeof(path), "%s/model.safetensors", g_head);
	if (safetensors_open(path, &o, &err))
		fail_msg("%s", err.msg);
	int n_i8 = 0;
	for (size_t i = 0; i < o->n_tensors; i++) {
		const safetensors_tensor *a = &o->tensors[i], *p = safetensors_find(f, a->name);
		if (!strcmp(a->name, "t2d")) {
			assert_null(p);
			continue;
		}
		assert_non_null(p);
		if (a->n_dims == 2) {
			char sn[160];
			snprintf(sn, sizeof(sn), "%s_scale", a->name);
			const safetensors_tensor *s = safetensors_find(f, sn);
			assert_non_null(s);
			assert_int_equal(p->dtype, SAFETENSORS_I8);
			assert_int_equal(s->dtype, SAFETENSORS_F16);
			assert_int_equal(p->shape[0], a->shape[0]);
			assert_int_equal(p->shape[1], a->shape[1]);
			assert_int_equal(s->n_dims, 2);
			assert_int_equal(s->shape[0], a->shape[0]);
			assert_int_equal(s->shape[1], a->shape[1] / 32);
			n_i8++;
		} else { /* vectors and d2t: the same bytes */
			assert_int_equal(p->dtype, a->dtype);
			assert_int_equal(p->nbytes, a->nbytes);
			assert_memory_equal(p->data, a->data, a->nbytes);
		}
	}
	assert_int_equal(n_i8, 9); /* fc, q, k, v, o, gate, up, down, lm_head */
	assert_int_equal(f->n_tensors, o->n_tensors - 1 + 9);
	safetensors_free(f);
	safetensors_free(o);
}

/* The packed head's weights are C's Q8_0 of the unpacked ones, and a
 * gguf_a8 engine's upload of either is the same blocks. */
static void test_weights(void **state)
{
	(void)state;
	NEED_TORCH();
	for (size_t i = 0; i < sizeof(MATS) / sizeof(*MATS); i++) {
		size_t n, nq, np;
		const float *w = rt_e3_weight(g_h, MATS[i], &n), *q = rt_e3_weight(g_hq, MATS[i], &nq),
		            *p = rt_e3_weight(g_hp, MATS[i], &np);
		assert_true(n == nq && n == np && n % 32 == 0);
		size_t diff = 0, moved = 0;
		for (size_t k = 0; k < n; k++) {
			diff += memcmp(&p[k], &q[k], sizeof(*p)) != 0;
			moved += p[k] != w[k];
		}
		if (diff)
			fail_msg("%s: %zu of %zu packed weights differ from C's Q8_0 of the unpacked head", MATS[i], diff,
			         n);
		assert_true(moved > 0); /* the rounding is real (a copy would pass the rest trivially) */
		uint8_t *bw = malloc(n / 32 * 34), *bp = malloc(n / 32 * 34);
		assert_true(bw && bp);
		gguf_quantize(GGML_T_Q8_0, w, n, bw);
		gguf_quantize(GGML_T_Q8_0, p, n, bp);
		if (memcmp(bw, bp, n / 32 * 34))
			fail_msg("%s: the Q8_0 blocks of the packed weights are not the unpacked head's", MATS[i]);
		free(bw);
		free(bp);
		print_message("  %s: %zu weights, %zu moved by the rounding, blocks equal\n", MATS[i], n, moved);
	}
	for (size_t i = 0; i < sizeof(VECS) / sizeof(*VECS); i++) {
		size_t n, np;
		const float *w = rt_e3_weight(g_h, VECS[i], &n), *p = rt_e3_weight(g_hp, VECS[i], &np);
		assert_int_equal(n, np);
		assert_memory_equal(w, p, n * sizeof(*w));
	}
}

/* Every iteration's drafted chain (the engine's tree_tokens: the root and
 * gamma nodes), recorded. */
typedef struct drafts {
	rt_engine *e;
	int n;
	int32_t tok[64 * 5];
} drafts;

static int on_iteration(void *user, const int32_t *tok, int n)
{
	(void)tok;
	(void)n;
	drafts *r = user;
	sw_err err = {0};
	assert_true(r->n + 5 <= (int)(sizeof(r->tok) / sizeof(r->tok[0])));
	if (r->e->dev->ops->download(r->e->dev, r->tok + r->n, rt_engine_buf_addr(r->e, "tree_tokens"), 5 * 4,
	                             &err))
		fail_msg("%s", err.msg);
	r->n += 5;
	return 0;
}

/* A gguf_a8 engine drafts the same with the packed head as with the
 * unpacked one: every iteration's chain, the tokens, the acceptance at
 * every depth. */
static void test_engine_drafts(void **state)
{
	(void)state;
	NEED_TORCH();
	enum { P = 37, N = 40 };
	int32_t prompt[P], out[2][N];
	char spec[2048], dir[2][400];
	rt_engine_stats st[2];
	static drafts rec[2];
	eu_tiny_prompt(prompt, P);
	const char *heads[2] = {g_head, g_packed}, *what[2] = {"unpacked head", "packed head"};
	const rt_eagle3 *hs[2] = {g_h, g_hp};
	sw_err err = {0};
	for (int i = 0; i < 2; i++) {
		snprintf(dir[i], sizeof(dir[i]), "%s/engine%d", g_dir, i);
		e3u_spec(spec, sizeof(spec), "gguf_a8", g_path, heads[i], "chain:4", "greedy", "topk", 0, 192, 16);
		eu_build(spec, dir[i], eu_cache_dir(), false);
		rt_dev *d = eu_open_host(RT_HOST_NATIVE, eu_cache_dir());
		rec[i] = (drafts){.e = e3u_bind(dir[i], d, g_t, hs[i], 1)};
		rt_engine_run r = {.prompt = prompt, .n_prompt = P, .max_new = N, .eos = -1,
		                   .on_tokens = on_iteration, .cb_user = &rec[i]};
		if (rt_engine_generate(rec[i].e, &r, out[i], &st[i], &err) != N)
			fail_msg("%s: %s", what[i], err.msg);
		rt_engine_stats to;
		eu_check_target_only(rec[i].e, what[i], prompt, P, N, out[i], &to);
		rt_engine_free(rec[i].e);
		rt_dev_free(d);
	}
	assert_int_equal(rec[0].n, rec[1].n);
	for (int k = 0; k < rec[0].n; k++)
		if (rec[0].tok[k] != rec[1].tok[k])
			fail_msg("iteration %d, node %d: the packed head's engine drafted %d, the unpacked one's %d", k / 5,
			         k % 5, rec[1].tok[k], rec[0].tok[k]);
	assert_memory_equal(out[0], out[1], sizeof(out[0]));
	assert_int_equal(st[0].n_iters, st[1].n_iters);
	int distinct = 0; /* the drafts are tokens, not a constant */
	for (int k = 1; k < rec[0].n; k++)
		distinct += k % 5 && rec[0].tok[k] != rec[0].tok[1];
	assert_true(distinct > 0 && rec[0].n == 5 * st[0].n_iters);
	for (int k = 0; k < RT_ENGINE_MAX_DEPTH; k++) {
		assert_int_equal(st[0].pos_tried[k], st[1].pos_tried[k]);
		assert_int_equal(st[0].pos_accepted[k], st[1].pos_accepted[k]);
	}
	print_message("  gguf_a8 chain:4: %d iterations, the same %d drafted nodes with either head, the same "
	              "tokens and acceptance by depth\n", st[1].n_iters, 4 * st[1].n_iters);
}

/* The GPU head's shapes over SmolLM2: at most 8,000,000 bytes packed. */
static void test_real_size(void **state)
{
	(void)state;
	NEED_TORCH();
	const char *mp = getenv("SW_MODEL");
	mp = mp ? mp : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
	if (access(mp, R_OK))
		fail_msg("real model %s missing: run `make model`", mp);
	sw_err err = {0};
	rt_model *m = rt_model_load(mp, &err);
	if (!m)
		fail_msg("%s", err.msg);
	char head[400], out[400], small[400];
	snprintf(head, sizeof(head), "%s/real", g_dir);
	snprintf(out, sizeof(out), "%s/real_packed", g_dir);
	snprintf(small, sizeof(small), "%s/real_small", g_dir);
	mkdir(head, 0755);
	te3_opts o = te3_default(m);
	o.draft_vocab = 4096;
	o.ffn = 1536;
	assert_int_equal(m->cfg.dim, 576);
	assert_int_equal(o.n_heads, 9);
	assert_int_equal(o.n_kv_heads, 3);
	assert_int_equal(te3_write(head, m, &o, 3), 0);
	if (sh(PACK " %s %s 2>&1", head, out))
		fail_msg("e3pack.py: %s", g_out);
	struct stat sb;
	assert_int_equal(stat(out, &sb), 0);
	char path[500];
	snprintf(path, sizeof(path), "%s/model.safetensors", out);
	assert_int_equal(stat(path, &sb), 0);
	/* 7 446 528 codes, one 2-byte scale per 32, d2t, the norms, the header */
	const long long want = 7446528LL + 7446528LL / 16 + 4096 * 8;
	print_message("  the GPU head's shapes packed: %lld bytes (codes, scales and d2t %lld)\n",
	              (long long)sb.st_size, want);
	assert_true(sb.st_size >= want && sb.st_size <= 8000000);
	rt_eagle3 *h = rt_eagle3_load(out, m, &err);
	if (!h)
		fail_msg("%s", err.msg);
	rt_eagle3_free(h);
	/* over the limit: an error, nothing left behind */
	assert_int_equal(sh(PACK " %s %s --max-bytes 7000000 2>&1", head, small), 1);
	assert_non_null(strstr(g_out, "over the limit of 7000000"));
	assert_int_equal(sh("ls -d %s* 2>&1", small), 2);
	sh("rm -rf %s %s", head, out);
	rt_model_free(m);
}

/* A copy of the packed head with one change made by e3pack's own reader and
 * writer (python: `t` the tensor list, edited by code), loaded: refused with
 * want in the message. */
static void refused(const char *name, const char *code, const char *want)
{
	char dir[400];
	snprintf(dir, sizeof(dir), "%s/bad_%s", g_dir, name);
	if (sh("rm -rf %s && cp -r %s %s && " PY " -c 'import sys; sys.path.insert(0, \"models/drafters/train\"); "
	       "import e3pack as p, torch; f = \"%s/model.safetensors\"; t = p.read_safetensors(f); d = dict(t); "
	       "%s; p.write_safetensors(f, t, {})' 2>&1", dir, g_packed, dir, dir, code))
		fail_msg("%s: %s", name, g_out);
	sw_err err = {0};
	rt_eagle3 *h = rt_eagle3_load(dir, g_t, &err);
	if (h)
		fail_msg("%s: loaded", name);
	if (!strstr(err.msg, want) || !strstr(err.msg, dir))
		fail_msg("%s: expected '%s' (and the file), got: %s", name, want, err.msg);
	print_message("  %s: %s\n", name, err.msg);
}

static void test_refused(void **state)
{
	(void)state;
	NEED_TORCH();
	refused("no_scale", "t = [x for x in t if x[0] != \"fc.weight_scale\"]",
	        "tensor fc.weight: I8 needs its scales fc.weight_scale");
	refused("scale_shape", "t = [(n, v[:, :-1].contiguous() if n == \"fc.weight_scale\" else v) for n, v in t]",
	        "tensor fc.weight_scale: expected shape [256, G] with G dividing 768, found [256, 23]");
	refused("scale_dtype", "t = [(n, v.long() if n == \"lm_head.weight_scale\" else v) for n, v in t]",
	        "tensor lm_head.weight_scale: expected dtype F32, F16 or BF16, found I64");
	refused("stray_scale", "t = t + [(\"norm.weight_scale\", torch.ones(256, 8, dtype=torch.float16))]",
	        "tensor norm.weight_scale: scales for an I8 weight, but norm.weight is F32");
	refused("i8_vector", "t = [(n, v.to(torch.int8) if n == \"norm.weight\" else v) for n, v in t]",
	        "tensor norm.weight: expected dtype F32, F16 or BF16 (a vector), found I8");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_weights),
		cmocka_unit_test(test_engine_drafts),
		cmocka_unit_test(test_real_size),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
