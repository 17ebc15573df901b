/* Engine inspection, launch counts and the projection of graph replay on a
 * GPU of gen/gpu_model.h (inspect.h). Reads only the engine directory,
 * through the strict JSON parser, so it also checks that engine.json and
 * resources.json are well formed. */
#include <unistd.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "attn_cost.h"
#include "inspect.h"
#include "core/json.h"
#include "core/wformat.h"
#include "kernels/sample_layout.h"
#include "kernels/verify_layout.h"

static json_value *load_json(const char *dir, const char *file, bool must, sw_err *err)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (!must && access(path, F_OK) != 0)
		return NULL;
	size_t n = 0;
	char *buf = sw_read_capped(path, strstr(file, "engine.json") ? SW_CAP_ENGINE_JSON : SW_CAP_CONFIG, file, &n, err);
	if (!buf) {
		if (must)
			sw_err_prefix(err, "is %s an engine directory from specwright build?", dir);
		return NULL;
	}
	json_value *v = json_parse(buf, n, path, err);
	free(buf);
	return v;
}

static double num(const json_value *o, const char *k)
{
	const json_value *v = json_get(o, k);
	return v && v->type == JSON_NUMBER ? v->number : 0.0;
}

static const char *str(const json_value *o, const char *k)
{
	const json_value *v = json_get(o, k);
	return v && v->type == JSON_STRING ? v->str : "";
}

static void human(char *b, size_t n, double x, const char *unit)
{
	if (x >= 1e9)
		snprintf(b, n, "%.2f G%s", x / 1e9, unit);
	else if (x >= 1e6)
		snprintf(b, n, "%.2f M%s", x / 1e6, unit);
	else if (x >= 1e3)
		snprintf(b, n, "%.2f k%s", x / 1e3, unit);
	else
		snprintf(b, n, "%.0f %s", x, unit);
}

/* min(1, blocks / div / SMs) of a kernel op's grid ([x, y, z]): div 1, or
 * the phases a launch runs one after another; 1 when unknown. */
static double sm_share_div(const json_value *g, int sms, double div)
{
	if (!g || g->type != JSON_ARRAY || g->n != 3)
		return 1.0;
	double b = 1;
	for (size_t i = 0; i < 3; i++)
		b *= g->items[i]->type == JSON_NUMBER && g->items[i]->number > 0 ? g->items[i]->number : 1;
	b /= div;
	return b >= sms ? 1.0 : b / sms;
}

static double sm_share(const json_value *g, int sms)
{
	return sm_share_div(g, sms, 1.0);
}

/* The verify op's critical path in seconds: the longest chain of units
 * (kernels/verify_layout.h's sw_verify_crit_traffic over one slice: a
 * unit's node work, then its child-list work once its parent's and earlier
 * siblings' units are done) at one SM's share of HBM, then the walk at the
 * same share: its tables and the final draw's chunk (the walk makes no
 * vocabulary pass of its own). -1 when the engine lacks what it needs. */
static double verify_crit(const json_value *eng, const json_value *op, const gen_gpu *dev)
{
	const json_value *ks = json_get(eng, "kernels"), *prm = NULL;
	const json_value *tr = json_get(json_get(eng, "shapes"), "tree");
	const json_value *nc = json_get(tr, "n_children");
	const char *uri = str(op, "uri");
	for (size_t i = 0; ks && ks->type == JSON_ARRAY && i < ks->n && !prm; i++)
		if (!strcmp(str(ks->items[i], "uri"), uri))
			prm = json_get(ks->items[i], "params");
	if (!prm || !nc || nc->type != JSON_ARRAY || nc->n > 256)
		return -1;
	const double V = num(prm, "V"), S = num(prm, "SLICES") > 0 ? num(prm, "SLICES") : 1;
	const double B = num(prm, "BLOCK") > 0 ? num(prm, "BLOCK") : 256;
	const int m = (int)num(prm, "METHOD");
	int k[256];
	for (size_t u = 0; u < nc->n; u++)
		k[u] = nc->items[u]->type == JSON_NUMBER ? (int)nc->items[u]->number : 0;
	const double most = sw_verify_crit_traffic(m, k, (int)nc->n);
	const double per_sm = dev->bw / dev->sms;
	return (most * V / S * 4 + (V / S / B + 2 * B * S) * 8) / per_sm;
}

/* Whether op o is tree attention's entry with this suffix (engine.json
 * names the entry in full: uri + "_part" / "_merge"). */
static bool attn_entry(const json_value *o, const char *suffix)
{
	const char *e = str(o, "entry");
	size_t n = strlen(e), k = strlen(suffix);
	return !strcmp(str(o, "op"), "tree_attention") && n >= k && !strcmp(e + n - k, suffix);
}

/* The launch shape of a tree attention op (engine.json: the kernel's
 * template parameters), for gen/attn_cost.h. false for an engine built
 * before ROW_BLOCKS (a different kernel: left to the generic line). */
