/* The planner's phase skeleton (gen/plan.h gen_plan_build): the buffers and
 * phases every engine has, in their order; the spec's drafter (gen/drafter.h,
 * by the registry gen/drafters.h) fills in its own. The op helpers both use
 * are gen/plan.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tree_rules.h"
#include "drafter.h"
#include "kernels/engine_state.h"
#include "kernels/verify_layout.h"
#include "plan.h"
#include "plan_int.h"

/* The engine's buffers in arena order: the target's weights and cache,
 * the drafter's, the activations sized for the widest model (the draft's
 * shapes are 0s without one) and the most rows, the drafter's activations,
 * the state words, the drafter's. SW_ENOMEM, or 0. */
static int plan_buffers(ctx *c, const gen_drafter *dr, model_ix *tm)
{
	const gen_spec *s = c->s;
	const rt_tree *t = &s->tree;
	const rt_config *tc = &s->target.cfg, *dc = &c->p->draft_cfg;
	act_ix *a = &c->a;

	if (gp_model_bufs(c, tm, "target", tc, tc->n_layers, true, NULL))
		return SW_ENOMEM;
	tm->vocab_out = tc->vocab;
	if (dr->weights && dr->weights(c, tm))
		return SW_ENOMEM;

	const int64_t D = gp_max64(tc->dim, dc->dim), F = gp_max64(tc->ffn_dim, dc->ffn_dim);
	const int64_t QD = gp_max64((int64_t)tc->n_heads * tc->head_dim,
	                            (int64_t)dc->n_heads * dc->head_dim);
	const int64_t KVD = gp_max64((int64_t)tc->n_kv_heads * tc->head_dim,
	                             (int64_t)dc->n_kv_heads * dc->head_dim);
	/* tree attention partials: the largest (splits x T x heads) of the
	 * prefill chunk, the verify tree and the drafter's shapes */
	gp_extents e = {0};
	{
		const attn_shape pre = gp_attn_choose(tc, s->prefill_chunk, s->prefill_chunk, s, c->dt16,
		                                      false, tm->ctx_rows);
		const attn_shape tree = gp_attn_choose(tc, t->n, t->n, s, c->dt16, true, tm->ctx_rows);
		gp_attn_partials(&pre, tc, &e);
		gp_attn_partials(&tree, tc, &e);
	}
	if (dr->extents)
		dr->extents(c, D, &e);
	const int64_t rows = c->rows = gp_max64(gp_max64(s->prefill_chunk, t->n), e.rows);
	const char *wdt = gen_dtype_name(gen_dtype_act(s->dtype));
#define ACT(field, kind, dt, rank, d0, d1)                                                   \
	do {                                                                                 \
		if (gp_buf(c, &a->field, #field, kind, dt, rank, d0, d1))                    \
			return SW_ENOMEM;                                                    \
	} while (0)
	ACT(h, "activation", "f32", 2, rows, D);
	ACT(delta, "activation", "f32", 2, rows, D);
	ACT(xn, "activation", "f32", 2, rows, D);
	ACT(x16, "activation", wdt, 2, rows, gp_max64(gp_max64(D, gp_max64(F, QD)), e.x16));
	ACT(q, "activation", "f32", 2, rows, QD);
	ACT(q16, "activation", wdt, 2, rows, QD);
	ACT(k, "activation", "f32", 2, rows, KVD);
	ACT(v, "activation", "f32", 2, rows, KVD);
	ACT(attn, "activation", wdt, 2, rows, QD);
	ACT(part_o, "activation", "f32", 1, e.part_o, 0);
	ACT(part_ml, "activation", "f32", 1, e.part_ml, 0);
	ACT(gate, "activation", "f32", 2, rows, F);
	ACT(up, "activation", "f32", 2, rows, F);
	/* one GEMM's q|k|v rows, gate|up rows (fused weights: gp_model_layers) */
	if (tm->wqkv >= 0)
		ACT(qkv, "activation", "f32", 2, rows, QD + 2 * KVD);
	if (tm->w_gate_up >= 0)
		ACT(gu, "activation", "f32", 2, rows, 2 * F);
	if (s->dtype == GEN_DTYPE_GGUF_A8) /* quant_a8's (rows, width) int8 + 8 bytes a 32 */
		ACT(a8, "activation", "i32", 1,
		    rows * gp_max64(gp_max64(D, gp_max64(F, QD)), e.x16) * 5 / 16, 0);
	ACT(pos, "activation", "i32", 1, rows, 0);
	ACT(tokens, "activation", "i32", 1, s->prefill_chunk, 0);
	ACT(logits, "activation", "f32", 2, t->n, tc->vocab);
	ACT(probs, "activation", "f32", 2, t->n, tc->vocab);
	if (dr->buffers && dr->buffers(c))
		return SW_ENOMEM;
	ACT(tree_tokens, "state", "i32", 1, t->n, 0);
	/* the tree for expansion and verification: parent, n_children,
	 * child_start, child_list, depth (5 x nodes), shapes.tree in engine.json;
	 * the runtime uploads it once */
	ACT(tree_table, "const", "i32", 2, 5, t->n);
	ACT(accept_path, "state", "i32", 1, t->n, 0);
	ACT(emitted, "state", "i32", 1, t->n, 0);
	ACT(counts, "state", "i32", 1, 5, 0);
	ACT(verify_scratch, "activation", "f32", 1,
	    sw_verify_scratch_words(t->n, tc->vocab, BLK_VERIFY,
	                            sw_verify_slices(t->n, tc->vocab, BLK_VERIFY, s->verify_method),
	                            s->verify_method), 0);
	ACT(kv_done, "state", "i32", 1, 2, 0);
	ACT(iter, "state", "i32", 1, 1, 0);
	ACT(state, "state", "i32", 1, RT_ST_WORDS + RING, 0);
	/* per-request sampling values the graph reads (engine_state.h) */
	ACT(sampling, "state", "i32", 1, RT_SP_WORDS, 0);
	ACT(err, "state", "i32", 1, 1, 0);
#undef ACT
	return dr->state && dr->state(c) ? SW_ENOMEM : 0;
}

/* The phase skeleton: prefill, the drafter's phases and one per draft
 * level, verify, accept, commit; the drafter (gen/drafter.h) fills in its
 * buffers and its share of each phase. */
int gen_plan_build(const gen_spec *s, gen_plan *p, sw_err *err)
{
	const gen_drafter *dr = gen_drafter_of(s->draft_kind);
	ctx c = {.p = p, .s = s, .dt16 = gen_dtype_size(s->dtype),
	         .cast_mode = gen_dtype_act(s->dtype) == GEN_DTYPE_FP16 ? 1 : 0};
	const rt_tree *t = &s->tree;
	const rt_config *tc = &s->target.cfg;
	act_ix *a = &c.a;
	model_ix tm;

	if (!dr)
		return sw_errf(err, SW_EINVAL, "%s: draft kind %d: no planner for it", s->file,
		               s->draft_kind);
	memset(p, 0, sizeof(*p));
	p->spec = s;
	p->drafter = dr;
	a->draft_logits = a->draft_probs = a->taps = a->q_tgt = -1;
	a->ngram_hist = a->ngram_info = a->ctrl = a->ctrl_cost = -1;
	a->a8 = a->qkv = a->gu = -1;
	/* The engine serves a verification family, not one temperature (the
	 * sampling values are run-time words): greedy verification drafts by
	 * top-k (T = 0 only); RRS, RRSW and SpecHub draw the children by their
	 * own rule at every temperature (exact only so); one-hot verification
	 * is exact for any independent drafts, so a spec at temperature 0 keeps
	 * top-k drafting for it, as the host decoder (tree_spec.c) does. */
	const bool sampled_rule = s->verify_method == RT_VERIFY_RRS ||
	                          s->verify_method == RT_VERIFY_RRSW ||
	                          s->verify_method == RT_VERIFY_SPECHUB;
	c.rule = sampled_rule || s->temperature > 0.0f ? s->expand_rule : RT_EXPAND_TOPK;
	if (!(c.draft = calloc(1, dr->state_bytes ? dr->state_bytes : 1)))
		goto out_nomem;
	if (dr->shapes)
		dr->shapes(&c);
	if (plan_buffers(&c, dr, &tm))
		goto out_nomem;

	/* phase: prefill chunk (the target, with its taps; then the draft's
	 * cache). The prompt's LAST token is not prefilled: it is the first
	 * iteration's root, so prefill needs no logits and a partial last chunk
	 * only pads rows after the real ones (their K/V land past the length
	 * and are overwritten later). */
	const int *taps = NULL;
	const int n_taps = dr->taps ? dr->taps(s, &taps) : 0;
	gp_phase_begin(&c, "prefill", s->prefill_chunk);
	{
		const fwd_opt o = {.mode = FWD_PREFILL, .rows = s->prefill_chunk, .logits_buf = a->logits,
		                   .layers = "target", .n_taps = n_taps, .taps = taps};
		gp_forward(&c, &tm, &o);
	}
	if (dr->prefill)
		dr->prefill(&c);
	gp_phase_end(&c);

	/* phases: the drafter's, then one per draft level */
	if (dr->draft)
		dr->draft(&c);
	const int levels = dr->levels ? dr->levels(s) : 0;
	for (int d = 0; d < levels; d++) {
		char nm[32];
		snprintf(nm, sizeof(nm), "draft_%d", d);
		gp_phase_begin(&c, nm, t->level_start[d + 1] - t->level_start[d]);
		dr->draft_level(&c, d);
		gp_phase_end(&c);
	}

	/* phase: verify (the target's forward over the whole tree, with its
	 * taps) */
	gp_phase_begin(&c, "verify", t->n);
	{
		const fwd_opt o = {.mode = FWD_TREE, .rows = t->n, .lm_rows = t->n,
		                   .logits_buf = a->logits, .layers = "target", .n_taps = n_taps,
		                   .taps = taps};
		gp_forward(&c, &tm, &o);
	}
	gp_op_logits(&c, "target_probs", tc->vocab, t->n, A(a->probs, 0), A(a->logits, 0),
	             A(a->sampling, 4 * RT_SP_TEMP));
	if (dr->verify)
		dr->verify(&c);
	gp_phase_end(&c);

	/* phase: accept (fused verification: a block per unit and vocabulary
	 * slice, the units a node each and for the tree methods a child-list
	 * entry each; the last block walks), then the iteration's end: ring,
	 * stop conditions, next root, the n-gram history where there is one;
	 * it zeroes the commit count once stopped */
	gp_phase_begin(&c, "accept", t->n);
	{
		const gp_q q = dr->accept_q ? dr->accept_q(&c) : (gp_q){a->probs, tc->vocab, false};
		gp_op_accept(&c, q.buf, q.vq, q.by_depth);
	}
	gp_op_step(&c, "iter_end", 2, a->ngram_hist >= 0);
	gp_phase_end(&c);

	/* phase: commit (the accepted path's K/V compacted in place in each
	 * cache, lengths advanced by counts[1] = path nodes) */
	gp_phase_begin(&c, "commit", t->depth_max + 1);
	gp_op_kv_commit(&c, &tm, 0);
	if (dr->commit)
		dr->commit(&c);
	gp_phase_end(&c);
	p->n_phases = c.ph;
	/* in every engine, launched by no op: --random-weights fills the weight
	 * buffers with it (runtime/engine/random_weights.c) */
	{
		gen_param prm[] = {PNAME, PI("BLOCK", 256)};
		gp_kernel_x(&c, "fill_random", "fill_random.cu.tmpl", prm, 2, GEN_PREFIX_PHILOX, false,
		            NULL);
	}
	if (c.rc)
		goto out_nomem;
	free(c.draft);
	return 0;
out_nomem:
	free(c.draft);
	gen_plan_free(p);
	if (c.rc == SW_ENOTSUP) /* the spec asks for what the plan cannot do ($.gemm) */
		return sw_errf(err, SW_EINVAL, "%s: %s", s->file, c.why);
	if (c.rc == SW_EINVAL) /* the planner's own mistake: a bug, said as one */
		return sw_errf(err, SW_EINVAL, "%s: the planner emitted an invalid op: %s", s->file, c.why);
	return sw_errf(err, SW_ENOMEM, "%s: out of memory planning", s->file);
}
