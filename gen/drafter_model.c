/* Draft models in the planner (gen/drafter.h): a model of its own ("model":
 * its weights, the target's block) or the target's first layers
 * ("layerskip": the target's weights, a cache of its own). The draft's
 * cache takes the prefill chunk; each iteration a catch-up phase
 * re-forwards the last committed token (the draft never forwards a
 * depth-D leaf), then one phase per tree level forwards the level's nodes
 * under the ancestor mask, takes q at the draft temperature and expands
 * the level; kv_commit keeps the accepted path's rows. A chain may stop
 * early (SpecDec++, "adaptive": the adapt kernel after each level, later
 * levels as conditional phases). */
#include "drafter.h"
#include "kernels/engine_state.h"

typedef struct model_x {
	model_ix dm;                /* the draft's forward and cache */
	int adapt_go, adapt_cum;    /* SpecDec++: adapt_go[d]: draft level d + 1 runs;
	                             * adapt_cum: the running product of predicted
	                             * acceptances */
} model_x;

static void model_shapes(ctx *c)
{
	c->p->draft_cfg = c->s->draft.cfg;
}

/* the target's shapes, its first layers, the vocabulary limit "@V" */
static void layerskip_shapes(ctx *c)
{
	rt_config *dc = &c->p->draft_cfg;
	*dc = c->s->target.cfg;
	dc->n_layers = c->s->n_skip_layers;
	dc->vocab = c->s->draft_vocab;
}

/* own: the draft model's weights; else the target's (its buffers' shapes
 * are the target's: a layer-skip draft's cache has the target's width) */
static int draft_weights(ctx *c, const model_ix *tm, bool own)
{
	model_x *x = c->draft;
	const rt_config *dc = &c->p->draft_cfg;
	int rc = gp_model_bufs(c, &x->dm, "draft", own ? dc : &c->s->target.cfg, dc->n_layers, own,
	                       tm);
	if (rc)
		return rc;
	x->dm.cfg = dc;
	x->dm.vocab_out = c->s->draft_vocab;
	return 0;
}

static int model_weights(ctx *c, const model_ix *tm)
{
	return draft_weights(c, tm, true);
}

static int layerskip_weights(ctx *c, const model_ix *tm)
{
	return draft_weights(c, tm, false);
}

/* the attention of its prefill chunk and of each draft level */
static void model_extents(ctx *c, int64_t dim, gp_extents *e)
{
	const model_x *x = c->draft;
	const gen_spec *s = c->s;
	const rt_tree *t = &s->tree;
	const rt_config *dc = &c->p->draft_cfg;
	const attn_shape pre = gp_attn_choose(dc, s->prefill_chunk, s->prefill_chunk, s, c->dt16,
	                                      false, x->dm.ctx_rows);
	gp_attn_partials(&pre, dc, e);
	for (int d = 0; d < t->depth_max; d++) {
		const attn_shape sh = gp_attn_choose(dc, t->level_start[d + 1] - t->level_start[d],
		                                     t->level_start[d + 1], s, c->dt16, true,
		                                     x->dm.ctx_rows);
		gp_attn_partials(&sh, dc, e);
	}
}

static int model_buffers(ctx *c)
{
	act_ix *a = &c->a;
	const int n = c->s->tree.n, Vd = c->s->draft_vocab;
	return gp_buf(c, &a->draft_logits, "draft_logits", "activation", "f32", 2, n, Vd) ||
	       gp_buf(c, &a->draft_probs, "draft_probs", "activation", "f32", 2, n, Vd) ? SW_ENOMEM : 0;
}

static int model_state(ctx *c)
{
	model_x *x = c->draft;
	if (!c->s->adaptive)
		return 0;
	return gp_buf(c, &x->adapt_go, "adapt_go", "state", "i32", 1, c->s->tree.depth_max, 0) ||
	       gp_buf(c, &x->adapt_cum, "adapt_cum", "state", "f32", 1, 1, 0) ? SW_ENOMEM : 0;
}

/* rows rows of the draft from row0 (a prefill chunk, a catch-up row or a
 * tree level), the LM head over the last lm_rows */
static void draft_forward(ctx *c, int mode, int64_t rows, int64_t row0, int lm_rows)
{
	model_x *x = c->draft;
	const fwd_opt o = {.mode = mode, .rows = rows, .row0 = row0, .lm_rows = lm_rows,
	                   .logits_buf = c->a.draft_logits,
	                   .logits_off = row0 * c->s->draft_vocab * 4, .layers = "draft"};
	gp_forward(c, &x->dm, &o);
}

static void model_prefill(ctx *c)
{
	draft_forward(c, FWD_PREFILL, c->s->prefill_chunk, 0, 0);
}

/* catch-up: the draft never forwards a depth-D leaf, so the last committed
 * token is re-forwarded at position TLEN-1 each iteration (its K/V
 * rewritten in place when the draft already had it): one fixed-shape row
 * instead of a data-dependent branch. */
