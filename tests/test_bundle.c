/* `specwright bundle` and the portable kit (issue 22): a tiny engine (the
 * engine tests' tiny Llama, given a one-character-per-token gpt2
 * tokenizer so the CLI takes text) is bundled with and without its
 * weights, and the bundle's launcher is run from a clean environment
 * (`env -i`, PATH /usr/bin:/bin only): its tokens must equal the same
 * engine run by build/specwright (the OpenBLAS build), its `generate`
 * the host reference decoder's text through build/specwright; with the
 * weights bundled the original model file is removed first. The cuda
 * backend runs through the fake driver built as libcuda.so.1 +
 * libcublasLt.so.13 (tests/util/fakecuda/), found by the launcher through
 * CUDA_HOME, the engine's kernels in the emulator: its tokens must equal
 * host-emulate's (the same kernels; the fake's GEMM sums in the host's
 * order). Refusals: a tampered engine, an existing directory that is not a
 * bundle (the user's file survives), a missing kit, weights whose digest
 * is not the engine's. --verify: bundle.json's hashes against sha256sum
 * (an independent SHA-256), then an edited file caught. An EAGLE-3
 * engine's head is carried (sha256, the launcher's --draft-model, a head
 * with other weights refused, an edited one caught by --verify). The kit's
 * binaries: no EVEX (AVX-512) instruction outside the functions with
 * AVX-512 target attributes, no GLIBC symbol newer than 2.35, no OpenBLAS;
 * the kit's size is printed. Needs `make portable` and the fake (make
 * test-build builds both). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shell_util.h"

#include "core/fileio.h"
#include "core/json.h"
#include "eagle3_util.h"
#include "engine_util.h"
#include "formats/gguf.h"
#include "model/model_gguf.h"
#include "testutil.h"

static char g_dir[256], g_abs[400], g_model[600], g_engine[600];
static char g_out[1 << 17];
#define sh(...) tu_sh(g_out, sizeof(g_out), __VA_ARGS__)
static const char *const PROMPT = "abcab cabca bcabc abcab";

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");
	return b && *b ? b : "build";
}

static void must(int rc, const char *what)
{
	if (rc)
		fail_msg("%s: exit %d:\n%s", what, rc, g_out);
}

/* The tiny model with a tokenizer: ids 0..93 the characters '!'..'~', 94
 * the space (gpt2's byte-level "Ġ"), the rest two-character pieces. */
static void tiny_with_tokens(const char *raw, const char *path, uint64_t seed)
{
	sw_err err = {0};
	char store[EU_TINY_VOCAB][8];
	const char *toks[EU_TINY_VOCAB];
	for (int i = 0; i < EU_TINY_VOCAB; i++) {
		if (i < 94)
			snprintf(store[i], sizeof(store[i]), "%c", 33 + i);
		else if (i == 94)
			snprintf(store[i], sizeof(store[i]), "\xc4\xa0");
		else
			snprintf(store[i], sizeof(store[i]), "\xc4\xa0%c", 'a' + i - 95);
		toks[i] = store[i];
	}
	rt_model *m = tu_tiny_llama(EU_TINY_VOCAB, 256, 3, 4, 2, 384, seed);
	assert_non_null(m);
	if (rt_llama_save_gguf(m, raw, GGML_T_F32, &err) ||
	    tu_gguf_revocab(raw, path, EU_TINY_VOCAB, toks, EU_TINY_VOCAB, "gpt2", &err))
		fail_msg("%s: %s", path, err.msg);
	rt_model_free(m);
	unlink(raw);
}

static int setup(void **state)
{
	char spec[2048], raw[700], path[700];
	eu_work_dir(g_dir, sizeof(g_dir), "test_bundle");
	char abs[4096];
	if (!realpath(g_dir, abs) || strlen(abs) >= sizeof(g_abs))
		return -1;
	memcpy(g_abs, abs, strlen(abs) + 1);
	snprintf(raw, sizeof(raw), "%s/tiny.raw.gguf", g_abs);
	snprintf(g_model, sizeof(g_model), "%s/tiny.gguf", g_abs);
	tiny_with_tokens(raw, g_model, 7);
	snprintf(g_engine, sizeof(g_engine), "%s/tiny-ngram", g_abs);
	eu_tiny_spec(spec, sizeof(spec), g_model, "ngram:1:3", "chain:4", "greedy", "topk", 0, "bf16", NULL);
	eu_build(spec, g_engine, NULL, false);
	/* no NVRTC here: a stand-in PTX the fake driver loads (its kernels
	 * come from its registry), listed as the build would list it */
	snprintf(path, sizeof(path), "%s/kernels.ptx", g_engine);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs("// test_bundle: stand-in for NVRTC's PTX (fake driver)\n.version 8.3\n.target sm_80\n"
	      ".address_size 64\n", f);
	fclose(f);
	eu_list_file(g_engine, "kernels.ptx");
	return 0;
}

