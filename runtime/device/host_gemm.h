/* The host backend's GEMMs for the engine's shapes: C (m, n) fp32 =
 * A (m, k) * W (n, k)^T with A and W in one 16-bit dtype (fp16 or bf16),
 * accumulated in fp32, for m from 1 (decode) to a few hundred (a tree, a
 * prefill chunk). W is read from memory once per call and widened in
 * registers (AVX2 + F16C; bf16 by a shift), in register tiles of up to 4
 * rows of A by 3 to 8 rows of W (8 to 12 independent FMA chains; AVX-512:
 * up to 8 rows of A by 3, one widening of W for 8 rows), so that
 * m rows cost about what one does until the FMAs, not the weight stream,
 * are the limit. A portable C path serves other
 * CPUs; the path is chosen at run time. No fp32 copy of W is kept. Work is
 * split over the output columns on the host pool (host_pool.h). */
#ifndef RT_HOST_GEMM_H
#define RT_HOST_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/wformat.h"

enum hg_path {
	HG_PATH_AUTO = 0,     /* the vector path where the CPU has it, else portable */
	HG_PATH_PORTABLE = 1, /* plain C */
	HG_PATH_AVX2 = 2,     /* AVX2 + FMA + F16C */
	HG_PATH_AVX512 = 3,   /* AVX-512F (16 lanes: its own float order) */
};

/* Whether path can run on this CPU (AUTO and PORTABLE always can). */
bool hg_path_available(int path);
/* The path AUTO resolves to: $SW_GEMM_PATH ("portable" or "avx2") when set
 * and available, else the best available (AVX-512, AVX2, portable). */
int hg_path_auto(void);
const char *hg_path_name(int path);

/* C = A * W^T as above; lda = k, ldw = k, ldc = n. Each output is an fp32 sum
 * of exact products (16-bit x 16-bit fits fp32's significand) in L lanes
 * over k (one FMA chain per lane), then a pairwise sum of the lanes: L = 8
 * on the portable and AVX2 paths (the same operations, bit for bit), 16 on
 * AVX-512. The tile and the thread an output falls in never change it. threads: 0 = the pool's, 1 = the
 * caller only. Returns 0, or SW_EINVAL (path unavailable, bad shape) /
 * SW_ENOMEM (scratch for A). */
int hg_gemm16(float *C, const uint16_t *A, const uint16_t *W, int64_t m, int64_t n, int64_t k,
              bool bf16, int path, int threads);

/* The generated gemv16's result on the host: C = A W^T in
 * kernels/ref/gemv16.c's order for a K split over ks warps (its bits: the
 * same fmaf chains per slot, the slots added in order; vectorised across
 * slots, split over W's rows on the pool). f16: fp16, else bf16; k a
 * multiple of 8, ks 1..32 (else SW_EINVAL); SW_ENOMEM. */
int hg_gemv16(float *C, const uint16_t *A, const uint16_t *W, int64_t m, int64_t n, int64_t k,
              bool f16, int ks, int threads);

/* q8_0 weights (GGUF's Q8_0 block layout): each row of W is k / 32 blocks
 * of 34 bytes, an fp16 scale d then 32 int8 q; the weight is q * d, which
 * fp32 holds exactly (8 + 11 significand bits). */
#define HG_Q8_BLOCK SW_WF_QK         /* core/wformat.h: the format table's Q8_0 row */
#define HG_Q8_BYTES SW_WF_Q8_0_BYTES
enum hg_wfmt { HG_W_F16 = 0, HG_W_BF16 = 1, HG_W_Q8_0 = 2 };

/* C = A * W^T with A fp16 (a_bf16: bf16) and W (n, k) q8_0; k a multiple
 * of 32 (else SW_EINVAL). The weights are expanded in registers to their
 * exact fp32 values, so each output is the same lane-ordered fp32 FMA sum
 * as hg_gemm16's over those values, with the same bound; the portable and
 * AVX2 paths bit-identical, AVX-512 its own 16-lane order. */
int hg_gemm_q8(float *C, const uint16_t *A, const void *W, int64_t m, int64_t n, int64_t k,
               bool a_bf16, int path, int threads);
/* W (n, k) q8_0 -> y (n, k) fp32, exactly. */
void hg_q8_to_f32(float *y, const void *W, int64_t n, int64_t k);

