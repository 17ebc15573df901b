/* The GPUs `specwright inspect` projects onto (h100, h200, or one given as
 * BW,TFLOPS,SMS), and the calibration of its launch and GEMM costs from the
 * project's one hardware run (tests/gpu/results/h100-2026-11-27.log). A
 * description and fitted constants, not a measurement of the device: every
 * figure says where it comes from. The planner's tree attention model
 * (gen/attn_cost.h) takes the H100 entry. */
#ifndef GEN_GPU_MODEL_H
#define GEN_GPU_MODEL_H

#include <stdbool.h>

#include "core/err.h"

/* The H100 SXM's figures on paper (the code's only device until now; the
 * planner still chooses tree attention's shape for it). */
#define GEN_H100_HBM_BPS 3.35e12   /* bytes/s, HBM3 */
#define GEN_H100_BF16_FLOPS 989e12 /* flop/s, dense bf16 tensor cores (cuBLASLt GEMMs) */
#define GEN_H100_FP32_FLOPS 67e12  /* flop/s, fp32 FMA on CUDA cores (the rendered kernels) */
#define GEN_H100_SMS 132

/* Calibration: `python3 tests/gpu/check_util.py calibrate
 * tests/gpu/results/h100-2026-11-27.log tests/gpu/results/h100-2026-11-27.launches`
 * prints these (tests/test_inspect.c checks that it still does). The log's
 * `profile` tables time every op with a synchronisation after it; its graph
 * replays (`run`) time whole iterations.
 *  - profile's floor per launch (median per-launch time of the ops moving
 *    < 100 kB, GEMMs over < 1 MB of weights): kernels 10.56 us (368 ops,
 *    10%-90% 9.67-11.81), cuBLASLt 17.77 us (98 ops, 17.02-20.16), memsets
 *    10.35 us (38 ops). An op's own time is what profile measured beyond it.
 *  - per launch in graph replay: (iteration - its ops' own times) /
 *    launches over the five engines without IF nodes whose plans still match
 *    the run: 1.48 (SmolLM2 2-layer eagle25), 1.76 (n-gram), 2.03 (sequoia63),
 *    3.08 (Llama-3-8B block), 2.94 us (eagle25); 2.77 us over all their
 *    launches. So profile's synchronisation is ~7.8 us a kernel launch and
 *    ~15 us a GEMM's, the "~10 us" of issue 37.
 *  - cuBLASLt GEMMs (119 ops with >= 4 MB of weights, M 1 to 64, least
 *    squares weighted by launches): own time = bytes / (85.2% of 3.35 TB/s)
 *    - 1.60 us (the start of the stream hides under the launch), no
 *    dependence on M found beyond a few %. Measured against profile's raw
 *    times, wk/wv read 12-13% of the bandwidth, wq/wo 34-38%: that is the
 *    synchronisation. Their own times (medians by size) against the fit:
 *    8.4 MB 2.3-3.2 us (fit 1.3: small GEMMs are under-projected by 1-2
 *    us), 33.6 MB 9.3-10.3 (10.2), 117 MB 37.5-39.9 (39.6), the 1.05 GB LM
 *    head 370-378 (367).
 * Elsewhere these are assumptions: the launch cost and the GEMMs' overlap
 * are taken as the H100's on every device, the GEMM efficiency as the same
 * share of the device's bandwidth figure (on the H200, of its measured copy
 * rate: if the H100's 85% partly is its own copy rate's gap to paper, this
 * is pessimistic by up to ~10%). */
#define GEN_CAL_FLOOR_KERNEL_S 10.56e-6
#define GEN_CAL_FLOOR_GEMM_S 17.77e-6
#define GEN_CAL_FLOOR_MEMSET_S 10.35e-6
#define GEN_CAL_LAUNCH_S 2.77e-6
#define GEN_CAL_GEMM_EFF 0.852
#define GEN_CAL_GEMM_OVERLAP_S 1.60e-6
#define GEN_CAL_SOURCE "tests/gpu/results/h100-2026-11-27.log"

typedef struct gen_gpu {
	char key[16];       /* "h100", "h200", "custom" */
	char name[64];      /* what it is, for the output */
	double bw;          /* bytes/s every projection streams at */
	char bw_note[96];   /* where bw comes from */
	double bf16_flops;  /* flop/s, dense 16-bit tensor cores (GEMMs, tree attention's mma) */
	double fp32_flops;  /* flop/s, fp32 FMA (the other rendered kernels) */
	int sms;
	double launch_s;    /* per launch (graph node) in graph replay */
	double gemm_eff;    /* cuBLASLt's share of bw */
	double gemm_overlap_s;
	char note[160];     /* the assumptions this entry adds to the calibration's */
} gen_gpu;

extern const gen_gpu gen_gpu_h100, gen_gpu_h200;

/* The device of `--gpu ARG`: "h100", "h200", or "BW,TFLOPS,SMS": BW the
 * achievable memory bandwidth in GB/s, or TB/s with the unit written
 * ("4300", "4300GB/s", "4.3TB/s"; 10 GB/s to 100 TB/s), TFLOPS the dense
 * 16-bit tensor-core peak (1 to 100000), SMS the multiprocessor count (1 to
 * 1024). A given device takes fp32 FMA at Hopper's ratio to the tensor cores
 * (67/989) and the calibration's launch and GEMM constants. */
int gen_gpu_parse(const char *arg, gen_gpu *out, sw_err *err);

/* Seconds of a cuBLASLt GEMM beyond its launch: its bytes at gemm_eff of
 * bw less the overlap (at least 0), or its flops at the tensor-core peak. */
double gen_gpu_gemm_s(const gen_gpu *g, double bytes, double flops);

/* The SM clock the tree attention model counts in: the tensor-core peak
 * over 4096 flop per clock per SM (Hopper's dense 16-bit rate). */
double gen_gpu_clk(const gen_gpu *g);

#endif
