/* The deployable runtime (libspecwright_rt.a: core, formats, device, engine,
 * kernels): a tiny program linked against it alone (tests/deploy/
 * sw_tiny_run.c, built by the Makefile) runs a built engine from its
 * directory and a GGUF, as a subprocess; its tokens must equal what the same
 * engine gives through the full library (weights from the model/ loader) and
 * the greedy target-only reference of model/'s fp32 forward pass (the
 * independent check). The archive's undefined symbols are checked against
 * everything gen/, decode/, model/ and cli/ define; host-emulate without the
 * generator's compiler is refused; the GGUF weight source gives the model
 * loader's values bit for bit. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "device/device.h"
#include "engine/engine.h"
#include "engine/weights_gguf.h"
#include "engine_util.h"
#include "decode/sampler.h"
#include "formats/gguf.h"
#include "testutil.h"

static char g_dir[256];
static rt_model *g_tiny;
static char g_tiny_path[300];

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");
	return b && *b ? b : "build";
}

static int setup(void **state)
{
	eu_work_dir(g_dir, sizeof(g_dir), "test_deploy");
	g_tiny = eu_tiny_model(g_dir, g_tiny_path, sizeof(g_tiny_path));
	return g_tiny ? 0 : -1;
}

static int teardown(void **state)
{
	rt_model_free(g_tiny);
	return 0;
}


/* Runs the tiny program; returns the token count it printed. */
static int run_tiny(const char *dir, const char *gguf, uint64_t seed, const int32_t *prompt, int P,
                    int max_new, int32_t *out, int cap)
{
	char cmd[4096];
	int k = snprintf(cmd, sizeof(cmd), "%s/deploy/sw_tiny_run -n %d --seed %llu '%s' '%s'",
	                 build_dir(), max_new, (unsigned long long)seed, dir, gguf);
	for (int i = 0; i < P && k < (int)sizeof(cmd) - 16; i++)
		k += snprintf(cmd + k, sizeof(cmd) - (size_t)k, " %d", prompt[i]);
	FILE *f = popen(cmd, "r");
	if (!f)
		fail_msg("cannot run %s", cmd);
	int n = 0;
	while (n < cap && fscanf(f, "%d", &out[n]) == 1)
		n++;
	int st = pclose(f);
	if (st != 0)
		fail_msg("%s: exit status %d (is %s/deploy/sw_tiny_run built? make test-build)", cmd, st,
		         build_dir());
	return n;
}

static int run_library(const char *dir, uint64_t seed, const int32_t *prompt, int P, int max_new,
                       int32_t *out)
{
	sw_err err = {0};
	rt_engine_stats st;
	rt_dev *d = rt_dev_host_new(RT_HOST_NATIVE, NULL, &err);
	if (!d)
		fail_msg("host: %s", err.msg);
	rt_engine *e = eu_bind(dir, d, g_tiny, seed);
	int n = eu_generate(e, "full library", prompt, P, max_new, false, out, &st);
	rt_engine_free(e);
	rt_dev_free(d);
	return n;
}

/* Greedy: the tiny program's tokens are the full library's, and both are
 * the fp32 reference's or leave it only at a near-tie (8 u max|logit|, u =
 * 2^-11 for fp16: test_engine's bound and its derivation). Stochastic: the
 * same seed gives the same tokens both ways, another seed others. */