static bool attn_geom(const json_value *eng, const json_value *op, gen_attn_geom *g)
{
	const json_value *ks = json_get(eng, "kernels"), *prm = NULL;
	const char *uri = str(op, "uri"), *dt = str(json_get(eng, "spec"), "dtype");
	for (size_t i = 0; ks && ks->type == JSON_ARRAY && i < ks->n && !prm; i++)
		if (!strcmp(str(ks->items[i], "uri"), uri))
			prm = json_get(ks->items[i], "params");
	if (!prm || !json_get(prm, "ROW_BLOCKS"))
		return false;
	*g = (gen_attn_geom){.T = (int)num(prm, "T"), .n_blk = (int)num(prm, "N_BLK"),
	                     .n_heads = (int)num(prm, "N_HEADS"),
	                     .n_kv_heads = (int)num(prm, "N_KV_HEADS"),
	                     .head_dim = (int)num(prm, "HEAD_DIM"),
	                     .elt = !strcmp(dt, "bf16") || !strcmp(dt, "fp16") ||
	                            !strcmp(dt, "q8_0") || !strcmp(dt, "q8_0_a8") ||
	                            !strcmp(dt, "gguf_a8") ? 2 : 4, /* fp16 KV */
	                     .max_ctx = (int)num(prm, "MAX_CTX"), .split = (int)num(prm, "SPLIT"),
	                     .warps = (int)num(prm, "WARPS"),
	                     .row_blocks = (int)num(prm, "ROW_BLOCKS"),
	                     .mblock = (int)num(prm, "MBLOCK")};
	return g->T > 0 && g->n_kv_heads > 0 && g->split > 0 && g->warps > 0 && g->row_blocks > 0 &&
	       g->mblock > 0;
}

/* One projection as a table row: shape, bytes, the terms, the times and the
 * share of HBM bandwidth the K/V stream gets (K+V bytes at peak over the
 * time of _part, and of _part + _merge). */
static void attn_row(FILE *out, const gen_gpu *dev, const gen_attn_geom *g, const gen_attn_proj *p)
{
	const double tkv = p->kv / dev->bw;
	fprintf(out, " %2d %2d %5d %2d %4d %3.1f %6.2f %5.2f %5.1f  %5.2f %5.2f %5.2f %5.2f %5.2f  "
	        "%4.2f %4.2f  %6.2f %6.2f %5.0f %7.0f\n", g->row_blocks, g->warps, g->split, p->zt,
	        p->blocks, p->warps_sm, p->kv / 1e6, p->part / 1e6, p->l2 / 1e6, p->t_hbm * 1e6,
	        p->t_l2 * 1e6, p->t_smem * 1e6, p->t_mma * 1e6, p->t_exp * 1e6, p->share_mem,
	        p->share_sm, p->t_part * 1e6, p->t_merge * 1e6, 100.0 * tkv / p->t_part,
	        100.0 * tkv / (p->t_part + p->t_merge));
}

static const char ATTN_COLS[] =
	" RB  W SPLIT zt blks w/SM  K+V MB part MB L2 MB  t_hbm  t_l2 t_smem t_mma t_exp  "
	"sh_m sh_sm  t_part t_merge HBM%  +merge\n";

/* The tree attention arithmetic per layer (gen/attn_cost.h, the model the
 * planner minimised): the verify phase's target forward of this engine at
 * its roofline context, then the issue's reference shapes (Llama-3-8B-like:
 * 32 query heads, bf16, max context 8192, ctx 4096; eagle25 T = 26 and
 * sequoia63 T = 64, GQA 4 and 8, head dims 64 and 128) with the shape the
 * planner picks for each. */
static void attention_note(FILE *out, const json_value *eng, const json_value *phases,
                           const gen_gpu *dev)
{
	const json_value *spec = json_get(eng, "spec");
	const double ctx = num(json_get(spec, "roofline"), "context");
	fprintf(out, "  tree attention (gen/attn_cost.h; times in us per layer, on %s): mma.sync at %.0f "
	        "TFLOP/s (2/3 of dense: Hopper's rest needs wgmma), shared memory %.1f TB/s (cp.async "
	        "fills + ldmatrix per warp), L2->SM %.1f TB/s (assumed: A100's 5120 B/clk), MUFU %.2f "
	        "T ex2/s, HBM %.2f TB/s; memory terms over sh_m = min(1, blocks/SMs), SM terms over "
	        "sh_sm (busiest SM's blocks, its warps with rows / 4):\n",
	        dev->key, gen_attn_mma_flops(dev) / 1e12, gen_attn_smem_bps(dev) / 1e12,
	        gen_attn_l2_bps(dev) / 1e12, gen_attn_mufu_per_s(dev) / 1e12, dev->bw / 1e12);
	for (size_t ph = 0; ph < phases->n; ph++) {
		const json_value *P = phases->items[ph], *ops = json_get(P, "ops");
		if (strcmp(str(P, "name"), "verify") || !ops || ops->type != JSON_ARRAY)
			continue;
		for (size_t i = 0; i < ops->n; i++) {
			gen_attn_geom g;
			gen_attn_proj p;
			if (!attn_entry(ops->items[i], "_part") || !attn_geom(eng, ops->items[i], &g))
				continue;
			gen_attn_project_on(dev, &g, ctx, &p);
			fprintf(out, "    this engine, verify: T = %d, GQA %d, head_dim %d, ctx %.0f\n     %s",
			        g.T, g.n_heads / g.n_kv_heads, g.head_dim, ctx, ATTN_COLS);
			fprintf(out, "     ");
			attn_row(out, dev, &g, &p);
			break;
		}
	}
	fprintf(out, "    reference, ctx 4096, 32 query heads, bf16, the planner's shape for each (chosen "
	        "on the H100):\n"
	        "      tree       T GQA  hd%s", ATTN_COLS);
	static const struct {
		const char *tree;
		int T;
	} trees[] = {{"eagle25", 26}, {"sequoia63", 64}};
	for (int t = 0; t < 2; t++)
		for (int gq = 4; gq <= 8; gq += 4)
			for (int h = 64; h <= 128; h += 64) {
				const gen_attn_geom g =
					gen_attn_choose(trees[t].T, trees[t].T, 32, 32 / gq, h, 2, 8192, 4096);
				gen_attn_proj p;
				gen_attn_project_on(dev, &g, 4096, &p);
				fprintf(out, "      %-9s %3d %3d %3d", trees[t].tree, trees[t].T, gq, h);
				attn_row(out, dev, &g, &p);
			}
	fprintf(out, "    not modelled here: launch latency (each op's launch is counted in the "
	        "phase tables); HBM latency hiding by 1-2 cp.async tiles in "
	        "flight per block; the softmax's CUDA-core instructions (~5 per score) sharing issue "
	        "with the mma; unequal blocks (the last split's block keys, padded warps); partials "
	        "kept in L2 from _part to _merge (counted as HBM both ways here: that would lift "
	        "+merge); sm_80, which runs one fragment per pass\n");
}

