/* Engine tests' common ground (engine_util.h). */
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

#include "gen/build.h"
#include "gen/jit/emu_build.h"
#include "engine_util.h"
#include "decode/sampler.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "core/sha256.h"
#include "formats/engine_files.h"
#include "formats/gguf.h"
#include "model/eagle3.h"
#include "cli/cli.h"
#include "testutil.h"

rt_dev *eu_open_host(int mode, const char *cache_dir)
{
	sw_err err = {0};
	const rt_dev_opts o = {.cache_dir = cache_dir, .emu_compile = gen_emu_module_build};
	rt_dev *d = rt_dev_host_new(mode, &o, &err);
	if (!d)
		fail_msg("host backend: %s", err.msg);
	return d;
}

static char g_cache_dir[600];

void eu_work_dir(char *dir, size_t n, const char *name)
{
	snprintf(dir, n, "build/%s.%d", name, (int)getpid());
	mkdir("build", 0755);
	mkdir(dir, 0755);
	snprintf(g_cache_dir, sizeof(g_cache_dir), "%s/cache", dir);
	mkdir(g_cache_dir, 0755);
}

const char *eu_cache_dir(void)
{
	return g_cache_dir;
}

rt_model *eu_tiny_model(const char *dir, char *path, size_t n)
{
	sw_err err = {0};
	rt_model *m = tu_tiny_llama(EU_TINY_VOCAB, 256, 3, 4, 2, 384, 7);
	if (!m)
		fail_msg("tu_tiny_llama failed");
	snprintf(path, n, "%s/tiny.gguf", dir);
	if (rt_llama_save_gguf(m, path, GGML_T_F32, &err))
		fail_msg("%s: %s", path, err.msg);
	return m;
}

void eu_tiny_spec(char *buf, size_t n, const char *model_path, const char *draft, const char *tree,
                  const char *verify, const char *expand, double temp, const char *dtype,
                  const char *extra)
{
	snprintf(buf, n,
	         "{\"name\": \"tiny\", \"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": \"%s\"}, "
	         "\"tree\": \"%s\", \"verify\": {\"method\": \"%s\", \"expand\": \"%s\"}, "
	         "\"sampling\": {\"temperature\": %g, \"top_k\": 0, \"top_p\": 1}, "
	         "\"max_context\": 192, \"prefill_chunk\": 16, \"dtype\": \"%s\", "
	         "\"archs\": [\"sm_80\"]%s%s}",
	         model_path, draft, tree, verify, expand, temp, dtype, extra && *extra ? ", " : "",
	         extra ? extra : "");
}

void eu_tiny_prompt(int32_t *p, int n)
{
	uint64_t s = 99;
	for (int i = 0; i < n; i++)
		p[i] = i >= 12 && (i % 3) ? p[i - 12] : (int32_t)(tu_rand(&s) % EU_TINY_VOCAB);
}

void eu_build(const char *spec_json, const char *dir, const char *cache_dir, bool compile)
{
	char sp[600];
	sw_err err = {0};
	gen_spec *s = malloc(sizeof(*s));
	assert_non_null(s);
	snprintf(sp, sizeof(sp), "%s.spec.json", dir);
	FILE *f = fopen(sp, "w");
	assert_non_null(f);
	fputs(spec_json, f);
	fclose(f);
	if (gen_spec_load(sp, NULL, s, &err))
		fail_msg("%s", err.msg);
	gen_build_opts o = {.out_dir = dir, .cache_dir = cache_dir, .no_compile = !compile};
	gen_build_stats st;
	if (gen_build(s, &o, &st, &err))
		fail_msg("build %s: %s", dir, err.msg);
	free(s);
}

rt_engine *eu_load(const char *dir)
{
	sw_err err = {0};
	rt_engine *e = rt_engine_load(dir, &err);
	if (!e)
		fail_msg("%s", err.msg);
	return e;
}

rt_engine *eu_bind(const char *dir, rt_dev *d, const rt_model *m, uint64_t seed)
{
	sw_err err = {0};
	rt_engine *e = eu_load(dir);
	if (e->man->draft_kind == RT_ENGINE_DRAFT_BLOCK) {
		/* the drafter directory the engine names: bind uploads its tensors,
		 * so it is not needed afterwards */
		rt_block_drafter *bd = rt_block_drafter_load(e->man->draft_path, m, &err);
		if (!bd)
			fail_msg("block drafter: %s", err.msg);
		int rc = cli_engine_bind_block(e, d, m, bd, seed, &err);
		rt_block_drafter_free(bd);
		if (rc)
			fail_msg("bind (%s): %s", d->desc, err.msg);
		return e;
	}
	if (e->man->draft_kind == RT_ENGINE_DRAFT_EAGLE3) {
		/* the head directory the engine names, uploaded at bind */
		rt_eagle3 *h = rt_eagle3_load(e->man->draft_path, m, &err);
		if (!h)
			fail_msg("EAGLE-3 head: %s", err.msg);
		int rc = cli_engine_bind_eagle3(e, d, m, h, seed, &err);
		rt_eagle3_free(h);
		if (rc)
			fail_msg("bind (%s): %s", d->desc, err.msg);
		return e;
	}
	if (cli_engine_bind(e, d, m, NULL, seed, &err))
		fail_msg("bind (%s): %s", d->desc, err.msg);
	return e;
}

