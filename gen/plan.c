/* The static planner's op helpers (plan.h, plan_int.h gp_*): buffers in one
 * arena, kernel specialisations, the ops of a phase, each with its launch
 * shape and a bytes/flops estimate, a model's forward and buffers; then
 * engine.json and the restrict check.
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
 *
 * gen_plan_build (plan_build.c) is the phase skeleton every engine shares
 * (the target's forwards, verification, the iteration's end, the commits);
 * what a kind of drafter adds to it is its own file's (gen/drafter.h,
 * gen/drafter_*.c). Both plan with the helpers here. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "attn_cost.h"
#include "gpu_model.h"
#include "plan_gguf.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "formats/gguf.h"
#include "kernels/engine_state.h"
#include "kernels/ops.h"
#include "kernels/verify_layout.h"
#include "kernels/sample_layout.h"
#include "plan.h"
#include "drafter.h"
#include "plan_int.h"
#include "core/tree_rules.h"

attn_shape gp_attn_choose(const rt_config *cfg, int T, int n_blk, const gen_spec *s, int elt,
                          bool masked, int max_ctx)
{
	const gen_attn_geom g = gen_attn_choose(T, n_blk, cfg->n_heads, cfg->n_kv_heads,
	                                        cfg->head_dim, elt, max_ctx, s->est_context);
	attn_shape a = {.T = T, .n_blk = n_blk, .masked = masked, .split = g.split, .warps = g.warps,
	                .rb = g.row_blocks, .mblock = g.mblock};
	const int tiles = (T * (cfg->n_heads / cfg->n_kv_heads) + 15) / 16;
	a.zt = (tiles + a.rb * a.warps - 1) / (a.rb * a.warps);
	a.ctx_splits = (max_ctx + a.split - 1) / a.split;
	a.blk_splits = 0;
	return a;
}

/* The fp32 partials (o, and m and l) a tree attention of shape sh over a
 * model of cfg writes, into the largest seen so far. */
void gp_attn_partials(const attn_shape *sh, const rt_config *cfg, gp_extents *e)
{
	const int64_t rh = (int64_t)(sh->ctx_splits + sh->blk_splits) * sh->T * cfg->n_heads;
	e->part_o = gp_max64(e->part_o, rh * cfg->head_dim);
	e->part_ml = gp_max64(e->part_ml, rh * 2);
}

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
int gp_add_buf(gen_plan *p, const char *name, const char *kind, const char *dt, int rank,
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
	int bb, blk = gen_plan_wtype_block(dt, &bb);
	if (blk) /* q8_0 34 bytes a block of 32, q4_1 20, ... (rows are whole blocks) */
		n = n / 2 / blk * bb;
	b->bytes = n;
	b->offset = p->arena_bytes;
	p->arena_bytes = align_up(b->offset + n);
	return p->n_bufs++;
}

/* An activation or state buffer of rank <= 2 into *ix. */
int gp_buf(ctx *c, int *ix, const char *name, const char *kind, const char *dt, int rank,
           int64_t d0, int64_t d1)
{
	return (*ix = gp_add_buf(c->p, name, kind, dt, rank, d0, d1, 0, 0)) < 0 ? SW_ENOMEM : 0;
}

int gen_plan_find_buf(const gen_plan *p, const char *name)
{
	for (int i = 0; i < p->n_bufs; i++)
		if (!strcmp(p->bufs[i].name, name))
			return i;
	return -1;
}

/* A kernel specialisation, deduplicated by URI; returns its index. two:
 * the template defines <NAME>_part and <NAME>_merge (tree attention). */
static int add_kernel(gen_plan *p, const char *op, const char *tmpl, const gen_param *prm, int np,
                      int prefix, bool two, const char *tree_id)
{
	gen_kernel k;
	memset(&k, 0, sizeof(k));
	k.tmpl = tmpl;
	k.n_params = np;
	memcpy(k.params, prm, (size_t)np * sizeof(*prm));
	k.prefix = prefix;
	k.n_entries = two ? 2 : 1;
	k.entry[0] = two ? "_part" : "";
	k.entry[1] = two ? "_merge" : NULL;
	if (tree_id)
		snprintf(k.tree_id, sizeof(k.tree_id), "%s", tree_id);
	if (gen_key(k.uri, sizeof(k.uri), op, prm, np))
		return -1;
	for (int i = 0; i < np; i++)
		if (k.params[i].type == GEN_PARAM_IDENT)
			k.params[i].s = NULL; /* NAME and TREE are filled when rendering */
	for (int i = 0; i < p->n_kernels; i++)
		if (!strcmp(p->kernels[i].uri, k.uri))
			return i;
	if (grow((void **)&p->kernels, &p->cap_kernels, p->n_kernels, sizeof(*p->kernels)))
		return -1;
	p->kernels[p->n_kernels] = k;
	return p->n_kernels++;
}


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
	o->entry = d->exec == GEN_EXEC_KERNEL ? (d->entry ? d->entry : "") : NULL;
	if (d->exec == GEN_EXEC_KERNEL) {
		o->grid[0] = d->gx;
		o->grid[1] = d->gy ? d->gy : 1;
		o->grid[2] = d->gz ? d->gz : 1;
		o->block[0] = d->block;
		o->block[1] = o->block[2] = 1;
	}
	o->repeat = d->repeat ? d->repeat : 1;
	o->layer0 = d->layer0;
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


void gp_emit(ctx *c, const op_desc *d)
{
	op_desc dd = *d;
	if (dd.layers && !dd.layer0)
		dd.layer0 = c->layer0;
	/* a kernel op is a row of kernels/ops.def and its kernel comes from that
	 * row's template; the rest are the executor's own gemm and memset: a
	 * misspelt op fails the plan here, not an engine's load */
	const int id = dd.exec == GEN_EXEC_KERNEL ? sw_op_find(dd.op) : -1;
	if (!c->rc && (dd.exec == GEN_EXEC_KERNEL
	               ? id < 0 || strcmp(sw_op_get(id)->tmpl, c->p->kernels[dd.kernel].tmpl)
	               : strcmp(dd.op, dd.exec == GEN_EXEC_MEMSET ? "memset" : "gemm"))) {
		c->rc = SW_EINVAL;
		snprintf(c->why, sizeof(c->why), "op %s (%s): %s", dd.name ? dd.name : "?", dd.op,
		         dd.exec != GEN_EXEC_KERNEL ? "a gemm or memset op misnamed"
		         : id < 0 ? "not a row of kernels/ops.def"
		                  : "its kernel is not from its row's template");
	}
	if (!c->rc && add_op(c->p, &dd))
		c->rc = SW_ENOMEM;
}

int gp_kernel_x(ctx *c, const char *op, const char *tmpl, const gen_param *prm, int np,
                int prefix, bool two, const char *tree_id)
{
	int k = add_kernel(c->p, op, tmpl, prm, np, prefix, two, tree_id);
	if (k < 0 && !c->rc)
		c->rc = SW_ENOMEM;
	return k < 0 ? 0 : k;
}

int gp_kernel(ctx *c, const char *op, const char *tmpl, const gen_param *prm, int np)
{
	int k = add_kernel(c->p, op, tmpl, prm, np, GEN_PREFIX_NONE, false, NULL);
	if (k < 0 && !c->rc)
		c->rc = SW_ENOMEM;
	return k < 0 ? 0 : k;
}

void gp_op_cast(ctx *c, const char *name, int64_t rows, int64_t width, gen_arg dst, gen_arg src,
                int repeat, const char *layers)
{
	int64_t N = rows * width;
	gen_param prm[] = {PNAME, PI("N", N), PI("MODE", c->cast_mode), PI("BLOCK", BLK_CAST)};
	int v = N % 8 == 0 ? 8 : 1;
	op_desc d = {.name = name, .op = "cast", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "cast", "cast.cu.tmpl", prm, 4),
	             .gx = (int)((N + BLK_CAST * v - 1) / (BLK_CAST * v)), .block = BLK_CAST,
	             .repeat = repeat, .layers = layers, .n_args = 2, .args = {dst, src},
	             .bytes = (double)N * (4 + c->dt16), .flops = 0};
	gp_emit(c, &d);
}

int gp_gemm_wtype(const ctx *c, int buf, const char *layers, int layer)
{
	const gen_buf *b = &c->p->bufs[buf];
	int bb;
	if (!gen_plan_wtype_block(b->dtype, &bb))
		return -1;
	if (b->ltypes && layers) {
		/* a layer-skip draft runs the target's layers through its map */
		const gen_drafter *dr = gen_drafter_of(c->s->draft_kind);
		const int id = !strcmp(layers, "draft") && dr && dr->target_layers
		               ? c->s->skip_layers[layer] : layer;
		if (id >= 0 && id < b->n_ltypes)
			return b->ltypes[id];
	}
	static const int types[] = {GGML_T_Q8_0, GGML_T_Q4_0, GGML_T_Q4_1, GGML_T_Q5_0, GGML_T_Q4_K,
	                            GGML_T_Q6_K};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(b->dtype, gen_wtype_name(types[i])))
			return types[i];
	return -1;
}

/* The SMs of the GPUs the engines are shaped for (H100, H200: 132): a GEMV
 * launches at least four blocks of four warps on each where it can. */
#define GEMV_SMS 132

/* A skinny GEMM's launch shape, shared by gemv_gguf and gemv16: R 2 rows a
 * warp, 4 warps, A rows in tiles of up to mt_max, and K split over the
 * block's warps while N alone gives too few blocks (wk and wv at 8B: 1024
 * rows, 128 blocks unsplit); a lane's step over K is kstep elements. */
static gp_gemv_shape gemv_shape(int64_t m, int64_t n, int64_t k, int mt_max, int kstep)
{
	gp_gemv_shape g = {.r = 2, .warps = 4, .ks = 1, .mt = m < mt_max ? (int)m : mt_max};
	const int64_t groups = (k / kstep + 31) / 32; /* a warp's steps over K, unsplit */
	g.grid_z = (int)((m + g.mt - 1) / g.mt);
	for (;;) {
		const int64_t rows = (int64_t)g.r * g.warps / g.ks;
		g.grid_x = (int)((n + rows - 1) / rows);
		if (g.ks >= g.warps || 2 * g.ks > groups || (int64_t)g.grid_x * g.grid_z >= 4 * GEMV_SMS)
			break;
		g.ks *= 2;
	}
	return g;
}

/* gemv_gguf: a lane takes one 32-element sub-block a step, 8 A rows a tile */
gp_gemv_shape gp_gemv_choose(int64_t m, int64_t n, int64_t k)
{
	return gemv_shape(m, n, k, 8, 32);
}

/* gguf_a8: C = A W^T with W in its GGUF type's planes (templates/gemv_gguf):
 * A's int8 blocks first (quant_a8 into a8), unless the op just before is a
 * GEMM on the same rows of the same input, which left them there. */
static void op_gemv(ctx *c, const char *name, int64_t m, int64_t n, int64_t k, gen_arg out,
                    gen_arg a, gen_arg w, int wt, int repeat, const char *layers)
{
	const gen_buf *wb = &c->p->bufs[w.buf];
	const int64_t nw = wb->shape[wb->rank - 2];
	const int BLK_A8 = 128;
	if (!(c->a8_op > 0 && c->a8_op == c->p->n_ops && c->a8_src.buf == a.buf &&
	      c->a8_src.offset == a.offset && c->a8_m == m && c->a8_k == k)) {
		gen_param qp[] = {PNAME, PI("M", m), PI("K", k), PI("BLOCK", BLK_A8)};
		char qn[64]; /* per layer, each once: named after the GEMM it feeds */
		snprintf(qn, sizeof(qn), "%s_a8", name);
		op_desc q = {.name = qn, .op = "quant_a8", .exec = GEN_EXEC_KERNEL,
		             .kernel = gp_kernel(c, "quant_a8", "quant_a8.cu.tmpl", qp, 4),
		             .gx = (int)((m * (k / 32) + BLK_A8 - 1) / BLK_A8), .block = BLK_A8,
		             .repeat = repeat, .layers = layers, .n_args = 2, .args = {A(c->a.a8, 0), a},
		             .bytes = (double)m * k * (2 + 1.25), .flops = 4.0 * m * k};
		gp_emit(c, &q);
	}
	const gp_gemv_shape g = gp_gemv_choose(m, n, k);
	int bb;
	const int blk = gen_wtype_block(wt, &bb);
	gen_param prm[] = {PNAME, PI("WTYPE", wt), PI("M", m), PI("N", n), PI("NW", nw), PI("K", k),
	                   PI("MT", g.mt), PI("R", g.r), PI("WARPS", g.warps), PI("KS", g.ks)};
	op_desc d = {.name = name, .op = "gemv_gguf", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "gemv_gguf", "gemv_gguf.cu.tmpl", prm, 10),
	             .gx = g.grid_x, .gz = g.grid_z, .block = 32 * g.warps, .repeat = repeat,
	             .layers = layers, .m = m, .n = n, .k = k, .n_args = 4,
	             .args = {out, a, A(c->a.a8, 0), w},
	             .bytes = (double)n * (k / blk) * bb + (double)m * k * 1.25 + (double)m * n * 4,
	             .flops = 2.0 * m * n * k};
	gp_emit(c, &d);
	c->a8_op = c->p->n_ops;
	c->a8_src = a;
	c->a8_m = m;
	c->a8_k = k;
}

