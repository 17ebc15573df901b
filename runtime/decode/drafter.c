/* Drafters for chain speculative decoding: a draft model (a separate model
 * over the target's ids, rt_model_pad_vocab when its vocabulary is a prefix
 * of the target's, or a layer-skip view of the target) sampling
 * autoregressively with its own KV cache, optionally with the SpecDec++
 * adaptive stop rule (acchead.h), and prompt-lookup n-gram drafting. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acchead.h"
#include "block_decode.h"
#include "kernels/philox.h"
#include "chain.h"

struct model_drafter {
	rt_drafter base;
	const rt_model *m;
	rt_ctx *c;
	float *logits; /* (vocab) */
	int *idx;      /* (vocab) */
	/* SpecDec++ stop rule; predictor RT_ADAPT_OFF = fixed gamma */
	rt_adaptive adapt;
	float *hidden;  /* (dim) the final-normed hidden state of the last fed token */
	float *scratch; /* (2*dim) head activations */
};

/* Brings the draft context to hist[0..n_hist) and leaves the logits after
 * the last token in md->logits. Only the suffix the cache lacks is run:
 * the committed prefix that still agrees with hist is kept (rollback of the
 * rejected draft tokens is a truncation). */
static int md_sync(struct model_drafter *md, const int32_t *hist, int n_hist, sw_err *err)
{
	rt_ctx *c = md->c;
	int k = 0, lim = c->len < n_hist - 1 ? c->len : n_hist - 1;
	while (k < lim && c->tokens[k] == hist[k])
		k++;
	rt_ctx_truncate(c, k);
	md->base.n_forwards++;
	return rt_ctx_feed(c, hist + k, n_hist - k, md->logits, err);
}

/* Feeds one token, committed, keeping its logits and (if hidden is
 * non-NULL) its final-normed hidden state: rt_ctx_feed for T = 1 with the
 * hidden state the acceptance head reads. */
static int md_feed1(struct model_drafter *md, int32_t tok, float *hidden, sw_err *err)
{
	rt_ctx *c = md->c;
	int32_t pos = c->len;
	int keep = 0;
	md->base.n_forwards++;
	int rc = rt_ctx_eval(c, &tok, &pos, 1, NULL, md->logits, hidden, err);
	if (rc)
		return rc;
	rt_ctx_commit(c, &keep, 1);
	return 0;
}

/* softmax(logits)[tok] at temperature 1, in double: the proxy predictor at
 * T = 0, where the draft's sampling distribution is one-hot. */
static double softmax_at(const float *logits, int V, int tok)
{
	float mx = -INFINITY;
	for (int v = 0; v < V; v++)
		if (logits[v] > mx)
			mx = logits[v];
	double s = 0;
	for (int v = 0; v < V; v++)
		s += exp((double)logits[v] - mx);
	return exp((double)logits[tok] - mx) / s;
}

/* SpecDec++ drafting (ALGORITHMS.txt 6): draft Y_step, then decide with
 * p_hat(Y_{step-1}) whether to stop; Y_step is submitted either way. The
 * head reads the hidden state of the forward that consumed Y_{step-1},
 * the same forward whose logits Y_step is drawn from, so no forward is
 * spent on prediction: a round of k drafts still costs k forwards. The stop
 * decision depends only on the drafted prefix, never on the target, so the
 * verification stays exact. */
static int md_propose_adaptive(struct model_drafter *md, int gamma, const rt_sampling *s, uint64_t seed,
                               uint32_t iter, int32_t *tok, float *q, sw_err *err)
{
	const rt_adaptive *a = &md->adapt;
	int V = md->m->cfg.vocab;
	int max = a->max_len < gamma ? a->max_len : gamma;
	bool greedy = rt_sampling_greedy(s);
	double cum = 1.0, p_prev = 1.0;
	for (int j = 0; j < max; j++) {
		int step = j + 1;
		if (step > 1 && a->predictor == RT_ADAPT_HEAD)
			p_prev = rt_acchead_prob(a->head, md->hidden, md->scratch);
		float *qj = q ? q + (size_t)j * V : NULL;
		if (greedy) {
			tok[j] = rt_argmax(md->logits, V);
		} else {
			rt_probs(qj, md->logits, V, s, md->idx);
			tok[j] = rt_sample_cdf(qj, V, sw_uniform_double(seed, iter, (uint32_t)j, SW_RNG_DRAFT_SAMPLE));
		}
		bool stop = rt_adaptive_stop(a, step, max, p_prev, &cum);
		if (stop)
			return step;
		if (a->predictor == RT_ADAPT_PROXY)
			p_prev = greedy ? softmax_at(md->logits, V, tok[j]) : (double)qj[tok[j]];
		int rc = md_feed1(md, tok[j], a->predictor == RT_ADAPT_HEAD ? md->hidden : NULL, err);
		if (rc)
			return rc;
	}
	return max;
}

