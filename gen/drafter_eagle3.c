/* EAGLE-3 heads (gen/drafter.h; ALGORITHMS.txt 11; runtime/model/eagle3.h;
 * the host reference runtime/decode/eagle3_draft.c): {"method": "eagle3",
 * "path": DIR[, "ngram": "MIN:MAX", "levels": L]}. In the planner the
 * target's phases are the skeleton's (gen/plan_build.c: its forwards with the
 * three taps, verification, the iteration's end, the commits); this file
 * plans the head around them.
 *
 * The head's cache (buffers draft.k_cache / v_cache, one layer, its length
 * the state word RT_ST_HLEN): slot i holds head row i, which pairs the
 * target's fused features at position i with the token at i + 1 (eagle3.h).
 * Between iterations HLEN = TLEN - 1: every row whose token is committed.
 * RoPE: a head row is rotated at its TOKEN's position, one past the host
 * decoder's row position, for every row alike (the position buffers hold
 * token positions); attention scores depend on position differences only,
 * so the two agree in exact arithmetic.
 *   prefill (chunk rows r at positions start + r, HLEN = start): the taps,
 *     fc over all C rows into e3_fc (row r: the fused features at start +
 *     r), then head rows r < C - 1 (token row r + 1) commit their K/V at
 *     HLEN + r. The host steps chunks by C - 1 (engine.c), so each row is
 *     computed once its next token is in the chunk, and writes HLEN = P - 2
 *     and RT_ST_HROW (the last prefilled row of e3_fc) before the first
 *     iteration.
 *   draft_0: tree_prep, then the root row: eagle3_in with FEAT_TREE 1 and
 *     LEVEL_BEGIN 0 reads e3_fc row RT_ST_HROW (the last committed
 *     position's features) with the root token, at slot HLEN (node 0);
 *     its output row gives q of depth 1.
 *   draft_d (d >= 1): level d's nodes, each from its parent's output row
 *     (eagle3_in FEAT_TREE 1) and its own token at slot HLEN + u, attention
 *     over the committed rows and the node's ancestors (the tree mask),
 *     o_proj, residual, MLP, the final norm and the LM head over Vd, q over
 *     Vd (draft_probs), the level's expansion. The output rows alternate
 *     between e3_hid0 and e3_hid1 by level parity.
 *     Expansion over the Vd draft ids (tree_expand MAPPED 1 through d2t:
 *     children, lanes and ties by target id) for top-k, the race and
 *     SpecHub: the same children as over q scattered onto the target's ids,
 *     which the host decoder expands (ref_expand_node_map), at Vd / V of
 *     the work. Sampling with replacement (RRS) expands over the target's
 *     ids: its inverse CDF runs in id order, and d2t need not ascend.
 *     q over the target's ids (q_target through t2d, buffer q_tgt) only
 *     where something reads it: verification other than greedy and one-hot
 *     (ref_verify_tree: RRS, RRSw, SpecHub read q; greedy and one-hot read
 *     none), or that expansion over the target's ids.
 *   verify: the target's tree forward with the taps; fc of every node into
 *     e3_fc (node u's row u, which iter_end's RT_ST_HROW names); every node
 *     u >= 1's committed row (its parent's features, its token) K/V at slot
 *     HLEN + u over the draft's staging; node 0's slot keeps the root row.
 *   commit: kv_commit of the head's cache along the accepted path (slot
 *     HLEN + path[j] -> HLEN + j, HLEN += the path's nodes): HLEN = TLEN - 1
 *     again, and the next root row reads the last accepted node's features.
 * N-gram first ("draft": {"ngram": "MIN:MAX", "levels": L}, a chain): a
 * phase draft_ngram before the levels runs tree_prep, the n-gram engine's
 * lookup and controller (drafter_ngram.c gp_op_ngram_draft, over
 * ngram_hist, which iter_end keeps), draft_pick (when node 1 is absent the
 * head drafts hk levels: L, or with the controller its choice, the head
 * being one more class there, ctrl word RT_CTRL_HEAD_K; e3_go[j] = j < hk,
 * RT_ST_DRAFTED = hk and RT_ST_HEAD then) and the root row with its K/V at
 * slot HLEN, in every iteration; draft_d is conditional on e3_go word d,
 * level 0 without the K/V draft_ngram wrote. The head's cache so takes every
 * committed row whichever drafter proposed the chain.
 * The head's weights: draft.fc, in_norm (input_layernorm, on the
 * embedding), hid_norm (hidden_norm, on the feature), wq / wk / wv over 2
 * dim in-features, wo, ffn_norm (post_attention_layernorm), the MLP,
 * out_norm, lm_head (Vd rows), d2t and t2d (always mapped: an identity map
 * when the file has none), inv_freq; the embedding is the target's unless
 * the file has its own.
 * gguf_a8 (the target's GEMM weights in its GGUF file's blocks, int8 GEMM
 * activations): the head's GEMM weights (fc, wq .. w_down, lm_head) are
 * Q8_0 buffers, quantized at upload as a q8_0 engine's (engine.c), and run
 * by the target's Q8_0 GEMM (each op's "b" dtype is its buffer's); norms,
 * maps, the embedding and the cache as in an fp16 engine. The draft only
 * proposes: verification against the target is unchanged, so the output
 * distribution is the target's whatever the head's rounding. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json.h"
#include "core/tree_rules.h"
#include "drafter.h"
#include "kernels/engine_state.h"
#include "model/ctx.h"
#include "plan_ctrl.h"

enum { BLK_E3IN = 128 }; /* test_kern_eagle3_in compiles it without spills */

