/* `specwright bench`: speed and acceptance, measured (never asserted in
 * tests). Three tables:
 *   1. real model, chain drafting: target-only vs each drafter at T = 0 and
 *      0.8 over prompts cut from a real corpus (median tok/s, median
 *      per-prompt speedup, pooled tau and acceptance, greedy equality);
 *   2. real model, trees: each tree x (expansion, verification) at T = 0,
 *      0.6, 1.0 with a layer-skip draft (tau, per-level acceptance,
 *      first/second-draft acceptance, tok/s, speedup);
 *   3. a Markov pair with known TV: the same tree/method grid plus chain,
 *      against the closed form 1 - TV. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/timing.h"
#include "cli.h"
#include "kernels/philox.h"
#include "decode/block_decode.h"
#include "core/tree.h"
#include "decode/tree_verify.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double cli_median(double *v, int n)
{
	if (n == 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Cuts n prompts of about 200-600 bytes at line boundaries, evenly spread
 * over the corpus, each after an instruction: "Rewrite the following
 * passage in plain modern English:" (the answer copies much of the
 * passage: repetitive, where prompt lookup drafts well), or $SW_BENCH_ASK
 * when set (e.g. "Write a short story inspired by this passage:", whose
 * answer is new text). Returns the count found. */
int cli_cut_prompts(const char *text, size_t len, int n, char **out)
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
		const char *env = getenv("SW_BENCH_ASK");
		const char *ask = env && *env ? env : "Rewrite the following passage in plain modern English:";
		size_t k = strlen(ask);
		char *p = malloc(k + 2 + (end - at) + 1);
		if (!p)
			break;
		memcpy(p, ask, k);
		memcpy(p + k, "\n\n", 2);
		memcpy(p + k + 2, text + at, end - at);
		p[k + 2 + end - at] = 0;
		out[got++] = p;
	}
	return got;
}

int cli_bench_prompts(const cli_opts *o, char ***out, const char **used, sw_err *err)
{
	const char *path = o->prompt_set ? o->prompt_set : o->corpus ? o->corpus : "/usr/share/games/fortunes/fortunes";
	size_t len = 0;
	char *text = sw_read_capped(path, SW_CAP_TEXT, o->prompt_set ? "a prompt set" : "a bench corpus", &len, err);
	*out = NULL;
	*used = path;
	if (!text)
		return sw_err_prefix(err, "%s", o->prompt_set ? "--prompt-set" : o->corpus ? "--corpus" : "the default corpus (give one with --corpus FILE)");
	int cap = o->prompt_set ? 10000 : o->n_prompts, np = 0, rc = 0;
	char **p = calloc((size_t)cap, sizeof(*p));
	if (!p) {
		free(text);
		return sw_errf(err, SW_ENOMEM, "out of memory");
	}
	if (!o->prompt_set) {
		np = cli_cut_prompts(text, len, o->n_prompts, p);
		if (np < 1)
			rc = sw_errf(err, SW_EINVAL, "%s: no prompts of 40 bytes or more could be cut", path);
	} else {
		size_t at = 0;
		int line = 0;
		while (at < len && !rc) {
			size_t end = at;
			while (end < len && text[end] != '\n')
				end++;
			size_t e = end > at && text[end - 1] == '\r' ? end - 1 : end;
			if (memchr(text + at, 0, end - at))
				rc = sw_errf(err, SW_EINVAL, "%s: line %d: expected text, found a NUL byte", path, line + 1);
			else if (line > 0 && e > at && (!o->n_prompts_given || np < o->n_prompts)) {
				if (np == cap)
					rc = sw_errf(err, SW_ERANGE, "%s: line %d: expected at most %d prompt lines, found more",
					             path, line + 1, cap);
				else if (!(p[np] = malloc(e - at + 1)))
					rc = sw_errf(err, SW_ENOMEM, "out of memory");
				else {
					memcpy(p[np], text + at, e - at);
					p[np++][e - at] = 0;
				}
			}
			line++;
			at = end + 1;
		}
		if (!rc && np < 1)
			rc = sw_errf(err, SW_EINVAL, "%s: expected a header line, then one prompt a line; found no prompt line", path);
		else if (!rc && o->n_prompts_given && np < o->n_prompts)
			rc = sw_errf(err, SW_ERANGE, "%s: --prompts %d: expected at most the %d prompt lines the set holds",
			             path, o->n_prompts, np);
	}
	free(text);
	if (rc) {
		for (int i = 0; i < np; i++)
			free(p[i]);
		free(p);
		return rc;
	}
	*out = p;
	return np;
}

