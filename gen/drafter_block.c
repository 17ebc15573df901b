/* Block drafters (gen/drafter.h; ALGORITHMS.txt 7, 8;
 * runtime/model/block_drafter.h): {"method": "block", "path": DIR | "shape",
 * "steps": S}; in the planner no catch-up and no per-level forwards.
 * The target's prefill and verify forwards run their layers in segments
 * that end at each tapped layer (per-op layer0), a feature_tap after each;
 * the rows' features are fused (fc, rmsnorm with fc_norm, each drafter
 * layer's wk / wv, RoPE) into the drafter's own K/V cache at len + row, so
 * in verify every tree node is staged and kv_commit keeps the accepted
 * path's (rejected nodes leave no trace, the drafter's length stays the
 * target's). The draft phase runs S passes over the B block rows
 * (block_embed, the drafter's layers under the block visibility table, the
 * LM head over the first Vd rows of the target's, logits_process;
 * block_unmask between passes for S > 1), then every level's expansion
 * from q row depth(u) (Q_BY_DEPTH), which verify also reads. The drafter's
 * cache has B slots past max_context for its block rows. A mapped draft
 * vocabulary (d2t, ALGORITHMS.txt 11): the head is its own gathered rows,
 * block_unmask writes target ids, and q_target gathers each depth's q onto
 * the target's ids (t2d) for expansion and verification over all V ids,
 * the host decoder's scatter_q. */
#include <stdlib.h>
#include <string.h>

#include "drafter.h"
#include "kernels/engine_state.h"
#include "model/ctx.h"

enum { BLK_UNMASK = 256 }; /* test_kern_block_unmask compiles it without spills */

typedef struct block_x {
	model_ix dm;      /* the drafter's layers, fusion and cache */
	int blk_tok;      /* the block's tokens (word B: the last position unmasked by an
	                   * earlier pass, block_unmask) */
	int blk_pos;      /* the block rows' positions */
	int first;        /* the pass being planned is the first (block_embed FIRST) */
} block_x;

/* The drafter's layers at the target's width; vocab: the shared
 * embedding's rows (its head covers [0, Vd)). */
static void block_shapes(ctx *c)
{
	const rt_bd_config *bk = &c->s->block;
	rt_config *dc = &c->p->draft_cfg;
	*dc = c->s->target.cfg;
	dc->n_layers = bk->n_layers;
	dc->n_heads = bk->n_heads;
	dc->n_kv_heads = bk->n_kv_heads;
	dc->head_dim = bk->head_dim;
	dc->ffn_dim = bk->ffn_dim;
	dc->norm_eps = bk->norm_eps;
	dc->rope_theta = bk->rope_theta;
}

/* Its own layers, mask rows, fusion and norms; the target's embedding and
 * LM head (rows [0, Vd) for its head); its cache stages the B block rows
 * past the context. Its layers are Llama's (rt_bd_config has no family). */
static int block_weights(ctx *c, const model_ix *tm)
{
	block_x *x = c->draft;
	model_ix *m = &x->dm;
	const rt_bd_config *bk = &c->s->block;
	const rt_config *dc = &c->p->draft_cfg;
	const char *wdt = gen_dtype_name(gen_dtype_act(c->s->dtype));
	const char *mdt = gen_dtype_name(gen_dtype_weights(c->s->dtype));
	const int64_t D = dc->dim;
	int rc;
	if ((rc = gp_model_init(c, m, "draft", dc, dc->n_layers, RT_ARCH_LLAMA, false, tm)))
		return rc;
	m->tok_embd = tm->tok_embd;
	m->lm_head = tm->lm_head;
	m->ctx_rows = c->s->max_context + bk->block;
	/* a mapped draft vocabulary: the head is the target's rows d2t[0..Vd)
	 * (the drafter's gathered copy), and both maps */
	if (bk->has_map &&
	    ((rc = gp_model_buf(c, m, &m->lm_head, "lm_head", "weight", mdt, 2, bk->draft_vocab, D, 0)) ||
	     (rc = gp_model_buf(c, m, &m->d2t, "d2t", "weight", "i32", 1, bk->draft_vocab, 0, 0)) ||
	     (rc = gp_model_buf(c, m, &m->t2d, "t2d", "weight", "i32", 1, dc->vocab, 0, 0))))
		return rc;
	if ((rc = gp_model_buf(c, m, &m->mask_embd, "mask_embd", "weight", wdt, 2, bk->block - 1, D,
	                       0)) ||
	    (rc = gp_model_buf(c, m, &m->fc, "fc", "weight", mdt, 2, D, (int64_t)bk->n_taps * D, 0)) ||
	    (rc = gp_model_buf(c, m, &m->fc_norm, "fc_norm", "weight", "f32", 1, D, 0, 0)) ||
	    (rc = gp_model_layers(c, m)) || (rc = gp_model_extra(c, m)) || (rc = gp_model_cache(c, m)))
		return rc;
	m->vocab_out = c->s->draft_vocab;
	return 0;
}

