/* EAGLE-3 drafting on the host: the chain drafter and static-tree drafting
 * level by level for the tree decoder. See eagle3_draft.h for the rules and
 * why each is exact. */
#include "eagle3_draft.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/philox.h"
#include "core/tree.h"
#include "tree_verify.h"

struct e3_drafter {
	rt_drafter base;
	const rt_eagle3 *h;
	rt_ctx *tc;           /* the target context: its taps are the features */
	rt_e3_state *st;
	int max_rows;         /* staged rows st and the buffers below hold */
	int32_t *seq;         /* (tc->max_ctx) the sequence st's rows were made from */
	int n_seq;            /* st->len + 1 when st->len > 0, else 0 */
	float *logits;        /* (max_rows + 1, Vd): row 0 the anchor row's */
	float *hidden;        /* (max_rows + 1, dim) outputs before the final norm */
	float *p;             /* (Vd) */
	int *idx;             /* (V) */
	int32_t *tok, *pos;   /* (max_rows) staged rows' inputs */
	uint64_t *mask;       /* (max_rows, words) */
};

static const struct rt_drafter_ops e3_ops;

bool rt_drafter_is_eagle3(const rt_drafter *d) { return d && d->ops == &e3_ops; }

void rt_eagle3_q(const rt_eagle3 *h, const float *lg, const rt_sampling *s, float *q, float *p, int *idx)
{
	const int Vd = h->cfg.draft_vocab, V = h->cfg.head.vocab;
	rt_probs(p, lg, Vd, s, idx);
	memset(q, 0, (size_t)V * sizeof(*q));
	for (int i = 0; i < Vd; i++)
		q[h->d2t[i]] = p[i];
}

static void free_bufs(struct e3_drafter *b)
{
	rt_e3_state_free(b->st);
	free(b->logits);
	free(b->hidden);
	free(b->tok);
	free(b->pos);
	free(b->mask);
	b->st = NULL;
	b->logits = b->hidden = NULL;
	b->tok = b->pos = NULL;
	b->mask = NULL;
}

/* (Re)allocates the state and buffers for `rows` staged rows; a new state
 * starts empty (the next sync recomputes the committed rows). */
static int ensure_rows(struct e3_drafter *b, int rows, sw_err *err)
{
	if (rows <= b->max_rows && b->st)
		return 0;
	const rt_e3_config *c = &b->h->cfg;
	free_bufs(b);
	b->n_seq = 0;
	b->max_rows = rows;
	size_t R1 = (size_t)rows + 1, words = ((size_t)rows + 63) / 64;
	b->st = rt_e3_state_new(b->h, b->tc->max_ctx, rows, err);
	if (!b->st)
		return err->code ? err->code : SW_ENOMEM;
	b->logits = malloc(R1 * c->draft_vocab * sizeof(float));
	b->hidden = malloc(R1 * c->head.dim * sizeof(float));
	b->tok = malloc((size_t)rows * sizeof(int32_t));
	b->pos = malloc((size_t)rows * sizeof(int32_t));
	b->mask = malloc((size_t)rows * words * sizeof(uint64_t));
	if (!b->logits || !b->hidden || !b->tok || !b->pos || !b->mask)
		return sw_errf(err, SW_ENOMEM, "%s: out of memory for %d draft rows", b->h->name, rows);
	return 0;
}

/* Brings the head's committed rows to hist (rows 0..n_hist-2, row i from
 * the target's taps at i and hist[i+1]), keeping the rows whose inputs
 * still agree and recomputing the anchor row for its output (logits row 0,
 * hidden row 0). Returns the rows (0: no target position yet, nothing to
 * draft from). */
