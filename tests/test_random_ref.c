/* The GPU check's correctness at the deployed shapes (issue 37 item 5), here
 * on the tiny shapes of models/specs/gpu/tiny/ (a Llama in fp16, a Qwen3
 * tree in bf16 with head_dim != dim / heads, a Gemma 3 whose sliding window
 * cuts): tests/gpu/random_ref.py, the random weights made again in Python
 * and an fp32 forward over them, against the engine itself.
 *   - fill: every weight buffer a host engine holds after `--random-weights`
 *     (native: kernels/ref; host-emulate: the fill template in the emulator)
 *     equals the Python fill bit for bit, on torch and on NumPy; one flipped
 *     bit in one dumped buffer is found and named;
 *   - run --random-weights S --ids ... --dump-logits: --ids is the prompt,
 *     the dump is the root row after the prompt and after the last
 *     iteration, the same first row target-only and speculative; refused
 *     inside the engine directory, on profile, with -P;
 *   - check: target-only and speculative runs against the fp32 forward on
 *     the engine's own tokens, first step and after 32 tokens, within the
 *     bound of the engine's dtype (4u: u = 2^-8 bf16, 2^-11 fp16);
 *   - it can fail: weights from the neighbouring Philox lane, wq transposed,
 *     a Gemma spec whose window or query scalar is not the engine's, or the
 *     bound cut to a tenth: each exits 1 with "pass": false.
 * Needs a python3 with torch and NumPy ($PYTHON, else /usr/bin/python3, else
 * python3); without one the tests are skipped and say so. BUILD names the
 * build directory (build/specwright). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/fileio.h"
#include "engine/random_weights.h"
#include "engine_util.h"
#include "shell_util.h"

enum { SEED = 3, N_ENG = 3 };
static const char *const ENG[N_ENG] = {"tiny-llama-fp16", "tiny-qwen3-tree", "tiny-gemma3"};
static const char *const IDS = "17 4 250 99 3 180 42 7 299 1 64";
static char g_out[1 << 17];
#define sh(...) tu_sh(g_out, sizeof(g_out), __VA_ARGS__)
static char g_dir[256], g_cache[300], g_sw[300], g_py[300];
static char g_eng[N_ENG][400];

static void must(int rc, const char *what)
{
	if (rc)
		fail_msg("%s: exit %d:\n%s", what, rc, g_out);
}

static int setup(void **state)
{
	(void)state;
	const char *b = getenv("BUILD");
	snprintf(g_sw, sizeof(g_sw), "%s/specwright", b && *b ? b : "build");
	eu_work_dir(g_dir, sizeof(g_dir), "random_ref");
	snprintf(g_cache, sizeof(g_cache), "%s/cache", g_dir);
	const char *cand[] = {getenv("PYTHON"), "/usr/bin/python3", "python3"};
	for (size_t i = 0; i < sizeof(cand) / sizeof(*cand) && !g_py[0]; i++)
		if (cand[i] && *cand[i] && sh("%s -c 'import torch, numpy' 2>&1", cand[i]) == 0)
			snprintf(g_py, sizeof(g_py), "%s", cand[i]);
	for (int i = 0; i < N_ENG; i++) {
		char path[300];
		size_t n;
		snprintf(path, sizeof(path), "models/specs/gpu/tiny/%s.json", ENG[i]);
		char *spec = sw_read_file(path, SW_CAP_TEXT, &n);
		if (!spec)
			return -1;
		snprintf(g_eng[i], sizeof(g_eng[i]), "%s/%s", g_dir, ENG[i]);
		eu_build(spec, g_eng[i], g_cache, false);
		free(spec);
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return sh("rm -rf %s", g_dir);
}

static void need_python(void)
{
	if (!g_py[0]) {
		print_message("  skipped: no python3 with torch and NumPy ($PYTHON, /usr/bin/python3, python3)\n");
		skip();
	}
}

/* Every weight buffer of engine i bound with random weights on host mode
 * into dump/NAME.bin; returns how many. */
static int dump_weights(int i, int mode, const char *dump)
{
	sw_err err = {0};
	rt_dev *d = eu_open_host(mode, g_cache);
	rt_engine *e = eu_load(g_eng[i]);
	if (rt_engine_bind_random(e, d, SEED, 1, &err))
		fail_msg("%s: %s", g_eng[i], err.msg);
	mkdir(dump, 0755);
	int n = 0;
	for (int k = 0; k < e->man->n_bufs; k++) {
		const rt_engine_buf *b = &e->man->bufs[k];
		if (strcmp(b->kind, "weight"))
			continue;
		void *p = malloc((size_t)b->bytes);
		assert_non_null(p);
		if (e->dev->ops->download(e->dev, p, rt_engine_buf_addr(e, b->name), (size_t)b->bytes, &err))
			fail_msg("%s", err.msg);
		char path[700];
		snprintf(path, sizeof(path), "%s/%s.bin", dump, b->name);
		FILE *f = fopen(path, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(p, 1, (size_t)b->bytes, f), (size_t)b->bytes);
		assert_int_equal(fclose(f), 0);
		free(p);
		n++;
	}
	rt_engine_free(e);
	rt_dev_free(d);
	return n;
}