/* Whether op o of a phase runs once per layer of a forward: it carries a
 * layer segment (a repeat, or layer0), or another op of the same name and
 * model in the phase does (a segment of one layer between feature taps), or
 * it is bound to a model of one layer (a block drafter's, an EAGLE-3
 * head's: their ops bound to no model count outside). kv_commit runs once
 * for all layers. */
static bool per_layer(const json_value *shapes, const json_value *ops, const json_value *o)
{
	const char *m = str(o, "layers"), *nm = str(o, "name");
	if (!*m || !strcmp(str(o, "op"), "kv_commit"))
		return false;
	if (num(json_get(shapes, m), "n_layers") == 1)
		return true;
	for (size_t i = 0; i < ops->n; i++) {
		const json_value *x = ops->items[i];
		if ((x == o || (!strcmp(str(x, "name"), nm) && !strcmp(str(x, "layers"), m))) &&
		    (num(x, "repeat") > 1 || json_get(x, "layer0")))
			return true;
	}
	return false;
}

/* The layers a per-layer op runs, "3-16" or "5"; "-" for the others. */
static void layer_text(const json_value *shapes, const json_value *ops, const json_value *o,
                       char *b, size_t n)
{
	const int l0 = (int)num(o, "layer0"), r = (int)num(o, "repeat");
	if (!per_layer(shapes, ops, o))
		snprintf(b, n, "-");
	else if (r <= 1)
		snprintf(b, n, "%d", l0);
	else
		snprintf(b, n, "%d-%d", l0, l0 + r - 1);
}

#define INSPECT_MAX_LAYERS 2048 /* layer0 < 1024, repeat <= 1024 (manifest.c) */

/* Launches of a phase per layer of each forward it runs (the per-layer ops'
 * launches over the layers they cover), as text; *best: the per-layer count
 * of the forward covering the most layers (0: none); *in_layers: the
 * launches inside the layers. */
static void layer_launches(const json_value *shapes, const json_value *ops, char *b, size_t n,
                           double *best, int *in_layers)
{
	static const char *const models[] = {"target", "draft"};
	size_t k = 0;
	int most = 0;
	*best = 0;
	*in_layers = 0;
	b[0] = 0;
	for (int m = 0; m < 2; m++) {
		unsigned char cov[INSPECT_MAX_LAYERS] = {0};
		int launches = 0, layers = 0;
		for (size_t i = 0; i < ops->n; i++) {
			const json_value *o = ops->items[i];
			if (strcmp(str(o, "layers"), models[m]) || !per_layer(shapes, ops, o))
				continue;
			const int l0 = (int)num(o, "layer0"), r = (int)num(o, "repeat") < 1 ? 1
			                                                            : (int)num(o, "repeat");
			launches += r;
			for (int l = l0; l < l0 + r && l >= 0 && l < INSPECT_MAX_LAYERS; l++)
				layers += !cov[l]++;
		}
		if (!layers)
			continue;
		*in_layers += launches;
		if (layers > most) {
			most = layers;
			*best = (double)launches / layers;
		}
		if (k < n)
			k += (size_t)snprintf(b + k, n - k, "%s%s %.1f x %d layer%s", k ? ", " : "",
			                      models[m], (double)launches / layers, layers,
			                      layers == 1 ? "" : "s");
	}
}

/* A gemv16 op's terms in us (gen/gpu_model.h gen_gpu_gemv16_s) from its
 * kernel's M, N, K, R and its grid; false without them. */