static int md_propose(rt_drafter *d, const int32_t *hist, int n_hist, int gamma, const rt_sampling *s,
                      uint64_t seed, uint32_t iter, int32_t *tok, float *q, sw_err *err)
{
	struct model_drafter *md = (struct model_drafter *)d;
	int V = md->m->cfg.vocab;
	if (n_hist + gamma > md->c->max_ctx)
		gamma = md->c->max_ctx - n_hist;
	if (gamma <= 0)
		return 0;
	/* One forward, counted once however many tokens it runs: it yields the
	 * distribution of the first draft (see the convention in acchead.h). */
	int rc = md_sync(md, hist, n_hist, err);
	if (rc)
		return rc;
	if (md->adapt.predictor != RT_ADAPT_OFF)
		return md_propose_adaptive(md, gamma, s, seed, iter, tok, q, err);
	for (int j = 0; j < gamma; j++) {
		float *qj = q + (size_t)j * V;
		if (rt_sampling_greedy(s)) {
			/* Greedy verification never reads q. */
			tok[j] = rt_argmax(md->logits, V);
		} else {
			rt_probs(qj, md->logits, V, s, md->idx);
			tok[j] = rt_sample_cdf(qj, V, sw_uniform_double(seed, iter, (uint32_t)j, SW_RNG_DRAFT_SAMPLE));
		}
		if (j + 1 < gamma) {
			md->base.n_forwards++;
			rc = rt_ctx_feed(md->c, &tok[j], 1, md->logits, err);
			if (rc)
				return rc;
		}
	}
	return gamma;
}

static void md_free(rt_drafter *d)
{
	struct model_drafter *md = (struct model_drafter *)d;
	rt_ctx_free(md->c);
	free(md->logits);
	free(md->idx);
	free(md->hidden);
	free(md->scratch);
	free(md);
}

static const struct rt_drafter_ops model_drafter_ops = {
	/* .propose    = */ md_propose,
	/* .free       = */ md_free,
	/* .draft_tree = */ NULL,
};

rt_drafter *rt_drafter_model(const rt_model *dm, int max_ctx, sw_err *err)
{
	struct model_drafter *md = calloc(1, sizeof(*md));
	if (!md) {
		sw_errf(err, SW_ENOMEM, "drafter: out of memory");
		return NULL;
	}
	md->base.ops = &model_drafter_ops;
	snprintf(md->base.name, sizeof(md->base.name), "model");
	md->m = dm;
	md->c = rt_ctx_new(dm, max_ctx, max_ctx < 64 ? max_ctx : 64, err);
	md->logits = malloc((size_t)dm->cfg.vocab * sizeof(float));
	md->idx = malloc((size_t)dm->cfg.vocab * sizeof(int));
	if (!md->c || !md->logits || !md->idx) {
		if (md->c && (!md->logits || !md->idx))
			sw_errf(err, SW_ENOMEM, "drafter: out of memory");
		md_free(&md->base);
		return NULL;
	}
	return &md->base;
}