/* Pooled statistics of one configuration over several runs. */
struct pool {
	rt_stats sum;
	double tps[256], ratio[256];
	int n;       /* samples kept for the medians (at most 256) */
	int runs, same;
};

static void pool_add(struct pool *P, const rt_stats *st, double base_tps, bool same)
{
	rt_stats *s = &P->sum;
	s->n_tokens += st->n_tokens;
	s->n_target_calls += st->n_target_calls;
	s->n_drafted += st->n_drafted;
	s->n_accepted += st->n_accepted;
	for (int j = 0; j < RT_MAX_GAMMA; j++) {
		s->pos_tried[j] += st->pos_tried[j];
		s->pos_accepted[j] += st->pos_accepted[j];
	}
	for (int r = 0; r < 8; r++) {
		s->rank_tried[r] += st->rank_tried[r];
		s->rank_accepted[r] += st->rank_accepted[r];
	}
	double gen = st->t_total - st->t_prefill;
	double tps = gen > 0 ? st->n_tokens / gen : 0;
	if (P->n < 256) {
		P->tps[P->n] = tps;
		P->ratio[P->n] = base_tps > 0 ? tps / base_tps : 0;
		P->n++;
	}
	P->runs++;
	P->same += same;
}

static double frac(uint64_t a, uint64_t b) { return b ? (double)a / b : 0.0; }

static void pool_row(struct pool *P, const char *t, const char *what, bool greedy, bool tree)
{
	const rt_stats *s = &P->sum;
	printf("| %s | %s | %.2f | %.2fx | %.3f | %.3f %.3f %.3f | ", t, what, cli_median(P->tps, P->n),
	       cli_median(P->ratio, P->n), frac(s->n_tokens, s->n_target_calls), frac(s->pos_accepted[0], s->pos_tried[0]),
	       frac(s->pos_accepted[1], s->pos_tried[1]), frac(s->pos_accepted[2], s->pos_tried[2]));
	if (tree)
		printf("%.3f | %.3f |", frac(s->rank_accepted[0], s->rank_tried[0]),
		       frac(s->rank_accepted[1], s->rank_tried[1]));
	else
		printf("- | - |");
	printf(" %s |\n", greedy ? (P->same == P->runs ? "yes" : "NO") : "-");
	fflush(stdout);
}

static const char *TREES[][3] = {
	/* tree, expansion, verification */
	{ "eagle25", "sample", "rrs" },   { "eagle25", "sample-wor", "rrsw" }, { "eagle25", "topk", "onehot" },
	{ "biseq16", "sample", "rrs" },   { "biseq16", "sample-wor", "rrsw" }, { "biseq16", "spechub", "spechub" },
	{ "sequoia63", "sample-wor", "rrsw" },
};
#define N_TREES (int)(sizeof(TREES) / sizeof(TREES[0]))

static int tree_cfg(const char *spec, const char *rule, const char *method, rt_tree *t, rt_tree_cfg *c,
                    sw_err *err)
{
	int rc = rt_tree_parse(spec, NULL, t, err);
	if (rc)
		return rc;
	c->tree = t;
	c->rule = rt_expand_rule_parse(rule);
	c->method = rt_verify_method_parse(method);
	return 0;
}

/* Table 3: a Markov pair whose per-state TV is known in closed form: the
 * draft is a mixture q = (1 - lam) p + lam u of the target row and a random
 * row u, so TV(p, q) = lam * TV(p, u). */
