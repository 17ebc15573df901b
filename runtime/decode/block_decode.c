/* Block-drafter drafting on the host: the chain drafter (S = 1 and MDLM's
 * ddpm_cache with the exact final-Z rule) and Cartesian / sampled tree
 * drafting from one pass. See block_decode.h for the rules and why each is
 * exact. */
#include "block_decode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acchead.h"
#include "kernels/philox.h"
#include "tree_verify.h"

struct block_drafter {
	rt_drafter base;
	const rt_block_drafter *bd;
	rt_ctx *tc;           /* the target context (features), or NULL */
	rt_bd_state *st;
	int steps;
	int32_t *ctx_tok;     /* (max_ctx) the tokens whose features st holds */
	float *logits;        /* (B, Vd) the last pass */
	float *row;           /* (V) */
	float *qd;            /* (Vd) a row over draft ids, before the map */
	int *idx;             /* (V) */
	rt_adaptive adapt;
};

static const struct rt_drafter_ops block_drafter_ops;

bool rt_drafter_is_block(const rt_drafter *d) { return d && d->ops == &block_drafter_ops; }

const rt_block_drafter *rt_block_drafter_of(const rt_drafter *d)
{
	return rt_drafter_is_block(d) ? ((const struct block_drafter *)d)->bd : NULL;
}

/* Brings the drafter's context to hist[0..n_hist-1) (everything before the
 * anchor): features from the target context's taps of the committed
 * positions, keeping the prefix that still agrees. */
static int bdr_sync(struct block_drafter *b, const int32_t *hist, int n_hist, sw_err *err)
{
	if (b->bd->cfg.cond != RT_BD_FEATURES)
		return 0;
	rt_ctx *tc = b->tc;
	int need = n_hist - 1;
	if (tc->len != need)
		return sw_errf(err, SW_EINVAL, "block drafter: the target context holds %d committed tokens, the anchor is at %d (expected equal)",
		               tc->len, need);
	int k = 0, lim = b->st->len < need ? b->st->len : need;
	while (k < lim && b->ctx_tok[k] == tc->tokens[k])
		k++;
	rt_bd_truncate(b->st, k);
	size_t row = (size_t)tc->n_taps * tc->m->cfg.dim;
	int rc = rt_bd_append(b->st, tc->tap_cache + (size_t)k * row, need - k, err);
	if (rc)
		return rc;
	memcpy(b->ctx_tok + k, tc->tokens + k, (size_t)(need - k) * sizeof(*b->ctx_tok));
	return 0;
}

static int bdr_pass(struct block_drafter *b, const int32_t *blk, const int32_t *hist, int n_hist, sw_err *err)
{
	const rt_bd_config *c = &b->bd->cfg;
	int pos0 = n_hist - 1, n_win = 0;
	const int32_t *win = NULL;
	if (c->cond == RT_BD_TOKENS) {
		n_win = c->window < pos0 ? c->window : pos0;
		win = hist + pos0 - n_win;
	}
	b->base.n_forwards++;
	return rt_bd_forward(b->st, blk, pos0, win, n_win, b->logits, err);
}

/* q (V) = the draft's distribution from row logits lg (Vd): rt_probs over
 * the draft vocabulary (greedy: one-hot at the argmax; the sampling's
 * temperature, top-k, top-p otherwise), zero beyond. */
static void probs_vd(const float *lg, int Vd, int V, const rt_sampling *s, float *q, int *idx)
{
	rt_probs(q, lg, Vd, s, idx);
	for (int v = Vd; v < V; v++)
		q[v] = 0.0f;
}

/* q (V) over draft ids [0, Vd) (zero beyond) to target ids through the
 * drafter's map (d2t; nothing to do without one). */
static void scatter_q(struct block_drafter *b, float *q)
{
	const rt_bd_config *c = &b->bd->cfg;
	if (!c->has_map)
		return;
	memcpy(b->qd, q, (size_t)c->draft_vocab * sizeof(*q));
	memset(q, 0, (size_t)c->vocab * sizeof(*q));
	for (int i = 0; i < c->draft_vocab; i++)
		q[b->bd->d2t[i]] = b->qd[i];
}

