/* Draft models (gen/drafter.h): a model of its own ("model:PATH", or
 * {"method": "model", "path" | "shape"}: its weights, the target's block; its
 * vocabulary the target's or a prefix of it) or the target's first layers
 * ("layerskip:LAYERS[@V]": the target's weights, a cache of its own). The draft's
 * cache takes the prefill chunk; each iteration a catch-up phase
 * re-forwards the last committed token (the draft never forwards a
 * depth-D leaf), then one phase per tree level forwards the level's nodes
 * under the ancestor mask, takes q at the draft temperature and expands
 * the level; kv_commit keeps the accepted path's rows. A chain may stop
 * early (SpecDec++, "adaptive": the adapt kernel after each level, later
 * levels as conditional phases). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drafter.h"
#include "kernels/engine_state.h"
#include "model/ctx.h"
#include "model/model_gguf.h"

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

/* {"method": "model", "path": FILE | "shape": {...}} back from the echo
 * (a "model:PATH" method too) */
static void model_echo_spec(const gen_echo_in *in, FILE *f)
{
	fputs("{\"method\": \"model\", ", f);
	if (in->dshape) {
		fputs("\"shape\": ", f);
		gen_put_shape(f, in->dshape);
	} else {
		fputs("\"path\": ", f);
		gen_put_str(f, in->dpath, strlen(in->dpath));
	}
	fputc('}', f);
}

static void layerskip_echo(const gen_plan *p, FILE *f)
{
	const gen_spec *s = p->spec;
	fprintf(f, ", \"layers\": [");
	for (int i = 0; i < s->n_skip_layers; i++)
		fprintf(f, "%s%d", i ? ", " : "", s->skip_layers[i]);
	fprintf(f, "], \"vocab\": %d", s->draft_vocab);
}

/* -- the spec -- */

/* "N" (first N layers) or "a-b,c,..." (increasing), optionally "@V". */
static int layerskip_list(const json_value *v, const char *path, const char *s, int n_layers,
                          int vocab, gen_spec *sp, sw_err *err)
{
	const char *at = strchr(s, '@');
	char list[256];
	size_t ln = at ? (size_t)(at - s) : strlen(s);
	int prev = -1;

	sp->n_skip_layers = 0;
	sp->draft_vocab = vocab;
	if (ln == 0 || ln >= sizeof(list))
		return json_refuse(err, v, path, "layerskip:N or layerskip:a-b,c,...[@V]", "\"layerskip:%s\"", s);
	memcpy(list, s, ln);
	list[ln] = 0;
	if (at) {
		char *e;
		long vl = strtol(at + 1, &e, 10);
		if (*e || e == at + 1 || vl < 2 || vl > vocab)
			return json_refuse(err, v, path, "a vocabulary limit @V with 2 <= V <= the target vocab",
			           "\"@%s\" (vocab %d)", at + 1, vocab);
		sp->draft_vocab = (int)vl;
	}
	if (!strpbrk(list, "-,")) {
		char *e;
		long k = strtol(list, &e, 10);
		if (*e || k < 1 || k >= n_layers)
			return json_refuse(err, v, path, "a layer count 1 <= N < the target's layers",
			           "\"%s\" (target has %d layers)", list, n_layers);
		for (int i = 0; i < k; i++)
			sp->skip_layers[sp->n_skip_layers++] = i;
		return 0;
	}
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		char *e;
		long a = strtol(tok, &e, 10), b = a;
		if (e == tok)
			goto out_bad;
		if (*e == '-') {
			char *f = e + 1;
			b = strtol(f, &e, 10);
			if (e == f)
				goto out_bad;
		}
		if (*e)
			goto out_bad;
		if (a < 0 || b >= n_layers || b < a || a <= prev)
			return json_refuse(err, v, path, "increasing layer ids in [0, n_layers)",
			           "\"%s\" in \"%s\" (target has %d layers)", tok, s, n_layers);
		for (long i = a; i <= b; i++)
			sp->skip_layers[sp->n_skip_layers++] = (int)i;
		prev = (int)b;
	}
	if (sp->n_skip_layers >= n_layers)
		return json_refuse(err, v, path, "a proper subset of the target's layers",
		           "all %d layers", n_layers);
	return 0;
out_bad:
	return json_refuse(err, v, path, "layerskip:N or layerskip:a-b,c,...[@V]", "\"layerskip:%s\"", s);
}

/* "layerskip:LAYERS[@V]": the target's layers the draft runs */
static int layerskip_parse(const gen_draft_in *in, gen_spec *sp, sw_err *err)
{
	return layerskip_list(in->mv, in->mp, in->method + 10, sp->target.cfg.n_layers,
	                      sp->target.cfg.vocab, sp, err);
}

/* "model:PATH" or {"method": "model", "path" | "shape": ...}: a model of
 * its own, whose vocabulary is the target's or a prefix of it */
