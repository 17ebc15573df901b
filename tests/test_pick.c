/* Which engine `make run` (serve, bench) builds: `specwright backend` and
 * models/specs/pick.sh, run as make runs them.
 *   - `backend` names what `run --backend NAME` opens: host here, cuda over
 *     the fake driver (build/tests/fakecuda on the library path; its own
 *     words on stderr), an unknown name or a missing driver refused;
 *   - pick.sh: host without the EAGLE-3 head -> the gguf_a8 n-gram spec;
 *     host with a head whose SHA256SUMS holds -> the gguf_a8 n-gram + head
 *     spec; a head whose bytes do not match, or whose SHA256SUMS lacks a
 *     file, -> an error naming it (never a silent fallback); cuda -> the
 *     fp16 n-gram spec (the cuda backend refuses gguf dtypes); ENGINE_SPEC
 *     given -> that spec, a missing one refused. Each picked spec exists and
 *     the head spec points at the head's place in models/drafters/.
 * BUILD names the build directory (build/specwright, build/tests/fakecuda). */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shell_util.h"

static char g_out[1 << 14];
#define sh(...) tu_sh(g_out, sizeof(g_out), __VA_ARGS__)
static char g_build[PATH_MAX], g_work[PATH_MAX + 32];

static int setup(void **state)
{
	(void)state;
	const char *b = getenv("BUILD");
	if (!realpath(b && *b ? b : "build", g_build))
		return -1;
	snprintf(g_work, sizeof(g_work), "%s/test_pick.%d", g_build, (int)getpid());
	/* a head directory as e3pack.py leaves it (its contents are not read) */
	return sh("mkdir -p %s/head && cd %s/head && printf '{}' > config.json && head -c 4096 /dev/urandom > "
	          "model.safetensors && sha256sum config.json model.safetensors > SHA256SUMS",
	          g_work, g_work);
}

static int teardown(void **state)
{
	(void)state;
	return sh("rm -rf %s", g_work);
}

/* The spec pick.sh prints for backend (HEAD_DIR head, ENGINE_SPEC user),
 * into spec; its exit status. The message goes to g_out's tail. */
static int pick(const char *env, const char *backend, const char *user, char *spec, size_t n)
{
	int rc = sh("%s %s models/specs/pick.sh %s/specwright '%s' '%s' 2>%s/err; s=$?; cat %s/err; exit $s", env,
	            strstr(env, "HEAD_DIR=") ? "" : "HEAD_DIR=/nonexistent/head", g_build, backend, user, g_work,
	            g_work);
	spec[0] = 0;
	sscanf(g_out, "%1023s", spec);
	(void)n;
	return rc;
}

static void test_backend(void **state)
{
	(void)state;
	assert_int_equal(sh("%s/specwright backend 2>/dev/null", g_build), 0);
	assert_string_equal(g_out, "host\n");
	assert_int_equal(sh("%s/specwright backend host-emulate 2>&1", g_build), 0);
	assert_non_null(strstr(g_out, "host\n"));
	assert_non_null(strstr(g_out, "host (emulate)"));
	assert_int_equal(sh("%s/specwright backend bogus 2>&1", g_build), 2);
	assert_non_null(strstr(g_out, "expected auto, host, host-emulate, cuda or cuda:N"));
	assert_int_equal(sh("LD_LIBRARY_PATH=/nonexistent %s/specwright backend cuda 2>&1", g_build), 1);
	assert_non_null(strstr(g_out, "no CUDA driver"));
	assert_int_equal(sh("LD_LIBRARY_PATH=%s/tests/fakecuda %s/specwright backend 2>&1", g_build, g_build), 0);
	assert_non_null(strstr(g_out, "cuda\n"));
	assert_non_null(strstr(g_out, "Fake H100"));
}

