/* EAGLE-3 engine tests' common ground (e3_util.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/cli.h"
#include "e3_util.h"
#include "eagle3_util.h"
#include "engine_util.h"
#include "gen/spec.h"
#include "kernels/ref/ref.h"
#include "testutil.h"

void e3u_spec_ex(char *buf, size_t n, const char *dtype, const char *target, const char *head,
                 const char *tree, const char *verify, const char *expand, double temp, int ctx,
                 int chunk, const char *draft_extra, const char *spec_extra)
{
	snprintf(buf, n,
	         "{\"name\": \"tiny-e3-%s\", \"target\": {\"path\": \"%s\"}, \"draft\": {\"method\": "
	         "\"eagle3\", \"path\": \"%s\"%s}, \"tree\": \"%s\", \"verify\": {\"method\": \"%s\", "
	         "\"expand\": \"%s\"}, \"sampling\": {\"temperature\": %g, \"top_k\": 0, \"top_p\": 1}, "
	         "\"max_context\": %d, \"prefill_chunk\": %d, \"dtype\": \"%s\", \"archs\": "
	         "[\"sm_80\"]%s}", dtype, target, head, draft_extra, tree, verify, expand, temp, ctx,
	         chunk, dtype, spec_extra);
}

void e3u_spec(char *buf, size_t n, const char *dtype, const char *target, const char *head,
              const char *tree, const char *verify, const char *expand, double temp, int ctx,
              int chunk)
{
	e3u_spec_ex(buf, n, dtype, target, head, tree, verify, expand, temp, ctx, chunk, "", "");
}

int e3u_head60(const char *dir, const rt_model *m, int ffn, uint64_t seed)
{
	mkdir(dir, 0755);
	te3_opts o = te3_default(m);
	o.draft_vocab = 60;
	o.ffn = ffn;
	return te3_write(dir, m, &o, seed);
}

int e3u_fixture(const char *name, char *dir, size_t ndir, char *tiny_path, size_t ntp, char *head,
                size_t nhead, rt_model **tiny, rt_eagle3 **h)
{
	eu_work_dir(dir, ndir, name);
	*h = NULL;
	*tiny = eu_tiny_model(dir, tiny_path, ntp);
	if (!*tiny)
		return -1;
	snprintf(head, nhead, "%s/head", dir);
	if (e3u_head60(head, *tiny, 192, 5))
		return -1;
	sw_err err = {0};
	*h = rt_eagle3_load(head, *tiny, &err);
	if (!*h)
		print_message("head: %s\n", err.msg);
	return *h ? 0 : -1;
}

void e3u_fixture_free(rt_model *tiny, rt_eagle3 *h, const char *head)
{
	rt_eagle3_free(h);
	rt_model_free(tiny);
	te3_rmdir(head);
}

rt_engine *e3u_bind(const char *dir, rt_dev *d, const rt_model *m, const rt_eagle3 *h,
                    uint64_t seed)
{
	sw_err err = {0};
	rt_engine *e = eu_load(dir);
	if (cli_engine_bind_eagle3(e, d, m, h, seed, &err))
		fail_msg("bind (%s): %s", d->desc, err.msg);
	return e;
}

void e3u_spec_refused(const char *text, const char *want)
{
	gen_spec *sp = malloc(sizeof(*sp));
	sw_err err = {0};
	assert_non_null(sp);
	int rc = gen_spec_parse(text, strlen(text), "t.json", NULL, sp, &err);
	free(sp);
	if (!rc)
		fail_msg("accepted (want \"%s\"): %s", want, text);
	if (!strstr(err.msg, want))
		fail_msg("message \"%s\" lacks \"%s\"", err.msg, want);
	print_message("  refused: %s\n", err.msg);
}

/* A chain's step u (drafts host[1..u-1] agreed): the host head's logits
 * over Vd, its pick host[u]'s margin over the engine's eng_tok, and the
 * bound 8 c->u max|logit|. c->tc holds the target's taps of
 * hist[0..n_hist-2]. */