int eu_generate(rt_engine *e, const char *what, const int32_t *prompt, int n_prompt, int max_new,
                bool eager, int32_t *out, rt_engine_stats *st)
{
	return eu_generate_samp(e, what, prompt, n_prompt, max_new, eager, NULL, out, st);
}

int eu_generate_samp(rt_engine *e, const char *what, const int32_t *prompt, int n_prompt,
                     int max_new, bool eager, const rt_engine_sampling *samp, int32_t *out,
                     rt_engine_stats *st)
{
	sw_err err = {0};
	rt_engine_run r = {.prompt = prompt, .n_prompt = n_prompt, .max_new = max_new, .eos = -1,
	                   .eager = eager, .samp = samp};
	int n = rt_engine_generate(e, &r, out, st, &err);
	if (n < 0)
		fail_msg("generate (%s, %s): %s", what, e->dev->desc, err.msg);
	print_message("  %-30s %s: %d tokens, %d iterations (tau %.2f), prefill %.3f s, capture "
	              "%.3f s, decode %.3f s\n", what, eager ? "eager" : "graph", n, st->n_iters,
	              st->n_iters ? (double)n / st->n_iters : 0.0, st->t_prefill, st->t_capture,
	              st->t_decode);
	return n;
}

void eu_check_target_only(rt_engine *e, const char *what, const int32_t *prompt, int n_prompt,
                          int max_new, const int32_t *want, rt_engine_stats *st)
{
	sw_err err = {0};
	int32_t *out = malloc(sizeof(*out) * (size_t)max_new);
	assert_non_null(out);
	rt_engine_run r = {.prompt = prompt, .n_prompt = n_prompt, .max_new = max_new, .eos = -1,
	                   .target_only = true};
	if (rt_engine_generate(e, &r, out, st, &err) != max_new)
		fail_msg("%s target-only: %s", what, err.msg);
	for (int i = 0; i < max_new; i++)
		if (out[i] != want[i])
			fail_msg("%s: token %d is %d, target-only %d", what, i, want[i], out[i]);
	free(out);
}

int eu_agree_prefix(const char *what, const int32_t *got, const int32_t *ref, const float *margin,
                    int n, double bound)
{
	int k = 0;
	while (k < n && got[k] == ref[k])
		k++;
	if (k < n && margin[k] > bound)
		fail_msg("%s: token %d is %d, the reference's %d wins by %.5f > %.5f", what, k, got[k],
		         ref[k], (double)margin[k], bound);
	print_message("  %-34s %d/%d tokens identical to the fp32 target-only reference%s\n", what, k,
	              n, k < n ? " (then a near-tie)" : "");
	return k;
}

void eu_list_file(const char *dir, const char *name)
{
	char path[1200];
	size_t n = 0, jl = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	char *data = sw_read_file(path, SW_CAP_IMAGE, &n);
	assert_non_null(data);
	char h[65];
	sw_sha256 sh;
	sw_sha256_init(&sh);
	sw_sha256_update(&sh, data, n);
	sw_sha256_hex(&sh, h);
	free(data);
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	char *json = sw_read_file(path, SW_CAP_IMAGE, &jl);
	assert_non_null(json);
	char *at = strstr(json, "\"files\": {");
	assert_non_null(at);
	at += strlen("\"files\": {");
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%.*s\n    \"%s\": {\"bytes\": %zu, \"sha256\": \"%s\"},%s", (int)(at - json), json,
	        name, n, h, at);
	assert_int_equal(fclose(f), 0);
	free(json);
	eu_resum(dir);
}