static void test_tiny_program(void **state)
{
	static const struct {
		const char *name, *draft, *tree, *verify, *expand, *dtype;
		double temp;
	} cfg[] = {
		{"eagle25", "layerskip:1", "eagle25", "greedy", "topk", "fp16", 0},
		{"ngram", "ngram:1:3", "chain:4", "greedy", "topk", "fp16", 0},
		{"biseq8", "layerskip:0-1", "biseq8", "rrsw", "sample-wor", "fp16", 0.8},
	};
	const int P = 29, N = 32;
	int32_t prompt[64], lib[64], tiny[64], ref[64], other[64];
	float margin[64];
	double mx = 0;
	eu_tiny_prompt(prompt, P);
	eu_reference(g_tiny, prompt, P, N, ref, margin, &mx);
	for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
		char spec[2048], dir[400], cache[400];
		snprintf(dir, sizeof(dir), "%s/%s", g_dir, cfg[c].name);
		snprintf(cache, sizeof(cache), "%s/cache", g_dir);
		eu_tiny_spec(spec, sizeof(spec), g_tiny_path, cfg[c].draft, cfg[c].tree, cfg[c].verify,
		             cfg[c].expand, cfg[c].temp, cfg[c].dtype, NULL);
		eu_build(spec, dir, cache, false);
		assert_int_equal(run_library(dir, 3, prompt, P, N, lib), N);
		assert_int_equal(run_tiny(dir, g_tiny_path, 3, prompt, P, N, tiny, 64), N);
		assert_memory_equal(tiny, lib, sizeof(*lib) * N);
		if (cfg[c].temp > 0) {
			assert_int_equal(run_tiny(dir, g_tiny_path, 4, prompt, P, N, other, 64), N);
			assert_true(memcmp(other, tiny, sizeof(*tiny) * N) != 0);
			print_message("  %s: %d tokens identical through the runtime archive and the full "
			              "library (seed 3); seed 4 differs\n", cfg[c].name, N);
			continue;
		}
		int k = 0;
		while (k < N && tiny[k] == ref[k])
			k++;
		const double bound = 8.0 * ldexp(1.0, -11) * mx;
		print_message("  %s: %d tokens identical through the runtime archive and the full "
		              "library; %d/%d equal to the fp32 reference%s\n", cfg[c].name, N, k, N,
		              k < N ? " (then a near-tie)" : "");
		if (k < N && margin[k] > bound)
			fail_msg("%s: token %d is %d, the reference's %d wins by %.5f > %.5f", cfg[c].name, k,
			         tiny[k], ref[k], (double)margin[k], bound);
	}
}

/* The tiny program refuses weights that do not fit the engine, naming the
 * field and both values, and an engine directory that is not one. */
static void test_tiny_program_errors(void **state)
{
	char other[400], cmd[2000], msg[4096];
	sw_err err = {0};
	snprintf(other, sizeof(other), "%s/other.gguf", g_dir);
	rt_model *m = tu_tiny_llama(EU_TINY_VOCAB, 256, 2, 4, 2, 384, 8);
	assert_non_null(m);
	if (rt_llama_save_gguf(m, other, GGML_T_F32, &err))
		fail_msg("%s", err.msg);
	rt_model_free(m);
	static const char *const cases[][3] = {
		{"%s/eagle25", "other.gguf", "n_layers 2, engine"}, /* built by test_tiny_program */
		{"%s/nosuch", "tiny.gguf", "engine.json: cannot read"},
	};
	for (int c = 0; c < 2; c++) {
		char d[400];
		snprintf(d, sizeof(d), cases[c][0], g_dir);
		snprintf(cmd, sizeof(cmd), "%s/deploy/sw_tiny_run -n 4 '%s' '%s/%s' 1 2 3 2>&1",
		         build_dir(), d, g_dir, cases[c][1]);
		FILE *f = popen(cmd, "r");
		assert_non_null(f);
		size_t n = fread(msg, 1, sizeof(msg) - 1, f);
		msg[n] = 0;
		int st = pclose(f);
		print_message("  %s -> %s", cases[c][1], msg);
		assert_int_not_equal(st, 0);
		if (!strstr(msg, cases[c][2]))
			fail_msg("%s: the message lacks \"%s\"", cmd, cases[c][2]);
	}
}

/* The GGUF weight source against the model loader: the same shapes and
 * every field, bit for bit (both dequantize with formats/gguf.c), on the
 * tiny f32 model and, when present, the real Q4_1 one. */