static bool gemv16_time(const json_value *eng, const json_value *o, const gen_gpu *dev, double *tm,
                        double *tc)
{
	const json_value *ks = json_get(eng, "kernels"), *prm = NULL, *g = json_get(o, "grid");
	for (size_t i = 0; ks && ks->type == JSON_ARRAY && i < ks->n && !prm; i++)
		if (!strcmp(str(ks->items[i], "uri"), str(o, "uri")))
			prm = json_get(ks->items[i], "params");
	if (!prm || !g || g->type != JSON_ARRAY || g->n != 3)
		return false;
	double blocks = 1;
	for (size_t i = 0; i < 3; i++)
		blocks *= g->items[i]->type == JSON_NUMBER ? g->items[i]->number : 1;
	gen_gpu_gemv16_s(dev, num(o, "bytes"), num(prm, "M"), num(prm, "N"), num(prm, "K"),
	                 (int)num(prm, "R"), blocks, tm, tc);
	*tm *= 1e6;
	*tc *= 1e6;
	return true;
}

/* One op's projected time in us on dev: its launch, and the longer of its
 * memory and compute terms (*tm, *tc, per launch, for the table). */
static double op_time(const json_value *eng, const json_value *o, const gen_gpu *dev, double ctx,
                      double *tm, double *tc)
{
	const double b = num(o, "bytes"), fl = num(o, "flops");
	const char *ex = str(o, "exec");
	if (!strcmp(ex, "cublaslt")) { /* the calibrated stream, or the tensor cores */
		gen_gpu_gemm_terms(dev, b, fl, tm, tc);
		*tm *= 1e6;
		*tc *= 1e6;
	} else if (!strcmp(str(o, "op"), "gemv16") && gemv16_time(eng, o, dev, tm, tc)) {
		/* the generated GEMV's own (uncalibrated) model, as the planner saw it */
	} else if (!strcmp(ex, "memset")) {
		*tm = b / dev->bw * 1e6;
		*tc = 0;
	} else {
		const bool mma = attn_entry(o, "_part");
		/* logits_process runs its phases one after another in a row
		 * (kernels/sample_layout.h): a phase's blocks share the chip */
		const double share = !strcmp(str(o, "op"), "logits_process")
		                     ? sm_share_div(json_get(o, "grid"), dev->sms, SW_LOGITS_PHASES)
		                     : sm_share(json_get(o, "grid"), dev->sms);
		gen_attn_geom ag;
		*tm = b / dev->bw * 1e6 / share;
		*tc = fl / (mma ? gen_attn_mma_flops(dev) : dev->fp32_flops) * 1e6 / share;
		if (mma && attn_geom(eng, o, &ag)) { /* gen/attn_cost.h, as the planner saw it */
			gen_attn_proj ap;
			gen_attn_project_on(dev, &ag, ctx, &ap);
			*tm = (ap.t_hbm > ap.t_l2 ? ap.t_hbm : ap.t_l2) / ap.share_mem * 1e6;
			*tc = ap.t_smem > ap.t_mma ? ap.t_smem : ap.t_mma;
			*tc = (*tc > ap.t_exp ? *tc : ap.t_exp) / ap.share_sm * 1e6;
		}
		if (!strcmp(str(o, "op"), "verify")) {
			const double cp = verify_crit(eng, o, dev) * 1e6; /* critical path */
			*tm = cp > *tm ? cp : *tm;
		}
	}
	return dev->launch_s * 1e6 + (*tm > *tc ? *tm : *tc);
}

