/* Engine inspection and the H100 roofline projection (inspect.h). Reads only
 * the engine directory, through the strict JSON parser, so it also checks
 * that engine.json and resources.json are well formed. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"
#include "json.h"

static json_value *load_json(const char *dir, const char *file, bool must, sw_err *err)
{
	char path[1100];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "rb");
	if (!f) {
		if (must)
			sw_errf(err, SW_EIO, "%s: cannot open: %s (is %s an engine directory from "
			        "specwright build?)", path, strerror(errno), dir);
		return NULL;
	}
	char *buf = NULL;
	long n = -1;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (!buf) {
		sw_errf(err, SW_EIO, "%s: cannot read", path);
		return NULL;
	}
	json_value *v = json_parse(buf, (size_t)n, path, err);
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

/* min(1, blocks / SMs) of a kernel op's grid ([x, y, z]); 1 when unknown. */
static double sm_share(const json_value *g)
{
	if (!g || g->type != JSON_ARRAY || g->n != 3)
		return 1.0;
	double b = 1;
	for (size_t i = 0; i < 3; i++)
		b *= g->items[i]->type == JSON_NUMBER && g->items[i]->number > 0 ? g->items[i]->number : 1;
	return b >= GEN_H100_SMS ? 1.0 : b / GEN_H100_SMS;
}

/* Whether op o is tree attention's entry with this suffix (engine.json
 * names the entry in full: uri + "_part" / "_merge"). */
static bool attn_entry(const json_value *o, const char *suffix)
{
	const char *e = str(o, "entry");
	size_t n = strlen(e), k = strlen(suffix);
	return !strcmp(str(o, "op"), "tree_attention") && n >= k && !strcmp(e + n - k, suffix);
}

/* H100 SXM per-SM rates at the clock the dense bf16 peak implies (989e12 /
 * (132 SMs x 4096 flop/clk) = 1.83 GHz): shared memory 128 B/clk, MUFU
 * (ex2, one per expf) 16/clk. Tree attention's _part runs Q.K^T and P.V on
 * mma.sync m16n8k16: a warp's 16 query rows take every 8-key (Q.K^T) or
 * 8-dim (P.V) B fragment from shared memory once, 256 B of ldmatrix per
 * 4096-flop mma, 16 flop per shared byte where the tensor cores need 32 at
 * 128 B/clk: its mma pipe runs at most at half the dense peak. */
#define H100_CLK (GEN_H100_BF16_FLOPS / (GEN_H100_SMS * 4096.0))
#define H100_SMEM_BPS (128.0 * GEN_H100_SMS * H100_CLK)
#define H100_MUFU_PER_S (16.0 * GEN_H100_SMS * H100_CLK)
#define ATTN_MMA_FLOPS (16.0 * H100_SMEM_BPS)

/* One layer of tree attention (templates/tree_attention.cu.tmpl) projected
 * as the per-op lines do it: _part moves part_bytes (K+V, q, partials
 * written), executes flops on the tensor cores and exps on MUFU, over a
 * grid that fills share_p of the SMs; _merge moves merge_bytes over
 * share_m. */
static void attn_project(double part_bytes, double merge_bytes, double flops, double exps,
                         double share_p, double share_m, double *t_part, double *t_merge)
{
	const double tm = part_bytes / GEN_H100_HBM_BPS, tc = flops / ATTN_MMA_FLOPS;
	const double te = exps / H100_MUFU_PER_S;
	*t_part = (tm > tc ? tm : tc) > te ? (tm > tc ? tm : tc) : te;
	*t_part /= share_p;
	*t_merge = merge_bytes / GEN_H100_HBM_BPS / share_m;
}

/* The tree attention arithmetic, per layer: the verify phase's target
 * forward of this engine (its ops' bytes, flops and grids as the planner
 * made them), then the reference shapes of the issue (ctx 4096, T = 64, 32
 * query heads, GQA 4 and 8, head dims 64 and 128; SPLIT 512, 4 warps and
 * a merge grid of T x N_HEADS * HEAD_DIM / 512 blocks, as the planner picks
 * them at T = 64): K/V
 * bytes, partials, mma flops at the dense bf16 peak and at the
 * ldmatrix-fed half of it, exps, and the share of HBM bandwidth at which
 * the K/V stream goes: K+V bytes at peak over the time of _part, and of
 * _part + _merge. */
