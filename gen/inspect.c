/* Engine inspection and the H100 roofline projection (inspect.h). Reads only
 * the engine directory, through the strict JSON parser, so it also checks
 * that engine.json and resources.json are well formed. */
#include <errno.h>
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

/* The tree attention arithmetic of templates/tree_attention.cu.tmpl, per
 * layer of the verify phase's target forward: K/V bytes, flops, intensity
 * against the fp32 FMA ridge, and the bound that results. */
static void attention_note(FILE *out, const json_value *eng, const json_value *phases)
{
	const json_value *spec = json_get(eng, "spec"), *tg = json_get(json_get(eng, "shapes"), "target");
	const double ctx = num(json_get(spec, "roofline"), "context");
	const double nkv = num(tg, "n_kv_heads"), nh = num(tg, "n_heads"), hd = num(tg, "head_dim");
	const double el = !strcmp(str(spec, "dtype"), "fp16") || !strcmp(str(spec, "dtype"), "bf16")
	                  ? 2 : 4;
	for (size_t ph = 0; ph < phases->n; ph++) {
		if (strcmp(str(phases->items[ph], "name"), "verify"))
			continue;
		const double T = num(phases->items[ph], "rows"), keys = ctx + T;
		const double kv = 2 * keys * nkv * hd * el, fl = 4 * T * nh * hd * keys;
		const double ridge = GEN_H100_FP32_FLOPS / GEN_H100_HBM_BPS;
		const double tm = kv / GEN_H100_HBM_BPS * 1e6, tc = fl / GEN_H100_FP32_FLOPS * 1e6;
		fprintf(out, "  tree attention, verify (T = %.0f, %.0f cached keys, per layer): K+V %.2f "
		        "MB -> %.2f us at HBM peak; %.3f GFLOP (QK + PV) -> %.2f us at fp32 FMA peak;\n"
		        "    %.1f FLOP/B against the fp32 ridge %.1f FLOP/B: %s bound, <= %.0f%% of HBM "
		        "bandwidth (tensor-core mma would be needed beyond)\n", T, ctx, kv / 1e6, tm,
		        fl / 1e9, tc, fl / kv, ridge, tc > tm ? "compute" : "bandwidth",
		        100.0 * (tm < tc ? tm / tc : 1.0));
	}
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
		        "TFLOP/s dense bf16 (tensor cores), rendered kernels at %.0f TFLOP/s fp32 "
		        "(CUDA-core FMA: none of them uses mma)\n"
		        "  per op: t = max(bytes / HBM, flops / peak) / min(1, blocks / SMs) per "
		        "launch (a grid of fewer blocks than SMs gets that share of the chip), "
		        "times the launches (repeat = layers)\n", GEN_H100_SMS,
		        GEN_H100_HBM_BPS / 1e12, GEN_H100_BF16_FLOPS / 1e12, GEN_H100_FP32_FLOPS / 1e12);
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
			double share = gemm ? 1.0 : sm_share(json_get(o, "grid"));
			double tm = b / GEN_H100_HBM_BPS * 1e6 / share;
			double tc = fl / (gemm ? GEN_H100_BF16_FLOPS : GEN_H100_FP32_FLOPS) * 1e6 / share;
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