/* C = A * W^T with W (n, k) q8_0 and A (m, k) fp16 (a_bf16: bf16) quantized
 * per row in blocks of 32 as GGUF's Q8_0 does, but with an fp32 scale: amax
 * = max |a| of the block, da = amax / 127, q = a * (1 / da) rounded to
 * nearest even (q = 0 and da = NaN for a block holding inf or NaN). Each
 * output is then, over the blocks b in order,
 *   acc = fmaf((float)isum_b, da_b * dw_b, acc)     (acc = 0 first)
 * with isum_b the block's int8 x int8 dot product summed exactly in int32,
 * da_b * dw_b one fp32 rounding. Every path (portable C; AVX2 maddubs/madd;
 * AVX-512 VNNI vpdpbusd) computes exactly this, so all give the same bits,
 * for every m and thread count. k a multiple of 32 (else SW_EINVAL); path
 * HG_PATH_AVX512 needs AVX-512 VNNI here (hg_i8_path_available). This is
 * the "q8_0_a8" engine dtype's GEMM: it computes other numbers than
 * hg_gemm_q8 (the activations are rounded to 8 bits, relative error up to
 * 2^-8 of their block's largest). */
int hg_gemm_q8a8(float *C, const uint16_t *A, const void *W, int64_t m, int64_t n, int64_t k,
                 bool a_bf16, int path, int threads);
/* hg_gemm_q8a8's activation rule for a whole A (m, k), k whole blocks: aq
 * (m, k) the int8 values plus bias (128: vpdpbusd's unsigned operand, or
 * 0), da (m, k / 32) the fp32 scales; xrow: k floats of scratch. path picks
 * only how (AVX-512 VNNI quantizes fp16 in registers): the numbers are the
 * same on every path. Shared with the GGUF-type GEMM (host_gemm_q4.c). */
void hg_a8_quant(uint8_t *aq, float *da, float *xrow, const uint16_t *A, int64_t m, int64_t k,
                 bool a_bf16, int bias, int path);
/* Whether hg_gemm_q8a8 can run path on this CPU (AVX-512: F and VNNI). */
bool hg_i8_path_available(int path);
/* The path HG_PATH_AUTO means for hg_gemm_q8a8: hg_path_auto()'s, lowered
 * to AVX2 where AVX-512 VNNI is missing. */
int hg_i8_path_auto(void);

/* GGUF weight types the "gguf_a8" engine dtype's GEMM reads in the file's
 * own blocks: the rows of the weight-format table (core/wformat.h) that
 * have a gemm_name. */
enum hg_gguf_type {
	HG_GGUF_Q4_0 = SW_WT_Q4_0,
	HG_GGUF_Q4_1 = SW_WT_Q4_1,
	HG_GGUF_Q5_0 = SW_WT_Q5_0,
	HG_GGUF_Q8_0 = SW_WT_Q8_0,
	HG_GGUF_Q4_K = SW_WT_Q4_K,
	HG_GGUF_Q6_K = SW_WT_Q6_K
};
/* Elements and bytes of one block of wtype, repacked or not, as the format
 * table has them (Q4_0 32/18, Q4_1 32/20, Q5_0 32/22, Q8_0 32/34, Q4_K
 * 256/144, Q6_K 256/210); 0 for a type this GEMM does not take. */
int64_t hg_gguf_block(int wtype);
int64_t hg_gguf_block_bytes(int wtype);
/* The table's gemm_name: "q4_0", "q4_1", "q5_0", "q8_0", "q4_k", "q6_k" ("q4_0r",
 * "q4_1r", "q8_0r": repacked); NULL for other types. */
const char *hg_gguf_name(int wtype);

/* Q4_0 and Q4_1 weights repacked (hg_gguf_repack): the same bytes in the
 * order the AVX-512 path reads them. Each whole group of 16 rows (16 wrow
 * bytes where it lay) becomes, block b after block b, 16 block sizes:
 * the 16 rows' scale fields as one vector (Q4_1: dword c = d | m << 16 of
 * row c, 64 bytes; Q4_0: fp16 d of row c, 32 bytes), then 4 vectors of 64
 * bytes, dword c of vector x = bytes 4x .. 4x + 3 of row c's 16 nibble
 * bytes. Rows past the last whole group stay as the file has them. The
 * GEMM on such W takes wtype HG_GGUF_Q4_0R / HG_GGUF_Q4_1R, gives the bits
 * it gives on the file's layout, on every path (only AVX-512 reads it in
 * place; AVX2 and portable restore each group's rows first: slower). */
enum { HG_GGUF_REPACKED = 0x100,
       HG_GGUF_Q4_0R = HG_GGUF_REPACKED | HG_GGUF_Q4_0,
       HG_GGUF_Q4_1R = HG_GGUF_REPACKED | HG_GGUF_Q4_1 };
/* Q8_0 weights repacked (hg_gguf_repack, issue 24: hg_gemm_q8a8 copied
 * and transposed each 16-row group on every call): each whole group of 16
 * rows (16 wrow = 544 nb bytes where it lay) becomes nb blocks of 8
 * vectors of 64 bytes, dword c of vector x of block b = q bytes 4x .. 4x
 * + 3 of row c's block b, each plus 128 as an unsigned byte (xor 0x80), at
 * 512 b + 64 x + 4 c (the VNNI path's transpose, and vpdpbusd's unsigned
 * operand), then the scales, row c's fp16 d of block b at 512 nb + 32 b +
 * 2 c. Rows past the last whole group stay as the file has them. The GEMM
 * on such W takes wtype HG_GGUF_Q8_0R (hg_gemm_q8a8r) and gives the bits
 * it gives on the file's layout, on every path; AVX-512 VNNI reads it in
 * place (each row's integer sum starting from -128 sum(q) instead of
 * -128 sum(w) per column), AVX2 each 8-row half of it (the low or high 32
 * bytes of each vector), portable byte by byte. */
