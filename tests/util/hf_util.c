/* Shared by the tests against transformers: see hf_util.h. */
#include "hf_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/fileio.h"
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