static void block_extents(ctx *c, int64_t dim, gp_extents *e)
{
	const block_x *x = c->draft;
	const int B = c->s->block.block;
	const attn_shape sh = gp_attn_choose(&c->p->draft_cfg, B, B, c->s, c->dt16, true,
	                                     x->dm.ctx_rows);
	gp_attn_partials(&sh, &c->p->draft_cfg, e);
	e->rows = B;
	e->x16 = (int64_t)c->s->block.n_taps * dim; /* fc's input */
}

/* q by depth: row j = position anchor + 1 + j; the tapped target layers'
 * outputs of every row, concatenated; the block's tokens and positions; a
 * mapped draft vocabulary: q of each depth over the target's ids. */
static int block_buffers(ctx *c)
{
	block_x *x = c->draft;
	act_ix *a = &c->a;
	const gen_spec *s = c->s;
	const rt_bd_config *bk = &s->block;
	const int B = bk->block;
	if (gp_buf(c, &a->draft_logits, "draft_logits", "activation", "f32", 2, B, s->draft_vocab) ||
	    gp_buf(c, &a->draft_probs, "draft_probs", "activation", "f32", 2, B, s->draft_vocab) ||
	    gp_buf(c, &a->taps, "taps", "activation", "f32", 2, c->rows,
	           (int64_t)bk->n_taps * s->target.cfg.dim) ||
	    gp_buf(c, &x->blk_tok, "blk_tok", "state", "i32", 1, B + 1, 0) ||
	    gp_buf(c, &x->blk_pos, "blk_pos", "state", "i32", 1, B, 0))
		return SW_ENOMEM;
	if (bk->has_map && gp_buf(c, &a->q_tgt, "q_tgt", "activation", "f32", 2, s->tree.depth_max,
	                          s->target.cfg.vocab))
		return SW_ENOMEM;
	return 0;
}

static int block_taps(const gen_spec *s, const int **taps)
{
	*taps = s->block.taps;
	return s->block.n_taps;
}

/* The drafter's context K/V of `rows` rows from their features (taps of
 * the target forward just run, row r at position pos[r]): rmsnorm(fc @ f)
 * * fc_norm, then each drafter layer's wk / wv and RoPE, stored at slots
 * len + r (rt_bd_append). In verify every tree node is staged at len + u
 * and kv_commit keeps the accepted path's. */
