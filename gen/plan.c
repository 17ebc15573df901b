/* The static planner (plan.h): buffers in one arena, then the op schedule of
 * every phase, each op with its launch shape and a bytes/flops estimate.
 *
 * Data layout, chosen so the existing fp32 templates chain with cuBLASLt:
 * the residual stream, norms, RoPE and SwiGLU work in fp32; a cast kernel
 * turns the normed rows (and the SwiGLU output) into the 16-bit GEMM input;
 * GEMMs read 16-bit weights and activations and write fp32 (fp32
 * accumulation); attention reads fp32 q and the 16-bit KV cache and writes a
 * 16-bit output that feeds the wo GEMM directly. Norm weights stay fp32 (the
 * rmsnorm template reads fp32; they are tiny). Per-layer weights and caches
 * are stacked with the layer as the leading dimension; a per-layer op runs
 * `repeat` times with its layer's slice.
 *
 * Cost model (per launch, DRAM bytes; a deliberate lower bound that assumes
 * each operand crosses HBM once): GEMM = weights + A + C; attention reads the
 * KV cache once per KV head (GQA groups share it) at est_context cached
 * tokens plus the new rows; elementwise ops read and write each element once.
 * Known gap: the draft KV of an accepted depth-D leaf is not produced by any
 * draft level (the next issue's commit kernel must catch it up). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "tree_verify.h"

/* Block sizes: the ones test_kern_nvrtc checks for zero spills. */
enum { BLK_EMB = 128, BLK_RMS = 256, BLK_ROPE = 128, BLK_SWIGLU = 256, BLK_ARGMAX = 512,
       BLK_CAST = 256 };

typedef struct model_ix {
	const char *tag;     /* "target" / "draft" */
	const rt_config *cfg;
	int n_layers;        /* layers this forward runs */
	int vocab_out;       /* LM head rows used */
	int tok_embd, attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down, out_norm, lm_head;
	int k_cache, v_cache, k_tree, v_tree, inv_freq;
} model_ix;

typedef struct act_ix {
	int h, delta, xn, x16, q, k, v, attn, gate, up, pos, tokens, tree_tokens, tree_mask,
	    logits, draft_logits, state, err, accept, out_ring, ngram_hist;
} act_ix;

static int64_t align_up(int64_t x)
{
	return (x + GEN_PLAN_ALIGN - 1) / GEN_PLAN_ALIGN * GEN_PLAN_ALIGN;
}

static int64_t dtype_bytes(const char *dt)
{
	return !strcmp(dt, "f32") || !strcmp(dt, "i32") ? 4 : !strcmp(dt, "u64") ? 8 : 2;
}

static int grow(void **p, int *cap, int n, size_t elem)
{
	if (n < *cap)
		return 0;
	int nc = *cap ? *cap * 2 : 64;
	void *q = realloc(*p, (size_t)nc * elem);
	if (!q)
		return -1;
	*p = q;
	*cap = nc;
	return 0;
}

/* Appends a buffer at the next aligned offset; -1 on out of memory. */
static int add_buf(gen_plan *p, const char *name, const char *kind, const char *dt, int rank,
                   int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
	if (grow((void **)&p->bufs, &p->cap_bufs, p->n_bufs, sizeof(*p->bufs)))
		return -1;
	gen_buf *b = &p->bufs[p->n_bufs];
	memset(b, 0, sizeof(*b));
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->kind = kind;
	b->dtype = dt;
	b->rank = rank;
	int64_t d[4] = {d0, d1, d2, d3}, n = dtype_bytes(dt);
	for (int i = 0; i < rank; i++) {
		b->shape[i] = d[i];
		n *= d[i];
	}
	b->bytes = n;
	b->offset = p->arena_bytes;
	p->arena_bytes = align_up(b->offset + n);
	return p->n_bufs++;
}

int gen_plan_find_buf(const gen_plan *p, const char *name)
{
	for (int i = 0; i < p->n_bufs; i++)
		if (!strcmp(p->bufs[i].name, name))
			return i;
	return -1;
}

/* A kernel specialisation, deduplicated by URI; returns its index. */
static int add_kernel(gen_plan *p, const char *op, const char *tmpl, const gen_param *prm, int np)
{
	gen_kernel k;
	memset(&k, 0, sizeof(k));
	k.tmpl = tmpl;
	k.n_params = np;
	memcpy(k.params, prm, (size_t)np * sizeof(*prm));
	if (gen_key(k.uri, sizeof(k.uri), op, prm, np))
		return -1;
	for (int i = 0; i < p->n_kernels; i++)
		if (!strcmp(p->kernels[i].uri, k.uri))
			return i;
	if (grow((void **)&p->kernels, &p->cap_kernels, p->n_kernels, sizeof(*p->kernels)))
		return -1;
	p->kernels[p->n_kernels] = k;
	return p->n_kernels++;
}

typedef struct op_desc {
	const char *name, *op;
	int exec, kernel;
	const char *uri; /* pending/cuBLASLt key; kernels take theirs */
	int gx, gy, block, repeat;
	const char *layers;
	int64_t m, n, k;
	double bytes, flops;
	int n_args;
	gen_arg args[GEN_OP_MAX_ARGS];
} op_desc;