/* gemv16: a lane takes 8 elements (16 bytes) a step, 16 A rows a tile */
gp_gemv_shape gp_gemv16_choose(int64_t m, int64_t n, int64_t k)
{
	return gemv_shape(m, n, k, 16, 8);
}

/* Why gemv16 cannot take this GEMM (NULL: it can): it reads 16-byte
 * chunks of 16-bit rows of A and W from the engine's own dtype */
static const char *gemv16_unfit(const ctx *c, int64_t k, gen_arg a, gen_arg w)
{
	if (c->s->dtype != GEN_DTYPE_BF16 && c->s->dtype != GEN_DTYPE_FP16)
		return "the engine's dtype is not bf16 or fp16";
	if (k % 8)
		return "k is not a multiple of 8 (16-byte rows)";
	if (a.scalar || w.scalar || a.offset % 16 || w.offset % 16)
		return "A or W does not start on 16 bytes";
	if (strcmp(c->p->bufs[w.buf].dtype, gen_dtype_name(c->s->dtype)) ||
	    strcmp(c->p->bufs[a.buf].dtype, gen_dtype_name(c->s->dtype)))
		return "A or W is not in the engine's 16-bit dtype";
	return NULL;
}

void gp_op_gemm(ctx *c, const char *name, int64_t m, int64_t n, int64_t k, gen_arg out,
                gen_arg a, gen_arg w, int repeat, const char *layers)
{
	const int wt = c->s->dtype == GEN_DTYPE_GGUF_A8 ? gp_gemm_wtype(c, w.buf, layers, c->layer0)
	                                                : -1;
	if (wt >= 0) {
		op_gemv(c, name, m, n, k, out, a, w, wt, repeat, layers);
		return;
	}
	char uri[192];
	snprintf(uri, sizeof(uri), "gemm_%s_f32acc_m%" PRId64 "_n%" PRId64 "_k%" PRId64,
	         gen_dtype_name(c->s->dtype), m, n, k);
	const double wb = gen_plan_w_bytes(c->p, w.buf, c->dt16); /* W bytes/element */
	op_desc d = {.name = name, .op = "gemm", .exec = GEN_EXEC_CUBLASLT, .uri = uri,
	             .repeat = repeat, .layers = layers, .m = m, .n = n, .k = k, .n_args = 3,
	             .args = {out, a, w},
	             .bytes = (double)n * k * wb + (double)m * k * c->dt16 + (double)m * n * 4,
	             .flops = 2.0 * m * n * k};
	/* the generated GEMV where the cost model (gen/gpu_model.h) projects it
	 * faster than cuBLASLt on both devices the engines are shaped for (the
	 * H100 the calibration is from, the H200 the project has now: the
	 * faster memory moves a shape's FMAs onto the critical path sooner),
	 * or where the spec forces it ("gemm") */
	const char *unfit = c->s->gemm == GEN_GEMM_CUBLASLT ? "" : gemv16_unfit(c, k, a, w);
	if (!unfit) {
		const gp_gemv_shape g = gp_gemv16_choose(m, n, k);
		const double bytes = (double)g.grid_z * n * k * 2 + (double)m * k * 2 + (double)m * n * 4;
		bool faster = true;
		for (int i = 0; i < 2; i++) {
			const gen_gpu *dev = i ? &gen_gpu_h200 : &gen_gpu_h100;
			faster = faster && gen_gpu_gemv16_s(dev, bytes, (double)m, (double)n, (double)k, g.r,
			                                    (double)g.grid_x * g.grid_z, NULL, NULL) <
			                   gen_gpu_gemm_s(dev, d.bytes, d.flops);
		}
		if (c->s->gemm == GEN_GEMM_GEMV16 || faster) {
			gen_param prm[] = {PNAME, PI("IS_F16", c->s->dtype == GEN_DTYPE_FP16), PI("M", m),
			                   PI("N", n), PI("K", k), PI("MT", g.mt), PI("R", g.r),
			                   PI("WARPS", g.warps), PI("KS", g.ks)};
			op_desc v = {.name = name, .op = "gemv16", .exec = GEN_EXEC_KERNEL,
			             .kernel = gp_kernel(c, "gemv16", "gemv16.cu.tmpl", prm, 9),
			             .gx = g.grid_x, .gz = g.grid_z, .block = 32 * g.warps,
			             .repeat = repeat, .layers = layers, .m = m, .n = n, .k = k,
			             .n_args = 3, .args = {out, a, w}, .bytes = bytes,
			             .flops = 2.0 * m * n * k};
			gp_emit(c, &v);
			return;
		}
	} else if (c->s->gemm == GEN_GEMM_GEMV16 && !c->rc) {
		c->rc = SW_ENOTSUP; /* the spec's request, not a planner bug (plan_build.c) */
		snprintf(c->why, sizeof(c->why), "op %s: $.gemm \"gemv16\" cannot take this GEMM (m %"
		         PRId64 ", n %" PRId64 ", k %" PRId64 "): %s; \"auto\" runs it through cuBLASLt",
		         name, m, n, k, unfit);
		return;
	}
	gp_emit(c, &d);
}

void gp_op_rmsnorm(ctx *c, const char *name, const rt_config *cfg, int64_t rows, gen_arg w,
                   int repeat, const char *layers)
{
	const act_ix *a = &c->a;
	gen_param prm[] = {PNAME, PI("DIM", cfg->dim), PI("BLOCK", BLK_RMS),
	                   {.name = "EPS", .type = GEN_PARAM_FLOAT, .f = cfg->norm_eps}};
	op_desc d = {.name = name, .op = "rmsnorm_residual", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "rmsnorm_residual_f32", "rmsnorm_residual.cu.tmpl", prm, 4),
	             .gx = (int)rows, .block = BLK_RMS, .repeat = repeat, .layers = layers,
	             .n_args = 5, .args = {A(a->xn, 0), A(a->h, 0), A(a->h, 0), A(a->delta, 0), w},
	             .bytes = 4.0 * rows * cfg->dim * 4 + cfg->dim * 4.0,
	             .flops = 5.0 * rows * cfg->dim};
	gp_emit(c, &d);
}

/* A family's post-norm (arch.h gen_arch_block: Gemma 3's sandwich norms)
 * in place on the block output delta, before the residual add the next
 * norm does: delta = rmsnorm(delta) * w. The rmsnorm_residual kernel with
 * x = r = s = y = delta and EPS = 4 eps: s = 2 delta, and 2 delta /
 * sqrt(mean(4 delta^2) + 4 eps) is delta / sqrt(mean(delta^2) + eps) bit
 * for bit (every factor a power of two: exact in fp32, barring overflow),
 * so no kernel of its own (the template lets s alias x and r, y read and
 * written by one thread). */
static void op_post_norm(ctx *c, const char *name, const rt_config *cfg, int64_t rows, gen_arg w,
                         int repeat, const char *layers)
{
	const act_ix *a = &c->a;
	gen_param prm[] = {PNAME, PI("DIM", cfg->dim), PI("BLOCK", BLK_RMS),
	                   {.name = "EPS", .type = GEN_PARAM_FLOAT, .f = 4.0f * cfg->norm_eps}};
	op_desc d = {.name = name, .op = "rmsnorm_residual", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "rmsnorm_residual_f32", "rmsnorm_residual.cu.tmpl", prm, 4),
	             .gx = (int)rows, .block = BLK_RMS, .repeat = repeat, .layers = layers,
	             .n_args = 5,
	             .args = {A(a->delta, 0), A(a->delta, 0), A(a->delta, 0), A(a->delta, 0), w},
	             .bytes = 2.0 * rows * cfg->dim * 4 + cfg->dim * 4.0,
	             .flops = 5.0 * rows * cfg->dim};
	gp_emit(c, &d);
}

/* The tree's ancestor mask rows N_BLK-T .. N_BLK-1, columns 0 .. N_BLK-1:
 * what the tree attention template reads from <NAME>_mask. */
void gen_plan_attn_mask(const rt_tree *t, int T, int n_blk, uint64_t *rows)
{
	const int mw = (n_blk + 63) / 64, first = n_blk - T;
	memset(rows, 0, (size_t)T * mw * sizeof(*rows));
	for (int r = 0; r < T; r++)
		for (int j = 0; j < n_blk; j++)
			if (rt_tree_visible(t, first + r, j))
				rows[r * mw + j / 64] |= 1ull << (j % 64);
}

/* A block drafter's visibility over its T = N_BLK = B rows: causal sees
 * the rows up to its own, bidirectional every row (rt_bd_forward). */
static void block_mask(int kind, int T, uint64_t *rows)
{
	const int mw = (T + 63) / 64;
	memset(rows, 0, (size_t)T * mw * sizeof(*rows));
	for (int r = 0; r < T; r++)
		for (int j = 0; j < T; j++)
			if (kind == GEN_MASK_BLOCK_BIDIR || j <= r)
				rows[r * mw + j / 64] |= 1ull << (j % 64);
}

void gen_plan_kernel_mask(const gen_plan *p, const gen_kernel *k, int T, int n_blk, uint64_t *rows)
{
	if (k->mask_kind == GEN_MASK_TREE)
		gen_plan_attn_mask(&p->spec->tree, T, n_blk, rows);
	else
		block_mask(k->mask_kind, T, rows);
}

/* The TREE identifier: "causal", "block_causal" / "block_bidir" (a block
 * drafter's pass), or the tree's name (filename-safe) and a hash of the
 * mask rows, so two trees that share a name (files) but not a shape get
 * different kernels. */
