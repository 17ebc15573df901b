/* Random weights for timing (engine.h rt_engine_bind_random): which engines
 * can take them, and the fill itself, ON THE DEVICE, one launch of the
 * engine's fill_random kernel (templates/fill_random.cu.tmpl) per weight
 * buffer, so even a Llama-3-8B-shaped engine's 16 GB never exist on the
 * host. Buffer i (engine.json's $.buffers order) is Philox stream i of the
 * seed; values are uniform in (c - a, c + a): norms c = 1, a = 1/16;
 * inv_freq the RoPE frequencies of the shape's theta (uploaded, 64-ish
 * floats; Gemma 3's per-layer rope_freq that table in every layer's row,
 * the global base's); every other weight (embeddings, GEMM matrices, a block
 * drafter's fc and mask embeddings) c = 0, a = 1/sqrt(its last dimension,
 * the GEMM's in_features), so activations stay O(1) through the layers.
 * Id maps (i32 d2t, t2d: an EAGLE-3 head's or a mapped block drafter's
 * draft vocabulary) are not drawn values but a valid, synthetic map,
 * uploaded from the host: d2t the first Vd ids of a seeded permutation of
 * the V target ids (Philox lane RT_RANDOM_MAP_LANE of the seed), t2d its
 * inverse, -1 elsewhere.
 * Not a model: the text such an engine writes means nothing. */
#ifndef RT_ENGINE_RANDOM_WEIGHTS_H
#define RT_ENGINE_RANDOM_WEIGHTS_H

#include <stdint.h>

#include "core/err.h"
#include "engine.h"

/* 0 when e can be filled: it carries the fill kernel and its weights are
 * fp16/bf16/f32 (SW_ENOTSUP naming a q8_0 dtype; SW_EINVAL saying to rebuild
 * an engine built before the kernel existed). Needs no device. */
int rt_engine_random_check(const rt_engine *e, sw_err *err);

/* The centre c and half-width a of buffer b's values (the rule above);
 * false for inv_freq and the id maps, which are computed, not drawn. */
bool rt_engine_random_range(const rt_engine_buf *b, float *a, float *c);

/* The Philox lane of the synthetic id maps (the prompt's is 0xffffffff). */
#define RT_RANDOM_MAP_LANE 0xfffffffeu

/* Whether b is an id map (an i32 weight buffer d2t or t2d). */
bool rt_engine_random_map(const rt_engine_buf *b);
/* Whether e has id maps (then --random-weights synthesises them). */
bool rt_engine_random_has_maps(const rt_engine *e);
/* The synthetic maps of wseed: d2t (Vd) distinct target ids, t2d (V) their
 * draft ids, -1 elsewhere. 0, or -1 for Vd < 1, V < Vd or no memory. */
int rt_engine_random_maps(uint64_t wseed, int Vd, int V, int32_t *d2t, int32_t *t2d);

/* Fills every weight buffer of a bound engine (arena allocated, kernels
 * loaded) from wseed and waits for the device. */
int rt_engine_random_fill(rt_engine *e, uint64_t wseed, sw_err *err);

#endif