/* The device and the calibration, before the phase tables. */
static void device_note(FILE *out, const gen_inspect_opts *o, const gen_gpu *dev)
{
	fprintf(out, "\nprojection on %s (%s--gpu h100|h200|BW,TFLOPS,SMS): %s, %d SMs, HBM %.2f TB/s "
	        "(%s), %.0f TFLOP/s dense bf16, %.0f TFLOP/s fp32 FMA; projected, not measured\n",
	        dev->key, o->gpu_default ? "the default; " : "", dev->name, dev->sms, dev->bw / 1e12,
	        dev->bw_note, dev->bf16_flops / 1e12, dev->fp32_flops / 1e12);
	fprintf(out, "  calibration (gen/gpu_model.h, from %s): %.2f us per launch in graph "
	        "replay; cuBLASLt GEMMs stream their bytes at %.1f%% of the bandwidth, the first "
	        "%.2f us of it under the launch; %s\n", GEN_CAL_SOURCE, dev->launch_s * 1e6,
	        100 * dev->gemm_eff, dev->gemm_overlap_s * 1e6, dev->note);
	fprintf(out, "  per op and launch: t = launch + max(t_mem, t_flop); GEMMs: t_mem = "
	        "max(bytes / (%.1f%% x HBM) - %.2f us, bytes / HBM), t_flop at the bf16 peak; gemv16 "
	        "(the generated 16-bit GEMV, %s): t_mem = max(bytes / (%.0f%% x HBM x fill) - the same "
	        "overlap, bytes / (HBM x fill)), fill = min(1, blocks / (%d x SMs)), t_flop = N K (M "
	        "(1 + 1/R) + 1) instructions at %.0f%% of the fp32 issue rate; rendered kernels: "
	        "max(bytes / HBM, flops / fp32 peak) / min(1, blocks / SMs) (a grid of fewer blocks "
	        "than SMs gets that share of the chip); tree attention _part: t_mem = max(t_hbm, "
	        "t_l2) / sh_m, t_flop = max(t_smem, t_mma, t_exp) / sh_sm; verify: t_mem at least "
	        "its longest chain of blocks (a node's own pass, then a slice pass per later child, "
	        "each waiting for its parent's and earlier siblings'), then the walk's tables and "
	        "final chunk, at HBM / SMs; logits_process: the blocks of one of its %d phases; x = launches (one per layer of a segment; layers: the "
	        "segment, '-' for ops outside the layers)\n", 100 * dev->gemm_eff,
	        dev->gemm_overlap_s * 1e6, GEN_GEMV16_NOTE, 100 * GEN_GEMV16_EFF, GEN_GEMV16_BLOCKS_SM,
	        100 * GEN_GEMV16_ISSUE, SW_LOGITS_PHASES);
	fprintf(out, "  not modelled: kernels slower than their bytes at their share of the chip "
	        "(a block's own latency-bound rate: the sampling and tree kernels that scan a "
	        "vocabulary in one block per row), L2 reuse across ops; `profile` on a GPU and "
	        "tests/gpu/check_util.py roofline give the error per kernel\n");
	fprintf(out, "  exec: kernel = rendered template, cublaslt = GEMM call, pending = "
	        "no template yet (16-bit embedding gather, K/V store), memset = graph node\n");
}

/* Weight bytes an iteration reads, by the type they are read in: each
 * GEMM's W, n rows of k (gemv_gguf: its kernel's WTYPE, N and K; cuBLASLt:
 * the engine's 16-bit dtype) times its launches, over the iteration's
 * phases (prefill apart), and per token at tau. The GGUF types' bytes are
 * the format table's (core/wformat.h): what the GPU reads of a gguf_a8
 * engine, a quarter of bf16's for Q4 weights. */
static void wtype_bytes_note(FILE *out, const json_value *eng, const json_value *phases,
                             double tau)
{
	const char *dt = str(json_get(eng, "spec"), "dtype");
	const json_value *ks = json_get(eng, "kernels");
	double by[32] = {0}, b16 = 0, total = 0;
	for (size_t ph = 0; ph < phases->n; ph++) {
		const json_value *P = phases->items[ph], *ops = json_get(P, "ops");
		if (!strcmp(str(P, "name"), "prefill") || !ops || ops->type != JSON_ARRAY)
			continue;
		for (size_t i = 0; i < ops->n; i++) {
			const json_value *o = ops->items[i], *prm = NULL;
			const double rep = num(o, "repeat") >= 1 ? num(o, "repeat") : 1;
			if (!strcmp(str(o, "exec"), "cublaslt")) {
				const json_value *g = json_get(o, "gemm");
				b16 += 2.0 * num(g, "n") * num(g, "k") * rep;
				continue;
			}
			const bool g16 = !strcmp(str(o, "op"), "gemv16");
			if (strcmp(str(o, "op"), "gemv_gguf") && !g16)
				continue;
			for (size_t k = 0; ks && ks->type == JSON_ARRAY && k < ks->n && !prm; k++)
				if (!strcmp(str(ks->items[k], "uri"), str(o, "uri")))
					prm = json_get(ks->items[k], "params");
			if (g16) { /* the engine's 16-bit weights, through the generated GEMV */
				b16 += 2.0 * num(prm, "N") * num(prm, "K") * rep;
				continue;
			}
			const int t = (int)num(prm, "WTYPE");
			const uint64_t b = sw_wformat_nbytes((uint32_t)t, (uint64_t)(num(prm, "N") * num(prm, "K")));
			if (t >= 0 && t < 32)
				by[t] += (double)b * rep;
		}
	}
	for (int t = 0; t < 32; t++)
		total += by[t];
	total += b16;
	if (total <= 0)
		return;
	fprintf(out, "weights read per iteration, by type (GEMM W bytes over the iteration's "
	        "phases; per token at tau %.2f):\n", tau);
	for (int t = 0; t < 32; t++)
		if (by[t] > 0) {
			char hb[32], ht[32];
			human(hb, sizeof(hb), by[t], "B");
			human(ht, sizeof(ht), by[t] / tau, "B");
			fprintf(out, "  %-6s %11s  %5.1f%%  %11s a token\n", sw_wformat_gemm_name(t), hb,
			        100.0 * by[t] / total, ht);
		}
	if (b16 > 0) {
		char hb[32], ht[32];
		human(hb, sizeof(hb), b16, "B");
		human(ht, sizeof(ht), b16 / tau, "B");
		fprintf(out, "  %-6s %11s  %5.1f%%  %11s a token\n",
		        !strcmp(dt, "bf16") ? "bf16" : "fp16", hb, 100.0 * b16 / total, ht);
	}
}

