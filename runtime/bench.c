/* `specwright bench`: target-only decoding versus each drafter over prompts
 * cut from a real text corpus, at T = 0 and T = 0.8. Reports medians over
 * prompts (tok/s, speedup per prompt) and pooled tau/acceptance. Speed is
 * only ever measured here, never asserted in tests. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	if (n == 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Cuts n prompts of about 200-600 bytes at line boundaries, evenly spread
 * over the corpus. Returns the count found. */
static int cut_prompts(const char *text, size_t len, int n, char **out)
{
	int got = 0;
	for (int i = 0; i < n; i++) {
		size_t at = len / (size_t)n * (size_t)i;
		while (at < len && text[at] != '\n')
			at++;
		while (at < len && (text[at] == '\n' || text[at] == ' '))
			at++;
		size_t end = at;
		while (end < len && (end - at < 200 || text[end] != '\n') && end - at < 600)
			end++;
		if (end - at < 40)
			continue;
		const char *ask = "Rewrite the following passage in plain modern English:\n\n";
		size_t k = strlen(ask);
		char *p = malloc(k + (end - at) + 1);
		if (!p)
			break;
		memcpy(p, ask, k);
		memcpy(p + k, text + at, end - at);
		p[k + end - at] = 0;
		out[got++] = p;
	}
	return got;
}

int cli_bench(const cli_opts *o)
{
	sw_err err = { 0 };
	cli_session s;
	int rc = 1;
	int32_t *ids = NULL, *out = NULL, *ref = NULL, *refs = NULL;
	double *tps = NULL, *base = NULL, *ratio = NULL;
	int *nref = NULL;
	memset(&s, 0, sizeof(s));
	const char *corpus = o->corpus ? o->corpus : "/usr/share/games/fortunes/fortunes";
	FILE *f = fopen(corpus, "rb");
	if (!f) {
		fprintf(stderr, "specwright bench: cannot open corpus %s (give one with --corpus FILE)\n", corpus);
		return 1;
	}
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *text = len > 0 ? malloc((size_t)len + 1) : NULL;
	if (!text || fread(text, 1, (size_t)len, f) != (size_t)len) {
		fclose(f);
		free(text);
		fprintf(stderr, "specwright bench: cannot read corpus %s\n", corpus);
		return 1;
	}
	fclose(f);
	text[len] = 0;
	char **prompts = calloc((size_t)o->n_prompts, sizeof(*prompts));
	int np = prompts ? cut_prompts(text, (size_t)len, o->n_prompts, prompts) : 0;
	if (np < 1) {
		fprintf(stderr, "specwright bench: no prompts could be cut from %s\n", corpus);
		goto out_free;
	}
	if (cli_session_open(&s, o, &err))
		goto out_err;

	const char *drafters[8] = { "none", "ngram", "layerskip:4", "layerskip:8", "layerskip:12" };
	int nd = 5;
	if (o->draft && strcmp(o->draft, "layerskip:8") && strcmp(o->draft, "none"))
		drafters[nd++] = o->draft;
	const float temps[2] = { 0.0f, 0.8f };
	ids = malloc((size_t)o->ctx * sizeof(*ids));
	out = malloc((size_t)(o->max_new + 1) * sizeof(*out));
	ref = malloc((size_t)(o->max_new + 1) * sizeof(*ref));
	tps = malloc((size_t)np * sizeof(double));
	base = malloc((size_t)np * sizeof(double));
	ratio = malloc((size_t)np * sizeof(double));
	nref = malloc((size_t)np * sizeof(int));
	refs = malloc((size_t)np * (o->max_new + 1) * sizeof(int32_t));
	if (!ids || !out || !ref || !tps || !base || !ratio || !nref || !refs) {
		sw_errf(&err, SW_ENOMEM, "out of memory");
		goto out_err;
	}
	printf("bench: %s, %d prompts from %s, %d new tokens, gamma %d, chat template on\n", o->model, np,
	       corpus, o->max_new, o->gamma);
	printf("| T | drafter | median tok/s | median speedup | tau | acceptance | greedy == target |\n");
	printf("|---|---|---|---|---|---|---|\n");
	for (int ti = 0; ti < 2; ti++) {
		for (int di = 0; di < nd; di++) {
			rt_stats pooled;
			memset(&pooled, 0, sizeof(pooled));
			int same = 0;
			for (int pi = 0; pi < np; pi++) {
				int n_prompt = cli_encode_prompt(&s, prompts[pi], true, ids, o->ctx, &err);
				if (n_prompt < 0)
					goto out_err;
				rt_drafter_free(s.drafter);
				s.drafter = NULL;
				rt_model_free(s.draft_model);
				s.draft_model = NULL;
				if (cli_make_drafter(&s, drafters[di], o->ctx, &s.drafter, &err))
					goto out_err;
				rt_gen_cfg cfg = {
					.samp = { temps[ti], o->top_k, o->top_p },
					.gamma = o->gamma,
					.seed = o->seed + (uint64_t)pi,
					.max_new = o->max_new,
				};
				rt_stats st;
				rt_ctx_truncate(s.tctx, 0);
				int n = s.drafter ? rt_generate_spec(s.tctx, s.drafter, ids, n_prompt, &cfg, out, &st, &err)
				                  : rt_generate_target(s.tctx, ids, n_prompt, &cfg, out, &st, &err);
				if (n < 0)
					goto out_err;
				double gen = st.t_total - st.t_prefill;
				tps[pi] = gen > 0 ? n / gen : 0;
				if (di == 0) {
					base[pi] = tps[pi];
					nref[pi] = n;
					memcpy(refs + (size_t)pi * (o->max_new + 1), out, (size_t)n * sizeof(*out));
				}
				ratio[pi] = base[pi] > 0 ? tps[pi] / base[pi] : 0;
				same += n == nref[pi] && !memcmp(out, refs + (size_t)pi * (o->max_new + 1), (size_t)n * sizeof(*out));
				pooled.n_tokens += st.n_tokens;
				pooled.n_target_calls += st.n_target_calls;
				pooled.n_drafted += st.n_drafted;
				pooled.n_accepted += st.n_accepted;
			}
			double mt = median(tps, np), mr = median(ratio, np);
			printf("| %.1f | %s | %.2f | %.2fx | %.3f | %.3f | %s |\n", temps[ti], drafters[di], mt, mr,
			       pooled.n_target_calls ? (double)pooled.n_tokens / pooled.n_target_calls : 0,
			       pooled.n_drafted ? (double)pooled.n_accepted / pooled.n_drafted : 0,
			       ti == 0 ? (same == np ? "yes" : "NO") : "-");
			fflush(stdout);
		}
	}
	rc = 0;
	goto out_free;
out_err:
	fprintf(stderr, "specwright bench: error: %s\n", err.msg);
out_free:
	free(ids);
	free(out);
	free(ref);
	free(tps);
	free(base);
	free(ratio);
	free(nref);
	free(refs);
	cli_session_close(&s);
	for (int i = 0; i < np; i++)
		free(prompts[i]);
	free(prompts);
	free(text);
	return rc;
}
