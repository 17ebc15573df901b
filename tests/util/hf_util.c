/* Shared by the tests against transformers: see hf_util.h. */
#include "hf_util.h"

#include <math.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "check.h"
#include "core/fileio.h"
#include "engine_util.h"
#include "decode/chain.h"
#include "model/ctx.h"

const char *hf_python(void)
{
	static char p[512];
	const char *b = getenv("BUILD");
	snprintf(p, sizeof(p), "%s/venv-hf/bin/python", b && b[0] ? b : "build");
	return p;
}

int hf_run(const char *dir, const char *args)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 %s tests/tools/hf_tiny.py %s %s >/dev/null 2>&1",
	         hf_python(), dir, args);
	if (system(cmd) != 0) {
		fprintf(stderr, "%s failed\n", cmd);
		return -1;
	}
	return 0;
}

int hf_make(const char *tmpl, char *dir, size_t cap, const char *const *variants, int n)
{
	char cmd[1024], args[1024] = "";
	snprintf(cmd, sizeof(cmd), "%s -c 'import transformers, gguf' >/dev/null 2>&1", hf_python());
	if (access(hf_python(), X_OK) || system(cmd) != 0)
		return 0;
	snprintf(dir, cap, "%s", tmpl);
	if (!mkdtemp(dir))
		return -1;
	int k = 0;
	for (int i = 0; i < n; i++)
		k += snprintf(args + k, sizeof(args) - (size_t)k, " %s", variants[i]);
	return hf_run(dir, args) ? -1 : 1;
}