static int teardown(void **state)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
	return system(cmd);
}

static void bundle(const char *out, const char *engine, const char *extra)
{
	must(sh("%s/specwright bundle %s -o %s %s 2>&1", build_dir(), engine, out, extra), "bundle");
	print_message("  %s", g_out);
}

/* ---- running a bundle ---- */

static void test_run_host(void **state)
{
	int32_t ref[64], got[64];
	char B[700], W[700], model2[700], eng2[700], spec[2048];
	static char ref_text[sizeof(g_out)];
	snprintf(B, sizeof(B), "%s/B", g_abs);
	bundle(B, g_engine, "");
	const char *opts = "--backend host -n 24 --no-chat --json";
	must(sh("%s/specwright run %s %s -p '%s' 2>/dev/null", build_dir(), g_engine, opts, PROMPT),
	     "build/specwright run");
	int n_ref = tu_json_tokens(g_out, ref, 64);
	assert_int_equal(n_ref, 24);
	char *m = strstr(g_out, "\"greedy_match\"");
	assert_non_null(m);
	int match_ref = atoi(m + strlen("\"greedy_match\": "));
	must(sh("env -i PATH=/usr/bin:/bin HOME=%s %s/run run %s -p '%s' 2>/dev/null", g_abs, B, opts, PROMPT),
	     "bundle run (env -i)");
	assert_int_equal(tu_json_tokens(g_out, got, 64), n_ref);
	assert_memory_equal(got, ref, sizeof(*ref) * (size_t)n_ref);
	m = strstr(g_out, "\"greedy_match\"");
	assert_non_null(m);
	assert_int_equal(atoi(m + strlen("\"greedy_match\": ")), match_ref);
	print_message("  host: %d tokens equal build/specwright's; greedy reference match %d of %d\n", n_ref,
	              match_ref, n_ref);
	/* generate: the host reference decoder on the engine's weights */
	must(sh("%s/specwright generate %s -n 16 --no-chat -p '%s' 2>/dev/null", build_dir(), g_model, PROMPT),
	     "build/specwright generate");
	snprintf(ref_text, sizeof(ref_text), "%s", g_out);
	must(sh("env -i PATH=/usr/bin:/bin %s/run generate -n 16 --no-chat -p '%s' 2>/dev/null", B, PROMPT),
	     "bundle generate");
	assert_string_equal(g_out, ref_text);
	assert_true(strlen(ref_text) > 4);

	/* --with-weights: the model copied in, the original gone */
	snprintf(model2, sizeof(model2), "%s/moved.gguf", g_abs);
	snprintf(eng2, sizeof(eng2), "%s/tiny-moved", g_abs);
	must(sh("cp %s %s", g_model, model2), "cp");
	eu_tiny_spec(spec, sizeof(spec), model2, "ngram:1:3", "chain:4", "greedy", "topk", 0, "bf16", NULL);
	eu_build(spec, eng2, NULL, false);
	snprintf(W, sizeof(W), "%s/W", g_abs);
	bundle(W, eng2, "--with-weights");
	assert_int_equal(unlink(model2), 0);
	must(sh("env -i PATH=/usr/bin:/bin %s/run run tiny-moved %s -p '%s' 2>&1", W, opts, PROMPT),
	     "bundle --with-weights run (env -i)");
	assert_int_equal(tu_json_tokens(g_out, got, 64), n_ref);
	assert_memory_equal(got, ref, sizeof(*ref) * (size_t)n_ref);
	must(sh("env -i PATH=/usr/bin:/bin %s/run generate -n 16 --no-chat -p '%s' 2>/dev/null", W, PROMPT),
	     "bundle --with-weights generate");
	assert_string_equal(g_out, ref_text);
	/* an engine name that is not there is refused, naming what is */
	assert_int_equal(sh("env -i PATH=/usr/bin:/bin %s/run run nosuch -p x 2>&1", W), 2);
	assert_non_null(strstr(g_out, "tiny-moved"));
	/* --probe always exits 0 and reports */
	must(sh("env -i PATH=/usr/bin:/bin %s/run --probe 2>&1", W), "--probe");
	assert_non_null(strstr(g_out, "cuBLASLt:"));
	assert_non_null(strstr(g_out, "glibc:"));
	assert_non_null(strstr(g_out, "vector level:"));
}