static int e3_sync(struct e3_drafter *b, const int32_t *hist, int n_hist, sw_err *err)
{
	rt_ctx *tc = b->tc;
	int need = n_hist - 1;
	if (tc->len != need)
		return sw_errf(err, SW_EINVAL, "EAGLE-3 drafter: the target context holds %d committed tokens, the anchor is at %d (expected equal)",
		               tc->len, need);
	if (need == 0)
		return 0;
	int k = 0, lim = b->n_seq < n_hist ? b->n_seq : n_hist;
	while (k < lim && b->seq[k] == hist[k])
		k++;
	/* row i needs seq[0..i+1] unchanged; the anchor row is always redone */
	int keep = k - 1 < need - 1 ? k - 1 : need - 1;
	if (keep > b->st->len)
		keep = b->st->len;
	if (keep < 0)
		keep = 0;
	rt_e3_truncate(b->st, keep);
	size_t row = (size_t)tc->n_taps * tc->m->cfg.dim;
	b->base.n_forwards++;
	int rc = rt_e3_commit(b->st, tc->tap_cache + (size_t)keep * row, hist + keep + 1, need - keep, b->hidden,
	                      b->logits, err);
	if (rc) {
		b->n_seq = 0;
		rt_e3_truncate(b->st, 0);
		return rc;
	}
	memcpy(b->seq, hist, (size_t)n_hist * sizeof(*hist));
	b->n_seq = n_hist;
	return need;
}

static int e3_propose(rt_drafter *d, const int32_t *hist, int n_hist, int gamma, const rt_sampling *s,
                      uint64_t seed, uint32_t iter, int32_t *tok, float *q, sw_err *err)
{
	struct e3_drafter *b = (struct e3_drafter *)d;
	const rt_eagle3 *h = b->h;
	const int Vd = h->cfg.draft_vocab, V = h->cfg.head.vocab, dim = h->cfg.head.dim;
	if (gamma <= 0)
		return 0;
	int rc = ensure_rows(b, gamma - 1 > 0 ? gamma - 1 : 1, err);
	if (rc)
		return rc;
	if ((rc = e3_sync(b, hist, n_hist, err)) <= 0)
		return rc;
	const bool greedy = rt_sampling_greedy(s);
	const float *lg = b->logits, *hid = b->hidden;
	for (int j = 0; j < gamma; j++) {
		if (greedy) {
			tok[j] = h->d2t[rt_argmax(lg, Vd)]; /* greedy verification never reads q */
		} else {
			float *qj = q + (size_t)j * V;
			rt_eagle3_q(h, lg, s, qj, b->p, b->idx);
			tok[j] = rt_sample_cdf(qj, V, sw_uniform_double(seed, iter, (uint32_t)j, SW_RNG_DRAFT_SAMPLE));
		}
		if (j + 1 == gamma)
			break;
		/* the next step: (this step's output, its draft) one position on */
		int32_t pos = n_hist - 1 + j;
		float *nh = b->hidden + (size_t)(j + 1) * dim, *nl = b->logits + (size_t)(j + 1) * Vd;
		b->base.n_forwards++;
		if ((rc = rt_e3_step(b->st, hid, &tok[j], &pos, 1, NULL, nh, nl, err)))
			return rc;
		hid = nh;
		lg = nl;
	}
	return gamma;
}