static int model_parse(const gen_draft_in *in, gen_spec *sp, sw_err *err)
{
	const json_value *d = in->d, *mv = in->mv;
	const char *method = in->method, *mp = in->mp;
	int rc;
	if (method[5] == ':') {
		if (d->type == JSON_OBJECT && (json_get(d, "path") || json_get(d, "shape")))
			return json_refuse(err, d, "$.draft", "the model given once", "\"%s\" and a "
			           "path/shape field", method);
		memset(&sp->draft, 0, sizeof(sp->draft));
		if ((rc = gen_spec_abs_path(mv, mp, method + 6, sp->draft.path, sizeof(sp->draft.path),
		                            err)))
			return rc;
		/* the echo names the absolute path too (an engine runs from
		 * any directory) */
		if (strlen(sp->draft.path) + 7 > sizeof(sp->draft_method))
			return json_refuse(err, mv, mp, "model:PATH shorter than 256 bytes once made "
			                   "absolute", "\"model:%s\"", sp->draft.path);
		memcpy(sp->draft_method + 6, sp->draft.path, strlen(sp->draft.path) + 1);
		if ((rc = gen_spec_model_from_path(mv, mp, sp->draft.path, &sp->draft.cfg, err)) ||
		    (rc = gen_spec_shape_check(mv, mp, &sp->draft.cfg, err)))
			return rc;
	} else {
		if (d->type != JSON_OBJECT)
			return json_refuse(err, d, "$.draft", "model:PATH or {\"method\": \"model\", \"path\" | "
			           "\"shape\": ...}", "\"model\"");
		if ((rc = gen_spec_model_parse(d, "$.draft", &sp->draft, err)))
			return rc;
	}
	/* the target's vocabulary or a prefix of it (Qwen2-0.5B's 151936
	 * under Qwen2-7B's 152064): q = 0 beyond it, and the draft embeds
	 * the ids beyond it the target commits as a zero row (gen/plan.c) */
	if (sp->draft.cfg.vocab > sp->target.cfg.vocab)
		return json_refuse(err, d, "$.draft", "a draft vocabulary at most the target's (the "
		           "target's or a prefix of it)", "%d (target %d)", sp->draft.cfg.vocab,
		           sp->target.cfg.vocab);
	if ((rc = rt_draft_vocab_check(sp->target.path, sp->target.cfg.vocab, sp->draft.path,
	                               sp->draft.cfg.vocab, err)))
		return sw_err_prefix(err, "%s:%d:%d: $.draft", d->file, d->line, d->col);
	sp->draft_vocab = sp->draft.cfg.vocab;
	return 0;
}

/* q8_0 and q8_0_a8 take a draft model (its shapes' blocks: gen/spec.c),
 * gguf_a8 none (the draft's weights have no file's blocks to keep) */
static int model_dtype_check(const gen_spec *s, const json_value *v, sw_err *err)
{
	return s->dtype == GEN_DTYPE_GGUF_A8 ? gen_spec_gguf_a8_refuse(v, "model", err) : 0;
}

/* -- build -- */

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* an HF model directory's files, what model_hf.c reads: config.json, the
 * safetensors and their index, sorted */
static int model_files(const gen_spec *s, char **names, int max, sw_err *err)
{
	DIR *d = opendir(s->draft.path);
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d)) && n < max) {
		const size_t l = strlen(de->d_name);
		if (!strcmp(de->d_name, "config.json") ||
		    (l > 12 && !strcmp(de->d_name + l - 12, ".safetensors")) ||
		    (l > 23 && !strcmp(de->d_name + l - 23, ".safetensors.index.json")))
			names[n++] = strdup(de->d_name);
	}
	if (!d)
		return sw_errf(err, SW_EIO, "%s: cannot list: %s", s->draft.path, strerror(errno));
	closedir(d);
	qsort(names, (size_t)n, sizeof(*names), name_cmp);
	return n;
}

static const float *model_wget(const void *h, const char *field, int layer, size_t *n)
{
	return rt_model_weight(h, field, layer, n);
}

static void model_wclose(void *h)
{
	rt_model_free(h);
}

/* the draft model's file or directory (none by shape) */
static int model_weights_open(const gen_spec *s, gen_weights_src *w, sw_err *err)
{
	if (s->draft.from_shape)
		return 0;
	rt_model *m = rt_model_load(s->draft.path, err);
	if (!m)
		return err->code;
	*w = (gen_weights_src){.path = s->draft.path, .h = m, .get = model_wget,
	                       .close = model_wclose};
	return 0;
}

static const char *const model_methods[] = {"model", "model:PATH", NULL};
static const char *const model_keys[] = {"path", "shape", NULL};
static const char *const layerskip_methods[] = {"layerskip:LAYERS", NULL};

const gen_drafter gen_drafter_model = {
	.name = "model",
	.noun = "a draft model",
	.methods = model_methods,
	.keys = model_keys,
	.keys_why = NULL,
	.parse = model_parse,
	.tree_check = NULL,
	.prefill_min = 0,
	.prefill_why = NULL,
	.dtype_check = model_dtype_check,
	.adaptive = true,
	.embd_unscaled = false,
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
	.target_layers = false,
	.embd16 = NULL,
	.echo = model_echo,
	.echo_spec = model_echo_spec,
	.files = model_files,
	.weights_open = model_weights_open,
};

const gen_drafter gen_drafter_layerskip = {
	.name = "layerskip",
	.noun = "a layer-skip draft",
	.methods = layerskip_methods,
	.keys = NULL,
	.keys_why = NULL,
	.parse = layerskip_parse,
	.tree_check = NULL,
	.prefill_min = 0,
	.prefill_why = NULL,
	.dtype_check = NULL,
	.adaptive = true,
	.embd_unscaled = false,
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
	.target_layers = true,
	.embd16 = NULL,
	.echo = layerskip_echo,
	.echo_spec = NULL,
	.files = NULL,
	.weights_open = NULL,
};
