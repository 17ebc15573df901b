/* The gguf_a8 dtype's part of the planner: which GGUF block type each GEMM
 * weight buffer holds, layer by layer. A field whose layers share a type is
 * a buffer of that type; a field whose layers differ (a Q4_K_M file: Q6_K
 * attn_v and ffn_down in some layers, Q4_K in the rest) is a buffer of its
 * widest type (the most bytes an element: the layer stride, so every
 * layer's blocks fit their slice) with each layer's own type listed
 * ("layer_dtypes" in engine.json); each layer's GEMM reads its slice's
 * first bytes in that layer's type. Not the op schedule (plan.c). */
#ifndef GEN_PLAN_GGUF_H
#define GEN_PLAN_GGUF_H

#include <stdio.h>

#include "plan.h"

/* A buffer dtype that is a GGUF block type ("q8_0", "q4_0", "q4_1", "q5_0", "q4_k",
 * "q6_k"): its elements a block and *bytes a block; 0 (and *bytes 0) for
 * other dtypes. */
int gen_plan_wtype_block(const char *dt, int *bytes);

/* gguf_a8: gives each target GEMM weight buffer whose layers differ in the
 * file (s->target.wmixed) its per-layer types. bufs: the buffer indices of
 * wq, wk, wv, wo, w_gate, w_up, w_down (GEN_WT_* order). */
void gen_plan_gguf_layers(gen_plan *p, const gen_spec *s, const int bufs[GEN_WT_LM_HEAD]);

/* W's bytes an element for a GEMM on buffer buf: its dtype's, or for a
 * buffer with per-layer types their mean (what a pass over the layers
 * reads); dt16 for a 16-bit buffer. */
double gen_plan_w_bytes(const gen_plan *p, int buf, int dt16);

/* engine.json: `, "layer_dtypes": [...]` for a buffer with per-layer types,
 * nothing for others. */
void gen_plan_write_ltypes(FILE *f, const gen_buf *b);

#endif