typedef struct e3_ix {
	model_ix hm;                 /* the head: its layer's fields, cache, LM head */
	int in_norm, hid_norm;       /* input_layernorm, hidden_norm (1, dim) */
	int fc_out, hid[2];          /* e3_fc (rows, dim); the draft levels' output rows */
	int e3_go;                   /* n-gram first: word d opens draft_d (draft_pick) */
} e3_ix;

/* The head's shapes: its config.json's, a Llama layer. */
static void e3_shapes(ctx *c)
{
	c->p->draft_cfg = c->s->eagle3.head;
	c->p->draft_cfg.arch = RT_ARCH_LLAMA;
}

/* The head's weight and cache buffers (names: the runtime's binding,
 * runtime/cli/engine_cli.c cli_eagle3_weights). */
static int e3_weights(ctx *c, const model_ix *tm)
{
	e3_ix *x = c->draft;
	const rt_config *hc = &c->p->draft_cfg;
	const rt_e3_config *e3 = &c->s->eagle3;
	const char *wdt = gen_dtype_name(gen_dtype_act(c->s->dtype));
	/* gguf_a8: Q8_0 (e3_dtype_check: every k whole blocks) */
	const char *mdt = c->s->dtype == GEN_DTYPE_GGUF_A8
	                  ? "q8_0" : gen_dtype_name(gen_dtype_weights(c->s->dtype));
	const int64_t D = hc->dim, F = hc->ffn_dim, hd = hc->head_dim, TD = e3->target_dim;
	const int64_t qd = (int64_t)hc->n_heads * hd, kvd = (int64_t)hc->n_kv_heads * hd;
	model_ix *m = &x->hm;
	memset(m, 0, sizeof(*m));
	m->tag = "draft";
	m->cfg = hc;
	m->n_layers = 1;
	m->vocab_out = e3->draft_vocab;
	m->embd_rows = hc->vocab;
	m->len_word = RT_ST_HLEN;
	m->ctx_rows = c->s->max_context; /* slots < HLEN + nodes = TLEN - 1 + nodes */
	m->arch = gen_arch_of(RT_ARCH_LLAMA);
	m->mask_embd = m->fc_norm = -1;
	m->tok_embd = tm->tok_embd;
#define NB(dst, name, kind, dt, rank, d0, d1, d2)                                           \
	do {                                                                                \
		if (gp_model_buf(c, m, &(dst), name, kind, dt, rank, d0, d1, d2))           \
			return SW_ENOMEM;                                                   \
	} while (0)
	if (e3->own_embd)
		NB(m->tok_embd, "tok_embd", "weight", wdt, 2, hc->vocab, D, 0);
	NB(m->fc, "fc", "weight", mdt, 2, D, 3 * TD, 0);
	NB(x->in_norm, "in_norm", "weight", "f32", 2, 1, D, 0);
	NB(x->hid_norm, "hid_norm", "weight", "f32", 2, 1, D, 0);
	NB(m->wq, "wq", "weight", mdt, 3, 1, qd, 2 * D);
	NB(m->wk, "wk", "weight", mdt, 3, 1, kvd, 2 * D);
	NB(m->wv, "wv", "weight", mdt, 3, 1, kvd, 2 * D);
	NB(m->wo, "wo", "weight", mdt, 3, 1, D, qd);
	NB(m->ffn_norm, "ffn_norm", "weight", "f32", 2, 1, D, 0);
	NB(m->w_gate, "w_gate", "weight", mdt, 3, 1, F, D);
	NB(m->w_up, "w_up", "weight", mdt, 3, 1, F, D);
	NB(m->w_down, "w_down", "weight", mdt, 3, 1, D, F);
	NB(m->out_norm, "out_norm", "weight", "f32", 1, D, 0, 0);
	NB(m->lm_head, "lm_head", "weight", mdt, 2, e3->draft_vocab, D, 0);
	NB(m->d2t, "d2t", "weight", "i32", 1, e3->draft_vocab, 0, 0);
	NB(m->t2d, "t2d", "weight", "i32", 1, hc->vocab, 0, 0);
	NB(m->inv_freq, "inv_freq", "weight", "f32", 1, hd / 2, 0, 0);
	NB(m->k_cache, "k_cache", "kv", wdt, 3, 1, m->ctx_rows, kvd);
	NB(m->v_cache, "v_cache", "kv", wdt, 3, 1, m->ctx_rows, kvd);
#undef NB
	return 0;
}

/* eagle3_in (templates/eagle3_in.cu.tmpl): rows rows of [input_norm(embed) ;
 * hidden_norm(feature)] into x16 at x2_off, the residual into res. tree 0:
 * feature row r, tokens tok; 1: node l0 + r's feature row tree[u] - pb of
 * feat (the previous level's nf rows, or the root row's run-time row). */
