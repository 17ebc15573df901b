/* The n-gram drafter in the planner (gen/drafter.h): no draft network. A
 * phase draft_ngram after tree_prep looks the context's last tokens up in
 * the history (ngram_lookup over ngram_hist, which iter_end keeps) and
 * drafts the continuation as a chain, the tree's nodes 1 .. n - 1; the
 * draft-length controller (gen/plan_ctrl.h, ALGORITHMS.txt 12) keeps its
 * first k. Verification is greedy or one-hot (no draft distribution). The
 * lookup and controller are also an EAGLE-3 head's with "ngram"
 * (drafter_eagle3.c). */
#include "core/tree_rules.h"
#include "drafter.h"
#include "kernels/engine_state.h"
#include "plan_ctrl.h"

/* test_kern_ngram_lookup and test_kern_draft_ctrl compile them without spills */
enum { BLK_NGRAM = 128, BLK_CTRL = 32 };

int gp_ngram_history(ctx *c)
{
	act_ix *a = &c->a;
	return gp_buf(c, &a->ngram_hist, "ngram_hist", "state", "i32", 1, c->s->max_context, 0) ||
	       gp_buf(c, &a->ngram_info, "ngram_info", "state", "i32", 1, 2, 0) ? SW_ENOMEM : 0;
}

/* The controller's per-request words and its cost table: an iteration
 * drafting 0 .. n - 1 tokens, and 1 .. head levels of an EAGLE-3 head. */
int gp_ngram_control(ctx *c)
{
	const gen_spec *s = c->s;
	const rt_tree *t = &s->tree;
	act_ix *a = &c->a;
	if (!s->ctrl.on)
		return 0;
	return gp_buf(c, &a->ctrl, "ctrl", "state", "i32", 1,
	              gen_ctrl_words(t->n - 1, s->ngram_min, s->ngram_max, s->ctrl.head), 0) ||
	       gp_buf(c, &a->ctrl_cost, "ctrl_cost", "state", "i32", 1, t->n + s->ctrl.head, 0)
	       ? SW_ENOMEM : 0;
}

/* ngram_lookup over the history into tree_tokens[1 ..], its signal into
 * ngram_info, then (a controller) draft_ctrl keeping the first k. */
void gp_op_ngram_draft(ctx *c)
{
	const gen_spec *s = c->s;
	const act_ix *a = &c->a;
	const rt_tree *t = &s->tree;
	gen_param prm[] = {PNAME, PI("MIN_N", s->ngram_min), PI("MAX_N", s->ngram_max),
	                   PI("N_DRAFT", t->n - 1), PI("MAX_CTX", s->max_context),
	                   PI("BLOCK", BLK_NGRAM)};
	op_desc od = {.name = "ngram_lookup", .op = "ngram_lookup", .exec = GEN_EXEC_KERNEL,
	              .kernel = gp_kernel(c, "ngram", "ngram_lookup.cu.tmpl", prm, 6), .gx = 1,
	              .block = BLK_NGRAM, .n_args = 4,
	              .args = {A(a->tree_tokens, 4), A(a->ngram_hist, 0), A(a->state, 0),
	                       A(a->ngram_info, 0)},
	              .bytes = (double)s->est_context * 4,
	              .flops = (double)s->est_context * s->ngram_max};
	gp_emit(c, &od);
	if (a->ctrl < 0)
		return;
	gen_param cp[GEN_KERNEL_MAX_PARAMS];
	const int np = gen_ctrl_params(&s->ctrl, t->n - 1, s->ngram_min, s->ngram_max, BLK_CTRL, cp,
	                               GEN_KERNEL_MAX_PARAMS);
	op_desc cd = {.name = "draft_ctrl", .op = "draft_ctrl", .exec = GEN_EXEC_KERNEL,
	              .kernel = gp_kernel(c, "draft_ctrl", "draft_ctrl.cu.tmpl", cp, np), .gx = 1,
	              .block = BLK_CTRL, .n_args = 5,
	              .args = {A(a->ctrl, 0), A(a->tree_tokens, 4), A(a->ngram_info, 0),
	                       A(a->state, 0), A(a->ctrl_cost, 0)},
	              .bytes = 4.0 * (gen_ctrl_words(t->n - 1, s->ngram_min, s->ngram_max, s->ctrl.head) +
	                              2 * t->n + 8), .flops = 0};
	gp_emit(c, &cd);
}

static int ngram_state(ctx *c)
{
	int rc = gp_ngram_history(c);
	return rc ? rc : gp_ngram_control(c);
}

static void ngram_draft(ctx *c)
{
	gp_phase_begin(c, "draft_ngram", c->s->tree.n - 1);
	gp_op_step(c, "tree_prep", 0, false);
	gp_op_ngram_draft(c);
	gp_phase_end(c);
}

const gen_drafter gen_drafter_ngram = {
	.name = "ngram",
	.state_bytes = 0,
	.shapes = NULL,
	.weights = NULL,
	.extents = NULL,
	.buffers = NULL,
	.state = ngram_state,
	.taps = NULL,
	.prefill = NULL,
	.draft = ngram_draft,
	.levels = NULL,
	.draft_level = NULL,
	.verify = NULL,
	.accept_q = NULL,
	.commit = NULL,
	.echo = NULL,
};