int gen_inspect_on(const char *dir, const gen_inspect_opts *opt, FILE *out,
                   gen_inspect_summary *sum, sw_err *err)
{
	json_value *eng = load_json(dir, "engine.json", true, err);
	json_value *res = NULL;
	const json_value *spec, *phases, *kernels, *shapes, *tree;
	const gen_gpu *dev = opt && opt->gpu ? opt->gpu : &gen_gpu_h200;
	int rc = 0;

	memset(sum, 0, sizeof(*sum));
	snprintf(sum->gpu, sizeof(sum->gpu), "%s", dev->key);
	if (!eng)
		return err ? err->code : SW_EIO;
	spec = json_get(eng, "spec");
	phases = json_get(eng, "phases");
	kernels = json_get(eng, "kernels");
	shapes = json_get(eng, "shapes");
	tree = shapes ? json_get(shapes, "tree") : NULL;
	if (!spec || !phases || phases->type != JSON_ARRAY || !kernels ||
	    kernels->type != JSON_ARRAY || !tree) {
		rc = sw_errf(err, SW_EINVAL, "%s/engine.json: not a specwright engine manifest "
		             "(missing spec, shapes.tree, kernels or phases)", dir);
		goto out_free;
	}
	res = load_json(dir, "resources.json", false, err);

	const json_value *tg = json_get(shapes, "target"), *rf = json_get(spec, "roofline");
	const double ctx = num(rf, "context");
	int depth = (int)num(tree, "depth");
	sum->tau_src = "assumed";
	sum->tau = depth + 1 < 3 ? depth + 1 : 3.0;
	if (rf && json_get(rf, "tau") && json_get(rf, "tau")->type == JSON_NUMBER) {
		sum->tau = num(rf, "tau");
		sum->tau_src = "spec roofline.tau";
	}
	if (opt && opt->tau > 0) {
		sum->tau = opt->tau;
		sum->tau_src = "--tau";
	}
	sum->n_kernels = (int)kernels->n;

	if (out) {
		const json_value *vf = json_get(spec, "verify");
		fprintf(out, "engine %s: %s\n", dir, str(spec, "name"));
		fprintf(out, "  target: %d layers, dim %d, %d heads (%d KV), head_dim %d, ffn %d, "
		        "vocab %d; dtype %s\n", (int)num(tg, "n_layers"), (int)num(tg, "dim"),
		        (int)num(tg, "n_heads"), (int)num(tg, "n_kv_heads"), (int)num(tg, "head_dim"),
		        (int)num(tg, "ffn_dim"), (int)num(tg, "vocab"), str(spec, "dtype"));
		fprintf(out, "  draft: %s; tree %s: %d nodes (root included), depth %d; verify %s, "
		        "expand %s\n", str(json_get(spec, "draft"), "method"), str(spec, "tree"),
		        (int)num(tree, "nodes"), depth, vf ? str(vf, "method") : "?",
		        vf ? str(vf, "expand") : "?");
		fprintf(out, "  max_context %d; bytes estimates assume %d cached tokens; arena %.3f "
		        "GiB\n\n", (int)num(spec, "max_context"), (int)ctx,
		        num(json_get(eng, "arena"), "bytes") / 1073741824.0);

		fprintf(out, "kernels (%zu rendered into kernels.cu; resources from ptxas -v):\n",
		        kernels->n);
		for (size_t i = 0; i < kernels->n; i++) {
			const char *uri = str(kernels->items[i], "uri");
			fprintf(out, "  %s\n", uri);
			const json_value *rk = res ? json_get(res, "kernels") : NULL, *hit = NULL;
			int found = 0;
			/* one record per entry (tree attention: _part and _merge) */
			for (size_t j = 0; rk && rk->type == JSON_ARRAY && j < rk->n; j++) {
				if (strcmp(str(rk->items[j], "kernel"), uri))
					continue;
				hit = json_get(rk->items[j], "archs");
				if (!hit || hit->type != JSON_OBJECT)
					continue;
				found++;
				const char *nm = str(rk->items[j], "name");
				for (size_t a = 0; a < hit->n; a++) {
					const json_value *r = hit->members[a].value;
					fprintf(out, "      %-7s %-6s %3d regs  spills %d/%d B  stack %d B  smem "
					        "%5d B  %d barriers\n", strlen(nm) > strlen(uri) ? nm + strlen(uri)
					                                                          : "",
					        hit->members[a].key, (int)num(r, "registers"),
					        (int)num(r, "spill_stores"), (int)num(r, "spill_loads"),
					        (int)num(r, "stack"), (int)num(r, "smem"), (int)num(r, "barriers"));
				}
			}
			if (!found)
				fprintf(out, "      (not compiled: no resources.json entry)\n");
		}
		device_note(out, opt ? opt : &(gen_inspect_opts){0}, dev);
		attention_note(out, eng, phases, dev);
	}

	int ph_kernels[GEN_INSPECT_MAX_PHASES] = {0}, ph_gemms[GEN_INSPECT_MAX_PHASES] = {0};
	int ph_memsets[GEN_INSPECT_MAX_PHASES] = {0};
	for (size_t ph = 0; ph < phases->n; ph++) {
		const json_value *P = phases->items[ph], *ops = json_get(P, "ops");
		double tot = 0, tb = 0, tf = 0;
		int nk = 0, ng = 0, nm = 0;
		if (!ops || ops->type != JSON_ARRAY) {
			rc = sw_errf(err, SW_EINVAL, "%s/engine.json: $.phases[%zu].ops missing", dir, ph);
			goto out_free;
		}
		const bool iter = strcmp(str(P, "name"), "prefill") != 0;
		if (out)
			fprintf(out, "\nphase %s (%d rows%s), projected on %s\n  %-18s %-9s %-7s %4s %11s "
			        "%11s %9s %9s %9s %9s %10s\n", str(P, "name"), (int)num(P, "rows"),
			        json_get(P, "if") ? "; under an IF node" : "", dev->key, "op", "exec",
			        "layers", "x", "bytes", "flops", "t_mem us", "t_flop us", "launch us", "t us",
			        "x rep us");
		const bool draft_phase = !strncmp(str(P, "name"), "draft", 5);
		for (size_t i = 0; i < ops->n; i++) {
			const json_value *o = ops->items[i];
			double b = num(o, "bytes"), fl = num(o, "flops"), rep = num(o, "repeat");
			/* the drafter's own work: its phases, its layers, a block
			 * drafter's taps and fusion in the target's forwards, its commit */
			static const char *const fuse[] = {"feature_tap", "fuse_in_cast", "fc", "zero_h",
			                                   "fc_norm", "fuse_cast", "kv_commit_draft", NULL};
			bool drafter = draft_phase || !strcmp(str(o, "layers"), "draft");
			for (int f = 0; fuse[f] && !drafter; f++)
				drafter = !strcmp(str(o, "name"), fuse[f]);
			double tm, tc;
			const double t = op_time(eng, o, dev, ctx, &tm, &tc);
			if (rep < 1)
				rep = 1;
			const char *ex = str(o, "exec");
			*(!strcmp(ex, "cublaslt") ? &ng : !strcmp(ex, "memset") ? &nm : &nk) += (int)rep;
			tot += t * rep;
			if (drafter && iter)
				sum->draft_us += t * rep;
			tb += b * rep;
			tf += fl * rep;
			if (out) {
				char hb[32], hf[32], lt[24];
				human(hb, sizeof(hb), b, "B");
				human(hf, sizeof(hf), fl, "F");
				layer_text(shapes, ops, o, lt, sizeof(lt));
				fprintf(out, "  %-18s %-9s %-7s %4.0f %11s %11s %9.3f %9.3f %9.3f %9.3f %10.3f\n",
				        str(o, "name"), ex, lt, rep, hb, hf, tm, tc, dev->launch_s * 1e6, t,
				        t * rep);
			}
		}
		if (out) {
			char hb[32], hf[32];
			human(hb, sizeof(hb), tb, "B");
			human(hf, sizeof(hf), tf, "F");
			fprintf(out, "  phase %s: %s, %s, %d launches -> %.3f us projected on %s\n",
			        str(P, "name"), hb, hf, nk + ng + nm, tot, dev->key);
		}
		if (sum->n_phases < GEN_INSPECT_MAX_PHASES) {
			const int k = sum->n_phases++;
			int in_layers;
			char txt[160];
			snprintf(sum->phase[k], sizeof(sum->phase[0]), "%s", str(P, "name"));
			sum->phase_us[k] = tot;
			sum->phase_launches[k] = nk + ng + nm;
			layer_launches(shapes, ops, txt, sizeof(txt), &sum->phase_per_layer[k], &in_layers);
			ph_kernels[k] = nk;
			ph_gemms[k] = ng;
			ph_memsets[k] = nm;
		}
		if (!iter) {
			sum->prefill_us = tot;
			continue;
		}
		sum->iter_us += tot;
		sum->iter_bytes += tb;
		sum->launches += nk + ng + nm;
		sum->launch_kernels += nk;
		sum->launch_gemms += ng;
		sum->launch_memsets += nm;
	}
	sum->launch_us = sum->launches * dev->launch_s * 1e6;
	sum->roofline_us = sum->iter_bytes / dev->bw * 1e6;
	sum->tokens_per_s = sum->iter_us > 0 ? sum->tau / (sum->iter_us * 1e-6) : 0;
	if (out) {
		fprintf(out, "\nlaunches (graph nodes: a cuBLASLt GEMM counts one, memsets count; a "
		        "phase under an IF node counts as if it ran):\n  %-16s %8s %8s %6s %7s  %s\n",
		        "phase", "launches", "kernels", "gemms", "memsets",
		        "per layer of each forward (its per-layer ops' launches / its layers), outside");
		for (int i = 0; i < sum->n_phases && i < (int)phases->n; i++) {
			const json_value *ops = json_get(phases->items[i], "ops");
			char txt[160];
			double best;
			int in_layers;
			layer_launches(shapes, ops, txt, sizeof(txt), &best, &in_layers);
			fprintf(out, "  %-16s %8d %8d %6d %7d  %s%s%d outside the layers\n", sum->phase[i],
			        sum->phase_launches[i], ph_kernels[i], ph_gemms[i], ph_memsets[i], txt,
			        *txt ? "; " : "", sum->phase_launches[i] - in_layers);
		}
		fprintf(out, "  %-16s %8d %8d %6d %7d  (prefill excluded): %.2f us of launches "
		        "projected on %s, %.1f%% of the iteration\n", "iteration", sum->launches,
		        sum->launch_kernels, sum->launch_gemms, sum->launch_memsets, sum->launch_us,
		        dev->key, sum->iter_us > 0 ? 100.0 * sum->launch_us / sum->iter_us : 0.0);

		fprintf(out, "\niteration = ");
		for (int i = 0, k = 0; i < sum->n_phases; i++)
			if (strcmp(sum->phase[i], "prefill"))
				fprintf(out, "%s%s", k++ ? " + " : "", sum->phase[i]);
		fprintf(out, "\n          = ");
		for (int i = 0, k = 0; i < sum->n_phases; i++)
			if (strcmp(sum->phase[i], "prefill"))
				fprintf(out, "%s%.2f", k++ ? " + " : "", sum->phase_us[i]);
		fprintf(out, " = %.2f us projected on %s\n", sum->iter_us, dev->key);
		char hb[32];
		human(hb, sizeof(hb), sum->iter_bytes, "B");
		fprintf(out, "roofline on %s: %s per iteration / %.2f TB/s = %.2f us; projected %.2f us: "
		        "%.1f%% of the roofline\n", dev->key, hb, dev->bw / 1e12, sum->roofline_us,
		        sum->iter_us, sum->iter_us > 0 ? 100.0 * sum->roofline_us / sum->iter_us : 0.0);
		if (sum->draft_us > 0)
			fprintf(out, "drafter's share: %.2f of %.2f us (%.1f%%: its phases, its layers' "
			        "ops elsewhere, feature taps, fusion, its K/V commit), projected on %s\n",
			        sum->draft_us, sum->iter_us, 100.0 * sum->draft_us / sum->iter_us, dev->key);
		fprintf(out, "tau = %.2f tokens per iteration (%s%s)\n", sum->tau, sum->tau_src,
		            strcmp(sum->tau_src, "assumed") ? "" : ": min(3, depth + 1); set "
		            "roofline.tau in the spec or pass --tau");
		fprintf(out, "projected decode on %s: %.2f / %.2f us = %.0f tokens/s\n", dev->key,
		        sum->tau, sum->iter_us, sum->tokens_per_s);
		wtype_bytes_note(out, eng, phases, sum->tau);
		int rows = 0;
		for (size_t ph = 0; ph < phases->n; ph++)
			if (!strcmp(str(phases->items[ph], "name"), "prefill"))
				rows = (int)num(phases->items[ph], "rows");
		if (sum->prefill_us > 0)
			fprintf(out, "projected prefill on %s: %d tokens / %.2f us = %.0f tokens/s (target "
			        "and draft caches; as graph replay)\n", dev->key, rows, sum->prefill_us,
			        rows / (sum->prefill_us * 1e-6));
	}
out_free:
	json_free(res);
	json_free(eng);
	return rc;
}

