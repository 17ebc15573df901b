/* Tree attention (templates/tree_attention.cu.tmpl) on a GPU of
 * gen/gpu_model.h, on paper: the one projection the planner minimises to
 * pick a launch shape (gen/plan.c attn_choose, on the H100) and `specwright
 * inspect` prints (gen/inspect.c, on the device asked for), so both
 * describe the kernel as it is written. A model, not a measurement: what it
 * counts and what it leaves out is listed below. The clock-based rates are
 * the device's SM clock (gen_gpu_clk: the tensor-core peak over 4096 flop
 * per clock per SM) times per-clock widths.
 *
 * Counted, per launch of _part over `ctx` cached keys (+ N_BLK block keys):
 *  - HBM: K and V once, q, the fp32 partials of the live splits written;
 *  - L2 -> SM: K and V once per row block (zt blocks read the same split);
 *    H100's L2 bandwidth is not published: A100's documented 5120 B/clk is
 *    taken at H100's clock (9.4 TB/s, ~2.8x HBM) - an assumption;
 *  - shared memory, 128 B/clk/SM: every K/V row written once per block by
 *    cp.async and read by ldmatrix once per warp that has rows;
 *  - mma.sync at 2/3 of the 989 TFLOP/s dense peak: Hopper reaches the
 *    rest only through wgmma (FlashAttention-3 paper, Shah et al. 2024);
 *    flops as the tensor cores execute them (rows padded to 16, head dim to
 *    16, masked block keys included);
 *  - MUFU: one ex2 per score, 16/clk/SM;
 *  - the grid: memory terms scale with min(1, blocks / SMs); the SM-bound
 *    terms (smem, mma, MUFU) with the busiest SM, which runs ceil(blocks /
 *    SMs) blocks (equal blocks assumed), at min(1, its warps with rows / 4)
 *    of its throughput (one warp per SM sub-partition feeds that quarter's
 *    tensor core; registers cap the blocks resident at once).
 * _merge: the partials read back and the 16-bit output written, over
 * min(1, blocks / SMs).
 * Not counted: launch latency; whether 1-2 tiles of cp.async in flight per
 * block hide HBM latency at low occupancy; the softmax's CUDA-core
 * instructions (~5 per score) competing for issue with the mma; the last
 * split's extra N_BLK keys and idle padded warps (blocks are not equal);
 * partials that stay in L2 between _part and _merge (they fit: the merge
 * would then read L2, not HBM - the HBM count here is the conservative one).
 */
#ifndef GEN_ATTN_COST_H
#define GEN_ATTN_COST_H

#include <math.h>

#include "gpu_model.h"

/* mma.sync on sm_90: 2/3 of the dense peak */
static inline double gen_attn_mma_flops(const gen_gpu *d)
{
	return d->bf16_flops * 2.0 / 3.0;
}

static inline double gen_attn_smem_bps(const gen_gpu *d)
{
	return 128.0 * d->sms * gen_gpu_clk(d);
}

static inline double gen_attn_mufu_per_s(const gen_gpu *d)
{
	return 16.0 * d->sms * gen_gpu_clk(d);
}

/* an assumption, see above */
static inline double gen_attn_l2_bps(const gen_gpu *d)
{
	return 5120.0 * gen_gpu_clk(d);
}

/* One launch shape of the template. */
typedef struct gen_attn_geom {
	int T, n_blk;                          /* query tokens, block keys */
	int n_heads, n_kv_heads, head_dim, elt; /* elt: bytes per K/V/q element */
	int max_ctx;                           /* the grid is sized for it */
	int split, warps, row_blocks, mblock;  /* template parameters */
} gen_attn_geom;

typedef struct gen_attn_proj {
	int zt, ctx_splits, live, blocks, merge_blocks;
	double warps_sm;                  /* warps with rows on the busiest SM */
	double kv, q, part, out;          /* bytes: K+V, q, partials, output */
	double l2, smem, flops, exps;     /* L2->SM bytes, shared bytes, mma flop, ex2 */
	double t_hbm, t_l2, t_smem, t_mma, t_exp; /* seconds on the whole chip */
	double share_mem, share_sm;       /* the grid's shares (above) */
	double t_part, t_merge;           /* seconds */
} gen_attn_proj;

/* Registers per thread ptxas gives _part (tests/test_kern_tree_attention.c
 * prints them: ~155-170 at ROW_BLOCKS 1, 182 at 2 with HEAD_DIM 64,
 * 216-226 at 1 above 128 with the output in 128-dim parts), rounded up,
 * for the blocks an SM can hold. Two fragments at once (ROW_BLOCKS 2 on
 * sm_90) only up to 64 dims: at 128 they took all 255 registers. */
/* The most registers a _part kernel may take: 255 is ptxas's cap, where
 * it stops spilling only by luck; 232 leaves ~10% for later changes. */
#define GEN_ATTN_REG_HEADROOM 232

static inline int gen_attn_regs(int row_blocks, int head_dim)
{
	if (row_blocks == 1 || head_dim > 64)
		return head_dim > 128 ? 232 : 168;
	return 192;
}

/* Shared memory of _part: two cp.async stages of K and V (one when two
 * would pass 48 KB). */
static inline int gen_attn_smem(int head_dim)
{
	const int stage = 2 * 32 * ((head_dim + 15) / 16 * 16 + 8) * 2;
	return 2 * stage <= 49152 ? 2 * stage : stage;
}

/* The projection on device d (inspect); gen_attn_project below is the
 * planner's, on the H100. */
