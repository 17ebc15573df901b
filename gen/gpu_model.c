/* The devices inspect projects onto and the parsing of `--gpu` (gpu_model.h).
 * The H100 entry is the SXM's paper figures the projection has always used;
 * the H200's bandwidth is the copy rate measured on the project's H200. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpu_model.h"

const gen_gpu gen_gpu_h100 = {
	.key = "h100",
	.name = "NVIDIA H100 SXM (80 GB HBM3)",
	.bw = GEN_H100_HBM_BPS,
	.bw_note = "on paper (the calibration's reference)",
	.bf16_flops = GEN_H100_BF16_FLOPS,
	.fp32_flops = GEN_H100_FP32_FLOPS,
	.sms = GEN_H100_SMS,
	.launch_s = GEN_CAL_LAUNCH_S,
	.gemm_eff = GEN_CAL_GEMM_EFF,
	.gemm_overlap_s = GEN_CAL_GEMM_OVERLAP_S,
	.note = "the device the calibration was measured on",
};

/* H200 SXM: the GH100 die of the H100 SXM (132 SMs, the same dense bf16 and
 * fp32 peaks on paper) with 141 GB of HBM3e at 4.8 TB/s on paper; 4.3 TB/s
 * is what a device-to-device copy reached on the machine this project is
 * lent (issue 37), so the projection streams at that. */
const gen_gpu gen_gpu_h200 = {
	.key = "h200",
	.name = "NVIDIA H200 SXM (141 GB HBM3e)",
	.bw = 4.3e12,
	.bw_note = "a device-to-device copy measured on it; 4.8 TB/s on paper",
	.bf16_flops = 989e12,
	.fp32_flops = 67e12,
	.sms = 132,
	.launch_s = GEN_CAL_LAUNCH_S,
	.gemm_eff = GEN_CAL_GEMM_EFF,
	.gemm_overlap_s = GEN_CAL_GEMM_OVERLAP_S,
	.note = "the H100's launch cost and GEMM efficiency scaled by bandwidth: an assumption "
	        "until an H200 run is calibrated",
};

/* One comma-separated field: [p, end) copied into buf; false when too long. */
static bool field(const char *p, const char *end, char *buf, size_t n)
{
	if ((size_t)(end - p) >= n)
		return false;
	memcpy(buf, p, (size_t)(end - p));
	buf[end - p] = 0;
	return true;
}

static int bad(sw_err *err, const char *arg, const char *what, const char *expected,
               const char *found)
{
	return sw_errf(err, SW_EINVAL, "--gpu %s: %s: expected %s, found '%s'", arg, what, expected,
	               found);
}