static void op_e3_in(ctx *c, const e3_ix *x, int64_t rows, int tree, int l0, int pb, int64_t nf,
                     gen_arg x2, gen_arg res, gen_arg tok, gen_arg feat, gen_arg tt)
{
	const rt_config *hc = x->hm.cfg;
	const int64_t D = hc->dim;
	gen_param prm[] = {PNAME, PI("ROWS", rows), PI("DIM", D), PI("N_IDS", hc->vocab),
	                   PI("IS_F16", c->cast_mode),
	                   PI("NORM_BEFORE_RES", c->s->eagle3.norm_before_residual),
	                   PI("FEAT_TREE", tree), PI("LEVEL_BEGIN", l0), PI("PREV_BEGIN", pb),
	                   PI("N_FEAT", nf), PF("EPS", hc->norm_eps), PI("BLOCK", BLK_E3IN)};
	op_desc d = {.name = "eagle3_in", .op = "eagle3_in", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "eagle3_in", "eagle3_in.cu.tmpl", prm, 12),
	             .gx = (int)rows, .block = BLK_E3IN, .repeat = 1, .layers = "draft", .n_args = 8,
	             .args = {x2, res, A(x->hm.tok_embd, 0), tok, feat, tt, A(x->in_norm, 0),
	                      A(x->hid_norm, 0)},
	             .bytes = (double)rows * D * (2.0 * c->dt16 + c->dt16 + 8) + rows * 8.0,
	             .flops = 8.0 * rows * D};
	gp_emit(c, &d);
}

/* rmsnorm_residual over rows rows with explicit buffers: s = x + r (in
 * place on x), y = rmsnorm(s) * w. */
static void op_norm(ctx *c, const char *name, const rt_config *cfg, int64_t rows, gen_arg y,
                    gen_arg x, gen_arg r, gen_arg w, const char *layers)
{
	gen_param prm[] = {PNAME, PI("DIM", cfg->dim), PI("BLOCK", 256),
	                   PF("EPS", cfg->norm_eps)};
	op_desc d = {.name = name, .op = "rmsnorm_residual", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "rmsnorm_residual_f32", "rmsnorm_residual.cu.tmpl", prm, 4),
	             .gx = (int)rows, .block = 256, .repeat = 1, .layers = layers, .n_args = 5,
	             .args = {y, x, x, r, w},
	             .bytes = 4.0 * rows * cfg->dim * 4 + cfg->dim * 4.0,
	             .flops = 5.0 * rows * cfg->dim};
	gp_emit(c, &d);
}

/* The committed rows' K/V from x2 in x16 (rows of 2 dim): wk, wv, RoPE on k
 * at positions pos, kv_store at slots HLEN + row0 + r. */
static void head_kv(ctx *c, const e3_ix *x, int64_t rows, int64_t row0, gen_arg pos)
{
	const act_ix *a = &c->a;
	const model_ix *m = &x->hm;
	const rt_config *hc = m->cfg;
	const int64_t D = hc->dim, hd = hc->head_dim, kvd = (int64_t)hc->n_kv_heads * hd;
	gp_op_gemm(c, "e3_wk", rows, kvd, 2 * D, A(a->k, 0), A(a->x16, 0), A(m->wk, 0), 1, "draft");
	gp_op_gemm(c, "e3_wv", rows, kvd, 2 * D, A(a->v, 0), A(a->x16, 0), A(m->wv, 0), 1, "draft");
	{
		gen_param prm[] = {PNAME, PI("N_HEADS", hc->n_kv_heads), PI("HEAD_DIM", hd),
		                   PI("ROT_DIM", hd), PI("BLOCK", BLK_ROPE)};
		op_desc d = {.name = "e3_rope_k", .op = "rope", .exec = GEN_EXEC_KERNEL,
		             .kernel = gp_kernel(c, "rope_f32", "rope.cu.tmpl", prm, 5), .gx = (int)rows,
		             .block = BLK_ROPE, .n_args = 3,
		             .args = {A(a->k, 0), pos, A(m->inv_freq, 0)},
		             .bytes = 2.0 * rows * kvd * 4 + rows * 4.0 + hd / 2 * 4.0,
		             .flops = 3.0 * rows * kvd};
		gp_emit(c, &d);
	}
	gen_param prm[] = {PNAME, PI("ROWS", rows), PI("KVD", kvd), PI("ROW0", row0),
	                   PI("MAX_CTX", m->ctx_rows), PI("IS_F16", c->cast_mode),
	                   PI("BLOCK", BLK_KVSTORE)};
	const int64_t v8 = kvd % 8 == 0 ? 8 : 1;
	op_desc kv = {.name = "e3_kv_store", .op = "kv_store", .exec = GEN_EXEC_KERNEL,
	              .kernel = gp_kernel(c, "kv_store", "kv_store.cu.tmpl", prm, 7),
	              .gx = (int)((rows * kvd / v8 + BLK_KVSTORE - 1) / BLK_KVSTORE),
	              .block = BLK_KVSTORE, .repeat = 1, .layers = "draft", .n_args = 5,
	              .args = {A(m->k_cache, row0 * kvd * c->dt16), A(m->v_cache, row0 * kvd * c->dt16),
	                       A(a->k, 0), A(a->v, 0), A(a->state, m->len_word * 4)},
	              .bytes = 2.0 * rows * kvd * (4 + c->dt16)};
	gp_emit(c, &kv);
}

/* One draft level's rows (nodes l0 .. l0 + rows - 1; x2 in x16, the
 * residual in hid at row l0): the layer at slots HLEN + u under the tree
 * mask over block rows [0, l0 + rows), the output rows in hid (pre-norm x,
 * the next level's features), q over Vd and, into q_tgt unless it is -1
 * (nothing reads it), over the target's ids. */
