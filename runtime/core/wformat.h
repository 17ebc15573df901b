/* Weight formats, declared once: every tensor type a GGUF file may hold
 * (numbered as ggml numbers them), with its block size, block bytes, the
 * scale fields a finite scan reads and the dequantization of one block.
 * The GGUF reader (formats/gguf.c), the host GEMMs (device/host_gemm*.c),
 * the engine's weight extents (runtime/engine) and the kernels' references
 * read this table; nothing else describes a block. Not a quantizer. */
#ifndef SW_WFORMAT_H
#define SW_WFORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Type ids, ggml's numbering (ggml.h enum ggml_type). */
enum sw_wtype {
	SW_WT_F32 = 0, SW_WT_F16 = 1, SW_WT_Q4_0 = 2, SW_WT_Q4_1 = 3,
	SW_WT_Q5_0 = 6, SW_WT_Q5_1 = 7, SW_WT_Q8_0 = 8, SW_WT_Q8_1 = 9,
	SW_WT_Q2_K = 10, SW_WT_Q3_K = 11, SW_WT_Q4_K = 12, SW_WT_Q5_K = 13,
	SW_WT_Q6_K = 14, SW_WT_Q8_K = 15, SW_WT_IQ2_XXS = 16, SW_WT_IQ2_XS = 17,
	SW_WT_IQ3_XXS = 18, SW_WT_IQ1_S = 19, SW_WT_IQ4_NL = 20, SW_WT_IQ3_S = 21,
	SW_WT_IQ2_S = 22, SW_WT_IQ4_XS = 23, SW_WT_I8 = 24, SW_WT_I16 = 25,
	SW_WT_I32 = 26, SW_WT_I64 = 27, SW_WT_F64 = 28, SW_WT_IQ1_M = 29,
	SW_WT_BF16 = 30, SW_WT_TQ1_0 = 34, SW_WT_TQ2_0 = 35,
};

/* The block sizes hot loops need as constants (the table's rows use them). */
#define SW_WF_QK 32      /* elements of a Q4_0/Q4_1/Q5_x/Q8_x block */
#define SW_WF_QK_K 256   /* elements of a K-quant super-block */
#define SW_WF_Q8_0_BYTES 34

/* What a finite scan reads of each block (sw_wformat.scan). */
enum sw_wscan {
	SW_WSCAN_NONE = 0, /* integers only (I8..I64), or a scale packed across fields (IQ1_M) */
	SW_WSCAN_F32,      /* every element an IEEE binary32 */
	SW_WSCAN_F16,      /* every element an IEEE binary16 */
	SW_WSCAN_BF16,     /* every element a bfloat16 */
	SW_WSCAN_F64,      /* every element an IEEE binary64 */
	SW_WSCAN_SCALES,   /* the block's scale fields (scale_off, scale_bytes); the
	                    * quants are integers and cannot be non-finite */
};

#define SW_WF_MAX_SCALES 2

typedef struct sw_wformat {
	const char *name;      /* GGUF's spelling: "Q4_K" */
	const char *gemm_name; /* the engines' spelling ("q4_k", engine.json's weight types) of a
	                        * type the host gguf_a8 GEMMs read in place; NULL for the others */
	uint32_t type;         /* enum sw_wtype */
	uint32_t block;        /* elements per block (1 for the plain types) */
	uint32_t bytes;        /* bytes per block */
	uint8_t scan;          /* enum sw_wscan */
	uint8_t n_scales;      /* SW_WSCAN_SCALES: how many scale fields per block */
	uint8_t scale_bytes;   /* 2 (binary16) or 4 (binary32, Q8_K's d) */
	uint16_t scale_off[SW_WF_MAX_SCALES]; /* their byte offsets in the block */
	const char *scale_name[SW_WF_MAX_SCALES]; /* ggml's field names: "d", "dmin" */
	/* One block (bytes) -> block floats, ggml's operation order so that the
	 * results match ggml and gguf-py bit for bit; NULL where this project
	 * has no dequantizer for the type. */
	void (*dequant)(const uint8_t *blk, float *y);
} sw_wformat;

/* The row of type, or NULL for a type the table does not know. */
const sw_wformat *sw_wformat_get(uint32_t type);
/* Elements and bytes of one block of type, and the engines' name of a type
 * the gguf_a8 GEMMs read (gemm_name); 0 (NULL) for any other int, negative
 * ones included, so a caller may pass "no type" (-1) through. */
int64_t sw_wformat_block(int type);
int64_t sw_wformat_block_bytes(int type);
const char *sw_wformat_gemm_name(int type);
/* Bytes of n elements of type; 0 for an unknown type, n not a multiple of
 * the block, or an overflow. */
uint64_t sw_wformat_nbytes(uint32_t type, uint64_t n);
/* Dequantizes n elements (a multiple of the block) of raw blocks at src:
 * 0, SW_ENOTSUP for a type without a dequantizer, SW_EINVAL for a partial
 * block (core/err.h codes). */
int sw_wformat_dequant(uint32_t type, const void *src, uint64_t n, float *out);
/* The first element of data (n elements of f's type, n a multiple of the
 * block) that is not finite, or whose block's scale is not: its index, or
 * -1 when every value is finite. One pass at memory speed: bit tests on
 * 8 bytes at a time for the plain types, the scale fields of each block
 * for the block types. data may be unaligned. */
int64_t sw_wformat_find_nonfinite(const sw_wformat *f, const void *data, uint64_t n);
/* What is wrong at index i (a find_nonfinite result) in words, into buf:
 * "element 7 is nan", "block 3 (elements 96..127): scale dmin is inf". */
void sw_wformat_describe(const sw_wformat *f, const void *data, int64_t i, char *buf, size_t n);

/* What a loader's finite scan covered and what it cost (the loaders add
 * to it, file by file, and say it when the model is loaded). */
typedef struct sw_wscan_cost {
	uint64_t bytes;   /* tensor bytes passed over */
	uint64_t tensors;
	double seconds;   /* wall-clock, page faults of a mapped file included */
} sw_wscan_cost;

#endif
