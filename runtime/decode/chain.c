/* Target-only and chain speculative decoding on the host (see chain.h). The
 * acceptance rule is ALGORITHMS.txt 1a: accept x ~ q with probability
 * min(1, p(x)/q(x)) (reject when q(x) == 0), else emit a token from
 * norm(relu(p - q)); after g acceptances emit a bonus token from p_{g+1}.
 * Greedy (T = 0) is 1b: accept iff x == argmax p. */
#include "chain.h"

#include <stdlib.h>
#include <string.h>

#include "core/timing.h"
#include "kernels/philox.h"
#include "loop.h"
#include "tree_verify.h"

int rt_verify_chain(const float *logits, const rt_sampling *s, const float *q, const int32_t *xd,
                    int g, int V, uint64_t seed, uint32_t iter, int32_t *final, float *p, float *tmp,
                    int *idx)
{
	bool greedy = rt_sampling_greedy(s);
	for (int j = 0; j < g; j++) {
		const float *lj = logits + (size_t)j * V;
		if (greedy) {
			int a = rt_argmax(lj, V);
			if (xd[j] == a)
				continue;
			*final = a;
			return j;
		}
		rt_probs(p, lj, V, s, idx);
		float px = p[xd[j]];
		float qx = q ? q[(size_t)j * V + xd[j]] : 1.0f;
		double u = sw_uniform_double(seed, iter, (uint32_t)j, SW_RNG_ACCEPT);
		/* u <= p/q as u*q <= p: no division, and q == 0 rejects unless p == 0
		 * too (then u*0 <= 0 would accept a token the draft cannot produce;
		 * guard it explicitly). */
		if (qx > 0.0f && u * qx <= px)
			continue;
		double ur = sw_uniform_double(seed, iter, (uint32_t)j, SW_RNG_RESIDUAL);
		*final = rt_sample_residual(p, q ? q + (size_t)j * V : NULL, xd[j], V, ur, tmp);
		return j;
	}
	const float *lb = logits + (size_t)g * V;
	if (greedy) {
		*final = rt_argmax(lb, V);
	} else {
		rt_probs(p, lb, V, s, idx);
		*final = rt_sample_cdf(p, V, sw_uniform_double(seed, iter, (uint32_t)g, SW_RNG_BONUS));
	}
	return g;
}

/* Emits tokens: appends to out/hist, stops at max_new or end-of-generation,
 * streams through the callback. Returns true when generation must stop. */
bool rt_loop_emit(const rt_gen_cfg *cfg, const int32_t *tok, int n, int32_t *out, int *n_out,
                 int32_t *hist, int *n_hist, rt_stats *st)
{
	bool stop = false;
	int k = 0;
	for (; k < n && *n_out < cfg->max_new; k++) {
		out[(*n_out)++] = tok[k];
		hist[(*n_hist)++] = tok[k];
		if (cfg->is_eog && cfg->is_eog(cfg->eog_user, tok[k])) {
			st->stopped_eos = true;
			stop = true;
			k++;
			break;
		}
	}
	st->n_tokens += (uint64_t)k;
	if (cfg->on_tokens && k > 0 && cfg->on_tokens(cfg->cb_user, tok, k))
		stop = true;
	return stop || *n_out >= cfg->max_new;
}

void rt_loop_free(struct rt_loop *L)
{
	free(L->hist);
	free(L->logits);
	free(L->q);
	free(L->p);
	free(L->tmp);
	free(L->idx);
}