int gen_gpu_parse(const char *arg, gen_gpu *out, sw_err *err)
{
	static const char FORM[] = "h100, h200 or BW,TFLOPS,SMS (e.g. 4300,989,132 or 4.3TB/s,989,132)";
	if (!arg || !*arg)
		return bad(err, "''", "the device", FORM, "");
	if (!strcmp(arg, "h100") || !strcmp(arg, "h200")) {
		*out = arg[1] == '1' ? gen_gpu_h100 : gen_gpu_h200;
		return 0;
	}
	const char *c1 = strchr(arg, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
	if (!c1 || !c2 || strchr(c2 + 1, ','))
		return bad(err, arg, "the device", FORM, arg);
	char f[3][48];
	if (!field(arg, c1, f[0], sizeof(f[0])) || !field(c1 + 1, c2, f[1], sizeof(f[1])) ||
	    !field(c2 + 1, c2 + 1 + strlen(c2 + 1), f[2], sizeof(f[2])))
		return bad(err, arg, "the device", FORM, arg);

	/* BW: a number, GB/s unless "TB/s" follows; the unit is never guessed
	 * from the size (4.3 alone is 4.3 GB/s, below the range) */
	char *e;
	double bw = strtod(f[0], &e);
	double scale = 1e9;
	if (e == f[0])
		return bad(err, arg, "BW", "a bandwidth in GB/s (e.g. 4300 or 4300GB/s) or TB/s "
		           "(4.3TB/s)", f[0]);
	if (!strcasecmp(e, "TB/s"))
		scale = 1e12;
	else if (*e && strcasecmp(e, "GB/s"))
		return bad(err, arg, "BW's unit", "none (GB/s), GB/s or TB/s", e);
	bw *= scale;
	if (!isfinite(bw) || bw < 10e9 || bw > 100e12)
		return bad(err, arg, "BW", "10 GB/s to 100 TB/s (a number alone is GB/s: write 4.3TB/s "
		           "for 4.3 TB/s)", f[0]);
	double tf = strtod(f[1], &e);
	if (e == f[1] || *e || !isfinite(tf) || tf < 1 || tf > 100000)
		return bad(err, arg, "TFLOPS", "the dense 16-bit tensor-core peak in TFLOP/s, 1 to 100000",
		           f[1]);
	long sms = strtol(f[2], &e, 10);
	if (e == f[2] || *e || sms < 1 || sms > 1024)
		return bad(err, arg, "SMS", "the number of SMs, an integer 1 to 1024", f[2]);

	memset(out, 0, sizeof(*out));
	snprintf(out->key, sizeof(out->key), "custom");
	snprintf(out->name, sizeof(out->name), "a GPU given as %.40s", arg);
	out->bw = bw;
	snprintf(out->bw_note, sizeof(out->bw_note), "as given");
	out->bf16_flops = tf * 1e12;
	out->fp32_flops = out->bf16_flops * (GEN_H100_FP32_FLOPS / GEN_H100_BF16_FLOPS);
	out->sms = (int)sms;
	out->launch_s = GEN_CAL_LAUNCH_S;
	out->gemm_eff = GEN_CAL_GEMM_EFF;
	out->gemm_overlap_s = GEN_CAL_GEMM_OVERLAP_S;
	snprintf(out->note, sizeof(out->note), "fp32 at Hopper's 67/989 of TFLOPS, the H100's launch "
	         "cost and GEMM efficiency: assumptions");
	return 0;
}

void gen_gpu_gemm_terms(const gen_gpu *g, double bytes, double flops, double *tm, double *tc)
{
	const double fit = bytes / (g->gemm_eff * g->bw) - g->gemm_overlap_s, floor = bytes / g->bw;
	if (tm)
		*tm = fit > floor ? fit : floor;
	if (tc)
		*tc = flops / g->bf16_flops;
}

double gen_gpu_gemm_s(const gen_gpu *g, double bytes, double flops)
{
	double tm, tc;
	gen_gpu_gemm_terms(g, bytes, flops, &tm, &tc);
	return tm > tc ? tm : tc;
}

double gen_gpu_gemv16_s(const gen_gpu *g, double bytes, double m, double n, double k, int r,
                        double blocks, double *tm, double *tc)
{
	const double want = (double)GEN_GEMV16_BLOCKS_SM * g->sms;
	const double fill = blocks >= want ? 1.0 : blocks > 0 ? blocks / want : 1.0;
	const double sm = blocks >= g->sms ? 1.0 : blocks > 0 ? blocks / g->sms : 1.0;
	double t = bytes / (GEN_GEMV16_EFF * g->bw * fill) - g->gemm_overlap_s;
	const double floor = bytes / (g->bw * fill);
	t = t > floor ? t : floor;
	const double instr = n * k * (m * (1.0 + 1.0 / (r > 0 ? r : 1)) + 1.0);
	const double c = instr / (g->fp32_flops / 2 * GEN_GEMV16_ISSUE * sm);
	if (tm)
		*tm = t;
	if (tc)
		*tc = c;
	return t > c ? t : c;
}

double gen_gpu_clk(const gen_gpu *g)
{
	return g->bf16_flops / (g->sms * 4096.0);
}
