/* Private to the GGUF-type GEMM (host_gemm_q4.c, its vector paths in
 * host_gemm_q4_x86.c): the job both share and the vector paths' entries.
 * Not part of the device API (that is host_gemm.h). */
#ifndef SW_HOST_GEMM_Q4_JOB_H
#define SW_HOST_GEMM_Q4_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HG_Q4_G 16 /* columns a group */
#define HG_Q4_QB 32 /* elements a sub-block */

typedef struct q4_job {
	float *C;            /* (m, n) */
	const int8_t *aq;    /* (m, k) quantized A */
	const float *da;     /* (m, nb) scales */
	const int32_t *zas;  /* (m, nb) -z asum, the integer sum's start; Q6_K:
	                      * (m, 2 nb), -32 asum of each 16-element half */
	const float *sa;     /* (m, nb) da * asum (types with mn) */
	const char *W;       /* (n, k) in wtype's blocks, rows wrow bytes apart */
	int wtype;           /* the block type (Q4_0 or Q4_1 where repacked) */
	bool has_min;
	bool repacked;       /* W's whole 16-row groups repacked (hg_gguf_repack) */
	int64_t m, n, k, nb, wrow, n_groups;
	char *pack;          /* part_bytes for each part: the portable path's
	                      * unpacked group (Q4_PACK; Q6_K one column), the
	                      * vector paths' row accumulators (64 bytes a row)
	                      * then the copy of a group's G rows of W */
	size_t part_bytes;
	void (*cols)(const struct q4_job *j, int64_t j0, int64_t j1, char *pack);
} q4_job;

/* Rows [j, j + nc) of a repacked W in the file's layout into cp (wrow
 * bytes each, row after row): where AVX2 and portable read such W */
void hg_q4r_rows(const q4_job *jb, int64_t j, int nc, char *cp);

/* The vector paths (host_gemm_q4_x86.c; x86 only): columns [j0, j1) of
 * jb into C, pack the part's part_bytes */
void hg_q4_cols_avx2(const q4_job *jb, int64_t j0, int64_t j1, char *pack);
void hg_q4_cols_vnni(const q4_job *jb, int64_t j0, int64_t j1, char *pack);

#endif
