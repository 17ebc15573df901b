/* Op extents (extent.h): one rule per op kind. Each rule states, from the
 * kernel's constants and launch grid, the bytes every argument's pointer
 * reaches past its offset; manifest.c checks them against the buffers. The
 * runtime-dependent indices (a cache length, a token, an accepted path) are
 * bounded by the constants the step kernel keeps them under (MAX_CTX,
 * N_NODES), so those constants must equal the engine's own. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "extent.h"
#include "core/wformat.h"
#include "kernels/engine_state.h"
#include "kernels/ops.h"
#include "kernels/ref/ref.h"
#include "kernels/sample_layout.h"
#include "kernels/verify_layout.h"

typedef struct ectx {
	const rt_manifest *m;
	const rt_engine_pop *x;
	const rt_kernel_info *k;
	rt_extent *e;
	char *why;
	size_t n;
	int rc;
} ectx;

/* a * b, saturating at INT64_MAX for the non-negative sizes used here */
static int64_t mul(int64_t a, int64_t b)
{
	if (a <= 0 || b <= 0)
		return 0;
	return a > INT64_MAX / b ? INT64_MAX : a * b;
}

static int64_t mul3(int64_t a, int64_t b, int64_t c)
{
	return mul(mul(a, b), c);
}

static int refuse(ectx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(ectx *c, const char *fmt, ...)
{
	if (c->rc)
		return c->rc;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, c->n, fmt, ap);
	va_end(ap);
	return c->rc = -1;
}

/* Constant `name` of the op's kernel, required in [lo, hi]. */
static int64_t P(ectx *c, const char *name, int64_t lo, int64_t hi)
{
	for (int i = 0; c->k && i < c->k->n_params; i++)
		if (!strcmp(c->k->params[i].name, name)) {
			int64_t v = c->k->params[i].i;
			if (v < lo || v > hi || (double)v != c->k->params[i].f)
				refuse(c, "kernel %s constant %s = %.17g, expected an integer in [%lld, %lld]",
				       c->k->uri, name, c->k->params[i].f, (long long)lo, (long long)hi);
			return c->rc ? 0 : v;
		}
	refuse(c, "kernel %s has no constant %s (its template %s reads it)", c->k ? c->k->uri : "?",
	       name, c->k ? c->k->tmpl : "?");
	return 0;
}

/* A constant that must equal the engine's own value (the step kernel keeps
 * the runtime indices under it). */
static int64_t P_eq(ectx *c, const char *name, int64_t want, const char *what)
{
	int64_t v = P(c, name, 0, INT32_MAX);
	if (!c->rc && v != want)
		refuse(c, "kernel %s constant %s = %lld, expected %lld (%s)", c->k->uri, name,
		       (long long)v, (long long)want, what);
	return v;
}

/* A K/V cache's slots per layer: max_context, or (a block-drafter engine's
 * drafter cache, which stages its B block rows past the context)
 * max_context + B. Extents follow the constant, so either stays checked. */
static int64_t P_ctx(ectx *c)
{
	const int64_t mc = c->m->max_ctx, mb = mc + c->m->block;
	int64_t v = P(c, "MAX_CTX", 0, INT32_MAX);
	if (!c->rc && v != mc && !(c->m->block && v == mb))
		refuse(c, "kernel %s constant MAX_CTX = %lld, expected %lld ($.spec.max_context)%s",
		       c->k->uri, (long long)v, (long long)mc, c->m->block ? " or that + the block" : "");
	return v;
}

#define MAXI ((int64_t)1 << 30)