int rt_loop_init(struct rt_loop *L, rt_ctx *tc, const int32_t *prompt, int n_prompt,
                     const rt_gen_cfg *cfg, int gamma, rt_stats *st, sw_err *err)
{
	int V = tc->m->cfg.vocab;
	memset(L, 0, sizeof(*L));
	memset(st, 0, sizeof(*st));
	st->n_prompt = n_prompt;
	if (n_prompt < 1)
		return sw_errf(err, SW_EINVAL, "generate: empty prompt (at least one token is needed)");
	if (tc->len != 0)
		return sw_errf(err, SW_EINVAL, "generate: the target context is not empty");
	if (n_prompt >= tc->max_ctx)
		return sw_errf(err, SW_ERANGE, "generate: prompt of %d tokens does not fit the context of %d (it needs at least one free position)",
		               n_prompt, tc->max_ctx);
	if (cfg->max_new < 0)
		return sw_errf(err, SW_EINVAL, "generate: max_new %d is negative", cfg->max_new);
	if (gamma < 0 || gamma + 1 > tc->max_block)
		return sw_errf(err, SW_ERANGE, "generate: %d draft tokens per iteration, the target context's blocks hold at most %d",
		               gamma, tc->max_block - 1);
	for (int i = 0; i < n_prompt; i++)
		if (prompt[i] < 0 || prompt[i] >= V)
			return sw_errf(err, SW_EINVAL, "generate: prompt token %d at index %d outside the vocabulary [0, %d)",
			               prompt[i], i, V);
	L->hist = malloc((size_t)(tc->max_ctx + gamma + 1) * sizeof(*L->hist));
	L->logits = malloc((size_t)(gamma + 1) * V * sizeof(float));
	L->q = malloc((size_t)(gamma + 1) * V * sizeof(float));
	L->p = malloc((size_t)V * sizeof(float));
	L->tmp = malloc((size_t)V * sizeof(float));
	L->idx = malloc((size_t)V * sizeof(int));
	if (!L->hist || !L->logits || !L->q || !L->p || !L->tmp || !L->idx) {
		rt_loop_free(L);
		return sw_errf(err, SW_ENOMEM, "generate: out of memory");
	}
	memcpy(L->hist, prompt, (size_t)n_prompt * sizeof(*prompt));
	L->n_hist = n_prompt;
	/* Prefill: everything but the last prompt token, which becomes the first
	 * token of the first verification block. */
	double t0 = sw_now_s();
	if (n_prompt > 1) {
		int rc = rt_ctx_feed(tc, prompt, n_prompt - 1, NULL, err);
		if (rc) {
			rt_loop_free(L);
			return rc;
		}
	}
	st->t_prefill = sw_now_s() - t0;
	return 0;
}

int rt_generate_target(rt_ctx *tc, const int32_t *prompt, int n_prompt, const rt_gen_cfg *cfg,
                       int32_t *out, rt_stats *st, sw_err *err)
{
	struct rt_loop L;
	int V = tc->m->cfg.vocab;
	int rc = rt_loop_init(&L, tc, prompt, n_prompt, cfg, 0, st, err);
	if (rc)
		return rc;
	double t0 = sw_now_s();
	int n_out = 0;
	bool stop = cfg->max_new == 0;
	for (uint32_t it = 0; !stop; it++) {
		if (tc->len + 1 > tc->max_ctx) {
			st->stopped_ctx = true;
			break;
		}
		int32_t tok = L.hist[L.n_hist - 1], pos = tc->len, keep = 0;
		double ta = sw_now_s();
		rc = rt_ctx_eval(tc, &tok, &pos, 1, NULL, L.logits, NULL, err);
		if (rc)
			goto out;
		rt_ctx_commit(tc, &keep, 1);
		st->t_target += sw_now_s() - ta;
		st->n_target_calls++;
		int32_t t;
		if (rt_sampling_greedy(&cfg->samp)) {
			t = rt_argmax(L.logits, V);
		} else {
			rt_probs(L.p, L.logits, V, &cfg->samp, L.idx);
			t = rt_sample_cdf(L.p, V, sw_uniform_double(cfg->seed, it, 0, SW_RNG_TARGET_SAMPLE));
		}
		st->n_iters++;
		stop = rt_loop_emit(cfg, &t, 1, out, &n_out, L.hist, &L.n_hist, st);
	}
	rc = n_out;
out:
	st->t_total = sw_now_s() - t0 + st->t_prefill;
	rt_loop_free(&L);
	return rc;
}

