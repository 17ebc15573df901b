/* Drafters for chain speculative decoding: a draft model (a separate model
 * with the target's vocabulary, or a layer-skip view of the target) sampling
 * autoregressively with its own KV cache, and prompt-lookup n-gram drafting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "philox.h"
#include "spec.h"

struct model_drafter {
	rt_drafter base;
	const rt_model *m;
	rt_ctx *c;
	float *logits; /* (vocab) */
	int *idx;      /* (vocab) */
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

static int md_propose(rt_drafter *d, const int32_t *hist, int n_hist, int gamma, const rt_sampling *s,
                      uint64_t seed, uint32_t iter, int32_t *tok, float *q, sw_err *err)
{
	struct model_drafter *md = (struct model_drafter *)d;
	int V = md->m->cfg.vocab;
	if (n_hist + gamma > md->c->max_ctx)
		gamma = md->c->max_ctx - n_hist;
	if (gamma <= 0)
		return 0;
	int rc = md_sync(md, hist, n_hist, err);
	if (rc)
		return rc;
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
	free(md);
}

static const struct rt_drafter_ops model_drafter_ops = {
	/* .propose = */ md_propose,
	/* .free    = */ md_free,
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
	/* .propose = */ ng_propose,
	/* .free    = */ ng_free,
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