static void test_run_cuda_fake(void **state)
{
	int32_t emu[64], got[64];
	char B[700], cache[700], mod[1400], home[700], src[400];
	snprintf(B, sizeof(B), "%s/C", g_abs);
	snprintf(cache, sizeof(cache), "%s/emu-cache", g_abs);
	bundle(B, g_engine, "");
	if (!getcwd(src, sizeof(src)))
		fail_msg("getcwd");
	const char *opts = "-n 12 --no-chat --json --no-baseline";
	/* host-emulate: the generated kernels on the CPU (cc compiles them; the
	 * kernels' preludes come from the source tree) */
	must(sh("env -i PATH=/usr/bin:/bin SW_SRC_DIR=%s SPECWRIGHT_CACHE=%s %s/run run --backend host-emulate "
	        "%s -p '%s' 2>&1", src, cache, B, opts, PROMPT), "bundle run host-emulate");
	const int n = tu_json_tokens(g_out, emu, 64);
	assert_int_equal(n, 12);
	tu_find_emu_module(cache, mod, sizeof(mod));
	/* CUDA_HOME/lib64 holds the fake libcuda.so.1 and libcublasLt.so.13 */
	snprintf(home, sizeof(home), "%s/fakehome", g_abs);
	char fake[1000];
	snprintf(fake, sizeof(fake), "%s%s%s/tests/fakecuda", build_dir()[0] == '/' ? "" : src,
	         build_dir()[0] == '/' ? "" : "/", build_dir());
	must(sh("mkdir -p %s/lib64 && ln -sf %s/libcuda.so.1 %s/libcublasLt.so.13 %s/lib64/", home, fake, fake,
	        home), "fake CUDA_HOME");
	must(sh("env -i PATH=/usr/bin:/bin CUDA_HOME=%s SW_FAKE_CUDA_ENGINE=%s/engines/tiny-ngram SW_FAKE_CUDA_EMU=%s "
	        "%s/run run --backend cuda %s -p '%s' 2>&1", home, B, mod, B, opts, PROMPT),
	     "bundle run cuda (fake driver)");
	if (!strstr(g_out, "Fake H100") || !strstr(g_out, "libcublasLt.so.13 in"))
		fail_msg("not the fake driver or no cuBLASLt report:\n%s", g_out);
	assert_int_equal(tu_json_tokens(g_out, got, 64), n);
	assert_memory_equal(got, emu, sizeof(*emu) * (size_t)n);
	print_message("  cuda (fake libcuda.so.1 via CUDA_HOME): %d tokens equal host-emulate's\n", n);
	/* without the libraries the cuda backend is refused, clearly */
	assert_int_equal(sh("env -i PATH=/usr/bin:/bin CUDA_HOME=%s/none %s/run run --backend cuda %s -p x 2>&1 "
	                    "| grep -c 'libcuda.so.1'", g_abs, B, opts), 0);
}

/* ---- refusals ---- */