static void attn_tree_id(const rt_tree *t, const attn_shape *sh, int mask_kind, char *id, size_t n)
{
	if (!sh->masked) {
		snprintf(id, n, "causal");
		return;
	}
	if (mask_kind != GEN_MASK_TREE) {
		snprintf(id, n, "%s", mask_kind == GEN_MASK_BLOCK_CAUSAL ? "block_causal" : "block_bidir");
		return;
	}
	uint64_t rows[RT_TREE_MAX_NODES * RT_TREE_WORDS];
	gen_plan_attn_mask(t, sh->T, sh->n_blk, rows);
	uint64_t h = sw_fnv1a64(SW_FNV64_BASIS, rows, (size_t)sh->T * ((sh->n_blk + 63) / 64) * 8);
	char nm[25];
	int k = 0;
	for (const char *p = t->name; *p && k < 24; p++)
		nm[k++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		          (*p >= '0' && *p <= '9') ? *p : '_';
	nm[k] = 0;
	snprintf(id, n, "%s_%08x", nm, (unsigned)(h ^ (h >> 32)));
}

/* Tree attention of one layer (repeat L): _part over (KV head, context
 * split, row block), then _merge over (token, MBLOCK-thread slices of the
 * N_HEADS * HEAD_DIM / 4 float4 columns; T blocks alone would fill T of
 * 132 SMs). Bytes and flops as gen/attn_cost.h counts them at est_context:
 * _part moves the K/V of est_context + N_BLK keys (each crosses HBM once;
 * the row blocks re-read it from L2), q, and the fp32 partials of the live
 * splits; flops are what the tensor cores execute, QK and PV, 2 * 2 per
 * (row, head dim, key) over the rows padded to 16-row fragments and the
 * head dim to 16, masked block keys included (multiplied by p = 0, not
 * skipped). _merge reads the partials back and writes the 16-bit output. */
void gp_op_attention(ctx *c, const model_ix *m, const attn_shape *sh, int L,
                     const char *layers, int mask_kind)
{
	const act_ix *a = &c->a;
	const rt_config *cfg = m->cfg;
	const int hd = cfg->head_dim, nh = cfg->n_heads, nkv = cfg->n_kv_heads;
	const int mw = (sh->n_blk + 63) / 64;
	char tree_id[64];
	attn_tree_id(&c->s->tree, sh, mask_kind, tree_id, sizeof(tree_id));
	gen_param prm[] = {PNAME, {.name = "TREE", .type = GEN_PARAM_IDENT, .s = tree_id},
	                   PI("MASKED", sh->masked), PI("IS_F16", c->cast_mode), PI("HEAD_DIM", hd),
	                   PI("N_HEADS", nh), PI("N_KV_HEADS", nkv), PI("T", sh->T),
	                   PI("N_BLK", sh->n_blk), PI("MASK_WORDS", mw), PI("SPLIT", sh->split),
	                   PI("MAX_CTX", m->ctx_rows), PI("WARPS", sh->warps),
	                   PI("ROW_BLOCKS", sh->rb), PI("MBLOCK", sh->mblock),
	                   {.name = "WINDOW", .type = GEN_PARAM_INT, .i = c->window,
	                    .key_omit_zero = true}};
	int k = gp_kernel_x(c, "tree_attn", "tree_attention.cu.tmpl", prm, 16,
	                    sh->masked ? GEN_PREFIX_MASK : GEN_PREFIX_NONE, true, tree_id);
	if (!c->rc)
		c->p->kernels[k].mask_kind = sh->masked ? mask_kind : GEN_MASK_TREE;
	const gen_attn_geom g = {.T = sh->T, .n_blk = sh->n_blk, .n_heads = nh, .n_kv_heads = nkv,
	                         .head_dim = hd, .elt = c->dt16, .max_ctx = m->ctx_rows,
	                         .split = sh->split, .warps = sh->warps, .row_blocks = sh->rb,
	                         .mblock = sh->mblock};
	gen_attn_proj pr;
	gen_attn_project(&g, c->s->est_context, &pr);
	op_desc pd = {.name = "attention", .op = "tree_attention", .exec = GEN_EXEC_KERNEL,
	              .kernel = k, .entry = "_part", .gx = nkv, .gy = sh->ctx_splits + sh->blk_splits,
	              .gz = sh->zt, .block = 32 * sh->warps, .repeat = L,
	              .layers = layers, .n_args = 6,
	              .args = {A(a->part_o, 0), A(a->part_ml, 0), A(a->q16, 0), A(m->k_cache, 0),
	                       A(m->v_cache, 0), A(a->state, m->len_word * 4)},
	              .bytes = pr.kv + pr.q + pr.part, .flops = pr.flops};
	gp_emit(c, &pd);
	op_desc md = {.name = "attention_merge", .op = "tree_attention", .exec = GEN_EXEC_KERNEL,
	              .kernel = k, .entry = "_merge", .gx = sh->T,
	              .gy = (nh * hd / 4 + sh->mblock - 1) / sh->mblock, .block = sh->mblock,
	              .repeat = L, .layers = layers, .n_args = 4,
	              .args = {A(a->attn, 0), A(a->part_o, 0), A(a->part_ml, 0),
	                       A(a->state, m->len_word * 4)},
	              .bytes = pr.part + pr.out, .flops = (double)pr.live * sh->T * nh * (3.0 * hd + 8)};
	gp_emit(c, &md);
}

/* A scratch buffer of at least `words` 32-bit words for the sampling
 * kernels that spread a row over many blocks (kernels/sample_layout.h):
 * the one named `name` when it is large enough, else a new one (the ops run
 * one after another, so they share it). -1 on failure (c->rc set). */
static int sample_scratch(ctx *c, const char *name, int64_t words)
{
	const int i = gen_plan_find_buf(c->p, name);
	if (i >= 0 && c->p->bufs[i].bytes >= words * 4)
		return i;
	char nm[64];
	snprintf(nm, sizeof(nm), i >= 0 ? "%s_%lld" : "%s", name, (long long)words);
	const int j = gen_plan_find_buf(c->p, nm);
	if (j >= 0)
		return j;
	const int k = gp_add_buf(c->p, nm, "activation", "i32", 1, words, 0, 0, 0);
	if (k < 0 && !c->rc)
		c->rc = SW_ENOMEM;
	return k;
}

/* Logits processing (temperature, top-k, top-p) of `rows` rows: one launch
 * of SW_LOGITS_PHASES phases, each a block per (row, slice) (grid phases *
 * slices x rows, kernels/sample_layout.h; the slices a run-time value of
 * the grid, so one kernel per vocabulary serves every row count), the
 * slices' partials in a scratch the ops share. The three values are run-time words (`params`, a
 * block of the "sampling" buffer, kernels/engine_state.h), not constants:
 * one kernel serves every request's setting. Bytes: the logits read and the
 * probabilities written once from HBM (the phases re-read the row from L2:
 * 26 rows of a 128K vocabulary are 13 MB), the slices' records written and
 * read. Flops: ~90 per element (two expf of ~20 each, the key and the
 * histogram's atomics in the exp phase and ~3 levels, the write). */
void gp_op_logits(ctx *c, const char *name, int V, int rows, gen_arg out, gen_arg in,
                  gen_arg params)
{
	const int S = sw_logits_slices(rows, V, BLK_LOGITS);
	const int scratch = sample_scratch(c, "logits_scratch", sw_logits_scratch_words(rows, S));
	gen_param prm[] = {PNAME, PI("V", V), PI("BLOCK", BLK_LOGITS)};
	op_desc d = {.name = name, .op = "logits_process", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "logits", "logits_process.cu.tmpl", prm, 3),
	             .gx = SW_LOGITS_PHASES * S, .gy = rows, .block = BLK_LOGITS, .n_args = 4,
	             .args = {out, in, params, A(scratch < 0 ? 0 : scratch, 0)},
	             .bytes = 2.0 * rows * V * 4 + 8.0 * sw_logits_scratch_words(rows, S),
	             .flops = 90.0 * rows * V};
	gp_emit(c, &d);
}

/* Expansion of tree level d's nodes into level d + 1 (tree_expand, grid
 * SLICES x nodes: each node's q row split into slices reduced to candidates
 * in parallel, the last block of a node merging them: the q row once from
 * HBM, k best-below passes over a slice (top-k, race) or its chunk sums)
 * from q rows of V entries: node u's row u, or with by_depth row depth(u)
 * (a block drafter's per-depth rows); ids_buf >= 0: entry v stands for id
 * ids_buf[v] (MAPPED 1, a head's d2t). The scratch is sized for the tree's
 * largest level (kernels/sample_layout.h), shared by the levels. */
void gp_op_expand(ctx *c, int d, int V, int rule, bool by_depth, int q_buf, int ids_buf)
{
	const act_ix *a = &c->a;
	const rt_tree *t = &c->s->tree;
	const int l0 = t->level_start[d], nd = t->level_start[d + 1] - l0;
	int kc = t->level_start[d + 2] - t->level_start[d + 1], kmax = 1;
	for (int i = l0; i < l0 + nd; i++)
		kmax = t->n_children[i] > kmax ? t->n_children[i] : kmax;
	const int S = sw_expand_slices(nd, V, BLK_EXPAND);
	int64_t words = 0; /* the largest level's need */
	for (int e = 0; e < t->depth_max; e++) {
		const int n = t->level_start[e + 1] - t->level_start[e];
		int km = 1;
		for (int i = t->level_start[e]; i < t->level_start[e + 1]; i++)
			km = t->n_children[i] > km ? t->n_children[i] : km;
		words = gp_max64(words, sw_expand_scratch_words(rule, t->n, n,
		                                             sw_expand_slices(n, V, BLK_EXPAND), km,
		                                             BLK_EXPAND));
	}
	const int scratch = sample_scratch(c, "expand_scratch", words);
	gen_param prm[] = {PNAME, PI("N_NODES", t->n), PI("V", V), PI("RULE", rule),
	                   PI("LEVEL_BEGIN", l0), PI("BLOCK", BLK_EXPAND), PI("Q_BY_DEPTH", by_depth),
	                   PI("MAPPED", ids_buf >= 0), PI("SLICES", S), PI("KMAX", kmax)};
	/* the candidates (or chunk sums) written by every block and read by the
	 * merging one */
	const double rec = 8.0 * (sw_expand_scratch_words(rule, t->n, nd, S, kmax, BLK_EXPAND) - t->n);
	/* per entry: each best-below round recomputes its key: the race's a
	 * Philox draw (10 rounds) and a double log and divide, ~100; top-k's a
	 * compare; sampling sums once (the walks are a chunk a child) */
	const double per = rule == 2 ? 10.0 + 100.0 * kmax : rule == 3 ? 10.0 + 200.0
	                   : rule == 0 ? 4.0 + 4.0 * kmax : 4.0;
	op_desc od = {.name = "expand", .op = "tree_expand", .exec = GEN_EXEC_KERNEL,
	              .kernel = gp_kernel_x(c, "expand", "tree_expand.cu.tmpl", prm, 10, GEN_PREFIX_PHILOX,
	                                 false, NULL),
	              .gx = S, .gy = nd, .block = BLK_EXPAND, .n_args = 7,
	              .args = {A(a->tree_tokens, 0), A(q_buf, 0), A(a->tree_table, 0),
	                       A(a->sampling, 4 * RT_SP_SEED_LO), A(a->iter, 0),
	                       A(ids_buf >= 0 ? ids_buf : a->tree_table, 0), A(scratch < 0 ? 0 : scratch, 0)},
	              .bytes = (double)nd * V * (ids_buf >= 0 ? 8 : 4) + kc * 4.0 + t->n * 20.0 + rec,
	              .flops = (double)nd * V * per};
	gp_emit(c, &od);
}

/* q over the target's ids (q_target through t2d; 0 off the map) of rows
 * rows of Vd entries: a mapped draft vocabulary's q where expansion or
 * verification reads it over all V ids (the host decoder's scatter_q). */
void gp_op_q_target(ctx *c, int rows, int64_t Vd, gen_arg out, gen_arg q, gen_arg t2d)
{
	const int64_t V = c->s->target.cfg.vocab;
	gen_param prm[] = {PNAME, PI("DEPTHS", rows), PI("VD", Vd), PI("V", V), PI("BLOCK", BLK_QTGT)};
	op_desc d = {.name = "q_target", .op = "q_target", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "q_target", "q_target.cu.tmpl", prm, 5),
	             .gx = (int)((V + BLK_QTGT - 1) / BLK_QTGT), .gy = rows, .block = BLK_QTGT,
	             .n_args = 3, .args = {out, q, t2d},
	             .bytes = (double)rows * (V + Vd) * 4 + V * 4.0, .flops = 0};
	gp_emit(c, &d);
}

/* The engine's bookkeeping kernel (templates/step.cu.tmpl, layout in
 * runtime/engine_state.h): MODE 0 tree_prep, 1 catchup_prep, 2 iter_end. One
 * thread block; every mode takes the same ten arguments. */
void gp_op_step(ctx *c, const char *name, int mode, bool has_hist)
{
	const act_ix *a = &c->a;
	const rt_tree *t = &c->s->tree;
	gen_param prm[] = {PNAME, PI("MODE", mode), PI("N_NODES", t->n), PI("RING", RING),
	                   PI("MAX_CTX", c->s->max_context), PI("HAS_HIST", has_hist),
	                   PI("BLOCK", BLK_STEP)};
	op_desc d = {.name = name, .op = "step", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "step", "step.cu.tmpl", prm, 7), .gx = 1, .block = BLK_STEP,
	             .n_args = 10,
	             .args = {A(a->state, 0), A(a->iter, 0), A(a->tree_tokens, 0), A(a->pos, 0),
	                      A(a->tokens, 0), A(a->tree_table, 0), A(a->counts, 0),
	                      A(a->accept_path, 0), A(a->emitted, 0),
	                      A(has_hist ? a->ngram_hist : a->state, 0)},
	             .bytes = 64.0 * 4 + t->n * 12.0, .flops = 0};
	gp_emit(c, &d);
}


/* gguf_a8: whether the GEMM on weight buffer w (a per-layer run's, from
 * c->layer0, or the LM head's) reads int8 blocks (gemv_gguf), so that the
 * op writing its input writes them too. */
static bool gemm_a8(const ctx *c, int w, const char *layers)
{
	return c->s->dtype == GEN_DTYPE_GGUF_A8 && w >= 0 && gp_gemm_wtype(c, w, layers, c->layer0) >= 0;
}