static void chain_margin(const e3u_drafts *c, const int32_t *host, int u, int32_t eng_tok,
                         double *margin, double *bound)
{
	sw_err err = {0};
	const rt_eagle3 *h = c->head;
	const int Vd = h->cfg.draft_vocab, D = h->cfg.head.dim;
	rt_e3_state *st = rt_e3_state_new(h, 512, 8, &err);
	float *hid = malloc(sizeof(float) * 2 * (size_t)D), *lg = malloc(sizeof(float) * (size_t)Vd);
	assert_true(st && hid && lg);
	if (rt_e3_commit(st, c->tc->tap_cache, c->hist + 1, c->n_hist - 1, hid, lg, &err))
		fail_msg("%s", err.msg);
	for (int j = 1; j < u; j++) {
		int32_t pos = c->n_hist - 1 + (j - 1);
		if (rt_e3_step(st, hid, &host[j], &pos, 1, NULL, hid + D, lg, &err))
			fail_msg("%s", err.msg);
		memcpy(hid, hid + D, sizeof(float) * (size_t)D);
	}
	const float *t2d = h->map_f + Vd;
	const int dh = (int)t2d[host[u]], de = eng_tok >= 0 ? (int)t2d[eng_tok] : -1;
	double mx = 0;
	for (int i = 0; i < Vd; i++)
		mx = fmax(mx, fabs(lg[i]));
	*bound = 8.0 * c->u * mx;
	*margin = de >= 0 && dh >= 0 ? (double)lg[dh] - lg[de] : -1;
	rt_e3_state_free(st);
	free(hid);
	free(lg);
}

/* An n-gram-first engine's iteration (e3u_drafts): true when the n-gram
 * lookup drafted it (checked here against ref_ngram_lookup_info over the
 * committed tokens) or nobody did, false when the head drafted *hk levels
 * (the caller compares its nodes 1 .. *hk with the host head's; the rest
 * must be absent). */
static bool ngram_first(e3u_drafts *c, const int32_t *eng, int ne, int *hk)
{
	sw_err err = {0};
	int32_t go[RT_ENGINE_MAX_NODES], prop[RT_ENGINE_MAX_NODES], info[2];
	rt_dev *d = c->e->dev;
	if (d->ops->download(d, go, rt_engine_buf_addr(c->e, "e3_go"), (size_t)c->gamma * 4, &err))
		fail_msg("%s", err.msg);
	const int np = ref_ngram_lookup_info(prop, info, c->hist, c->n_hist, c->ngram_min,
	                                     c->ngram_max, ne - 1);
	if (eng[0] != c->hist[c->n_hist - 1])
		fail_msg("%s: iteration %d: root %d, the last committed token %d", c->what, c->iters,
		         eng[0], c->hist[c->n_hist - 1]);
	int h = 0;
	while (h < c->gamma && go[h] == 1)
		h++;
	for (int j = h; j < c->gamma; j++)
		if (go[j] != 0)
			fail_msg("%s: iteration %d: pick word %d is %d after %d open levels", c->what,
			         c->iters, j, go[j], h);
	if (c->ctrl_off && h != (np == 0 ? c->gamma : 0))
		fail_msg("%s: iteration %d: the head drafted %d levels, the n-gram lookup proposed %d "
		         "tokens", c->what, c->iters, h, np);
	*hk = h;
	if (h > 0) {
		for (int u = h + 1; u < ne; u++)
			if (eng[u] != -1)
				fail_msg("%s: iteration %d: the head drafted %d levels, node %d is %d", c->what,
				         c->iters, h, u, eng[u]);
		c->by_head++;
		c->head_short += h < c->gamma;
		return false;
	}
	int k = 0;
	while (k + 1 < ne && eng[k + 1] >= 0)
		k++;
	if (k == 0 && !c->ctrl_off) { /* the controller chose a plain step */
		for (int u = 1; u < ne; u++)
			if (eng[u] != -1)
				fail_msg("%s: iteration %d: nothing drafted, node %d is %d", c->what, c->iters,
				         u, eng[u]);
		c->plain++;
		return true;
	}
	if (k < 1 || k > np || (c->ctrl_off && k != np))
		fail_msg("%s: iteration %d: %d n-gram tokens drafted, the lookup proposed %d", c->what,
		         c->iters, k, np);
	for (int u = 1; u < ne; u++)
		if (eng[u] != (u <= k ? prop[u - 1] : -1))
			fail_msg("%s: iteration %d: node %d is %d, the n-gram proposal's %d", c->what,
			         c->iters, u, eng[u], u <= k ? prop[u - 1] : -1);
	c->by_ngram++;
	c->nodes += k;
	c->same += k;
	return true;
}

