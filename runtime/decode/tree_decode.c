/* Tree speculative decoding on the host (chain.h, rt_generate_tree): draft
 * the static tree level by level with the draft model, verify every node in
 * one masked target forward, accept a path with the chosen method, commit its
 * KV entries and roll the rest back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/timing.h"
#include "block_decode.h"
#include "kernels/philox.h"
#include "loop.h"
#include "core/tree.h"
#include "tree_verify.h"

struct tree_state {
	rt_ctx *dc;       /* draft context: committed = history, staged = tree nodes 1..n-1 */
	float *dlogits;   /* (n, V) draft logits per node (row u: after u's path) */
	float *fscratch;  /* (4V) */
	int *iscratch;    /* (V) */
	int32_t *tok;     /* (n) */
	int32_t *pos;     /* (n) */
	uint64_t *dmask;  /* (n, words) draft-side mask: the tree's rows without the root column */
};

/* Draft side: the root is the last committed token of the draft context, so
 * staged entry k is tree node k+1 and visibility drops the root column. */
static void draft_mask(const rt_tree *t, uint64_t *out, int words_out)
{
	for (int i = 1; i < t->n; i++) {
		uint64_t *row = out + (size_t)(i - 1) * words_out;
		memset(row, 0, (size_t)words_out * sizeof(*row));
		for (int j = 1; j < t->n; j++)
			if (rt_tree_visible(t, i, j))
				row[(j - 1) / 64] |= 1ull << ((j - 1) % 64);
	}
}

/* The tokens a forward evaluates for tree nodes: an absent node (token < 0,
 * its parent ran out of draft candidates, ref_expand_node) is fed token 0,
 * any id in the vocabulary: its row is visible to no present node (those
 * are never its descendants), its children are absent, verification never
 * reads its distributions and it is never committed. */
static void eval_tokens(int32_t *dst, const int32_t *src, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] = src[i] < 0 ? 0 : src[i];
}

static int draft_tree(struct tree_state *S, const rt_tree *t, const rt_tree_cfg *tc, const rt_gen_cfg *cfg,
                      struct rt_loop *L, uint32_t it, float *q, rt_stats *st, sw_err *err)
{
	rt_ctx *dc = S->dc;
	int V = dc->m->cfg.vocab;
	bool greedy = rt_sampling_greedy(&cfg->samp);
	/* Sync the draft context to the whole history (root included): keep the
	 * agreeing committed prefix, feed the rest. */
	int k = 0, lim = dc->len < L->n_hist ? dc->len : L->n_hist;
	while (k < lim && dc->tokens[k] == L->hist[k])
		k++;
	if (k == L->n_hist) /* the root must be re-fed to get its logits */
		k--;
	rt_ctx_truncate(dc, k);
	int rc = rt_ctx_feed(dc, L->hist + k, L->n_hist - k, S->dlogits, err);
	if (rc)
		return rc;
	st->n_draft_calls++;
	int base = dc->len; /* position of node at depth 1 is base + 0 ... depth d: base + d - 1 */
	int words_d = (t->n - 1 + 63) / 64;
	S->tok[0] = L->hist[L->n_hist - 1];
	for (int d = 0; d < t->depth_max; d++) {
		/* expand every node of level d */
		for (int u = t->level_start[d]; u < t->level_start[d + 1]; u++) {
			int kc = t->n_children[u];
			if (kc == 0)
				continue;
			if (u > 0 && S->tok[u] < 0) { /* absent node: absent children */
				for (int r = 0; r < kc; r++)
					S->tok[t->child_list[t->child_start[u] + r]] = -1;
				continue;
			}
			const float *lg = S->dlogits + (size_t)u * V;
			float *qu = q + (size_t)u * V;
			int rule = tc->rule;
			/* The draft samples from softmax(z/T) without the target's
			 * top-k/top-p (ALGORITHMS.txt 1c: q need only be what the tokens
			 * were drawn from): full support, so k distinct children exist
			 * for the without-replacement and top-k rules. Greedy
			 * verification ignores q; children are then the top-k by the
			 * raw draft distribution. */
			rt_sampling sd = { greedy ? 1.0f : cfg->samp.temperature, 0, 1.0f };
			if (greedy)
				rule = RT_EXPAND_TOPK;
			rt_probs(qu, lg, V, &sd, S->iscratch);
			int32_t kids[RT_TREE_MAX_NODES];
			rc = rt_expand_node(rule, qu, V, kc, cfg->seed, it, (uint32_t)u, kids, S->fscratch, S->iscratch);
			if (rc && rule == RT_EXPAND_SPECHUB && kc > 2)
				return sw_errf(err, rc, "tree drafting: SpecHub drafts at most two children per node, but node "
				               "%d of tree %s has %d (use a binary tree: biseq8, biseq16, kary:2:D)",
				               u, t->name, kc);
			if (rc)
				return sw_errf(err, rc, "tree drafting: node %d: expansion rule %s refused %d children",
				               u, rt_expand_rule_name(rule), kc);
			for (int r = 0; r < kc; r++)
				S->tok[t->child_list[t->child_start[u] + r]] = kids[r];
		}
		/* evaluate level d+1 in the draft (not needed for the last level) */
		int a = t->level_start[d + 1], b = t->level_start[d + 2];
		if (d + 1 == t->depth_max)
			break;
		uint64_t rows[RT_TREE_MAX_NODES * RT_TREE_WORDS];
		int wcur = (b - 1 + 63) / 64; /* staged entries after this append: b - 1 */
		for (int u = a; u < b; u++) {
			S->pos[u] = base + t->depth[u] - 1;
			for (int w = 0; w < wcur; w++)
				rows[(size_t)(u - a) * wcur + w] = S->dmask[(size_t)(u - 1) * words_d + w];
		}
		int32_t et[RT_TREE_MAX_NODES];
		eval_tokens(et, S->tok + a, b - a);
		rc = rt_ctx_eval_append(dc, et, S->pos + a, b - a, rows, S->dlogits + (size_t)a * V, NULL, err);
		if (rc)
			return rc;
		st->n_draft_calls++;
	}
	dc->blk_T = 0; /* the staged tree is never committed on the draft side */
	return 0;
}