void hf_rm_rf(const char *dir, const char *prefix)
{
	char cmd[700];
	if (!dir[0] || strncmp(dir, prefix, strlen(prefix)))
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

const json_value *hf_jget(const json_value *o, const char *k)
{
	const json_value *v = json_get(o, k);
	if (!v)
		fail_msg("ref.json: %s missing", k);
	return v;
}

json_value *hf_load_ref(const char *dir, char **text)
{
	char p[700];
	size_t n;
	sw_err err = { 0 };
	snprintf(p, sizeof(p), "%s/ref.json", dir);
	*text = sw_read_file(p, SW_CAP_TEXT, &n);
	assert_non_null(*text);
	json_value *ref = json_parse(*text, n, p, &err);
	if (!ref)
		fail_msg("%s", err.msg);
	return ref;
}

float *hf_prompt_logits(const rt_model *m, const int32_t *tok, int T)
{
	sw_err err = { 0 };
	assert_true(T <= 64);
	rt_ctx *c = rt_ctx_new(m, 256, 64, &err);
	if (!c)
		fail_msg("%s", err.msg);
	int32_t pos[64];
	for (int t = 0; t < T; t++)
		pos[t] = t;
	float *lg = malloc((size_t)T * m->cfg.vocab * sizeof(float));
	assert_non_null(lg);
	if (rt_ctx_eval(c, tok, pos, T, NULL, lg, NULL, &err))
		fail_msg("%s", err.msg);
	rt_ctx_free(c);
	return lg;
}

int hf_greedy(const rt_model *m, const int32_t *prompt, int n_prompt, int n, int32_t *out)
{
	sw_err err = { 0 };
	rt_ctx *c = rt_ctx_new(m, 256, 64, &err);
	assert_non_null(c);
	rt_gen_cfg cfg = { .samp = { 0.0f, 0, 1.0f }, .gamma = 4, .seed = 1, .max_new = n };
	rt_stats st;
	int got = rt_generate_target(c, prompt, n_prompt, &cfg, out, &st, &err);
	if (got < 0)
		fail_msg("%s", err.msg);
	rt_ctx_free(c);
	return got;
}

double hf_engine_check(const char *what, const char *edir, const char *cache, int mode,
                       const rt_model *m, const json_value *ref, const int32_t *prompt, int T,
                       const int32_t *host, int per_layer)
{
	sw_err err = {0};
	const int V = m->cfg.vocab, L = m->cfg.n_layers;
	const json_value *l64 = hf_jget(ref, "logits64"), *ab = hf_jget(ref, "abs"),
	                 *jg = hf_jget(ref, "greedy"), *jm = hf_jget(ref, "margin");
	const int N = (int)jg->n;
	int K = m->cfg.dim > m->cfg.ffn_dim ? m->cfg.dim : m->cfg.ffn_dim;
	if (m->cfg.n_heads * m->cfg.head_dim > K)
		K = m->cfg.n_heads * m->cfg.head_dim;
	if (T > K)
		K = T;
	const double u = ldexp(1.0, -11), c = 2.0 * (per_layer * L + 2) * (2 * u + gamma_n(K));

	rt_dev *d = eu_open_host(mode, cache);
	rt_engine *e = eu_bind(edir, d, m, 1);
	int32_t out[64], other[64];
	rt_engine_stats st;
	assert_true(N <= 64);
	/* one token: the first iteration's root row is the prompt's last */
	assert_int_equal(eu_generate(e, what, prompt, T, 1, false, out, &st), 1);
	const float *lg = (const float *)(uintptr_t)rt_engine_buf_addr(e, "logits");
	assert_non_null(lg);
	double worst = 0, mx = 0;
	for (int i = 0; i < V; i++) {
		mx = fmax(mx, fabs(l64->items[T - 1]->items[i]->number));
		const double r = l64->items[T - 1]->items[i]->number, s = ab->items[T - 1]->items[i]->number;
		const double err_i = fabs((double)lg[i] - r);
		if (!isfinite(lg[i]) || err_i > c * s)
			fail_msg("%s: logit %d = %.9g, transformers (float64) %.9g: error %.3g over the bound "
			         "%.3g", what, i, (double)lg[i], r, err_i, c * s);
		worst = fmax(worst, err_i / (c * s));
	}
	assert_int_equal(eu_generate(e, what, prompt, T, N, false, out, &st), N);
	for (int j = 0; j < N; j++) {
		if (!(jm->items[j]->number > 8.0 * u * mx))
			fail_msg("%s: step %d: transformers' margin %.3g is a near tie (the fixture "
			         "changed?)", what, j, jm->items[j]->number);
		if (out[j] != (int32_t)jg->items[j]->integer)
			fail_msg("%s: greedy step %d: %d, transformers %d (margin %.3g)", what, j, out[j],
			         (int)jg->items[j]->integer, jm->items[j]->number);
		if (out[j] != host[j])
			fail_msg("%s: greedy step %d: %d, the host decoder %d", what, j, out[j], host[j]);
	}
	if (mode == RT_HOST_NATIVE) {
		assert_int_equal(eu_generate(e, what, prompt, T, N, true, other, &st), N);
		for (int j = 0; j < N; j++)
			if (other[j] != out[j])
				fail_msg("%s: token %d: graph %d, eager %d", what, j, out[j], other[j]);
		rt_engine_run r = {.prompt = prompt, .n_prompt = T, .max_new = N, .eos = -1,
		                   .target_only = true};
		if (rt_engine_generate(e, &r, other, &st, &err) != N)
			fail_msg("%s target-only: %s", what, err.msg);
		for (int j = 0; j < N; j++)
			if (other[j] != out[j])
				fail_msg("%s: token %d: speculative %d, target-only %d", what, j, out[j], other[j]);
	}
	print_message("  %-44s logits within %.3f of the bound, %d/%d greedy == transformers == "
	              "host%s\n", what, worst, N, N,
	              mode == RT_HOST_NATIVE ? ", graph == eager == target-only" : "");
	rt_engine_free(e);
	rt_dev_free(d);
	return worst;
}

void hf_fixture_load(const char *dir, hf_fixture *f)
{
	sw_err err = {0};
	float margin[64];
	memset(f, 0, sizeof(*f));
	f->ref = hf_load_ref(dir, &f->text);
	const json_value *jp = hf_jget(f->ref, "prompt");
	f->T = (int)jp->n;
	f->N = (int)hf_jget(f->ref, "greedy")->n;
	assert_true(f->T <= 64 && f->N <= 64);
	for (int t = 0; t < f->T; t++)
		f->prompt[t] = (int32_t)jp->items[t]->integer;
	if (!(f->m = rt_model_load(dir, &err)))
		fail_msg("%s: %s", dir, err.msg);
	eu_reference(f->m, f->prompt, f->T, f->N, f->host, margin, NULL);
}

void hf_fixture_free(hf_fixture *f)
{
	rt_model_free(f->m);
	json_free(f->ref);
	free(f->text);
	memset(f, 0, sizeof(*f));
}
