/* `specwright inspect ENGINE_DIR [--tau T] [--gpu h100|h200|BW,TFLOPS,SMS]`:
 * reads engine.json (and resources.json when the engine was compiled) and
 * prints every kernel's resources, its launches (per iteration, per phase,
 * per layer of each forward) and a projection of graph replay on a GPU of
 * gen/gpu_model.h (default the H200): per op one launch
 * (calibrated) plus max(bytes / bandwidth, flops / peak) - cuBLASLt GEMMs at
 * their calibrated share of the bandwidth, tree attention's _part by its own
 * model (gen/attn_cost.h), the other rendered kernels scaled by the share of
 * SMs their grid can occupy - per phase, per iteration (draft levels + verify
 * + accept + commit), its share of the bandwidth roofline, tokens/s = tau /
 * iteration. A projection from the plan's byte and flop counts, not a
 * measurement: tests/gpu/check_util.py joins it with `profile` on a GPU. */
#ifndef GEN_INSPECT_H
#define GEN_INSPECT_H

#include <stdbool.h>
#include <stdio.h>

#include "core/err.h"
#include "gpu_model.h"

#define GEN_INSPECT_MAX_PHASES 72

typedef struct gen_inspect_summary {
	int n_phases;
	char phase[GEN_INSPECT_MAX_PHASES][32];
	double phase_us[GEN_INSPECT_MAX_PHASES];
	double iter_us;      /* draft levels + verify + accept + commit */
	double draft_us;     /* the drafter's part of iter_us: its phases, its layers'
	                      * ops elsewhere (a block drafter's feature taps and
	                      * fusion in verify), its K/V commit */
	double prefill_us;
	double tau;          /* the tau used */
	const char *tau_src; /* "spec", "--tau" or "assumed" */
	double tokens_per_s; /* tau / iter_us */
	int n_kernels;
	/* launches (graph nodes: a cuBLASLt GEMM counts one) per phase and per
	 * iteration (the phases iter_us sums; those under an IF node included) */
	int phase_launches[GEN_INSPECT_MAX_PHASES];
	double phase_per_layer[GEN_INSPECT_MAX_PHASES]; /* per layer of the phase's
	                                                  * longest forward; 0: none */
	int launches, launch_kernels, launch_gemms, launch_memsets;
	double launch_us;    /* the launches' share of iter_us */
	double iter_bytes;   /* bytes per iteration */
	double roofline_us;  /* iter_bytes / the device's bandwidth */
	char gpu[16];        /* the device's key */
} gen_inspect_summary;

typedef struct gen_inspect_opts {
	double tau;          /* > 0: overrides the spec's roofline.tau */
	const gen_gpu *gpu;  /* NULL: gen_gpu_h200 */
	bool gpu_default;    /* say the device is the default one */
} gen_inspect_opts;

/* tau > 0 overrides the spec's roofline.tau; else the spec's, else the
 * assumption min(3, D + 1). out may be NULL (summary only). */
int gen_inspect_on(const char *dir, const gen_inspect_opts *o, FILE *out, gen_inspect_summary *sum,
                   sw_err *err);

/* gen_inspect_on on the default device (the H200). */
int gen_inspect(const char *dir, double tau, FILE *out, gen_inspect_summary *sum, sw_err *err);

/* The CLI command: argv[1] == "inspect"; returns the exit status. */
int gen_inspect_main(int argc, char **argv);

#endif