static int on_iteration(void *user, const int32_t *tok, int n)
{
	e3u_drafts *c = user;
	sw_err err = {0};
	const int ne = c->ngram_max > 0 ? c->n_nodes : c->t ? c->t->n : c->gamma + 1;
	int nn = c->t ? c->t->n : c->gamma + 1; /* nodes compared with the host head's */
	int32_t eng[RT_ENGINE_MAX_NODES], host[RT_ENGINE_MAX_NODES];
	rt_dev *d = c->e->dev;
	assert_true(ne >= nn && ne <= RT_ENGINE_MAX_NODES);
	if (d->ops->download(d, eng, rt_engine_buf_addr(c->e, "tree_tokens"), (size_t)ne * 4, &err))
		fail_msg("%s", err.msg);
	int hk = 0;
	if (c->ngram_max > 0 && ngram_first(c, eng, ne, &hk)) {
		c->iters++;
		assert_true(c->n_hist + n <= (int)(sizeof(c->hist) / sizeof(c->hist[0])));
		for (int i = 0; i < n; i++)
			c->hist[c->n_hist++] = tok[i];
		return 0;
	}
	if (c->ngram_max > 0)
		nn = hk + 1; /* the head's first hk levels: the host chain's first hk */
	rt_ctx_truncate(c->tc, 0);
	float *lg = malloc(sizeof(float) * (size_t)c->target->cfg.vocab);
	assert_non_null(lg);
	if (rt_ctx_feed(c->tc, c->hist, c->n_hist - 1, lg, &err))
		fail_msg("%s", err.msg);
	free(lg);
	const rt_sampling greedy = {0.0f, 0, 1.0f}, sd = {1.0f, 0, 1.0f};
	for (int u = 0; u < nn; u++)
		host[u] = -1; /* nothing drafted (a one-token prompt's first iteration): absent */
	host[0] = c->hist[c->n_hist - 1];
	int k = c->t ? c->hd->ops->draft_tree(c->hd, c->t, RT_EXPAND_TOPK, &sd, &greedy, 1,
	                                      (uint32_t)c->iters, c->hist, c->n_hist, host, c->q, &err)
	             : c->hd->ops->propose(c->hd, c->hist, c->n_hist, c->gamma, &greedy, 1,
	                                   (uint32_t)c->iters, host + 1, NULL, &err);
	if (k < 0)
		fail_msg("host drafts: %s", err.msg);
	if (eng[0] != host[0])
		fail_msg("%s: iteration %d: root %d, the last committed token %d", c->what, c->iters,
		         eng[0], host[0]);
	for (int u = 1; u < nn; u++) {
		if (eng[u] == host[u]) {
			c->same++;
			continue;
		}
		double margin = -1, bound = 0;
		if (!c->t)
			chain_margin(c, host, u, eng[u], &margin, &bound);
		if (!(margin >= 0 && margin <= bound))
			fail_msg("%s: iteration %d (after %d tokens): node %d drafted %d, the %s %d (its "
			         "logits' margin %.5f, bound %.5f)", c->what, c->iters, c->n_hist, u, eng[u],
			         c->head_name, host[u], margin, bound);
		print_message("  %s: iteration %d node %d: %d, the %s's %d, a near-tie (margin %.5f <= "
		              "%.5f): the rest of this chain not compared\n", c->what, c->iters, u,
		              eng[u], c->head_name, host[u], margin, bound);
		c->worst = fmax(c->worst, margin / bound);
		c->ties++;
		break;
	}
	c->nodes += nn - 1;
	c->iters++;
	assert_true(c->n_hist + n <= (int)(sizeof(c->hist) / sizeof(c->hist[0])));
	for (int i = 0; i < n; i++)
		c->hist[c->n_hist++] = tok[i];
	return 0;
}

