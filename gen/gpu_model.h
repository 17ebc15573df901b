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
/* Skinny cuBLASLt GEMMs (issue 37 item 2): the log's 12-13% of the
 * bandwidth for wk/wv (34-38% wq/wo, 60-65% gate/up/down) are profile's
 * raw times, each with its ~15 us of synchronisation. Their own times
 * (the raw time less the 17.77 us floor, per launch, over the two 8B
 * engines' phases, `calibrate`'s rows): 8.4 MB (wk 2.65-4.02 us, wv
 * 1.57-3.07, median of both ~2.3), 33.6 MB 8.3-15.1 (median ~10.2), 117 MB
 * 36.3-41.8 (~38): at or near the bytes over 3.35 TB/s (2.50, 10.0, 35.1
 * us), so the fit's 1.34 us for 8.4 MB streams faster than the device
 * can. The model therefore never lets a GEMM beat its bytes at bw (the
 * floor in gen_gpu_gemm_s): wk/wv at 2.50 us on the H100, the larger GEMMs
 * where the fit puts them. The log shows no skinny GEMM far below the
 * roofline once the synchronisation is taken out; it cannot resolve a
 * few tenths of a us at 8 MB (wv after wk shares nothing but reads faster
 * than the bandwidth: L2 or the floor's spread). */
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
 * bw less the overlap, at least its bytes at bw (the floor above), or its
 * flops at the tensor-core peak. *tm and *tc (may be NULL): the memory
 * and compute terms. */
double gen_gpu_gemm_s(const gen_gpu *g, double bytes, double flops);
void gen_gpu_gemm_terms(const gen_gpu *g, double bytes, double flops, double *tm, double *tc);

/* The generated 16-bit GEMV (templates/gemv16.cu.tmpl). Uncalibrated: no
 * hardware run yet; these are assumptions, stated so the first run can
 * correct them.
 *  - its weight stream reaches GEN_GEMV16_EFF of bw once the grid holds
 *    GEN_GEMV16_BLOCKS_SM blocks an SM (16-byte loads, R rows of W a warp:
 *    the loads a block keeps in flight); a smaller grid gets its share;
 *  - like cuBLASLt's, its first GEN_CAL_GEMM_OVERLAP_S hides under the
 *    launch (the same graph node launch), and nothing beats bytes / bw;
 *  - its instructions: per weight element M FMAs, M / R conversions of A
 *    and one of W, at GEN_GEMV16_ISSUE of the fp32 lane issue rate
 *    (fp32_flops / 2), no tensor cores: at M ~ 8 and beyond the FMAs, not
 *    the bytes, decide, and cuBLASLt's tensor cores win. */
#define GEN_GEMV16_EFF 0.90
#define GEN_GEMV16_BLOCKS_SM 4
#define GEN_GEMV16_ISSUE 0.70
#define GEN_GEMV16_NOTE "uncalibrated: no hardware run yet"

/* Seconds of a gemv16 launch beyond its launch: bytes it reads and writes
 * (W once per M tile), M rows of A, N x K weights, R rows a warp, blocks
 * its grid; *tm, *tc (may be NULL) the memory and instruction terms. */
double gen_gpu_gemv16_s(const gen_gpu *g, double bytes, double m, double n, double k, int r,
                        double blocks, double *tm, double *tc);

/* The SM clock the tree attention model counts in: the tensor-core peak
 * over 4096 flop per clock per SM (Hopper's dense 16-bit rate). */
double gen_gpu_clk(const gen_gpu *g);

#endif