/* After an op that wrote rows x width of x16's 16-bit rows as int8 blocks
 * into a8: the next GEMM on them quantizes nothing (op_gemv). */
static void a8_written(ctx *c, int64_t rows, int64_t width)
{
	c->a8_op = c->p->n_ops;
	c->a8_src = A(c->a.x16, 0);
	c->a8_m = rows;
	c->a8_k = width;
}

/* The residual add + RMSNorm of the rows (h += delta, then its norm times
 * w) into the next GEMM's 16-bit input x16 (templates/rmsnorm_cast: the
 * norm and the cast of the unfused layer in one launch); a8: also its int8
 * blocks (gguf_a8: no quant_a8 before that GEMM). */
static void op_norm_cast(ctx *c, const char *name, const rt_config *cfg, int64_t rows, gen_arg w,
                         bool a8, int repeat, const char *layers)
{
	const act_ix *a = &c->a;
	const int64_t D = cfg->dim;
	gen_param prm[] = {PNAME, PI("DIM", D), PI("BLOCK", BLK_RMS),
	                   PF("EPS", cfg->norm_eps), PI("IS_F16", c->cast_mode), PI("A8", a8)};
	op_desc d = {.name = name, .op = "rmsnorm_cast", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "rmsnorm_cast", "rmsnorm_cast.cu.tmpl", prm, 6),
	             .gx = (int)rows, .block = BLK_RMS, .repeat = repeat, .layers = layers,
	             .n_args = 6,
	             .args = {A(a->x16, 0), A(a->h, 0), A(a->h, 0), A(a->delta, 0), w,
	                      a8 ? A(a->a8, 0) : A(a->x16, 0)},
	             .bytes = (double)rows * D * (3 * 4 + c->dt16 + (a8 ? 1.25 : 0)) + D * 4.0,
	             .flops = 5.0 * rows * D};
	gp_emit(c, &d);
	if (a8)
		a8_written(c, rows, D);
}

/* SwiGLU (the family's GeGLU: ACT 1) of the rows of gate and up (ld floats
 * a row: F, or 2F where one GEMM wrote both) into w_down's 16-bit input
 * (templates/swiglu_cast: the activation and the cast in one launch); a8
 * as op_norm_cast's. */
static void op_swiglu_cast(ctx *c, const model_ix *m, int64_t rows, gen_arg gate, gen_arg up,
                           int64_t ld, bool a8, int repeat, const char *layers)
{
	const int64_t F = m->cfg->ffn_dim;
	gen_param prm[] = {PNAME, PI("FFN", F), PI("LD", ld), PI("ACT", m->blk.act),
	                   PI("IS_F16", c->cast_mode), PI("A8", a8), PI("BLOCK", BLK_SWIGLU)};
	const int v = F % 4 == 0 ? 4 : 1;
	op_desc d = {.name = "swiglu", .op = "swiglu_cast", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "swiglu_cast", "swiglu_cast.cu.tmpl", prm, 7),
	             .gx = (int)((F + BLK_SWIGLU * v - 1) / (BLK_SWIGLU * v)), .gy = (int)rows,
	             .block = BLK_SWIGLU, .repeat = repeat, .layers = layers, .n_args = 4,
	             .args = {A(c->a.x16, 0), gate, up, a8 ? A(c->a.a8, 0) : A(c->a.x16, 0)},
	             .bytes = (double)rows * F * (2 * 4 + c->dt16 + (a8 ? 1.25 : 0)),
	             .flops = 4.0 * rows * F};
	gp_emit(c, &d);
	if (a8)
		a8_written(c, rows, F);
}

static int64_t arch_param(const gen_arch_op *o, const char *name, int64_t def)
{
	for (int i = 0; i < o->n_params; i++)
		if (o->params[i].name && !strcmp(o->params[i].name, name))
			return o->params[i].i;
	return def;
}

static float arch_paramf(const gen_arch_op *o, const char *name, float def)
{
	for (int i = 0; i < o->n_params; i++)
		if (o->params[i].name && !strcmp(o->params[i].name, name))
			return o->params[i].f;
	return def;
}

/* The q/k/v rows (q, k, v: one GEMM's rows with fused, else their own
 * buffers) into attention's inputs, one templates/qkv_rope launch: the
 * family's in-place ops of gen_arch.qkv_ops (Llama's rope on q and k;
 * Qwen's and Gemma's head_prep on q, k and v) read as that kernel's steps,
 * q into q16, k and v into the cache at slots ctx + row0 .. (ctx = this
 * cache's device-side length: the tree's K/V follow the context, where
 * attention reads them and KV commit compacts them). A family op the
 * kernel cannot state is the planner's error (c->rc). */
static void op_qkv_rope(ctx *c, const model_ix *m, const fwd_opt *o, gen_arg q, gen_arg k,
                        gen_arg v, bool fused, int L)
{
	const act_ix *a = &c->a;
	const rt_config *cfg = m->cfg;
	const int64_t rows = o->rows, row0 = o->row0, hd = cfg->head_dim;
	const int64_t qd = (int64_t)cfg->n_heads * hd, kvd = (int64_t)cfg->n_kv_heads * hd;
	const int dt = c->dt16;
	const gen_arg pos = o->mode == FWD_BLOCK ? A(o->pos_buf, 0) : A(a->pos, row0 * 4);
	gen_arch_op xo[GEN_ARCH_MAX_OPS];
	const int nxo = m->arch->qkv_ops(cfg, rows, xo);
	/* per projection (q, k, v): bias and norm weights (family weight
	 * indices), rope (0, 1 adjacent, 2 NeoX); the frequencies; q's scale */
	int bias[3] = {-1, -1, -1}, norm[3] = {-1, -1, -1}, rope[3] = {0, 0, 0}, freq = -2;
	float scale = 1.0f;
	double flops = 0;
	bool ok = true;
	for (int i = 0; i < nxo; i++) {
		const int x = xo[i].x;
		int f = -1;
		if (!strcmp(xo[i].op, "rope")) {
			rope[x] = 1;
			ok = ok && arch_param(&xo[i], "ROT_DIM", hd) == hd;
		} else if (!strcmp(xo[i].op, "head_prep")) {
			if (arch_param(&xo[i], "BIAS", 0))
				bias[x] = xo[i].w[0];
			if (arch_param(&xo[i], "NORM", 0))
				norm[x] = xo[i].w[1];
			rope[x] = arch_param(&xo[i], "ROPE", 0) ? 2 : 0;
			if (x == GEN_QKV_Q)
				scale = arch_paramf(&xo[i], "SCALE", 1.0f);
			else
				ok = ok && arch_paramf(&xo[i], "SCALE", 1.0f) == 1.0f;
		} else {
			ok = false;
		}
		if (rope[x])
			f = xo[i].freq;
		ok = ok && (!rope[x] || freq == -2 || freq == f);
		if (rope[x])
			freq = f;
		flops += xo[i].flops;
	}
	/* the kernel's steps: one bias flag for q, k and v, one norm and one
	 * rope kind for q and k, none on v but its bias */
	ok = ok && rope[0] == rope[1] && rope[2] == 0 && (norm[0] >= 0) == (norm[1] >= 0) &&
	     norm[2] < 0 && (bias[0] >= 0) == (bias[1] >= 0) && (bias[0] >= 0) == (bias[2] >= 0) &&
	     !(rope[0] == 1 && (bias[0] >= 0 || norm[0] >= 0 || scale != 1.0f)) &&
	     !(bias[0] >= 0 && norm[0] >= 0); /* one weight argument a projection */
	if (!ok && !c->rc) {
		c->rc = SW_EINVAL;
		snprintf(c->why, sizeof(c->why), "the %s family's q/k/v ops are not steps qkv_rope "
		         "takes (templates/qkv_rope.cu.tmpl)", m->arch->name);
		return;
	}
	const gen_arg inv = A(freq >= 0 ? m->xw[freq] : m->inv_freq, 0);
	gen_arg w[3];
	for (int x = 0; x < 3; x++)
		w[x] = A(bias[x] >= 0 ? m->xw[bias[x]] : norm[x] >= 0 ? m->xw[norm[x]] : m->inv_freq, 0);
	gen_param prm[] = {PNAME, PI("N_HEADS", cfg->n_heads), PI("N_KV_HEADS", cfg->n_kv_heads),
	                   PI("HEAD_DIM", hd), PI("FUSED", fused), PI("ROWS", rows), PI("ROW0", row0),
	                   PI("MAX_CTX", m->ctx_rows), PI("IS_F16", c->cast_mode),
	                   PI("BIAS", bias[0] >= 0), PI("NORM", norm[0] >= 0), PI("ROPE", rope[0]),
	                   PF("EPS", cfg->norm_eps), PF("SCALE", scale), PI("BLOCK", BLK_QKV)};
	op_desc d = {.name = "qkv_rope", .op = "qkv_rope", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "qkv_rope", "qkv_rope.cu.tmpl", prm, 15),
	             .gx = (int)rows, .block = BLK_QKV, .repeat = L, .layers = o->layers,
	             .n_args = 12,
	             .args = {A(a->q16, 0), A(m->k_cache, row0 * kvd * dt),
	                      A(m->v_cache, row0 * kvd * dt), q, k, v, pos, inv,
	                      A(a->state, m->len_word * 4), w[0], w[1], w[2]},
	             /* the rows read once, q and the new K/V written once, the
	              * positions and the small tables */
	             .bytes = (double)rows * (qd + 2 * kvd) * (4 + dt) + rows * 4.0 + hd / 2 * 4.0 +
	                      (bias[0] >= 0 ? (qd + 2 * kvd) * 4.0 : 0) + (norm[0] >= 0 ? 2 * hd * 4.0 : 0),
	             .flops = flops};
	gp_emit(c, &d);
}

/* The layer as separate launches (spec "fuse": false): the norm, its cast,
 * q, k and v GEMMs, the family's in-place q/k/v ops, kv_store, q's cast,
 * gate and up GEMMs, SwiGLU and its cast, each a launch of its own. The
 * fused layer (layer_ops) must give these bits (tests/test_engine_fuse.c). */