static void attention_note(FILE *out, const json_value *eng, const json_value *phases)
{
	const json_value *spec = json_get(eng, "spec"), *tg = json_get(json_get(eng, "shapes"), "target");
	const double ctx = num(json_get(spec, "roofline"), "context");
	const double nkv = num(tg, "n_kv_heads"), hd = num(tg, "head_dim");
	const double el = !strcmp(str(spec, "dtype"), "fp16") || !strcmp(str(spec, "dtype"), "bf16")
	                  ? 2 : 4;
	fprintf(out, "  tree attention (_part: Q.K^T and P.V on mma.sync m16n8k16, 16 query rows per "
	        "warp; mma at %.0f TFLOP/s dense bf16, fed by ldmatrix at 128 B/clk/SM: at most %.0f "
	        "TFLOP/s; one expf per score on MUFU at %.2f T/s):\n", GEN_H100_BF16_FLOPS / 1e12,
	        ATTN_MMA_FLOPS / 1e12, H100_MUFU_PER_S / 1e12);
	for (size_t ph = 0; ph < phases->n; ph++) {
		const json_value *P = phases->items[ph], *ops = json_get(P, "ops");
		if (strcmp(str(P, "name"), "verify") || !ops || ops->type != JSON_ARRAY)
			continue;
		const json_value *po = NULL, *mo = NULL;
		for (size_t i = 0; i < ops->n; i++)
			if (!po && attn_entry(ops->items[i], "_part"))
				po = ops->items[i];
			else if (!mo && attn_entry(ops->items[i], "_merge"))
				mo = ops->items[i];
		if (!po || !mo)
			continue;
		const double T = num(P, "rows"), keys = ctx + T;
		const double kv = 2 * keys * nkv * hd * el, fl = num(po, "flops");
		/* one exp per score of every mma row (16-row padding included) */
		const double exps = fl / (4 * ((int)(hd + 15) / 16 * 16));
		double tp, tmg;
		attn_project(num(po, "bytes"), num(mo, "bytes"), fl, exps, sm_share(json_get(po, "grid")),
		             sm_share(json_get(mo, "grid")), &tp, &tmg);
		fprintf(out, "    this engine, verify (T = %.0f, %.0f cached keys, per layer): K+V %.2f MB "
		        "(%.2f us at HBM peak), _part %.2f MB, _merge %.2f MB; %.3f GFLOP mma -> %.2f us "
		        "at peak, %.2f us fed; %.2f M exps -> %.2f us;\n      _part %.2f us, _merge %.2f "
		        "us: K/V streamed at %.0f%% of HBM bandwidth (_part), %.0f%% (_part + _merge)\n",
		        T, ctx, kv / 1e6, kv / GEN_H100_HBM_BPS * 1e6, num(po, "bytes") / 1e6,
		        num(mo, "bytes") / 1e6, fl / 1e9, fl / GEN_H100_BF16_FLOPS * 1e6,
		        fl / ATTN_MMA_FLOPS * 1e6, exps / 1e6, exps / H100_MUFU_PER_S * 1e6, tp * 1e6,
		        tmg * 1e6, 100.0 * kv / GEN_H100_HBM_BPS / tp,
		        100.0 * kv / GEN_H100_HBM_BPS / (tp + tmg));
	}
	fprintf(out, "    reference, ctx 4096, T = 64, 32 query heads, bf16:\n"
	        "      GQA  hd  K+V MB  partials MB  GFLOP  t_mma peak/fed us  t_exp us  t_part us  "
	        "t_merge us  HBM%% _part  HBM%% +merge\n");
	for (int gq = 4; gq <= 8; gq += 4)
		for (int h = 64; h <= 128; h += 64) {
			const double T = 64, NH = 32, KV = NH / gq, K = 4096 + T;
			const double kv = 2 * K * KV * h * 2, q16 = T * NH * h * 2;
			const double part = (4096 / 512 + 1) * T * NH * (h + 2) * 4;
			const double fl = 4 * KV * ((int)(T * gq + 15) / 16 * 16) * h * K;
			const double tkv = kv / GEN_H100_HBM_BPS;
			double tp, tmg;
			const double merge_blocks = T * ceil(NH * h / 4 / 128.0);
			attn_project(kv + q16 + part, part + q16, fl, fl / (4 * h), 1.0,
			             merge_blocks < GEN_H100_SMS ? merge_blocks / GEN_H100_SMS : 1.0, &tp,
			             &tmg);
			fprintf(out, "      %3d %3d %7.2f %12.2f %6.2f %8.2f / %6.2f %9.2f %10.2f %11.2f %10.0f "
			        "%12.0f\n", gq, h, kv / 1e6, part / 1e6, fl / 1e9,
			        fl / GEN_H100_BF16_FLOPS * 1e6, fl / ATTN_MMA_FLOPS * 1e6,
			        fl / (4 * h) / H100_MUFU_PER_S * 1e6, tp * 1e6, tmg * 1e6, 100.0 * tkv / tp,
			        100.0 * tkv / (tp + tmg));
		}
	fprintf(out, "    not modelled: L2 hits (the row blocks re-read K/V from L2; partials may never "
	        "leave L2, which would lift the share), load/compute overlap (no cp.async pipeline)\n");
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
		        "TFLOP/s dense bf16 (tensor cores), tree attention's _part on mma at %.0f "
		        "TFLOP/s (ldmatrix-fed, below), the other rendered kernels at %.0f TFLOP/s fp32 "
		        "(CUDA-core FMA)\n"
		        "  per op: t = max(bytes / HBM, flops / peak) / min(1, blocks / SMs) per "
		        "launch (a grid of fewer blocks than SMs gets that share of the chip), "
		        "times the launches (repeat = layers)\n", GEN_H100_SMS,
		        GEN_H100_HBM_BPS / 1e12, GEN_H100_BF16_FLOPS / 1e12, ATTN_MMA_FLOPS / 1e12,
		        GEN_H100_FP32_FLOPS / 1e12);
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
		for (size_t i = 0; i < ops->n; i++) {
			const json_value *o = ops->items[i];
			double b = num(o, "bytes"), fl = num(o, "flops"), rep = num(o, "repeat");
			bool gemm = !strcmp(str(o, "exec"), "cublaslt");
			bool mma = attn_entry(o, "_part");
			double share = gemm ? 1.0 : sm_share(json_get(o, "grid"));
			double tm = b / GEN_H100_HBM_BPS * 1e6 / share;
			double tc = fl / (gemm ? GEN_H100_BF16_FLOPS : mma ? ATTN_MMA_FLOPS : GEN_H100_FP32_FLOPS) *
			            1e6 / share;
			double t = tm > tc ? tm : tc;
			if (rep < 1)
				rep = 1;
			tot += t * rep;
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