static int e3_draft_tree(rt_drafter *d, const rt_tree *t, int rule, const rt_sampling *sd, const rt_sampling *s,
                         uint64_t seed, uint32_t iter, const int32_t *hist, int n_hist, int32_t *tok, float *q,
                         sw_err *err)
{
	struct e3_drafter *b = (struct e3_drafter *)d;
	const rt_eagle3 *h = b->h;
	const int Vd = h->cfg.draft_vocab, V = h->cfg.head.vocab, dim = h->cfg.head.dim;
	int rc = ensure_rows(b, t->n - 1 > 0 ? t->n - 1 : 1, err);
	if (rc)
		return rc;
	tok[0] = hist[n_hist - 1];
	if ((rc = e3_sync(b, hist, n_hist, err)) < 0)
		return rc;
	if (rc == 0) { /* no target state yet: nothing drafted, the root is a leaf */
		for (int u = 1; u < t->n; u++)
			tok[u] = -1;
		return 0;
	}
	/* node u's output: logits/hidden row u (row 0 the anchor's); staged
	 * entry u - 1 */
	for (int dep = 0; dep < t->depth_max; dep++) {
		for (int u = t->level_start[dep]; u < t->level_start[dep + 1]; u++) {
			int kc = t->n_children[u];
			if (kc == 0)
				continue;
			if (u > 0 && tok[u] < 0) { /* absent node: absent children */
				for (int r = 0; r < kc; r++)
					tok[t->child_list[t->child_start[u] + r]] = -1;
				continue;
			}
			float *qu = q + (size_t)u * V;
			rt_eagle3_q(h, b->logits + (size_t)u * Vd, sd, qu, b->p, b->idx);
			int32_t kids[RT_TREE_MAX_NODES];
			rc = rt_expand_node(rule, qu, V, kc, seed, iter, (uint32_t)u, kids, NULL, NULL);
			if (rc)
				return sw_errf(err, rc, "EAGLE-3 tree drafting: node %d of tree %s: expansion rule %s refused %d children",
				               u, t->name, rt_expand_rule_name(rule), kc);
			for (int r = 0; r < kc; r++)
				tok[t->child_list[t->child_start[u] + r]] = kids[r];
		}
		if (dep + 1 == t->depth_max)
			break;
		/* stage level dep+1: node u's row is (parent's output, tok[u]) */
		int a = t->level_start[dep + 1], e = t->level_start[dep + 2], R = e - a;
		int words = (e - 1 + 63) / 64;
		for (int u = a; u < e; u++) {
			int i = u - a;
			b->tok[i] = tok[u] < 0 ? 0 : tok[u]; /* an absent row is seen by no present one */
			b->pos[i] = n_hist - 2 + t->depth[u];
			uint64_t *row = b->mask + (size_t)i * words;
			memset(row, 0, (size_t)words * sizeof(*row));
			for (int j = 1; j < e; j++)
				if (rt_tree_visible(t, u, j))
					row[(j - 1) / 64] |= 1ull << ((j - 1) % 64);
		}
		/* the features are the parents' outputs, gathered into the level's
		 * own output rows (rt_e3_step reads every feature before it writes
		 * any output, so the two may alias) */
		for (int u = a; u < e; u++)
			memcpy(b->hidden + (size_t)u * dim, b->hidden + (size_t)t->parent[u] * dim, (size_t)dim * sizeof(float));
		b->base.n_forwards++;
		if ((rc = rt_e3_step(b->st, b->hidden + (size_t)a * dim, b->tok, b->pos, R, b->mask,
		                     b->hidden + (size_t)a * dim, b->logits + (size_t)a * Vd, err)))
			return rc;
	}
	(void)s;
	return 0;
}

static void e3_free(rt_drafter *d)
{
	struct e3_drafter *b = (struct e3_drafter *)d;
	free_bufs(b);
	free(b->seq);
	free(b->p);
	free(b->idx);
	free(b);
}

static const struct rt_drafter_ops e3_ops = {
	/* .propose    = */ e3_propose,
	/* .free       = */ e3_free,
	/* .draft_tree = */ e3_draft_tree,
};

rt_drafter *rt_drafter_eagle3(const rt_eagle3 *h, rt_ctx *tc, int max_rows, sw_err *err)
{
	const rt_e3_config *c = &h->cfg;
	if (tc->m->kind != RT_MODEL_LLAMA || tc->m->cfg.vocab != c->head.vocab || tc->m->cfg.dim != c->target_dim ||
	    tc->m->cfg.n_layers != c->target_layers) {
		sw_errf(err, SW_EINVAL, "EAGLE-3 head %s: made for a target of vocabulary %d, width %d, %d layers; %s is not one",
		        h->name, c->head.vocab, c->target_dim, c->target_layers, tc->m->name);
		return NULL;
	}
	if (rt_ctx_set_taps(tc, c->taps, RT_E3_TAPS, err))
		return NULL;
	struct e3_drafter *b = calloc(1, sizeof(*b));
	if (!b) {
		sw_errf(err, SW_ENOMEM, "EAGLE-3 drafter: out of memory");
		return NULL;
	}
	b->base.ops = &e3_ops;
	snprintf(b->base.name, sizeof(b->base.name), "eagle3(Vd=%d)", c->draft_vocab);
	b->h = h;
	b->tc = tc;
	b->seq = malloc((size_t)tc->max_ctx * sizeof(*b->seq));
	b->p = malloc((size_t)c->draft_vocab * sizeof(float));
	b->idx = malloc((size_t)c->head.vocab * sizeof(int));
	if (!b->seq || !b->p || !b->idx) {
		e3_free(&b->base);
		sw_errf(err, SW_ENOMEM, "EAGLE-3 drafter: out of memory");
		return NULL;
	}
	if (ensure_rows(b, max_rows > 0 ? max_rows : 1, err)) {
		e3_free(&b->base);
		return NULL;
	}
	return &b->base;
}
