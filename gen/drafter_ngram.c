/* The n-gram drafter (gen/drafter.h): "$.draft" "ngram" or "ngram:MIN:MAX"
 * (the lookup's lengths, 1 to 3 by default); in the planner no draft network. A
 * phase draft_ngram after tree_prep looks the context's last tokens up in
 * the history (ngram_lookup over ngram_hist, which iter_end keeps) and
 * drafts the continuation as a chain, the tree's nodes 1 .. n - 1; the
 * draft-length controller (gen/plan_ctrl.h, ALGORITHMS.txt 12) keeps its
 * first k. Verification is greedy or one-hot (no draft distribution). The
 * lookup and controller are also an EAGLE-3 head's with "ngram"
 * (drafter_eagle3.c). */
#include <stdio.h>
#include <string.h>

#include "core/tree_rules.h"
#include "drafter.h"
#include "kernels/engine_state.h"
#include "plan_ctrl.h"

/* test_kern_ngram_lookup and test_kern_draft_ctrl compile them without spills */
enum { BLK_NGRAM = 128, BLK_CTRL = 32 };

/* -- the spec -- */

bool gen_ngram_range(const char *str, gen_spec *sp)
{
	char tail = 0;
	return sscanf(str, "%d:%d%c", &sp->ngram_min, &sp->ngram_max, &tail) == 2 &&
	       sp->ngram_min >= 1 && sp->ngram_max >= sp->ngram_min && sp->ngram_max <= 16;
}

/* "ngram" (lengths 1 to 3) or "ngram:MIN:MAX" */
static int ngram_parse(const gen_draft_in *in, gen_spec *sp, sw_err *err)
{
	sp->ngram_min = 1;
	sp->ngram_max = 3;
	if (in->method[5] == ':' && !gen_ngram_range(in->method + 6, sp))
		return json_refuse(err, in->mv, in->mp, "ngram or ngram:MIN:MAX with 1 <= MIN <= MAX <= 16",
		           "\"%s\"", in->method);
	sp->draft_vocab = 0;
	return 0;
}

/* the lookup drafts one continuation, and no distribution to verify by */
int gen_ngram_tree_check(const json_value *root, const gen_spec *sp, sw_err *err)
{
	for (int i = 0; i < sp->tree.n; i++)
		if (sp->tree.n_children[i] > 1)
			return json_refuse(err, json_get(root, "tree"), "$.tree", "a chain (ngram drafts one "
			         "continuation)", "\"%s\" (node %d has %d children)", sp->tree_spec, i,
			         sp->tree.n_children[i]);
	if (sp->verify_method != RT_VERIFY_GREEDY && sp->verify_method != RT_VERIFY_ONEHOT)
		return json_refuse(err, json_get(root, "verify"), "$.verify.method", "greedy or onehot "
		         "(ngram drafts have no draft distribution)", "\"%s\"",
		         json_get(json_get(root, "verify"), "method")->str);
	return 0;
}

/* -- the planner -- */

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

static const char *const ngram_methods[] = {"ngram", "ngram:MIN:MAX", NULL};

const gen_drafter gen_drafter_ngram = {
	.name = "ngram",
	.noun = "an n-gram draft",
	.methods = ngram_methods,
	.keys = NULL,
	.keys_why = NULL,
	.parse = ngram_parse,
	.tree_check = gen_ngram_tree_check,
	.prefill_min = 0,
	.prefill_why = NULL,
	.dtype_check = NULL,
	.adaptive = false,
	.embd_unscaled = false,
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
	.target_layers = false,
	.embd16 = NULL,
	.echo = NULL,
	.echo_spec = NULL,
	.files = NULL,
	.weights_open = NULL,
};