/* block: a drafter with a draft_tree op (a block drafter, an EAGLE-3 head)
 * drafts the whole tree (draft unused). */
static int generate_tree(rt_ctx *tc, const rt_model *draft, rt_drafter *block, const rt_tree_cfg *tcfg,
                         const int32_t *prompt, int n_prompt, const rt_gen_cfg *cfg, int32_t *out, rt_stats *st,
                         sw_err *err)
{
	const rt_tree *t = tcfg->tree;
	int V = tc->m->cfg.vocab, n = t->n;
	bool greedy = rt_sampling_greedy(&cfg->samp);
	/* a tree drafter was checked against the target when it was made */
	int dV = block ? V : draft->cfg.vocab;
	if (dV != V)
		return sw_errf(err, SW_EINVAL, "tree decoding: draft vocabulary %d differs from the target's %d", dV, V);
	if (!rt_verify_compatible(tcfg->rule, tcfg->method, greedy))
		return sw_errf(err, SW_EINVAL, "tree decoding: verification %s is not exact for expansion %s at %s",
		               rt_verify_method_name(tcfg->method), rt_expand_rule_name(tcfg->rule),
		               greedy ? "temperature 0" : "temperature > 0");
	struct rt_loop L;
	int rc = rt_loop_init(&L, tc, prompt, n_prompt, cfg, n - 1, st, err);
	if (rc)
		return rc;
	struct tree_state S;
	memset(&S, 0, sizeof(S));
	int mb = n > 64 ? n : 64; /* also the feed chunk for re-syncing the history */
	if (!block)
		S.dc = rt_ctx_new(draft, tc->max_ctx, mb < tc->max_ctx ? mb : tc->max_ctx, err);
	S.dlogits = malloc((size_t)n * V * sizeof(float));
	S.fscratch = malloc(4 * (size_t)V * sizeof(float));
	S.iscratch = malloc((size_t)V * sizeof(int));
	S.tok = malloc((size_t)n * sizeof(int32_t));
	S.pos = malloc((size_t)n * sizeof(int32_t));
	S.dmask = calloc((size_t)n * ((n + 63) / 64), sizeof(uint64_t));
	float *p = malloc((size_t)n * V * sizeof(float));
	if (!S.dc && !block) {
		rc = SW_ENOMEM;
		goto out;
	}
	if (!S.dlogits || !S.fscratch || !S.iscratch || !S.tok || !S.pos || !S.dmask || !p) {
		rc = sw_errf(err, SW_ENOMEM, "tree decoding: out of memory for %d nodes", n);
		goto out;
	}
	draft_mask(t, S.dmask, (t->n - 1 + 63) / 64);
	double t0 = sw_now_s();
	int n_out = 0;
	bool stop = cfg->max_new == 0;
	for (uint32_t it = 0; !stop; it++) {
		if (tc->len + n > tc->max_ctx) {
			/* The whole tree must fit: fewer positions left than nodes. */
			st->stopped_ctx = true;
			break;
		}
		double ta = sw_now_s();
		if (block) {
			/* as draft_tree: no target top-k/top-p on one pass's draft, top-k at T
			 * = 0; S > 1 passes draft at the request's sampling (the engine's way) */
			rt_sampling sd = { greedy ? 1.0f : cfg->samp.temperature, 0, 1.0f };
			uint64_t f0 = block->n_forwards;
			rc = block->ops->draft_tree(block, t, greedy ? RT_EXPAND_TOPK : tcfg->rule, &sd, &cfg->samp,
			                            cfg->seed, it, L.hist, L.n_hist, S.tok, L.q, err);
			st->n_draft_calls += block->n_forwards - f0;
		} else {
			rc = draft_tree(&S, t, tcfg, cfg, &L, it, L.q, st, err);
		}
		if (rc)
			goto out;
		st->t_draft += sw_now_s() - ta;
		double tb = sw_now_s();
		for (int u = 0; u < n; u++)
			S.pos[u] = tc->len + t->depth[u];
		int32_t et[RT_TREE_MAX_NODES];
		eval_tokens(et, S.tok, n);
		rc = rt_ctx_eval(tc, et, S.pos, n, t->mask, L.logits, NULL, err);
		if (rc)
			goto out;
		for (int u = 0; u < n; u++)
			rt_probs(p + (size_t)u * V, L.logits + (size_t)u * V, V, &cfg->samp, L.idx);
		rt_tree_result res;
		int method = greedy ? RT_VERIFY_GREEDY : tcfg->method;
		rc = rt_verify_tree(t, method, S.tok, p, L.q, V, cfg->seed, it, &res, S.fscratch);
		if (rc) {
			sw_errf(err, rc, "tree verification (%s) failed on tree %s", rt_verify_method_name(method), t->name);
			goto out;
		}
		rt_ctx_commit(tc, res.path, res.n_path);
		st->t_target += sw_now_s() - tb;
		st->n_target_calls++;
		st->n_iters++;
		/* Statistics count only positions inside the max_new budget: the
		 * static tree is drafted whole, but tests past the budget emit
		 * nothing (Yin et al.'s rejection count is over emitted positions). */
		int budget = cfg->max_new - n_out; /* >= 1 here */
		bool cut = res.n_path > budget;    /* path + final exceed the budget */
		int n_acc = cut ? budget : res.n_path - 1;
		/* absent nodes (-1: a SpecDec++ cut or a child with no candidate
		 * left in q) were not proposed */
		for (int u = 1; u < n; u++)
			st->n_drafted += S.tok[u] >= 0;
		st->n_accepted += (uint64_t)n_acc;
		st->n_rejections += !cut && t->n_children[res.path[res.n_path - 1]] > 0;
		/* per depth: a node at depth d+1 was tried when the walk reached depth d */
		for (int d = 0; d < res.n_path && d < RT_MAX_GAMMA && d < budget; d++) {
			int u = res.path[d];
			if (t->n_children[u] == 0)
				break;
			st->pos_tried[d]++;
			if (d + 1 < res.n_path)
				st->pos_accepted[d]++;
			int ra = res.accepted_sibling[d];
			int tried = ra >= 0 ? ra + 1 : t->n_children[u];
			for (int r = 0; r < tried && r < 8; r++)
				st->rank_tried[r]++;
			if (ra >= 0 && ra < 8)
				st->rank_accepted[ra]++;
		}
		int32_t emitted[RT_TREE_MAX_DEPTH + 2];
		for (int i = 1; i < res.n_path; i++)
			emitted[i - 1] = S.tok[res.path[i]];
		emitted[res.n_path - 1] = res.final;
		stop = rt_loop_emit(cfg, emitted, res.n_path, out, &n_out, L.hist, &L.n_hist, st);
	}
	rc = n_out;
	st->t_total = sw_now_s() - t0 + st->t_prefill;
out:
	rt_ctx_free(S.dc);
	free(S.dlogits);
	free(S.fscratch);
	free(S.iscratch);
	free(S.tok);
	free(S.pos);
	free(S.dmask);
	free(p);
	rt_loop_free(&L);
	return rc;
}