static void head_level(ctx *c, const e3_ix *x, int l0, int rows, int hid, int q_tgt, bool kv)
{
	const gen_spec *s = c->s;
	const act_ix *a = &c->a;
	const model_ix *m = &x->hm;
	const rt_config *hc = m->cfg;
	const int64_t D = hc->dim, F = hc->ffn_dim, hd = hc->head_dim;
	const int64_t qd = (int64_t)hc->n_heads * hd, kvd = (int64_t)hc->n_kv_heads * hd;
	const int64_t Vd = s->eagle3.draft_vocab, V = s->target.cfg.vocab;
	const gen_arg pos = A(a->pos, (int64_t)l0 * 4), hrow = A(hid, (int64_t)l0 * D * 4);
	gp_op_gemm(c, "e3_wq", rows, qd, 2 * D, A(a->q, 0), A(a->x16, 0), A(m->wq, 0), 1, "draft");
	if (kv) {
		gp_op_gemm(c, "e3_wk", rows, kvd, 2 * D, A(a->k, 0), A(a->x16, 0), A(m->wk, 0), 1, "draft");
		gp_op_gemm(c, "e3_wv", rows, kvd, 2 * D, A(a->v, 0), A(a->x16, 0), A(m->wv, 0), 1, "draft");
	}
	gen_arch_op xo[GEN_ARCH_MAX_OPS];
	const int nxo = m->arch->qkv_ops(hc, rows, xo);
	for (int i = 0; i < nxo; i++) {
		if (!kv && xo[i].x != GEN_QKV_Q)
			continue; /* the rows' K/V are in the cache already */
		const int xb = xo[i].x == GEN_QKV_Q ? a->q : xo[i].x == GEN_QKV_K ? a->k : a->v;
		op_desc d = {.name = xo[i].name, .op = xo[i].op, .exec = GEN_EXEC_KERNEL,
		             .kernel = gp_kernel(c, xo[i].kop, xo[i].tmpl, xo[i].params, xo[i].n_params),
		             .gx = rows, .block = xo[i].block, .n_args = xo[i].n_args,
		             .args = {A(xb, 0), pos, A(m->inv_freq, 0)}, .bytes = xo[i].bytes,
		             .flops = xo[i].flops};
		gp_emit(c, &d);
	}
	if (kv) {
		gen_param prm[] = {PNAME, PI("ROWS", rows), PI("KVD", kvd), PI("ROW0", l0),
		                   PI("MAX_CTX", m->ctx_rows), PI("IS_F16", c->cast_mode),
		                   PI("BLOCK", BLK_KVSTORE)};
		const int64_t v8 = kvd % 8 == 0 ? 8 : 1;
		op_desc kv = {.name = "e3_kv_store", .op = "kv_store", .exec = GEN_EXEC_KERNEL,
		              .kernel = gp_kernel(c, "kv_store", "kv_store.cu.tmpl", prm, 7),
		              .gx = (int)((rows * kvd / v8 + BLK_KVSTORE - 1) / BLK_KVSTORE),
		              .block = BLK_KVSTORE, .repeat = 1, .layers = "draft", .n_args = 5,
		              .args = {A(m->k_cache, (int64_t)l0 * kvd * c->dt16),
		                       A(m->v_cache, (int64_t)l0 * kvd * c->dt16), A(a->k, 0), A(a->v, 0),
		                       A(a->state, m->len_word * 4)},
		              .bytes = 2.0 * rows * kvd * (4 + c->dt16)};
		gp_emit(c, &kv);
	}
	gp_op_cast(c, "e3_q_cast", rows, qd, A(a->q16, 0), A(a->q, 0), 1, NULL);
	attn_shape sh = gp_attn_choose(hc, rows, l0 + rows, s, c->dt16, true, m->ctx_rows);
	gp_op_attention(c, m, &sh, 1, "draft", GEN_MASK_TREE);
	gp_op_gemm(c, "e3_wo", rows, D, qd, A(a->delta, 0), A(a->attn, 0), A(m->wo, 0), 1, "draft");
	op_norm(c, "e3_post_norm", hc, rows, A(a->xn, 0), hrow, A(a->delta, 0), A(m->ffn_norm, 0),
	        "draft");
	gp_op_cast(c, "e3_ffn_in_cast", rows, D, A(a->x16, 0), A(a->xn, 0), 1, NULL);
	gp_op_gemm(c, "e3_w_gate", rows, F, D, A(a->gate, 0), A(a->x16, 0), A(m->w_gate, 0), 1, "draft");
	gp_op_gemm(c, "e3_w_up", rows, F, D, A(a->up, 0), A(a->x16, 0), A(m->w_up, 0), 1, "draft");
	{
		/* an EAGLE-3 head's MLP is SwiGLU (ACT 0) whatever the target's family */
		gen_param prm[] = {PNAME, PI("FFN", F), PI("ACT", 0), PI("BLOCK", BLK_SWIGLU)};
		const int v = F % 4 == 0 ? 4 : 1;
		op_desc d = {.name = "e3_swiglu", .op = "swiglu", .exec = GEN_EXEC_KERNEL,
		             .kernel = gp_kernel(c, "swiglu_f32", "swiglu.cu.tmpl", prm, 4),
		             .gx = (int)((F + BLK_SWIGLU * v - 1) / (BLK_SWIGLU * v)), .gy = rows,
		             .block = BLK_SWIGLU, .n_args = 3,
		             .args = {A(a->gate, 0), A(a->gate, 0), A(a->up, 0)},
		             .bytes = 3.0 * rows * F * 4, .flops = 4.0 * rows * F};
		gp_emit(c, &d);
	}
	gp_op_cast(c, "e3_ffn_mid_cast", rows, F, A(a->x16, 0), A(a->gate, 0), 1, NULL);
	gp_op_gemm(c, "e3_w_down", rows, D, F, A(a->delta, 0), A(a->x16, 0), A(m->w_down, 0), 1, "draft");
	/* x = h + mlp (kept: the next level's feature), norm(x) for the head */
	op_norm(c, "e3_out_norm", hc, rows, A(a->xn, 0), hrow, A(a->delta, 0), A(m->out_norm, 0), NULL);
	gp_op_cast(c, "e3_head_cast", rows, D, A(a->x16, 0), A(a->xn, 0), 1, NULL);
	gp_op_gemm(c, "e3_lm_head", rows, Vd, D, A(a->draft_logits, (int64_t)l0 * Vd * 4), A(a->x16, 0),
	           A(m->lm_head, 0), 1, NULL);
	/* q: softmax at the draft temperature (full support, as the draft
	 * model's levels), then over the target's ids where read */
	gp_op_logits(c, "draft_probs", (int)Vd, rows, A(a->draft_probs, (int64_t)l0 * Vd * 4),
	             A(a->draft_logits, (int64_t)l0 * Vd * 4), A(a->sampling, 4 * RT_SP_DRAFT));
	if (q_tgt >= 0)
		gp_op_q_target(c, rows, Vd, A(q_tgt, (int64_t)l0 * V * 4),
		               A(a->draft_probs, (int64_t)l0 * Vd * 4), A(m->t2d, 0));
}

