/* Engine directories as built, and only as built (issue 16, items 4 and 5):
 * `specwright build` writes into a temporary sibling and renames it into
 * place last, engine.json lists every other file with its size and FNV-1a
 * (checked here against an independent recomputation), and the executor
 * refuses a directory that is not what the build wrote: an edited
 * kernels.cu, a missing file, an unlisted kernel image, a list that is
 * gone. A killed build leaves no directory at the target path; two builds
 * into one path leave one whole engine; a directory that is not an engine
 * is never replaced. Runs build/specwright as a subprocess. */
#include <dirent.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shell_util.h"

#include "core/fileio.h"
#include "core/json.h"
#include "formats/engine_files.h"

static char g_out[1 << 16];
#define sh(...) tu_sh(g_out, sizeof(g_out), __VA_ARGS__)
static char g_dir[512];

static const char *bin(void)
{
	static char b[300];
	snprintf(b, sizeof(b), "%s/specwright", getenv("BUILD") ? getenv("BUILD") : "build");
	return b;
}

static const char *model(void)
{
	const char *p = getenv("SW_MODEL");
	return p ? p : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
}

static void build(const char *dir, const char *extra)
{
	int rc = sh("%s build models/specs/smollm2-ngram.json -o %s %s 2>&1", bin(), dir, extra);
	if (rc)
		fail_msg("build failed: %s", g_out);
}

static int run_engine(const char *dir)
{
	return sh("%s run %s --model %s --backend host -n 1 -p hi 2>&1", bin(), dir, model());
}

static void expect_refused(const char *dir, const char *frag)
{
	int rc = run_engine(dir);
	if (rc != 1 || !strstr(g_out, frag))
		fail_msg("run %s: exit %d, output:\n%s\nexpected exit 1 and '%s'", dir, rc, g_out, frag);
}

static int setup(void **state)
{
	snprintf(g_dir, sizeof(g_dir), "%s/engine_files.%d", getenv("BUILD") ? getenv("BUILD") : "build",
	         (int)getpid());
	return mkdir(g_dir, 0777);
}

static int teardown(void **state)
{
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
	return system(cmd);
}

static void test_file_list(void **state)
{
	char e[600], p[700];
	snprintf(e, sizeof(e), "%s/e", g_dir);
	build(e, "--no-compile");
	snprintf(p, sizeof(p), "%s/engine.json", e);
	size_t len = 0, klen = 0;
	char *text = sw_read_file(p, SW_CAP_IMAGE, &len);
	assert_non_null(text);
	sw_err err = {0};
	json_value *root = json_parse(text, len, p, &err);
	assert_non_null(root);
	const json_value *files = json_get(root, "files"), *k = files ? json_get(files, "kernels.cu") : NULL;
	assert_non_null(k);
	snprintf(p, sizeof(p), "%s/kernels.cu", e);
	char *ks = sw_read_file(p, SW_CAP_IMAGE, &klen);
	assert_non_null(ks);
	free(ks);
	/* sha256sum, not the project's code: the independent check */
	char want[65];
	assert_int_equal(sh("sha256sum %s/kernels.cu", e), 0);
	snprintf(want, sizeof(want), "%.64s", g_out);
	assert_int_equal(json_get(k, "bytes")->integer, (int64_t)klen);
	assert_string_equal(json_get(k, "sha256")->str, want);
	json_free(root);
	free(text);
	assert_int_equal(run_engine(e), 0); /* as built, it runs */

	/* an edited kernels.cu (appended code would run under host-emulate) */
	assert_int_equal(sh("echo 'int injected;' >> %s/kernels.cu", e), 0);
	expect_refused(e, "kernels.cu does not match the build");
	/* a missing listed file */
	build(e, "--no-compile");
	assert_int_equal(sh("rm %s/kernels.cu", e), 0);
	expect_refused(e, "lists kernels.cu");
	/* a kernel image the build did not write */
	build(e, "--no-compile");
	assert_int_equal(sh("head -c 100 /dev/urandom > %s/kernels.sm_90.cubin", e), 0);
	expect_refused(e, "kernels.sm_90.cubin: not in the engine's file list");
	/* the list itself removed */
	build(e, "--no-compile");
	assert_int_equal(sh("python3 -c \"import json,sys; p='%s/engine.json'; d=json.load(open(p)); "
	                    "d.pop('files'); json.dump(d, open(p, 'w'))\"", e), 0);
	expect_refused(e, "engine.json does not match the build");
}

/* engine.json's own content is in the integrity record (issue 26 item 1c):
 * five hand edits that keep the file list valid (each ran with exit 0 and
 * printed other text) are each refused, naming engine.json, by the record
 * alone (rt_engine_files_check) and by `run`; an engine.sum gone or edited
 * is refused too. Edits by python's json module, an independent writer. */