static void test_refusals(void **state)
{
	char t[700], X[700], raw[700], model3[700], eng3[700], spec[2048];
	/* a tampered engine */
	snprintf(t, sizeof(t), "%s/tampered", g_abs);
	must(sh("cp -r %s %s && printf x >> %s/kernels.cu", g_engine, t, t), "cp");
	snprintf(X, sizeof(X), "%s/X1", g_abs);
	assert_int_equal(sh("%s/specwright bundle %s -o %s 2>&1", build_dir(), t, X), 1);
	if (!strstr(g_out, "kernels.cu") || !strstr(g_out, "does not match"))
		fail_msg("tampered engine: %s", g_out);
	assert_int_not_equal(access(X, F_OK), 0);
	/* an existing directory that is not a bundle: refused, the file kept */
	snprintf(X, sizeof(X), "%s/X2", g_abs);
	must(sh("mkdir -p %s && printf 'mine' > %s/notes.txt", X, X), "mkdir");
	assert_int_equal(sh("%s/specwright bundle %s -o %s 2>&1", build_dir(), g_engine, X), 1);
	assert_non_null(strstr(g_out, "is not a bundle"));
	assert_non_null(strstr(g_out, X));
	must(sh("cat %s/notes.txt", X), "the user's file");
	assert_string_equal(g_out, "mine");
	/* a file in its place: also refused */
	must(sh("rm -rf %s && printf 'mine' > %s", X, X), "file");
	assert_int_equal(sh("%s/specwright bundle %s -o %s 2>&1", build_dir(), g_engine, X), 1);
	must(sh("cat %s", X), "the user's file");
	assert_string_equal(g_out, "mine");
	/* a bundle is replaced by the next one into the same place, but only
	 * while it is whole: a file of the user's added to it (notes, a
	 * weights file) is refused by name and kept, with everything else
	 * (issue 40: it was deleted, exit 0) */
	snprintf(X, sizeof(X), "%s/X3", g_abs);
	bundle(X, g_engine, "");
	bundle(X, g_engine, "");
	must(sh("env -i PATH=/usr/bin:/bin %s/run --verify 2>&1", X), "the replaced bundle verifies");
	/* the file, and the name the refusal gives (the first foreign entry) */
	static const char *const mine[][2] = {{"notes.txt", "X3/notes.txt"}, {"weights/mine.gguf", "X3/weights:"},
	                                      {"engines/tiny-ngram/my-notes.md", "tiny-ngram/my-notes.md"}};
	for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); i++) {
		must(sh("mkdir -p $(dirname %s/%s) && printf 'mine' > %s/%s", X, mine[i][0], X, mine[i][0]), "a user's file");
		assert_int_equal(sh("%s/specwright bundle %s -o %s 2>&1", build_dir(), g_engine, X), 1);
		if (!strstr(g_out, "is not a bundle") || !strstr(g_out, mine[i][1]) || !strstr(g_out, "not listed"))
			fail_msg("a bundle plus %s: %s", mine[i][0], g_out);
		must(sh("cat %s/%s", X, mine[i][0]), "the user's file");
		assert_string_equal(g_out, "mine");
		must(sh("test -x %s/run && test -f %s/engines/tiny-ngram/engine.json", X, X), "the bundle kept");
		must(sh("rm -f %s/%s; rmdir %s/weights 2>/dev/null; true", X, mine[i][0], X), "rm");
	}
	/* a user's directory with a bundle.json forged into it (a real one's):
	 * everything in it stays */
	snprintf(X, sizeof(X), "%s/X6", g_abs);
	must(sh("mkdir -p %s && cp %s/X3/bundle.json %s/ && printf 'thesis' > %s/thesis.tex", X, g_abs, X, X),
	     "forged");
	assert_int_equal(sh("%s/specwright bundle %s -o %s 2>&1", build_dir(), g_engine, X), 1);
	if (!strstr(g_out, "is not a bundle") || !strstr(g_out, "missing"))
		fail_msg("a forged bundle.json: %s", g_out);
	must(sh("cat %s/thesis.tex", X), "the user's thesis");
	assert_string_equal(g_out, "thesis");
	/* a user's directories named as the temporary once was (DIR.tmp.PID,
	 * for the next pids after this one: removed first, exit 0): untouched */
	snprintf(X, sizeof(X), "%s/X7", g_abs);
	must(sh("for n in $(seq %d %d); do mkdir -p %s.tmp.$n && echo mine > %s.tmp.$n/f; done", (int)getpid() + 1,
	        (int)getpid() + 64, X, X), "siblings");
	bundle(X, g_engine, "");
	must(sh("cat %s.tmp.*/f | grep -c mine", X), "siblings kept");
	assert_int_equal(atoi(g_out), 64);
	must(sh("rm -rf %s.tmp.*", X), "rm");
	/* no kit */
	snprintf(X, sizeof(X), "%s/X4", g_abs);
	assert_int_equal(sh("%s/specwright bundle %s -o %s --kit %s/nokit 2>&1", build_dir(), g_engine, X, g_abs),
	                 1);
	assert_non_null(strstr(g_out, "make portable"));
	assert_int_not_equal(access(X, F_OK), 0);
	/* weights whose digest is not the engine's (same shapes, other values) */
	snprintf(model3, sizeof(model3), "%s/other.gguf", g_abs);
	snprintf(raw, sizeof(raw), "%s/other.raw.gguf", g_abs);
	snprintf(eng3, sizeof(eng3), "%s/tiny-other", g_abs);
	must(sh("cp %s %s", g_model, model3), "cp");
	eu_tiny_spec(spec, sizeof(spec), model3, "ngram:1:3", "chain:4", "greedy", "topk", 0, "bf16", NULL);
	eu_build(spec, eng3, NULL, false);
	tiny_with_tokens(raw, model3, 8);
	snprintf(X, sizeof(X), "%s/X5", g_abs);
	assert_int_equal(sh("%s/specwright bundle %s -o %s --with-weights 2>&1", build_dir(), eng3, X), 1);
	if (!strstr(g_out, "digest") || !strstr(g_out, model3))
		fail_msg("digest mismatch: %s", g_out);
	assert_int_not_equal(access(X, F_OK), 0);
	/* nothing left behind: no temporary (DIR.tmp-XXXXXX) in the work directory */
	assert_int_equal(sh("ls %s | grep -c '\\.tmp[-.]'", g_abs), 1);
}