static void model_draft(ctx *c)
{
	gp_phase_begin(c, "draft_catchup", 1);
	gp_op_step(c, "catchup_prep", 1, false);
	draft_forward(c, FWD_PREFILL, 1, 0, 0);
	gp_phase_end(c);
}

static int model_levels(const gen_spec *s)
{
	return s->tree.depth_max;
}

static void model_draft_level(ctx *c, int d)
{
	const model_x *x = c->draft;
	const gen_spec *s = c->s;
	const rt_tree *t = &s->tree;
	const act_ix *a = &c->a;
	const int l0 = t->level_start[d], nd = t->level_start[d + 1] - l0;
	if (s->adaptive && d > 0) /* SpecDec++: a conditional region */
		gp_phase_gate(c, x->adapt_go, d - 1);
	if (d == 0) /* root token, node positions, draft length */
		gp_op_step(c, "tree_prep", 0, false);
	draft_forward(c, FWD_TREE, nd, l0, nd);
	/* q: the draft's distribution the children are drawn from and the
	 * verifier divides by, softmax(z / T) without top-k/top-p (full
	 * support: tree_spec.c's rt_probs call); its temperature is the
	 * sampling buffer's draft block (the runtime writes the request's T, or
	 * a positive one for greedy requests: engine.c) */
	gp_op_logits(c, "draft_probs", s->draft_vocab, nd,
	             A(a->draft_probs, (int64_t)l0 * s->draft_vocab * 4),
	             A(a->draft_logits, (int64_t)l0 * s->draft_vocab * 4),
	             A(a->sampling, 4 * RT_SP_DRAFT));
	gp_op_expand(c, d, s->draft_vocab, c->rule, false, a->draft_probs, -1);
	if (s->adaptive && d + 1 < t->depth_max) {
		/* decide whether level d + 1 runs; marks undrafted nodes -1 */
		gen_param ap[] = {PNAME, PI("LEVEL", d), PI("N_NODES", t->n),
		                  PI("DEPTH", t->depth_max), PI("V", s->draft_vocab),
		                  PI("MIN_STEPS", s->adapt_min), PI("MAX_STEPS", s->adapt_max),
		                  PF("H", s->adapt_h), PI("BLOCK", BLK_STEP)};
		op_desc ad = {.name = "adapt", .op = "adapt", .exec = GEN_EXEC_KERNEL,
		              .kernel = gp_kernel(c, "adapt", "adapt.cu.tmpl", ap, 9), .gx = 1,
		              .block = BLK_STEP, .n_args = 5,
		              .args = {A(x->adapt_go, 0), A(x->adapt_cum, 0), A(a->tree_tokens, 0),
		                       A(a->draft_probs, 0), A(a->tree_table, 0)},
		              .bytes = (double)s->draft_vocab * 4 + t->n * 4.0, .flops = 0};
		gp_emit(c, &ad);
	}
}

/* a draft head over the first VQ ids (layerskip "@V", or a draft model whose
 * vocabulary is a prefix of the target's): q rows of VQ entries, q = 0
 * beyond */
static gp_q model_accept_q(ctx *c)
{
	return (gp_q){.buf = c->a.draft_probs, .vq = c->s->draft_vocab, .by_depth = false};
}

static void model_commit(ctx *c)
{
	const model_x *x = c->draft;
	gp_op_kv_commit(c, &x->dm, 1);
}

static void model_echo(const gen_plan *p, FILE *f)
{
	fprintf(f, ", ");
	gp_write_src(f, p->spec->draft.from_shape, p->spec->draft.path, p->draft_digest);
}

static void layerskip_echo(const gen_plan *p, FILE *f)
{
	const gen_spec *s = p->spec;
	fprintf(f, ", \"layers\": [");
	for (int i = 0; i < s->n_skip_layers; i++)
		fprintf(f, "%s%d", i ? ", " : "", s->skip_layers[i]);
	fprintf(f, "], \"vocab\": %d", s->draft_vocab);
}

const gen_drafter gen_drafter_model = {
	.name = "model",
	.state_bytes = sizeof(model_x),
	.shapes = model_shapes,
	.weights = model_weights,
	.extents = model_extents,
	.buffers = model_buffers,
	.state = model_state,
	.taps = NULL,
	.prefill = model_prefill,
	.draft = model_draft,
	.levels = model_levels,
	.draft_level = model_draft_level,
	.verify = NULL,
	.accept_q = model_accept_q,
	.commit = model_commit,
	.echo = model_echo,
};

const gen_drafter gen_drafter_layerskip = {
	.name = "layerskip",
	.state_bytes = sizeof(model_x),
	.shapes = layerskip_shapes,
	.weights = layerskip_weights,
	.extents = model_extents,
	.buffers = model_buffers,
	.state = model_state,
	.taps = NULL,
	.prefill = model_prefill,
	.draft = model_draft,
	.levels = model_levels,
	.draft_level = model_draft_level,
	.verify = NULL,
	.accept_q = model_accept_q,
	.commit = model_commit,
	.echo = layerskip_echo,
};