static void block_fuse(ctx *c, int64_t rows)
{
	const block_x *x = c->draft;
	const model_ix *dm = &x->dm;
	const act_ix *a = &c->a;
	const rt_config *dc = dm->cfg;
	const int64_t D = dc->dim, NT = c->s->block.n_taps, hd = dc->head_dim,
	              kvd = (int64_t)dc->n_kv_heads * hd;
	const int Ld = dm->n_layers, dt = c->dt16;
	gp_op_cast(c, "fuse_in_cast", rows, NT * D, A(a->x16, 0), A(a->taps, 0), 1, NULL);
	gp_op_gemm(c, "fc", rows, D, NT * D, A(a->delta, 0), A(a->x16, 0), A(dm->fc, 0), 1, NULL);
	/* h = 0 + fc @ f; xn = rmsnorm(h) * fc_norm: no residual */
	op_desc ms = {.name = "zero_h", .op = "memset", .exec = GEN_EXEC_MEMSET, .n_args = 1,
	              .args = {A(a->h, 0)}, .bytes = (double)rows * D * 4};
	gp_emit(c, &ms);
	gp_op_rmsnorm(c, "fc_norm", dc, rows, A(dm->fc_norm, 0), 1, NULL);
	gp_op_cast(c, "fuse_cast", rows, D, A(a->x16, 0), A(a->xn, 0), 1, NULL);
	gp_op_gemm(c, "fuse_wk", rows, kvd, D, A(a->k, 0), A(a->x16, 0), A(dm->wk, 0), Ld, "draft");
	gp_op_gemm(c, "fuse_wv", rows, kvd, D, A(a->v, 0), A(a->x16, 0), A(dm->wv, 0), Ld, "draft");
	{
		gen_param prm[] = {PNAME, PI("N_HEADS", dc->n_kv_heads), PI("HEAD_DIM", hd),
		                   PI("ROT_DIM", hd), PI("BLOCK", BLK_ROPE)};
		op_desc d = {.name = "fuse_rope_k", .op = "rope", .exec = GEN_EXEC_KERNEL,
		             .kernel = gp_kernel(c, "rope_f32", "rope.cu.tmpl", prm, 5), .gx = (int)rows,
		             .block = BLK_ROPE, .repeat = Ld, .layers = "draft", .n_args = 3,
		             .args = {A(a->k, 0), A(a->pos, 0), A(dm->inv_freq, 0)},
		             .bytes = 2.0 * rows * kvd * 4 + rows * 4.0 + hd / 2 * 4.0,
		             .flops = 3.0 * rows * kvd};
		gp_emit(c, &d);
	}
	gen_param prm[] = {PNAME, PI("ROWS", rows), PI("KVD", kvd), PI("ROW0", 0),
	                   PI("MAX_CTX", dm->ctx_rows), PI("IS_F16", c->cast_mode),
	                   PI("BLOCK", BLK_KVSTORE)};
	int64_t v8 = kvd % 8 == 0 ? 8 : 1;
	op_desc kv = {.name = "fuse_kv_store", .op = "kv_store", .exec = GEN_EXEC_KERNEL,
	              .kernel = gp_kernel(c, "kv_store", "kv_store.cu.tmpl", prm, 7),
	              .gx = (int)((rows * kvd / v8 + BLK_KVSTORE - 1) / BLK_KVSTORE),
	              .block = BLK_KVSTORE, .repeat = Ld, .layers = "draft", .n_args = 5,
	              .args = {A(dm->k_cache, 0), A(dm->v_cache, 0), A(a->k, 0), A(a->v, 0),
	                       A(a->state, dm->len_word * 4)},
	              .bytes = 2.0 * rows * kvd * (4 + dt)};
	gp_emit(c, &kv);
}

/* the prefill chunk's rows into the drafter's cache */
static void block_prefill(ctx *c)
{
	block_fuse(c, c->s->prefill_chunk);
}

/* The pass's input rows (fwd_opt.embed): the anchor and the block's tokens
 * or [MASK] embeddings, their positions len + j. */
static void block_embed(ctx *c, const model_ix *m, const fwd_opt *o)
{
	const block_x *x = c->draft;
	const act_ix *a = &c->a;
	const int B = (int)o->rows;
	const int64_t D = m->cfg->dim;
	gen_param prm[] = {PNAME, PI("B", B), PI("DIM", D), PI("N_ROWS", m->cfg->vocab),
	                   PI("IS_F16", c->cast_mode), PI("FIRST", x->first), PI("BLOCK", BLK_EMB)};
	op_desc d = {.name = "block_embed", .op = "block_embed", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "block_embed", "block_embed.cu.tmpl", prm, 7), .gx = B,
	             .block = BLK_EMB, .n_args = 8,
	             .args = {A(a->h, 0), A(m->tok_embd, 0), A(m->mask_embd, 0), A(x->blk_tok, 0),
	                      A(a->tree_tokens, 0), A(x->blk_pos, 0),
	                      A(a->state, m->len_word * 4), A(a->err, 0)},
	             .bytes = B * 12.0 + (double)B * D * (c->dt16 + 4)};
	gp_emit(c, &d);
}

/* One phase: S drafter passes over the block (the anchor and B - 1 [MASK]
 * rows; S > 1 unmasks between passes, the last pass's rows are the fixed
 * Z), then every level's expansion from q row depth(u) (Q_BY_DEPTH): no
 * catch-up, the drafter's context is fused from the target's own
 * forwards. */