/* ---- an EAGLE-3 engine: its head carried ---- */

/* bundle.json's weights entry of engine name and role, or fails */
static const json_value *weights_entry(const json_value *root, const char *name, const char *role)
{
	const json_value *engs = json_get(root, "engines");
	for (size_t i = 0; engs && i < engs->n; i++) {
		if (strcmp(json_get(engs->items[i], "name")->str, name))
			continue;
		const json_value *ws = json_get(engs->items[i], "weights");
		for (size_t k = 0; ws && k < ws->n; k++)
			if (!strcmp(json_get(ws->items[k], "role")->str, role))
				return ws->items[k];
	}
	fail_msg("bundle.json: no %s weights for engine %s", role, name);
	return NULL;
}

static json_value *read_bundle_json(const char *B)
{
	char p[800];
	sw_err err = {0};
	size_t len = 0;
	snprintf(p, sizeof(p), "%s/bundle.json", B);
	char *text = sw_read_file(p, SW_CAP_IMAGE, &len);
	assert_non_null(text);
	json_value *root = json_parse(text, len, p, &err);
	free(text);
	if (!root)
		fail_msg("%s", err.msg);
	return root;
}

/* The head (config.json, model.safetensors) is copied under weights/ with
 * its sha256 (against sha256sum) in bundle.json and passed by the launcher:
 * the bundle's tokens equal build/specwright's with the original model and
 * head removed; a head with other weights is refused at bundling (digest),
 * an edited bundled head by --verify; without --with-weights the head is
 * referenced by its path. */