int rt_drafter_set_adaptive(rt_drafter *d, const rt_adaptive *a, sw_err *err)
{
	if (rt_drafter_is_block(d))
		return rt_block_set_adaptive(d, a, err);
	if (d->ops != &model_drafter_ops)
		return sw_errf(err, SW_EINVAL, "adaptive drafting: drafter '%s' is not a draft model (SpecDec++ needs the draft's distributions)",
		               d->name);
	struct model_drafter *md = (struct model_drafter *)d;
	if (!a || a->predictor == RT_ADAPT_OFF) {
		memset(&md->adapt, 0, sizeof(md->adapt));
		return 0;
	}
	if (a->predictor != RT_ADAPT_HEAD && a->predictor != RT_ADAPT_PROXY)
		return sw_errf(err, SW_EINVAL, "adaptive drafting: unknown predictor %d", a->predictor);
	if (!(a->threshold >= 0.0f && a->threshold <= 1.0f))
		return sw_errf(err, SW_ERANGE, "adaptive drafting: threshold h = %g outside [0, 1]", a->threshold);
	if (a->min_len < 1 || a->max_len < a->min_len)
		return sw_errf(err, SW_ERANGE, "adaptive drafting: bounds [%d, %d], need 1 <= min <= max", a->min_len,
		               a->max_len);
	if (a->predictor == RT_ADAPT_HEAD) {
		int dim = md->m->cfg.dim;
		if (!a->head)
			return sw_errf(err, SW_EINVAL, "adaptive drafting: the head predictor needs a head");
		if (md->m->kind != RT_MODEL_LLAMA)
			return sw_errf(err, SW_EINVAL, "adaptive drafting: %s has no hidden state for an acceptance head (use the proxy predictor)",
			               md->m->name);
		if (a->head->dim != dim)
			return sw_errf(err, SW_EINVAL, "adaptive drafting: the acceptance head takes hidden size %d, the draft %s has %d",
			               a->head->dim, md->m->name, dim);
		if (!md->hidden) {
			md->hidden = calloc((size_t)dim, sizeof(*md->hidden));
			md->scratch = calloc(2 * (size_t)dim, sizeof(*md->scratch));
			if (!md->hidden || !md->scratch)
				return sw_errf(err, SW_ENOMEM, "adaptive drafting: out of memory");
		}
	}
	md->adapt = *a;
	snprintf(md->base.name, sizeof(md->base.name), "model+specdec++(%s h=%.2f %d..%d)",
	         a->predictor == RT_ADAPT_HEAD ? "head" : "proxy", a->threshold, a->min_len, a->max_len);
	return 0;
}

struct ngram_drafter {
	rt_drafter base;
	int min_n, max_n;
};

static int ng_propose(rt_drafter *d, const int32_t *hist, int n_hist, int gamma, const rt_sampling *s,
                      uint64_t seed, uint32_t iter, int32_t *tok, float *q, sw_err *err)
{
	struct ngram_drafter *ng = (struct ngram_drafter *)d;
	for (int n = ng->max_n; n >= ng->min_n; n--) {
		if (n >= n_hist)
			continue;
		const int32_t *suf = hist + n_hist - n;
		/* Most recent earlier occurrence: recent text predicts best. */
		for (int st = n_hist - n - 1; st >= 0; st--) {
			if (memcmp(hist + st, suf, (size_t)n * sizeof(*suf)))
				continue;
			int k = 0;
			while (k < gamma && st + n + k < n_hist) {
				tok[k] = hist[st + n + k];
				k++;
			}
			if (k > 0)
				return k;
		}
	}
	return 0;
}

static void ng_free(rt_drafter *d) { free(d); }

static const struct rt_drafter_ops ngram_drafter_ops = {
	/* .propose    = */ ng_propose,
	/* .free       = */ ng_free,
	/* .draft_tree = */ NULL,
};

rt_drafter *rt_drafter_ngram(int min_n, int max_n, sw_err *err)
{
	if (min_n < 1 || max_n < min_n || max_n > 16) {
		sw_errf(err, SW_EINVAL, "ngram drafter: need 1 <= min_n <= max_n <= 16, found %d..%d", min_n, max_n);
		return NULL;
	}
	struct ngram_drafter *ng = calloc(1, sizeof(*ng));
	if (!ng) {
		sw_errf(err, SW_ENOMEM, "drafter: out of memory");
		return NULL;
	}
	ng->base.ops = &ngram_drafter_ops;
	ng->base.deterministic = true;
	snprintf(ng->base.name, sizeof(ng->base.name), "ngram:%d-%d", min_n, max_n);
	ng->min_n = min_n;
	ng->max_n = max_n;
	return &ng->base;
}

void rt_drafter_free(rt_drafter *d)
{
	if (d)
		d->ops->free(d);
}
