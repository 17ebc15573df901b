/* Random weights for timing (rt_engine_bind_random, `run|profile ENGINE_DIR
 * --random-weights SEED`): every weight buffer of an engine, the target's,
 * a separate draft model's, a shape-only block drafter's and an EAGLE-3
 * head's by shape (config.json alone), is filled on
 * the device; downloaded, each equals kernels/ref/fill_random.c's values for
 * its (seed, buffer index, range) bit for bit, on the host (native op) and
 * in the emulator (the template), and inv_freq holds the RoPE frequencies.
 * The same seed gives the same tokens on host and host-emulate and on a
 * second bind; another seed other tokens. The head's id maps (d2t, t2d)
 * are a valid map (distinct target ids, t2d the inverse, -1 elsewhere). Engines that cannot take random
 * weights are refused: q8_0 (naming the dtype) and one without the fill
 * kernel (saying to rebuild). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "engine/random_weights.h"
#include "engine_util.h"
#include "kernels/ref/ref.h"

static char g_dir[256], g_cache[300], g_model[300];

static int setup(void **state)
{
	eu_work_dir(g_dir, sizeof(g_dir), "engine_random");
	snprintf(g_cache, sizeof(g_cache), "%s/cache", g_dir);
	return 0;
}

/* every weight buffer of e (bound) equals the reference fill of wseed */
static int check_buffers(rt_engine *e, uint64_t wseed)
{
	sw_err err = {0};
	int n_filled = 0;
	for (int i = 0; i < e->man->n_bufs; i++) {
		const rt_engine_buf *b = &e->man->bufs[i];
		if (strcmp(b->kind, "weight"))
			continue;
		void *got = malloc((size_t)b->bytes), *want = malloc((size_t)b->bytes);
		assert_non_null(got);
		assert_non_null(want);
		if (e->dev->ops->download(e->dev, got, rt_engine_buf_addr(e, b->name), (size_t)b->bytes, &err))
			fail_msg("%s", err.msg);
		float a, c;
		if (rt_engine_random_range(b, &a, &c)) {
			const int mode = !strcmp(b->dtype, "f32") ? REF_FILL_F32
			                 : !strcmp(b->dtype, "fp16") ? REF_FILL_F16 : REF_FILL_BF16;
			const uint64_t n = (uint64_t)b->bytes / (mode == REF_FILL_F32 ? 4 : 2);
			assert_int_equal(ref_fill_random(want, n, mode, wseed, (uint32_t)i, a, c), 0);
			if (memcmp(got, want, (size_t)b->bytes))
				fail_msg("%s (%s): buffer %s differs from the reference fill", e->man->dir,
				         e->dev->desc, b->name);
			n_filled++;
		} else if (rt_engine_random_map(b)) { /* checked as a pair by check_maps */
		} else { /* inv_freq: theta^(-2j/head_dim) */
			const float *f = got;
			const bool draft = !strncmp(b->name, "draft.", 6) && e->man->dcfg.head_dim;
			const double theta = draft ? e->man->dcfg.rope_theta : e->man->tcfg.rope_theta;
			const int64_t n = b->bytes / 4;
			for (int64_t j = 0; j < n; j++)
				assert_true(fabs(f[j] - pow(theta, -2.0 * j / (2.0 * n))) <= 1e-6 * fabs(f[j]) + 1e-12);
		}
		free(got);
		free(want);
	}
	return n_filled;
}

/* the id maps of e (bound) form a valid map: d2t Vd distinct target ids
 * in [0, V), t2d their inverse and -1 at every other id; *moved: how many
 * draft ids map to another target id than their own */
static void check_maps(rt_engine *e, int *moved)
{
	sw_err err = {0};
	const rt_engine_buf *bd = NULL, *bt = NULL;
	for (int i = 0; i < e->man->n_bufs; i++) {
		const rt_engine_buf *b = &e->man->bufs[i];
		if (!strcmp(b->name, "draft.d2t"))
			bd = b;
		if (!strcmp(b->name, "draft.t2d"))
			bt = b;
	}
	assert_non_null(bd);
	assert_non_null(bt);
	const int Vd = (int)(bd->bytes / 4), V = (int)(bt->bytes / 4);
	assert_int_equal(Vd, e->man->draft_vocab);
	assert_int_equal(V, e->man->tcfg.vocab);
	int32_t *d2t = malloc(sizeof(int32_t) * (size_t)(Vd + V)), *t2d = d2t + Vd;
	assert_non_null(d2t);
	if (e->dev->ops->download(e->dev, d2t, rt_engine_buf_addr(e, bd->name), (size_t)bd->bytes, &err) ||
	    e->dev->ops->download(e->dev, t2d, rt_engine_buf_addr(e, bt->name), (size_t)bt->bytes, &err))
		fail_msg("%s", err.msg);
	int mapped = 0;
	*moved = 0;
	for (int i = 0; i < Vd; i++) {
		assert_true(d2t[i] >= 0 && d2t[i] < V);
		assert_int_equal(t2d[d2t[i]], i); /* distinct: each target id has one draft id */
		*moved += d2t[i] != i;
	}
	for (int v = 0; v < V; v++) {
		assert_true(t2d[v] >= -1 && t2d[v] < Vd);
		mapped += t2d[v] >= 0;
	}
	assert_int_equal(mapped, Vd);
	free(d2t);
}

