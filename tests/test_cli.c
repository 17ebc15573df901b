/* The CLI refuses bad input with a clear message and a non-zero exit, never
 * a crash: unknown commands and options, out-of-range values, missing and
 * malformed model files, bad draft specs, prompts longer than the context.
 * Runs build/specwright (BUILD overrides the directory) as a subprocess. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "formats/gguf.h"
#include "model/ctx.h"
#include "testutil.h"

static char g_out[1 << 16];

/* Runs the CLI with args (a shell-quoted string), captures stdout+stderr. */
static int run(const char *args)
{
	const char *b = getenv("BUILD");
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "%s/specwright %s 2>&1", b ? b : "build", args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(g_out, 1, sizeof(g_out) - 1, p);
	g_out[n] = 0;
	int st = pclose(p);
	assert_true(WIFEXITED(st)); /* a signal (crash) fails the test */
	return WEXITSTATUS(st);
}

static const char *model(void)
{
	const char *p = getenv("SW_MODEL");
	return p ? p : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
}

#define EXPECT(rc_expected, needle, ...)                                                  \
	do {                                                                                  \
		char a_[2048];                                                                    \
		snprintf(a_, sizeof(a_), __VA_ARGS__);                                            \
		int rc_ = run(a_);                                                                \
		if (rc_ != (rc_expected) || !strstr(g_out, needle))                               \
			fail_msg("`specwright %s` -> exit %d, output:\n%s\nexpected exit %d and '%s'", \
			         a_, rc_, g_out, rc_expected, needle);                                \
	} while (0)