static int bench_markov(const cli_opts *o)
{
	enum { V = 24, NEW = 48, RUNS = 400 };
	sw_err err;
	float *P = malloc(sizeof(float) * V * V), *Q = malloc(sizeof(float) * V * V);
	uint64_t s = 12345;
	double tv_mean = 0;
	for (int r = 0; r < V; r++) {
		double sp = 0, su = 0, u[V], p[V];
		for (int v = 0; v < V; v++) {
			uint32_t w[4];
			sw_rand_u32x4(s, (uint32_t)r, (uint32_t)v, 99, 0, w);
			p[v] = pow(sw_u32_to_uniform(w[0]), 3.0); /* peaked rows */
			u[v] = sw_u32_to_uniform(w[1]);
			sp += p[v];
			su += u[v];
		}
		double tv = 0;
		for (int v = 0; v < V; v++) {
			P[r * V + v] = (float)(p[v] / sp);
			Q[r * V + v] = (float)(0.6 * p[v] / sp + 0.4 * u[v] / su);
			tv += 0.5 * fabs(P[r * V + v] - Q[r * V + v]);
		}
		tv_mean += tv / V;
	}
	rt_model *tm = rt_model_table(V, 1, P, "markov-target", &err), *dm = rt_model_table(V, 1, Q, "markov-draft", &err);
	free(P);
	free(Q);
	if (!tm || !dm) {
		fprintf(stderr, "specwright bench: %s\n", err.msg);
		return 1;
	}
	printf("\n### Markov pair (V = %d, draft = 0.6 target + 0.4 random, mean per-state TV %.3f => "
	       "single-draft acceptance 1 - TV = %.3f), %d runs x %d tokens\n\n",
	       V, tv_mean, 1 - tv_mean, RUNS, NEW);
	printf("| T | method | median tok/s | median speedup | tau | acceptance at depth 1 2 3 | first-draft | second-draft | greedy == target |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	const float temps[3] = { 0.0f, 0.6f, 1.0f };
	rt_ctx *tc = rt_ctx_new(tm, 512, 64, &err);
	rt_drafter *chain = rt_drafter_model(dm, 512, &err);
	int32_t out[NEW], ref[NEW];
	for (int ti = 0; ti < 3; ti++) {
		rt_sampling samp = { temps[ti], 0, 1.0f };
		char tl[16];
		snprintf(tl, sizeof(tl), "%.1f", temps[ti]);
		for (int c = -1; c < N_TREES; c++) {
			struct pool pl;
			memset(&pl, 0, sizeof(pl));
			rt_tree t;
			rt_tree_cfg tcfg;
			char what[96];
			if (c >= 0 && tree_cfg(TREES[c][0], TREES[c][1], TREES[c][2], &t, &tcfg, &err))
				goto out_err;
			if (c < 0)
				snprintf(what, sizeof(what), "chain gamma %d", o->gamma);
			else
				snprintf(what, sizeof(what), "%s %s/%s", TREES[c][0], TREES[c][1], TREES[c][2]);
			for (int r = 0; r < RUNS; r++) {
				int32_t prompt[1] = { r % V };
				rt_gen_cfg cfg = { .samp = samp, .gamma = o->gamma, .seed = 500 + (uint64_t)r, .max_new = NEW };
				rt_stats st, bs;
				rt_ctx_truncate(tc, 0);
				int n = c < 0 ? rt_generate_spec(tc, chain, prompt, 1, &cfg, out, &st, &err)
				              : rt_generate_tree(tc, dm, &tcfg, prompt, 1, &cfg, out, &st, &err);
				if (n < 0)
					goto out_err;
				rt_ctx_truncate(tc, 0);
				if (rt_generate_target(tc, prompt, 1, &cfg, ref, &bs, &err) < 0)
					goto out_err;
				double bg = bs.t_total - bs.t_prefill;
				pool_add(&pl, &st, bg > 0 ? bs.n_tokens / bg : 0, !memcmp(out, ref, sizeof(out)));
			}
			pool_row(&pl, tl, what, temps[ti] == 0, c >= 0);
		}
	}
	rt_drafter_free(chain);
	rt_ctx_free(tc);
	rt_model_free(tm);
	rt_model_free(dm);
	return 0;
out_err:
	fprintf(stderr, "specwright bench: error: %s\n", err.msg);
	return 1;
}

/* The --drafters table: target-only, then each row SPEC[|gamma=G][|tree=T]
 * at T = 0 and 0.7 over the prompts: median tok/s and speedup against
 * target-only on the same prompt, pooled tau, acceptance by position 1..8
 * (by depth for trees; 1..16 when a row drafts deeper than 8), greedy
 * equality; tokens per CPU-second of the whole call (prefill included) and
 * its ratio to target-only's. Trees: top-k
 * verified one-hot (greedy at T = 0); block drafters only. */
static int bench_rows(const cli_opts *o, cli_session *s, char **prompts, int np, sw_err *err)
{
	int M = o->max_new, rc = SW_ENOMEM;
	int32_t *ids = malloc((size_t)o->ctx * sizeof(*ids)), *out = malloc((size_t)(M + 1) * sizeof(*out));
	int32_t *refs = malloc((size_t)np * (M + 1) * sizeof(int32_t));
	int *nref = malloc((size_t)np * sizeof(int));
	double *base = malloc((size_t)np * sizeof(double)), *base_cpu = malloc((size_t)np * sizeof(double));
	double cpu_tps[256], cpu_ratio[256];
	char *list = strdup(o->drafters);
	char *rows[32];
	int nr = 0;
	FILE *idf = NULL;
	if (!ids || !out || !refs || !nref || !base || !base_cpu || !list) {
		sw_errf(err, SW_ENOMEM, "out of memory");
		goto out;
	}
	rows[nr++] = "none";
	for (char *tok = strtok(list, ";"); tok && nr < 32; tok = strtok(NULL, ";"))
		rows[nr++] = tok;
	/* $SW_BENCH_IDS: each prompt's ids, a line each, as the engine bench
	 * writes them (tests/reference/llamacpp_bench.py times llama.cpp on them) */
	const char *idp = getenv("SW_BENCH_IDS");
	if (idp && *idp && !(idf = fopen(idp, "w"))) {
		rc = sw_errf(err, SW_EIO, "%s ($SW_BENCH_IDS): cannot write", idp);
		goto out;
	}
	/* the chat template unless --no-chat; by default only where the model has one */
	const bool chat = o->chat < 0 ? rt_tokenizer_has_chat(s->tok) : o->chat != 0;
	printf("### Real model, drafters: %s, %d prompts from %s (%s), %d new tokens, chat template %s\n\n", o->model,
	       np, o->prompt_set ? o->prompt_set : o->corpus ? o->corpus : "(default corpus)",
	       o->prompt_set ? "verbatim" : "cut, after an instruction", M, chat ? "on" : "off");
	/* acceptance columns: positions 1..8, or 1..16 when a row drafts deeper
	 * (a gamma over 8, or a tree of depth over 8) */
	int npos = 8;
	for (int ri = 1; ri < nr; ri++) {
		const char *g = strstr(rows[ri], "|gamma="), *t = strstr(rows[ri], "|tree=");
		int deep = t ? 0 : g ? atoi(g + 7) : o->gamma;
		if (t) {
			char ts[512];
			snprintf(ts, sizeof(ts), "%s", t + 6);
			ts[strcspn(ts, "|")] = 0;
			static rt_tree dt; /* large: off the stack */
			if (!rt_tree_parse(ts, NULL, &dt, err))
				deep = dt.depth_max;
			memset(err, 0, sizeof(*err)); /* a bad tree is reported where the row runs */
		}
		if (deep > 8)
			npos = 16;
	}
	printf("| T | drafter | median tok/s | median speedup | median tok/CPU-s | CPU-s speedup | tau | acceptance at "
	       "position");
	for (int j = 0; j < npos; j++)
		printf(" %d", j + 1);
	printf(" | greedy == target |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	const float temps[2] = { 0.0f, 0.7f };
	for (int ti = 0; ti < 2; ti++) {
		for (int ri = 0; ri < nr; ri++) {
			char spec[1024], *tree_spec = NULL;
			int gamma = o->gamma;
			snprintf(spec, sizeof(spec), "%s", rows[ri]);
			for (char *bar = strchr(spec, '|'); bar; bar = strchr(bar + 1, '|')) {
				*bar = 0;
				if (!strncmp(bar + 1, "gamma=", 6))
					gamma = atoi(bar + 7);
				else if (!strncmp(bar + 1, "tree=", 5))
					tree_spec = bar + 6;
			}
			/* the remaining options end at the next '|', already cut */
			struct pool pl;
			memset(&pl, 0, sizeof(pl));
			rt_tree tree;
			rt_tree_cfg tcfg = { &tree, RT_EXPAND_TOPK, temps[ti] > 0 ? RT_VERIFY_ONEHOT : RT_VERIFY_GREEDY };
			if (tree_spec && (rc = rt_tree_parse(tree_spec, NULL, &tree, err)))
				goto out;
			for (int pi = 0; pi < np; pi++) {
				int n_prompt = cli_encode_prompt(s, prompts[pi], chat, ids, o->ctx, err);
				if (n_prompt < 0) {
					rc = n_prompt;
					goto out;
				}
				if (idf && ti == 0 && ri == 0) {
					for (int k = 0; k < n_prompt; k++)
						fprintf(idf, "%s%d", k ? " " : "", (int)ids[k]);
					fputc('\n', idf);
				}
				rt_drafter_free(s->drafter);
				s->drafter = NULL;
				rt_model_free(s->draft_model);
				s->draft_model = NULL;
				if ((rc = cli_make_drafter(s, spec, o->ctx, &s->drafter, err)))
					goto out;
				rt_gen_cfg cfg = { .samp = { temps[ti], o->top_k, o->top_p }, .gamma = gamma,
				                   .seed = o->seed + (uint64_t)pi, .max_new = M };
				rt_stats st;
				rt_ctx_truncate(s->tctx, 0);
				int n;
				double c0 = sw_cpu_s();
				if (tree_spec)
					n = rt_generate_tree_drafter(s->tctx, s->drafter, &tcfg, ids, n_prompt, &cfg, out, &st, err);
				else if (s->drafter)
					n = rt_generate_spec(s->tctx, s->drafter, ids, n_prompt, &cfg, out, &st, err);
				else
					n = rt_generate_target(s->tctx, ids, n_prompt, &cfg, out, &st, err);
				if (n < 0) {
					rc = n;
					goto out;
				}
				double c = sw_cpu_s() - c0;
				int32_t *r = refs + (size_t)pi * (M + 1);
				if (ri == 0) {
					double g = st.t_total - st.t_prefill;
					base[pi] = g > 0 ? n / g : 0;
					base_cpu[pi] = c > 0 ? n / c : 0;
					nref[pi] = n;
					memcpy(r, out, (size_t)n * sizeof(*out));
				}
				if (pl.n < 256) {
					cpu_tps[pl.n] = c > 0 ? n / c : 0;
					cpu_ratio[pl.n] = base_cpu[pi] > 0 ? cpu_tps[pl.n] / base_cpu[pi] : 0;
				}
				pool_add(&pl, &st, base[pi], n == nref[pi] && !memcmp(out, r, (size_t)n * sizeof(*out)));
			}
			const rt_stats *su = &pl.sum;
			printf("| %.1f | %s | %.2f | %.2fx | %.2f | %.2fx | %.3f |", temps[ti], rows[ri],
			       cli_median(pl.tps, pl.n), cli_median(pl.ratio, pl.n), cli_median(cpu_tps, pl.n),
			       cli_median(cpu_ratio, pl.n), frac(su->n_tokens, su->n_target_calls));
			for (int j = 0; j < npos; j++)
				printf(" %.3f", frac(su->pos_accepted[j], su->pos_tried[j]));
			printf(" | %s |\n", temps[ti] == 0 ? (pl.same == pl.runs ? "yes" : "NO") : "-");
			fflush(stdout);
			if (idf && ti == 0 && ri == 0) {
				const int bad = fclose(idf) != 0;
				idf = NULL;
				if (bad) {
					rc = sw_errf(err, SW_EIO, "%s ($SW_BENCH_IDS): write failed", idp);
					goto out;
				}
			}
		}
	}
	rc = 0;
out:
	if (idf)
		fclose(idf);
	free(ids);
	free(out);
	free(refs);
	free(nref);
	free(base);
	free(base_cpu);
	free(list);
	return rc;
}

int cli_bench(const cli_opts *o)
{
	sw_err err = { 0 };
	cli_session s;
	int rc = 1, np = 0;
	int32_t *ids = NULL, *out = NULL, *refs = NULL;
	int *nref = NULL;
	double *base = NULL;
	char **prompts = NULL;
	memset(&s, 0, sizeof(s));
	if (!strcmp(o->model, "markov"))
		return bench_markov(o);
	const char *corpus = NULL;
	sw_err rerr = {0};
	if ((np = cli_bench_prompts(o, &prompts, &corpus, &rerr)) < 1) {
		fprintf(stderr, "specwright bench: %s\n", rerr.msg);
		np = 0;
		goto out_free;
	}
	if (cli_session_open(&s, o, &err))
		goto out_err;
	int M = o->max_new;
	ids = malloc((size_t)o->ctx * sizeof(*ids));
	out = malloc((size_t)(M + 1) * sizeof(*out));
	refs = malloc((size_t)np * 2 * (M + 1) * sizeof(int32_t));
	nref = malloc((size_t)np * 2 * sizeof(int));
	base = malloc((size_t)np * 3 * sizeof(double));
	if (!ids || !out || !refs || !nref || !base) {
		sw_errf(&err, SW_ENOMEM, "out of memory");
		goto out_err;
	}

	if (o->drafters) {
		if (bench_rows(o, &s, prompts, np, &err))
			goto out_err;
		rc = 0;
		goto out_free;
	}

	/* Table 1: chain drafters */
	const char *drafters[8] = { "none", "ngram", "layerskip:0-14,22-29", "layerskip:0-9,20-29@8192" };
	int nd = 4;
	if (o->draft && strcmp(o->draft, "ngram") && strcmp(o->draft, "none") && strcmp(o->draft, drafters[2]))
		drafters[nd++] = o->draft;
	const bool chat = o->chat < 0 ? rt_tokenizer_has_chat(s.tok) : o->chat != 0;
	printf("### Real model, chain drafting: %s, %d prompts from %s, %d new tokens, gamma %d, chat template %s\n\n",
	       o->model, np, corpus, M, o->gamma, chat ? "on" : "off");
	printf("| T | drafter | median tok/s | median speedup | tau | acceptance at position 1 2 3 | first-draft | second-draft | greedy == target |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	const float temps1[2] = { 0.0f, 0.8f };
	for (int ti = 0; ti < 2; ti++) {
		char tl[16];
		snprintf(tl, sizeof(tl), "%.1f", temps1[ti]);
		for (int di = 0; di < nd; di++) {
			struct pool pl;
			memset(&pl, 0, sizeof(pl));
			/* progress on stderr: a whole bench takes many minutes */
			fprintf(stderr, "bench: T=%s %s, %d prompts ...\n", tl, drafters[di], np);
			for (int pi = 0; pi < np; pi++) {
				int n_prompt = cli_encode_prompt(&s, prompts[pi], chat, ids, o->ctx, &err);
				if (n_prompt < 0)
					goto out_err;
				rt_drafter_free(s.drafter);
				s.drafter = NULL;
				rt_model_free(s.draft_model);
				s.draft_model = NULL;
				if (cli_make_drafter(&s, drafters[di], o->ctx, &s.drafter, &err))
					goto out_err;
				rt_gen_cfg cfg = { .samp = { temps1[ti], o->top_k, o->top_p }, .gamma = o->gamma,
				                   .seed = o->seed + (uint64_t)pi, .max_new = M };
				rt_stats st;
				rt_ctx_truncate(s.tctx, 0);
				int n = s.drafter ? rt_generate_spec(s.tctx, s.drafter, ids, n_prompt, &cfg, out, &st, &err)
				                  : rt_generate_target(s.tctx, ids, n_prompt, &cfg, out, &st, &err);
				if (n < 0)
					goto out_err;
				int32_t *r = refs + (size_t)(ti * np + pi) * (M + 1);
				if (di == 0) {
					double g = st.t_total - st.t_prefill;
					base[ti * np + pi] = g > 0 ? n / g : 0;
					nref[ti * np + pi] = n;
					memcpy(r, out, (size_t)n * sizeof(*out));
				}
				pool_add(&pl, &st, base[ti * np + pi],
				         n == nref[ti * np + pi] && !memcmp(out, r, (size_t)n * sizeof(*out)));
			}
			pool_row(&pl, tl, drafters[di], temps1[ti] == 0, false);
		}
	}

	/* Table 2: trees on the real model, fewer prompts (each config drafts a
	 * whole tree per iteration with a 23-layer draft). */
	int npt = np < 4 ? np : 4, Mt = M < 32 ? M : 32;
	const char *tdraft = "layerskip:0-14,22-29";
	printf("\n### Real model, trees: draft %s, %d prompts, %d new tokens\n\n", tdraft, npt, Mt);
	printf("| T | tree / expansion / verification | median tok/s | median speedup | tau | acceptance at depth 1 2 3 | first-draft | second-draft | greedy == target |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	rt_model_free(s.draft_model);
	s.draft_model = rt_model_layerskip_parse(s.target, tdraft + 10, &err);
	if (!s.draft_model)
		goto out_err;
	const float temps2[3] = { 0.0f, 0.6f, 1.0f };
	for (int ti = 0; ti < 3; ti++) {
		char tl[16];
		snprintf(tl, sizeof(tl), "%.1f", temps2[ti]);
		/* target-only baseline per prompt at this temperature */
		for (int pi = 0; pi < npt; pi++) {
			int n_prompt = cli_encode_prompt(&s, prompts[pi], chat, ids, o->ctx, &err);
			rt_gen_cfg cfg = { .samp = { temps2[ti], o->top_k, o->top_p }, .gamma = 1,
			                   .seed = o->seed + (uint64_t)pi, .max_new = Mt };
			rt_stats st;
			rt_ctx_truncate(s.tctx, 0);
			int n = rt_generate_target(s.tctx, ids, n_prompt, &cfg, refs + (size_t)pi * (M + 1), &st, &err);
			if (n < 0)
				goto out_err;
			nref[pi] = n;
			double g = st.t_total - st.t_prefill;
			base[pi] = g > 0 ? n / g : 0;
		}
		for (int c = 0; c < N_TREES; c++) {
			if (temps2[ti] == 0 && c > 0 && !strcmp(TREES[c][0], TREES[c - 1][0]))
				continue; /* at T = 0 every method is greedy: one row per tree */
			rt_tree t;
			rt_tree_cfg tcfg;
			if (tree_cfg(TREES[c][0], TREES[c][1], TREES[c][2], &t, &tcfg, &err))
				goto out_err;
			struct pool pl;
			memset(&pl, 0, sizeof(pl));
			for (int pi = 0; pi < npt; pi++) {
				int n_prompt = cli_encode_prompt(&s, prompts[pi], chat, ids, o->ctx, &err);
				rt_gen_cfg cfg = { .samp = { temps2[ti], o->top_k, o->top_p }, .gamma = 1,
				                   .seed = o->seed + (uint64_t)pi, .max_new = Mt };
				rt_stats st;
				rt_ctx_truncate(s.tctx, 0);
				int n = rt_generate_tree(s.tctx, s.draft_model, &tcfg, ids, n_prompt, &cfg, out, &st, &err);
				if (n < 0)
					goto out_err;
				pool_add(&pl, &st, base[pi], n == nref[pi] && !memcmp(out, refs + (size_t)pi * (M + 1), (size_t)n * sizeof(*out)));
			}
			char what[96];
			if (temps2[ti] == 0)
				snprintf(what, sizeof(what), "%s topk/greedy", TREES[c][0]);
			else
				snprintf(what, sizeof(what), "%s %s/%s", TREES[c][0], TREES[c][1], TREES[c][2]);
			pool_row(&pl, tl, what, temps2[ti] == 0, true);
		}
	}
	rc = bench_markov(o);
	goto out_free;
out_err:
	fprintf(stderr, "specwright bench: error: %s\n", err.msg);
out_free:
	free(ids);
	free(out);
	free(refs);
	free(nref);
	free(base);
	cli_session_close(&s);
	for (int i = 0; i < np; i++)
		free(prompts[i]);
	free(prompts);
	return rc;
}
