/* Engine inspection and the H100 roofline projection (inspect.h). Reads only
 * the engine directory, through the strict JSON parser, so it also checks
 * that engine.json and resources.json are well formed. */
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
static double sm_share_div(const json_value *g, double div)
{
	if (!g || g->type != JSON_ARRAY || g->n != 3)
		return 1.0;
	double b = 1;
	for (size_t i = 0; i < 3; i++)
		b *= g->items[i]->type == JSON_NUMBER && g->items[i]->number > 0 ? g->items[i]->number : 1;
	b /= div;
	return b >= GEN_H100_SMS ? 1.0 : b / GEN_H100_SMS;
}

static double sm_share(const json_value *g)
{
	return sm_share_div(g, 1.0);
}

/* The verify op's critical path in seconds: the longest chain of units
 * (kernels/verify_layout.h's sw_verify_crit_traffic over one slice: a
 * unit's node work, then its child-list work once its parent's and earlier
 * siblings' units are done) at one SM's share of HBM, then the walk at the
 * same share: its tables and the final draw's chunk (the walk makes no
 * vocabulary pass of its own). -1 when the engine lacks what it needs. */
static double verify_crit(const json_value *eng, const json_value *op)
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
	const double per_sm = GEN_H100_HBM_BPS / GEN_H100_SMS;
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
static void attn_row(FILE *out, const gen_attn_geom *g, const gen_attn_proj *p)
{
	const double tkv = p->kv / GEN_H100_HBM_BPS;
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
 * its roofline context, then the reference shapes (Llama-3-8B-like:
 * 32 query heads, bf16, max context 8192, ctx 4096; eagle25 T = 26 and
 * sequoia63 T = 64, GQA 4 and 8, head dims 64 and 128) with the shape the
 * planner picks for each. */
static void attention_note(FILE *out, const json_value *eng, const json_value *phases)
{
	const json_value *spec = json_get(eng, "spec");
	const double ctx = num(json_get(spec, "roofline"), "context");
	fprintf(out, "  tree attention (gen/attn_cost.h; times in us per layer): mma.sync at %.0f "
	        "TFLOP/s (2/3 of dense: Hopper's rest needs wgmma), shared memory %.1f TB/s (cp.async "
	        "fills + ldmatrix per warp), L2->SM %.1f TB/s (assumed: A100's 5120 B/clk), MUFU %.2f "
	        "T ex2/s, HBM %.2f TB/s; memory terms over sh_m = min(1, blocks/SMs), SM terms over "
	        "sh_sm (busiest SM's blocks, its warps with rows / 4):\n",
	        GEN_ATTN_MMA_FLOPS / 1e12, GEN_ATTN_SMEM_BPS / 1e12, GEN_ATTN_L2_BPS / 1e12,
	        GEN_ATTN_MUFU_PER_S / 1e12, GEN_H100_HBM_BPS / 1e12);
	for (size_t ph = 0; ph < phases->n; ph++) {
		const json_value *P = phases->items[ph], *ops = json_get(P, "ops");
		if (strcmp(str(P, "name"), "verify") || !ops || ops->type != JSON_ARRAY)
			continue;
		for (size_t i = 0; i < ops->n; i++) {
			gen_attn_geom g;
			gen_attn_proj p;
			if (!attn_entry(ops->items[i], "_part") || !attn_geom(eng, ops->items[i], &g))
				continue;
			gen_attn_project(&g, ctx, &p);
			fprintf(out, "    this engine, verify: T = %d, GQA %d, head_dim %d, ctx %.0f\n     %s",
			        g.T, g.n_heads / g.n_kv_heads, g.head_dim, ctx, ATTN_COLS);
			fprintf(out, "     ");
			attn_row(out, &g, &p);
			break;
		}
	}
	fprintf(out, "    reference, ctx 4096, 32 query heads, bf16, the planner's shape for each:\n"
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
				gen_attn_project(&g, 4096, &p);
				fprintf(out, "      %-9s %3d %3d %3d", trees[t].tree, trees[t].T, gq, h);
				attn_row(out, &g, &p);
			}
	fprintf(out, "    not modelled: launch latency; HBM latency hiding by 1-2 cp.async tiles in "
	        "flight per block; the softmax's CUDA-core instructions (~5 per score) sharing issue "
	        "with the mma; unequal blocks (the last split's block keys, padded warps); partials "
	        "kept in L2 from _part to _merge (counted as HBM both ways here: that would lift "
	        "+merge); sm_80, which runs one fragment per pass\n");
}

int gen_inspect(const char *dir, double tau, FILE *out, gen_inspect_summary *sum, sw_err *err)
{
	json_value *eng = load_json(dir, "engine.json", true, err);
	json_value *res = NULL;
	const json_value *spec, *phases, *kernels, *shapes, *tree;
	int rc = 0;

	memset(sum, 0, sizeof(*sum));
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
	int depth = (int)num(tree, "depth");
	sum->tau_src = "assumed";
	sum->tau = depth + 1 < 3 ? depth + 1 : 3.0;
	if (rf && json_get(rf, "tau") && json_get(rf, "tau")->type == JSON_NUMBER) {
		sum->tau = num(rf, "tau");
		sum->tau_src = "spec roofline.tau";
	}
	if (tau > 0) {
		sum->tau = tau;
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
		        "GiB\n\n", (int)num(spec, "max_context"), (int)num(rf, "context"),
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
		fprintf(out, "\nroofline on H100 SXM (%d SMs): HBM %.2f TB/s; cuBLASLt GEMMs at %.0f "
		        "TFLOP/s dense bf16 (tensor cores), tree attention's _part by its own model "
		        "(below), the other rendered kernels at %.0f TFLOP/s fp32 (CUDA-core FMA)\n"
		        "  per op: t = max(bytes / HBM, flops / peak) / min(1, blocks / SMs) per "
		        "launch (a grid of fewer blocks than SMs gets that share of the chip), "
		        "times the launches (repeat = layers); attention _part: t_mem = max(t_hbm, "
		        "t_l2) / sh_m, t_flop = max(t_smem, t_mma, t_exp) / sh_sm; verify: t_mem "
		        "at least its longest chain of blocks (a node's own pass, then a slice "
		        "pass per later child, each waiting for its parent's and earlier "
		        "siblings'), then the walk's tables and final chunk, at HBM / SMs; "
		        "logits_process: the blocks of one of its %d phases\n",
		        GEN_H100_SMS,
		        GEN_H100_HBM_BPS / 1e12, GEN_H100_BF16_FLOPS / 1e12, GEN_H100_FP32_FLOPS / 1e12,
		        SW_LOGITS_PHASES);
		fprintf(out, "  exec: kernel = rendered template, cublaslt = GEMM call, pending = "
		        "no template yet (16-bit embedding gather, K/V store), memset = graph node\n");
		attention_note(out, eng, phases);
	}

	for (size_t ph = 0; ph < phases->n; ph++) {
		const json_value *P = phases->items[ph], *ops = json_get(P, "ops");
		double tot = 0, tb = 0, tf = 0;
		if (!ops || ops->type != JSON_ARRAY) {
			rc = sw_errf(err, SW_EINVAL, "%s/engine.json: $.phases[%zu].ops missing", dir, ph);
			goto out_free;
		}
		if (out)
			fprintf(out, "\nphase %s (%d rows)\n  %-18s %-9s %4s %11s %11s %9s %9s %9s %10s\n",
			        str(P, "name"), (int)num(P, "rows"), "op", "exec", "x", "bytes", "flops",
			        "t_mem us", "t_flop us", "t us", "x rep us");
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
			bool gemm = !strcmp(str(o, "exec"), "cublaslt");
			bool mma = attn_entry(o, "_part");
			double share = gemm ? 1.0 : sm_share(json_get(o, "grid"));
			/* logits_process runs its phases one after another in a row
			 * (kernels/sample_layout.h): a phase's blocks share the chip */
			if (!strcmp(str(o, "op"), "logits_process"))
				share = sm_share_div(json_get(o, "grid"), SW_LOGITS_PHASES);
			double tm = b / GEN_H100_HBM_BPS * 1e6 / share;
			double tc = fl / (gemm ? GEN_H100_BF16_FLOPS : mma ? GEN_ATTN_MMA_FLOPS : GEN_H100_FP32_FLOPS) *
			            1e6 / share;
			gen_attn_geom ag;
			if (mma && attn_geom(eng, o, &ag)) { /* gen/attn_cost.h, as the planner saw it */
				gen_attn_proj ap;
				gen_attn_project(&ag, num(json_get(spec, "roofline"), "context"), &ap);
				tm = (ap.t_hbm > ap.t_l2 ? ap.t_hbm : ap.t_l2) / ap.share_mem * 1e6;
				tc = ap.t_smem > ap.t_mma ? ap.t_smem : ap.t_mma;
				tc = (tc > ap.t_exp ? tc : ap.t_exp) / ap.share_sm * 1e6;
			}
			if (!strcmp(str(o, "op"), "verify") && !strcmp(str(o, "exec"), "kernel")) {
				const double cp = verify_crit(eng, o) * 1e6; /* critical path */
				tm = cp > tm ? cp : tm;
			}
			double t = tm > tc ? tm : tc;
			if (rep < 1)
				rep = 1;
			tot += t * rep;
			if (drafter && strcmp(str(P, "name"), "prefill"))
				sum->draft_us += t * rep;
			tb += b * rep;
			tf += fl * rep;
			if (out) {
				char hb[32], hf[32];
				human(hb, sizeof(hb), b, "B");
				human(hf, sizeof(hf), fl, "F");
				fprintf(out, "  %-18s %-9s %4.0f %11s %11s %9.3f %9.3f %9.3f %10.3f\n",
				        str(o, "name"), str(o, "exec"), rep, hb, hf, tm, tc, t, t * rep);
			}
		}
		if (out) {
			char hb[32], hf[32];
			human(hb, sizeof(hb), tb, "B");
			human(hf, sizeof(hf), tf, "F");
			fprintf(out, "  phase %s: %s, %s -> %.3f us\n", str(P, "name"), hb, hf, tot);
		}
		if (sum->n_phases < GEN_INSPECT_MAX_PHASES) {
			snprintf(sum->phase[sum->n_phases], sizeof(sum->phase[0]), "%s", str(P, "name"));
			sum->phase_us[sum->n_phases++] = tot;
		}
		if (!strcmp(str(P, "name"), "prefill"))
			sum->prefill_us = tot;
		else
			sum->iter_us += tot;
	}
	sum->tokens_per_s = sum->iter_us > 0 ? sum->tau / (sum->iter_us * 1e-6) : 0;
	if (out) {
		fprintf(out, "\niteration = ");
		for (int i = 0, k = 0; i < sum->n_phases; i++)
			if (strcmp(sum->phase[i], "prefill"))
				fprintf(out, "%s%s", k++ ? " + " : "", sum->phase[i]);
		fprintf(out, "\n          = ");
		for (int i = 0, k = 0; i < sum->n_phases; i++)
			if (strcmp(sum->phase[i], "prefill"))
				fprintf(out, "%s%.2f", k++ ? " + " : "", sum->phase_us[i]);
		fprintf(out, " = %.2f us\n", sum->iter_us);
		if (sum->draft_us > 0)
			fprintf(out, "drafter's share: %.2f of %.2f us (%.1f%%: its phases, its layers' "
			        "ops elsewhere, feature taps, fusion, its K/V commit)\n", sum->draft_us,
			        sum->iter_us, 100.0 * sum->draft_us / sum->iter_us);
		fprintf(out, "tau = %.2f tokens per iteration (%s%s)\n", sum->tau, sum->tau_src,
		            strcmp(sum->tau_src, "assumed") ? "" : ": min(3, depth + 1); set "
		            "roofline.tau in the spec or pass --tau");
		fprintf(out, "projected decode: %.2f / %.2f us = %.0f tokens/s\n", sum->tau,
		        sum->iter_us, sum->tokens_per_s);
		int rows = 0;
		for (size_t ph = 0; ph < phases->n; ph++)
			if (!strcmp(str(phases->items[ph], "name"), "prefill"))
				rows = (int)num(phases->items[ph], "rows");
		if (sum->prefill_us > 0)
			fprintf(out, "projected prefill: %d tokens / %.2f us = %.0f tokens/s (target and "
			        "draft caches)\n", rows, sum->prefill_us, rows / (sum->prefill_us * 1e-6));
	}
out_free:
	json_free(res);
	json_free(eng);
	return rc;
}

/* --- `specwright inspect ENGINE_DIR [--tau T]` ------------------------------ */

int gen_inspect_main(int argc, char **argv)
{
	const char *dir = NULL;
	double tau = 0;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--tau") && i + 1 < argc) {
			char *e;
			tau = strtod(argv[++i], &e);
			if (*e || !(tau >= 1.0 && tau <= 1000.0)) {
				fprintf(stderr, "specwright inspect: --tau %s: expected a number >= 1\n", argv[i]);
				return 2;
			}
		} else if (argv[i][0] != '-' && !dir) {
			dir = argv[i];
		} else {
			fprintf(stderr, "specwright inspect: unexpected argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "usage: specwright inspect ENGINE_DIR [--tau T]\n");
		return 2;
	}
	gen_inspect_summary sum;
	sw_err err = {0};
	if (gen_inspect(dir, tau, stdout, &sum, &err)) {
		fprintf(stderr, "specwright inspect: error: %s\n", err.msg);
		return 1;
	}
	return 0;
}
