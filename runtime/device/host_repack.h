/* The host backend's repack of GGUF Q4_0 / Q4_1 / Q8_0 GEMM weights at bind
 * (host_repack.c): each such weight that only gguf_a8 GEMMs read is
 * rewritten in place into the layout the AVX-512 GEMM reads directly
 * (host_gemm.h hg_gguf_repack) and its GEMMs retyped to match. */
#ifndef RT_HOST_REPACK_H
#define RT_HOST_REPACK_H

#include "device.h"

/* Repacks, over ops[0 .. n), every gguf_a8 GEMM weight of type Q4_0,
 * Q4_1 or Q8_0, and every q8_0_a8 GEMM weight (Q8_0 blocks, the same
 * int8 GEMM), whose bytes no other op touches: not a kernel's or memset's
 * argument (any argument value inside the weight's bytes counts), not a
 * GEMM's C or A, and every GEMM on it of the same dtype, shape and type
 * from the same address. Those GEMMs' wtype becomes HG_GGUF_Q4_0R / Q4_1R
 * / Q8_0R (a q8_0_a8 GEMM's too: there it names the layout, unused
 * otherwise); any other weight is left as it is (skipped, never an error).
 * Q4 only where the GEMM's automatic path is AVX-512 (elsewhere its
 * repacked layout is slower), Q8_0 where it is AVX-512 or AVX2 (the
 * portable path gains nothing), unless force. Returns the number of
 * weights repacked, or SW_ENOMEM (the weights repacked so far stay
 * consistent with their ops). */
int rt_host_repack_weights(rt_op *ops, int n, bool force);

#endif