static rt_engine *bind_random(const char *dir, rt_dev *d, uint64_t wseed)
{
	sw_err err = {0};
	rt_engine *e = eu_load(dir);
	if (rt_engine_bind_random(e, d, wseed, 1, &err))
		fail_msg("bind_random (%s): %s", d->desc, err.msg);
	return e;
}

enum { P = 24, N = 16 };

/* tokens of dir with random weights wseed on host mode */
static void run(const char *dir, int mode, uint64_t wseed, int32_t *out, bool check)
{
	rt_dev *d = eu_open_host(mode, g_cache);
	rt_engine *e = bind_random(dir, d, wseed);
	if (check) {
		int n = check_buffers(e, wseed);
		printf("  %s: %d weight buffers equal the reference fill\n", d->desc, n);
		assert_true(n >= 10);
	}
	int32_t prompt[P];
	eu_tiny_prompt(prompt, P);
	rt_engine_stats st;
	assert_int_equal(eu_generate(e, d->desc, prompt, P, N, false, out, &st), N);
	rt_engine_free(e);
	rt_dev_free(d);
}

static void test_draft_model_engine(void **state)
{
	(void)state;
	char spec[2048], dir[300], dpath[320];
	rt_model *m = eu_tiny_model(g_dir, g_model, sizeof(g_model));
	snprintf(dpath, sizeof(dpath), "model:%s", g_model);
	eu_tiny_spec(spec, sizeof(spec), g_model, dpath, "chain:4", "greedy", "topk", 0, "fp16", NULL);
	snprintf(dir, sizeof(dir), "%s/model", g_dir);
	eu_build(spec, dir, g_cache, false);
	int32_t a[N], b[N], c[N], x[N];
	run(dir, RT_HOST_NATIVE, 5, a, true);
	run(dir, RT_HOST_EMULATE, 5, b, true);
	assert_memory_equal(a, b, sizeof(a));
	run(dir, RT_HOST_NATIVE, 5, c, false);
	assert_memory_equal(a, c, sizeof(a));
	run(dir, RT_HOST_NATIVE, 6, x, false);
	assert_memory_not_equal(a, x, sizeof(a));
	rt_model_free(m);
}

/* a block drafter by shape: no weights exist anywhere but on the device */
static void test_block_shape_engine(void **state)
{
	(void)state;
	static const char spec[] =
	        "{\"name\": \"tiny-block\", \"target\": {\"shape\": {\"n_layers\": 3, \"dim\": 256, "
	        "\"n_heads\": 4, \"n_kv_heads\": 2, \"ffn_dim\": 384, \"vocab\": 111, \"rope_theta\": 10000}}, "
	        "\"draft\": {\"method\": \"block\", \"steps\": 1, \"shape\": {\"conditioning\": \"features\", "
	        "\"block\": 4, \"draft_vocab\": 64, \"taps\": [0, 2], \"block_attention\": \"bidirectional\", "
	        "\"n_layers\": 1, \"n_heads\": 4, \"n_kv_heads\": 2, \"head_dim\": 64, \"ffn_dim\": 384, "
	        "\"norm_eps\": 1e-5, \"rope_theta\": 10000}}, \"tree\": \"chain:4\", "
	        "\"verify\": {\"method\": \"rrs\", \"expand\": \"sample\"}, "
	        "\"sampling\": {\"temperature\": 0.8, \"top_k\": 0, \"top_p\": 1}, "
	        "\"max_context\": 192, \"prefill_chunk\": 16, \"dtype\": \"bf16\", \"archs\": [\"sm_80\"]}";
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/block", g_dir);
	eu_build(spec, dir, g_cache, false);
	int32_t a[N], b[N];
	run(dir, RT_HOST_NATIVE, 11, a, true);
	run(dir, RT_HOST_EMULATE, 11, b, true);
	assert_memory_equal(a, b, sizeof(a));
}

/* an EAGLE-3 head by shape (config.json alone, Vd < V) over a target
 * shape: its id maps are synthesised valid, the weights drawn */