int rt_generate_spec(rt_ctx *tc, rt_drafter *d, const int32_t *prompt, int n_prompt,
                     const rt_gen_cfg *cfg, int32_t *out, rt_stats *st, sw_err *err)
{
	struct rt_loop L;
	int V = tc->m->cfg.vocab;
	if (cfg->gamma < 1 || cfg->gamma > RT_MAX_GAMMA)
		return sw_errf(err, SW_ERANGE, "speculative decoding: gamma %d, expected 1..%d", cfg->gamma, RT_MAX_GAMMA);
	int rc = rt_loop_init(&L, tc, prompt, n_prompt, cfg, cfg->gamma, st, err);
	if (rc)
		return rc;
	double t0 = sw_now_s();
	int n_out = 0;
	bool stop = cfg->max_new == 0;
	int32_t blk[RT_MAX_GAMMA + 1], pos[RT_MAX_GAMMA + 1], emitted[RT_MAX_GAMMA + 1];
	int keep[RT_MAX_GAMMA + 1];
	for (uint32_t it = 0; !stop; it++) {
		int room = tc->max_ctx - tc->len - 1; /* after the pending token */
		if (room < 0) {
			st->stopped_ctx = true;
			break;
		}
		int g = cfg->gamma < room ? cfg->gamma : room;
		/* Drafting past max_new is wasted work. */
		if (g > cfg->max_new - n_out)
			g = cfg->max_new - n_out;
		int nd = 0;
		if (g > 0) {
			double ta = sw_now_s();
			uint64_t f0 = d->n_forwards;
			nd = d->ops->propose(d, L.hist, L.n_hist, g, &cfg->samp, cfg->seed, it, blk + 1,
			                     d->deterministic ? NULL : L.q, err);
			if (nd < 0) {
				rc = nd;
				goto out;
			}
			st->n_draft_calls += d->n_forwards - f0;
			st->t_draft += sw_now_s() - ta;
			d->t_seconds += sw_now_s() - ta;
		}
		blk[0] = L.hist[L.n_hist - 1];
		for (int i = 0; i <= nd; i++)
			pos[i] = tc->len + i;
		double tb = sw_now_s();
		rc = rt_ctx_eval(tc, blk, pos, nd + 1, NULL, L.logits, NULL, err);
		if (rc)
			goto out;
		int32_t final;
		int n_acc;
		if (cfg->lossy_eps > 0.0f && !d->deterministic && !rt_sampling_greedy(&cfg->samp)) {
			n_acc = rt_verify_chain_lossy(L.logits, &cfg->samp, L.q, blk + 1, nd, V, cfg->lossy_eps, cfg->seed,
			                              it, &final, L.p, L.tmp, L.idx);
			/* bias bound of each tested position (the residual position included) */
			for (int j = 0; j <= n_acc && j < nd; j++) {
				rt_probs(L.p, L.logits + (size_t)j * V, V, &cfg->samp, L.idx);
				st->lossy_tv_sum += rt_lossy_tv_bound(L.p, L.q + (size_t)j * V, V, cfg->lossy_eps);
			}
		} else {
			n_acc = rt_verify_chain(L.logits, &cfg->samp, d->deterministic ? NULL : L.q, blk + 1, nd, V,
			                        cfg->seed, it, &final, L.p, L.tmp, L.idx);
		}
		st->n_rejections += n_acc < nd;
		for (int i = 0; i <= n_acc; i++)
			keep[i] = i;
		rt_ctx_commit(tc, keep, n_acc + 1);
		st->t_target += sw_now_s() - tb;
		st->n_target_calls++;
		st->n_iters++;
		st->n_drafted += (uint64_t)nd;
		st->n_accepted += (uint64_t)n_acc;
		for (int j = 0; j < nd && j <= n_acc; j++) {
			st->pos_tried[j]++;
			if (j < n_acc)
				st->pos_accepted[j]++;
		}
		memcpy(emitted, blk + 1, (size_t)n_acc * sizeof(*emitted));
		emitted[n_acc] = final;
		stop = rt_loop_emit(cfg, emitted, n_acc + 1, out, &n_out, L.hist, &L.n_hist, st);
	}
	rc = n_out;
out:
	st->t_total = sw_now_s() - t0 + st->t_prefill;
	rt_loop_free(&L);
	return rc;
}