void eu_resum(const char *dir)
{
	char path[1200];
	size_t jl = 0;
	snprintf(path, sizeof(path), "%s/engine.json", dir);
	char *json = sw_read_file(path, SW_CAP_ENGINE_JSON, &jl);
	assert_non_null(json);
	snprintf(path, sizeof(path), "%s/" RT_ENGINE_SUM, dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	char h[65];
	sw_sha256 sh;
	sw_sha256_init(&sh);
	sw_sha256_update(&sh, json, jl);
	sw_sha256_hex(&sh, h);
	fprintf(f, "{\"engine.json\": {\"bytes\": %zu, \"sha256\": \"%s\"}}\n", jl, h);
	assert_int_equal(fclose(f), 0);
	free(json);
}

void eu_reference(const rt_model *m, const int32_t *prompt, int n_prompt, int n, int32_t *out,
                      float *margin, double *max_logit)
{
	sw_err err = {0};
	const int V = m->cfg.vocab;
	rt_ctx *c = rt_ctx_new(m, n_prompt + n + 8, n_prompt + 8, &err);
	float *lg = malloc(sizeof(*lg) * (size_t)V);
	assert_non_null(c);
	assert_non_null(lg);
	if (rt_ctx_feed(c, prompt, n_prompt, lg, &err))
		fail_msg("%s", err.msg);
	if (max_logit) {
		*max_logit = 0;
		for (int v = 0; v < V; v++)
			*max_logit = fmax(*max_logit, fabs(lg[v]));
	}
	for (int i = 0; i < n; i++) {
		out[i] = rt_argmax(lg, V);
		float second = -INFINITY;
		for (int v = 0; v < V; v++)
			if (v != out[i] && lg[v] > second)
				second = lg[v];
		margin[i] = lg[out[i]] - second;
		if (i + 1 < n && rt_ctx_feed(c, &out[i], 1, lg, &err))
			fail_msg("%s", err.msg);
	}
	free(lg);
	rt_ctx_free(c);
}

void eu_count_pairs(rt_engine *e, eu_pairs *p, const char *what)
{
	sw_err err = {0};
	const rt_graph *graph = NULL;
	memset(p->counts, 0, sizeof(*p->counts) * (size_t)p->vocab * p->vocab);
	for (int r = 0; r < p->runs; r++) {
		int32_t out[RT_ENGINE_MAX_DEPTH + 2];
		rt_engine_stats st;
		rt_engine_run run = {.prompt = p->prompt, .n_prompt = p->n_prompt, .max_new = 2,
		                     .eos = -1, .samp = p->samp};
		if (rt_engine_reseed(e, p->seed++, &err) ||
		    rt_engine_generate(e, &run, out, &st, &err) != 2)
			fail_msg("%s run %d: %s", what, r, err.msg);
		p->counts[out[0] * p->vocab + out[1]]++;
		p->iters += st.n_iters;
		p->captures += st.t_capture > 0;
		p->pad_first += p->pad_from >= 0 && out[0] >= p->pad_from;
		if (!graph)
			graph = e->graph;
		if (e->graph != graph)
			fail_msg("%s: the graph changed at run %d", what, r);
	}
}

void eu_check_point_mass(const double *pk, const uint64_t *counts, int K, int V, int runs,
                         const char *what)
{
	int mode = 0;
	for (int i = 1; i < K; i++)
		mode = pk[i] > pk[mode] ? i : mode;
	assert_true(pk[mode] == 1.0); /* a point mass at temperature 0 */
	print_message("  %s T 0: %llu of %d runs (one seed each) emit the greedy sequence %d %d\n",
	              what, (unsigned long long)counts[mode], runs, mode / V, mode % V);
	if (counts[mode] != (uint64_t)runs)
		fail_msg("%s at temperature 0: %llu of %d runs left the greedy sequence", what,
		         (unsigned long long)(runs - counts[mode]), runs);
}

double *eu_seq_dists(const rt_model *m, const int32_t *prompt, int n_prompt,
                     const rt_engine_sampling *set, int n_set)
{
	const size_t K = (size_t)m->cfg.vocab * (size_t)m->cfg.vocab;
	double *probs = malloc(sizeof(*probs) * K * (size_t)n_set);
	assert_non_null(probs);
	for (int k = 0; k < n_set; k++) {
		rt_sampling samp = {.temperature = set[k].temperature, .top_k = set[k].top_k,
		                    .top_p = set[k].top_p};
		tu_seq_dist(m, prompt, n_prompt, 2, &samp, probs + (size_t)k * K);
	}
	return probs;
}

int eu_sample_pairs(rt_engine *e, const char *what, const int32_t *prompt, int n_prompt,
                    const rt_engine_sampling *samp, int n, uint64_t *seed, uint64_t *counts,
                    int V, int *captures)
{
	sw_err err = {0};
	int iters = 0;
	memset(counts, 0, sizeof(*counts) * (size_t)V * (size_t)V);
	for (int r = 0; r < n; r++) {
		int32_t out[4];
		rt_engine_stats st;
		rt_engine_run run = {.prompt = prompt, .n_prompt = n_prompt, .max_new = 2, .eos = -1,
		                     .samp = samp};
		if (rt_engine_reseed(e, (*seed)++, &err) || rt_engine_generate(e, &run, out, &st, &err) != 2)
			fail_msg("%s run %d: %s", what, r, err.msg);
		counts[out[0] * V + out[1]]++;
		iters += (int)st.n_iters;
		*captures += st.t_capture > 0;
	}
	return iters;
}