int gen_inspect(const char *dir, double tau, FILE *out, gen_inspect_summary *sum, sw_err *err)
{
	const gen_inspect_opts o = {.tau = tau, .gpu = &gen_gpu_h200, .gpu_default = true};
	return gen_inspect_on(dir, &o, out, sum, err);
}

/* --- `specwright inspect ENGINE_DIR [--tau T] [--gpu DEV]` ----------------- */

int gen_inspect_main(int argc, char **argv)
{
	static const char USAGE[] = "usage: specwright inspect ENGINE_DIR [--tau T] "
	                            "[--gpu h100|h200|BW,TFLOPS,SMS]\n";
	const char *dir = NULL;
	gen_inspect_opts o = {.gpu_default = true};
	gen_gpu dev = gen_gpu_h200;
	sw_err err = {0};
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--tau") || !strcmp(argv[i], "--gpu")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "specwright inspect: %s: expected a value after it\n%s", argv[i],
				        USAGE);
				return 2;
			}
			if (!strcmp(argv[i], "--gpu")) {
				if (gen_gpu_parse(argv[++i], &dev, &err)) {
					fprintf(stderr, "specwright inspect: %s\n", err.msg);
					return 2;
				}
				o.gpu_default = false;
				continue;
			}
			char *e;
			o.tau = strtod(argv[++i], &e);
			if (*e || !(o.tau >= 1.0 && o.tau <= 1000.0)) {
				fprintf(stderr, "specwright inspect: --tau %s: expected a number >= 1\n", argv[i]);
				return 2;
			}
		} else if (argv[i][0] != '-' && !dir) {
			dir = argv[i];
		} else {
			fprintf(stderr, "specwright inspect: unexpected argument '%s'\n%s", argv[i], USAGE);
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "%s", USAGE);
		return 2;
	}
	o.gpu = &dev;
	gen_inspect_summary sum;
	if (gen_inspect_on(dir, &o, stdout, &sum, &err)) {
		fprintf(stderr, "specwright inspect: error: %s\n", err.msg);
		return 1;
	}
	return 0;
}
