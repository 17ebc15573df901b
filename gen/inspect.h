/* `specwright inspect ENGINE_DIR`: reads engine.json (and resources.json when
 * the engine was compiled) and prints every kernel's resources and a roofline
 * projection on an H100 SXM: per op max(bytes / HBM bandwidth, flops / peak),
 * the peak dense bf16 for GEMMs, tree attention's own model for its _part
 * (gen/attn_cost.h: HBM, L2, shared memory, mma.sync, MUFU), and fp32 FMA
 * for the other rendered kernels, scaled by the share of SMs the op's grid can occupy, per phase, per iteration (draft levels + verify + accept +
 * commit) and tokens/s = tau / iteration time. A projection from the plan's
 * byte and flop counts, not a measurement: launch overheads, L2 reuse and
 * achieved bandwidth are not modelled. */
#ifndef GEN_INSPECT_H
#define GEN_INSPECT_H

#include <stdio.h>

#include "core/err.h"

#define GEN_H100_HBM_BPS 3.35e12   /* bytes/s, H100 SXM HBM3 */
#define GEN_H100_BF16_FLOPS 989e12 /* flop/s, dense bf16 tensor cores (cuBLASLt GEMMs) */
#define GEN_H100_FP32_FLOPS 67e12  /* flop/s, fp32 FMA on CUDA cores (the rendered kernels) */
#define GEN_H100_SMS 132
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
} gen_inspect_summary;

/* tau > 0 overrides the spec's roofline.tau; else the spec's, else the
 * assumption min(3, D + 1). out may be NULL (summary only). */
int gen_inspect(const char *dir, double tau, FILE *out, gen_inspect_summary *sum, sw_err *err);

/* The CLI command: argv[1] == "inspect"; returns the exit status. */
int gen_inspect_main(int argc, char **argv);

#endif