static void block_draft(ctx *c)
{
	block_x *x = c->draft;
	const gen_spec *s = c->s;
	const rt_bd_config *bk = &s->block;
	const rt_tree *t = &s->tree;
	const act_ix *a = &c->a;
	const int B = bk->block, S = s->block_steps, Vd = s->draft_vocab, V = s->target.cfg.vocab;
	const bool mapped = bk->has_map;
	gp_phase_begin(c, "draft_block", B);
	gp_op_step(c, "tree_prep", 0, false);
	for (int i = 0; i < S; i++) {
		const fwd_opt o = {.mode = FWD_BLOCK, .rows = B, .lm_rows = B,
		                   .logits_buf = a->draft_logits, .layers = "draft", .embed = block_embed,
		                   .pos_buf = x->blk_pos,
		                   .mask_kind = bk->block_attn == RT_BD_CAUSAL ? GEN_MASK_BLOCK_CAUSAL
		                                                             : GEN_MASK_BLOCK_BIDIR};
		x->first = i == 0;
		gp_forward(c, &x->dm, &o);
		/* q over [0, Vd): one pass (S = 1) at the draft temperature, as
		 * tree drafting does (rt_generate_tree_block); S > 1 at the
		 * request's own temperature, top-k and top-p, as the chain
		 * drafter does (block_decode.c): at T = 0 every row is one-hot
		 * at its argmax, so block_unmask's draws are the argmax */
		gp_op_logits(c, "draft_probs", Vd, B, A(a->draft_probs, 0), A(a->draft_logits, 0),
		             A(a->sampling, 4 * (S > 1 ? RT_SP_TEMP : RT_SP_DRAFT)));
		if (S > 1) {
			gen_param prm[] = {PNAME, PI("B", B), PI("VD", Vd), PI("PASS", i), PI("STEPS", S),
			                   PI("FINAL", i == S - 1), PI("MAPPED", mapped),
			                   PI("BLOCK", BLK_UNMASK)};
			op_desc od = {.name = "block_unmask", .op = "block_unmask", .exec = GEN_EXEC_KERNEL,
			              .kernel = gp_kernel_x(c, "block_unmask", "block_unmask.cu.tmpl", prm, 8,
			                                    GEN_PREFIX_PHILOX, false, NULL),
			              .gx = B, .block = BLK_UNMASK, .n_args = 5,
			              .args = {A(x->blk_tok, 0), A(a->draft_probs, 0),
			                       A(a->sampling, 4 * RT_SP_SEED_LO), A(a->iter, 0),
			                       A(mapped ? x->dm.d2t : a->tree_table, 0)},
			              .bytes = (double)B * Vd * 4 * (i == S - 1 ? 2 : 1) + B * 8.0,
			              .flops = (double)B * Vd * 2};
			gp_emit(c, &od);
		}
	}
	if (mapped) /* q of depths 0..D-1 over the target's ids */
		gp_op_q_target(c, t->depth_max, Vd, A(a->q_tgt, 0), A(a->draft_probs, 0),
		               A(x->dm.t2d, 0));
	for (int d = 0; d < t->depth_max; d++)
		gp_op_expand(c, d, mapped ? V : Vd, c->rule, true, mapped ? a->q_tgt : a->draft_probs, -1);
	gp_phase_end(c);
}

/* every node's features, fused into the drafter's cache at len + u
 * (kv_commit keeps the accepted path's, rejected nodes leave none) */
static void block_verify(ctx *c)
{
	block_fuse(c, c->s->tree.n);
}

/* q by depth, over the target's ids when mapped */
static gp_q block_accept_q(ctx *c)
{
	const bool mapped = c->s->block.has_map;
	return (gp_q){.buf = mapped ? c->a.q_tgt : c->a.draft_probs,
	              .vq = mapped ? c->s->target.cfg.vocab : c->s->draft_vocab, .by_depth = true};
}

static void block_commit(ctx *c)
{
	const block_x *x = c->draft;
	gp_op_kv_commit(c, &x->dm, 1);
}

/* block_embed reads the target's table as 16-bit rows */
static bool block_embd16(const gen_spec *s)
{
	(void)s;
	return true;
}