/* The head's attention at each draft level; fc's input (3 taps of the
 * target's width) and a level's (the embedding and the feature, 2 dim). */
static void e3_extents(ctx *c, int64_t dim, gp_extents *e)
{
	const e3_ix *x = c->draft;
	const gen_spec *s = c->s;
	const rt_tree *t = &s->tree;
	const rt_config *hc = &c->p->draft_cfg;
	for (int d = 0; d < t->depth_max; d++) {
		const attn_shape sh = gp_attn_choose(hc, t->level_start[d + 1] - t->level_start[d],
		                                     t->level_start[d + 1], s, c->dt16, true,
		                                     x->hm.ctx_rows);
		gp_attn_partials(&sh, hc, e);
	}
	e->x16 = gp_max64(3 * (int64_t)s->eagle3.target_dim, 2 * (int64_t)hc->dim);
}

/* Expansion over the Vd draft ids except sampling with replacement (see
 * the header). */
static bool e3_expands_vd(const ctx *c)
{
	return c->rule != RT_EXPAND_SAMPLE;
}

/* q over Vd; over the target's ids (q_tgt) where verification or expansion
 * reads it; the taps; fc's rows; the levels' output rows. */
static int e3_buffers(ctx *c)
{
	e3_ix *x = c->draft;
	act_ix *a = &c->a;
	const gen_spec *s = c->s;
	const int n = s->tree.n, V = s->target.cfg.vocab, Vd = s->eagle3.draft_vocab;
	const int64_t HD = c->p->draft_cfg.dim;
	if (gp_buf(c, &a->draft_logits, "draft_logits", "activation", "f32", 2, n, Vd) ||
	    gp_buf(c, &a->draft_probs, "draft_probs", "activation", "f32", 2, n, Vd))
		return SW_ENOMEM;
	if ((!e3_expands_vd(c) ||
	     (s->verify_method != RT_VERIFY_GREEDY && s->verify_method != RT_VERIFY_ONEHOT)) &&
	    gp_buf(c, &a->q_tgt, "q_tgt", "activation", "f32", 2, n, V))
		return SW_ENOMEM;
	return gp_buf(c, &a->taps, "taps", "activation", "f32", 2, c->rows,
	              RT_E3_TAPS * (int64_t)s->eagle3.target_dim) ||
	       gp_buf(c, &x->fc_out, "e3_fc", "activation", "f32", 2, c->rows, HD) ||
	       gp_buf(c, &x->hid[0], "e3_hid0", "activation", "f32", 2, n, HD) ||
	       gp_buf(c, &x->hid[1], "e3_hid1", "activation", "f32", 2, n, HD) ? SW_ENOMEM : 0;
}

/* n-gram first: the history, the lookup's signal, the pick's word gating
 * the head's levels, the controller's words and cost table */
static int e3_state(ctx *c)
{
	e3_ix *x = c->draft;
	int rc;
	if (!c->s->e3_ngram)
		return 0;
	if ((rc = gp_ngram_history(c)) ||
	    (rc = gp_buf(c, &x->e3_go, "e3_go", "state", "i32", 1, c->s->e3_levels, 0)))
		return rc;
	return gp_ngram_control(c);
}

static int e3_taps(const gen_spec *s, const int **taps)
{
	*taps = s->eagle3.taps;
	return RT_E3_TAPS;
}

/* fc of every row of the chunk; the head's committed rows r < C - 1 (token
 * row r + 1) */
static void e3_prefill(ctx *c)
{
	const e3_ix *x = c->draft;
	const act_ix *a = &c->a;
	const int C = c->s->prefill_chunk;
	const int64_t TD = c->s->eagle3.target_dim, HD = x->hm.cfg->dim;
	gp_op_cast(c, "e3_fc_cast", C, RT_E3_TAPS * TD, A(a->x16, 0), A(a->taps, 0), 1, NULL);
	gp_op_gemm(c, "e3_fc", C, HD, RT_E3_TAPS * TD, A(x->fc_out, 0), A(a->x16, 0), A(x->hm.fc, 0),
	           1, NULL);
	op_e3_in(c, x, C - 1, 0, 0, 0, C - 1, A(a->x16, 0), A(a->h, 0), A(a->tokens, 4),
	         A(x->fc_out, 0), A(a->tree_table, 0));
	head_kv(c, x, C - 1, 0, A(a->pos, 4));
}