static void test_usage_errors(void **state)
{
	EXPECT(2, "unknown command 'frobnicate'", "frobnicate x");
	EXPECT(2, "unknown option '--bogus'", "run %s --bogus", model());
	EXPECT(2, "option --gamma expects an integer in [1, 64], found '0'", "run %s --gamma 0", model());
	EXPECT(2, "option -t expects a number in [0, 100], found 'hot'", "run %s -t hot", model());
	EXPECT(2, "option --top-p expects a number", "run %s --top-p 1.5", model());
	/* issue 26 items 5-6: bounds as they are (top-p 0 is refused: an open
	 * bound), -n 0 refused at parse time on a model, an engine (whatever
	 * the directory holds: nothing is loaded) and bench */
	EXPECT(2, "option --top-p expects a number in (0, 1], found '1.5'", "run %s --top-p 1.5", model());
	EXPECT(2, "option --top-p expects a number in (0, 1], found '0'", "run %s --top-p 0", model());
	EXPECT(2, "option -n expects an integer in [1, 1048576], found '0'", "run %s -n 0 -p hi", model());
	EXPECT(2, "option -n expects an integer in [1, 1048576], found '0'", "run /nonexistent -n 0 -p hi");
	EXPECT(2, "option --max-tokens expects an integer in [1, 1048576], found '0'",
	       "bench %s --max-tokens 0", model());
	/* an engine directory whose engine.json cannot be read: named, not a
	 * config.json the model loader would look for */
	char dir[] = "/tmp/sw_eng_XXXXXX";
	assert_non_null(mkdtemp(dir));
	char sub[64];
	snprintf(sub, sizeof(sub), "%s/engine.json", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	EXPECT(1, "engine.json", "run %s -p hi", dir);
	if (strstr(g_out, "config.json"))
		fail_msg("an unreadable engine.json reported as: %s", g_out);
	assert_int_equal(rmdir(sub), 0);
	assert_int_equal(symlink("/nonexistent/engine.json", sub), 0);
	EXPECT(1, "engine.json", "run %s -p hi", dir);
	if (strstr(g_out, "config.json"))
		fail_msg("a dangling engine.json reported as: %s", g_out);
	unlink(sub);
	rmdir(dir);
	EXPECT(2, "option -p needs a value", "run %s -p", model());
	EXPECT(2, "missing the model argument", "run -p hi");
	EXPECT(2, "give either -p or -f", "run %s -p a -f b", model());
	EXPECT(0, "usage: specwright", "help");
}

static void test_bad_files(void **state)
{
	EXPECT(1, "/nonexistent/m.gguf", "run /nonexistent/m.gguf -p hi");
	char path[] = "/tmp/sw_bad_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "GGUF\x03\0\0\0garbage", 15), 15);
	close(fd);
	EXPECT(1, path, "run %s -p hi", path);
	unlink(path);
	EXPECT(1, "cannot open the prompt file", "run %s -f /nonexistent/prompt.txt", model());
}

static void test_bad_requests(void **state)
{
	/* 3000 words cannot fit a context of 64 */
	char ppath[] = "/tmp/sw_prompt_XXXXXX";
	int pfd = mkstemp(ppath);
	assert_true(pfd >= 0);
	for (int i = 0; i < 3000; i++)
		assert_int_equal(write(pfd, "word ", 5), 5);
	close(pfd);
	EXPECT(1, "more than the context of 64 allows", "run %s --ctx 64 -f %s", model(), ppath);
	unlink(ppath);
	EXPECT(1, "exceeds the model's trained context of 8192", "run %s --ctx 100000 -p hi", model());
	EXPECT(1, "layers must lie in [0, 30)", "run %s --draft layerskip:0-40 -p hi", model());
	EXPECT(1, "expected none, layerskip:N, model:PATH or ngram", "run %s --draft magic -p hi", model());
	/* a table draft with fewer ids than the target: only a Llama draft's
	 * embedding can be padded (test_vocab_prefix.c) */
	float P[25];
	tu_random_table(P, 5, 5, 0.0, 1);
	char tpath[] = "/tmp/sw_tab_XXXXXX";
	int fd = mkstemp(tpath);
	close(fd);
	sw_err err;
	assert_int_equal(rt_table_save(tpath, 5, 1, P, &err), 0);
	EXPECT(1, "a draft with fewer ids (5) than its target (49152): expected a Llama model", "run %s --draft model:%s -p hi", model(), tpath);
	unlink(tpath);
	EXPECT(2, "--dump FILE is required", "eval %s -p hi", model());
	EXPECT(1, "--adaptive '1.5': expected h[:min:max] with h in [0, 1]", "run %s --draft layerskip:8 --adaptive 1.5 -p hi", model());
	EXPECT(1, "/nonexistent.st: cannot open", "run %s --draft layerskip:8 --adaptive 0.3 --acc-head /nonexistent.st -p hi", model());
	EXPECT(1, "--adaptive needs a draft model", "run %s --draft ngram --adaptive 0.3 -p hi", model());
	EXPECT(2, "--verify and --expand need --tree", "run %s --verify rrs -p hi", model());
	EXPECT(1, "--tree needs a draft model", "run %s --draft ngram --tree eagle25 -p hi", model());
	EXPECT(1, "nope", "run %s --draft layerskip:4 --tree nope -p hi", model());
	EXPECT(1, "--expand 'shuffle'", "run %s --draft layerskip:4 --tree chain:3 --expand shuffle -p hi", model());
	EXPECT(1, "SpecHub drafts at most two children per node, but node 0 of tree eagle25 has 4",
	       "run %s --draft layerskip:4 --tree eagle25 --expand spechub -t 0.6 -n 2 -p hi", model());
	EXPECT(1, "is not exact with --expand topk", "run %s --draft layerskip:4 --tree kary:2:2 --expand topk --verify rrs -t 1 -p hi", model());
}

/* The generator's commands refuse bad specs and non-engine directories. */
static void test_build_inspect_errors(void **state)
{
	EXPECT(1, "/nonexistent.json: cannot read the spec", "build /nonexistent.json -o /tmp/sw_eng_x");
	char path[] = "/tmp/sw_spec_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *bad = "{\"name\": \"x\", \"bogus\": 1}";
	assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
	close(fd);
	EXPECT(1, "$: unknown field \"bogus\"", "build %s -o /tmp/sw_eng_x", path);
	unlink(path);
	EXPECT(2, "usage: specwright build", "build models/specs/smollm2-eagle25.json");
	EXPECT(1, "is /tmp an engine directory", "inspect /tmp");
}

/* The happy path works end to end and reports its stats as JSON. */
static void test_run_json(void **state)
{
	EXPECT(0, "\"tau\":", "run %s --draft ngram -n 8 --json -p 'Say hello.'", model());
	assert_non_null(strstr(g_out, "\"label\":\"target-only\""));
	assert_non_null(strstr(g_out, "\"speedup\":"));
}

/* Files a user names that are not plain files never block or crash: a FIFO
 * (open() would wait for a writer forever), a directory, a NUL in a prompt;
 * "-f -" reads standard input; a full disk during eval --dump leaves no
 * truncated file (RLIMIT_FSIZE stands in for a full disk: the write fails
 * with EFBIG once the file reaches 50 KB). */
static void test_input_files(void **state)
{
	char dir[256], fifo[300], nul[300], dump[300];
	snprintf(dir, sizeof(dir), "%s/cli_inputs.%d", getenv("BUILD") ? getenv("BUILD") : "build", (int)getpid());
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(nul, sizeof(nul), "%s/nul.txt", dir);
	snprintf(dump, sizeof(dump), "%s/dump.bin", dir);
	char cmd[2600];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && mkfifo %s && printf 'ab\\000cd' > %s && echo 'The sky is' > %s/p.txt", dir, fifo, nul, dir);
	assert_int_equal(system(cmd), 0);
	alarm(300); /* a blocked open() must fail this test, not hang the suite */
	EXPECT(1, "is a FIFO, not a regular file", "generate %s -f %s -n 2", model(), fifo);
	EXPECT(1, "is a directory, not a regular file", "generate %s -f %s -n 2", model(), dir);
	EXPECT(1, "holds a NUL byte at offset 2", "generate %s -f %s -n 2", model(), nul);
	EXPECT(1, "is a FIFO, not a regular file", "generate %s -n 2", fifo);
	EXPECT(1, "cannot read the spec: ", "build %s -o %s/e", dir, dir);
	assert_non_null(strstr(g_out, "is a directory, not a regular file"));
	EXPECT(0, "2 tokens", "generate %s -n 2 --no-chat -f - < %s/p.txt", model(), dir); /* stdin */
	EXPECT(1, "empty prompt", "generate %s -n 2 --no-chat -f - < /dev/null", model());
	char a[1024];
	snprintf(a, sizeof(a), "eval %s -p hi -n 3 --dump %s", model(), dump);
	const char *b = getenv("BUILD");
	snprintf(cmd, sizeof(cmd), "sh -c 'trap \"\" XFSZ; ulimit -f 100; exec %s/specwright %s' 2>&1", b ? b : "build", a);
	FILE *p = popen(cmd, "r");
	size_t n = fread(g_out, 1, sizeof(g_out) - 1, p);
	g_out[n] = 0;
	int st = pclose(p);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 1 || !strstr(g_out, "write failed"))
		fail_msg("eval --dump over the file size limit: status %d, output:\n%s", st, g_out);
	assert_int_equal(access(dump, F_OK), -1); /* nothing left behind, not even the temporary */
	snprintf(cmd, sizeof(cmd), "ls %s | grep -c tmp", dir);
	p = popen(cmd, "r");
	n = fread(g_out, 1, sizeof(g_out) - 1, p);
	g_out[n] = 0;
	pclose(p);
	assert_int_equal(atoi(g_out), 0);
	EXPECT(0, "", "eval %s -p hi -n 2 --dump %s", model(), dump); /* and without the limit it is written */
	assert_int_equal(access(dump, R_OK), 0);
	alarm(0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* Outputs never replace what is not theirs (issue 40): eval --dump,
 * derive-draft -o and train-head -o refuse a target that is a FIFO, a
 * directory or a link to a device (it was renamed over: as root
 * `--dump /dev/null` replaced the device node), and one that is an input
 * of the same command (the model itself); the target is as it was. A
 * failed write to standard output exits non-zero. */
static void test_output_targets(void **state)
{
	char dir[256], cmd[1400];
	struct stat st;
	snprintf(dir, sizeof(dir), "%s/cli_outputs.%d", getenv("BUILD") ? getenv("BUILD") : "build", (int)getpid());
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/d && mkfifo %s/fifo && ln -s /dev/null %s/null && cp %s %s/model.gguf",
	         dir, dir, dir, model(), dir);
	assert_int_equal(system(cmd), 0);
	alarm(300);
	static const char *const targets[][2] = {
		{"fifo", "is a FIFO, not a regular file"},
		{"d", "is a directory, not a regular file"},
		{"null", "is a character device, not a regular file"},
	};
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		EXPECT(2, targets[i][1], "eval %s -p hi -n 2 --dump %s/%s", model(), dir, targets[i][0]);
		EXPECT(2, targets[i][1], "derive-draft %s --layers 0-1 -o %s/%s", model(), dir, targets[i][0]);
	}
	char p[400];
	snprintf(p, sizeof(p), "%s/fifo", dir);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	snprintf(p, sizeof(p), "%s/null", dir);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(stat("/dev/null", &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	/* the input itself */
	snprintf(p, sizeof(p), "%s/model.gguf", dir);
	struct stat before;
	assert_int_equal(stat(p, &before), 0);
	EXPECT(2, "the same file as the model", "eval %s -p hi -n 2 --dump %s", p, p);
	EXPECT(2, "the same file as the model", "derive-draft %s --layers 0-1 -o %s", p, p);
	EXPECT(2, "the same file as the model", "train-head %s --draft layerskip:0-3 -o %s", p, p);
	EXPECT(2, "the same file as --tokenizer", "derive-draft %s --layers 0-1 --tokenizer %s -o %s/d/../model.gguf",
	       model(), p, dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_ino, before.st_ino);
	assert_int_equal(st.st_size, before.st_size);
	/* a derived model into a new file still works, and replaces a regular one */
	EXPECT(0, "wrote", "derive-draft %s --layers 0-1 -o %s/draft.gguf", model(), dir);
	EXPECT(0, "wrote", "derive-draft %s --layers 0-2 -o %s/draft.gguf", model(), dir);
	/* standard output that cannot be written */
	snprintf(cmd, sizeof(cmd), "%s/specwright generate %s -n 2 --no-chat -p hi 2>&1 >/dev/full",
	         getenv("BUILD") ? getenv("BUILD") : "build", model());
	FILE *pp = popen(cmd, "r");
	size_t n = fread(g_out, 1, sizeof(g_out) - 1, pp);
	g_out[n] = 0;
	int rc = pclose(pp);
	if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 1 || !strstr(g_out, "writing standard output failed"))
		fail_msg("generate > /dev/full: status %d, output:\n%s", rc, g_out);
	alarm(0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* The "tokens" array of the last --json run (g_out) into out. */
static void json_tokens(char *out, size_t n)
{
	const char *a = strstr(g_out, "\"tokens\": [");
	assert_non_null(a);
	const char *b = strchr(a, ']');
	assert_non_null(b);
	snprintf(out, n, "%.*s", (int)(b - a), a);
}

/* An engine fixes its drafter, tree, verification and context at build
 * time: run/bench refuse options that would change them (naming the
 * engine's value) instead of running the engine's own setting silently.
 * Sampling values are run-time: a greedy engine refuses a temperature (it
 * cannot honour it) and serves top-k/top-p at temperature 0, where they
 * cannot matter (same tokens); the same spec built for one-hot verification
 * (a sampling family) honours -t/--top-k/--top-p/--seed, and a greedy run
 * of it emits the greedy engine's tokens. The engine's text has no control
 * tokens (<|im_end|> ends it, it is not part of it). */
static void test_engine_options(void **state)
{
	char dir[256], sdir[300], g[2048], s1[2048], t[2048];
	const char *b = getenv("BUILD") ? getenv("BUILD") : "build";
	snprintf(dir, sizeof(dir), "%s/cli_engine.%d", b, (int)getpid());
	snprintf(sdir, sizeof(sdir), "%s/cli_engine_onehot.%d", b, (int)getpid());
	EXPECT(0, "written", "build models/specs/smollm2-ngram.json -o %s --no-compile", dir);
	const char *bad[][2] = {
		{"-t 0.8", "temperature 0.8 cannot be honoured: the engine verifies greedily"},
		{"--tree eagle25", "--tree cannot apply"},
		{"--gamma 3", "--gamma cannot apply"},
		{"--draft layerskip:4", "--draft cannot apply"},
		{"--ctx 4096", "context (1024) are fixed at build time"},
		{"--draft-model x.gguf", "drafts with n-grams, not a separate model"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		EXPECT(1, bad[i][1], "run %s --model %s --backend host -n 2 -p hi %s", dir, model(), bad[i][0]);
	EXPECT(1, "--tree cannot apply", "bench %s --model %s --corpus README.md --tree chain:3", dir, model());
	EXPECT(1, "temperature 0.8 cannot be honoured", "profile %s --model %s --backend host -n 2 -p hi -t 0.8",
	       dir, model());
	/* timing only: random weights, a synthetic prompt, no text; refused where it cannot apply */
	EXPECT(0, "timing only: random weights (seed 3); no text", "run %s --backend host --random-weights 3 -P 9 -n 4",
	       dir);
	assert_non_null(strstr(g_out, "9 prompt ids, 4 tokens"));
	assert_non_null(strstr(g_out, "host overhead per iteration"));
	EXPECT(0, "timing only: random weights (seed 3)", "profile %s --backend host --random-weights 3 -n 2", dir);
	/* the verify forward alone at a row count, and row counts it does not have */
	EXPECT(0, "the verify forward at 2 of its", "profile %s --backend host --random-weights 3 -n 2 --rows 2",
	       dir);
	assert_non_null(strstr(g_out, "verify "));
	assert_null(strstr(g_out, "commit "));
	EXPECT(1, "--rows 4096: the verify forward has", "profile %s --backend host --random-weights 3 -n 2 "
	       "--rows 4096", dir);
	EXPECT(2, "--rows applies to `profile ENGINE_DIR` only", "run %s --rows 2", dir);
	EXPECT(1, "--model cannot apply with --random-weights", "run %s --model %s --random-weights 3", dir, model());
	EXPECT(2, "--random-weights takes no prompt text", "run %s --random-weights 3 -p hi", dir);
	EXPECT(2, "-P N (a synthetic prompt of N token ids) needs --random-weights", "run %s -P 8", dir);
	EXPECT(2, "--random-weights applies to `run ENGINE_DIR` and `profile ENGINE_DIR` only",
	       "generate %s --random-weights 3 -p hi", model());
	EXPECT(2, "--random-weights needs an engine directory", "run %s --random-weights 3", model());
	EXPECT(2, "--embd-type applies to derive-draft only", "eval %s --embd-type q4_1 --dump x", model());
	EXPECT(2, "--embd-type 'q3': expected f32, f16, bf16, q8_0, q4_0 or q4_1",
	       "derive-draft %s --layers 2 --embd-type q3 -o /tmp/sw_never.gguf", model());
	/* the engine's own values, restated, and a chat answer that ends at <|im_end|> */
	EXPECT(0, "stop: eos", "run %s --model %s --backend host -t 0 --top-p 1 -n 64 -p 'Say hello.'", dir, model());
	assert_null(strstr(g_out, "<|im_end|>"));
	assert_null(strstr(g_out, "<|im_start|>"));
	/* top-k / top-p at temperature 0: honoured, and they cannot change a greedy run */
	const char *p = "-n 16 --no-baseline --json --no-chat -p 'The sky is'";
	EXPECT(0, "\"tokens\"", "run %s --model %s --backend host %s", dir, model(), p);
	json_tokens(g, sizeof(g));
	EXPECT(0, "\"tokens\"", "run %s --model %s --backend host --top-k 3 --top-p 0.5 %s", dir, model(), p);
	json_tokens(t, sizeof(t));
	assert_string_equal(g, t);

	/* one-hot verification: a sampling family */
	char cmd[1400];
	snprintf(cmd, sizeof(cmd), "sed 's/\"method\": \"greedy\"/\"method\": \"onehot\"/' "
	         "models/specs/smollm2-ngram.json > %s.spec.json && grep -q onehot %s.spec.json", sdir, sdir);
	assert_int_equal(system(cmd), 0);
	EXPECT(0, "written", "build %s.spec.json -o %s --no-compile", sdir, sdir);
	EXPECT(0, "\"tokens\"", "run %s --model %s --backend host -t 0 %s", sdir, model(), p);
	json_tokens(t, sizeof(t));
	assert_string_equal(g, t); /* greedy on a sampling engine == the greedy engine */
	const char *hot = "-t 0.9 --top-k 40 --top-p 0.95";
	EXPECT(0, "\"tokens\"", "run %s --model %s --backend host %s --seed 7 %s", sdir, model(), hot, p);
	json_tokens(s1, sizeof(s1));
	EXPECT(0, "\"tokens\"", "run %s --model %s --backend host %s --seed 7 %s", sdir, model(), hot, p);
	json_tokens(t, sizeof(t));
	assert_string_equal(s1, t); /* the seed reaches the kernels: same seed, same tokens */
	EXPECT(0, "\"tokens\"", "run %s --model %s --backend host %s --seed 8 %s", sdir, model(), hot, p);
	json_tokens(t, sizeof(t));
	assert_string_not_equal(s1, t);
	assert_string_not_equal(s1, g); /* and the temperature: not the greedy tokens */
	EXPECT(0, "\"n_tokens\": 5,", "run %s --model %s --backend host %s --seed 7 -n 5 --no-baseline --json "
	       "--no-chat -p 'The sky is'", sdir, model(), hot);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s.spec.json %s %s.spec.json", dir, dir, sdir, sdir);
	assert_int_equal(system(cmd), 0);
}

/* The field KEY's array ("KEY":[...] or "KEY": [...]) of the output g_out. */
static void json_array(const char *key, char *out, size_t n)
{
	char k[64];
	snprintf(k, sizeof(k), "\"%s\":", key);
	const char *a = strstr(g_out, k);
	assert_non_null(a);
	a = strchr(a, '[');
	assert_non_null(a);
	const char *b = strchr(a, ']');
	assert_non_null(b);
	size_t j = 0;
	for (const char *c = a + 1; c < b && j + 1 < n; c++)
		if (*c != ' ')
			out[j++] = *c == ',' ? ' ' : *c;
	out[j] = 0;
}

/* A prompt given as token ids (--ids) is fed as given: the text prompt's own
 * ids (as generate --json reports them) give the same greedy tokens through
 * --ids, on the model and on an engine, speculative and --target-only (which
 * must emit the same tokens: exactness); ids outside the vocabulary, junk,
 * --ids beside a text prompt or --chat, on a command without a prompt, and
 * --target-only on a model file are refused. */
static void test_prompt_ids(void **state)
{
	char dir[256], pids[512], ids[2048], t[2048];
	const char *b = getenv("BUILD") ? getenv("BUILD") : "build";
	snprintf(dir, sizeof(dir), "%s/cli_ids.%d", b, (int)getpid());
	EXPECT(0, "\"prompt_ids\":", "generate %s --no-chat -p 'The sky is' -n 8 --json", model());
	json_array("prompt_ids", pids, sizeof(pids));
	json_array("ids", ids, sizeof(ids));
	assert_true(strlen(pids) > 0 && strlen(ids) > 0);
	EXPECT(0, "\"ids\":", "generate %s --ids '%s' -n 8 --json", model(), pids);
	json_array("ids", t, sizeof(t));
	assert_string_equal(ids, t);
	EXPECT(0, "written", "build models/specs/smollm2-ngram.json -o %s --no-compile", dir);
	EXPECT(0, "\"tokens\"", "run %s --model %s --backend host --ids '%s' -n 8 --json", dir, model(), pids);
	json_array("tokens", t, sizeof(t));
	assert_string_equal(ids, t);
	assert_non_null(strstr(g_out, "\"greedy_match\": 8"));
	EXPECT(0, "\"tokens\"", "run %s --model %s --backend host --ids '%s' -n 8 --json --target-only "
	       "--no-baseline", dir, model(), pids);
	json_array("tokens", t, sizeof(t));
	assert_string_equal(ids, t);
	assert_non_null(strstr(g_out, "\"tau\": 1.0000")); /* no drafting: one token an iteration */
	EXPECT(1, "token id 49152 (number 2 in the list) is outside the model's vocabulary [0, 49152)",
	       "generate %s --ids '1 49152' -n 2", model());
	EXPECT(1, "--ids: expected token ids separated by spaces or commas, found '7x'",
	       "generate %s --ids '3,7x' -n 2", model());
	EXPECT(1, "--ids: expected at least one token id", "generate %s --ids ' , ' -n 2", model());
	EXPECT(2, "either as text (-p/-f) or as token ids (--ids)", "generate %s --ids 1 -p hi", model());
	EXPECT(2, "--chat cannot apply to --ids", "generate %s --ids 1 --chat", model());
	EXPECT(2, "--ids applies to run, generate, eval and profile, not to bench", "bench %s --ids 1", model());
	EXPECT(2, "--target-only applies to an engine directory", "run %s --target-only -n 2", model());
	EXPECT(2, "--target-only applies to `run ENGINE_DIR` only", "generate %s --target-only", model());
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* A tiny Llama draft (dim 16) with vocab ids and the first n_tok of the
 * model's own tokens (token `bad`, if >= 0, changed) at path. */
static void tiny_draft(const char *path, int vocab, int n_tok, int bad)
{
	sw_err err = {0};
	gguf_file *f = gguf_open(model(), &err);
	assert_non_null(f);
	const gguf_kv *kv = gguf_find(f, "tokenizer.ggml.tokens");
	assert_non_null(kv);
	char **toks = calloc((size_t)n_tok, sizeof(*toks));
	assert_non_null(toks);
	for (int i = 0; i < n_tok; i++) {
		gguf_str t = gguf_arr_str(f, kv, (uint64_t)i);
		toks[i] = i == bad ? strdup("<not the target's>") : strndup(t.p, (size_t)t.n);
		assert_non_null(toks[i]);
	}
	gguf_close(f);
	rt_model *m = tu_tiny_llama(vocab, 16, 1, 2, 1, 16, 5);
	assert_non_null(m);
	char raw[300];
	snprintf(raw, sizeof(raw), "%s.raw", path);
	if (rt_llama_save_gguf(m, raw, GGML_T_F32, &err) ||
	    tu_gguf_revocab(raw, path, vocab, (const char *const *)toks, n_tok, "gpt2", &err))
		fail_msg("%s: %s", path, err.msg);
	unlink(raw);
	rt_model_free(m);
	for (int i = 0; i < n_tok; i++)
		free(toks[i]);
	free(toks);
}

/* The host decoder's separate draft model (--draft model:PATH): a
 * vocabulary that is a prefix of the target's, with the target's tokens,
 * drafts (chain and tree; exit 0, the greedy tokens equal the baseline's);
 * a larger vocabulary, or another token at some id, is refused naming the
 * file, field, expected and found. */
static void test_draft_vocab(void **state)
{
	char dir[] = "/tmp/sw_vocab_XXXXXX", ok[300], big[300], bad[300];
	assert_non_null(mkdtemp(dir));
	snprintf(ok, sizeof(ok), "%s/prefix.gguf", dir);
	snprintf(big, sizeof(big), "%s/big.gguf", dir);
	snprintf(bad, sizeof(bad), "%s/bad.gguf", dir);
	tiny_draft(ok, 49149, 49149, -1);
	tiny_draft(big, 49153, 49152, -1);
	tiny_draft(bad, 49149, 49149, 100);
	EXPECT(0, "identical", "run %s --draft model:%s -p hi -n 8 --no-chat", model(), ok);
	EXPECT(0, "identical", "run %s --draft model:%s --tree kary:2:2 -p hi -n 8 --no-chat",
	       model(), ok);
	/* the default pairing follows the temperature: top-k + greedy at 0 */
	EXPECT(0, "kary:2:2 topk/greedy", "run %s --draft model:%s --tree kary:2:2 -p hi -n 4 --no-chat",
	       model(), ok);
	EXPECT(0, "kary:2:2 sample/rrs", "run %s --draft model:%s --tree kary:2:2 -t 0.7 -p hi -n 4 --no-chat",
	       model(), ok);
	EXPECT(1, "vocabulary: expected at most the target's 49152 (a draft vocabulary is the "
	       "target's or a prefix of it), found 49153", "run %s --draft model:%s -p hi", model(),
	       big);
	EXPECT(1, "bad.gguf: tokenizer.ggml.tokens[100]: expected", "run %s --draft model:%s -p hi",
	       model(), bad);
	if (!strstr(g_out, "found \"<not the target's>\""))
		fail_msg("no found value in: %s", g_out);
	unlink(ok);
	unlink(big);
	unlink(bad);
	rmdir(dir);
}

/* Every whole-file read is capped with fstat before anything is read or
 * allocated (issue 26): a 5 GiB sparse file given as a spec, an HF
 * config.json, an engine.json to inspect, a prompt
 * file, a tree file and a bench corpus is refused with its name, its size
 * and the cap, each command in well under a second where no model loads
 * first (a read would take seconds and 5 GiB). */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_huge_files(void **state)
{
	char dir[256], cmd[2400];
	snprintf(dir, sizeof(dir), "%s/cli_huge.%d", getenv("BUILD") ? getenv("BUILD") : "build", (int)getpid());
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/hf %s/eng && for f in big.json big.txt hf/config.json "
	         "eng/engine.json; do truncate -s 5G %s/$f; done", dir, dir, dir);
	assert_int_equal(system(cmd), 0);
	const char *size = "5368709120 bytes, more than the";
	struct { double bound; const char *fmt; } cases[] = {
		{1.0, "build %s/big.json -o %s/out"},
		{1.0, "run %s/hf -p hi -n 1"},
		{1.0, "inspect %s/eng"},
		{30.0, "generate MODEL -f %s/big.txt -n 1"},
		{30.0, "run MODEL --draft layerskip:0-9 --tree %s/big.json -p hi -n 1"},
		{60.0, "bench MODEL --corpus %s/big.txt --prompts 1 -n 1"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char a[1024], f[512];
		const char *m = strstr(cases[i].fmt, "MODEL");
		if (m)
			snprintf(f, sizeof(f), "%.*s%s%s", (int)(m - cases[i].fmt), cases[i].fmt, model(), m + 5);
		else
			snprintf(f, sizeof(f), "%s", cases[i].fmt);
		snprintf(a, sizeof(a), f, dir, dir);
		const double t0 = now_s();
		int rc = run(a);
		const double dt = now_s() - t0;
		if (rc == 0 || !strstr(g_out, size) || !strstr(g_out, dir) || dt > cases[i].bound)
			fail_msg("`specwright %s`: exit %d after %.2f s (bound %.0f s), output:\n%s\nexpected a refusal "
			         "naming the file and '%s'", a, rc, dt, cases[i].bound, g_out, size);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* bench --prompt-set: each line after the header is one prompt, verbatim (the
 * ids the bench writes equal `run -p LINE`'s, an independent path through
 * the prompt encoder); refusals name the file and what was expected. */
static void test_prompt_set(void **state)
{
	(void)state;
	char dir[] = "/tmp/sw_pset_XXXXXX", set[300], hdr[300], ids[300], buf[4096];
	assert_non_null(mkdtemp(dir));
	snprintf(set, sizeof(set), "%s/set.txt", dir);
	snprintf(hdr, sizeof(hdr), "%s/header.txt", dir);
	snprintf(ids, sizeof(ids), "%s/ids.txt", dir);
	const char *l1 = "Name three rivers in Europe.", *l2 = "Rewrite nothing; just say hello twice.";
	FILE *f = fopen(set, "w");
	assert_non_null(f);
	fprintf(f, "A TEST SET: a header line, then one prompt a line\n%s\n\n%s\r\n", l1, l2);
	fclose(f);
	f = fopen(hdr, "w");
	assert_non_null(f);
	fprintf(f, "only a header\n\n");
	fclose(f);
	EXPECT(2, "--prompt-set applies to bench only, not to run", "run %s --prompt-set %s -p hi", model(), set);
	EXPECT(2, "give either --prompt-set", "bench %s --prompt-set %s --corpus README.md", model(), set);
	EXPECT(1, "set.txt: --prompts 3: expected at most the 2 prompt lines the set holds",
	       "bench %s --prompt-set %s --prompts 3 --drafters ngram -n 1", model(), set);
	EXPECT(1, "header.txt: expected a header line, then one prompt a line; found no prompt line",
	       "bench %s --prompt-set %s --drafters ngram -n 1", model(), hdr);
	f = fopen(hdr, "w"); /* more lines than the set may hold: refused, not overrun */
	assert_non_null(f);
	fprintf(f, "a header\n");
	for (int i = 0; i < 10001; i++)
		fprintf(f, "prompt %d\n", i);
	fclose(f);
	EXPECT(1, "header.txt: line 10002: expected at most 10000 prompt lines, found more",
	       "bench %s --prompt-set %s --drafters ngram -n 1", model(), hdr);
	EXPECT(1, "--prompt-set", "bench %s --prompt-set %s/missing.txt --drafters ngram -n 1", model(), dir);
	assert_non_null(strstr(g_out, "missing.txt"));
	setenv("SW_BENCH_IDS", ids, 1);
	EXPECT(0, "2 prompts from", "bench %s --prompt-set %s --drafters ngram -n 1", model(), set);
	unsetenv("SW_BENCH_IDS");
	assert_non_null(strstr(g_out, "(verbatim)"));
	f = fopen(ids, "r");
	assert_non_null(f);
	const char *lines[2] = { l1, l2 };
	for (int i = 0; i < 2; i++) {
		assert_non_null(fgets(buf, sizeof(buf), f));
		buf[strcspn(buf, "\n")] = 0;
		EXPECT(0, "prompt_ids", "run %s --no-baseline -n 1 --json -p '%s'", model(), lines[i]);
		const char *a = strstr(g_out, "\"prompt_ids\":[");
		assert_non_null(a);
		a += strlen("\"prompt_ids\":[");
		char want[4096];
		size_t k = strcspn(a, "]");
		assert_true(k < sizeof(want));
		memcpy(want, a, k);
		want[k] = 0;
		for (char *c = want; *c; c++)
			if (*c == ',')
				*c = ' ';
		if (strcmp(buf, want))
			fail_msg("prompt %d: the bench encoded\n%s\nwhere run -p encodes\n%s", i, buf, want);
	}
	assert_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	unlink(ids);
	unlink(set);
	unlink(hdr);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_input_files),
		cmocka_unit_test(test_output_targets),
		cmocka_unit_test(test_huge_files),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_draft_vocab),
		cmocka_unit_test(test_build_inspect_errors),
		cmocka_unit_test(test_run_json),
		cmocka_unit_test(test_engine_options),
		cmocka_unit_test(test_prompt_ids),
		cmocka_unit_test(test_prompt_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