static void layer_ops_unfused(ctx *c, const model_ix *m, const fwd_opt *o, int L)
{
	const gen_spec *s = c->s;
	const act_ix *a = &c->a;
	const rt_config *cfg = m->cfg;
	const int64_t D = cfg->dim, F = cfg->ffn_dim, hd = cfg->head_dim, rows = o->rows, row0 = o->row0;
	const int64_t qd = (int64_t)cfg->n_heads * hd, kvd = (int64_t)cfg->n_kv_heads * hd;
	const int dt = c->dt16;
	const char *layers = o->layers;
	const gen_arg pos = o->mode == FWD_BLOCK ? A(o->pos_buf, 0) : A(a->pos, row0 * 4);

	gp_op_rmsnorm(c, "attn_norm", cfg, rows, A(m->attn_norm, 0), L, layers);
	gp_op_cast(c, "attn_in_cast", rows, D, A(a->x16, 0), A(a->xn, 0), L, layers);
	gp_op_gemm(c, "wq", rows, qd, D, A(a->q, 0), A(a->x16, 0), A(m->wq, 0), L, layers);
	gp_op_gemm(c, "wk", rows, kvd, D, A(a->k, 0), A(a->x16, 0), A(m->wk, 0), L, layers);
	gp_op_gemm(c, "wv", rows, kvd, D, A(a->v, 0), A(a->x16, 0), A(m->wv, 0), L, layers);
	/* the family's in-place ops on q, k, v (gen/arch.h: Llama's RoPE,
	 * Qwen's biases, q/k norms and NeoX RoPE) */
	gen_arch_op xo[GEN_ARCH_MAX_OPS];
	const int nxo = m->arch->qkv_ops(cfg, rows, xo);
	for (int i = 0; i < nxo; i++) {
		const int xb = xo[i].x == GEN_QKV_Q ? a->q : xo[i].x == GEN_QKV_K ? a->k : a->v;
		op_desc d = {.name = xo[i].name, .op = xo[i].op, .exec = GEN_EXEC_KERNEL,
		             .kernel = gp_kernel(c, xo[i].kop, xo[i].tmpl, xo[i].params, xo[i].n_params),
		             .gx = (int)rows, .block = xo[i].block, .repeat = L, .layers = layers,
		             .n_args = xo[i].n_args,
		             .args = {A(xb, 0), pos,
		                      A(xo[i].freq >= 0 ? m->xw[xo[i].freq] : m->inv_freq, 0)},
		             .bytes = xo[i].bytes, .flops = xo[i].flops};
		for (int j = 0; j < 2 && xo[i].n_args == 5; j++)
			d.args[3 + j] = A(xo[i].w[j] >= 0 ? m->xw[xo[i].w[j]] : m->inv_freq, 0);
		gp_emit(c, &d);
	}
	/* new K/V rows: into the cache at slots ctx + row0 .. ctx + row0 + rows - 1
	 * (ctx = this cache's device-side length): the tree's K/V follow the
	 * context, where attention reads them and KV commit compacts them */
	{
		gen_param prm[] = {PNAME, PI("ROWS", rows), PI("KVD", kvd), PI("ROW0", row0),
		                   PI("MAX_CTX", m->ctx_rows), PI("IS_F16", c->cast_mode),
		                   PI("BLOCK", BLK_KVSTORE)};
		int64_t v8 = kvd % 8 == 0 ? 8 : 1;
		op_desc kv = {.name = "kv_store", .op = "kv_store", .exec = GEN_EXEC_KERNEL,
		              .kernel = gp_kernel(c, "kv_store", "kv_store.cu.tmpl", prm, 7),
		              .gx = (int)((rows * kvd / v8 + BLK_KVSTORE - 1) / BLK_KVSTORE),
		              .block = BLK_KVSTORE, .repeat = L, .layers = layers, .n_args = 5,
		              .args = {A(m->k_cache, row0 * kvd * dt), A(m->v_cache, row0 * kvd * dt),
		                       A(a->k, 0), A(a->v, 0), A(a->state, m->len_word * 4)},
		              .bytes = 2.0 * rows * kvd * (4 + dt)};
		gp_emit(c, &kv);
	}
	/* attention: cached context + the block's rows (causal chunk, the staged
	 * tree levels under the baked ancestor mask, or a drafter block under
	 * its visibility table); q in 16 bits */
	gp_op_cast(c, "q_cast", rows, qd, A(a->q16, 0), A(a->q, 0), L, layers);
	attn_shape sh = gp_attn_choose(cfg, (int)rows, (int)(o->mode == FWD_TREE ? row0 + rows : rows),
	                               s, dt, o->mode != FWD_PREFILL, m->ctx_rows);
	gp_op_attention(c, m, &sh, L, layers, o->mode == FWD_BLOCK ? o->mask_kind : GEN_MASK_TREE);
	gp_op_gemm(c, "wo", rows, D, qd, A(a->delta, 0), A(a->attn, 0), A(m->wo, 0), L, layers);
	if (m->blk.post_attn >= 0)
		op_post_norm(c, "post_attn_norm", cfg, rows, A(m->xw[m->blk.post_attn], 0), L, layers);
	gp_op_rmsnorm(c, "ffn_norm", cfg, rows, A(m->ffn_norm, 0), L, layers);
	gp_op_cast(c, "ffn_in_cast", rows, D, A(a->x16, 0), A(a->xn, 0), L, layers);
	gp_op_gemm(c, "w_gate", rows, F, D, A(a->gate, 0), A(a->x16, 0), A(m->w_gate, 0), L, layers);
	gp_op_gemm(c, "w_up", rows, F, D, A(a->up, 0), A(a->x16, 0), A(m->w_up, 0), L, layers);
	{
		/* SwiGLU, or the family's GeGLU (ACT 1) */
		gen_param prm[] = {PNAME, PI("FFN", F), PI("ACT", m->blk.act), PI("BLOCK", BLK_SWIGLU)};
		int v = F % 4 == 0 ? 4 : 1;
		op_desc d = {.name = "swiglu", .op = "swiglu", .exec = GEN_EXEC_KERNEL,
		             .kernel = gp_kernel(c, "swiglu_f32", "swiglu.cu.tmpl", prm, 4),
		             .gx = (int)((F + BLK_SWIGLU * v - 1) / (BLK_SWIGLU * v)), .gy = (int)rows,
		             .block = BLK_SWIGLU, .repeat = L, .layers = layers, .n_args = 3,
		             .args = {A(a->gate, 0), A(a->gate, 0), A(a->up, 0)},
		             .bytes = 3.0 * rows * F * 4, .flops = 4.0 * rows * F};
		gp_emit(c, &d);
	}
	gp_op_cast(c, "ffn_mid_cast", rows, F, A(a->x16, 0), A(a->gate, 0), L, layers);
	gp_op_gemm(c, "w_down", rows, D, F, A(a->delta, 0), A(a->x16, 0), A(m->w_down, 0), L, layers);
	if (m->blk.post_ffn >= 0)
		op_post_norm(c, "post_ffn_norm", cfg, rows, A(m->xw[m->blk.post_ffn], 0), L, layers);
}

/* Layers layer0 .. layer0 + L - 1 of the per-layer block (c->layer0 set by
 * the caller): each op repeated L times, a layer's slice each. The norms
 * write the GEMMs' 16-bit inputs (rmsnorm_cast), q/k/v and gate/up are one
 * GEMM each where the weights are fused (gp_model_layers), the family's
 * q/k/v steps, the K/V store and q's cast one launch (qkv_rope), SwiGLU
 * writes w_down's input (swiglu_cast): 10 launches a layer where both
 * pairs are fused (12 with Gemma 3's post-norms), 13 where neither is;
 * spec "fuse": false, layer_ops_unfused's 16 (18). */
static void layer_ops(ctx *c, const model_ix *m, const fwd_opt *o, int L)
{
	const gen_spec *s = c->s;
	const act_ix *a = &c->a;
	const rt_config *cfg = m->cfg;
	const int64_t D = cfg->dim, F = cfg->ffn_dim, hd = cfg->head_dim, rows = o->rows, row0 = o->row0;
	const int64_t qd = (int64_t)cfg->n_heads * hd, kvd = (int64_t)cfg->n_kv_heads * hd;
	const int dt = c->dt16;
	const char *layers = o->layers;

	if (!s->fuse) {
		layer_ops_unfused(c, m, o, L);
		return;
	}
	op_norm_cast(c, "attn_norm", cfg, rows, A(m->attn_norm, 0),
	             gemm_a8(c, m->wqkv >= 0 ? m->wqkv : m->wq, layers), L, layers);
	if (m->wqkv >= 0) {
		gp_op_gemm(c, "wqkv", rows, qd + 2 * kvd, D, A(a->qkv, 0), A(a->x16, 0), A(m->wqkv, 0), L,
		           layers);
		op_qkv_rope(c, m, o, A(a->qkv, 0), A(a->qkv, qd * 4), A(a->qkv, (qd + kvd) * 4), true, L);
	} else {
		gp_op_gemm(c, "wq", rows, qd, D, A(a->q, 0), A(a->x16, 0), A(m->wq, 0), L, layers);
		gp_op_gemm(c, "wk", rows, kvd, D, A(a->k, 0), A(a->x16, 0), A(m->wk, 0), L, layers);
		gp_op_gemm(c, "wv", rows, kvd, D, A(a->v, 0), A(a->x16, 0), A(m->wv, 0), L, layers);
		op_qkv_rope(c, m, o, A(a->q, 0), A(a->k, 0), A(a->v, 0), false, L);
	}
	/* attention: cached context + the block's rows (causal chunk, the staged
	 * tree levels under the baked ancestor mask, or a drafter block under
	 * its visibility table); q in 16 bits */
	attn_shape sh = gp_attn_choose(cfg, (int)rows, (int)(o->mode == FWD_TREE ? row0 + rows : rows),
	                               s, dt, o->mode != FWD_PREFILL, m->ctx_rows);
	gp_op_attention(c, m, &sh, L, layers, o->mode == FWD_BLOCK ? o->mask_kind : GEN_MASK_TREE);
	gp_op_gemm(c, "wo", rows, D, qd, A(a->delta, 0), A(a->attn, 0), A(m->wo, 0), L, layers);
	if (m->blk.post_attn >= 0)
		op_post_norm(c, "post_attn_norm", cfg, rows, A(m->xw[m->blk.post_attn], 0), L, layers);
	op_norm_cast(c, "ffn_norm", cfg, rows, A(m->ffn_norm, 0),
	             gemm_a8(c, m->w_gate_up >= 0 ? m->w_gate_up : m->w_gate, layers), L, layers);
	if (m->w_gate_up >= 0) {
		gp_op_gemm(c, "w_gate_up", rows, 2 * F, D, A(a->gu, 0), A(a->x16, 0), A(m->w_gate_up, 0),
		           L, layers);
		op_swiglu_cast(c, m, rows, A(a->gu, 0), A(a->gu, F * 4), 2 * F,
		               gemm_a8(c, m->w_down, layers), L, layers);
	} else {
		gp_op_gemm(c, "w_gate", rows, F, D, A(a->gate, 0), A(a->x16, 0), A(m->w_gate, 0), L,
		           layers);
		gp_op_gemm(c, "w_up", rows, F, D, A(a->up, 0), A(a->x16, 0), A(m->w_up, 0), L, layers);
		op_swiglu_cast(c, m, rows, A(a->gate, 0), A(a->up, 0), F, gemm_a8(c, m->w_down, layers),
		               L, layers);
	}
	gp_op_gemm(c, "w_down", rows, D, F, A(a->delta, 0), A(a->x16, 0), A(m->w_down, 0), L, layers);
	if (m->blk.post_ffn >= 0)
		op_post_norm(c, "post_ffn_norm", cfg, rows, A(m->xw[m->blk.post_ffn], 0), L, layers);
}

/* The attention window of layer l: the family's sliding window on its
 * sliding layers (Gemma 3's local ones, rt_config_layer_sliding), 0 on the
 * rest and where the window covers every position the cache holds (it
 * would cut nothing: the kernels and their keys stay those without one). */
static int layer_window(const model_ix *m, int l)
{
	const rt_config *cfg = m->cfg;
	if (cfg->swa_window <= 0 || !rt_config_layer_sliding(cfg, l) || cfg->swa_window >= m->ctx_rows)
		return 0;
	return cfg->swa_window;
}

/* gguf_a8: the GGUF types of layer l's GEMM weights (5 bits a field: 9
 * fields, 45 bits), so
 * that a run of layers shares each GEMM's kernel (a Q4_K_M file's Q6_K and
 * Q4_K layers of attn_v and ffn_down are runs of their own); 0 else. */
static uint64_t layer_wtypes(const ctx *c, const model_ix *m, const fwd_opt *o, int l)
{
	if (c->s->dtype != GEN_DTYPE_GGUF_A8)
		return 0;
	const int f[] = {m->wq, m->wk, m->wv, m->wqkv, m->wo, m->w_gate, m->w_up, m->w_gate_up,
	                 m->w_down};
	uint64_t sig = 0;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		sig = sig << 5 | (uint64_t)(f[i] >= 0 ? gp_gemm_wtype(c, f[i], o->layers, l) + 1 : 0);
	return sig;
}

/* Layers l0 .. l1 - 1 in runs of one attention window each (Gemma 3: five
 * sliding layers, then a global one), layer_ops per run. */
static void layer_runs(ctx *c, const model_ix *m, const fwd_opt *o, int l0, int l1)
{
	while (l0 < l1) {
		int e = l0 + 1;
		while (e < l1 && layer_window(m, e) == layer_window(m, l0) &&
		       layer_wtypes(c, m, o, e) == layer_wtypes(c, m, o, l0))
			e++;
		c->layer0 = l0;
		c->window = layer_window(m, l0);
		layer_ops(c, m, o, e - l0);
		c->layer0 = 0;
		c->window = 0;
		l0 = e;
	}
}

/* A tapped layer's output (h + delta: the residual add is deferred to the
 * next norm) into slot `slot` of every row's features. */
static void op_feature_tap(ctx *c, int64_t rows, int64_t dim, int n_taps, int slot)
{
	const act_ix *a = &c->a;
	gen_param prm[] = {PNAME, PI("ROWS", rows), PI("DIM", dim), PI("N_TAPS", n_taps),
	                   PI("SLOT", slot), PI("BLOCK", BLK_TAP)};
	op_desc d = {.name = "feature_tap", .op = "feature_tap", .exec = GEN_EXEC_KERNEL,
	             .kernel = gp_kernel(c, "feature_tap", "feature_tap.cu.tmpl", prm, 6),
	             .gx = (int)rows, .block = BLK_TAP, .n_args = 3,
	             .args = {A(a->taps, 0), A(a->h, 0), A(a->delta, 0)},
	             .bytes = 3.0 * rows * dim * 4, .flops = (double)rows * dim};
	gp_emit(c, &d);
}