static void test_engine_json_covered(void **state)
{
	static const struct {
		const char *what, *py;
	} E[] = {
		{"gemm n halved", "o = [o for o in d['phases'][0]['ops'] if o['name'] == 'wqkv'][0]; "
		                  "o['gemm']['n'] //= 2"},
		{"per-layer op one layer short", "o = [o for o in d['phases'][0]['ops'] if o.get('layers')][0]; "
		                                 "o['repeat'] -= 1"},
		{"k and v rows swapped",
		 "o = [o for o in d['phases'][0]['ops'] if o['name'] == 'qkv_rope'][0]; "
		 "o['args'][4], o['args'][5] = o['args'][5], o['args'][4]"},
		{"an op removed from a phase", "ops = d['phases'][2]['ops']; "
		                               "ops.remove([o for o in ops if o['name'] == 'qkv_rope'][0])"},
		{"prefill chunk doubled", "d['spec']['prefill_chunk'] *= 2"},
	};
	char e[600], c[700], p[800];
	snprintf(e, sizeof(e), "%s/cov", g_dir);
	build(e, "--no-compile");
	assert_int_equal(run_engine(e), 0);
	for (size_t i = 0; i < sizeof(E) / sizeof(E[0]); i++) {
		snprintf(c, sizeof(c), "%s/cov%zu", g_dir, i);
		assert_int_equal(sh("rm -rf %s && cp -r %s %s", c, e, c), 0);
		assert_int_equal(sh("python3 -c \"import json; p='%s/engine.json'; d=json.load(open(p)); "
		                    "%s; json.dump(d, open(p, 'w'), indent=1)\"", c, E[i].py), 0);
		sw_err err = {0};
		assert_int_not_equal(rt_engine_files_check(c, &err), 0);
		if (!strstr(err.msg, "engine.json does not match the build"))
			fail_msg("%s: the record says \"%s\"", E[i].what, err.msg);
		expect_refused(c, "engine.json");
		print_message("  %-32s refused: %.120s\n", E[i].what, err.msg + strlen(c) + 1);
	}
	/* the record itself: gone, or its digest edited */
	snprintf(p, sizeof(p), "%s/engine.sum", e);
	assert_int_equal(sh("mv %s %s.x", p, p), 0);
	expect_refused(e, "engine.sum: cannot open");
	assert_int_equal(sh("python3 -c \"import json; d = json.load(open('%s.x')); r = d['engine.json']; "
	                    "r['sha256'] = '%%x' %% ((int(r['sha256'][0], 16) + 1) %% 16) + r['sha256'][1:]; "
	                    "json.dump(d, open('%s', 'w'))\"", p, p), 0); /* its first digit changed */
	expect_refused(e, "engine.json does not match the build");
}

/* `build -o DIR` replaces only an engine directory this program built and
 * nothing else (issue 26 item 3): a directory that merely holds a file
 * named engine.json, or a real engine with a user's file added, is refused
 * naming it, and every file in it stays. */
static void test_build_replaces_only_engines(void **state)
{
	char d[600];
	snprintf(d, sizeof(d), "%s/mine", g_dir);
	assert_int_equal(sh("mkdir -p %s && echo '{}' > %s/engine.json && echo precious > %s/a.txt",
	                    d, d, d), 0);
	int rc = sh("%s build models/specs/smollm2-ngram.json -o %s --no-compile 2>&1", bin(), d);
	if (rc != 1 || !strstr(g_out, "is not an engine directory this program built"))
		fail_msg("exit %d: %s", rc, g_out);
	assert_int_equal(sh("cat %s/a.txt %s/engine.json", d, d), 0);
	assert_string_equal(g_out, "precious\n{}\n");
	/* a real engine plus a user's file */
	snprintf(d, sizeof(d), "%s/real", g_dir);
	build(d, "--no-compile");
	build(d, "--no-compile"); /* an untouched engine is replaced */
	assert_int_equal(sh("echo notes > %s/notes.txt", d), 0);
	rc = sh("%s build models/specs/smollm2-ngram.json -o %s --no-compile 2>&1", bin(), d);
	if (rc != 1 || !strstr(g_out, "notes.txt: not a file the build wrote"))
		fail_msg("exit %d: %s", rc, g_out);
	assert_int_equal(sh("cat %s/notes.txt", d), 0);
	assert_string_equal(g_out, "notes\n");
}

/* Whole-file reads are capped, checked with fstat before reading (issue 26
 * item 4): a 5 GB engine.json (sparse: nothing to read but the cap would
 * have made the reader take 22 s) is refused at once, naming the file, its
 * size and the cap. */