static void check_source(const char *path, const rt_model *m)
{
	sw_err err = {0};
	rt_engine_weights w, mw;
	rt_engine_gguf *g = rt_engine_gguf_open(path, &w, &err);
	if (!g)
		fail_msg("%s", err.msg);
	if (cli_engine_weights(&mw, m, "target", &err))
		fail_msg("%s", err.msg);
	const rt_engine_shape *a = &w.shape, *b = &mw.shape;
	assert_int_equal(a->n_layers, b->n_layers);
	assert_int_equal(a->dim, b->dim);
	assert_int_equal(a->n_heads, b->n_heads);
	assert_int_equal(a->n_kv_heads, b->n_kv_heads);
	assert_int_equal(a->head_dim, b->head_dim);
	assert_int_equal(a->ffn_dim, b->ffn_dim);
	assert_int_equal(a->vocab, b->vocab);
	assert_true(a->rope_theta == b->rope_theta && a->norm_eps == b->norm_eps);
	assert_int_equal(a->tied_embd, b->tied_embd);
	static const char *const global[] = {"tok_embd", "out_norm", "lm_head", "inv_freq"};
	static const char *const layered[] = {"attn_norm", "wq", "wk", "wv", "wo",
	                                      "ffn_norm", "w_gate", "w_up", "w_down"};
	size_t checked = 0;
	for (int l = -1; l < m->cfg.n_layers; l++)
		for (int i = 0; i < (l < 0 ? 4 : 9); i++) {
			const char *f = l < 0 ? global[i] : layered[i];
			const float *a = NULL, *b = NULL;
			size_t na = 0, nb = 0;
			if (w.get(w.user, f, l, &a, &na, &err) || mw.get(mw.user, f, l, &b, &nb, &err))
				fail_msg("%s layer %d: %s", f, l, err.msg);
			assert_non_null(a);
			assert_non_null(b);
			if (na != nb || memcmp(a, b, sizeof(*a) * na))
				fail_msg("%s: field %s layer %d differs from the model loader's (%zu vs %zu "
				         "values)", path, f, l, na, nb);
			checked += na;
		}
	/* a field a Llama GGUF lacks, and a layer past the end, are errors */
	const float *x;
	size_t nx;
	assert_int_not_equal(w.get(w.user, "bogus", 0, &x, &nx, &err), 0);
	assert_non_null(strstr(err.msg, "bogus"));
	assert_int_not_equal(w.get(w.user, "wq", m->cfg.n_layers, &x, &nx, &err), 0);
	print_message("  %s: %zu values equal to the model loader's\n", path, checked);
	rt_engine_gguf_close(g);
}

static void test_gguf_source(void **state)
{
	check_source(g_tiny_path, g_tiny);
	const char *real = getenv("SW_MODEL");
	real = real ? real : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
	if (access(real, R_OK)) {
		print_message("  real model %s missing (make model): only the tiny one\n", real);
		return;
	}
	sw_err err = {0};
	rt_model *m = rt_model_load(real, &err);
	if (!m)
		fail_msg("%s", err.msg);
	check_source(real, m);
	rt_model_free(m);
	/* not a Llama: a Markov table GGUF is refused, naming the architecture */
	char tpath[400];
	float table[4] = {0.5f, 0.5f, 0.25f, 0.75f};
	snprintf(tpath, sizeof(tpath), "%s/table.gguf", g_dir);
	if (rt_table_save(tpath, 2, 1, table, &err))
		fail_msg("%s", err.msg);
	rt_engine_weights w;
	assert_null(rt_engine_gguf_open(tpath, &w, &err));
	assert_non_null(strstr(err.msg, "general.architecture"));
}

/* Without the generator's compiler, host-emulate is refused with a message
 * naming what is missing; host native opens. */
static void test_emulate_needs_compiler(void **state)
{
	sw_err err = {0};
	assert_null(rt_dev_host_new(RT_HOST_EMULATE, NULL, &err));
	assert_int_equal(err.code, SW_ENOTSUP);
	assert_non_null(strstr(err.msg, "emu_compile"));
	memset(&err, 0, sizeof(err));
	assert_null(rt_dev_open("host-emulate", NULL, &err));
	assert_non_null(strstr(err.msg, "gen_emu_module_build"));
	rt_dev *d = rt_dev_open("host", NULL, &err);
	assert_non_null(d);
	rt_dev_free(d);
}

/* Symbols from `nm` over paths (a shell glob), defined or undefined. */
typedef struct symset {
	char (*name)[256];
	char (*where)[256];
	int n, cap;
} symset;