/* One model forward over `rows` token rows starting at row0 of the tree (or
 * of the prefill chunk, or a drafter block): embedding, the layers (in
 * segments that end at each tapped layer, a feature_tap after each), final
 * norm, LM head over lm_rows rows (the last ones) into logits at
 * logits_off. */
void gp_forward(ctx *c, const model_ix *m, const fwd_opt *o)
{
	const act_ix *a = &c->a;
	const rt_config *cfg = m->cfg;
	const int64_t D = cfg->dim, rows = o->rows, row0 = o->row0;
	const int L = m->n_layers, dt = c->dt16;
	const int tok_buf = o->mode == FWD_PREFILL ? a->tokens : a->tree_tokens;

	const int et = gp_gemm_wtype(c, m->tok_embd, NULL, 0);
	if (o->mode == FWD_BLOCK) {
		o->embed(c, m, o);
	} else if (et >= 0) {
		/* the table in its file's own type (gguf_a8; gp_model_bufs): the
		 * token's row dequantized from the planes, times the scale, into
		 * the fp32 residual stream, the ids as embedding16's */
		int bb;
		const int blk = gen_wtype_block(et, &bb);
		gen_param prm[] = {PNAME, PI("WTYPE", et), PI("DIM", D), PI("N_ROWS", m->embd_rows),
		                   PI("N_IDS", c->s->target.cfg.vocab),
		                   {.name = "SCALE", .type = GEN_PARAM_FLOAT, .f = m->blk.embd_scale},
		                   PI("BLOCK", BLK_EMB)};
		op_desc emb = {.name = "embedding", .op = "embedding_gguf", .exec = GEN_EXEC_KERNEL,
		               .kernel = gp_kernel(c, "embedding_gguf", "embedding_gguf.cu.tmpl", prm, 7),
		               .gx = (int)rows, .block = BLK_EMB, .n_args = 4,
		               .args = {A(a->h, 0), A(m->tok_embd, 0), A(tok_buf, row0 * 4), A(a->err, 0)},
		               .bytes = rows * 4.0 + (double)rows * D / blk * bb + (double)rows * D * 4};
		gp_emit(c, &emb);
	} else {
		/* embedding: a 16-bit table gather into the fp32 residual stream.
		 * Every id the target can commit is embedded: a draft model whose
		 * vocabulary is a prefix of the target's (Qwen2-0.5B's 151936 under
		 * Qwen2-7B's 152064) embeds the ids beyond its table as a zero row
		 * (N_IDS); rows times the family's scale (Gemma 3: sqrt(dim)) */
		gen_param prm[] = {PNAME, PI("DIM", D), PI("N_ROWS", m->embd_rows),
		                   PI("N_IDS", c->s->target.cfg.vocab), PI("IS_F16", c->cast_mode),
		                   {.name = "SCALE", .type = GEN_PARAM_FLOAT, .f = m->blk.embd_scale},
		                   PI("BLOCK", BLK_EMB)};
		op_desc emb = {.name = "embedding", .op = "embedding16", .exec = GEN_EXEC_KERNEL,
		               .kernel = gp_kernel(c, "embedding16", "embedding16.cu.tmpl", prm, 7),
		               .gx = (int)rows, .block = BLK_EMB, .n_args = 4,
		               .args = {A(a->h, 0), A(m->tok_embd, 0), A(tok_buf, row0 * 4), A(a->err, 0)},
		               .bytes = rows * 4.0 + (double)rows * D * dt + (double)rows * D * 4};
		gp_emit(c, &emb);
	}
	op_desc ms = {.name = "zero_delta", .op = "memset", .exec = GEN_EXEC_MEMSET, .n_args = 1,
	              .args = {A(a->delta, 0)}, .bytes = (double)rows * D * 4};
	gp_emit(c, &ms);

	/* per-layer block, in segments ending at the tapped layers */
	int l0 = 0;
	for (int i = 0; i < o->n_taps; i++) {
		layer_runs(c, m, o, l0, o->taps[i] + 1);
		op_feature_tap(c, rows, D, o->n_taps, i);
		l0 = o->taps[i] + 1;
	}
	if (l0 < L)
		layer_runs(c, m, o, l0, L);

	/* head: the final norm over all rows completes the residual; the LM head
	 * runs on the last lm_rows rows only. */
	if (!c->s->fuse) {
		gp_op_rmsnorm(c, "output_norm", cfg, rows, A(m->out_norm, 0), 1, NULL);
		if (o->lm_rows > 0) {
			int64_t first = rows - o->lm_rows;
			gp_op_cast(c, "head_cast", o->lm_rows, D, A(a->x16, 0), A(a->xn, first * D * 4), 1,
			           NULL);
			gp_op_gemm(c, "lm_head", o->lm_rows, m->vocab_out, D, A(o->logits_buf, o->logits_off),
			           A(a->x16, 0), A(m->lm_head, 0), 1, NULL);
		}
		return;
	}
	const int64_t first = rows - (o->lm_rows > 0 ? o->lm_rows : 0);
	c->layer0 = 0;
	/* into the LM head's 16-bit input (its int8 blocks where it reads every
	 * row of them: quant_a8's layout depends on the rows) */
	op_norm_cast(c, "output_norm", cfg, rows, A(m->out_norm, 0),
	             o->lm_rows == rows && gemm_a8(c, m->lm_head, NULL), 1, NULL);
	if (o->lm_rows > 0)
		gp_op_gemm(c, "lm_head", o->lm_rows, m->vocab_out, D, A(o->logits_buf, o->logits_off),
		           A(a->x16, first * D * dt), A(m->lm_head, 0), 1, NULL);
}

/* m's fields for a model of cfg running n_layers layers as tag ("target",
 * "draft") in the family arch (enum rt_arch); no buffers yet. A draft
 * (shared: the target's) keeps its cache length in state word 1; without
 * weights of its own (own_weights false) it embeds through the target's
 * table. */
int gp_model_init(ctx *c, model_ix *m, const char *tag, const rt_config *cfg, int n_layers,
                  int arch, bool own_weights, const model_ix *shared)
{
	m->tag = tag;
	m->cfg = cfg;
	m->n_layers = n_layers;
	m->len_word = shared ? 1 : 0;
	m->embd_rows = own_weights ? cfg->vocab : shared->embd_rows;
	m->ctx_rows = c->s->max_context;
	m->mask_embd = m->fc = m->fc_norm = m->d2t = m->t2d = -1;
	m->wqkv = m->w_gate_up = -1;
	m->fusable = own_weights;
	m->arch = gen_arch_of(arch);
	if (!m->arch)
		return SW_ENOTSUP;
	m->arch->block(cfg, &m->blk);
	return 0;
}

/* One buffer of m, named "<tag>.<field>", into *ix. */
int gp_model_buf(ctx *c, const model_ix *m, int *ix, const char *field, const char *kind,
                 const char *dt, int rank, int64_t d0, int64_t d1, int64_t d2)
{
	char nm[48];
	snprintf(nm, sizeof(nm), "%s.%s", m->tag, field);
	return (*ix = gp_add_buf(c->p, nm, kind, dt, rank, d0, d1, d2, 0)) < 0 ? SW_ENOMEM : 0;
}