static void test_engine_json_capped(void **state)
{
	char e[600];
	snprintf(e, sizeof(e), "%s/huge", g_dir);
	build(e, "--no-compile");
	assert_int_equal(sh("truncate -s 5000000000 %s/engine.json", e), 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	expect_refused(e, "engine.json: 5000000000 bytes, more than the 16777216-byte cap for an "
	                  "engine.json");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	print_message("  5 GB engine.json refused in %.2f s: %s", s, g_out);
	assert_true(s < 10); /* reading it would take tens of seconds; the refusal reads nothing */
}

static void test_atomic_replace(void **state)
{
	char e[600], keep[600];
	/* a directory that is not an engine is never replaced */
	snprintf(keep, sizeof(keep), "%s/notes", g_dir);
	assert_int_equal(sh("mkdir -p %s && echo precious > %s/a.txt", keep, keep), 0);
	int rc = sh("%s build models/specs/smollm2-ngram.json -o %s --no-compile 2>&1", bin(), keep);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(g_out, "is not an engine directory this program built"));
	assert_int_equal(sh("cat %s/a.txt", keep), 0);
	assert_string_equal(g_out, "precious\n");

	/* two builds into one directory at once: one whole engine lands */
	snprintf(e, sizeof(e), "%s/race", g_dir);
	rc = sh("(%s build models/specs/smollm2-ngram.json -o %s --no-compile & "
	        "%s build models/specs/smollm2-eagle25.json -o %s --no-compile & wait) >/dev/null 2>&1",
	        bin(), e, bin(), e);
	assert_int_equal(rc, 0);
	rc = run_engine(e);
	if (rc)
		fail_msg("after two concurrent builds: %s", g_out);

	/* a killed build leaves nothing at the target path, and at most its
	 * own temporary beside it (killed.tmp-XXXXXX), which no later build
	 * removes: nothing outside a build's own temporary is ever removed
	 * (issue 40; it was swept by pid before, which took a user's
	 * directory of that name) */
	snprintf(e, sizeof(e), "%s/killed", g_dir);
	char cache[700];
	snprintf(cache, sizeof(cache), "%s/cache-cold", g_dir); /* cold cache: NVRTC takes seconds */
	pid_t pid = fork();
	if (pid == 0) {
		execl(bin(), bin(), "build", "models/specs/smollm2-ngram.json", "-o", e, "--cache", cache,
		      (char *)NULL);
		_exit(127);
	}
	usleep(1500 * 1000);
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	struct stat sb;
	const int killed = WIFSIGNALED(st);
	if (killed) /* killed mid-build, as intended */
		assert_int_equal(stat(e, &sb), -1);
	else
		print_message("  the build finished in under 1.5 s (warm machine): no kill happened\n");
	build(e, "--no-compile");
	assert_int_equal(run_engine(e), 0);
	assert_int_equal(sh("ls -d %s/killed.* 2>/dev/null | grep -c 'killed\\.tmp-......$'", g_dir), killed ? 0 : 1);
	assert_int_equal(atoi(g_out), killed);
}

/* `build -o DIR` never touches a sibling it did not make (issue 40): a
 * user's directories named DIR.tmp.PID (the name the build once gave its
 * temporary and removed first: the next pids after this one), and
 * DIR.tmp.N / DIR.old.N of a pid that is gone (which the build once swept
 * as its killed leftovers) keep every file. */
static void test_build_keeps_siblings(void **state)
{
	char d[600];
	snprintf(d, sizeof(d), "%s/sib", g_dir);
	assert_int_equal(sh("for n in $(seq %d %d) 4194300; do mkdir -p %s.tmp.$n && echo mine > %s.tmp.$n/f; done; "
	                    "mkdir -p %s.old.4194300 && echo mine > %s.old.4194300/f",
	                    (int)getpid() + 1, (int)getpid() + 64, d, d, d, d), 0);
	build(d, "--no-compile");
	assert_int_equal(run_engine(d), 0);
	assert_int_equal(sh("cat %s.tmp.*/f %s.old.*/f | grep -c mine", d, d), 0);
	assert_int_equal(atoi(g_out), 66);
	/* and a directory where the temporary would go is never taken: the
	 * temporary is an exclusive fresh name, nothing beside it changes */
	assert_int_equal(sh("ls -d %s.tmp-* 2>/dev/null | wc -l", d), 0);
	assert_int_equal(atoi(g_out), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_list),
		cmocka_unit_test(test_atomic_replace),
		cmocka_unit_test(test_engine_json_covered),
		cmocka_unit_test(test_build_replaces_only_engines),
		cmocka_unit_test(test_engine_json_capped),
		cmocka_unit_test(test_build_keeps_siblings),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