static void row_probs(struct block_drafter *b, const float *lg, const rt_sampling *s, float *q)
{
	probs_vd(lg, b->bd->cfg.draft_vocab, b->bd->cfg.vocab, s, q, b->idx);
	scatter_q(b, q);
}

void rt_block_unmask_step(int i, int S, int B, int Vd, const float *logits, const rt_sampling *s,
                          uint64_t seed, uint32_t iter, int32_t *fixed, float *row, int *idx)
{
	/* log-linear schedule: mask probability m(t) = t (up to eps) */
	double t = 1.0 - (double)i * (1.0 - 1e-5) / S, tn = 1.0 - (double)(i + 1) * (1.0 - 1e-5) / S;
	double p_unmask = (t - tn) / t;
	for (int j = 0; j < B; j++) {
		if (fixed[j] >= 0)
			continue;
		uint32_t node = 256u * (uint32_t)(i + 1) + (uint32_t)j;
		if (sw_uniform_double(seed, iter, node, SW_RNG_DRAFT_SAMPLE) >= p_unmask)
			continue;
		const float *lg = logits + (size_t)j * Vd;
		if (rt_sampling_greedy(s)) {
			fixed[j] = rt_argmax(lg, Vd);
		} else {
			probs_vd(lg, Vd, Vd, s, row, idx);
			fixed[j] = rt_sample_cdf(row, Vd, sw_uniform_double(seed, iter, node + 128, SW_RNG_DRAFT_SAMPLE));
		}
	}
}

int32_t rt_block_final_draw(int j, int32_t fixed_j, const float *lg, int Vd, int V, const rt_sampling *s,
                            uint64_t seed, uint32_t iter, float *qj, int *idx)
{
	if (fixed_j >= 0) {
		/* SUBS carry-over: Z is one-hot on a position fixed earlier. */
		if (qj) {
			memset(qj, 0, (size_t)V * sizeof(*qj));
			qj[fixed_j] = 1.0f;
		}
		return fixed_j;
	}
	if (rt_sampling_greedy(s))
		return rt_argmax(lg, Vd); /* greedy verification never reads q */
	probs_vd(lg, Vd, V, s, qj, idx);
	return rt_sample_cdf(qj, Vd, sw_uniform_double(seed, iter, (uint32_t)j, SW_RNG_DRAFT_SAMPLE));
}

/* Runs the S passes and leaves in fixed[j] the token drawn for position j
 * by passes 1..S-1 (a draft id; -1: still masked) and in b->logits the
 * last pass (Z). */
static int bdr_denoise(struct block_drafter *b, const int32_t *hist, int n_hist, const rt_sampling *s,
                       uint64_t seed, uint32_t iter, int32_t *fixed, sw_err *err)
{
	const int B = b->bd->cfg.block, Vd = b->bd->cfg.draft_vocab, S = b->steps;
	int32_t blk[RT_BD_MAX_BLOCK];
	for (int j = 0; j < B; j++)
		fixed[j] = -1;
	for (int i = 0; i < S; i++) {
		/* Row j predicts position pos0+1+j, which is row j+1's input. */
		blk[0] = hist[n_hist - 1];
		for (int j = 1; j < B; j++) /* fixed[] holds draft ids; the block takes target ids */
			blk[j] = fixed[j - 1] >= 0 ? b->bd->d2t[fixed[j - 1]] : -1;
		int rc = bdr_pass(b, blk, hist, n_hist, err);
		if (rc)
			return rc;
		if (i + 1 == S)
			break;
		rt_block_unmask_step(i, S, B, Vd, b->logits, s, seed, iter, fixed, b->row, b->idx);
	}
	return 0;
}

static double softmax_at(const float *lg, int n, int tok)
{
	float mx = -INFINITY;
	for (int v = 0; v < n; v++)
		mx = lg[v] > mx ? lg[v] : mx;
	double sum = 0;
	for (int v = 0; v < n; v++)
		sum += exp((double)lg[v] - mx);
	return exp((double)lg[tok] - mx) / sum;
}