static void test_eagle3_head(void **state)
{
	char model[700], head[700], eng[700], spec[4096], B[700], R[700], X[700], sha[65];
	int32_t ref[64], got[64];
	sw_err err = {0};
	snprintf(model, sizeof(model), "%s/e3model.gguf", g_abs);
	snprintf(head, sizeof(head), "%s/e3head", g_abs);
	snprintf(eng, sizeof(eng), "%s/tiny-e3", g_abs);
	must(sh("cp %s %s && mkdir -p %s", g_model, model, head), "cp");
	rt_model *m = rt_model_load(model, &err);
	if (!m)
		fail_msg("%s", err.msg);
	te3_opts o = te3_default(m);
	o.draft_vocab = 60;
	o.ffn = 192;
	assert_int_equal(te3_write(head, m, &o, 5), 0);
	snprintf(spec, sizeof(spec),
	         "{\"name\": \"tiny-e3\", \"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": "
	         "\"eagle3\", \"path\": \"%s\"}, \"tree\": \"chain:3\", \"verify\": {\"method\": \"greedy\", "
	         "\"expand\": \"topk\"}, \"sampling\": {\"temperature\": 0, \"top_k\": 0, \"top_p\": 1}, "
	         "\"max_context\": 192, \"prefill_chunk\": 16, \"dtype\": \"fp16\", \"archs\": "
	         "[\"sm_80\"]}", model, head);
	eu_build(spec, eng, NULL, false);
	const char *opts = "--backend host -n 16 --no-chat --json --no-baseline";
	must(sh("%s/specwright run %s %s -p '%s' 2>/dev/null", build_dir(), eng, opts, PROMPT),
	     "build/specwright run (EAGLE-3)");
	const int n = tu_json_tokens(g_out, ref, 64);
	assert_int_equal(n, 16);
	must(sh("sha256sum %s/model.safetensors", head), "sha256sum");
	snprintf(sha, sizeof(sha), "%.64s", g_out);

	/* without --with-weights: referenced by the path it was built from */
	snprintf(R, sizeof(R), "%s/E3R", g_abs);
	bundle(R, eng, "");
	json_value *root = read_bundle_json(R);
	const json_value *w = weights_entry(root, "tiny-e3", "draft");
	assert_string_equal(json_get(w, "kind")->str, "eagle3_head_dir");
	assert_string_equal(json_get(w, "built_from")->str, head);
	assert_int_equal(json_get(w, "file")->type, JSON_NULL);
	assert_string_equal(json_get(w, "sha256")->str, sha);
	json_free(root);

	/* a head with other weights than the engine's: refused, nothing left */
	snprintf(X, sizeof(X), "%s/E3X", g_abs);
	must(sh("cp %s/model.safetensors %s/good.safetensors", head, g_abs), "cp");
	assert_int_equal(te3_write(head, m, &o, 6), 0);
	assert_int_equal(sh("%s/specwright bundle %s -o %s --with-weights 2>&1", build_dir(), eng, X), 1);
	if (!strstr(g_out, "digest") || !strstr(g_out, head))
		fail_msg("EAGLE-3 head digest mismatch: %s", g_out);
	assert_int_not_equal(access(X, F_OK), 0);
	must(sh("mv %s/good.safetensors %s/model.safetensors", g_abs, head), "mv");

	/* --with-weights: carried, hashed, passed by the launcher */
	snprintf(B, sizeof(B), "%s/E3W", g_abs);
	bundle(B, eng, "--with-weights");
	root = read_bundle_json(B);
	w = weights_entry(root, "tiny-e3", "draft");
	assert_string_equal(json_get(w, "kind")->str, "eagle3_head_dir");
	assert_string_equal(json_get(w, "file")->str, "weights/e3head");
	assert_string_equal(json_get(w, "sha256")->str, sha);
	json_free(root);
	must(sh("sha256sum %s/weights/e3head/model.safetensors", B), "sha256sum");
	assert_memory_equal(g_out, sha, 64);
	must(sh("cmp %s/config.json %s/weights/e3head/config.json", head, B), "config.json carried");
	must(sh("grep -c '\"weights/e3head/model.safetensors\"' %s/bundle.json", B), "listed");
	rt_model_free(m);
	te3_rmdir(head);
	assert_int_equal(unlink(model), 0);
	must(sh("env -i PATH=/usr/bin:/bin %s/run run tiny-e3 %s -p '%s' 2>&1", B, opts, PROMPT),
	     "bundle run EAGLE-3 (env -i, head and model removed)");
	assert_int_equal(tu_json_tokens(g_out, got, 64), n);
	assert_memory_equal(got, ref, sizeof(*ref) * (size_t)n);
	print_message("  EAGLE-3 head carried (sha256 %.12s...): %d tokens equal build/specwright's\n", sha, n);
	must(sh("env -i PATH=/usr/bin:/bin %s/run --verify 2>&1", B), "--verify");
	/* one byte of the carried head changed */
	must(sh("printf 'x' | dd of=%s/weights/e3head/model.safetensors bs=1 seek=200 conv=notrunc 2>/dev/null", B),
	     "dd");
	assert_int_equal(sh("env -i PATH=/usr/bin:/bin %s/run --verify 2>&1", B), 1);
	if (!strstr(g_out, "weights/e3head/model.safetensors") || !strstr(g_out, "1 problem"))
		fail_msg("--verify: %s", g_out);
}

/* ---- verify ---- */