static inline void gen_attn_project_on(const gen_gpu *d, const gen_attn_geom *g, double ctx,
                                       gen_attn_proj *p)
{
	const int G = g->n_heads / g->n_kv_heads, hdp = (g->head_dim + 15) / 16 * 16;
	/* above 128 dims _part takes the output in parts of <= 128 dims, a pass
	 * over the split each: Q.K^T, the softmax and the K/V tile loads are
	 * repeated per part, P.V is not (shared bytes: all counted per pass, an
	 * upper bound) */
	const int ndh = (hdp + 127) / 128;
	const int tiles = (g->T * G + 15) / 16;               /* 16-row fragments per KV head */
	const int wrows = (tiles + g->row_blocks - 1) / g->row_blocks; /* warps with rows */
	const double keys = ctx + g->n_blk, sms = d->sms;
	int live = (int)ceil(ctx / g->split);

	p->zt = (tiles + g->row_blocks * g->warps - 1) / (g->row_blocks * g->warps);
	p->ctx_splits = (g->max_ctx + g->split - 1) / g->split;
	p->live = live < 1 ? 1 : live > p->ctx_splits ? p->ctx_splits : live;
	p->blocks = g->n_kv_heads * p->live * p->zt;
	p->kv = 2.0 * keys * g->n_kv_heads * g->head_dim * g->elt;
	p->q = p->out = (double)g->T * g->n_heads * g->head_dim * g->elt;
	p->part = (double)p->live * g->T * g->n_heads * (g->head_dim + 2) * 4;
	p->l2 = (double)ndh * p->zt * p->kv;
	p->smem = (double)ndh * keys * g->n_kv_heads * 4.0 * hdp * (p->zt + wrows);
	p->flops = 2.0 * (ndh + 1) * g->n_kv_heads * tiles * 16 * hdp * keys;
	p->exps = (double)ndh * g->n_kv_heads * tiles * 16 * keys;
	p->t_hbm = (p->kv + p->q + p->part) / d->bw;
	p->t_l2 = p->l2 / gen_attn_l2_bps(d);
	p->t_smem = p->smem / gen_attn_smem_bps(d);
	p->t_mma = p->flops / gen_attn_mma_flops(d);
	p->t_exp = p->exps / gen_attn_mufu_per_s(d);

	const double per = ceil(p->blocks / sms); /* blocks on the busiest SM */
	int resident = 65536 / (32 * g->warps * gen_attn_regs(g->row_blocks, g->head_dim));
	const int by_smem = 228 * 1024 / gen_attn_smem(g->head_dim);
	resident = resident < by_smem ? resident : by_smem;
	resident = resident < 1 ? 1 : resident;
	p->warps_sm = (per < resident ? per : resident) * (double)wrows / p->zt;
	p->share_mem = p->blocks < sms ? p->blocks / sms : 1.0;
	p->share_sm = p->blocks / sms / per * (p->warps_sm < 4 ? p->warps_sm / 4 : 1.0);
	double tm = p->t_hbm > p->t_l2 ? p->t_hbm : p->t_l2, tc = p->t_smem;
	tc = tc > p->t_mma ? tc : p->t_mma;
	tc = tc > p->t_exp ? tc : p->t_exp;
	tm /= p->share_mem;
	tc /= p->share_sm;
	p->t_part = tm > tc ? tm : tc;

	p->merge_blocks = g->T * ((g->n_heads * g->head_dim / 4 + g->mblock - 1) / g->mblock);
	p->t_merge = (p->part + p->out) / d->bw /
	             (p->merge_blocks < sms ? p->merge_blocks / sms : 1.0);
}

static inline void gen_attn_project(const gen_attn_geom *g, double ctx, gen_attn_proj *p)
{
	gen_attn_project_on(&gen_gpu_h100, g, ctx, p);
}

/* The shape of least projected _part + _merge time at ctx cached keys:
 * ROW_BLOCKS 1 or 2 (2 only with two fragments to fill and HEAD_DIM <= 64:
 * beyond, the kernel takes its fragments one per pass (register headroom,
 * templates/tree_attention.cu.tmpl), so a second one shares nothing), WARPS 1, 2 or 4 (none without rows),
 * SPLIT a power of two in [64, 8192]. A shape within 1% of a simpler one
 * (fewer row blocks, more warps, fewer splits: the order searched) loses
 * to it: the model is not that precise. _merge: MBLOCK 128 threads, halved
 * (down to 32) while T x columns / MBLOCK blocks leave SMs idle (a decode
 * step's merge has T = 1). */
static inline gen_attn_geom gen_attn_choose(int T, int n_blk, int n_heads, int n_kv_heads,
                                            int head_dim, int elt, int max_ctx, double ctx)
{
	const int tiles = (T * (n_heads / n_kv_heads) + 15) / 16, cols = n_heads * head_dim / 4;
	int mblock = 128;
	while (mblock > 32 && T * ((cols + mblock - 1) / mblock) < GEN_H100_SMS)
		mblock /= 2;
	gen_attn_geom best = {0}, g = {.T = T, .n_blk = n_blk, .n_heads = n_heads,
	                               .n_kv_heads = n_kv_heads, .head_dim = head_dim, .elt = elt,
	                               .max_ctx = max_ctx, .mblock = mblock};
	double tbest = INFINITY;
	for (int rb = 1; rb <= 2; rb++) {
		if (rb == 2 && (tiles < 2 || head_dim > 64))
			continue;
		for (int w = 4; w >= 1; w /= 2) {
			if (w > 1 && (w / 2) * rb >= tiles)
				continue; /* half the warps already hold every fragment */
			for (int split = 8192; split >= 64; split /= 2) {
				gen_attn_proj p;
				g.row_blocks = rb;
				g.warps = w;
				g.split = split;
				gen_attn_project(&g, ctx, &p);
				if (p.t_part + p.t_merge < 0.99 * tbest) {
					tbest = p.t_part + p.t_merge;
					best = g;
				}
			}
		}
	}
	return best;
}

#endif