static void nm_read(symset *s, const char *paths, bool undefined)
{
	char cmd[1200], line[512], where[256] = "";
	snprintf(cmd, sizeof(cmd), "nm %s %s 2>/dev/null", undefined ? "-u" : "--defined-only", paths);
	FILE *f = popen(cmd, "r");
	if (!f)
		fail_msg("cannot run %s", cmd);
	while (fgets(line, sizeof(line), f)) {
		char a[256], b[256], c[256];
		int k = sscanf(line, "%255s %255s %255s", a, b, c);
		size_t la = strlen(a);
		if (k == 1 && la && a[la - 1] == ':') {
			snprintf(where, sizeof(where), "%.*s", (int)(la - 1), a);
			continue;
		}
		const char *sym = NULL;
		if (undefined && k == 2 && !strcmp(a, "U"))
			sym = b;
		else if (!undefined && k == 3 && strchr("TDBRC", b[0]))
			sym = c;
		if (!sym)
			continue;
		if (s->n == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 1024;
			s->name = realloc(s->name, sizeof(*s->name) * (size_t)s->cap);
			s->where = realloc(s->where, sizeof(*s->where) * (size_t)s->cap);
			assert_non_null(s->name);
			assert_non_null(s->where);
		}
		snprintf(s->name[s->n], sizeof(s->name[0]), "%s", sym);
		snprintf(s->where[s->n], sizeof(s->where[0]), "%s", where);
		s->n++;
	}
	if (pclose(f) != 0 && !s->n)
		fail_msg("%s failed (is binutils' nm installed?)", cmd);
}

static int sym_find(const symset *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->name[i], name))
			return i;
	return -1;
}


static void test_rt_archive_symbols(void **state)
{
	char p[600], outside[1200];
	const char *B = build_dir();
	symset und = {0}, def = {0}, forb = {0}, bin = {0};
	snprintf(p, sizeof(p), "%s/libspecwright_rt.a", B);
	if (access(p, R_OK))
		fail_msg("%s missing: make test-build builds it", p);
	nm_read(&und, p, true);
	nm_read(&def, p, false);
	assert_true(def.n > 100); /* the archive holds the runtime */
	assert_true(sym_find(&def, "rt_engine_bind") >= 0);
	assert_true(sym_find(&def, "rt_engine_gguf_open") >= 0);
	assert_true(sym_find(&def, "rt_dev_open") >= 0);
	snprintf(outside, sizeof(outside), "%s/obj/gen/*.o %s/obj/gen/*/*.o %s/obj/runtime/decode/*.o "
	         "%s/obj/runtime/model/*.o %s/obj/runtime/cli/*.o", B, B, B, B, B);
	nm_read(&forb, outside, false);
	assert_true(sym_find(&forb, "gen_emu_module_build") >= 0); /* the scan sees gen/ */
	assert_true(sym_find(&forb, "rt_generate_spec") >= 0);     /* and decode/ */
	int bad = 0;
	for (int i = 0; i < und.n; i++) {
		if (sym_find(&def, und.name[i]) >= 0)
			continue;
		int f = sym_find(&forb, und.name[i]);
		if (strstr(und.name[i], "nvrtc") || strstr(und.name[i], "nvJitLink")) {
			print_message("  %s needs %s (NVRTC)\n", und.where[i], und.name[i]);
			bad++;
			continue;
		}
		if (f < 0)
			continue; /* the C library, BLAS, libdl, libm */
		print_message("  VIOLATION: %s needs %s, defined in %s\n", und.where[i], und.name[i],
		              forb.where[f]);
		bad++;
	}
	/* the tiny program links nothing of gen/ */
	snprintf(p, sizeof(p), "%s/deploy/sw_tiny_run", B);
	nm_read(&bin, p, false);
	assert_true(sym_find(&bin, "rt_engine_generate") >= 0);
	symset gen = {0};
	snprintf(outside, sizeof(outside), "%s/obj/gen/*.o %s/obj/gen/*/*.o", B, B);
	nm_read(&gen, outside, false);
	for (int i = 0; i < gen.n; i++)
		if (sym_find(&bin, gen.name[i]) >= 0) {
			print_message("  VIOLATION: %s links %s from %s\n", p, gen.name[i], gen.where[i]);
			bad++;
		}
	print_message("  %s: %d defined symbols, %d undefined references, %d violations\n",
	              "libspecwright_rt.a", def.n, und.n, bad);
	free(und.name), free(und.where), free(def.name), free(def.where);
	free(forb.name), free(forb.where), free(bin.name), free(bin.where);
	free(gen.name), free(gen.where);
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_emulate_needs_compiler),
		cmocka_unit_test(test_gguf_source),
		cmocka_unit_test(test_tiny_program),
		cmocka_unit_test(test_tiny_program_errors),
		cmocka_unit_test(test_rt_archive_symbols),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
