/* The smallest deployment: an engine directory, a GGUF and prompt token ids
 * in, the generated ids out (one line, space-separated), on the host native
 * backend. Linked against libspecwright_rt.a alone (Makefile), so it proves
 * that the runtime archive runs an engine without the generator, the model
 * loaders, the host decoder or NVRTC. tests/test_deploy.c runs it.
 *
 *   sw_tiny_run [-n MAX_NEW] [--seed S] ENGINE_DIR MODEL.gguf ID...   */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "engine/engine.h"
#include "engine/weights_gguf.h"

static int usage(void)
{
	fprintf(stderr, "usage: sw_tiny_run [-n MAX_NEW] [--seed S] ENGINE_DIR MODEL.gguf ID...\n");
	return 2;
}

static int parse_int(const char *s, long long lo, long long hi, const char *what, long long *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || v < lo || v > hi) {
		fprintf(stderr, "sw_tiny_run: %s: expected an integer in [%lld, %lld], found \"%s\"\n",
		        what, lo, hi, s);
		return -1;
	}
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	long long max_new = 16, seed = 1, v;
	int a = 1;
	for (; a < argc && argv[a][0] == '-'; a += 2) {
		if (a + 1 >= argc)
			return usage();
		if (!strcmp(argv[a], "-n")) {
			if (parse_int(argv[a + 1], 1, 1 << 20, "-n", &max_new))
				return 2;
		} else if (!strcmp(argv[a], "--seed")) {
			if (parse_int(argv[a + 1], 0, (long long)1 << 62, "--seed", &seed))
				return 2;
		} else {
			return usage();
		}
	}
	if (argc - a < 3)
		return usage();
	const char *dir = argv[a], *gguf = argv[a + 1];
	const int n_prompt = argc - a - 2;
	int32_t *prompt = malloc(sizeof(*prompt) * (size_t)n_prompt);
	int32_t *out = malloc(sizeof(*out) * (size_t)max_new);
	if (!prompt || !out) {
		fprintf(stderr, "sw_tiny_run: out of memory\n");
		return 1;
	}
	for (int i = 0; i < n_prompt; i++) {
		if (parse_int(argv[a + 2 + i], 0, INT32_MAX, "prompt id", &v))
			return 2;
		prompt[i] = (int32_t)v;
	}

	sw_err err = {0};
	int rc = 1;
	rt_engine_weights w;
	rt_engine_gguf *g = NULL;
	rt_dev *d = NULL;
	rt_engine *e = rt_engine_load(dir, &err);
	if (!e)
		goto out_err;
	if (e->man->draft_kind == RT_ENGINE_DRAFT_MODEL) {
		sw_errf(&err, SW_ENOTSUP, "%s: the engine drafts with a separate model; sw_tiny_run "
		        "takes one GGUF", dir);
		goto out_err;
	}
	if (!(g = rt_engine_gguf_open(gguf, &w, &err)) || !(d = rt_dev_open("host", NULL, &err)) ||
	    rt_engine_bind(e, d, &w, NULL, (uint64_t)seed, &err))
		goto out_err;
	rt_engine_run r = {.prompt = prompt, .n_prompt = n_prompt, .max_new = (int)max_new,
	                   .eos = -1};
	rt_engine_stats st;
	int n = rt_engine_generate(e, &r, out, &st, &err);
	if (n < 0)
		goto out_err;
	for (int i = 0; i < n; i++)
		printf("%s%d", i ? " " : "", out[i]);
	printf("\n");
	fprintf(stderr, "sw_tiny_run: %s on %s: %d tokens in %d iterations\n", e->man->name, d->desc,
	        n, st.n_iters);
	rc = 0;
	goto out;
out_err:
	fprintf(stderr, "sw_tiny_run: error: %s\n", err.msg);
out:
	rt_engine_free(e);
	rt_dev_free(d);
	rt_engine_gguf_close(g);
	free(prompt);
	free(out);
	return rc;
}