static void test_pick(void **state)
{
	(void)state;
	char spec[1024], env[PATH_MAX + 64];
	/* host, no head */
	assert_int_equal(pick("", "auto", "", spec, sizeof(spec)), 0);
	assert_string_equal(spec, "models/specs/smollm2-ngram-gguf.json");
	assert_non_null(strstr(g_out, "/nonexistent/head is not in this checkout"));
	/* host, the head checked */
	snprintf(env, sizeof(env), "HEAD_DIR=%s/head", g_work);
	assert_int_equal(pick(env, "auto", "", spec, sizeof(spec)), 0);
	assert_string_equal(spec, "models/specs/smollm2-eagle3-ngram-gguf.json");
	assert_non_null(strstr(g_out, "sha256 checked"));
	assert_int_equal(pick(env, "host", "", spec, sizeof(spec)), 0);
	assert_string_equal(spec, "models/specs/smollm2-eagle3-ngram-gguf.json");
	/* cuda (the fake driver) */
	snprintf(env, sizeof(env), "LD_LIBRARY_PATH=%s/tests/fakecuda", g_build);
	assert_int_equal(pick(env, "auto", "", spec, sizeof(spec)), 0);
	assert_string_equal(spec, "models/specs/smollm2-ngram.json");
	assert_non_null(strstr(g_out, "for the cuda backend"));
	/* the user's spec */
	assert_int_equal(pick("", "auto", "models/specs/smollm2-ngram-q8_0.json", spec, sizeof(spec)), 0);
	assert_string_equal(spec, "models/specs/smollm2-ngram-q8_0.json");
	assert_int_not_equal(pick("", "auto", "models/specs/nope.json", spec, sizeof(spec)), 0);
	assert_non_null(strstr(g_out, "ENGINE_SPEC=models/specs/nope.json: no such file"));
	/* every spec it picks is there; the head spec reads the head's place */
	assert_int_equal(sh("test -f models/specs/smollm2-ngram-gguf.json && test -f models/specs/smollm2-ngram.json && "
	                    "grep -c '\"path\": \"models/drafters/smollm2-eagle3-gpu\"' "
	                    "models/specs/smollm2-eagle3-ngram-gguf.json"),
	                 0);
	assert_int_equal(atoi(g_out), 1);
}

static void test_pick_refuses(void **state)
{
	(void)state;
	char spec[1024], env[PATH_MAX + 64];
	snprintf(env, sizeof(env), "HEAD_DIR=%s/bad", g_work);
	/* one byte changed */
	assert_int_equal(sh("rm -rf %s/bad && cp -r %s/head %s/bad && printf 'x' | dd of=%s/bad/model.safetensors "
	                    "bs=1 seek=100 conv=notrunc 2>/dev/null",
	                    g_work, g_work, g_work, g_work),
	                 0);
	assert_int_equal(pick(env, "auto", "", spec, sizeof(spec)), 1);
	assert_non_null(strstr(g_out, "/bad: sha256 does not match SHA256SUMS"));
	assert_non_null(strstr(g_out, "model.safetensors: FAILED"));
	assert_null(strstr(g_out, "models/specs/"));
	/* a SHA256SUMS without the weights' line */
	assert_int_equal(sh("rm -rf %s/bad && cp -r %s/head %s/bad && sed -i '/model.safetensors/d' %s/bad/SHA256SUMS",
	                    g_work, g_work, g_work, g_work),
	                 0);
	assert_int_equal(pick(env, "auto", "", spec, sizeof(spec)), 1);
	assert_non_null(strstr(g_out, "SHA256SUMS: expected a line for model.safetensors"));
	/* no SHA256SUMS at all */
	assert_int_equal(sh("rm %s/bad/SHA256SUMS", g_work), 0);
	assert_int_equal(pick(env, "auto", "", spec, sizeof(spec)), 1);
	assert_non_null(strstr(g_out, "expected a line for config.json"));
	/* a backend that cannot be opened */
	assert_int_equal(pick("LD_LIBRARY_PATH=/nonexistent", "cuda", "", spec, sizeof(spec)), 1);
	assert_non_null(strstr(g_out, "the backend 'cuda' cannot be opened"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backend),
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_pick_refuses),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