static int e3_level_count(const gen_spec *s)
{
	return s->e3_ngram ? s->e3_levels : s->tree.depth_max;
}

/* n-gram first: the lookup (and the controller) propose the chain;
 * draft_pick opens the head's levels when they proposed nothing. The root
 * row's K/V are committed here in every iteration, whoever drafts: the
 * head's cache must hold every committed row. */
static void e3_draft(ctx *c)
{
	const e3_ix *x = c->draft;
	const act_ix *a = &c->a;
	const rt_tree *t = &c->s->tree;
	const int levels = e3_level_count(c->s);
	if (!c->s->e3_ngram)
		return;
	gp_phase_begin(c, "draft_ngram", t->n - 1);
	gp_op_step(c, "tree_prep", 0, false);
	gp_op_ngram_draft(c);
	/* the controller's head levels (ctrl word RT_CTRL_HEAD_K) when it has
	 * one; without, tree_tokens stands in for the unread ctrl */
	gen_param pp[] = {PNAME, PI("N_NODES", t->n), PI("LEVELS", levels), PI("CTRL", a->ctrl >= 0),
	                  PI("BLOCK", 32)};
	op_desc pd = {.name = "draft_pick", .op = "draft_pick", .exec = GEN_EXEC_KERNEL,
	              .kernel = gp_kernel(c, "draft_pick", "draft_pick.cu.tmpl", pp, 5), .gx = 1,
	              .block = 32, .n_args = 4,
	              .args = {A(x->e3_go, 0), A(a->tree_tokens, 0), A(a->state, 0),
	                       a->ctrl >= 0 ? A(a->ctrl, 0) : A(a->tree_tokens, 0)},
	              .bytes = 16.0 + 4.0 * levels, .flops = 0};
	gp_emit(c, &pd);
	op_e3_in(c, x, 1, 1, 0, 0, c->rows, A(a->x16, 0), A(x->hid[0], 0), A(a->tree_tokens, 0),
	         A(x->fc_out, 0), A(a->state, 4 * RT_ST_HROW));
	head_kv(c, x, 1, 0, A(a->pos, 0));
	gp_phase_end(c);
}

/* The root row from the last committed position's features, then each
 * level from its parents' output rows. */
static void e3_draft_level(ctx *c, int d)
{
	const e3_ix *x = c->draft;
	const gen_spec *s = c->s;
	const rt_tree *t = &s->tree;
	const act_ix *a = &c->a;
	const int l0 = t->level_start[d], nd = t->level_start[d + 1] - l0;
	const int64_t HD = x->hm.cfg->dim;
	const bool exp_vd = e3_expands_vd(c);
	if (s->e3_ngram) /* only when the n-gram lookup drafted nothing and the
	                  * head drafts d + 1 levels or more */
		gp_phase_gate(c, x->e3_go, d);
	if (d == 0 && !s->e3_ngram) {
		gp_op_step(c, "tree_prep", 0, false);
		op_e3_in(c, x, 1, 1, 0, 0, c->rows, A(a->x16, 0), A(x->hid[0], 0),
		         A(a->tree_tokens, 0), A(x->fc_out, 0), A(a->state, 4 * RT_ST_HROW));
	} else if (d > 0) {
		const int p0 = t->level_start[d - 1], np = l0 - p0;
		op_e3_in(c, x, nd, 1, l0, p0, np, A(a->x16, 0), A(x->hid[d % 2], (int64_t)l0 * HD * 4),
		         A(a->tree_tokens, 0), A(x->hid[(d - 1) % 2], (int64_t)p0 * HD * 4),
		         A(a->tree_table, 0));
	}
	head_level(c, x, l0, nd, x->hid[d % 2], a->q_tgt, d > 0 || !s->e3_ngram);
	gp_op_expand(c, d, exp_vd ? s->eagle3.draft_vocab : s->target.cfg.vocab, c->rule, false,
	             exp_vd ? a->draft_probs : a->q_tgt, exp_vd ? x->hm.d2t : -1);
}

/* fc of every node (node u's row u: RT_ST_HROW's); every node u >= 1's
 * committed row */
static void e3_verify(ctx *c)
{
	const e3_ix *x = c->draft;
	const act_ix *a = &c->a;
	const rt_tree *t = &c->s->tree;
	const int64_t TD = c->s->eagle3.target_dim, HD = x->hm.cfg->dim;
	gp_op_cast(c, "e3_fc_cast", t->n, RT_E3_TAPS * TD, A(a->x16, 0), A(a->taps, 0), 1, NULL);
	gp_op_gemm(c, "e3_fc", t->n, HD, RT_E3_TAPS * TD, A(x->fc_out, 0), A(a->x16, 0),
	           A(x->hm.fc, 0), 1, NULL);
	for (int d = 1; d <= t->depth_max; d++) {
		const int l0 = t->level_start[d], nd = t->level_start[d + 1] - l0;
		const int p0 = t->level_start[d - 1];
		op_e3_in(c, x, nd, 1, l0, p0, l0 - p0, A(a->x16, (int64_t)(l0 - 1) * 2 * HD * c->dt16),
		         A(a->h, (int64_t)(l0 - 1) * HD * 4), A(a->tree_tokens, 0),
		         A(x->fc_out, (int64_t)p0 * HD * 4), A(a->tree_table, 0));
	}
	if (t->n > 1)
		head_kv(c, x, t->n - 1, 1, A(a->pos, 4));
}

/* q over the target's ids where something reads it; without q_tgt the
 * method reads no q (greedy, one-hot): any row */
