/* `specwright serve` on the real model against real clients: builds the
 * SmolLM2 n-gram engine (plan and render only: the host backend runs it)
 * and the same engine with one-hot verification (a sampled family, for
 * per-request temperature/top_p/top_k/seed), then tests/serve/clients.py
 * drives them with the official openai package,
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
	char dir[512], sdir[600], cmd[4096];
	snprintf(dir, sizeof(dir), "%s/serve_clients.%d", build, (int)getpid());
	snprintf(sdir, sizeof(sdir), "%s.onehot", dir);
	snprintf(cmd, sizeof(cmd), "%s/specwright build models/specs/smollm2-ngram.json -o %s --no-compile", build, dir);
	run(cmd);
	/* the same engine for a sampled family (one-hot verification) */
	snprintf(cmd, sizeof(cmd), "sed 's/\"method\": \"greedy\"/\"method\": \"onehot\"/' "
	         "models/specs/smollm2-ngram.json > %s.spec.json && grep -q onehot %s.spec.json && "
	         "%s/specwright build %s.spec.json -o %s --no-compile", sdir, sdir, build, sdir, sdir);
	run(cmd);
	snprintf(cmd, sizeof(cmd),
	         "%s/venv/bin/python tests/serve/clients.py --specwright %s/specwright --engine %s "
	         "--sampled-engine %s --model %s --requests %s --clients 4 --servers 2",
	         build, build, dir, sdir, model, n);
	run(cmd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s.spec.json %s %s.spec.json", dir, dir, sdir, sdir);
	run(cmd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_clients),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