static int bdr_propose(rt_drafter *d, const int32_t *hist, int n_hist, int gamma, const rt_sampling *s,
                       uint64_t seed, uint32_t iter, int32_t *tok, float *q, sw_err *err)
{
	struct block_drafter *b = (struct block_drafter *)d;
	const int B = b->bd->cfg.block, Vd = b->bd->cfg.draft_vocab, V = b->bd->cfg.vocab;
	int g = gamma < B ? gamma : B;
	if (g <= 0)
		return 0;
	int rc = bdr_sync(b, hist, n_hist, err);
	if (rc)
		return rc;
	int32_t fixed[RT_BD_MAX_BLOCK];
	rc = bdr_denoise(b, hist, n_hist, s, seed, iter, fixed, err);
	if (rc)
		return rc;
	bool greedy = rt_sampling_greedy(s);
	double cum = 1.0, p_prev = 1.0;
	int max = b->adapt.predictor != RT_ADAPT_OFF && b->adapt.max_len < g ? b->adapt.max_len : g;
	for (int j = 0; j < max; j++) {
		const float *lg = b->logits + (size_t)j * Vd;
		float *qj = q ? q + (size_t)j * V : NULL;
		int32_t dj = rt_block_final_draw(j, fixed[j], lg, Vd, V, s, seed, iter, qj, b->idx);
		tok[j] = b->bd->d2t[dj];
		if (qj && (fixed[j] >= 0 || !greedy))
			scatter_q(b, qj);
		if (b->adapt.predictor != RT_ADAPT_OFF) {
			if (rt_adaptive_stop(&b->adapt, j + 1, max, p_prev, &cum))
				return j + 1;
			p_prev = fixed[j] >= 0 ? 1.0 : greedy ? softmax_at(lg, Vd, dj) : (double)qj[tok[j]];
		}
	}
	return max;
}

/* q (V) of depth d for a tree drafted from S > 1 passes: row d of the
 * fixed Z, the last pass (b->logits) at the request's sampling s, one-hot
 * on fixed_d when an earlier pass unmasked position d (SUBS carry-over):
 * what the engine's block_unmask FINAL=1 leaves in its probs rows. */
static void z_row(struct block_drafter *b, int d, int32_t fixed_d, const rt_sampling *s, float *q)
{
	if (fixed_d >= 0) {
		memset(q, 0, (size_t)b->bd->cfg.vocab * sizeof(*q));
		q[b->bd->d2t[fixed_d]] = 1.0f;
		return;
	}
	row_probs(b, b->logits + (size_t)d * b->bd->cfg.draft_vocab, s, q);
}

int rt_block_draft_tree(rt_drafter *d, const rt_tree *t, int rule, const rt_sampling *sd, const rt_sampling *s,
                        uint64_t seed, uint32_t iter, const int32_t *hist, int n_hist, int32_t *tok, float *q,
                        sw_err *err)
{
	struct block_drafter *b = (struct block_drafter *)d;
	const int B = b->bd->cfg.block, V = b->bd->cfg.vocab;
	if (b->steps > 1)
		for (int u = 0; u < t->n; u++)
			if (t->n_children[u] > 1)
				return sw_errf(err, SW_EINVAL, "block drafter: steps=%d drafts a chain (at most one child a node), "
				               "found tree %s with %d children at node %d (a tree needs steps=1)",
				               b->steps, t->name, t->n_children[u], u);
	if (t->depth_max > B)
		return sw_errf(err, SW_EINVAL, "block drafter: tree %s has depth %d, the drafter's block gives %d positions",
		               t->name, t->depth_max, B);
	int rc = bdr_sync(b, hist, n_hist, err);
	if (rc)
		return rc;
	/* the passes (S = 1: one over the anchor and B - 1 masks); fixed[j]
	 * the tokens the S - 1 unmask steps drew, as the chain drafter */
	int32_t fixed[RT_BD_MAX_BLOCK];
	if ((rc = bdr_denoise(b, hist, n_hist, s, seed, iter, fixed, err)))
		return rc;
	tok[0] = hist[n_hist - 1];
	for (int u = 0; u < t->n; u++) {
		int kc = t->n_children[u];
		float *qu = q + (size_t)u * V;
		if (kc == 0)
			continue;
		if (u > 0 && tok[u] < 0) { /* absent node (ref_expand_node): absent children */
			for (int r = 0; r < kc; r++)
				tok[t->child_list[t->child_start[u] + r]] = -1;
			continue;
		}
		/* depth-d distribution: the same for every node of the level; one
		 * pass at the draft sampling sd, S > 1 passes Z at the request's s */
		int dep = t->depth[u];
		if (b->steps > 1)
			z_row(b, dep, fixed[dep], s, qu);
		else
			row_probs(b, b->logits + (size_t)dep * b->bd->cfg.draft_vocab, sd, qu);
		int32_t kids[RT_TREE_MAX_NODES];
		rc = rt_expand_node(rule, qu, V, kc, seed, iter, (uint32_t)u, kids, NULL, NULL);
		if (rc)
			return sw_errf(err, rc, "block tree drafting: node %d: expansion rule %s refused %d children",
			               u, rt_expand_rule_name(rule), kc);
		for (int r = 0; r < kc; r++)
			tok[t->child_list[t->child_start[u] + r]] = kids[r];
	}
	return 0;
}