static gp_q e3_accept_q(ctx *c)
{
	const bool tq = c->a.q_tgt >= 0;
	return (gp_q){.buf = tq ? c->a.q_tgt : c->a.draft_probs,
	              .vq = tq ? c->s->target.cfg.vocab : c->s->eagle3.draft_vocab, .by_depth = false};
}

static void e3_commit(ctx *c)
{
	const e3_ix *x = c->draft;
	gp_op_kv_commit(c, &x->hm, 1);
}

/* a head without an embedding of its own: eagle3_in reads the target's
 * table as 16-bit rows */
static bool e3_embd16(const gen_spec *s)
{
	return !s->eagle3.own_embd;
}

/* the head's directory, taps and Vd; n-gram first, the head's levels where
 * it drafts none */
static void e3_echo(const gen_plan *p, FILE *f)
{
	const gen_spec *s = p->spec;
	fprintf(f, ", ");
	gp_write_src(f, s->draft.from_shape, s->draft.path, p->draft_digest);
	fprintf(f, ", \"taps\": [%d, %d, %d], \"vocab\": %d", s->eagle3.taps[0], s->eagle3.taps[1],
	        s->eagle3.taps[2], s->eagle3.draft_vocab);
	if (s->e3_ngram)
		fprintf(f, ", \"ngram\": \"%d:%d\", \"levels\": %d", s->ngram_min, s->ngram_max,
		        s->e3_levels);
}

/* {"method": "eagle3", "path": DIR, "ngram", "levels"} back from the echo */
static void e3_echo_spec(const gen_echo_in *in, FILE *f)
{
	static const char *const ng[] = {"ngram", "levels", NULL};
	fputs("{\"method\": \"eagle3\", \"path\": ", f);
	gen_put_str(f, in->dpath, strlen(in->dpath));
	gen_put_members(f, in->d, ng, ", ");
	fputc('}', f);
}

/* -- the spec -- */

/* {"method": "eagle3", "path": DIR}: an EAGLE-3 head's config.json against
 * the target (runtime/model/eagle3.h rt_e3_config_load: width, vocabulary,
 * layer count, the three tapped layers, Vd). Over a target shape DIR may
 * hold config.json alone (rt_e3_config_shape: a shape-only head). */
static int e3_parse(const gen_draft_in *in, gen_spec *sp, sw_err *err)
{
	const json_value *d = in->d;
	const char *dir;
	int rc;
	if (d->type != JSON_OBJECT)
		return json_refuse(err, d, "$.draft", "{\"method\": \"eagle3\", \"path\": DIR}",
		           "the string \"eagle3\"");
	if (json_get(d, "shape"))
		return json_refuse(err, json_get(d, "shape"), "$.draft.shape", "no \"shape\" with method "
		           "\"eagle3\" (the head's config.json is its shape: give \"path\")", "a shape");
	const json_value *pv;
	if ((rc = gen_spec_draft_dir(d, sp, "an EAGLE-3 head directory", &dir, &pv, err)))
		return rc;
	struct stat st;
	const char *tname = sp->target.from_shape ? "(the spec's target shape)" : sp->target.path;
	/* over a target shape, a head directory with config.json alone is a
	 * head by shape (no weights anywhere: timed with --random-weights) */
	char wpath[600];
	snprintf(wpath, sizeof(wpath), "%s/model.safetensors", dir);
	const bool shape_only = sp->target.from_shape && stat(wpath, &st) && errno == ENOENT;
	if ((rc = shape_only ? rt_e3_config_shape(dir, &sp->target.cfg, tname, &sp->eagle3, err)
	                     : rt_e3_config_load(dir, &sp->target.cfg, tname, &sp->eagle3, err)))
		return sw_err_prefix(err, "%s:%d:%d: $.draft.path", pv->file, pv->line, pv->col);
	const rt_config *h = &sp->eagle3.head;
	if (h->head_dim % 8 || h->n_heads % h->n_kv_heads)
		return json_refuse(err, pv, "$.draft.path", "a head whose head_dim is a multiple of 8 and "
		           "whose n_heads is a multiple of n_kv_heads (the engine's tree attention)",
		           "\"%s\": head_dim %d, %d heads, %d KV heads", dir, h->head_dim, h->n_heads,
		           h->n_kv_heads);
	sp->draft_vocab = sp->eagle3.draft_vocab;
	/* "ngram": "MIN:MAX": an n-gram match of the context drafts first (the
	 * n-gram engine's lookup and controller), the head drafts "levels"
	 * tokens (default 1) in the iterations where that drafts none */
	const json_value *nv = json_get(d, "ngram"), *lv = json_get(d, "levels");
	if (lv && !nv)
		return json_refuse(err, lv, "$.draft.levels", "\"levels\" only with \"ngram\" (the "
		           "head's levels when the n-gram lookup drafts none)", "\"levels\" alone");
	if (!nv)
		return 0;
	if (nv->type != JSON_STRING || !gen_ngram_range(nv->str, sp))
		return json_refuse(err, nv, "$.draft.ngram", "\"MIN:MAX\" with 1 <= MIN <= MAX <= 16",
		           "%s%s%s", nv->type == JSON_STRING ? "\"" : "",
		           nv->type == JSON_STRING ? nv->str : json_type_name(nv->type),
		           nv->type == JSON_STRING ? "\"" : "");
	sp->e3_ngram = true;
	sp->e3_levels = 1;
	if (lv) {
		int64_t L = 0;
		if ((rc = json_get_int(d, "levels", "$.draft", 1, 64, &L, err)))
			return rc;
		sp->e3_levels = (int)L;
	}
	return 0;
}