static int add_op(gen_plan *p, const op_desc *d)
{
	if (grow((void **)&p->ops, &p->cap_ops, p->n_ops, sizeof(*p->ops)))
		return -1;
	gen_op *o = &p->ops[p->n_ops];
	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "%s", d->name);
	o->op = d->op;
	o->exec = d->exec;
	o->kernel = d->exec == GEN_EXEC_KERNEL ? d->kernel : -1;
	snprintf(o->uri, sizeof(o->uri), "%s",
	         d->exec == GEN_EXEC_KERNEL ? p->kernels[d->kernel].uri : d->uri ? d->uri : "");
	if (d->exec == GEN_EXEC_KERNEL) {
		o->grid[0] = d->gx;
		o->grid[1] = d->gy ? d->gy : 1;
		o->grid[2] = 1;
		o->block[0] = d->block;
		o->block[1] = o->block[2] = 1;
	}
	o->repeat = d->repeat ? d->repeat : 1;
	o->layers = d->layers;
	o->m = d->m;
	o->n = d->n;
	o->k = d->k;
	o->n_args = d->n_args;
	memcpy(o->args, d->args, sizeof(o->args));
	o->bytes = d->bytes;
	o->flops = d->flops;
	p->n_ops++;
	return 0;
}

#define A(b, off) ((gen_arg){(b), (off)})
#define PI(n, v) ((gen_param){.name = (n), .type = GEN_PARAM_INT, .i = (v)})
#define PNAME ((gen_param){.name = "NAME", .type = GEN_PARAM_IDENT})

typedef struct ctx {
	gen_plan *p;
	const gen_spec *s;
	act_ix a;
	int dt16;       /* bytes of the 16-bit dtype */
	int cast_mode;  /* cast template MODE for f32 -> dtype */
	int rc;
} ctx;

static void emit(ctx *c, const op_desc *d)
{
	if (!c->rc && add_op(c->p, d))
		c->rc = SW_ENOMEM;
}

static int kernel(ctx *c, const char *op, const char *tmpl, const gen_param *prm, int np)
{
	int k = add_kernel(c->p, op, tmpl, prm, np);
	if (k < 0 && !c->rc)
		c->rc = SW_ENOMEM;
	return k < 0 ? 0 : k;
}

static void op_cast(ctx *c, const char *name, int64_t rows, int64_t width, gen_arg dst, gen_arg src,
                    int repeat, const char *layers)
{
	int64_t N = rows * width;
	gen_param prm[] = {PNAME, PI("N", N), PI("MODE", c->cast_mode), PI("BLOCK", BLK_CAST)};
	int v = N % 8 == 0 ? 8 : 1;
	op_desc d = {.name = name, .op = "cast", .exec = GEN_EXEC_KERNEL,
	             .kernel = kernel(c, "cast", "cast.cu.tmpl", prm, 4),
	             .gx = (int)((N + BLK_CAST * v - 1) / (BLK_CAST * v)), .block = BLK_CAST,
	             .repeat = repeat, .layers = layers, .n_args = 2, .args = {dst, src},
	             .bytes = (double)N * (4 + c->dt16), .flops = 0};
	emit(c, &d);
}

static void op_gemm(ctx *c, const char *name, int64_t m, int64_t n, int64_t k, gen_arg out,
                    gen_arg a, gen_arg w, int repeat, const char *layers)
{
	char uri[192];
	snprintf(uri, sizeof(uri), "gemm_%s_f32acc_m%" PRId64 "_n%" PRId64 "_k%" PRId64,
	         gen_dtype_name(c->s->dtype), m, n, k);
	op_desc d = {.name = name, .op = "gemm", .exec = GEN_EXEC_CUBLASLT, .uri = uri,
	             .repeat = repeat, .layers = layers, .m = m, .n = n, .k = k, .n_args = 3,
	             .args = {out, a, w},
	             .bytes = (double)n * k * c->dt16 + (double)m * k * c->dt16 + (double)m * n * 4,
	             .flops = 2.0 * m * n * k};
	emit(c, &d);
}

static void op_rmsnorm(ctx *c, const char *name, const rt_config *cfg, int64_t rows, gen_arg w,
                       int repeat, const char *layers)
{
	const act_ix *a = &c->a;
	gen_param prm[] = {PNAME, PI("DIM", cfg->dim), PI("BLOCK", BLK_RMS),
	                   {.name = "EPS", .type = GEN_PARAM_FLOAT, .f = cfg->norm_eps}};
	op_desc d = {.name = name, .op = "rmsnorm_residual", .exec = GEN_EXEC_KERNEL,
	             .kernel = kernel(c, "rmsnorm_residual_f32", "rmsnorm_residual.cu.tmpl", prm, 4),
	             .gx = (int)rows, .block = BLK_RMS, .repeat = repeat, .layers = layers,
	             .n_args = 5, .args = {A(a->xn, 0), A(a->h, 0), A(a->h, 0), A(a->delta, 0), w},
	             .bytes = 4.0 * rows * cfg->dim * 4 + cfg->dim * 4.0,
	             .flops = 5.0 * rows * cfg->dim};
	emit(c, &d);
}

enum fwd_mode { FWD_PREFILL, FWD_TREE };

/* One model forward over `rows` token rows starting at row0 of the tree (or
 * of the prefill chunk): embedding, L layers, final norm, LM head over
 * lm_rows rows (the last ones) into logits at logits_off. */