static void test_verify(void **state)
{
	char V[700], p[800];
	snprintf(V, sizeof(V), "%s/V", g_abs);
	bundle(V, g_engine, "");
	/* bundle.json's hashes against sha256sum, file by file */
	snprintf(p, sizeof(p), "%s/bundle.json", V);
	sw_err err = {0};
	size_t len = 0;
	char *text = sw_read_file(p, SW_CAP_IMAGE, &len);
	assert_non_null(text);
	json_value *root = json_parse(text, len, p, &err);
	free(text);
	assert_non_null(root);
	const json_value *files = json_get(root, "files");
	assert_non_null(files);
	assert_true(files->n > 10);
	for (size_t i = 0; i < files->n; i++) {
		const char *rel = json_get(files->items[i], "path")->str;
		const char *sha = json_get(files->items[i], "sha256")->str;
		must(sh("sha256sum %s/%s", V, rel), "sha256sum");
		if (strncmp(g_out, sha, 64))
			fail_msg("%s: bundle.json sha256 %s, sha256sum %.64s", rel, sha, g_out);
	}
	const json_value *bytes = json_get(root, "bytes");
	assert_non_null(bytes);
	print_message("  bundle.json: %zu files, %.2f MiB in all (kit %.2f MiB)\n", files->n,
	              json_get(bytes, "total")->number / 1048576.0, json_get(bytes, "kit")->number / 1048576.0);
	json_free(root);
	must(sh("env -i PATH=/usr/bin:/bin %s/run --verify 2>&1", V), "--verify");
	/* one byte changed in the engine's kernels */
	must(sh("printf 'x' | dd of=%s/engines/tiny-ngram/kernels.cu bs=1 seek=100 conv=notrunc 2>/dev/null", V),
	     "dd");
	assert_int_equal(sh("env -i PATH=/usr/bin:/bin %s/run --verify 2>&1", V), 1);
	if (!strstr(g_out, "engines/tiny-ngram/kernels.cu") || !strstr(g_out, "1 problem"))
		fail_msg("--verify: %s", g_out);
	/* the same size: the launcher's start checks (names, sizes, the
	 * engine's digests) refuse to run it */
	assert_int_equal(sh("env -i PATH=/usr/bin:/bin %s/run run -p x 2>&1", V), 1);
	if (!strstr(g_out, "engine tiny-ngram") || !strstr(g_out, "kernels.cu"))
		fail_msg("run with an edited kernels.cu: %s", g_out);
}

/* A bundle is verified whole (issue 40): an entry bundle.json does not
 * list (a shared library the rpath would load, a binary, an engine file),
 * one it lists that is gone, or an entry dropped from its list, each
 * refused by --verify, naming it; the launcher refuses to start with an
 * extra or changed file in bin/ or lib/ before it runs anything there. */
static void test_verify_whole(void **state)
{
	char V[700];
	static const struct {
		const char *what, *cmd, *names;
		bool launcher; /* refused at start by the shell's bin/lib check */
	} C[] = {
		{"an extra libcublasLt in lib/", "cp %s/lib/$(ls %s/lib | head -n 1) %s/lib/libcublasLt.so.13", "lib/libcublasLt.so.13", true},
		{"an extra binary in bin/", "cp /bin/true %s/bin/helper #%s%s", "bin/helper", true},
		{"a library resized", "printf x >> %s/lib/$(ls %s/lib | head -n 1) #%s", "lib/", true},
		{"an extra engine file", "printf x > %s/engines/tiny-ngram/extra.cubin #%s%s", "engines/tiny-ngram/extra.cubin", false},
		{"an extra directory", "mkdir %s/engines/more #%s%s", "engines/more", false},
		{"a listed file gone", "rm %s/engines/tiny-ngram/kernels.cu #%s%s", "kernels.cu", false},
		{"a files entry dropped", "grep -v 'engines/tiny-ngram/kernels.cu' %s/bundle.json > %s/b && mv %s/b %s/bundle.json",
		 "kernels.cu", false},
	};
	for (size_t i = 0; i < sizeof(C) / sizeof(C[0]); i++) {
		snprintf(V, sizeof(V), "%s/VW%zu", g_abs, i);
		bundle(V, g_engine, "");
		must(sh(C[i].cmd, V, V, V, V), C[i].what);
		assert_int_equal(sh("%s/specwright bundle --verify %s 2>&1", build_dir(), V), 1);
		if (!strstr(g_out, C[i].names) || !strstr(g_out, "1 problem"))
			fail_msg("%s: --verify: %s", C[i].what, g_out);
		print_message("  %-30s --verify: %.160s\n", C[i].what, strstr(g_out, V));
		assert_int_equal(sh("env -i PATH=/usr/bin:/bin %s/run run -p x --backend host 2>&1", V), 1);
		if (!strstr(g_out, C[i].names) || !strstr(g_out, "nothing was run"))
			fail_msg("%s: the launcher started: %s", C[i].what, g_out);
		if (C[i].launcher && !strstr(g_out, "bin and") )
			fail_msg("%s: not the launcher's own bin/lib check: %s", C[i].what, g_out);
		/* and the next bundle into that place refuses to replace it */
		assert_int_equal(sh("%s/specwright bundle %s -o %s 2>&1", build_dir(), g_engine, V), 1);
		assert_non_null(strstr(g_out, "is not a bundle"));
		must(sh("rm -rf %s", V), "rm");
	}
	/* a bundle made before the directory list (format 1: files only, its
	 * directories those of its files) is checked whole too: replaced when
	 * untouched, refused with a file added */
	snprintf(V, sizeof(V), "%s/VW1fmt", g_abs);
	bundle(V, g_engine, "");
	must(sh("python3 -c 'import json,sys; p=sys.argv[1]+\"/bundle.json\"; b=json.load(open(p)); "
	        "b[\"specwright_bundle\"]=1; del b[\"dirs\"]; json.dump(b, open(p, \"w\"))' %s", V), "format 1");
	must(sh("%s/specwright bundle --verify %s 2>&1", build_dir(), V), "format 1 verifies");
	must(sh("printf mine > %s/engines/notes.txt", V), "notes");
	assert_int_equal(sh("%s/specwright bundle %s -o %s 2>&1", build_dir(), g_engine, V), 1);
	assert_non_null(strstr(g_out, "engines/notes.txt"));
	must(sh("rm %s/engines/notes.txt", V), "rm");
	bundle(V, g_engine, "");
	must(sh("grep -c '\"specwright_bundle\": 2' %s/bundle.json", V), "replaced by a format-2 bundle");
}