/* the drafter's directory and its baked-in config (B, S, taps, pattern, Vd) */
static void block_echo(const gen_plan *p, FILE *f)
{
	const gen_spec *s = p->spec;
	const rt_bd_config *bk = &s->block;
	fprintf(f, ", ");
	gp_write_src(f, s->draft.from_shape, s->draft.path, p->draft_digest);
	fprintf(f, ", \"block\": %d, \"steps\": %d, \"taps\": [", bk->block, s->block_steps);
	for (int i = 0; i < bk->n_taps; i++)
		fprintf(f, "%s%d", i ? ", " : "", bk->taps[i]);
	fprintf(f, "], \"block_attention\": \"%s\", \"vocab\": %d",
	        bk->block_attn == RT_BD_CAUSAL ? "causal" : "bidirectional", bk->draft_vocab);
}

/* {"method": "block", "steps": S, "path": DIR} back from the echo; a
 * drafter by shape: config.json's keys, from the echo */
static void block_echo_spec(const gen_echo_in *in, FILE *f)
{
	static const char *const steps[] = {"steps", NULL};
	const json_value *d = in->d;
	fputs("{\"method\": \"block\"", f);
	gen_put_members(f, d, steps, ", ");
	if (!in->dshape) {
		fputs(", \"path\": ", f);
		gen_put_str(f, in->dpath, strlen(in->dpath));
	} else {
		static const char *const bk[] = {"block", "taps", "block_attention", NULL};
		static const char *const sk[] = {"n_layers", "n_heads", "n_kv_heads", "head_dim",
		                                 "ffn_dim", "norm_eps", "rope_theta", NULL};
		fputs(", \"shape\": {\"conditioning\": \"features\"", f);
		gen_put_members(f, d, bk, ", ");
		if (json_get(d, "vocab")) {
			fputs(", \"draft_vocab\": ", f);
			gen_put_value(f, json_get(d, "vocab"));
		}
		gen_put_members(f, in->dshape, sk, ", ");
		fputc('}', f);
	}
	fputc('}', f);
}

/* -- the spec -- */

/* {"method": "block", "path": DIR | "shape": {...}, "steps": S}: the
 * drafter's config.json (or its keys as a shape) against the target
 * (width, vocabulary, layers, taps) */
static int block_parse(const gen_draft_in *in, gen_spec *sp, sw_err *err)
{
	const json_value *d = in->d;
	const char *dir;
	int rc;
	if (d->type != JSON_OBJECT)
		return json_refuse(err, d, "$.draft", "{\"method\": \"block\", \"path\": DIR, \"steps\": S}",
		           "the string \"block\"");
	const json_value *sv = json_get(d, "shape");
	if (sv && json_get(d, "path"))
		return json_refuse(err, d, "$.draft", "exactly one of \"path\" and \"shape\"", "both");
	sp->block_steps = 1;
	if (json_get(d, "steps")) {
		int64_t S = 0;
		if ((rc = json_get_int(d, "steps", "$.draft", 1, 16, &S, err)))
			return rc;
		sp->block_steps = (int)S;
	}
	if (sv) {
		/* a drafter by shape (planning, NVRTC and inspect without weights):
		 * config.json's keys, the spec's target as its target */
		memset(&sp->draft, 0, sizeof(sp->draft));
		sp->draft.from_shape = true;
		if ((rc = rt_bd_config_shape(sv, sv->file, "$.draft.shape", &sp->target.cfg, &sp->block,
		                             err)))
			return rc;
		if (sp->block.cond != RT_BD_FEATURES)
			return json_refuse(err, sv, "$.draft.shape.conditioning", "\"features\" (the engine keeps "
			           "no token window)", "\"tokens\"");
		sp->draft_vocab = sp->block.draft_vocab;
		return 0;
	}
	const json_value *pv;
	if ((rc = gen_spec_draft_dir(d, sp, "a block drafter directory", &dir, &pv, err)))
		return rc;
	const char *tname = sp->target.from_shape ? "(the spec's target shape)" : sp->target.path;
	if ((rc = rt_bd_config_load(dir, &sp->target.cfg, tname, &sp->block, err)))
		return sw_err_prefix(err, "%s:%d:%d: $.draft.path", pv->file, pv->line, pv->col);
	if (sp->block.cond != RT_BD_FEATURES)
		return json_refuse(err, pv, "$.draft.path", "a features-conditioned block drafter (config.json "
		           "$.conditioning \"features\"; the engine keeps no token window)",
		           "\"%s\": $.conditioning \"tokens\"", dir);
	sp->draft_vocab = sp->block.draft_vocab;
	return 0;
}