/* n-gram first: the lookup's trees and verification, the head's levels
 * within the chain */
static int e3_tree_check(const json_value *root, const gen_spec *sp, sw_err *err)
{
	int rc;
	if (!sp->e3_ngram)
		return 0;
	if ((rc = gen_ngram_tree_check(root, sp, err)))
		return rc;
	const json_value *lv = json_get(json_get(root, "draft"), "levels");
	if (sp->tree.depth_max < 1 || sp->e3_levels > sp->tree.depth_max)
		return json_refuse(err, lv ? lv : json_get(root, "tree"),
		                   "$.draft.levels", "at most the chain's depth (the head drafts "
		                   "nodes 1 .. levels)", "%d with tree \"%s\" of depth %d",
		                   sp->e3_levels, sp->tree_spec, sp->tree.depth_max);
	return 0;
}

/* bf16, fp16 and gguf_a8, whose GEMM weights are Q8_0 blocks of 32 along
 * k: fc's k (3 x the target's width) and its layer's (2 x dim for q/k/v,
 * n_heads x head_dim for o, dim for gate/up and the LM head, ffn_dim for
 * down) whole blocks */
static int e3_dtype_check(const gen_spec *s, const json_value *v, sw_err *err)
{
	if (s->dtype == GEN_DTYPE_Q8_0 || s->dtype == GEN_DTYPE_Q8_0_A8)
		return json_refuse(err, v, "$.dtype", "\"bf16\", \"fp16\" or \"gguf_a8\" with an EAGLE-3 head",
		                   "\"%s\"", gen_dtype_name(s->dtype));
	if (s->dtype != GEN_DTYPE_GGUF_A8)
		return 0;
	const rt_config *h = &s->eagle3.head;
	const int td = s->eagle3.target_dim, qd = h->n_heads * h->head_dim;
	if (h->dim % 32 == 0 && h->ffn_dim % 32 == 0 && qd % 32 == 0 && (3 * td) % 32 == 0)
		return 0;
	return json_refuse(err, v, "$.dtype", "an EAGLE-3 head whose dim, ffn_dim, n_heads x "
	                   "head_dim and 3 x the target's width (fc) are multiples of 32 (its GEMM "
	                   "weights in Q8_0 blocks)", "\"gguf_a8\" with the head %s's %d, %d, %d "
	                   "and %d", s->draft.path, h->dim, h->ffn_dim, qd, 3 * td);
}

/* -- build -- */

/* config.json, and model.safetensors unless a head by shape */
static int e3_files(const gen_spec *s, char **names, int max, sw_err *err)
{
	char path[1100];
	struct stat st;
	int n = 0;
	(void)err;
	if (max < 2)
		return 0;
	names[n++] = strdup("config.json");
	snprintf(path, sizeof(path), "%.1000s/model.safetensors", s->draft.path);
	if (!stat(path, &st))
		names[n++] = strdup("model.safetensors");
	return n;
}

typedef struct e3_w {
	rt_model *m;
	rt_eagle3 *e3;
} e3_w;

static const float *e3_wget(const void *h, const char *field, int layer, size_t *n)
{
	(void)layer; /* one layer: its fields are named alone */
	return rt_e3_weight(((const e3_w *)h)->e3, field, n);
}

static void e3_wclose(void *h)
{
	e3_w *w = h;
	rt_eagle3_free(w->e3);
	rt_model_free(w->m);
	free(w);
}

/* the head's tensors (the target's embedding when it has none), read over
 * its target: none over a target shape */
static int e3_weights_open(const gen_spec *s, gen_weights_src *w, sw_err *err)
{
	if (s->target.from_shape)
		return 0;
	e3_w *x = calloc(1, sizeof(*x));
	if (!x)
		return sw_errf(err, SW_ENOMEM, "out of memory");
	if (!(x->m = rt_model_load(s->target.path, err)) ||
	    !(x->e3 = rt_eagle3_load(s->draft.path, x->m, err))) {
		e3_wclose(x);
		return err->code;
	}
	*w = (gen_weights_src){.path = s->draft.path, .h = x, .get = e3_wget, .close = e3_wclose};
	return 0;
}

static const char *const e3_methods[] = {"eagle3", NULL};
static const char *const e3_keys[] = {"path", "shape", "ngram", "levels", NULL};

const gen_drafter gen_drafter_eagle3 = {
	.name = "eagle3",
	.noun = "an EAGLE-3 head",
	.methods = e3_methods,
	.keys = e3_keys,
	.keys_why = "(an n-gram lookup before the head)",
	.parse = e3_parse,
	.tree_check = e3_tree_check,
	.prefill_min = 2,
	.prefill_why = "with an EAGLE-3 head (a chunk's head rows pair each position with the next "
	               "token)",
	.dtype_check = e3_dtype_check,
	.adaptive = false,
	.embd_unscaled = false,
	.state_bytes = sizeof(e3_ix),
	.shapes = e3_shapes,
	.weights = e3_weights,
	.extents = e3_extents,
	.buffers = e3_buffers,
	.state = e3_state,
	.taps = e3_taps,
	.prefill = e3_prefill,
	.draft = e3_draft,
	.levels = e3_level_count,
	.draft_level = e3_draft_level,
	.verify = e3_verify,
	.accept_q = e3_accept_q,
	.commit = e3_commit,
	.target_layers = false,
	.embd16 = e3_embd16,
	.echo = e3_echo,
	.echo_spec = e3_echo_spec,
	.files = e3_files,
	.weights_open = e3_weights_open,
};