static void forward(ctx *c, const model_ix *m, int mode, int64_t rows, int64_t row0, int lm_rows,
                    int logits_buf, int64_t logits_off, const char *layers)
{
	const gen_spec *s = c->s;
	const act_ix *a = &c->a;
	const rt_config *cfg = m->cfg;
	const int64_t D = cfg->dim, F = cfg->ffn_dim, hd = cfg->head_dim;
	const int64_t qd = (int64_t)cfg->n_heads * hd, kvd = (int64_t)cfg->n_kv_heads * hd;
	const int L = m->n_layers, dt = c->dt16;
	const int tok_buf = mode == FWD_PREFILL ? a->tokens : a->tree_tokens;
	const int64_t ctxlen = s->est_context;
	char uri[192];

	/* embedding: a 16-bit table gather (the fp32 template does not fit it) */
	snprintf(uri, sizeof(uri), "embedding_%s_dim%" PRId64 "_nrows%d", gen_dtype_name(s->dtype), D,
	         cfg->vocab);
	op_desc emb = {.name = "embedding", .op = "embedding", .exec = GEN_EXEC_PENDING, .uri = uri,
	               .n_args = 3, .args = {A(a->h, 0), A(m->tok_embd, 0), A(tok_buf, row0 * 4)},
	               .bytes = rows * 4.0 + (double)rows * D * dt + (double)rows * D * 4};
	emit(c, &emb);
	op_desc ms = {.name = "zero_delta", .op = "memset", .exec = GEN_EXEC_MEMSET, .n_args = 1,
	              .args = {A(a->delta, 0)}, .bytes = (double)rows * D * 4};
	emit(c, &ms);

	/* per-layer block */
	op_rmsnorm(c, "attn_norm", cfg, rows, A(m->attn_norm, 0), L, layers);
	op_cast(c, "attn_in_cast", rows, D, A(a->x16, 0), A(a->xn, 0), L, layers);
	op_gemm(c, "wq", rows, qd, D, A(a->q, 0), A(a->x16, 0), A(m->wq, 0), L, layers);
	op_gemm(c, "wk", rows, kvd, D, A(a->k, 0), A(a->x16, 0), A(m->wk, 0), L, layers);
	op_gemm(c, "wv", rows, kvd, D, A(a->v, 0), A(a->x16, 0), A(m->wv, 0), L, layers);
	for (int qk = 0; qk < 2; qk++) {
		int H = qk ? cfg->n_kv_heads : cfg->n_heads;
		gen_param prm[] = {PNAME, PI("N_HEADS", H), PI("HEAD_DIM", hd), PI("ROT_DIM", hd),
		                   PI("BLOCK", BLK_ROPE)};
		op_desc d = {.name = qk ? "rope_k" : "rope_q", .op = "rope", .exec = GEN_EXEC_KERNEL,
		             .kernel = kernel(c, "rope_f32", "rope.cu.tmpl", prm, 5), .gx = (int)rows,
		             .block = BLK_ROPE, .repeat = L, .layers = layers, .n_args = 3,
		             .args = {A(qk ? a->k : a->q, 0), A(a->pos, row0 * 4), A(m->inv_freq, 0)},
		             .bytes = 2.0 * rows * H * hd * 4 + rows * 4.0 + hd / 2 * 4.0,
		             .flops = 3.0 * rows * H * hd};
		emit(c, &d);
	}
	/* new K/V rows: into the cache (prefill) or the tree scratch */
	int kdst = mode == FWD_PREFILL ? m->k_cache : m->k_tree;
	int vdst = mode == FWD_PREFILL ? m->v_cache : m->v_tree;
	snprintf(uri, sizeof(uri), "kv_store_%s_kvd%" PRId64 "_rows%" PRId64,
	         gen_dtype_name(s->dtype), kvd, rows);
	op_desc kv = {.name = "kv_store", .op = "kv_store", .exec = GEN_EXEC_PENDING, .uri = uri,
	              .repeat = L, .layers = layers, .n_args = 5,
	              .args = {A(kdst, row0 * kvd * dt), A(vdst, row0 * kvd * dt), A(a->k, 0),
	                       A(a->v, 0), A(a->state, 0)},
	              .bytes = 2.0 * rows * kvd * (4 + dt)};
	emit(c, &kv);
	/* attention: cached context + the new rows (causal chunk or tree mask) */
	int64_t tree_n = s->tree.n;
	snprintf(uri, sizeof(uri), "%s_%s_hd%" PRId64 "_h%d_gqa%d_%s%" PRId64,
	         mode == FWD_PREFILL ? "prefill_attn" : "tree_attn", gen_dtype_name(s->dtype), hd,
	         cfg->n_heads, cfg->n_heads / cfg->n_kv_heads, mode == FWD_PREFILL ? "rows" : "t",
	         mode == FWD_PREFILL ? rows : tree_n);
	int64_t keys = ctxlen + (mode == FWD_PREFILL ? rows : tree_n);
	op_desc at = {.name = "attention", .op = "attention", .exec = GEN_EXEC_PENDING, .uri = uri,
	              .repeat = L, .layers = layers, .n_args = 7,
	              .args = {A(a->attn, 0), A(a->q, 0), A(m->k_cache, 0), A(m->v_cache, 0),
	                       A(m->k_tree, 0), A(m->v_tree, 0), A(a->tree_mask, 0)},
	              .bytes = (double)rows * qd * 4 + 2.0 * keys * kvd * dt + (double)rows * qd * dt +
	                       (mode == FWD_TREE ? (double)tree_n * s->tree.words * 8 : 0),
	              .flops = 4.0 * rows * qd * keys};
	emit(c, &at);
	op_gemm(c, "wo", rows, D, qd, A(a->delta, 0), A(a->attn, 0), A(m->wo, 0), L, layers);
	op_rmsnorm(c, "ffn_norm", cfg, rows, A(m->ffn_norm, 0), L, layers);
	op_cast(c, "ffn_in_cast", rows, D, A(a->x16, 0), A(a->xn, 0), L, layers);
	op_gemm(c, "w_gate", rows, F, D, A(a->gate, 0), A(a->x16, 0), A(m->w_gate, 0), L, layers);
	op_gemm(c, "w_up", rows, F, D, A(a->up, 0), A(a->x16, 0), A(m->w_up, 0), L, layers);
	{
		gen_param prm[] = {PNAME, PI("FFN", F), PI("BLOCK", BLK_SWIGLU)};
		int v = F % 4 == 0 ? 4 : 1;
		op_desc d = {.name = "swiglu", .op = "swiglu", .exec = GEN_EXEC_KERNEL,
		             .kernel = kernel(c, "swiglu_f32", "swiglu.cu.tmpl", prm, 3),
		             .gx = (int)((F + BLK_SWIGLU * v - 1) / (BLK_SWIGLU * v)), .gy = (int)rows,
		             .block = BLK_SWIGLU, .repeat = L, .layers = layers, .n_args = 3,
		             .args = {A(a->gate, 0), A(a->gate, 0), A(a->up, 0)},
		             .bytes = 3.0 * rows * F * 4, .flops = 4.0 * rows * F};
		emit(c, &d);
	}
	op_cast(c, "ffn_mid_cast", rows, F, A(a->x16, 0), A(a->gate, 0), L, layers);
	op_gemm(c, "w_down", rows, D, F, A(a->delta, 0), A(a->x16, 0), A(m->w_down, 0), L, layers);

	/* head: the final norm over all rows completes the residual; the LM head
	 * runs on the last lm_rows rows only. */
	op_rmsnorm(c, "output_norm", cfg, rows, A(m->out_norm, 0), 1, NULL);
	if (lm_rows > 0) {
		int64_t first = rows - lm_rows;
		op_cast(c, "head_cast", lm_rows, D, A(a->x16, 0), A(a->xn, first * D * 4), 1, NULL);
		op_gemm(c, "lm_head", lm_rows, m->vocab_out, D, A(logits_buf, logits_off),
		        A(a->x16, 0), A(m->lm_head, 0), 1, NULL);
	}
}