/* The Python fill equals the engine's buffers bit for bit (torch and NumPy,
 * host native's fill and the emulator's); a flipped bit is found. */
static void test_fill(void **state)
{
	(void)state;
	need_python();
	for (int i = 0; i < N_ENG; i++) {
		for (int mode = 0; mode < 2; mode++) {
			if (mode == 1 && i != 2) /* the emulated fill on one engine: it compiles the kernels */
				continue;
			char dump[400];
			snprintf(dump, sizeof(dump), "%s/dump-%s-%d", g_dir, ENG[i], mode);
			const int n = dump_weights(i, mode ? RT_HOST_EMULATE : RT_HOST_NATIVE, dump);
			for (int x = 0; x < 2 && mode == 0; x++) {
				must(sh("%s tests/gpu/random_ref.py fill-check %s --seed %d --dump %s --xp %s 2>&1", g_py,
				        g_eng[i], SEED, dump, x ? "numpy" : "torch"), "fill-check");
				assert_non_null(strstr(g_out, "\"mismatch\": []"));
			}
			if (mode == 1) {
				must(sh("%s tests/gpu/random_ref.py fill-check %s --seed %d --dump %s 2>&1", g_py, g_eng[i],
				        SEED, dump), "fill-check (emulated fill)");
				assert_non_null(strstr(g_out, "\"mismatch\": []"));
			}
			print_message("  %s (%s): %d weight buffers = the Python fill\n", ENG[i],
			              mode ? "host-emulate" : "host native", n);
			/* a Llama's 10 at least: wqkv and w_gate_up hold the five q/k/v and
			 * gate/up weights (the fused layer, runtime/core/wparts.h) */
			assert_true(n >= 10);
		}
	}
	/* one bit of one buffer flipped: found, named */
	char p[500];
	snprintf(p, sizeof(p), "%s/dump-%s-0/target.wqkv.bin", g_dir, ENG[2]);
	FILE *f = fopen(p, "r+b");
	assert_non_null(f);
	assert_int_equal(fseek(f, 37, SEEK_SET), 0);
	int c = fgetc(f);
	assert_int_equal(fseek(f, 37, SEEK_SET), 0);
	fputc(c ^ 0x04, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(sh("%s tests/gpu/random_ref.py fill-check %s --seed %d --dump %s/dump-%s-0 2>&1", g_py,
	                    g_eng[2], SEED, g_dir, ENG[2]), 1);
	if (!strstr(g_out, "target.wqkv (lane") || !strstr(g_out, "first differing byte 37"))
		fail_msg("the flipped bit not named:\n%s", g_out);
	/* another seed's weights are another fill */
	assert_int_equal(sh("%s tests/gpu/random_ref.py fill-check %s --seed %d --dump %s/dump-%s-0 2>&1", g_py,
	                    g_eng[0], SEED + 1, g_dir, ENG[0]), 1);
}

/* run ENGINE --random-weights with --ids and --dump-logits (RUN: tag) on
 * backend be into DIR/NAME.TAG.{json,npy} */
static void run_dump(int i, const char *be, const char *tag, const char *extra)
{
	must(sh("%s run %s --random-weights %d --backend %s --ids '%s' -n 33 %s --dump-logits %s/%s.%s.npy "
	        "--json > %s/%s.%s.json 2>%s/%s.%s.err; rc=$?; [ $rc = 0 ] || cat %s/%s.%s.err; exit $rc", g_sw,
	        g_eng[i], SEED, be, IDS, extra, g_dir, ENG[i], tag, g_dir, ENG[i], tag, g_dir, ENG[i], tag, g_dir,
	        ENG[i], tag), "run --dump-logits");
}

/* --ids is the prompt, the dump is (2, V) at the prompt and after the last
 * iteration, the first rows of target-only and speculative equal; the
 * refusals */
static void test_dump(void **state)
{
	(void)state;
	need_python();
	for (int i = 0; i < N_ENG; i++) {
		run_dump(i, "host", "to", "--target-only --temperature 0");
		run_dump(i, "host", "sp", "");
	}
	must(sh("cat %s/%s.to.json", g_dir, ENG[0]), "json");
	if (!strstr(g_out, "\"prompt_ids\": [17, 4, 250, 99, 3, 180, 42, 7, 299, 1, 64]") ||
	    !strstr(g_out, "\"target_only\": true") || !strstr(g_out, "\"positions\": [11, 43]"))
		fail_msg("run --json: %s", g_out);
	for (int i = 0; i < N_ENG; i++) {
		must(sh("%s -c 'import numpy as np, sys; a = np.load(sys.argv[1]); b = np.load(sys.argv[2]); "
		        "print(a.shape, b.shape, float(abs(a[0] - b[0]).max()))' %s/%s.to.npy %s/%s.sp.npy", g_py, g_dir,
		        ENG[i], g_dir, ENG[i]), "npy");
		if (!strstr(g_out, "(2, 300) (2, 300) 0.0"))
			fail_msg("%s: the dumps: %s", ENG[i], g_out);
	}
	/* refusals, each leaving no file */
	assert_int_equal(sh("%s run %s --random-weights 1 -n 2 --dump-logits %s/x.npy 2>&1", g_sw, g_eng[0], g_eng[0]), 2);
	assert_non_null(strstr(g_out, "inside the engine directory"));
	assert_int_equal(access("x.npy", F_OK) == 0 || sh("test -e %s/x.npy", g_eng[0]) == 0, 0);
	assert_int_equal(sh("%s profile %s --random-weights 1 --dump-logits %s/y.npy 2>&1", g_sw, g_eng[0], g_dir), 2);
	assert_non_null(strstr(g_out, "applies to `run ENGINE_DIR --random-weights SEED` only"));
	assert_int_equal(sh("%s run %s --random-weights 1 -P 4 --ids '1 2' 2>&1", g_sw, g_eng[0]), 2);
	assert_non_null(strstr(g_out, "not both"));
	assert_int_equal(sh("%s run %s --random-weights 1 --ids '1 300' 2>&1", g_sw, g_eng[0]), 1);
	assert_non_null(strstr(g_out, "outside the model's vocabulary [0, 300)"));
	assert_int_not_equal(sh("test -e %s/y.npy", g_dir), 0);
}

/* the engine against the fp32 forward: within the dtype's bound */
static void test_check(void **state)
{
	(void)state;
	need_python();
	for (int i = 0; i < N_ENG; i++) {
		if (sh("test -s %s/%s.sp.npy", g_dir, ENG[i]))
			fail_msg("no dump of %s (test_dump runs first)", ENG[i]);
		must(sh("%s tests/gpu/random_ref.py check %s --seed %d --spec models/specs/gpu/tiny/%s.json "
		        "--run %s/%s.to.json:%s/%s.to.npy --run %s/%s.sp.json:%s/%s.sp.npy --emulate 2>&1", g_py,
		        g_eng[i], SEED, ENG[i], g_dir, ENG[i], g_dir, ENG[i], g_dir, ENG[i], g_dir, ENG[i]),
		     "check");
		assert_non_null(strstr(g_out, "\"pass\": true"));
		must(sh("%s -c 'import json, sys; d = json.loads(sys.stdin.read()); "
		        "print(len([r for x in d[\"runs\"] for r in x[\"rows\"] if r[\"rel_err\"] <= d[\"bound\"]]), "
		        "d[\"bound\"], \" \".join(\"%%.2e\" %% r[\"rel_err\"] for x in d[\"runs\"] for r in x[\"rows\"]), "
		        "\" \".join(\"%%.2e\" %% r[\"rel_err_vs_fp32\"] for r in d[\"emulated\"]))' <<'EOF'\n%s\nEOF",
		        g_py, g_out), "the check's JSON");
		print_message("  %s: rows within the bound, bound, engine's errors, rounding alone: %s", ENG[i], g_out);
		assert_int_equal(atoi(g_out), 4);
	}
}

/* the check fails when the weights, the model or the bound are wrong */
static void test_fails(void **state)
{
	(void)state;
	need_python();
	static const struct {
		int eng;
		const char *opts, *what;
	} bad[] = {
		{0, "--mutate lane", "weights from the neighbouring lane"},
		{0, "--mutate transpose", "wq transposed"},
		{1, "--mutate lane", "weights from the neighbouring lane"},
		{2, "--bound-scale 0.1", "a tenth of the bound"},
		{2, "--spec %s/win.json", "the sliding window not the engine's"},
		{2, "--spec %s/qs.json", "the query scalar not the engine's"},
	};
	must(sh("sed 's/\"sliding_window\": 16/\"sliding_window\": 4096/' models/specs/gpu/tiny/%s.json > %s/win.json && "
	        "sed 's/\"query_pre_attn_scalar\": 24/\"query_pre_attn_scalar\": 32/' models/specs/gpu/tiny/%s.json > "
	        "%s/qs.json", ENG[2], g_dir, ENG[2], g_dir), "specs");
	for (size_t k = 0; k < sizeof(bad) / sizeof(*bad); k++) {
		const int i = bad[k].eng;
		char opts[400], spec[200] = "";
		snprintf(opts, sizeof(opts), bad[k].opts, g_dir);
		if (!strstr(opts, "--spec"))
			snprintf(spec, sizeof(spec), "--spec models/specs/gpu/tiny/%s.json", ENG[i]);
		const int rc = sh("%s tests/gpu/random_ref.py check %s --seed %d %s %s --run %s/%s.to.json:%s/%s.to.npy "
		                  "2>&1", g_py, g_eng[i], SEED, spec, opts, g_dir, ENG[i], g_dir, ENG[i]);
		if (rc != 1 || !strstr(g_out, "\"pass\": false"))
			fail_msg("%s (%s): exit %d, expected 1 and \"pass\": false:\n%s", ENG[i], bad[k].what, rc, g_out);
		print_message("  %s, %s: fails\n", ENG[i], bad[k].what);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fill),
		cmocka_unit_test(test_dump),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_fails),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