int rt_generate_tree(rt_ctx *tc, const rt_model *draft, const rt_tree_cfg *tcfg, const int32_t *prompt,
                     int n_prompt, const rt_gen_cfg *cfg, int32_t *out, rt_stats *st, sw_err *err)
{
	return generate_tree(tc, draft, NULL, tcfg, prompt, n_prompt, cfg, out, st, err);
}

int rt_generate_tree_drafter(rt_ctx *tc, rt_drafter *d, const rt_tree_cfg *tcfg, const int32_t *prompt,
                             int n_prompt, const rt_gen_cfg *cfg, int32_t *out, rt_stats *st, sw_err *err)
{
	if (!rt_drafter_drafts_trees(d))
		return sw_errf(err, SW_EINVAL, "tree decoding: drafter '%s' drafts chains only (expected a draft model, a block drafter or an EAGLE-3 head)",
		               d ? d->name : "(none)");
	return generate_tree(tc, NULL, d, tcfg, prompt, n_prompt, cfg, out, st, err);
}

int rt_generate_tree_block(rt_ctx *tc, rt_drafter *block, const rt_tree_cfg *tcfg, const int32_t *prompt,
                           int n_prompt, const rt_gen_cfg *cfg, int32_t *out, rt_stats *st, sw_err *err)
{
	if (!rt_drafter_is_block(block))
		return sw_errf(err, SW_EINVAL, "tree decoding: drafter '%s' is not a block drafter", block ? block->name : "(none)");
	return generate_tree(tc, NULL, block, tcfg, prompt, n_prompt, cfg, out, st, err);
}