/* one pass drafts B positions: a tree of depth <= B, from one pass unless
 * a chain */
static int block_tree_check(const json_value *root, const gen_spec *sp, sw_err *err)
{
	const int B = sp->block.block;
	bool chain = true;
	for (int i = 0; i < sp->tree.n; i++)
		chain &= sp->tree.n_children[i] <= 1;
	if (sp->tree.depth_max > B)
		return json_refuse(err, json_get(root, "tree"), "$.tree", "a tree of depth at most the block "
		         "drafter's B (one pass drafts B positions)", "\"%s\" of depth %d with "
		         "B = %d (%s/config.json $.block)", sp->tree_spec, sp->tree.depth_max, B,
		         sp->draft.path);
	if (sp->block_steps > 1 && !chain)
		return json_refuse(err, json_get(json_get(root, "draft"), "steps"), "$.draft.steps",
		         "1 with a tree (a tree is drafted from one pass; steps > 1 need a chain)",
		         "%d with tree \"%s\"", sp->block_steps, sp->tree_spec);
	return 0;
}

/* bf16 and fp16 only */
static int block_dtype_check(const gen_spec *s, const json_value *v, sw_err *err)
{
	if (s->dtype == GEN_DTYPE_Q8_0 || s->dtype == GEN_DTYPE_Q8_0_A8)
		return json_refuse(err, v, "$.dtype", "\"bf16\" or \"fp16\" with a block drafter",
		                   "\"%s\"", gen_dtype_name(s->dtype));
	return s->dtype == GEN_DTYPE_GGUF_A8 ? gen_spec_gguf_a8_refuse(v, "block drafter", err) : 0;
}

/* -- build -- */

static int block_files(const gen_spec *s, char **names, int max, sw_err *err)
{
	(void)s;
	(void)err;
	if (max < 2)
		return 0;
	names[0] = strdup("config.json");
	names[1] = strdup("model.safetensors");
	return 2;
}

typedef struct block_w {
	rt_model *m;
	rt_block_drafter *bd;
} block_w;

static const float *block_wget(const void *h, const char *field, int layer, size_t *n)
{
	return rt_bd_weight(((const block_w *)h)->bd, field, layer, n);
}

static void block_wclose(void *h)
{
	block_w *w = h;
	rt_block_drafter_free(w->bd);
	rt_model_free(w->m);
	free(w);
}

/* its own tensors (its embedding and head are the target's), read over
 * its target: none when either is a shape */
static int block_weights_open(const gen_spec *s, gen_weights_src *w, sw_err *err)
{
	if (s->target.from_shape || s->draft.from_shape)
		return 0;
	block_w *b = calloc(1, sizeof(*b));
	if (!b)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	if (!(b->m = rt_model_load(s->target.path, err)) ||
	    !(b->bd = rt_block_drafter_load(s->draft.path, b->m, err))) {
		block_wclose(b);
		return err->code;
	}
	*w = (gen_weights_src){.path = s->draft.path, .h = b, .get = block_wget,
	                       .close = block_wclose};
	return 0;
}

static const char *const block_methods[] = {"block", NULL};
static const char *const block_keys[] = {"path", "shape", "steps", NULL};

const gen_drafter gen_drafter_block = {
	.name = "block",
	.noun = "a block drafter",
	.methods = block_methods,
	.keys = block_keys,
	.keys_why = NULL,
	.parse = block_parse,
	.tree_check = block_tree_check,
	.prefill_min = 0,
	.prefill_why = NULL,
	.dtype_check = block_dtype_check,
	.adaptive = false,
	.embd_unscaled = true,
	.state_bytes = sizeof(block_x),
	.shapes = block_shapes,
	.weights = block_weights,
	.extents = block_extents,
	.buffers = block_buffers,
	.state = NULL,
	.taps = block_taps,
	.prefill = block_prefill,
	.draft = block_draft,
	.levels = NULL,
	.draft_level = NULL,
	.verify = block_verify,
	.accept_q = block_accept_q,
	.commit = block_commit,
	.target_layers = false,
	.embd16 = block_embd16,
	.echo = block_echo,
	.echo_spec = block_echo_spec,
	.files = block_files,
	.weights_open = block_weights_open,
};