/* ---- the kit's binaries ---- */

static void test_kit_binaries(void **state)
{
	const char *b = build_dir();
	/* EVEX-encoded instructions (first byte 0x62, possibly after 0x67: in
	 * 64-bit mode 0x62 is nothing else) and the functions holding them,
	 * in the unstripped twin of bin/specwright */
	must(sh("objdump -d %s/portable/obj/specwright | awk '/^[0-9a-f]+ <.*>:$/ {fn = $2; next} "
	        "{ n = split($0, f, \"\\t\"); if (n >= 3 && (f[2] ~ /^62 / || f[2] ~ /^67 62 /)) c[fn]++ } "
	        "END { for (k in c) print k, c[k] }' | sort", b), "objdump");
	int n_fn = 0, n_bad = 0;
	for (char *line = strtok(g_out, "\n"); line; line = strtok(NULL, "\n")) {
		n_fn++;
		/* host_gemm.c's t512_* and helpers, host_gemm_i8.c's *_512 / *vnni* */
		if (!strstr(line, "512") && !strstr(line, "vnni")) {
			print_message("  EVEX outside an AVX-512 function: %s\n", line);
			n_bad++;
		}
	}
	print_message("  %d functions hold AVX-512 instructions, all with AVX-512 target attributes\n", n_fn);
	assert_int_equal(n_bad, 0);
	assert_true(n_fn > 0); /* the run-time AVX-512 paths are there */
	/* the newest GLIBC symbol version any binary or library of the kit needs */
	must(sh("objdump -T %s/portable/bin/* %s/portable/lib/* | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' "
	        "| sort -t. -k1,1n -k2,2n | tail -n 1", b, b), "objdump -T");
	int maj = 0, min = 0;
	assert_int_equal(sscanf(g_out, "%d.%d", &maj, &min), 2);
	print_message("  glibc floor %d.%d\n", maj, min);
	assert_true(maj == 2 && min <= 35);
	char floor_line[64];
	snprintf(floor_line, sizeof(floor_line), "\"glibc_floor\": \"%d.%d\"", maj, min);
	must(sh("cat %s/portable/kit.json", b), "kit.json");
	assert_non_null(strstr(g_out, floor_line));
	/* no OpenBLAS; every non-glibc library it needs is in lib/ */
	must(sh("env -i %s/portable/bin/specwright 2>&1 | head -1; ldd %s/portable/bin/specwright "
	        "%s/portable/bin/test_device", b, b, b), "ldd");
	assert_null(strstr(g_out, "openblas"));
	assert_null(strstr(g_out, "not found"));
	for (char *line = strtok(g_out, "\n"); line; line = strtok(NULL, "\n"))
		if (strstr(line, "=> /") && !strstr(line, "/portable/bin/../lib/") && !strstr(line, "libc.so") &&
		    !strstr(line, "libm.so") && !strstr(line, "ld-linux"))
			fail_msg("resolved outside the kit: %s", line);
	must(sh("du -sk %s/portable/bin %s/portable/lib | awk '{s += $1} END {print s}'", b, b), "du");
	print_message("  kit bin/ + lib/: %.2f MiB\n", atof(g_out) / 1024.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kit_binaries),
		cmocka_unit_test(test_run_host),
		cmocka_unit_test(test_run_cuda_fake),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_verify),
		cmocka_unit_test(test_verify_whole),
		cmocka_unit_test(test_eagle3_head),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