static void set(ectx *c, int a, int64_t bytes, bool wr, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void set(ectx *c, int a, int64_t bytes, bool wr, const char *fmt, ...)
{
	va_list ap;
	c->e->bytes[a] = bytes;
	if (wr)
		c->e->writes |= 1u << a;
	va_start(ap, fmt);
	vsnprintf(c->e->what[a], sizeof(c->e->what[a]), fmt, ap);
	va_end(ap);
}

/* The block the template's BLOCK constant sizes its shared reductions for. */
static void block_is(ectx *c, int64_t want)
{
	const unsigned *b = c->x->block;
	if (!c->rc && ((int64_t)b[0] != want || b[1] != 1 || b[2] != 1))
		refuse(c, "block [%u, %u, %u], expected [%lld, 1, 1] (the kernel's BLOCK)", b[0], b[1],
		       b[2], (long long)want);
}

static void one_block(ectx *c)
{
	const unsigned *g = c->x->grid;
	if (!c->rc && (g[0] != 1 || g[1] != 1 || g[2] != 1))
		refuse(c, "grid [%u, %u, %u], expected [1, 1, 1] (a one-block kernel)", g[0], g[1], g[2]);
}

static int64_t el16(ectx *c)
{
	(void)P(c, "IS_F16", 0, 1);
	return 2;
}

/* embedding16.cu.tmpl:26-62: row t = BID_X reads tok[t], table row tok[t]
 * (id < N_ROWS; ids in [N_ROWS, N_IDS) write zeros and read no row), writes
 * y[t * D .. + D); err one word. N_IDS is absent from engines built before
 * it (N_IDS = N_ROWS there); present, it bounds no address, only the ids
 * written as zeros, so any N_IDS >= N_ROWS is safe. */
static void ext_embedding16(ectx *c)
{
	const int64_t D = P(c, "DIM", 1, MAXI), NR = P(c, "N_ROWS", 1, MAXI), es = el16(c);
	const int64_t T = c->x->grid[0];
	bool has_ids = false;
	for (int i = 0; c->k && i < c->k->n_params; i++)
		has_ids |= !strcmp(c->k->params[i].name, "N_IDS");
	if (has_ids)
		(void)P(c, "N_IDS", NR, MAXI);
	block_is(c, P(c, "BLOCK", 1, 1024));
	set(c, 0, mul3(T, D, 4), true, "grid.x %lld rows x DIM %lld f32", (long long)T, (long long)D);
	set(c, 1, mul3(NR, D, es), false, "N_ROWS %lld x DIM %lld x 2 bytes", (long long)NR,
	    (long long)D);
	set(c, 2, mul(T, 4), false, "grid.x %lld tokens", (long long)T);
	set(c, 3, 4, true, "one error word");
}

/* embedding_gguf.cu.tmpl: row t = BID_X reads tok[t] and (id < N_ROWS)
 * one row of the table's planes, laid out for N_ROWS rows of DIM in WTYPE
 * (kernels/ref/ref.h: the planes' extent is the file's bytes, N_ROWS x DIM
 * of the type; the offsets of a row's planes follow N_ROWS, so the table
 * must be a weight of exactly that shape and type); writes y[t * D .. +
 * D); err one word. N_IDS >= N_ROWS bounds no address. */
static void ext_embedding_gguf(ectx *c)
{
	const rt_engine_pop *x = c->x;
	const int64_t WT = P(c, "WTYPE", 0, 255), D = P(c, "DIM", 1, MAXI);
	const int64_t NR = P(c, "N_ROWS", 1, MAXI), T = x->grid[0];
	(void)P(c, "N_IDS", NR, MAXI);
	block_is(c, P(c, "BLOCK", 1, 1024));
	if (c->rc)
		return;
	const int64_t blk = ref_wplanes_block((int)WT);
	const char *tn = sw_wformat_gemm_name((int)WT) ? sw_wformat_gemm_name((int)WT) : "?";
	if (!blk || D % blk)
		refuse(c, "kernel %s: WTYPE %lld, DIM %lld: expected a GGUF type with planes (2, 3, 6, "
		       "8, 12, 14) whose blocks divide DIM", c->k->uri, (long long)WT, (long long)D);
	const rt_engine_buf *b = x->arg_buf[1] >= 0 ? &c->m->bufs[x->arg_buf[1]] : NULL;
	if (!c->rc && b && !strcmp(b->kind, "weight")) {
		if (b->rank != 2 || b->shape[0] != NR || b->shape[1] != D)
			refuse(c, "table buffer %s of shape [%lld, %lld], expected [N_ROWS %lld, DIM %lld]",
			       b->name, (long long)b->shape[0], (long long)(b->rank > 1 ? b->shape[1] : 0),
			       (long long)NR, (long long)D);
		else if (rt_manifest_buf_wtype(b, -1) != WT)
			refuse(c, "table buffer %s is %s, expected the kernel's WTYPE %lld (%s)", b->name,
			       b->dtype, (long long)WT, tn);
	}
	set(c, 0, mul3(T, D, 4), true, "grid.x %lld rows x DIM %lld f32", (long long)T, (long long)D);
	set(c, 1, (int64_t)sw_wformat_nbytes((uint32_t)WT, (uint64_t)mul(NR, D)), false,
	    "N_ROWS %lld x DIM %lld %s planes", (long long)NR, (long long)D, tn);
	set(c, 2, mul(T, 4), false, "grid.x %lld tokens", (long long)T);
	set(c, 3, 4, true, "one error word");
}

/* block_embed.cu.tmpl:22-63: row j = BID_X < B (grid.x = B): y[j * D ..
 * + D), blk_tok[j] and (FIRST, block B - 1) blk_tok[B]: B + 1 words; a
 * token row t < N_ROWS or mask row j - 1 < B - 1; blk_pos[j]; root, len
 * and err one word each. */
static void ext_block_embed(ectx *c)
{
	const int64_t NB = P(c, "B", 1, RT_ENGINE_MAX_NODES), D = P(c, "DIM", 1, MAXI);
	const int64_t NR = P(c, "N_ROWS", 1, MAXI), es = el16(c);
	(void)P(c, "FIRST", 0, 1);
	block_is(c, P(c, "BLOCK", 1, 1024));
	const unsigned *g = c->x->grid;
	if (!c->rc && (g[0] != (uint64_t)NB || g[1] != 1 || g[2] != 1))
		refuse(c, "grid [%u, %u, %u], expected [%lld, 1, 1] (a block per block row: B)", g[0],
		       g[1], g[2], (long long)NB);
	set(c, 0, mul3(NB, D, 4), true, "B %lld rows x DIM %lld f32", (long long)NB, (long long)D);
	set(c, 1, mul3(NR, D, es), false, "N_ROWS %lld x DIM %lld x 2 bytes", (long long)NR,
	    (long long)D);
	set(c, 2, mul3(NB - 1, D, es), false, "(B - 1) %lld mask rows x DIM %lld x 2 bytes",
	    (long long)(NB - 1), (long long)D);
	set(c, 3, mul(NB + 1, 4), true, "B + 1 = %lld tokens", (long long)(NB + 1));
	set(c, 4, 4, false, "one root token");
	set(c, 5, mul(NB, 4), true, "B %lld positions", (long long)NB);
	set(c, 6, 4, false, "one length word");
	set(c, 7, 4, true, "one error word");
}

/* feature_tap.cu.tmpl:10-28: row r = BID_X < ROWS (grid.x = ROWS): taps
 * row r, columns [SLOT * DIM, SLOT * DIM + DIM) of N_TAPS * DIM (the whole
 * (ROWS, N_TAPS * DIM) buffer bounds it); h and delta rows r. */
static void ext_feature_tap(ectx *c)
{
	const int64_t R = P(c, "ROWS", 1, MAXI), D = P(c, "DIM", 1, MAXI);
	const int64_t NT = P(c, "N_TAPS", 1, 64), SL = P(c, "SLOT", 0, NT - 1);
	(void)SL;
	block_is(c, P(c, "BLOCK", 1, 1024));
	const unsigned *g = c->x->grid;
	if (!c->rc && (g[0] != (uint64_t)R || g[1] != 1 || g[2] != 1))
		refuse(c, "grid [%u, %u, %u], expected [%lld, 1, 1] (a block per row: ROWS)", g[0], g[1],
		       g[2], (long long)R);
	set(c, 0, mul3(R, mul(NT, D), 4), true, "ROWS %lld x N_TAPS %lld x DIM %lld f32",
	    (long long)R, (long long)NT, (long long)D);
	for (int a = 1; a < 3; a++)
		set(c, a, mul3(R, D, 4), false, "ROWS %lld x DIM %lld f32", (long long)R, (long long)D);
}

/* block_unmask.cu.tmpl:96-129: block b = BID_X < B (grid.x = B): word
 * b + 1 of blk_tok (B + 1 words), row b of probs (B, VD) f32 (written with
 * FINAL); the seed's two words, an iteration word. */
static void ext_block_unmask(ectx *c)
{
	const int64_t NB = P(c, "B", 1, 128), VD = P(c, "VD", 1, MAXI);
	const int64_t S = P(c, "STEPS", 1, 16), FIN = P(c, "FINAL", 0, 1);
	(void)P(c, "PASS", 0, FIN ? S - 1 : S - 2);
	block_is(c, P(c, "BLOCK", 32, 1024));
	const unsigned *g = c->x->grid;
	if (!c->rc && (g[0] != (uint64_t)NB || g[1] != 1 || g[2] != 1))
		refuse(c, "grid [%u, %u, %u], expected [%lld, 1, 1] (a block per position: B)", g[0],
		       g[1], g[2], (long long)NB);
	set(c, 0, mul(NB + 1, 4), true, "B + 1 = %lld tokens", (long long)(NB + 1));
	set(c, 1, mul3(NB, VD, 4), FIN != 0, "B %lld rows x VD %lld f32", (long long)NB,
	    (long long)VD);
	set(c, 2, 2 * 4, false, "two seed words");
	set(c, 3, 4, false, "one iteration word");
	const int64_t MP = P(c, "MAPPED", 0, 1);
	set(c, 4, MP ? mul(VD, 4) : 0, false, "%s", MP ? "VD i32 (d2t)" : "not read (MAPPED 0)");
}

/* q_target.cu.tmpl: block (BID_X, r = BID_Y < DEPTHS) writes out[r, x] for x
 * < V (grid.x * BLOCK >= V), reads t2d[x] and q[r, t2d[x]] with t2d[x] <
 * VD (the kernel reads nothing for an entry outside [0, VD)). */
static void ext_q_target(ectx *c)
{
	const int64_t R = P(c, "DEPTHS", 1, MAXI), VD = P(c, "VD", 1, MAXI), V = P(c, "V", 1, MAXI);
	const int64_t BL = P(c, "BLOCK", 32, 1024);
	block_is(c, BL);
	const unsigned *g = c->x->grid;
	if (!c->rc && ((int64_t)g[0] != (V + BL - 1) / BL || g[1] != (uint64_t)R || g[2] != 1))
		refuse(c, "grid [%u, %u, %u], expected [%lld, %lld, 1] (ceil(V / BLOCK), DEPTHS)", g[0],
		       g[1], g[2], (long long)((V + BL - 1) / BL), (long long)R);
	set(c, 0, mul3(R, V, 4), true, "DEPTHS %lld x V %lld f32", (long long)R, (long long)V);
	set(c, 1, mul3(R, VD, 4), false, "DEPTHS %lld x VD %lld f32", (long long)R, (long long)VD);
	set(c, 2, mul(V, 4), false, "V %lld i32 (t2d)", (long long)V);
}

/* quant_a8.cu.tmpl: thread i = BID_X * BLOCK + TID_X < M K / 32 (grid
 * ceil(M K / 32 / BLOCK)) reads block i of a16 (32 fp16) and writes a8's
 * q bytes 32 i .., da[i] and s[i] past M K and M K + 4 M K / 32: the
 * whole (M, K) a8 layout, 1.25 M K bytes. */
static void ext_quant_a8(ectx *c)
{
	const int64_t M = P(c, "M", 1, MAXI), K = P(c, "K", 32, MAXI), BL = P(c, "BLOCK", 32, 1024);
	block_is(c, BL);
	if (!c->rc && K % 32)
		refuse(c, "kernel %s constant K = %lld, expected a multiple of 32", c->k->uri,
		       (long long)K);
	const int64_t nb = mul(M, K / 32);
	const unsigned *g = c->x->grid;
	if (!c->rc && ((int64_t)g[0] != (nb + BL - 1) / BL || g[1] != 1 || g[2] != 1))
		refuse(c, "grid [%u, %u, %u], expected [%lld, 1, 1] (ceil(M K / 32 / BLOCK))", g[0],
		       g[1], g[2], (long long)((nb + BL - 1) / BL));
	set(c, 0, mul(M, K) + mul(nb, 8), true, "M %lld x K %lld int8 + M K / 32 x 8 bytes",
	    (long long)M, (long long)K);
	set(c, 1, mul3(M, K, 2), false, "M %lld x K %lld fp16", (long long)M, (long long)K);
}

/* gemv16.cu.tmpl: C (M, N) f32 written, A (M, K) and W (N, K) 16-bit read
 * (rows past N read as row N - 1, inside); the grid the template's header
 * states. The W buffer, where it is a weight, is the engine's 16-bit dtype
 * of rows of K (its first N rows read: a fused weight's leading part). */
static void ext_gemv16(ectx *c)
{
	const int64_t F16 = P(c, "IS_F16", 0, 1), M = P(c, "M", 1, MAXI), N = P(c, "N", 1, MAXI);
	const int64_t K = P(c, "K", 8, MAXI), MT = P(c, "MT", 1, 64), R = P(c, "R", 1, 8);
	const int64_t WA = P(c, "WARPS", 1, 32), KS = P(c, "KS", 1, 32);
	if (c->rc)
		return;
	if (K % 8 || WA % KS)
		refuse(c, "kernel %s: K %lld, WARPS %lld, KS %lld: expected K a multiple of 8 and KS "
		       "dividing WARPS", c->k->uri, (long long)K, (long long)WA, (long long)KS);
	block_is(c, 32 * WA);
	const int64_t rows = R * (WA / KS);
	const unsigned *g = c->x->grid;
	if (!c->rc && ((int64_t)g[0] != (N + rows - 1) / rows || g[1] != 1 ||
	               (int64_t)g[2] != (M + MT - 1) / MT))
		refuse(c, "grid [%u, %u, %u], expected [%lld, 1, %lld] (ceil(N / (R WARPS / KS)), 1, "
		       "ceil(M / MT))", g[0], g[1], g[2], (long long)((N + rows - 1) / rows),
		       (long long)((M + MT - 1) / MT));
	const rt_engine_buf *b = c->x->arg_buf[2] >= 0 ? &c->m->bufs[c->x->arg_buf[2]] : NULL;
	if (!c->rc && b && !strcmp(b->kind, "weight") &&
	    (strcmp(b->dtype, F16 ? "fp16" : "bf16") || b->rank < 2 || b->shape[b->rank - 1] != K ||
	     b->shape[b->rank - 2] < N))
		refuse(c, "W buffer %s (%s, last dims [%lld, %lld]), expected %s of at least N %lld "
		       "rows of K %lld", b->name, b->dtype,
		       (long long)(b->rank > 1 ? b->shape[b->rank - 2] : 0),
		       (long long)(b->rank ? b->shape[b->rank - 1] : 0), F16 ? "fp16" : "bf16",
		       (long long)N, (long long)K);
	set(c, 0, mul3(M, N, 4), true, "M %lld x N %lld f32", (long long)M, (long long)N);
	set(c, 1, mul3(M, K, 2), false, "M %lld x K %lld 16-bit", (long long)M, (long long)K);
	set(c, 2, mul3(N, K, 2), false, "N %lld x K %lld 16-bit", (long long)N, (long long)K);
}

/* gemv_gguf.cu.tmpl: block (BID_X, 0, BID_Z) writes C rows m0 .. m0 + MT -
 * 1 < M (m0 = BID_Z MT) of columns < N; reads a8 as quant_a8 of (M, K)
 * wrote it (a16 is the GEMM's fp16 input, not read by the kernel, M x K x
 * 2 for the host's GEMM) and the first N rows of W's planes, laid out for
 * NW rows of K (kernels/ref/ref.h): the weight's rows, in the type WTYPE
 * every layer this op runs has. */
static void ext_gemv_gguf(ectx *c)
{
	const rt_engine_pop *x = c->x;
	const int64_t WT = P(c, "WTYPE", 0, 255), M = P(c, "M", 1, MAXI), N = P(c, "N", 1, MAXI);
	const int64_t NW = P(c, "NW", 1, MAXI), K = P(c, "K", 32, MAXI), MT = P(c, "MT", 1, 64);
	const int64_t R = P(c, "R", 1, 8), WA = P(c, "WARPS", 1, 32), KS = P(c, "KS", 1, 32);
	if (c->rc)
		return;
	const int64_t blk = ref_wplanes_block((int)WT);
	if (!blk || K % blk || NW < N || WA % KS)
		refuse(c, "kernel %s: WTYPE %lld, K %lld, N %lld, NW %lld, WARPS %lld, KS %lld: "
		       "expected a GGUF type with planes (2, 3, 6, 8, 12, 14) whose blocks divide K, N <= "
		       "NW and KS dividing WARPS", c->k->uri, (long long)WT, (long long)K, (long long)N,
		       (long long)NW, (long long)WA, (long long)KS);
	block_is(c, 32 * WA);
	const int64_t rows = R * (WA / (KS ? KS : 1));
	const unsigned *g = c->x->grid;
	if (!c->rc && ((int64_t)g[0] != (N + rows - 1) / rows || g[1] != 1 ||
	               (int64_t)g[2] != (M + MT - 1) / MT))
		refuse(c, "grid [%u, %u, %u], expected [%lld, 1, %lld] (ceil(N / (R WARPS / KS)), 1, "
		       "ceil(M / MT))", g[0], g[1], g[2], (long long)((N + rows - 1) / rows),
		       (long long)((M + MT - 1) / MT));
	/* W: a weight of NW rows of K in WTYPE, layer by layer */
	const rt_engine_buf *b = x->arg_buf[3] >= 0 ? &c->m->bufs[x->arg_buf[3]] : NULL;
	if (!c->rc && b && !strcmp(b->kind, "weight")) {
		if (b->rank < 2 || b->shape[b->rank - 1] != K || b->shape[b->rank - 2] != NW)
			refuse(c, "W buffer %s of shape [.., %lld, %lld], expected [.., NW %lld, K %lld]",
			       b->name, (long long)(b->rank > 1 ? b->shape[b->rank - 2] : 0),
			       (long long)(b->rank ? b->shape[b->rank - 1] : 0), (long long)NW,
			       (long long)K);
		const bool lay = x->layers && b->rank == 3;
		for (int l = 0; !c->rc && l < (lay ? x->repeat : 1); l++) {
			int id = lay ? x->layer0 + l : -1;
			if (lay && x->layers == 2 && c->m->draft_kind == RT_ENGINE_DRAFT_LAYERSKIP)
				id = id < c->m->n_skip ? c->m->skip_layers[id] : -1;
			const int t = lay && id < 0 ? -1 : rt_manifest_buf_wtype(b, id);
			if (t != WT)
				refuse(c, "W buffer %s layer %d is %s, expected the kernel's WTYPE %lld (%s)",
				       b->name, id, sw_wformat_gemm_name(t) ? sw_wformat_gemm_name(t) : "?",
				       (long long)WT, sw_wformat_gemm_name((int)WT) ? sw_wformat_gemm_name((int)WT)
				                                                    : "?");
		}
	}
	set(c, 0, mul3(M, N, 4), true, "M %lld x N %lld f32", (long long)M, (long long)N);
	set(c, 1, mul3(M, K, 2), false, "M %lld x K %lld fp16", (long long)M, (long long)K);
	set(c, 2, mul(M, K) + mul(M, K / 32 * 8), false, "M %lld x K %lld int8 + M K / 32 x 8 bytes",
	    (long long)M, (long long)K);
	set(c, 3, (int64_t)sw_wformat_nbytes((uint32_t)WT, (uint64_t)mul(NW, K)), false,
	    "NW %lld x K %lld %s planes", (long long)NW, (long long)K,
	    sw_wformat_gemm_name((int)WT) ? sw_wformat_gemm_name((int)WT) : "?");
}

/* rmsnorm_residual.cu.tmpl:14-44: row BID_X of y, s, x, r (D floats each),
 * w[0 .. D). Any of y, s, x, r may be one buffer: a thread reads its own
 * elements of x and r, writes s, and (after the block sum) reads s and
 * writes y, the same elements in both passes (s = x + r in place; a
 * post-norm's y = s = x = r, gen/plan.c op_post_norm). */
static void ext_rmsnorm_residual(ectx *c)
{
	const int64_t D = P(c, "DIM", 1, MAXI), T = c->x->grid[0];
	block_is(c, P(c, "BLOCK", 1, 1024));
	for (int a = 0; a < 4; a++)
		set(c, a, mul3(T, D, 4), a < 2, "grid.x %lld rows x DIM %lld f32", (long long)T,
		    (long long)D);
	set(c, 4, mul(D, 4), false, "DIM %lld f32", (long long)D);
	c->e->alias_any |= 0xfu; /* y, s, x, r */
}

/* rmsnorm_cast.cu.tmpl: row t = BID_X < grid.x: y (T, DIM) 16-bit, s, x, r
 * (T, DIM) f32, w (DIM); with A8 (IS_F16 1, DIM whole blocks of 32) a8 as
 * quant_a8 of (M = T, K = DIM) writes it, without it nothing of a8. s may
 * overlap x and r (rmsnorm_residual's rule). */
static void ext_rmsnorm_cast(ectx *c)
{
	const int64_t D = P(c, "DIM", 1, MAXI), T = c->x->grid[0], es = el16(c);
	const int64_t a8 = P(c, "A8", 0, 1), B = P(c, "BLOCK", 32, 1024);
	block_is(c, B);
	if (!c->rc && (B % 32 || (a8 && (D % 32 || P(c, "IS_F16", 0, 1) != 1))))
		refuse(c, "kernel %s: BLOCK %lld, DIM %lld, A8 %lld: expected a BLOCK of whole warps, "
		       "and with A8 fp16 rows of whole blocks of 32", c->k->uri, (long long)B,
		       (long long)D, (long long)a8);
	set(c, 0, mul3(T, D, es), true, "grid.x %lld rows x DIM %lld x 2 bytes", (long long)T,
	    (long long)D);
	for (int a = 1; a < 4; a++)
		set(c, a, mul3(T, D, 4), a == 1, "grid.x %lld rows x DIM %lld f32", (long long)T,
		    (long long)D);
	set(c, 4, mul(D, 4), false, "DIM %lld f32", (long long)D);
	set(c, 5, a8 ? mul(T, D) + mul(T, D / 32) * 8 : 0, a8 != 0,
	    "A8: grid.x %lld x DIM %lld int8 + DIM / 32 x 8 bytes a row", (long long)T, (long long)D);
	c->e->alias_any |= 0xeu; /* s, x, r */
}

/* swiglu_cast.cu.tmpl: row t = BID_Y < grid.y, columns < FFN (guarded): y
 * (T, FFN) 16-bit; gate and up rows at t * LD (LD >= FFN) f32; with A8
 * (IS_F16 1, FFN whole blocks of 32) a8 as quant_a8 of (M = T, K = FFN). */
static void ext_swiglu_cast(ectx *c)
{
	const int64_t F = P(c, "FFN", 1, MAXI), LD = P(c, "LD", 1, MAXI), T = c->x->grid[1];
	const int64_t es = el16(c), a8 = P(c, "A8", 0, 1);
	(void)P(c, "ACT", 0, 1);
	const int64_t B = P(c, "BLOCK", 32, 1024);
	block_is(c, B);
	if (!c->rc && (LD < F || B % 32 || (a8 && (F % 32 || P(c, "IS_F16", 0, 1) != 1))))
		refuse(c, "kernel %s: FFN %lld, LD %lld, BLOCK %lld, A8 %lld: expected LD >= FFN, a "
		       "BLOCK of whole warps, and with A8 fp16 rows of whole blocks of 32", c->k->uri,
		       (long long)F, (long long)LD, (long long)B, (long long)a8);
	set(c, 0, mul3(T, F, es), true, "grid.y %lld rows x FFN %lld x 2 bytes", (long long)T,
	    (long long)F);
	for (int a = 1; a < 3; a++)
		set(c, a, T ? mul(mul(T - 1, LD) + F, 4) : 0, false,
		    "(grid.y %lld - 1) x LD %lld + FFN %lld f32", (long long)T, (long long)LD,
		    (long long)F);
	set(c, 3, a8 ? mul(T, F) + mul(T, F / 32) * 8 : 0, a8 != 0,
	    "A8: grid.y %lld x FFN %lld int8 + FFN / 32 x 8 bytes a row", (long long)T, (long long)F);
}

/* cast.cu.tmpl:22-47: element i < N (any grid: guarded); MODE <= 1 reads
 * f32 and writes 16-bit, MODE 2/3 the reverse. */
static void ext_cast(ectx *c)
{
	const int64_t N = P(c, "N", 1, (int64_t)1 << 40), mode = P(c, "MODE", 0, 3);
	block_is(c, P(c, "BLOCK", 1, 1024));
	set(c, 0, mul(N, mode <= 1 ? 2 : 4), true, "N %lld x %d bytes", (long long)N,
	    mode <= 1 ? 2 : 4);
	set(c, 1, mul(N, mode <= 1 ? 4 : 2), false, "N %lld x %d bytes", (long long)N,
	    mode <= 1 ? 4 : 2);
}

/* rope.cu.tmpl:16-40: row t = BID_X: pos[t], x[t * H * HD .. + H * HD)
 * (ROT <= HD of each head), inv_freq[0 .. ROT / 2). */
static void ext_rope(ectx *c)
{
	const int64_t H = P(c, "N_HEADS", 1, MAXI), HD = P(c, "HEAD_DIM", 1, MAXI);
	const int64_t ROT = P(c, "ROT_DIM", 2, HD > 2 ? HD : 2), T = c->x->grid[0];
	block_is(c, P(c, "BLOCK", 1, 1024));
	if (!c->rc && ROT % 2)
		refuse(c, "kernel %s constant ROT_DIM = %lld, expected an even number", c->k->uri,
		       (long long)ROT);
	set(c, 0, mul3(T, mul(H, HD), 4), true, "grid.x %lld rows x N_HEADS %lld x HEAD_DIM %lld f32",
	    (long long)T, (long long)H, (long long)HD);
	set(c, 1, mul(T, 4), false, "grid.x %lld positions", (long long)T);
	set(c, 2, mul(ROT / 2, 4), false, "ROT_DIM / 2 = %lld f32", (long long)(ROT / 2));
}

/* head_prep.cu.tmpl: row t = BID_X: pos[t], x[t * H * HD .. + H * HD);
 * inv_freq[0 .. HD / 2) when ROPE, b (H * HD) when BIAS, w (HD) when NORM;
 * a step that is off reads nothing of its argument. */
static void ext_head_prep(ectx *c)
{
	const int64_t H = P(c, "N_HEADS", 1, MAXI), HD = P(c, "HEAD_DIM", 2, 512);
	const int64_t bias = P(c, "BIAS", 0, 1), norm = P(c, "NORM", 0, 1), rope = P(c, "ROPE", 0, 1);
	const int64_t T = c->x->grid[0], B = P(c, "BLOCK", 32, 1024);
	block_is(c, B);
	if (!c->rc && (HD % 2 || B % 32))
		refuse(c, "kernel %s: HEAD_DIM %lld and BLOCK %lld, expected an even HEAD_DIM and a "
		       "BLOCK of whole warps", c->k->uri, (long long)HD, (long long)B);
	set(c, 0, mul3(T, mul(H, HD), 4), true, "grid.x %lld rows x N_HEADS %lld x HEAD_DIM %lld f32",
	    (long long)T, (long long)H, (long long)HD);
	set(c, 1, mul(T, 4), false, "grid.x %lld positions", (long long)T);
	set(c, 2, rope ? mul(HD / 2, 4) : 0, false, "HEAD_DIM / 2 = %lld f32", (long long)(HD / 2));
	set(c, 3, bias ? mul3(H, HD, 4) : 0, false, "N_HEADS x HEAD_DIM f32 bias");
	set(c, 4, norm ? mul(HD, 4) : 0, false, "HEAD_DIM %lld f32 norm weights", (long long)HD);
}

/* swiglu.cu.tmpl:16-30: row BID_Y, columns i < FFN (guarded): y, gate, up;
 * y may be gate (in place). */
static void ext_swiglu(ectx *c)
{
	const int64_t F = P(c, "FFN", 1, MAXI), R = c->x->grid[1];
	block_is(c, P(c, "BLOCK", 1, 1024));
	for (int a = 0; a < 3; a++)
		set(c, a, mul3(R, F, 4), a == 0, "grid.y %lld rows x FFN %lld f32", (long long)R,
		    (long long)F);
	c->e->alias_ok |= 1u << 1;
}

/* tree_attention.cu.tmpl: _part (part_o, part_ml, q, k, v, ctx_len), grid
 * (N_KV_HEADS, splits, row blocks), lines 243-273: kvh = BID_X indexes q
 * heads and K/V columns; K/V rows [0, ctx + N_BLK) <= MAX_CTX (the caller's
 * promise, line 8), partials (CTX_SPLITS, T, N_HEADS, HEAD_DIM | 2) (lines
 * 58-60, 461-466); y >= live splits exit (line 248). _merge (out, part_o,
 * part_ml, ctx_len), grid (T, any): token t = BID_X, out (T, N_HEADS,
 * HEAD_DIM) 16-bit (line 514). */
static void ext_tree_attention(ectx *c)
{
	const int64_t es = el16(c), T = P(c, "T", 1, MAXI);
	const int64_t NB = P(c, "N_BLK", 1, MAXI), H = P(c, "N_HEADS", 1, 1024);
	const int64_t KH = P(c, "N_KV_HEADS", 1, 1024), HD = P(c, "HEAD_DIM", 1, 1024);
	const int64_t MC = P_ctx(c);
	const int64_t SPLIT = P(c, "SPLIT", 1, MAXI), W = P(c, "WARPS", 1, 32);
	const int64_t MW = P(c, "MASK_WORDS", 0, MAXI), MB = P(c, "MBLOCK", 1, 1024);
	(void)P(c, "MASKED", 0, 1);
	if (c->rc)
		return;
	if (H % KH || T > NB || NB > MC || MW != (NB + 63) / 64 || HD % 8)
		refuse(c, "kernel %s: N_HEADS %lld, N_KV_HEADS %lld, T %lld, N_BLK %lld, MASK_WORDS "
		       "%lld, HEAD_DIM %lld, MAX_CTX %lld: expected N_HEADS a multiple of N_KV_HEADS, T "
		       "<= N_BLK <= MAX_CTX, MASK_WORDS = ceil(N_BLK / 64), HEAD_DIM a multiple of 8",
		       c->k->uri, (long long)H, (long long)KH, (long long)T, (long long)NB, (long long)MW,
		       (long long)HD, (long long)MC);
	const int64_t splits = (MC + SPLIT - 1) / SPLIT, rows = mul3(splits, T, H);
	const bool merge = strstr(c->x->entry, "_merge") != NULL;
	const int po = merge ? 1 : 0;
	set(c, po, mul3(rows, HD, 4), !merge, "ceil(MAX_CTX / SPLIT) %lld x T %lld x N_HEADS %lld x "
	    "HEAD_DIM %lld f32", (long long)splits, (long long)T, (long long)H, (long long)HD);
	set(c, po + 1, mul3(rows, 2, 4), !merge, "ceil(MAX_CTX / SPLIT) %lld x T %lld x N_HEADS %lld "
	    "x 2 f32", (long long)splits, (long long)T, (long long)H);
	if (merge) {
		block_is(c, MB);
		if (!c->rc && (int64_t)c->x->grid[0] > T)
			refuse(c, "grid.x %u, expected at most T = %lld (one block per token)",
			       c->x->grid[0], (long long)T);
		set(c, 0, mul3(T, mul(H, HD), es), true, "T %lld x N_HEADS %lld x HEAD_DIM %lld x 2 "
		    "bytes", (long long)T, (long long)H, (long long)HD);
		set(c, 3, 4, false, "one length word");
		return;
	}
	block_is(c, 32 * W);
	if (!c->rc && (int64_t)c->x->grid[0] > KH)
		refuse(c, "grid.x %u, expected at most N_KV_HEADS = %lld (one block per KV head)",
		       c->x->grid[0], (long long)KH);
	set(c, 2, mul3(T, mul(H, HD), es), false, "T %lld x N_HEADS %lld x HEAD_DIM %lld x 2 bytes",
	    (long long)T, (long long)H, (long long)HD);
	for (int a = 3; a < 5; a++)
		set(c, a, mul3(MC, mul(KH, HD), es), false, "MAX_CTX %lld x N_KV_HEADS %lld x "
		    "HEAD_DIM %lld x 2 bytes", (long long)MC, (long long)KH, (long long)HD);
	set(c, 5, 4, false, "one length word");
}

/* kv_store.cu.tmpl:37-51: id < ROWS * KVD / V (any grid), r < ROWS; the
 * cache row len + r < MAX_CTX - ROW0 (line 43; the arg's offset is ROW0
 * rows in), sources k, v (ROWS, KVD) f32. */
static void ext_kv_store(ectx *c)
{
	const int64_t R = P(c, "ROWS", 1, MAXI), KVD = P(c, "KVD", 1, MAXI);
	const int64_t R0 = P(c, "ROW0", 0, MAXI), es = el16(c);
	const int64_t MC = P_ctx(c);
	block_is(c, P(c, "BLOCK", 1, 1024));
	if (!c->rc && R0 >= MC)
		refuse(c, "kernel %s constant ROW0 = %lld, expected below MAX_CTX %lld", c->k->uri,
		       (long long)R0, (long long)MC);
	for (int a = 0; a < 2; a++)
		set(c, a, mul3(MC - R0, KVD, es), true, "(MAX_CTX %lld - ROW0 %lld) rows x KVD %lld x 2 "
		    "bytes", (long long)MC, (long long)R0, (long long)KVD);
	for (int a = 2; a < 4; a++)
		set(c, a, mul3(R, KVD, 4), false, "ROWS %lld x KVD %lld f32", (long long)R,
		    (long long)KVD);
	set(c, 4, 4, false, "one length word");
}

/* qkv_rope.cu.tmpl: row t = BID_X < grid.x = ROWS: q16 (ROWS, N_HEADS HD)
 * 16-bit; kc, vc as kv_store's (rows len + t < MAX_CTX - ROW0 from the
 * arg's offset); q, k, v rows at t * LDQ, t * LDKV (FUSED 1: both (N_HEADS +
 * 2 N_KV_HEADS) HD, else their own widths) f32; pos ROWS words; inv_freq
 * HD / 2 f32 when ROPE; the weights: q's and k's bias (BIAS, their widths)
 * or norm (NORM, HD each), v's bias (BIAS); len one word. */
static void ext_qkv_rope(ectx *c)
{
	const int64_t H = P(c, "N_HEADS", 1, 4096), KH = P(c, "N_KV_HEADS", 1, 4096);
	const int64_t HD = P(c, "HEAD_DIM", 2, 512), R = P(c, "ROWS", 1, MAXI);
	const int64_t R0 = P(c, "ROW0", 0, MAXI), fused = P(c, "FUSED", 0, 1), es = el16(c);
	const int64_t bias = P(c, "BIAS", 0, 1), norm = P(c, "NORM", 0, 1), rope = P(c, "ROPE", 0, 2);
	const int64_t MC = P_ctx(c), B = P(c, "BLOCK", 32, 1024);
	block_is(c, B);
	const unsigned *g = c->x->grid;
	if (!c->rc && bias && norm)
		refuse(c, "kernel %s: BIAS 1 and NORM 1, expected at most one of them (one weight "
		       "argument a projection)", c->k->uri);
	if (!c->rc && (HD % 2 || B % 32 || R0 >= MC || (rope == 1 && (bias || norm))))
		refuse(c, "kernel %s: HEAD_DIM %lld, BLOCK %lld, ROW0 %lld, ROPE %lld, BIAS %lld, NORM "
		       "%lld: expected an even HEAD_DIM, a BLOCK of whole warps, ROW0 below MAX_CTX "
		       "%lld, and adjacent pairs (ROPE 1) with neither bias nor norm", c->k->uri,
		       (long long)HD, (long long)B, (long long)R0, (long long)rope, (long long)bias,
		       (long long)norm, (long long)MC);
	if (!c->rc && ((int64_t)g[0] != R || g[1] != 1 || g[2] != 1))
		refuse(c, "grid [%u, %u, %u], expected [%lld, 1, 1] (a block per row)", g[0], g[1], g[2],
		       (long long)R);
	const int64_t qd = mul(H, HD), kvd = mul(KH, HD);
	const int64_t ldq = fused ? qd + 2 * kvd : qd, ldkv = fused ? qd + 2 * kvd : kvd;
	set(c, 0, mul3(R, qd, es), true, "ROWS %lld x N_HEADS %lld x HEAD_DIM %lld x 2 bytes",
	    (long long)R, (long long)H, (long long)HD);
	for (int a = 1; a < 3; a++)
		set(c, a, mul3(MC - R0, kvd, es), true, "(MAX_CTX %lld - ROW0 %lld) rows x N_KV_HEADS "
		    "HEAD_DIM %lld x 2 bytes", (long long)MC, (long long)R0, (long long)kvd);
	set(c, 3, mul(mul(R - 1, ldq) + qd, 4), false, "(ROWS %lld - 1) x %lld + %lld f32",
	    (long long)R, (long long)ldq, (long long)qd);
	for (int a = 4; a < 6; a++)
		set(c, a, mul(mul(R - 1, ldkv) + kvd, 4), false, "(ROWS %lld - 1) x %lld + %lld f32",
		    (long long)R, (long long)ldkv, (long long)kvd);
	set(c, 6, mul(R, 4), false, "ROWS %lld positions", (long long)R);
	set(c, 7, rope ? mul(HD / 2, 4) : 0, false, "HEAD_DIM / 2 = %lld f32", (long long)(HD / 2));
	set(c, 8, 4, false, "one length word");
	set(c, 9, bias ? mul(qd, 4) : norm ? mul(HD, 4) : 0, false, "q's bias (N_HEADS HEAD_DIM) or "
	    "norm (HEAD_DIM) f32");
	set(c, 10, bias ? mul(kvd, 4) : norm ? mul(HD, 4) : 0, false, "k's bias (N_KV_HEADS "
	    "HEAD_DIM) or norm (HEAD_DIM) f32");
	set(c, 11, bias ? mul(kvd, 4) : 0, false, "v's bias (N_KV_HEADS HEAD_DIM) f32");
}

/* kv_commit.cu.tmpl:37-64: id < 2 N_LAYERS ROW_VEC (any grid): every
 * layer's rows [len, len + n) of (N_LAYERS, MAX_CTX, ROW_VEC x 16 bytes)
 * from its base: all the layers, not one slice. keep[0 .. n) with n <= the
 * tree's nodes; n_acc, len, done one word each. */
static void ext_kv_commit(ectx *c)
{
	const int64_t NL = P(c, "N_LAYERS", 1, 1024), RV = P(c, "ROW_VEC", 1, MAXI);
	const int64_t MC = P_ctx(c);
	block_is(c, P(c, "BLOCK", 1, 1024));
	for (int a = 0; a < 2; a++) {
		set(c, a, mul3(NL, MC, mul(RV, 16)), true, "N_LAYERS %lld x MAX_CTX %lld x ROW_VEC "
		    "%lld x 16 bytes", (long long)NL, (long long)MC, (long long)RV);
		c->e->whole |= 1u << a;
	}
	set(c, 2, mul(c->m->n_nodes, 4), false, "%d tree nodes", c->m->n_nodes);
	set(c, 3, 4, false, "one count word");
	set(c, 4, 4, true, "one length word");
	set(c, 5, 4, true, "one counter word");
}

/* logits_process.cu.tmpl:139-146: row BID_X of probs and logits, V each;
 * three sampling words (temperature, top-k, top-p). */
static void ext_logits_process(ectx *c)
{
	const int64_t V = P(c, "V", 1, MAXI), R = c->x->grid[1];
	const unsigned *g = c->x->grid;
	const int64_t S = g[0] / SW_LOGITS_PHASES; /* the slices: a run-time value of the grid */
	block_is(c, P(c, "BLOCK", 32, 1024));
	if (!c->rc && (S < 1 || S > 1024 || (int64_t)g[0] != SW_LOGITS_PHASES * S || g[2] != 1 ||
	               R < 1 || R > SW_LOGITS_MAX_ROWS))
		refuse(c, "grid [%u, %u, %u], expected [%d x slices (1 to 1024), rows (1 to %d), 1] (the "
		       "phases' blocks of each row)", g[0], g[1], g[2], SW_LOGITS_PHASES,
		       SW_LOGITS_MAX_ROWS);
	for (int a = 0; a < 2; a++)
		set(c, a, mul3(R, V, 4), a == 0, "grid.y %lld rows x V %lld f32", (long long)R,
		    (long long)V);
	set(c, 2, 3 * 4, false, "3 sampling words");
	set(c, 3, c->rc ? 0 : mul(sw_logits_scratch_words(R, S), 4), true,
	    "logits scratch of %lld rows x %lld slices (sample_layout.h)", (long long)R, (long long)S);
}

/* tree_expand.cu.tmpl: grid SLICES x (nodes in the level); node u =
 * LEVEL_BEGIN + BID_Y < N_NODES reads its own token (< N_NODES; absent or a
 * leaf: no q read), q row u (V floats; Q_BY_DEPTH: row depth(u), bounded by
 * the manifest's own tree table, the one the engine loads) and the tree
 * table (5 x N_NODES), writes tokens of its children (< N_NODES); the seed's
 * two words and an iteration word; MAPPED: ids (V i32); the scratch of
 * kernels/sample_layout.h for the level (KMAX candidates a slice: at least
 * the level's largest child count, which the merge reads). */
static void ext_tree_expand(ectx *c)
{
	const int64_t N = P_eq(c, "N_NODES", c->m->n_nodes, "$.shapes.tree.nodes");
	const int64_t V = P(c, "V", 1, MAXI), L0 = P(c, "LEVEL_BEGIN", 0, MAXI);
	const int64_t QD = P(c, "Q_BY_DEPTH", 0, 1), R = P(c, "RULE", 0, 3);
	const int64_t B = P(c, "BLOCK", 32, 1024), S = P(c, "SLICES", 1, B);
	const int64_t KM = P(c, "KMAX", 1, N);
	const unsigned *g = c->x->grid;
	const int64_t nl = g[1];
	block_is(c, B);
	if (!c->rc && (g[0] != (uint64_t)S || g[2] != 1))
		refuse(c, "grid [%u, %u, %u], expected [%lld, nodes, 1] (SLICES %lld vocabulary slices "
		       "of each node)", g[0], g[1], g[2], (long long)S, (long long)S);
	if (!c->rc && L0 + nl > N)
		refuse(c, "LEVEL_BEGIN %lld + grid.y %lld nodes, expected at most N_NODES %lld",
		       (long long)L0, (long long)nl, (long long)N);
	for (int64_t u = L0; !c->rc && u < L0 + nl; u++)
		if (c->m->tree_table[N + u] > KM)
			refuse(c, "node %lld has %d children, expected at most KMAX %lld", (long long)u,
			       c->m->tree_table[N + u], (long long)KM);
	set(c, 0, mul(N, 4), true, "N_NODES %lld tokens", (long long)N);
	if (QD) { /* row depth(u) of the expanding nodes (a leaf returns first) */
		int64_t rows = 0;
		for (int64_t u = L0; !c->rc && u < L0 + nl; u++)
			if (c->m->tree_table[N + u] > 0 && c->m->tree_table[4 * N + u] + 1 > rows)
				rows = c->m->tree_table[4 * N + u] + 1;
		set(c, 1, mul3(rows, V, 4), false, "Q_BY_DEPTH: max depth + 1 = %lld rows x V %lld f32",
		    (long long)rows, (long long)V);
	} else {
		set(c, 1, mul3(L0 + nl, V, 4), false, "(LEVEL_BEGIN + grid.y) %lld rows x V %lld f32",
		    (long long)(L0 + nl), (long long)V);
	}
	set(c, 2, mul3(5, N, 4), false, "5 x N_NODES %lld tree words", (long long)N);
	set(c, 3, 2 * 4, false, "two seed words");
	set(c, 4, 4, false, "one iteration word");
	const int64_t MP = P(c, "MAPPED", 0, 1);
	set(c, 5, MP ? mul(V, 4) : 0, false, "%s", MP ? "V i32 (ids: d2t)" : "not read (MAPPED 0)");
	set(c, 6, c->rc ? 0 : mul(sw_expand_scratch_words((int)R, N, nl, S, KM, B), 4), true,
	    "expand scratch of %lld nodes, SLICES %lld, KMAX %lld, BLOCK %lld, RULE %lld "
	    "(sample_layout.h)", (long long)nl, (long long)S, (long long)KM, (long long)B,
	    (long long)R);
}

/* verify.cu.tmpl: grid N_NODES x SLICES (a block per node and vocabulary
 * slice, every method: kernels/verify_layout.h's sw_verify_grid); out_path,
 * out_tok, tok
 * (N), counts (5 words: runtime/engine_state.h), tree (5 x N), p (N, V) and
 * q (N, VQ: a draft vocabulary prefix, VQ <= V; Q_BY_DEPTH: depth_max rows,
 * row depth(u), read only for a node with children), scratch (kernels/verify_layout.h: the kernel's rows and tables, at
 * least the host specification's 2 V), the seed's two words, an iteration word. q may be
 * p (greedy). */
static void ext_verify(ectx *c)
{
	const int64_t N = P_eq(c, "N_NODES", c->m->n_nodes, "$.shapes.tree.nodes");
	const int64_t V = P(c, "V", 1, MAXI), B = P(c, "BLOCK", 32, 1024), VQ = P(c, "VQ", 1, V);
	const int64_t M = P(c, "METHOD", 0, 16), S = P(c, "SLICES", 1, V < 1 ? 1 : V);
	const int64_t QD = P(c, "Q_BY_DEPTH", 0, 1);
	const unsigned *g = c->x->grid;
	const int64_t G = sw_verify_grid(N, S, (int)M);
	if (!c->rc && (g[0] != (uint64_t)G || g[1] != 1 || g[2] != 1))
		refuse(c, "grid [%u, %u, %u], expected [%lld, 1, 1] (a block per tree node and "
		       "vocabulary slice: N_NODES %lld x SLICES %lld)", g[0], g[1], g[2],
		       (long long)G, (long long)N, (long long)S);
	block_is(c, B);
	set(c, 0, mul(N, 4), true, "N_NODES %lld words", (long long)N);
	set(c, 1, mul(N, 4), true, "N_NODES %lld words", (long long)N);
	set(c, 2, 5 * 4, true, "5 count words");
	set(c, 3, mul3(5, N, 4), false, "5 x N_NODES %lld tree words", (long long)N);
	set(c, 4, mul(N, 4), false, "N_NODES %lld tokens", (long long)N);
	set(c, 5, mul3(N, V, 4), false, "N_NODES %lld x V %lld f32", (long long)N, (long long)V);
	if (QD) /* row depth(u) of nodes with children: depth_max rows */
		set(c, 6, mul3(c->m->depth, VQ, 4), false, "Q_BY_DEPTH: depth %d rows x VQ %lld f32",
		    c->m->depth, (long long)VQ);
	else
		set(c, 6, mul3(N, VQ, 4), false, "N_NODES %lld x VQ %lld f32", (long long)N,
		    (long long)VQ);
	set(c, 7, c->rc ? 0 : mul(sw_verify_scratch_words(N, V, B, S, (int)M), 4), true,
	    "verify scratch of N_NODES %lld, V %lld, BLOCK %lld, SLICES %lld, METHOD %lld "
	    "(verify_layout.h)", (long long)N, (long long)V, (long long)B, (long long)S, (long long)M);
	set(c, 8, 2 * 4, false, "two seed words");
	set(c, 9, 4, false, "one iteration word");
	c->e->alias_ok |= 1u << 6; /* q = p */
}

/* step.cu.tmpl (kernels/ref/step.c): one block; state (RT_ST_WORDS + RING
 * words: the ring at RT_ST_WORDS + NOUT % RING), iter, tree tokens / pos /
 * accept path / emitted (N_NODES each), tokens (one), the tree table, the 5
 * counts, hist (MAX_CTX words, lines 92-95) when HAS_HIST, else unread. */
static void ext_step(ectx *c)
{
	const int64_t N = P_eq(c, "N_NODES", c->m->n_nodes, "$.shapes.tree.nodes");
	const int64_t RING = P(c, "RING", 1, MAXI), HH = P(c, "HAS_HIST", 0, 1);
	const int64_t MC = P_eq(c, "MAX_CTX", c->m->max_ctx, "$.spec.max_context");
	(void)P(c, "MODE", 0, 2);
	one_block(c);
	block_is(c, P(c, "BLOCK", 1, 1024));
	if (!c->rc && RING != c->m->ring)
		refuse(c, "kernel %s constant RING = %lld, expected %d (the state buffer's ring)",
		       c->k->uri, (long long)RING, c->m->ring);
	set(c, 0, mul(RT_ST_WORDS + RING, 4), true, "RT_ST_WORDS %d + RING %lld words",
	    RT_ST_WORDS, (long long)RING);
	set(c, 1, 4, true, "one iteration word");
	set(c, 2, mul(N, 4), true, "N_NODES %lld tokens", (long long)N);
	set(c, 3, mul(N, 4), true, "N_NODES %lld positions", (long long)N);
	set(c, 4, 4, true, "one token");
	set(c, 5, mul3(5, N, 4), false, "5 x N_NODES %lld tree words", (long long)N);
	set(c, 6, 5 * 4, true, "5 count words");
	set(c, 7, mul(N, 4), false, "N_NODES %lld words", (long long)N);
	set(c, 8, mul(N, 4), false, "N_NODES %lld words", (long long)N);
	set(c, 9, HH ? mul(MC, 4) : 0, true, "HAS_HIST %lld: MAX_CTX %lld words", (long long)HH,
	    (long long)MC);
}

/* ngram_lookup.cu.tmpl: one block; hist[0 .. TLEN] (TLEN < MAX_CTX),
 * out[0 .. N_DRAFT), state's header, info[0 .. 2). */
static void ext_ngram_lookup(ectx *c)
{
	const int64_t MC = P_eq(c, "MAX_CTX", c->m->max_ctx, "$.spec.max_context");
	const int64_t ND = P(c, "N_DRAFT", 1, RT_ENGINE_MAX_NODES);
	const int64_t MN = P(c, "MAX_N", 1, 1024), mn = P(c, "MIN_N", 1, 1024);
	one_block(c);
	block_is(c, P(c, "BLOCK", 32, 1024));
	if (!c->rc && mn > MN)
		refuse(c, "kernel %s: MIN_N %lld > MAX_N %lld", c->k->uri, (long long)mn, (long long)MN);
	set(c, 0, mul(ND, 4), true, "N_DRAFT %lld tokens", (long long)ND);
	set(c, 1, mul(MC, 4), false, "MAX_CTX %lld words", (long long)MC);
	set(c, 2, RT_ST_WORDS * 4, false, "RT_ST_WORDS %d words", RT_ST_WORDS);
	set(c, 3, 2 * 4, true, "two info words");
}

/* draft_ctrl.cu.tmpl: one block; ctrl (RT_CTRL_STATS + 2 N_CLASS N_DRAFT
 * words, and 2 HEAD + 1 more with a head), tokens[0 .. N_DRAFT), info[0 ..
 * 2), the state header (word RT_ST_DRAFTED written), cost[0 .. N_DRAFT +
 * HEAD]. */
static void ext_draft_ctrl(ectx *c)
{
	const int64_t ND = P(c, "N_DRAFT", 1, RT_ENGINE_MAX_NODES - 1);
	const int64_t NC = P(c, "N_CLASS", 1, 1024);
	const int64_t H = P(c, "HEAD", 0, ND);
	(void)P(c, "MIN_N", 1, 1024);
	(void)P(c, "PROBE", 0, 100000);
	(void)P(c, "PROBE_MAX", 0, 200000);
	(void)P(c, "PRIOR_A", 0, 1000 * 65536);
	(void)P(c, "PRIOR_W", 1, 1000 * 65536);
	(void)P(c, "PRIOR1_A", 0, 1000 * 65536);
	(void)P(c, "PRIOR1_W", 1, 1000 * 65536);
	(void)P(c, "DECAY", 0, 65536);
	one_block(c);
	block_is(c, P(c, "BLOCK", 32, 1024));
	set(c, 0, mul(RT_CTRL_STATS + mul3(2, NC, ND) + (H ? 2 * H + 1 : 0), 4), true,
	    "RT_CTRL_STATS %d + 2 x N_CLASS %lld x N_DRAFT %lld (+ 2 x HEAD %lld + 1) words",
	    RT_CTRL_STATS, (long long)NC, (long long)ND, (long long)H);
	set(c, 1, mul(ND, 4), true, "N_DRAFT %lld tokens", (long long)ND);
	set(c, 2, 2 * 4, false, "two info words");
	set(c, 3, RT_ST_WORDS * 4, true, "RT_ST_WORDS %d words", RT_ST_WORDS);
	set(c, 4, mul(ND + 1 + H, 4), false, "N_DRAFT + 1 + HEAD = %lld cost words",
	    (long long)(ND + 1 + H));
}

/* draft_pick.cu.tmpl: one block; go[0 .. LEVELS), tree tokens 0 .. 1 (node
 * 1 read), the state header (words RT_ST_DRAFTED and RT_ST_HEAD written),
 * with CTRL the controller's words through RT_CTRL_HEAD_K. */
static void ext_draft_pick(ectx *c)
{
	const int64_t N = P_eq(c, "N_NODES", c->m->n_nodes, "$.shapes.tree.nodes");
	const int64_t L = P(c, "LEVELS", 1, RT_ENGINE_MAX_NODES - 1);
	const int64_t ctl = P(c, "CTRL", 0, 1);
	one_block(c);
	block_is(c, P(c, "BLOCK", 32, 1024));
	if (!c->rc && (N < 2 || L >= N))
		refuse(c, "kernel %s: LEVELS %lld with N_NODES %lld, expected 1 <= LEVELS < N_NODES",
		       c->k->uri, (long long)L, (long long)N);
	set(c, 0, mul(L, 4), true, "LEVELS %lld go words", (long long)L);
	set(c, 1, 2 * 4, false, "tree tokens 0 and 1");
	set(c, 2, RT_ST_WORDS * 4, true, "RT_ST_WORDS %d words", RT_ST_WORDS);
	if (ctl)
		set(c, 3, (RT_CTRL_HEAD_K + 1) * 4, false, "RT_CTRL_HEAD_K + 1 = %d ctrl words",
		    RT_CTRL_HEAD_K + 1);
}

/* adapt.cu.tmpl:26-61: one block; go[0 .. DEPTH), cum, tree tokens (N),
 * draft_probs rows 0 .. LEVEL - 1 (line 42), the tree table. */
static void ext_adapt(ectx *c)
{
	const int64_t N = P_eq(c, "N_NODES", c->m->n_nodes, "$.shapes.tree.nodes");
	const int64_t D = P(c, "DEPTH", 1, RT_ENGINE_MAX_NODES), V = P(c, "V", 1, MAXI);
	const int64_t L = P(c, "LEVEL", 0, D - 1);
	one_block(c);
	block_is(c, P(c, "BLOCK", 32, 1024));
	if (!c->rc && D >= N)
		refuse(c, "kernel %s: DEPTH %lld, expected below N_NODES %lld", c->k->uri, (long long)D,
		       (long long)N);
	set(c, 0, mul(D, 4), true, "DEPTH %lld words", (long long)D);
	set(c, 1, 4, true, "one f32");
	set(c, 2, mul(N, 4), true, "N_NODES %lld tokens", (long long)N);
	set(c, 3, mul3(L, V, 4), false, "LEVEL %lld rows x V %lld f32", (long long)L, (long long)V);
	set(c, 4, mul3(5, N, 4), false, "5 x N_NODES %lld tree words", (long long)N);
}

/* eagle3_in.cu.tmpl:30-60: row r = BID_X < ROWS (grid.x = ROWS): x2 row r
 * (2 DIM 16-bit), res row r (DIM f32), a table row tok < N_IDS (else no
 * row), w_in and w_hid (DIM f32 each). FEAT_TREE 0: tok[r] and feat row r
 * < N_FEAT; the tree is not read. FEAT_TREE 1 (a draft level): node u =
 * LEVEL_BEGIN + r < N_NODES reads tok[u] and its parent tree[u] (the
 * table's first row) and feat row tree[u] - PREV_BEGIN < N_FEAT (a row
 * outside reads nothing). The level is checked against the manifest's own
 * tree table, the one the engine loads: the ROWS nodes one level deep d,
 * the N_FEAT rows from PREV_BEGIN the level d - 1 they hang from. The root
 * row (FEAT_TREE 1, LEVEL_BEGIN 0: ROWS 1, an EAGLE-3 engine's draft
 * root) reads one token and one row word (the state's RT_ST_HROW, a
 * run-time node id): the row it names is read only inside [0, N_FEAT). */
static void ext_eagle3_in(ectx *c)
{
	const int64_t R = P(c, "ROWS", 1, MAXI), D = P(c, "DIM", 1, MAXI);
	const int64_t NI = P(c, "N_IDS", 1, MAXI), NF = P(c, "N_FEAT", 1, MAXI), es = el16(c);
	const int64_t FT = P(c, "FEAT_TREE", 0, 1), L0 = P(c, "LEVEL_BEGIN", 0, MAXI);
	const int64_t P0 = P(c, "PREV_BEGIN", 0, MAXI);
	(void)P(c, "NORM_BEFORE_RES", 0, 1);
	const int64_t B = P(c, "BLOCK", 32, 1024);
	block_is(c, B);
	if (!c->rc && B % 32)
		refuse(c, "kernel %s constant BLOCK = %lld, expected whole warps (a multiple of 32)",
		       c->k->uri, (long long)B);
	const unsigned *g = c->x->grid;
	if (!c->rc && (g[0] != (uint64_t)R || g[1] != 1 || g[2] != 1))
		refuse(c, "grid [%u, %u, %u], expected [%lld, 1, 1] (a block per row: ROWS)", g[0], g[1],
		       g[2], (long long)R);
	const int64_t N = c->m->n_nodes;
	const bool root = FT && L0 == 0;
	if (!c->rc && root && (R != 1 || P0 != 0))
		refuse(c, "kernel %s: a root row (FEAT_TREE 1, LEVEL_BEGIN 0) with ROWS %lld and "
		       "PREV_BEGIN %lld, expected 1 and 0", c->k->uri, (long long)R, (long long)P0);
	if (!c->rc && FT && L0 + R > N)
		refuse(c, "kernel %s: LEVEL_BEGIN %lld + ROWS %lld nodes, expected at most the tree's "
		       "%lld ($.shapes.tree.nodes)", c->k->uri, (long long)L0, (long long)R, (long long)N);
	if (!c->rc && FT && !root && P0 + NF > L0)
		refuse(c, "kernel %s: PREV_BEGIN %lld + N_FEAT %lld, expected at most LEVEL_BEGIN %lld "
		       "(the previous level's rows come before the level)", c->k->uri, (long long)P0,
		       (long long)NF, (long long)L0);
	const int32_t *tt = c->m->tree_table;
	const int64_t d = FT && !root && !c->rc ? tt[4 * N + L0] : 0;
	for (int64_t u = L0; FT && !root && !c->rc && u < L0 + R; u++)
		if (tt[4 * N + u] != d || d < 1 || tt[u] < P0 || tt[u] >= P0 + NF)
			refuse(c, "kernel %s: tree node %lld of depth %d with parent %d, expected depth "
			       "%lld (node LEVEL_BEGIN %lld's, at least 1) and a parent in [PREV_BEGIN %lld, "
			       "+ N_FEAT %lld)", c->k->uri, (long long)u, tt[4 * N + u], tt[u], (long long)d,
			       (long long)L0, (long long)P0, (long long)NF);
	for (int64_t u = P0; FT && !root && !c->rc && u < P0 + NF; u++)
		if (tt[4 * N + u] != d - 1)
			refuse(c, "kernel %s: tree node %lld (feature row %lld) of depth %d, expected %lld "
			       "(the level before LEVEL_BEGIN %lld's)", c->k->uri, (long long)u,
			       (long long)(u - P0), tt[4 * N + u], (long long)(d - 1), (long long)L0);
	set(c, 0, mul3(R, mul(2, D), 2), true, "ROWS %lld x 2 DIM %lld x 2 bytes", (long long)R,
	    (long long)(2 * D));
	set(c, 1, mul3(R, D, 4), true, "ROWS %lld x DIM %lld f32", (long long)R, (long long)D);
	set(c, 2, mul3(NI, D, es), false, "N_IDS %lld x DIM %lld x 2 bytes", (long long)NI,
	    (long long)D);
	if (FT) {
		set(c, 3, mul(L0 + R, 4), false, "LEVEL_BEGIN + ROWS = %lld tokens", (long long)(L0 + R));
		set(c, 4, mul3(NF, D, 4), false, "N_FEAT %lld x DIM %lld f32", (long long)NF,
		    (long long)D);
		set(c, 5, mul(L0 + R, 4), false, "LEVEL_BEGIN + ROWS = %lld %s words",
		    (long long)(L0 + R), root ? "row" : "parent");
	} else {
		set(c, 3, mul(R, 4), false, "ROWS %lld tokens", (long long)R);
		set(c, 4, mul3(R < NF ? R : NF, D, 4), false, "min(ROWS, N_FEAT) %lld x DIM %lld f32",
		    (long long)(R < NF ? R : NF), (long long)D);
		set(c, 5, 0, false, "not read (FEAT_TREE 0)");
	}
	for (int a = 6; a < 8; a++)
		set(c, a, mul(D, 4), false, "DIM %lld f32", (long long)D);
}

/* The rule of each op of kernels/ops.def: a planned op demands its
 * ext_<name> above (a row without one does not compile, nor does a rule
 * without a planned row: an unused static function); an op run outside the
 * phases has none and is refused in a schedule. */
#define EXT_RULE_1(name) ext_##name
#define EXT_RULE_0(name) NULL
static void (*const rules[])(ectx *c) = {
#define SW_OP(name, n_args, philox, ref, planned) [SW_OP_##name] = EXT_RULE_##planned(name),
#include "kernels/ops.def"
#undef SW_OP
};
#undef EXT_RULE_1
#undef EXT_RULE_0
_Static_assert(sizeof(rules) / sizeof(rules[0]) == SW_OP_COUNT,
               "extent.c: one entry per row of kernels/ops.def");

/* GEMM (dev_host.c host_gemm, cuBLASLt row-major C = A W^T): C (m, n) f32,
 * A (m, k) and W (n, k) in the engine dtype (q8_0, q8_0_a8: A fp16, W 34 bytes per
 * 32 elements, k whole blocks). */
static void ext_gemm(ectx *c)
{
	const rt_engine_pop *x = c->x;
	set(c, 0, mul3(x->m, x->n, 4), true, "m %lld x n %lld f32", (long long)x->m, (long long)x->n);
	set(c, 1, mul3(x->m, x->k, 2), false, "m %lld x k %lld x 2 bytes", (long long)x->m,
	    (long long)x->k);
	if (rt_dtype_q8(c->m->dtype)) {
		if (x->k % 32)
			refuse(c, "q8_0 GEMM with k %lld, expected a multiple of 32", (long long)x->k);
		else
			set(c, 2, mul3(x->n, x->k / 32, 34), false, "n %lld x k %lld q8_0 (34 bytes per 32)",
			    (long long)x->n, (long long)x->k);
		return;
	}
	if (c->m->dtype == RT_GGUF_A8) { /* W in its buffer's GGUF blocks */
		const int wt = x->arg_buf[2] >= 0 ? rt_manifest_wtype(c->m->bufs[x->arg_buf[2]].dtype)
		                                  : -1;
		const int64_t blk = wt >= 0 ? sw_wformat_block(wt) : 0;
		if (!blk || x->k % blk)
			refuse(c, "gguf_a8 GEMM with k %lld and W %s, expected a GGUF block type whose "
			       "block divides k", (long long)x->k,
			       x->arg_buf[2] >= 0 ? c->m->bufs[x->arg_buf[2]].dtype : "a scalar");
		else
			set(c, 2, mul3(x->n, x->k / blk, sw_wformat_block_bytes(wt)), false,
			    "n %lld x k %lld %s (%lld bytes per %lld)", (long long)x->n, (long long)x->k,
			    sw_wformat_gemm_name(wt), (long long)sw_wformat_block_bytes(wt), (long long)blk);
		return;
	}
	set(c, 2, mul3(x->n, x->k, 2), false, "n %lld x k %lld x 2 bytes", (long long)x->n,
	    (long long)x->k);
}

int rt_extent_op(const rt_manifest *m, const rt_engine_pop *x, rt_extent *out, char *why,
                 size_t n)
{
	memset(out, 0, sizeof(*out));
	ectx c = {.m = m, .x = x, .e = out, .why = why, .n = n};
	int want = 0;
	if (x->exec == RT_EXEC_MEMSET) {
		want = 1;
		if (x->bytes < 0 || (double)x->bytes != x->est_bytes)
			refuse(&c, "memset of %.17g bytes, expected a whole number >= 0", x->est_bytes);
		set(&c, 0, x->bytes, true, "memset of %lld bytes", (long long)x->bytes);
	} else if (x->exec == RT_EXEC_CUBLASLT) {
		want = 3;
		ext_gemm(&c);
	} else {
		const int id = sw_op_find(x->op);
		const sw_op_info *r = sw_op_get(id);
		if (!r || !rules[id])
			return refuse(&c, "op kind \"%s\" has no extent rule in this runtime "
			              "(runtime/engine/extent.c): %s, so its reads and writes cannot be "
			              "bounded", x->op, r ? "kernels/ops.def runs it outside the phases"
			                                  : "no row of kernels/ops.def names it");
		c.k = x->kernel >= 0 && x->kernel < m->n_kernels ? &m->kernels[x->kernel] : NULL;
		if (!c.k || strcmp(c.k->tmpl, r->tmpl))
			return refuse(&c, "kernel of template \"%s\", expected \"%s\" for op kind \"%s\"",
			              c.k ? c.k->tmpl : "(none)", r->tmpl, r->name);
		const size_t ul = strlen(c.k->uri);
		if (strncmp(x->entry, c.k->uri, ul) ||
		    (x->entry[ul] && strcmp(x->entry + ul, "_part") && strcmp(x->entry + ul, "_merge")))
			return refuse(&c, "entry \"%s\", expected the kernel's uri \"%s\" (with \"_part\" "
			              "or \"_merge\" for tree attention)", x->entry, c.k->uri);
		want = r->n_args >= 0 ? r->n_args : strstr(x->entry, "_merge") ? 4 : 6;
		if (x->n_args == want)
			rules[id](&c);
	}
	if (!c.rc && x->n_args != want)
		refuse(&c, "%d args, expected %d for op kind \"%s\"", x->n_args, want, x->op);
	/* a by-value scalar exactly where the kernel takes one */
	for (int a = 0; !c.rc && a < x->n_args; a++)
		if ((x->arg_buf[a] < 0) != (out->bytes[a] < 0))
			refuse(&c, "args[%d]: %s, expected %s", a, x->arg_buf[a] < 0 ? "a scalar" :
			       "a buffer", out->bytes[a] < 0 ? "the scalar seed" : "a buffer");
	return c.rc;
}
