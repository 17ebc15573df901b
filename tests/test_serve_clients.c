/* `specwright serve` on the real model against real clients: builds the
 * SmolLM2 n-gram engine (plan and render only: the host backend runs it),
 * then tests/serve/clients.py drives it with the official openai package,
 * curl, nginx in front of two servers with one killed mid-load, and SIGTERM
 * (see that script for what each part checks; its reference for the text is
 * `specwright run` on the same engine and prompt). Needs the model (`make
 * model`), the venv with openai (`make deps`), curl and nginx. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static void run(const char *cmd)
{
	fprintf(stderr, "+ %s\n", cmd);
	int rc = system(cmd);
	if (rc != 0)
		fail_msg("exit status %d: %s", rc, cmd);
}

static void test_real_clients(void **state)
{
	(void)state;
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	const char *model = getenv("SW_MODEL") ? getenv("SW_MODEL") : "models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";
	const char *n = getenv("SERVE_REQUESTS") ? getenv("SERVE_REQUESTS") : "24";
	if (access(model, R_OK))
		fail_msg("real model %s missing: run `make model`", model);
	char dir[512], cmd[2048];
	snprintf(dir, sizeof(dir), "%s/serve_clients.%d", build, (int)getpid());
	snprintf(cmd, sizeof(cmd), "%s/specwright build models/specs/smollm2-ngram.json -o %s --no-compile", build, dir);
	run(cmd);
	snprintf(cmd, sizeof(cmd),
	         "%s/venv/bin/python tests/serve/clients.py --specwright %s/specwright --engine %s --model %s "
	         "--requests %s --clients 4 --servers 2",
	         build, build, dir, model, n);
	run(cmd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s.spec.json", dir, dir);
	run(cmd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_clients),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