static void test_eagle3_shape_engine(void **state)
{
	(void)state;
	char head[300], path[400], dir[300], spec[2048];
	snprintf(head, sizeof(head), "%s/e3head", g_dir);
	snprintf(path, sizeof(path), "%s/config.json", head);
	mkdir(head, 0755);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"architectures\": [\"LlamaForCausalLMEagle3\"], \"model_type\": \"llama\", "
	      "\"hidden_size\": 256, \"intermediate_size\": 192, \"num_attention_heads\": 4, "
	      "\"num_key_value_heads\": 2, \"num_hidden_layers\": 1, \"vocab_size\": 111, "
	      "\"draft_vocab_size\": 40, \"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0, "
	      "\"eagle_config\": {\"eagle_aux_hidden_state_layer_ids\": [0, 1, 2]}}\n", f);
	fclose(f);
	snprintf(spec, sizeof(spec),
	         "{\"name\": \"tiny-e3-shape\", \"target\": {\"shape\": {\"n_layers\": 3, \"dim\": 256, "
	         "\"n_heads\": 4, \"n_kv_heads\": 2, \"ffn_dim\": 384, \"vocab\": 111, \"rope_theta\": 10000}}, "
	         "\"draft\": {\"method\": \"eagle3\", \"path\": \"%s\"}, \"tree\": \"chain:3\", "
	         "\"verify\": {\"method\": \"greedy\", \"expand\": \"topk\"}, "
	         "\"sampling\": {\"temperature\": 0, \"top_k\": 0, \"top_p\": 1}, "
	         "\"max_context\": 192, \"prefill_chunk\": 16, \"dtype\": \"bf16\", \"archs\": [\"sm_80\"]}",
	         head);
	snprintf(dir, sizeof(dir), "%s/e3", g_dir);
	eu_build(spec, dir, g_cache, false);
	int32_t a[N], b[N];
	for (int mode = 0; mode < 2; mode++) {
		rt_dev *d = eu_open_host(mode ? RT_HOST_EMULATE : RT_HOST_NATIVE, g_cache);
		rt_engine *e = bind_random(dir, d, 13);
		int moved = 0, n = check_buffers(e, 13);
		check_maps(e, &moved);
		printf("  %s: %d weight buffers equal the reference fill; d2t/t2d a valid map "
		       "(%d of %d draft ids moved)\n", d->desc, n, moved, e->man->draft_vocab);
		assert_true(n >= 10);
		assert_true(moved > 0);
		int32_t prompt[P];
		eu_tiny_prompt(prompt, P);
		rt_engine_stats st;
		assert_int_equal(eu_generate(e, d->desc, prompt, P, N, false, mode ? b : a, &st), N);
		rt_engine_free(e);
		rt_dev_free(d);
	}
	assert_memory_equal(a, b, sizeof(a));
	unlink(path);
	rmdir(head);
}

static void test_refusals(void **state)
{
	(void)state;
	char spec[2048], dir[300], path[400];
	sw_err err = {0};
	eu_tiny_spec(spec, sizeof(spec), g_model, "ngram", "chain:4", "greedy", "topk", 0, "q8_0", NULL);
	snprintf(dir, sizeof(dir), "%s/q8", g_dir);
	eu_build(spec, dir, g_cache, false);
	rt_engine *e = rt_engine_load(dir, &err);
	assert_non_null(e);
	rt_dev *d = eu_open_host(RT_HOST_NATIVE, g_cache);
	assert_int_not_equal(rt_engine_bind_random(e, d, 1, 1, &err), 0);
	assert_non_null(strstr(err.msg, "$.spec.dtype is \"q8_0\""));
	rt_engine_free(e);

	/* an engine from before the kernel: its entry renamed away in engine.json */
	eu_tiny_spec(spec, sizeof(spec), g_model, "ngram", "chain:4", "greedy", "topk", 0, "fp16", NULL);
	snprintf(dir, sizeof(dir), "%s/old", g_dir);
	eu_build(spec, dir, g_cache, false);
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *t = strstr(buf, "templates/fill_random.cu.tmpl");
	assert_non_null(t);
	memcpy(t + strlen("templates/"), "fill_rAndom", 11);
	f = fopen(path, "wb");
	assert_non_null(f);
	fwrite(buf, 1, n, f);
	fclose(f);
	eu_resum(dir); /* an engine built before the fill kernel, not an edited one */
	e = rt_engine_load(dir, &err);
	if (!e)
		fail_msg("%s", err.msg);
	assert_int_not_equal(rt_engine_bind_random(e, d, 1, 1, &err), 0);
	assert_non_null(strstr(err.msg, "no fill_random kernel"));
	assert_non_null(strstr(err.msg, "rebuild it"));
	rt_engine_free(e);
	rt_dev_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_draft_model_engine),
		cmocka_unit_test(test_block_shape_engine),
		cmocka_unit_test(test_eagle3_shape_engine),
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