int rt_block_set_adaptive(rt_drafter *d, const rt_adaptive *a, sw_err *err)
{
	struct block_drafter *b = (struct block_drafter *)d;
	if (!a || a->predictor == RT_ADAPT_OFF) {
		memset(&b->adapt, 0, sizeof(b->adapt));
		return 0;
	}
	if (a->predictor != RT_ADAPT_PROXY)
		return sw_errf(err, SW_EINVAL, "adaptive drafting: a block drafter supports the proxy predictor only (it has no acceptance head)");
	if (!(a->threshold >= 0.0f && a->threshold <= 1.0f))
		return sw_errf(err, SW_ERANGE, "adaptive drafting: threshold h = %g outside [0, 1]", a->threshold);
	if (a->min_len < 1 || a->max_len < a->min_len)
		return sw_errf(err, SW_ERANGE, "adaptive drafting: bounds [%d, %d], need 1 <= min <= max", a->min_len,
		               a->max_len);
	b->adapt = *a;
	return 0;
}

static void bdr_free(rt_drafter *d)
{
	struct block_drafter *b = (struct block_drafter *)d;
	rt_bd_state_free(b->st);
	free(b->ctx_tok);
	free(b->logits);
	free(b->row);
	free(b->qd);
	free(b->idx);
	free(b);
}

static const struct rt_drafter_ops block_drafter_ops = {
	/* .propose    = */ bdr_propose,
	/* .free       = */ bdr_free,
	/* .draft_tree = */ rt_block_draft_tree,
};

rt_drafter *rt_drafter_block(const rt_block_drafter *bd, rt_ctx *tc, int steps, sw_err *err)
{
	const rt_bd_config *c = &bd->cfg;
	if (steps < 1 || steps > 16) {
		sw_errf(err, SW_ERANGE, "block drafter %s: steps=%d, expected 1..16", bd->name, steps);
		return NULL;
	}
	if (tc->m->cfg.vocab != c->vocab) {
		sw_errf(err, SW_EINVAL, "block drafter %s: vocabulary %d, the target's is %d", bd->name, c->vocab,
		        tc->m->cfg.vocab);
		return NULL;
	}
	if (c->cond == RT_BD_FEATURES && rt_ctx_set_taps(tc, c->taps, c->n_taps, err))
		return NULL;
	struct block_drafter *b = calloc(1, sizeof(*b));
	if (!b) {
		sw_errf(err, SW_ENOMEM, "block drafter: out of memory");
		return NULL;
	}
	b->base.ops = &block_drafter_ops;
	snprintf(b->base.name, sizeof(b->base.name), "block(B=%d,S=%d)", c->block, steps);
	b->bd = bd;
	b->tc = tc;
	b->steps = steps;
	b->st = rt_bd_state_new(bd, tc->max_ctx, err);
	if (!b->st) {
		bdr_free(&b->base);
		return NULL;
	}
	b->ctx_tok = malloc((size_t)tc->max_ctx * sizeof(*b->ctx_tok));
	b->logits = malloc((size_t)c->block * c->draft_vocab * sizeof(float));
	b->row = malloc((size_t)c->vocab * sizeof(float));
	b->qd = malloc((size_t)c->draft_vocab * sizeof(float));
	b->idx = malloc((size_t)c->vocab * sizeof(int));
	if (!b->ctx_tok || !b->logits || !b->row || !b->qd || !b->idx) {
		bdr_free(&b->base);
		sw_errf(err, SW_ENOMEM, "block drafter: out of memory");
		return NULL;
	}
	return &b->base;
}