enum { HG_GGUF_Q8_0R = HG_GGUF_REPACKED | HG_GGUF_Q8_0 };
/* W (n, k) of wtype Q4_0, Q4_1 or Q8_0 repacked in place (same byte
 * size): returns the repacked type, SW_EINVAL for another type or k not
 * whole blocks, SW_ENOMEM. */
int hg_gguf_repack(void *W, int64_t n, int64_t k, int wtype);
/* hg_gguf_repack's Q8_0 case (host_gemm_i8.c): 0, SW_EINVAL, SW_ENOMEM. */
int hg_q8_repack(void *W, int64_t n, int64_t k);
/* hg_gemm_q8a8 on W repacked by hg_q8_repack: the same bits. */
int hg_gemm_q8a8r(float *C, const uint16_t *A, const void *W, int64_t m, int64_t n, int64_t k,
                  bool a_bf16, int path, int threads);

/* C = A * W^T with W (n, k) in GGUF type wtype's blocks as the file stores
 * them and A (m, k) fp16 (a_bf16: bf16) quantized by hg_gemm_q8a8's rule.
 * Q8_0 is hg_gemm_q8a8 (Q8_0R hg_gemm_q8a8r). Q4_0, Q4_1, Q5_0, Q4_K
 * (host_gemm_q4.c): each 32-element sub-block is w = d (q - z) + mn with q
 * in 0..15 (Q4_0: z 8, mn 0; Q4_1: mn = m; Q4_K: d = d * scale_j, mn =
 * -dmin * min_j, exact in fp32) or 0..31 (Q5_0: z 16, mn 0), and
 * each output is, over the 32-blocks b in order from acc = 0,
 *   acc = fmaf((float)(sum q a - z asum), da_b * d_b, acc)
 *   acc = fmaf(mn_b, da_b * (float)asum_b, acc)       (Q4_1, Q4_K)
 * with the integer sums exact (asum: the activation block's int8 sum) and
 * da_b * d_b, da_b * asum_b one rounding each. Q6_K: w = d sc_h (q - 32),
 * q in 0..63, sc_h the int8 scale of each 16-element half h, and
 *   acc = fmaf((float)(sum_h sc_h (sum_{t in h} q a - 32 asum_h)), da_b * d, acc)
 * (the integer exact, below 2^24). Every path gives these bits at every m
 * and thread count. k a multiple of the block (else SW_EINVAL, as for an
 * unknown wtype). */
int hg_gemm_gguf_a8(float *C, const uint16_t *A, const void *W, int64_t m, int64_t n, int64_t k,
                    int wtype, bool a_bf16, int path, int threads);

/* The row count from which the host backend hands a GEMM to the BLAS
 * (fp32 sgemm on operands widened for the call): $SW_BLAS_MIN_M, else
 * HG_BLAS_MIN_M, or HG_BLAS_MIN_M_512 where the AVX-512 path runs.
 * Measured on the development machine (2 cores, the model's shapes
 * 1536x576 and 576x1536, widen + OpenBLAS sgemm against this GEMM): with
 * AVX2 this GEMM is 3-10x faster up to m = 256, even at 512-1024 and 1.4x
 * slower at 2048; with AVX-512 it is 1.5-1.9x faster at every m up to 2048. */
#define HG_BLAS_MIN_M 1024
#define HG_BLAS_MIN_M_512 4096
int64_t hg_blas_min_m(void);

/* fp16/bf16 -> fp32, exactly (subnormals, inf and NaN kept). */
void hg_to_f32(float *y, const uint16_t *x, int64_t cnt, bool bf16);
/* How many parts a GEMM call splits its n_units column groups into: a few
 * per thread (threads, or the pool's when 0), so a descheduled thread holds
 * up little, none of fewer than min_units groups; 1 runs on the caller. */
int64_t hg_parts(int threads, int64_t n_units, int64_t min_units);
/* The calling thread's GEMM scratch of at least bytes, 64-aligned, kept
 * between calls and freed at thread exit (NULL when it cannot grow). One
 * buffer a thread: valid until that thread's next call. */
void *hg_thread_scratch(size_t bytes);
/* fp32 -> fp16/bf16, round to nearest even, bit for bit as formats/gguf.c's
 * gguf_f32_to_f16/bf16 (NaN: fp16 sign | 0x7e00, bf16 top half | 64). */
void hg_from_f32(uint16_t *y, const float *x, int64_t cnt, bool bf16);

#endif