#define B(field, kind, dt, rank, d0, d1, d2)                                                \
	do {                                                                                \
		if (gp_model_buf(c, m, &m->field, #field, kind, dt, rank, d0, d1, d2))      \
			return SW_ENOMEM;                                                   \
	} while (0)

/* The GEMMs' weight dtype of field f (enum gen_wfield): the spec's, or
 * under gguf_a8 the target file's own type of that field. */
static const char *weight_dtype(const gen_spec *s, int f)
{
	return s->dtype == GEN_DTYPE_GGUF_A8 ? gen_wtype_name(s->target.wtype[f])
	                                     : gen_dtype_name(gen_dtype_weights(s->dtype));
}

/* The target's embedding table: under gguf_a8 in its file's own type
 * where that has planes (gen_model_src.embd_wtype), gathered by
 * embedding_gguf (gp_forward), unless the drafter reads the target's
 * table as 16-bit rows (gen_drafter.embd16: a block drafter's block_embed,
 * an EAGLE-3 head without an embedding of its own), which then keeps it
 * 16-bit. */
static const char *embd_dtype(const gen_spec *s, const char *wdt)
{
	const gen_drafter *dr = gen_drafter_of(s->draft_kind);
	const bool rows16 = dr && dr->embd16 && dr->embd16(s);
	const char *q = s->dtype == GEN_DTYPE_GGUF_A8 ? gen_wtype_name(s->target.embd_wtype) : NULL;
	return q && !rows16 ? q : wdt;
}

/* Whether m's GEMM weight fields f0 .. f0 + n - 1 (enum gen_wfield) go
 * into one fused buffer (core/wparts.h): a model with weights of its own
 * (a block drafter's fuse_wk / fuse_wv read its wk and wv alone), and
 * under gguf_a8 the target only, where every layer has the fields in one
 * GGUF type (a fused buffer is one type a layer: a Q4_K_M file's Q6_K
 * attn_v beside Q4_K attn_q keeps them apart). */
static bool fuse_ok(const ctx *c, const model_ix *m, int f0, int n)
{
	const gen_model_src *t = &c->s->target;
	if (!m->fusable || !c->s->fuse)
		return false;
	if (c->s->dtype != GEN_DTYPE_GGUF_A8)
		return true;
	if (strcmp(m->tag, "target"))
		return false;
	for (int l = 0; l < m->n_layers; l++)
		for (int f = f0 + 1; f < f0 + n; f++)
			if ((t->wmixed[f] ? t->wtype_l[f][l] : t->wtype[f]) !=
			    (t->wmixed[f0] ? t->wtype_l[f0][l] : t->wtype[f0]))
				return false;
	return true;
}

/* The per-layer weights (norms, attention, MLP) and the final norm; q/k/v
 * and gate/up as one buffer each where fuse_ok (in the fields' order, so
 * that the weights digest reads them as it reads the unfused buffers). */
int gp_model_layers(ctx *c, model_ix *m)
{
	const gen_spec *s = c->s;
	const rt_config *cfg = m->cfg;
	const int64_t D = cfg->dim, F = cfg->ffn_dim, hd = cfg->head_dim, L = m->n_layers;
	const int64_t qd = (int64_t)cfg->n_heads * hd, kvd = (int64_t)cfg->n_kv_heads * hd;
	B(attn_norm, "weight", "f32", 2, L, D, 0);
	if (fuse_ok(c, m, GEN_WT_WQ, 3)) {
		B(wqkv, "weight", weight_dtype(s, GEN_WT_WQ), 3, L, qd + 2 * kvd, D);
		m->wq = m->wk = m->wv = -1;
	} else {
		B(wq, "weight", weight_dtype(s, GEN_WT_WQ), 3, L, qd, D);
		B(wk, "weight", weight_dtype(s, GEN_WT_WK), 3, L, kvd, D);
		B(wv, "weight", weight_dtype(s, GEN_WT_WV), 3, L, kvd, D);
	}
	B(wo, "weight", weight_dtype(s, GEN_WT_WO), 3, L, D, qd);
	B(ffn_norm, "weight", "f32", 2, L, D, 0);
	if (fuse_ok(c, m, GEN_WT_GATE, 2)) {
		B(w_gate_up, "weight", weight_dtype(s, GEN_WT_GATE), 3, L, 2 * F, D);
		m->w_gate = m->w_up = -1;
	} else {
		B(w_gate, "weight", weight_dtype(s, GEN_WT_GATE), 3, L, F, D);
		B(w_up, "weight", weight_dtype(s, GEN_WT_UP), 3, L, F, D);
	}
	B(w_down, "weight", weight_dtype(s, GEN_WT_DOWN), 3, L, D, F);
	B(out_norm, "weight", "f32", 1, D, 0, 0);
	return 0;
}

/* The RoPE table and the family's extra per-layer weights (arch.h). */
int gp_model_extra(ctx *c, model_ix *m)
{
	gen_arch_weight xw[GEN_ARCH_MAX_W];
	B(inv_freq, "weight", "f32", 1, rt_config_inv_freq_len(m->cfg), 0, 0);
	m->n_xw = m->arch->weights(m->cfg, xw);
	for (int i = 0; i < m->n_xw; i++)
		if (gp_model_buf(c, m, &m->xw[i], xw[i].field, "weight", "f32", 2, m->n_layers,
		                 xw[i].per, 0))
			return SW_ENOMEM;
	return 0;
}

/* The K/V cache: ctx_rows slots a layer. */
int gp_model_cache(ctx *c, model_ix *m)
{
	const char *wdt = gen_dtype_name(gen_dtype_act(c->s->dtype));
	const int64_t kvd = (int64_t)m->cfg->n_kv_heads * m->cfg->head_dim;
	B(k_cache, "kv", wdt, 3, m->n_layers, m->ctx_rows, kvd);
	B(v_cache, "kv", wdt, 3, m->n_layers, m->ctx_rows, kvd);
	return 0;
}

/* Weight and cache buffers of a model with the target's block (the target,
 * a draft model); without weights of its own (a layer-skip draft) the
 * target's (shared), and only its cache. */
int gp_model_bufs(ctx *c, model_ix *m, const char *tag, const rt_config *cfg, int n_layers,
                  bool own_weights, const model_ix *shared)
{
	const char *wdt = gen_dtype_name(gen_dtype_act(c->s->dtype));
	int rc;
	if ((rc = gp_model_init(c, m, tag, cfg, n_layers, cfg->arch, own_weights, shared)))
		return rc;
	if (own_weights) {
		const char *edt = shared ? wdt : embd_dtype(c->s, wdt);
		B(tok_embd, "weight", edt, 2, cfg->vocab, cfg->dim, 0);
		if ((rc = gp_model_layers(c, m)))
			return rc;
		/* tied: the LM head is the embedding, one buffer where both read
		 * one type (16-bit; gguf_a8: the file's, the gather's and the
		 * head's planes); a q8_0 GEMM beside a 16-bit table its own copy */
		if (cfg->tied_embd && !strcmp(weight_dtype(c->s, GEN_WT_LM_HEAD), edt))
			m->lm_head = m->tok_embd;
		else
			B(lm_head, "weight", weight_dtype(c->s, GEN_WT_LM_HEAD), 2, cfg->vocab, cfg->dim, 0);
		if ((rc = gp_model_extra(c, m)))
			return rc;
		if (!shared) { /* a fused buffer takes its first part's types (fuse_ok) */
			const int wb[GEN_WT_LM_HEAD] = {m->wqkv >= 0 ? m->wqkv : m->wq, m->wk, m->wv,
			                                m->wo, m->w_gate_up >= 0 ? m->w_gate_up : m->w_gate,
			                                m->w_up, m->w_down};
			gen_plan_gguf_layers(c->p, c->s, wb);
		}
	} else {
		m->tok_embd = shared->tok_embd;
		m->attn_norm = shared->attn_norm;
		m->wq = shared->wq;
		m->wk = shared->wk;
		m->wv = shared->wv;
		m->wqkv = shared->wqkv;
		m->wo = shared->wo;
		m->ffn_norm = shared->ffn_norm;
		m->w_gate = shared->w_gate;
		m->w_up = shared->w_up;
		m->w_gate_up = shared->w_gate_up;
		m->w_down = shared->w_down;
		m->out_norm = shared->out_norm;
		m->lm_head = shared->lm_head;
		m->inv_freq = shared->inv_freq;
		m->n_xw = shared->n_xw;
		for (int i = 0; i < m->n_xw; i++)
			m->xw[i] = shared->xw[i];
	}
	return gp_model_cache(c, m);
}
#undef B

int64_t gp_max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* One cache's commit: the accepted path's K/V rows compacted in place in
 * every layer, its length word advanced by counts[1] (the path's nodes);
 * done_word: its word of kv_done (0 target, 1 draft). */
void gp_op_kv_commit(ctx *c, const model_ix *m, int done_word)
{
	const rt_tree *t = &c->s->tree;
	const act_ix *a = &c->a;
	const rt_config *cfg = m->cfg;
	const int64_t row_bytes = (int64_t)cfg->n_kv_heads * cfg->head_dim * c->dt16;
	gen_param prm[] = {PNAME, PI("N_LAYERS", m->n_layers), PI("MAX_CTX", m->ctx_rows),
	                   PI("ROW_VEC", row_bytes / 16), PI("BLOCK", BLK_COMMIT)};
	int64_t threads = 2 * (int64_t)m->n_layers * (row_bytes / 16);
	op_desc od = {.name = done_word ? "kv_commit_draft" : "kv_commit_target", .op = "kv_commit",
	              .exec = GEN_EXEC_KERNEL,
	              .kernel = gp_kernel(c, "kv_commit", "kv_commit.cu.tmpl", prm, 5),
	              .gx = (int)((threads + BLK_COMMIT - 1) / BLK_COMMIT), .block = BLK_COMMIT,
	              .layers = m->tag, .n_args = 6,
	              .args = {A(m->k_cache, 0), A(m->v_cache, 0), A(a->accept_path, 0),
	                       A(a->counts, 4), A(a->state, m->len_word * 4),
	                       A(a->kv_done, done_word * 4)},
	              /* every path row of every layer of K and V read and written
	               * (the root's row moves onto itself: skipped by the loop
	               * only on the host) */
	              .bytes = 2.0 * 2 * m->n_layers * (t->depth_max + 1) * row_bytes};
	gp_emit(c, &od);
}

/* The accept phase's fused verification (a block per unit and vocabulary
 * slice, the units a node each and for the tree methods a child-list entry
 * each; the last block walks) against q rows of buffer q_buf, vq entries
 * each (q = 0 beyond: a draft vocabulary prefix), one row per node or
 * (by_depth) per depth. */
void gp_op_accept(ctx *c, int q_buf, int vq, bool by_depth)
{
	const gen_spec *s = c->s;
	const rt_tree *t = &s->tree;
	const rt_config *tc = &s->target.cfg;
	const act_ix *a = &c->a;
	const bool uses_q = s->verify_method != RT_VERIFY_GREEDY && s->verify_method != RT_VERIFY_ONEHOT;
	const int vm = s->verify_method, sl = sw_verify_slices(t->n, tc->vocab, BLK_VERIFY, vm);
	gen_param prm[] = {PNAME, PI("N_NODES", t->n), PI("V", tc->vocab), PI("VQ", vq),
	                   PI("METHOD", vm), PI("CHAIN_Q", 1), PI("BLOCK", BLK_VERIFY),
	                   PI("SLICES", sl), PI("Q_BY_DEPTH", by_depth)};
	char uri[192];
	snprintf(uri, sizeof(uri), "verify_%s_v%d_t%d", rt_verify_method_name(vm), tc->vocab,
	         t->n);
	/* the sync words (the units' counters, the ticket, the done word
	 * that elects the walking block), zeroed each iteration
	 * (kernels/verify_layout.h; the kernel also resets them) */
	op_desc tk = {.name = "verify_ticket", .op = "memset", .exec = GEN_EXEC_MEMSET,
	              .n_args = 1,
	              .args = {A(a->verify_scratch,
	                         sw_verify_sync_word(t->n, tc->vocab, BLK_VERIFY, sl, vm) * 4)},
	              .bytes = (double)sw_verify_sync_count(t->n) * 4};
	gp_emit(c, &tk);
	/* every unit's vocabulary work (kernels/verify_layout.h's traffic
	 * model: node work, the tree methods' child-list work); the walk
	 * reads the tables and one chunk */
	double traffic = 0;
	for (int u = 0; u < t->n; u++)
		traffic += sw_verify_work_traffic(vm, t->n_children[u]);
	const double V4 = (double)tc->vocab * 4;
	op_desc od = {.name = "verify", .op = "verify",
	              .exec = GEN_EXEC_KERNEL, .uri = uri,
	              .kernel = gp_kernel_x(c, "verify", "verify.cu.tmpl", prm, 9, GEN_PREFIX_PHILOX,
	                                    false, NULL),
	              .gx = (int)sw_verify_grid(t->n, sl, vm), .block = BLK_VERIFY, .n_args = 10,
	              .args = {A(a->accept_path, 0), A(a->emitted, 0), A(a->counts, 0),
	                       A(a->tree_table, 0), A(a->tree_tokens, 0), A(a->probs, 0),
	                       A(q_buf, 0),
	                       A(a->verify_scratch, 0), A(a->sampling, 4 * RT_SP_SEED_LO), A(a->iter, 0)},
	              .bytes = traffic * V4 +
	                       (double)sw_verify_grid(t->n, sl, vm) * (2 * BLK_VERIFY * 8.0 + 64),
	              .flops = (uses_q ? 3.0 : 1.0) * traffic * tc->vocab};
	gp_emit(c, &od);
}

/* Opens phase c->ph; a plan with more phases than gen_plan holds fails
 * (c->rc) and writes none past them. */
void gp_phase_begin(ctx *c, const char *name, int rows)
{
	const int cap = (int)(sizeof(c->p->phases) / sizeof(c->p->phases[0]));
	if (c->ph >= cap) { /* the plan is dropped: its last phase is scratch */
		if (!c->rc)
			c->rc = SW_ENOMEM;
		c->ph = cap - 1;
	}
	gen_phase *P = &c->p->phases[c->ph];
	snprintf(P->name, sizeof(P->name), "%s", name);
	P->rows = rows;
	P->first_op = c->p->n_ops;
	P->gate_buf = -1;
}

/* The open phase runs only when int32 word `word` of buffer buf is nonzero
 * (a conditional graph node). */
void gp_phase_gate(ctx *c, int buf, int word)
{
	c->p->phases[c->ph].gate_buf = buf;
	c->p->phases[c->ph].gate_word = word;
}

void gp_phase_end(ctx *c)
{
	gen_phase *P = &c->p->phases[c->ph++];
	P->n_ops = c->p->n_ops - P->first_op;
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
	fprintf(f, "{\n%s  \"arch\": \"%s\", \"n_layers\": %d, \"dim\": %d, \"n_heads\": %d, "
	        "\"n_kv_heads\": %d, \"head_dim\": %d,\n%s  \"ffn_dim\": %d, \"vocab\": %d, "
	        "\"rope_theta\": ",
	        ind, rt_arch_name(c->arch), c->n_layers, c->dim, c->n_heads, c->n_kv_heads, c->head_dim, ind, c->ffn_dim,
	        c->vocab);
	jnum(f, c->rope_theta);
	fprintf(f, ", \"norm_eps\": %.9g, \"tied_embd\": %s", (double)c->norm_eps,
	        c->tied_embd ? "true" : "false");
	/* Gemma 3's own fields (gen/spec.c gemma_shape's keys), so that an
	 * engine built from a shape re-plans to itself (gen/replan.c): the
	 * window and the query scalar are baked into its kernels */
	if (c->arch == RT_ARCH_GEMMA3) {
		fprintf(f, ",\n%s  \"sliding_window\": %d, \"sliding_window_pattern\": %d, "
		        "\"rope_local_base_freq\": ", ind, c->swa_window, c->swa_pattern);
		jnum(f, c->rope_theta_local);
		fputs(", \"query_pre_attn_scalar\": ", f);
		jnum(f, c->query_scalar);
	}
	fprintf(f, "\n%s}", ind);
}

static void write_params(FILE *f, const gen_kernel *k)
{
	fputc('{', f);
	/* a parameter left out of the key at its default 0 (key_omit_zero) is
	 * left out here too: the runtime reads a missing int as 0, and
	 * engine.json stays what it was before the template had it */
	for (int i = 1, n = 0; i < k->n_params; i++) {
		const gen_param *q = &k->params[i];
		if (q->type == GEN_PARAM_INT && q->key_omit_zero && q->i == 0)
			continue;
		fprintf(f, "%s\"%s\": ", n++ ? ", " : "", q->name);
		if (q->type == GEN_PARAM_INT)
			fprintf(f, "%lld", q->i);
		else if (q->type == GEN_PARAM_FLOAT)
			fprintf(f, "%.9g", (double)q->f);
		else
			jstr(f, !strcmp(q->name, "TREE") ? k->tree_id : q->s ? q->s : "");
	}
	fputc('}', f);
}

/* A model's source in the spec echo: "shape": true, or its path and (when
 * the build bound it) its weights digest. */
void gp_write_src(FILE *f, bool from_shape, const char *path, const char *digest)
{
	if (from_shape) {
		fprintf(f, "\"shape\": true");
		return;
	}
	fprintf(f, "\"path\": ");
	jstr(f, path);
	if (digest[0]) {
		fprintf(f, ", \"digest\": ");
		jstr(f, digest);
	}
}

int gen_plan_write_json(const gen_plan *p, FILE *f)
{
	const gen_spec *s = p->spec;
	const gen_drafter *dr = p->drafter;
	const rt_tree *t = &s->tree;

	fprintf(f, "{\n  \"format\": \"specwright-engine/1\",\n  \"generated\": \"by specwright "
	        "build; do not edit\",\n  \"spec\": {\n    \"name\": ");
	jstr(f, s->name);
	fprintf(f, ",\n    \"target\": ");
	fputc('{', f);
	gp_write_src(f, s->target.from_shape, s->target.path, p->target_digest);
	fputc('}', f);
	fprintf(f, ",\n    \"draft\": {\"method\": ");
	jstr(f, s->draft_method);
	if (dr && dr->echo)
		dr->echo(p, f);
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
	/* "fuse" and "gemm" echoed only when not the default: the default's
	 * echo is unchanged, so engines built before them re-plan alike */
	fprintf(f, "], \"allow_spills\": %s,%s", s->allow_spills ? "true" : "false",
	        s->fuse ? "" : " \"fuse\": false,");
	if (s->gemm != GEN_GEMM_DEFAULT)
		fprintf(f, " \"gemm\": \"%s\",", gen_gemm_choice_name(s->gemm));
	fprintf(f, "\n    \"roofline\": {\"tau\": ");
	if (s->tau > 0)
		jnum(f, s->tau);
	else
		fprintf(f, "null");
	fprintf(f, ", \"context\": %d}", s->est_context);
	if (s->adaptive)
		fprintf(f, ",\n    \"adaptive\": {\"h\": %.9g, \"min\": %d, \"max\": %d}",
		        (double)s->adapt_h, s->adapt_min, s->adapt_max);
	gen_ctrl_write_json(&s->ctrl, s->tree.depth_max, f);
	fprintf(f, "\n  },\n");

	fprintf(f, "  \"shapes\": {\n    \"target\": ");
	write_cfg(f, &s->target.cfg, "    ");
	fprintf(f, ",\n    \"draft\": ");
	if (!dr || !dr->shapes)
		fprintf(f, "null");
	else
		write_cfg(f, &p->draft_cfg, "    ");
	fprintf(f, ",\n    \"tree\": {\"name\": ");
	jstr(f, t->name);
	fprintf(f, ", \"nodes\": %d, \"depth\": %d, \"parent\": [", t->n, t->depth_max);
	for (int i = 0; i < t->n; i++)
		fprintf(f, "%s%d", i ? ", " : "", t->parent[i]);
	/* the tree_table buffer's contents, row by row */
	fprintf(f, "], \"n_children\": [");
	for (int i = 0; i < t->n; i++)
		fprintf(f, "%s%d", i ? ", " : "", t->n_children[i]);
	fprintf(f, "], \"child_start\": [");
	for (int i = 0; i < t->n; i++)
		fprintf(f, "%s%d", i ? ", " : "", t->child_start[i]);
	fprintf(f, "], \"child_list\": [");
	for (int i = 0; i < t->n; i++)
		fprintf(f, "%s%d", i ? ", " : "", t->child_list[i]);
	fprintf(f, "], \"node_depth\": [");
	for (int i = 0; i < t->n; i++)
		fprintf(f, "%s%d", i ? ", " : "", t->depth[i]);
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
		fprintf(f, "]");
		gen_plan_write_ltypes(f, b);
		fprintf(f, ", \"bytes\": %" PRId64 ", \"offset\": %" PRId64 "}%s\n", b->bytes, b->offset,
		        i + 1 < p->n_bufs ? "," : "");
	}
	fprintf(f, "  ],\n  \"kernels\": [\n");
	for (int i = 0; i < p->n_kernels; i++) {
		const gen_kernel *k = &p->kernels[i];
		fprintf(f, "    {\"uri\": \"%s\", \"template\": \"templates/%s\", \"entries\": [",
		        k->uri, k->tmpl);
		for (int e = 0; e < k->n_entries; e++)
			fprintf(f, "%s\"%s%s\"", e ? ", " : "", k->uri, k->entry[e]);
		/* dynamic shared memory per launch: a template that uses DYN_SHARED
		 * sizes it with its DYN_SMEM constant (none does yet) */
		long long dyn = 0;
		for (int q = 0; q < k->n_params; q++)
			if (!strcmp(k->params[q].name, "DYN_SMEM"))
				dyn = k->params[q].i;
		fprintf(f, "], \"dyn_smem\": %lld", dyn);
		if (k->mask_kind != GEN_MASK_TREE)
			fprintf(f, ", \"mask\": \"%s\"",
			        k->mask_kind == GEN_MASK_BLOCK_CAUSAL ? "block_causal" : "block_bidirectional");
		fprintf(f, ", \"prefix\": [%s%s%s], \"params\": ",
		        k->prefix & GEN_PREFIX_PHILOX ? "\"kernels/philox.h\"" : "",
		        k->prefix == (GEN_PREFIX_PHILOX | GEN_PREFIX_MASK) ? ", " : "",
		        k->prefix & GEN_PREFIX_MASK ? "\"mask\"" : "");
		write_params(f, k);
		fprintf(f, "}%s\n", i + 1 < p->n_kernels ? "," : "");
	}
	static const char *const execs[] = {"kernel", "cublaslt", "pending", "memset"};
	fprintf(f, "  ],\n  \"phases\": [\n");
	for (int ph = 0; ph < p->n_phases; ph++) {
		const gen_phase *P = &p->phases[ph];
		fprintf(f, "    {\"name\": \"%s\", \"rows\": %d, ", P->name, P->rows);
		if (P->gate_buf >= 0)
			fprintf(f, "\"if\": {\"buf\": \"%s\", \"word\": %d}, ", p->bufs[P->gate_buf].name,
			        P->gate_word);
		fprintf(f, "\"ops\": [\n");
		for (int i = P->first_op; i < P->first_op + P->n_ops; i++) {
			const gen_op *o = &p->ops[i];
			fprintf(f, "      {\"name\": \"%s\", \"op\": \"%s\", \"exec\": \"%s\", \"uri\": ",
			        o->name, o->op, execs[o->exec]);
			if (o->uri[0])
				jstr(f, o->uri);
			else
				fprintf(f, "null");
			if (o->exec == GEN_EXEC_KERNEL)
				fprintf(f, ", \"entry\": \"%s%s\"", o->uri, o->entry ? o->entry : "");
			if (o->exec == GEN_EXEC_KERNEL)
				fprintf(f, ", \"grid\": [%d, %d, %d], \"block\": [%d, %d, %d]", o->grid[0],
				        o->grid[1], o->grid[2], o->block[0], o->block[1], o->block[2]);
			else
				fprintf(f, ", \"grid\": null, \"block\": null");
			fprintf(f, ", \"repeat\": %d, ", o->repeat);
			if (o->layer0)
				fprintf(f, "\"layer0\": %d, ", o->layer0);
			fprintf(f, "\"layers\": ");
			if (o->layers)
				jstr(f, o->layers);
			else
				fprintf(f, "null");
			if (o->exec == GEN_EXEC_CUBLASLT)
				fprintf(f, ", \"gemm\": {\"m\": %" PRId64 ", \"n\": %" PRId64 ", \"k\": %" PRId64
				        ", \"a\": \"%s\", \"b\": \"%s\", \"c\": \"f32\"}", o->m, o->n, o->k,
				        gen_dtype_name(gen_dtype_act(s->dtype)),
				        s->dtype == GEN_DTYPE_GGUF_A8 ? p->bufs[o->args[2].buf].dtype
				        : gen_dtype_name(gen_dtype_weights(s->dtype)));
			fprintf(f, ",\n       \"args\": [");
			for (int j = 0; j < o->n_args; j++) {
				if (o->args[j].scalar)
					fprintf(f, "%s{\"scalar\": \"%s\", \"type\": \"u64\"}", j ? ", " : "",
					        o->args[j].scalar);
				else
					fprintf(f, "%s{\"buf\": \"%s\", \"offset\": %" PRId64 "}",
					        j ? ", " : "", p->bufs[o->args[j].buf].name, o->args[j].offset);
			}
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

/* ---- restrict: no launch passes one buffer to two restrict-marked
 * parameters of which one is written (issue 14 item 6) ---- */

/* One kernel entry's parameters as its template declares them:
 * KERNEL(name, (type, p0), ...) or KERNEL_LB(bound, name, ...) at the start
 * of a line, name = "{{NAME}}" + entry. */
typedef struct ksig {
	int n;
	bool restr[GEN_OP_MAX_ARGS], written[GEN_OP_MAX_ARGS];
	char name[GEN_OP_MAX_ARGS][32];
} ksig;

static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	return s;
}

/* 1 found, 0 not found, -1 malformed */
static int kernel_sig(const char *src, const char *entry, ksig *k)
{
	char want[64];
	snprintf(want, sizeof(want), "{{NAME}}%s", entry);
	for (const char *s = src; (s = strstr(s, "KERNEL")); s += 6) {
		if (s != src && s[-1] != '\n')
			continue;
		const char *p = s + 6;
		bool lb = !strncmp(p, "_LB(", 4);
		if (!lb && *p != '(')
			continue;
		p += lb ? 4 : 1;
		if (lb && !(p = strchr(p, ',')))
			return -1;
		p = skip_ws(p + lb);
		size_t wl = strlen(want);
		if (strncmp(p, want, wl) || (p[wl] != ',' && p[wl] != ' '))
			continue;
		p += wl;
		memset(k, 0, sizeof(*k));
		for (;;) {
			p = skip_ws(p);
			if (*p == ',') {
				p++;
				continue;
			}
			if (*p == ')')
				return 1;
			const char *e = *p == '(' ? strchr(p, ')') : NULL;
			if (!e || k->n >= GEN_OP_MAX_ARGS)
				return -1;
			const char *comma = NULL;
			for (const char *c = p; c < e; c++)
				if (*c == ',')
					comma = c;
			if (!comma)
				return -1;
			char type[96];
			snprintf(type, sizeof(type), "%.*s", (int)(comma - p - 1), p + 1);
			const char *nm = skip_ws(comma + 1);
			snprintf(k->name[k->n], sizeof(k->name[0]), "%.*s", (int)(e - nm), nm);
			k->restr[k->n] = strstr(type, "RESTRICT") != NULL;
			k->written[k->n] = strchr(type, '*') && strncmp(skip_ws(type), "const", 5);
			k->n++;
			p = e + 1;
		}
	}
	return 0;
}

int gen_plan_check_restrict(const gen_plan *p, const char *src_dir, sw_err *err)
{
	char *src = NULL;
	const char *loaded = NULL;
	int rc = 0;
	for (int i = 0; i < p->n_ops && !rc; i++) {
		const gen_op *o = &p->ops[i];
		if (o->exec != GEN_EXEC_KERNEL)
			continue;
		const char *tmpl = p->kernels[o->kernel].tmpl;
		char path[1024];
		snprintf(path, sizeof(path), "%s/templates/%s", src_dir, tmpl);
		if (!loaded || strcmp(loaded, tmpl)) {
			free(src);
			size_t n = 0;
			if (!(src = sw_read_file(path, SW_CAP_SOURCE, &n))) {
				rc = sw_errf(err, SW_EIO, "%s: cannot read the template", path);
				break;
			}
			loaded = tmpl;
		}
		ksig k;
		int f = kernel_sig(src, o->entry ? o->entry : "", &k);
		if (f <= 0) {
			rc = sw_errf(err, SW_EINVAL, "templates/%s: %s of entry {{NAME}}%s (op %s), expected "
			             "KERNEL(...) or KERNEL_LB(...) at the start of a line", tmpl,
			             f ? "malformed parameter list" : "no declaration", o->entry ? o->entry : "",
			             o->name);
			break;
		}
		for (int a = 0; a < o->n_args && a < k.n && !rc; a++)
			for (int b = a + 1; b < o->n_args && b < k.n && !rc; b++) {
				const gen_arg *x = &o->args[a], *y = &o->args[b];
				if (x->scalar || y->scalar || x->buf != y->buf || !k.restr[a] || !k.restr[b] ||
				    !(k.written[a] || k.written[b]))
					continue;
				rc = sw_errf(err, SW_EINVAL, "op %s (templates/%s): arguments %d (%s) and %d (%s) "
				             "are both buffer %s, expected distinct buffers: both parameters are "
				             "restrict-marked and one is written (drop RESTRICT from one of them)",
				             o->name, tmpl, a, k.name[a], b, k.name[b], p->bufs[x->buf].name);
			}
	}
	free(src);
	return rc;
}