/* Weight and cache buffers of one model. shared: layerskip reuses target's. */
static int model_bufs(ctx *c, model_ix *m, const char *tag, const rt_config *cfg, int n_layers,
                      bool own_weights, const model_ix *shared)
{
	gen_plan *p = c->p;
	const char *wdt = gen_dtype_name(c->s->dtype);
	const int64_t D = cfg->dim, F = cfg->ffn_dim, hd = cfg->head_dim, L = n_layers;
	const int64_t qd = (int64_t)cfg->n_heads * hd, kvd = (int64_t)cfg->n_kv_heads * hd;
	char nm[48];
#define B(field, kind, dt, rank, d0, d1, d2, d3)                                            \
	do {                                                                                \
		snprintf(nm, sizeof(nm), "%s.%s", tag, #field);                             \
		if ((m->field = add_buf(p, nm, kind, dt, rank, d0, d1, d2, d3)) < 0)        \
			return SW_ENOMEM;                                                   \
	} while (0)

	m->tag = tag;
	m->cfg = cfg;
	m->n_layers = n_layers;
	if (own_weights) {
		B(tok_embd, "weight", wdt, 2, cfg->vocab, D, 0, 0);
		B(attn_norm, "weight", "f32", 2, L, D, 0, 0);
		B(wq, "weight", wdt, 3, L, qd, D, 0);
		B(wk, "weight", wdt, 3, L, kvd, D, 0);
		B(wv, "weight", wdt, 3, L, kvd, D, 0);
		B(wo, "weight", wdt, 3, L, D, qd, 0);
		B(ffn_norm, "weight", "f32", 2, L, D, 0, 0);
		B(w_gate, "weight", wdt, 3, L, F, D, 0);
		B(w_up, "weight", wdt, 3, L, F, D, 0);
		B(w_down, "weight", wdt, 3, L, D, F, 0);
		B(out_norm, "weight", "f32", 1, D, 0, 0, 0);
		if (cfg->tied_embd)
			m->lm_head = m->tok_embd;
		else
			B(lm_head, "weight", wdt, 2, cfg->vocab, D, 0, 0);
		B(inv_freq, "weight", "f32", 1, hd / 2, 0, 0, 0);
	} else {
		m->tok_embd = shared->tok_embd;
		m->attn_norm = shared->attn_norm;
		m->wq = shared->wq;
		m->wk = shared->wk;
		m->wv = shared->wv;
		m->wo = shared->wo;
		m->ffn_norm = shared->ffn_norm;
		m->w_gate = shared->w_gate;
		m->w_up = shared->w_up;
		m->w_down = shared->w_down;
		m->out_norm = shared->out_norm;
		m->lm_head = shared->lm_head;
		m->inv_freq = shared->inv_freq;
	}
	B(k_cache, "kv", wdt, 3, L, c->s->max_context, kvd, 0);
	B(v_cache, "kv", wdt, 3, L, c->s->max_context, kvd, 0);
	B(k_tree, "kv", wdt, 3, L, c->s->tree.n, kvd, 0);
	B(v_tree, "kv", wdt, 3, L, c->s->tree.n, kvd, 0);
#undef B
	return 0;
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

int gen_plan_build(const gen_spec *s, gen_plan *p, sw_err *err)
{
	ctx c = {.p = p, .s = s, .dt16 = gen_dtype_size(s->dtype),
	         .cast_mode = s->dtype == GEN_DTYPE_FP16 ? 1 : 0};
	const gen_tree *t = &s->tree;
	const rt_config *tc = &s->target.cfg;
	const bool has_draft_model = s->draft_kind != GEN_DRAFT_NGRAM;
	model_ix tm, dm;
	act_ix *a = &c.a;
	int rc;

	memset(p, 0, sizeof(*p));
	p->spec = s;
	if (s->draft_kind == GEN_DRAFT_MODEL) {
		p->draft_cfg = s->draft.cfg;
	} else if (s->draft_kind == GEN_DRAFT_LAYERSKIP) {
		p->draft_cfg = *tc;
		p->draft_cfg.n_layers = s->n_skip_layers;
		p->draft_cfg.vocab = s->draft_vocab;
	}
	const rt_config *dc = &p->draft_cfg;

	/* weights and caches */
	if ((rc = model_bufs(&c, &tm, "target", tc, tc->n_layers, true, NULL)))
		goto out_nomem;
	tm.vocab_out = tc->vocab;
	if (has_draft_model) {
		bool own = s->draft_kind == GEN_DRAFT_MODEL;
		if ((rc = model_bufs(&c, &dm, "draft", own ? dc : tc, dc->n_layers, own, &tm)))
			goto out_nomem;
		dm.cfg = dc;
		dm.vocab_out = s->draft_vocab;
	}

	/* activations, sized for the widest model and the most rows */
	int64_t rows = max64(s->prefill_chunk, t->n);
	int64_t D = tc->dim, F = tc->ffn_dim, QD = (int64_t)tc->n_heads * tc->head_dim,
	        KVD = (int64_t)tc->n_kv_heads * tc->head_dim;
	if (has_draft_model) {
		D = max64(D, dc->dim);
		F = max64(F, dc->ffn_dim);
		QD = max64(QD, (int64_t)dc->n_heads * dc->head_dim);
		KVD = max64(KVD, (int64_t)dc->n_kv_heads * dc->head_dim);
	}
	const char *wdt = gen_dtype_name(s->dtype);
#define ACT(field, kind, dt, rank, d0, d1)                                                   \
	do {                                                                                 \
		if ((a->field = add_buf(p, #field, kind, dt, rank, d0, d1, 0, 0)) < 0)       \
			goto out_nomem;                                                      \
	} while (0)
	ACT(h, "activation", "f32", 2, rows, D);
	ACT(delta, "activation", "f32", 2, rows, D);
	ACT(xn, "activation", "f32", 2, rows, D);
	ACT(x16, "activation", wdt, 2, rows, max64(D, max64(F, QD)));
	ACT(q, "activation", "f32", 2, rows, QD);
	ACT(k, "activation", "f32", 2, rows, KVD);
	ACT(v, "activation", "f32", 2, rows, KVD);
	ACT(attn, "activation", wdt, 2, rows, QD);
	ACT(gate, "activation", "f32", 2, rows, F);
	ACT(up, "activation", "f32", 2, rows, F);
	ACT(pos, "activation", "i32", 1, rows, 0);
	ACT(tokens, "activation", "i32", 1, s->prefill_chunk, 0);
	ACT(logits, "activation", "f32", 2, t->n, tc->vocab);
	if (has_draft_model)
		ACT(draft_logits, "activation", "f32", 2, t->n, s->draft_vocab);
	ACT(tree_tokens, "state", "i32", 1, t->n, 0);
	ACT(tree_mask, "state", "u64", 2, t->n, t->words);
	ACT(accept, "state", "i32", 1, t->depth_max + 2, 0);
	ACT(out_ring, "state", "i32", 1, 4 * (t->depth_max + 1), 0);
	ACT(state, "state", "i32", 1, 8, 0);
	ACT(err, "state", "i32", 1, 1, 0);
	if (!has_draft_model)
		ACT(ngram_hist, "state", "i32", 1, s->max_context, 0);
#undef ACT

	/* phase: prefill chunk (target, then the draft's cache) */
	int ph = 0;
#define PHASE(nm, r)                                                                         \
	do {                                                                                 \
		snprintf(p->phases[ph].name, sizeof(p->phases[ph].name), "%s", nm);          \
		p->phases[ph].rows = (r);                                                    \
		p->phases[ph].first_op = p->n_ops;                                           \
	} while (0)
#define PHASE_END() (p->phases[ph].n_ops = p->n_ops - p->phases[ph].first_op, ph++)
	PHASE("prefill", s->prefill_chunk);
	forward(&c, &tm, FWD_PREFILL, s->prefill_chunk, 0, 1, a->logits, 0, "target");
	if (has_draft_model)
		forward(&c, &dm, FWD_PREFILL, s->prefill_chunk, 0, 0, a->draft_logits, 0, "draft");
	PHASE_END();

	/* phases: draft levels */
	if (has_draft_model) {
		for (int d = 0; d < t->depth_max; d++) {
			char nm[32];
			int l0 = t->level_start[d], nd = t->level_start[d + 1] - l0;
			snprintf(nm, sizeof(nm), "draft_%d", d);
			PHASE(nm, nd);
			forward(&c, &dm, FWD_TREE, nd, l0, nd, a->draft_logits,
			        (int64_t)l0 * s->draft_vocab * 4, "draft");
			bool one_child = true;
			for (int i = l0; i < l0 + nd; i++)
				one_child &= t->n_children[i] == 1;
			if (s->expand_rule == RT_EXPAND_TOPK && one_child) {
				/* each node's single top-1 child: argmax rows land on the
				 * children, which BFS numbers in the parents' order */
				gen_param prm[] = {PNAME, PI("N", s->draft_vocab), PI("BLOCK", BLK_ARGMAX)};
				op_desc od = {.name = "expand_top1", .op = "argmax", .exec = GEN_EXEC_KERNEL,
				              .kernel = kernel(&c, "argmax_f32", "argmax.cu.tmpl", prm, 3),
				              .gx = nd, .block = BLK_ARGMAX, .n_args = 2,
				              .args = {A(a->tree_tokens, (int64_t)t->level_start[d + 1] * 4),
				                       A(a->draft_logits, (int64_t)l0 * s->draft_vocab * 4)},
				              .bytes = (double)nd * s->draft_vocab * 4 + nd * 4.0,
				              .flops = (double)nd * s->draft_vocab};
				emit(&c, &od);
			} else {
				char uri[192];
				int nc = t->level_start[d + 2] - t->level_start[d + 1];
				snprintf(uri, sizeof(uri), "tree_expand_%s_v%d_t%d_level%d",
				         rt_expand_rule_name(s->expand_rule), s->draft_vocab, t->n, d);
				op_desc od = {.name = "expand", .op = "tree_expand", .exec = GEN_EXEC_PENDING,
				              .uri = uri, .n_args = 2,
				              .args = {A(a->tree_tokens, (int64_t)t->level_start[d + 1] * 4),
				                       A(a->draft_logits, (int64_t)l0 * s->draft_vocab * 4)},
				              .bytes = 2.0 * nd * s->draft_vocab * 4 + nc * 4.0,
				              .flops = 5.0 * nd * s->draft_vocab};
				emit(&c, &od);
			}
			PHASE_END();
		}
	} else {
		char uri[192];
		PHASE("draft_ngram", t->n - 1);
		snprintf(uri, sizeof(uri), "ngram_lookup_n%d_%d_ctx%d_t%d", s->ngram_min, s->ngram_max,
		         s->max_context, t->n);
		op_desc od = {.name = "ngram_lookup", .op = "ngram_lookup", .exec = GEN_EXEC_PENDING,
		              .uri = uri, .n_args = 3,
		              .args = {A(a->tree_tokens, 4), A(a->ngram_hist, 0), A(a->state, 0)},
		              .bytes = (double)s->est_context * 4,
		              .flops = (double)s->est_context * s->ngram_max};
		emit(&c, &od);
		PHASE_END();
	}

	/* phase: verify (target forward over the whole tree) */
	PHASE("verify", t->n);
	forward(&c, &tm, FWD_TREE, t->n, 0, t->n, a->logits, 0, "target");
	PHASE_END();

	/* phase: accept (fused verification walk) */
	PHASE("accept", t->n);
	{
		char uri[192];
		bool uses_q = s->verify_method != RT_VERIFY_GREEDY && s->verify_method != RT_VERIFY_ONEHOT;
		snprintf(uri, sizeof(uri), "verify_%s_%s_v%d_t%d_d%d", rt_verify_method_name(s->verify_method),
		         rt_expand_rule_name(s->expand_rule), tc->vocab, t->n, t->depth_max);
		op_desc od = {.name = "verify", .op = "verify", .exec = GEN_EXEC_PENDING, .uri = uri,
		              .n_args = 5,
		              .args = {A(a->accept, 0), A(a->out_ring, 0), A(a->logits, 0),
		                       A(has_draft_model ? a->draft_logits : a->tree_tokens, 0),
		                       A(a->tree_tokens, 0)},
		              .bytes = (double)t->n * tc->vocab * 4 +
		                       (uses_q ? (double)t->n * s->draft_vocab * 4 : 0) + t->n * 8.0,
		              .flops = 5.0 * t->n * tc->vocab};
		emit(&c, &od);
	}
	PHASE_END();

	/* phase: commit (accepted path's K/V into the caches, lengths, root) */
	PHASE("commit", t->depth_max + 1);
	for (int mi = 0; mi < (has_draft_model ? 2 : 1); mi++) {
		const model_ix *m = mi ? &dm : &tm;
		const rt_config *cfg = m->cfg;
		int64_t kvd = (int64_t)cfg->n_kv_heads * cfg->head_dim;
		char uri[192];
		snprintf(uri, sizeof(uri), "kv_commit_%s_kvd%" PRId64 "_t%d_d%d", wdt, kvd, t->n,
		         t->depth_max);
		op_desc od = {.name = mi ? "kv_commit_draft" : "kv_commit_target", .op = "kv_commit",
		              .exec = GEN_EXEC_PENDING, .uri = uri, .repeat = m->n_layers,
		              .layers = m->tag, .n_args = 6,
		              .args = {A(m->k_cache, 0), A(m->v_cache, 0), A(m->k_tree, 0),
		                       A(m->v_tree, 0), A(a->accept, 0), A(a->state, 0)},
		              .bytes = 2.0 * 2 * (t->depth_max + 1) * kvd * c.dt16};
		emit(&c, &od);
	}
	PHASE_END();
	p->n_phases = ph;
#undef PHASE
#undef PHASE_END
	if (c.rc)
		goto out_nomem;
	return 0;
out_nomem:
	gen_plan_free(p);
	return sw_errf(err, SW_ENOMEM, "%s: out of memory planning", s->file);
}

void gen_plan_free(gen_plan *p)
{
	free(p->bufs);
	free(p->ops);
	free(p->kernels);
	memset(p, 0, sizeof(*p));
}

/* --- engine.json --------------------------------------------------------- */

static void jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

/* Doubles as integers when they are (bytes, flops are), else %.9g. */
static void jnum(FILE *f, double x)
{
	if (x == (double)(int64_t)x && x < 9e15 && x > -9e15)
		fprintf(f, "%" PRId64, (int64_t)x);
	else
		fprintf(f, "%.9g", x);
}

static void write_cfg(FILE *f, const rt_config *c, const char *ind)
{
	fprintf(f, "{\n%s  \"n_layers\": %d, \"dim\": %d, \"n_heads\": %d, \"n_kv_heads\": %d, "
	        "\"head_dim\": %d,\n%s  \"ffn_dim\": %d, \"vocab\": %d, \"rope_theta\": ",
	        ind, c->n_layers, c->dim, c->n_heads, c->n_kv_heads, c->head_dim, ind, c->ffn_dim,
	        c->vocab);
	jnum(f, c->rope_theta);
	fprintf(f, ", \"norm_eps\": %.9g, \"tied_embd\": %s\n%s}", (double)c->norm_eps,
	        c->tied_embd ? "true" : "false", ind);
}

static void write_params(FILE *f, const gen_kernel *k)
{
	fputc('{', f);
	for (int i = 1; i < k->n_params; i++) {
		const gen_param *q = &k->params[i];
		fprintf(f, "%s\"%s\": ", i > 1 ? ", " : "", q->name);
		if (q->type == GEN_PARAM_INT)
			fprintf(f, "%lld", q->i);
		else if (q->type == GEN_PARAM_FLOAT)
			fprintf(f, "%.9g", (double)q->f);
		else
			jstr(f, q->s ? q->s : "");
	}
	fputc('}', f);
}

int gen_plan_write_json(const gen_plan *p, FILE *f)
{
	const gen_spec *s = p->spec;
	const gen_tree *t = &s->tree;

	fprintf(f, "{\n  \"format\": \"specwright-engine/1\",\n  \"generated\": \"by specwright "
	        "build; do not edit\",\n  \"spec\": {\n    \"name\": ");
	jstr(f, s->name);
	fprintf(f, ",\n    \"target\": ");
	if (s->target.from_shape) {
		fprintf(f, "{\"shape\": true}");
	} else {
		fprintf(f, "{\"path\": ");
		jstr(f, s->target.path);
		fputc('}', f);
	}
	fprintf(f, ",\n    \"draft\": {\"method\": ");
	jstr(f, s->draft_method);
	if (s->draft_kind == GEN_DRAFT_MODEL) {
		fprintf(f, ", ");
		if (s->draft.from_shape) {
			fprintf(f, "\"shape\": true");
		} else {
			fprintf(f, "\"path\": ");
			jstr(f, s->draft.path);
		}
	}
	if (s->draft_kind == GEN_DRAFT_LAYERSKIP) {
		fprintf(f, ", \"layers\": [");
		for (int i = 0; i < s->n_skip_layers; i++)
			fprintf(f, "%s%d", i ? ", " : "", s->skip_layers[i]);
		fprintf(f, "], \"vocab\": %d", s->draft_vocab);
	}
	fprintf(f, "},\n    \"tree\": ");
	jstr(f, s->tree_spec);
	fprintf(f, ",\n    \"verify\": {\"method\": \"%s\", \"expand\": \"%s\"},\n",
	        rt_verify_method_name(s->verify_method), rt_expand_rule_name(s->expand_rule));
	fprintf(f, "    \"sampling\": {\"temperature\": %.9g, \"top_k\": %d, \"top_p\": %.9g},\n",
	        (double)s->temperature, s->top_k, (double)s->top_p);
	fprintf(f, "    \"max_context\": %d, \"prefill_chunk\": %d, \"dtype\": \"%s\", \"archs\": [",
	        s->max_context, s->prefill_chunk, gen_dtype_name(s->dtype));
	for (int i = 0; i < s->n_archs; i++)
		fprintf(f, "%s\"%s\"", i ? ", " : "", s->archs[i]);
	fprintf(f, "], \"allow_spills\": %s,\n    \"roofline\": {\"tau\": ",
	        s->allow_spills ? "true" : "false");
	if (s->tau > 0)
		jnum(f, s->tau);
	else
		fprintf(f, "null");
	fprintf(f, ", \"context\": %d}\n  },\n", s->est_context);

	fprintf(f, "  \"shapes\": {\n    \"target\": ");
	write_cfg(f, &s->target.cfg, "    ");
	fprintf(f, ",\n    \"draft\": ");
	if (s->draft_kind == GEN_DRAFT_NGRAM)
		fprintf(f, "null");
	else
		write_cfg(f, &p->draft_cfg, "    ");
	fprintf(f, ",\n    \"tree\": {\"name\": ");
	jstr(f, t->name);
	fprintf(f, ", \"nodes\": %d, \"depth\": %d, \"parent\": [", t->n, t->depth_max);
	for (int i = 0; i < t->n; i++)
		fprintf(f, "%s%d", i ? ", " : "", t->parent[i]);
	fprintf(f, "], \"level_start\": [");
	for (int d = 0; d <= t->depth_max + 1; d++)
		fprintf(f, "%s%d", d ? ", " : "", t->level_start[d]);
	fprintf(f, "]}\n  },\n");

	fprintf(f, "  \"arena\": {\"bytes\": %" PRId64 ", \"align\": %d},\n  \"buffers\": [\n",
	        p->arena_bytes, GEN_PLAN_ALIGN);
	for (int i = 0; i < p->n_bufs; i++) {
		const gen_buf *b = &p->bufs[i];
		fprintf(f, "    {\"name\": \"%s\", \"kind\": \"%s\", \"dtype\": \"%s\", \"shape\": [",
		        b->name, b->kind, b->dtype);
		for (int d = 0; d < b->rank; d++)
			fprintf(f, "%s%" PRId64, d ? ", " : "", b->shape[d]);
		fprintf(f, "], \"bytes\": %" PRId64 ", \"offset\": %" PRId64 "}%s\n", b->bytes, b->offset,
		        i + 1 < p->n_bufs ? "," : "");
	}
	fprintf(f, "  ],\n  \"kernels\": [\n");
	for (int i = 0; i < p->n_kernels; i++) {
		const gen_kernel *k = &p->kernels[i];
		fprintf(f, "    {\"uri\": \"%s\", \"template\": \"templates/%s\", \"params\": ", k->uri,
		        k->tmpl);
		write_params(f, k);
		fprintf(f, "}%s\n", i + 1 < p->n_kernels ? "," : "");
	}
	static const char *const execs[] = {"kernel", "cublaslt", "pending", "memset"};
	fprintf(f, "  ],\n  \"phases\": [\n");
	for (int ph = 0; ph < p->n_phases; ph++) {
		const gen_phase *P = &p->phases[ph];
		fprintf(f, "    {\"name\": \"%s\", \"rows\": %d, \"ops\": [\n", P->name, P->rows);
		for (int i = P->first_op; i < P->first_op + P->n_ops; i++) {
			const gen_op *o = &p->ops[i];
			fprintf(f, "      {\"name\": \"%s\", \"op\": \"%s\", \"exec\": \"%s\", \"uri\": ",
			        o->name, o->op, execs[o->exec]);
			if (o->uri[0])
				jstr(f, o->uri);
			else
				fprintf(f, "null");
			if (o->exec == GEN_EXEC_KERNEL)
				fprintf(f, ", \"grid\": [%d, %d, %d], \"block\": [%d, %d, %d]", o->grid[0],
				        o->grid[1], o->grid[2], o->block[0], o->block[1], o->block[2]);
			else
				fprintf(f, ", \"grid\": null, \"block\": null");
			fprintf(f, ", \"repeat\": %d, \"layers\": ", o->repeat);
			if (o->layers)
				jstr(f, o->layers);
			else
				fprintf(f, "null");
			if (o->exec == GEN_EXEC_CUBLASLT)
				fprintf(f, ", \"gemm\": {\"m\": %" PRId64 ", \"n\": %" PRId64 ", \"k\": %" PRId64
				        ", \"a\": \"%s\", \"b\": \"%s\", \"c\": \"f32\"}", o->m, o->n, o->k,
				        gen_dtype_name(s->dtype), gen_dtype_name(s->dtype));
			fprintf(f, ",\n       \"args\": [");
			for (int j = 0; j < o->n_args; j++)
				fprintf(f, "%s{\"buf\": \"%s\", \"offset\": %" PRId64 "}", j ? ", " : "",
				        p->bufs[o->args[j].buf].name, o->args[j].offset);
			fprintf(f, "], \"bytes\": ");
			jnum(f, o->bytes);
			fprintf(f, ", \"flops\": ");
			jnum(f, o->flops);
			fprintf(f, "}%s\n", i + 1 < P->first_op + P->n_ops ? "," : "");
		}
		fprintf(f, "    ]}%s\n", ph + 1 < p->n_phases ? "," : "");
	}
	fprintf(f, "  ]\n}\n");
	return ferror(f) ? SW_EIO : 0;
}
