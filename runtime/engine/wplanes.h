/* GGUF-typed GEMM weights repacked at load into the planes the GPU's
 * gemv_gguf kernels read (the layout: kernels/ref/ref.h), and the check
 * that the planes hold the file's weights: every row dequantized from the
 * planes (ref_wplanes_dequant_row) equals the format table's dequantization
 * of the file's blocks (core/wformat.h) bit for bit. The same bytes, moved:
 * deterministic, and as many as the file's. Not the host's repack
 * (runtime/device/host_repack.h: its own layout for its own GEMMs). */
#ifndef RT_WPLANES_H
#define RT_WPLANES_H

#include <stdint.h>

#include "core/err.h"

/* W (n, k) of GGUF type wtype (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K) as the file
 * stores it at src -> its planes at dst (the same byte count; dst and src
 * do not overlap). 0, or SW_EINVAL for another type or k not whole blocks. */
int rt_wplanes_repack(void *dst, const void *src, int wtype, int64_t n, int64_t k);

/* 0 when every row of planes dequantizes to the file blocks' values bit
 * for bit; else SW_EINVAL naming what (the weight `what`, its row and
 * element, both values), SW_ENOMEM. */
int rt_wplanes_check(const void *planes, const void *src, int wtype, int64_t n, int64_t k,
                     const char *what, sw_err *err);

#endif