void e3u_drafts_run(e3u_drafts *c, const int32_t *prompt, int n_prompt, int max_new, int32_t *out,
                    rt_engine_stats *st)
{
	sw_err err = {0};
	assert_true(n_prompt <= (int)(sizeof(c->hist) / sizeof(c->hist[0])));
	memcpy(c->hist, prompt, sizeof(int32_t) * (size_t)n_prompt);
	c->n_hist = n_prompt;
	c->iters = c->nodes = c->same = c->ties = c->by_ngram = c->by_head = 0;
	c->plain = c->head_short = 0;
	c->worst = 0;
	c->tc = rt_ctx_new(c->target, 512, 64, &err);
	assert_non_null(c->tc);
	c->hd = rt_drafter_eagle3(c->head, c->tc, 8, &err);
	assert_non_null(c->hd);
	c->q = c->t ? malloc(sizeof(float) * (size_t)c->t->n * c->target->cfg.vocab) : NULL;
	assert_true(!c->t || c->q);
	rt_engine_run r = {.prompt = prompt, .n_prompt = n_prompt, .max_new = max_new, .eos = -1,
	                   .on_tokens = on_iteration, .cb_user = c};
	if (rt_engine_generate(c->e, &r, out, st, &err) != max_new)
		fail_msg("%s: %s", c->what, err.msg);
	free(c->q);
	rt_drafter_free(c->hd);
	rt_ctx_free(c->tc);
	c->q = NULL;
	c->hd = NULL;
	c->tc = NULL;
}

void e3u_exactness(const e3u_exact *x)
{
	static const int32_t used[10] = {5, 1, 3, 11, 4, 6, 7, 10, 8, 9};
	static const int32_t prompt3[3] = {3, 7, 1};
	const int32_t *prompt = x->prompt ? x->prompt : prompt3;
	const int np = x->prompt ? x->n_prompt : 3;
	const int V = x->m->cfg.vocab, N = x->runs, K = V * V;
	sw_err err = {0};
	char hdir[300];
	assert_int_equal(V, 12);
	snprintf(hdir, sizeof(hdir), "%s/head12", x->dir);
	mkdir(hdir, 0755);
	te3_opts o = te3_default(x->m);
	o.draft_vocab = 10;
	o.used = used;
	o.ffn = 96;
	o.scale = 0.25; /* a flat q: most of p's mass is under it, drafts are accepted */
	assert_int_equal(te3_write(hdir, x->m, &o, 9), 0);
	rt_eagle3 *h = rt_eagle3_load(hdir, x->m, &err);
	if (!h)
		fail_msg("%s", err.msg);
	double *probs = eu_seq_dists(x->m, prompt, np, x->set, x->n_set);
	uint64_t *counts = malloc(sizeof(*counts) * (size_t)K);
	assert_non_null(counts);
	for (int c = 0; c < x->n_cases; c++) {
		const e3u_exact_case *cs = &x->cases[c];
		char spec[2048], dir[300];
		snprintf(dir, sizeof(dir), "%s/exact%d", x->dir, c);
		e3u_spec_ex(spec, sizeof(spec), x->dtype, x->mpath, hdir, cs->tree, cs->verify,
		            cs->expand, 1.0, 64, 8, cs->draft_extra ? cs->draft_extra : "", "");
		eu_build(spec, dir, x->cache_dir, false);
		rt_dev *d = eu_open_host(RT_HOST_NATIVE, x->cache_dir);
		rt_engine *e = e3u_bind(dir, d, x->m, h, 1);
		int captures = 0;
		uint64_t seed = x->seed;
		for (int k = 0; k < x->n_set; k++) {
			const rt_engine_sampling *s = &x->set[k];
			const int iters = eu_sample_pairs(e, cs->tree, prompt, np, s, N, &seed, counts, V,
			                                  &captures);
			int df;
			double chi = tu_chi2(counts, probs + (size_t)k * K, K, (uint64_t)N, &df);
			double crit = tu_chi2_crit(df, 1e-4);
			print_message("  %s%-10s %-6s T %.1f k %d: chi2 %.1f (df %d, critical %.1f at 1e-4), "
			              "%.2f iterations per 2 tokens\n", x->label, cs->tree, cs->verify,
			              (double)s->temperature, s->top_k, chi, df, crit, (double)iters / N);
			if (!(chi < crit))
				fail_msg("%s%s %s at T %g top-k %d: the engine's output distribution is not the "
				         "target's", x->label, cs->tree, cs->verify, (double)s->temperature,
				         s->top_k);
			assert_true(iters < 2 * N); /* drafts were accepted */
		}
		assert_int_equal(captures, 1);
		rt_engine_free(e);
		rt_dev_free(d);
	}
	rt_eagle3_free(h);
	te3_rmdir(hdir);
	free(probs);
	free(counts);
}
